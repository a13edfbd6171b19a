#!/usr/bin/env bash
# The GPU engine's check, as one command on a lent GPU machine (under 10 minutes on an H100):
# prints the GPU, builds crayon-hf with its CUDA module for that GPU, runs compute-sanitizer
# (memcheck) once over a small batch of each GPU path, then benchmarks/gpu_check.py: exactness
# against the CPU engine on >= 100 MB of short documents and an adversarial set for cl100k_base,
# o200k_base and Llama 3, and the GPU path's speed against the CPU engine on every core.
#
# usage: benchmarks/gpu_check.sh CORPORA_DIR [LLAMA3_RANK_FILE] [OUT_DIR] [HF_FOLDER ...]
#   CORPORA_DIR  the shared corpora (../shared/corpora), LLAMA3_RANK_FILE llama3.tiktoken,
#   OUT_DIR      where gpu.md, gpu.json and sanitizer.log go (default benchmarks/results),
#   HF_FOLDER    tokenizer.json folders (byte-level BPE) for the tokenizers face's check
# GPU_CHECK_ARGS (environment): more arguments for gpu_check.py, e.g. "--repeat 2"
set -euo pipefail
cd "$(dirname "$0")/.."
corpora=${1:?usage: benchmarks/gpu_check.sh CORPORA_DIR [LLAMA3_RANK_FILE] [OUT_DIR]}
llama3=${2:-}
out=${3:-benchmarks/results}
shift $(( $# < 3 ? $# : 3 ))
mkdir -p "$out"
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
site=$(mktemp -d)/site
start=$(date +%s)
CMAKE_ARGS="-DCRAYON_CUDA=ON -DCRAYON_CUDA_ARCHITECTURES=${arch}-real" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  python3 -m pip install -q --no-build-isolation --no-deps --target "$site" .
echo "== built for sm_${arch} in $(( $(date +%s) - start )) s"
export PYTHONPATH=$site

if command -v compute-sanitizer >/dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 9 python3 - <<'PY' > "$out/sanitizer.log" 2>&1 || echo "== compute-sanitizer FAILED (see $out/sanitizer.log)"
import numpy as np
import crayon_hf.cuda as cuda
import crayon_hf.tiktoken as tiktoken
enc = tiktoken.get_encoding("cl100k_base")
docs = ["hello world", "", "a" * 3000, "中文" * 700, "<|endoftext|> x", " " * 2000 + "y"] + [f"doc {i} " * 40 for i in range(300)]
for device_out in (False, True):
    cpu = enc.encode_batch_to_numpy(docs, allowed_special="all")
    if device_out:
        ids, off = cuda.encode_batch_to_device(enc, docs, allowed_special="all")
        gpu = (ids.numpy(), off.numpy())
    else:
        gpu = enc.encode_batch_to_numpy(docs, allowed_special="all", device="cuda")
    assert np.array_equal(cpu[0], gpu[0]) and np.array_equal(cpu[1], gpu[1])
print("sanitized batch identical")
PY
  grep -E "ERROR SUMMARY|identical" "$out/sanitizer.log" || true
fi

python3 benchmarks/gpu_check.py --corpora "$corpora" ${llama3:+--llama3 "$llama3"} --out "$out" \
  --sanitizer-log "$out/sanitizer.log" ${GPU_CHECK_ARGS:-} ${1:+--hf "$@"}
