"""The backtracking BPE encoder against the rank-heap reference, in C++.

Compiles tests/native/test_bpe_backtrack.cc with the engine sources it needs and runs it on the
shared tiktoken rank files and corpora (../shared relative to the repository root). The program
checks the split tables against their definition, the pair replay against re-encoding, and
bpe_encode_backtrack == bpe_encode_heap on corpus pieces and slices, random bytes and UTF-8,
100 KB runs and every token's bytes; see the header of that file.

The default run uses --quick (a sample) in an optimised build and in an address/UB-sanitizer
build; the `full` marker runs the whole corpus.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SOURCES = [
    "native/core/double_array.cc",
    "native/models/bpe.cc",
    "native/models/bpe_backtrack.cc",
    "tests/native/test_bpe_backtrack.cc",
]


def _compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no C++ compiler (g++ or $CXX) to build the native BPE test")
    return cxx


def _shared() -> Path:
    if not (SHARED / "vocab" / "tiktoken").is_dir():
        if os.environ.get("CRAYON_REQUIRE_SHARED") == "1":
            pytest.fail(f"{SHARED / 'vocab' / 'tiktoken'} is missing and CRAYON_REQUIRE_SHARED=1")
        pytest.skip(f"{SHARED / 'vocab' / 'tiktoken'} is missing (the shared rank files and corpora)")
    return SHARED


def _build(tmp_path: Path, flags: list[str]) -> Path:
    exe = tmp_path / "test_bpe_backtrack"
    cmd = [_compiler(), "-std=c++17", *flags, "-I", str(ROOT / "native"), *(str(ROOT / s) for s in SOURCES), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"compile failed: {' '.join(cmd)}\n{r.stderr[-4000:]}"
    return exe


def _run(exe: Path, *args: str, timeout: int) -> None:
    r = subprocess.run([str(exe), *args, str(_shared())], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"backtrack != heap (exit {r.returncode}):\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}"
    assert "ALL OK" in r.stdout


def test_backtrack_matches_heap_quick(tmp_path: Path) -> None:
    _shared()
    _run(_build(tmp_path, ["-O2"]), "--quick", timeout=120)


def test_backtrack_matches_heap_sanitized(tmp_path: Path) -> None:
    _shared()
    flags = ["-O1", "-g1", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
    probe = subprocess.run(
        [_compiler(), *flags, "-x", "c++", "-", "-o", str(tmp_path / "probe")],
        input="int main() { return 0; }\n",
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip("the compiler cannot build with -fsanitize=address,undefined here")
    _run(_build(tmp_path, flags), "--quick", "--tiny", timeout=240)


@pytest.mark.full
def test_backtrack_matches_heap_full(tmp_path: Path) -> None:
    _shared()
    _run(_build(tmp_path, ["-O2"]), timeout=1800)
