"""Compiles and runs the standalone C++ test of the double-array trie (tests/native/).

The C++ test checks the builder against a std::map oracle and the documented layout; it runs once
optimised (and builds any real tiktoken vocabularies it can find, printing timings) and once under
AddressSanitizer + UndefinedBehaviorSanitizer, which is what makes its hostile-view test mean
anything.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "native" / "double_array.cc", ROOT / "tests" / "native" / "test_double_array.cc"]
# Real vocabularies to build and time when present (a CI checkout may not have them).
VOCAB_DIRS = [Path(os.environ.get("CRAYON_VOCAB_DIR", "/work/shared/vocab/tiktoken"))]
VOCABS = ["o200k_base.tiktoken", "cl100k_base.tiktoken"]


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH; set CXX to run the native trie test")
    return cxx


def _compile(cxx: str, out: Path, extra: list[str]) -> subprocess.CompletedProcess[str]:
    cmd = [cxx, "-std=c++17", "-Wall", "-Wextra", "-I", str(ROOT / "native"), *extra,
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
    vocabs = [str(d / v) for d in VOCAB_DIRS for v in VOCABS if (d / v).is_file()]
    _run(exe, vocabs)


def test_double_array_native_sanitized(tmp_path: Path) -> None:
    cxx = _compiler()
    exe = tmp_path / "test_double_array_asan"
    built = _compile(cxx, exe, ["-O1", "-g", "-fsanitize=address,undefined",
                                "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"])
    if built.returncode != 0 and "sanitize" in built.stderr.lower():
        pytest.skip(f"{cxx} cannot build with -fsanitize=address,undefined here: {built.stderr[-300:]}")
    assert built.returncode == 0, built.stderr
    _run(exe, [])
