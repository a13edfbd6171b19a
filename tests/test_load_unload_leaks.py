"""Repeated load/unload of cartridges through both faces must not grow the process: a child loads
and drops a tiktoken engine (from a compiled cartridge file) and a `Tokenizer` (gpt2's
tokenizer.json, compiled once into the cache) two hundred times and reports its RSS after a
warm-up and at the end. The native side is also checked by LeakSanitizer in tests/test_sanitized.py.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import VOCAB, child_python, require_shared

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import gc, json, sys
from crayon_hf import Tokenizer, _crayon

def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

tok_json, cart = sys.argv[1], sys.argv[2]
image = _crayon.build_tiktoken_cartridge({bytes([b]): b for b in range(256)} | {b"he": 256, b"ll": 257, b"hell": 258},
                                         {"<|endoftext|>": 259}, "r50k", "{}", "")
with open(cart, "wb") as f:
    f.write(image)

def cycle():
    e = _crayon.TiktokenEngine.from_file(cart)
    assert e.encode_ordinary("hello hello") == e.encode_ordinary("hello hello")
    t = Tokenizer.from_file(tok_json)
    t.encode("hello world").ids
    del e, t
    gc.collect()

for _ in range(50):
    cycle()
before = rss_kib()
for _ in range(150):
    cycle()
print(json.dumps({"before_kib": before, "after_kib": rss_kib()}))
"""


def test_repeated_load_unload_does_not_grow_rss(tmp_path):
    tok_json = require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tok_json), str(tmp_path / "tiny.dat")],
                          capture_output=True, text=True, timeout=300, **child_python())
    assert proc.returncode == 0, proc.stderr[-3000:]
    rss = json.loads(proc.stdout.strip().splitlines()[-1])
    growth_mib = (rss["after_kib"] - rss["before_kib"]) / 1024
    # 150 cycles: a leak of one 50 KB structure per load would show as ~7 MiB; measured growth is 0.
    assert growth_mib < 4, f"RSS grew {growth_mib:.1f} MiB over 150 load/unload cycles: {rss}"
