"""Compiles and runs the standalone C++ test of parallel_for's worker pool (tests/native/test_parallel.cc).

Once optimised (forked children included), and once under ThreadSanitizer without the fork cases
(ThreadSanitizer does not support starting threads after a multi-threaded fork); skipped there when
the compiler has no TSan runtime.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "native" / "parallel.cc", ROOT / "tests" / "native" / "test_parallel.cc"]

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the test forks and uses POSIX calls")


def _compiler() -> list[str]:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH; set CXX to run the native pool test")
    return shlex.split(cxx)


def _compile(cxx: list[str], out: Path, extra: list[str]) -> subprocess.CompletedProcess[str]:
    cmd = [*cxx, "-std=c++17", "-Wall", "-Wextra", "-pthread", "-I", str(ROOT / "native"), *extra,
           *map(str, SOURCES), "-o", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _run(exe: Path, args: list[str]) -> None:
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
    print(proc.stdout)
    assert proc.returncode == 0, f"{exe.name} exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"


def test_parallel_pool_native_optimised(tmp_path: Path) -> None:
    cxx = _compiler()
    exe = tmp_path / "test_parallel"
    built = _compile(cxx, exe, ["-O2"])
    assert built.returncode == 0, built.stderr
    _run(exe, [])


def test_parallel_pool_native_thread_sanitizer(tmp_path: Path) -> None:
    cxx = _compiler()
    exe = tmp_path / "test_parallel_tsan"
    flags = ["-fsanitize=thread"]
    built = _compile(cxx, exe, ["-O1", "-g", *flags])
    if built.returncode != 0:
        probe = tmp_path / "probe.cc"
        probe.write_text("int main() { return 0; }\n")
        if subprocess.run([*cxx, *flags, str(probe), "-o", str(tmp_path / "probe")],
                          capture_output=True, timeout=60).returncode != 0:
            pytest.skip(f"{' '.join(cxx)} cannot build with {flags[0]} here (no sanitizer runtime?)")
    assert built.returncode == 0, built.stderr
    env = {**os.environ, "TSAN_OPTIONS": "halt_on_error=1 exitcode=66"}
    proc = subprocess.run([str(exe), "--no-fork"], capture_output=True, text=True, timeout=300, env=env)
    print(proc.stdout)
    if proc.returncode != 0 and "FATAL: ThreadSanitizer: unexpected memory mapping" in proc.stderr:
        pytest.skip("ThreadSanitizer cannot run under this kernel's address-space layout")
    assert proc.returncode == 0, f"exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
