"""Compiles and runs the standalone C++ test of parallel_for's worker pool (tests/native/test_parallel.cc).

Once optimised (forked children included), and once under ThreadSanitizer without the fork cases
(ThreadSanitizer does not support starting threads after a multi-threaded fork); skipped there when
the compiler has no TSan runtime.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support import compile_cxx, cxx_compiler, run_native

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "native" / "core" / "parallel.cc", ROOT / "tests" / "native" / "test_parallel.cc"]

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the test forks and uses POSIX calls")


def test_parallel_pool_native_optimised(tmp_path: Path) -> None:
    cxx = cxx_compiler("the native pool test")
    exe = tmp_path / "test_parallel"
    built = compile_cxx(cxx, SOURCES, exe, ["-pthread", "-O2"])
    assert built.returncode == 0, built.stderr
    run_native(exe, [])


def test_parallel_pool_native_thread_sanitizer(tmp_path: Path) -> None:
    cxx = cxx_compiler("the native pool test")
    exe = tmp_path / "test_parallel_tsan"
    flags = ["-fsanitize=thread"]
    built = compile_cxx(cxx, SOURCES, exe, ["-pthread", "-O1", "-g1", *flags])
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
