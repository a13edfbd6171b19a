#!/usr/bin/env bash
# Builds benchmarks/native/engine_bench.cc against the engine sources (-O2 -g, for perf).
# usage: benchmarks/native/build.sh [OUT]   (default /tmp/engine_bench)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-/tmp/engine_bench}"
${CXX:-g++} -O2 -g -std=c++17 -Inative ${CXXFLAGS:-} benchmarks/native/engine_bench.cc \
    $(ls native/*/*.cc | grep -v native/python/) -lpthread -o "$out"
echo "$out"
