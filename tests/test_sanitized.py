"""The cartridge fuzz target under AddressSanitizer + UndefinedBehaviorSanitizer + LeakSanitizer.

The engine (every native/*/*.cc but the Python bindings in native/python/) and the fuzz targets (fuzz_cartridge.cc,
and fuzz_encode_text.cc for text) are compiled with -fsanitize=address,undefined and
fuzz/fuzz_main.cc's driver, which replays the seed
cartridges (fuzz/make_seeds.py: one per engine and model), every file in fuzz/regressions/
(inputs that once crashed), then a few seconds of seeded mutations. Every input is loaded and
used as the Python faces do; a file may be refused with an exception, but any memory error,
undefined behaviour or leak aborts the driver and fails this test with the sanitizer's report.
Loading and unloading hundreds of cartridges in one process is what makes LeakSanitizer's check
on exit meaningful.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support import child_python

ROOT = Path(__file__).resolve().parents[1]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"]
# Unoptimized, with line tables only: the engine's 30-odd files compile in a third of the time
# -O1 -g took (the build was most of this file's three minutes on 2 cores), the sanitizers catch
# the same errors (more, if anything: nothing is optimized away), reports still name file and line,
# and the few thousand inputs the tests replay run in seconds either way.
OPTIMIZE = ["-O0", "-g1"]


def _compiler() -> str:
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        if os.environ.get("CRAYON_REQUIRE_SHARED") == "1":
            pytest.fail(f"{cxx} not found: the sanitized fuzz run needs a C++17 compiler")
        pytest.skip(f"{cxx} not found")
    return cxx


@pytest.fixture(scope="module")
def drivers(tmp_path_factory) -> dict[str, Path]:
    """The two fuzz targets, each linked with the engine's objects and fuzz_main.cc's driver."""
    cxx = _compiler()
    d = tmp_path_factory.mktemp("fuzz_asan")
    engine = [s for s in sorted((ROOT / "native").rglob("*.cc")) if s.parent.name != "python"]
    targets = {"cartridge": ROOT / "fuzz" / "fuzz_cartridge.cc", "encode_text": ROOT / "fuzz" / "fuzz_encode_text.cc"}

    def compile_one(src: Path) -> Path:
        obj = d / (src.stem + ".o")
        cmd = [cxx, "-std=c++17", *OPTIMIZE, *SANITIZE, f"-I{ROOT / 'native'}", "-c", str(src), "-o", str(obj)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.fail(f"compiling {src.name} failed:\n{proc.stderr[-4000:]}")
        return obj

    sources = engine + [ROOT / "fuzz" / "fuzz_main.cc", *targets.values()]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        objects = dict(zip(sources, pool.map(compile_one, sources)))
    common = [str(objects[s]) for s in engine] + [str(objects[ROOT / "fuzz" / "fuzz_main.cc"])]
    exes = {}
    for name, src in targets.items():
        exe = d / f"fuzz_{name}"
        proc = subprocess.run([cxx, *SANITIZE, *common, str(objects[src]), "-o", str(exe), "-lpthread"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.fail(f"linking fuzz_{name} failed:\n{proc.stderr[-4000:]}")
        exes[name] = exe
    return exes


@pytest.fixture(scope="module")
def driver(drivers) -> Path:
    return drivers["cartridge"]


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fuzz_seeds")
    subprocess.run([sys.executable, str(ROOT / "fuzz" / "make_seeds.py"), str(out)], check=True, capture_output=True)
    assert len(list(out.glob("*.dat"))) == 6
    return out


def _run(driver: Path, *args: str, cwd: Path) -> None:
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:halt_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    proc = subprocess.run([str(driver), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert proc.returncode == 0, f"sanitizer report (input kept at {cwd}):\n{proc.stderr[-6000:]}"
    assert "no crash" in proc.stderr


def test_seeds_and_regressions_are_clean(driver, seeds, tmp_path):
    regressions = ROOT / "fuzz" / "regressions"
    assert any(regressions.rglob("*.dat")), "fuzz/regressions holds the inputs that once crashed"
    _run(driver, str(seeds), str(regressions), cwd=tmp_path)


def test_short_mutation_run_is_clean(driver, seeds, tmp_path):
    _run(driver, "-runs=1500", "-seed=20261121", f"-artifact={tmp_path / 'crash-candidate'}", str(seeds), cwd=tmp_path)


def test_text_target_is_clean(drivers, tmp_path):
    """Arbitrary bytes as text through real engines (fuzz/fuzz_encode_text.cc): the committed seed
    corpus (fuzz/seeds/encode_text: many scripts, invalid UTF-8, NULs, long runs), then mutations."""
    seeds = ROOT / "fuzz" / "seeds" / "encode_text"
    assert len(list(seeds.iterdir())) >= 10, "fuzz/seeds/encode_text is the text target's seed corpus"
    _run(drivers["encode_text"], "-runs=300", "-seed=7", f"-artifact={tmp_path / 'crash-candidate'}", str(seeds),
         str(ROOT / "fuzz" / "regressions" / "encode_text"), cwd=tmp_path)


def test_regressions_refused_by_the_python_faces():
    """Each regression input, through the Python API, in a child process (a crash would be a
    signal): a ValueError naming the problem, or a tokenizer that works."""
    code = r"""
import sys
import crayon_hf, crayon_hf.tiktoken as tk
path = sys.argv[1]
outcomes = []
for load in (tk.Encoding.from_cartridge, crayon_hf.Tokenizer.from_cartridge):
    try:
        tok = load(path)
    except ValueError as e:
        outcomes.append("refused: " + str(e)[:200])
        continue
    try:
        tok.encode("hello world 中文 <|endoftext|>")
        outcomes.append("loaded")
    except ValueError as e:
        outcomes.append("refused on use: " + str(e)[:200])
print(outcomes)
"""
    for path in sorted((ROOT / "fuzz" / "regressions" / "cartridge").glob("*.dat")):
        proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                              **child_python())
        assert proc.returncode == 0, f"{path.name}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
