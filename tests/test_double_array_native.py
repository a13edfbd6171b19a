"""Compiles and runs the standalone C++ test of the double-array trie (tests/native/).

The C++ test checks the builder against a std::map oracle and the documented layout; it runs once
optimised and once under AddressSanitizer + UndefinedBehaviorSanitizer (which is what makes its
hostile-view test mean anything). Both runs also build and check the real o200k/cl100k vocabularies
from ../shared/vocab/tiktoken (required when CRAYON_REQUIRE_SHARED=1); the optimised run's
build timings are printed (pytest -s), never asserted.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "native" / "double_array.cc", ROOT / "tests" / "native" / "test_double_array.cc"]
# Real vocabularies to build and time when present (a CI checkout may not have them).
VOCABS = ["o200k_base.tiktoken", "cl100k_base.tiktoken"]


def _vocabs() -> list[str]:
    from support import VOCAB, require_shared

    return [str(require_shared(VOCAB / "tiktoken" / v)) for v in VOCABS]


def _compiler() -> list[str]:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH; set CXX to run the native trie test")
    return shlex.split(cxx)


def _compile(cxx: list[str], out: Path, extra: list[str]) -> subprocess.CompletedProcess[str]:
    cmd = [*cxx, "-std=c++17", "-Wall", "-Wextra", "-I", str(ROOT / "native"), *extra,
           *map(str, SOURCES), "-o", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _run(exe: Path, args: list[str]) -> None:
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
    print(proc.stdout)
    assert proc.returncode == 0, f"{exe.name} exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"


def test_double_array_native_optimised(tmp_path: Path) -> None:
    cxx = _compiler()
    exe = tmp_path / "test_double_array"
    built = _compile(cxx, exe, ["-O2"])
    assert built.returncode == 0, built.stderr
    _run(exe, _vocabs())


def test_double_array_native_sanitized(tmp_path: Path) -> None:
    cxx = _compiler()
    exe = tmp_path / "test_double_array_asan"
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
    built = _compile(cxx, exe, ["-O1", "-g", "-fno-omit-frame-pointer", *flags])
    if built.returncode != 0:
        probe = tmp_path / "probe.cc"
        probe.write_text("int main() { return 0; }\n")
        if subprocess.run([*cxx, *flags, str(probe), "-o", str(tmp_path / "probe")],
                          capture_output=True, timeout=60).returncode != 0:
            pytest.skip(f"{' '.join(cxx)} cannot build with {flags[0]} here (no sanitizer runtime?)")
    assert built.returncode == 0, built.stderr
    _run(exe, _vocabs())
