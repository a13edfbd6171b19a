"""Every file kept under fuzz/regressions/<target>/ (inputs that once crashed, hung or tripped a
sanitizer in the fuzz targets) loaded through the Python API in a child process: a cartridge must
either load and encode/decode or raise ValueError; a text input must encode. A signal in the child
is reported by name, so a native crash is a test failure instead of a dead interpreter."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = ROOT / "fuzz" / "regressions"

CHILD = r"""
import sys
from crayon_hf import _crayon
path = sys.argv[1]
outcomes = []
try:
    e = _crayon.TiktokenEngine.from_file(path)
    for t in ("hello world", "  12345 don't\n\n", "h\u00e9llo \u4e16\u754c \U0001F600"):
        e.decode_bytes(e.encode_ordinary(t)) if hasattr(e, "decode_bytes") else e.encode_ordinary(t)
    outcomes.append("tiktoken: loaded")
except ValueError as exc:
    outcomes.append(f"tiktoken: ValueError: {exc}")
try:
    h = _crayon.HfEngine(path, [], [{"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}], [], [])
    outcomes.append("hf: loaded")
except ValueError as exc:
    outcomes.append(f"hf: ValueError: {exc}")
print("\n".join(outcomes))
"""


def _files(target: str) -> list[Path]:
    d = REGRESSIONS / target
    return sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith(".")) if d.is_dir() else []


def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name if rc < 0 else f"exit status {rc}"
    except ValueError:
        return f"signal {-rc}"


@pytest.mark.parametrize("path", _files("fuzz_cartridge"), ids=lambda p: p.name)
def test_cartridge_regression_is_refused_or_loads(path: Path):
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)
    assert proc.returncode == 0, f"{path.name}: child died with {_signal_name(proc.returncode)}:\n{proc.stderr[-3000:]}"
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all(l.endswith("loaded") or "ValueError: " in l for l in lines), proc.stdout


def test_regression_directories_exist():
    """The corpora the sanitized step replays (tests/test_sanitized.py) are where fuzz/README.md says."""
    for target in ("fuzz_cartridge", "fuzz_encode_text"):
        assert (REGRESSIONS / target).is_dir()
