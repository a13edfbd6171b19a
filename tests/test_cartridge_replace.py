"""The documented policy for cartridges that change while mapped (docs/cartridge.md, "Files that
change while mapped"): replacing a cartridge by writing a temporary file and renaming it over the
old name never disturbs a process that loads, or has loaded, the old one. A child loads and encodes
in a loop while this process replaces the file (alternately with a valid image and a damaged one)
as fast as it can; every load must end in an engine or ValueError, never a signal."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from crayon_hf import _crayon
from support import child_python

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import sys, time
from crayon_hf import _crayon
path, seconds = sys.argv[1], float(sys.argv[2])
ok = refused = 0
engines = []
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        e = _crayon.TiktokenEngine.from_file(path)
        e.encode_ordinary("hello hello world")
        engines = (engines + [e])[-8:]  # keep some old mappings alive while the file is replaced
        for old in engines:
            old.encode_ordinary("hell")
        ok += 1
    except ValueError:
        refused += 1
print(ok, refused)
"""


def _image(extra: int) -> bytes:
    ranks = {bytes([b]): b for b in range(256)} | {b"he": 256, b"ll": 257, b"hell": 258 + extra}
    return _crayon.build_tiktoken_cartridge(ranks, {"<|endoftext|>": 259 + extra}, "r50k", "{}", "")


def test_atomic_replace_while_loading_never_crashes(tmp_path):
    path = tmp_path / "model.dat"
    images = [_image(0), _image(5)]
    damaged = bytearray(images[0])
    damaged[len(damaged) // 2] ^= 0xFF  # checksum mismatch: refused with ValueError
    images.append(bytes(damaged))
    path.write_bytes(images[0])
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path), "3"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, **child_python())
    i = 0
    while child.poll() is None:
        tmp = tmp_path / f"model.dat.tmp{i % 2}"
        tmp.write_bytes(images[i % len(images)])
        os.replace(tmp, path)
        i += 1
        time.sleep(0.001)
    out, err = child.communicate()
    if child.returncode < 0:
        raise AssertionError(f"the loader died with {signal.Signals(-child.returncode).name}:\n{err[-3000:]}")
    assert child.returncode == 0, err[-3000:]
    ok, refused = map(int, out.split())
    assert ok > 0 and i > 10, (ok, refused, i)
