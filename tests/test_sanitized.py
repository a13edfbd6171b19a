"""The sanitized CI step: the fuzz targets (fuzz/) and the whole engine (every native/*.cc except
the pybind bindings) compiled with AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer),
then fed the synthetic seed cartridges, the regression corpora under fuzz/regressions/ and a short
seeded mutation run. Each input is loaded, run through both engines and released, so the leak
checker at exit covers repeated load/unload.

The compile starts at import (objects built two at a time, cached in a temporary directory), so it
overlaps the other tests of the session; the fixture waits for it.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ROOT / "fuzz"
TARGETS = ("fuzz_cartridge", "fuzz_encode_text")
FLAGS = ["-std=c++17", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=undefined", "-I", str(ROOT / "native"), "-I", str(FUZZ)]
SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:allocator_may_return_null=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}


def _compiler() -> list[str] | None:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    return shlex.split(cxx) if cxx else None


def _build_script(out: Path, cxx: list[str]) -> str:
    """A shell script that compiles the objects two at a time and links one driver per target."""
    sources = sorted(p for p in (ROOT / "native").glob("*.cc") if not p.name.startswith("bindings"))
    flags = " ".join(map(shlex.quote, FLAGS))
    cc = " ".join(map(shlex.quote, cxx))
    lines = ["set -e", f"cd {shlex.quote(str(out))}"]
    compile_cmds = [f"{cc} {flags} -c {shlex.quote(str(s))} -o {s.stem}.o" for s in sources]
    compile_cmds += [f"{cc} {flags} -c {shlex.quote(str(FUZZ / (t + '.cc')))} -o t_{t}.o" for t in TARGETS]
    compile_cmds.append(f"{cc} {flags} -c {shlex.quote(str(FUZZ / 'standalone_main.cc'))} -o t_main.o")
    (out / "cmds").write_text("\n".join(compile_cmds) + "\n")
    lines.append("xargs -P2 -d '\\n' -I{} sh -c '{}' < cmds")
    objs = " ".join(f"{s.stem}.o" for s in sources)
    for t in TARGETS:
        lines.append(f"{cc} {flags} {objs} t_{t}.o t_main.o -o {t} -lpthread")
    return "\n".join(lines) + "\n"


_OUT = Path(tempfile.mkdtemp(prefix="crayon-sanitized-"))
_CXX = _compiler()
_BUILD = None
if _CXX is not None:
    (_OUT / "build.sh").write_text(_build_script(_OUT, _CXX))
    _BUILD = subprocess.Popen(["nice", "-n", "5", "bash", str(_OUT / "build.sh")], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def drivers() -> dict[str, Path]:
    if _BUILD is None:
        if os.environ.get("CRAYON_REQUIRE_SHARED") == "1":
            pytest.fail("no C++ compiler (g++, c++ or clang++) for the sanitized build")
        pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH; set CXX to run the sanitized build")
    log, _ = _BUILD.communicate(timeout=900)
    if _BUILD.returncode != 0:
        probe = _OUT / "probe.cc"
        probe.write_text("int main() { return 0; }\n")
        ok = subprocess.run([*_CXX, "-fsanitize=address,undefined", str(probe), "-o", str(_OUT / "probe")],
                            capture_output=True, timeout=120).returncode == 0
        if not ok and os.environ.get("CRAYON_REQUIRE_SHARED") != "1":
            pytest.skip("the compiler cannot build with -fsanitize=address,undefined (no sanitizer runtime?)")
        pytest.fail(f"sanitized build failed:\n{log[-6000:]}")
    return {t: _OUT / t for t in TARGETS}


def _run(exe: Path, *args: str, timeout: float = 120) -> str:
    env = {**os.environ, **SAN_ENV}
    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, f"{exe.name} {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def seeds(drivers) -> Path:
    d = _OUT / "seeds"
    _run(drivers["fuzz_cartridge"], "--seeds", str(d))
    return d


def test_seed_and_regression_corpora(drivers, seeds):
    """Every seed and every kept crasher, once, under ASan/UBSan/LSan."""
    for t in TARGETS:
        inputs = [str(seeds)]
        reg = FUZZ / "regressions" / t
        if reg.is_dir():
            inputs.append(str(reg))
        out = _run(drivers[t], *inputs)
        assert "replayed" in out


def test_seeded_mutation_run(drivers, seeds):
    """A few seconds of the built-in mutator per target (fixed seed, so a failure reproduces)."""
    crashes = _OUT / "crashes"
    crashes.mkdir(exist_ok=True)
    for t in TARGETS:
        out = _run(drivers[t], "--mutate", "100000", "--seed", "7", "--seconds", "4", "--crashes", str(crashes),
                   str(seeds))
        assert "ran" in out
