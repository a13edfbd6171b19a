"""Compiles and runs the standalone C++ test of the double-array trie (tests/native/).

The C++ test checks the builder against a std::map oracle and the documented layout; it runs once
optimised and once under AddressSanitizer + UndefinedBehaviorSanitizer (which is what makes its
hostile-view test mean anything). Both runs also build and check the real o200k/cl100k vocabularies
from ../shared/vocab/tiktoken (required when CRAYON_REQUIRE_SHARED=1); the optimised run's
build timings are printed (pytest -s), never asserted.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support import compile_cxx, cxx_compiler, run_native

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "native" / "core" / "double_array.cc", ROOT / "tests" / "native" / "test_double_array.cc"]
# Real vocabularies to build and time when present (a CI checkout may not have them).
VOCABS = ["o200k_base.tiktoken", "cl100k_base.tiktoken"]


def _vocabs() -> list[str]:
    from support import VOCAB, require_shared

    return [str(require_shared(VOCAB / "tiktoken" / v)) for v in VOCABS]


def test_double_array_native_optimised(tmp_path: Path) -> None:
    cxx = cxx_compiler("the native trie test")
    exe = tmp_path / "test_double_array"
    built = compile_cxx(cxx, SOURCES, exe, ["-O2"])
    assert built.returncode == 0, built.stderr
    run_native(exe, _vocabs())


def test_double_array_native_sanitized(tmp_path: Path) -> None:
    cxx = cxx_compiler("the native trie test")
    exe = tmp_path / "test_double_array_asan"
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
    built = compile_cxx(cxx, SOURCES, exe, ["-O1", "-g1", "-fno-omit-frame-pointer", *flags])
    if built.returncode != 0:
        probe = tmp_path / "probe.cc"
        probe.write_text("int main() { return 0; }\n")
        if subprocess.run([*cxx, *flags, str(probe), "-o", str(tmp_path / "probe")],
                          capture_output=True, timeout=60).returncode != 0:
            pytest.skip(f"{' '.join(cxx)} cannot build with {flags[0]} here (no sanitizer runtime?)")
    assert built.returncode == 0, built.stderr
    run_native(exe, _vocabs())
