#!/usr/bin/env python3
"""Swap vocabularies at will: compile each once to a cartridge, then map any of them in well under
a millisecond (loading reads the header and section table only; the one-time checks run on the
first encode).

    python examples/swap_cartridges.py                      # the bundled OpenAI encodings
    python examples/swap_cartridges.py a.dat b.dat ...      # your own cartridges (crayon convert)
"""

import sys
import tempfile
import time
from pathlib import Path

import crayon_hf.tiktoken as tiktoken

paths = sys.argv[1:]
if not paths:
    folder = Path(tempfile.mkdtemp())
    for name in ("r50k_base", "cl100k_base", "o200k_base"):
        tiktoken.get_encoding(name).save_cartridge(folder / f"{name}.dat")  # compile once
        paths.append(str(folder / f"{name}.dat"))

for _ in range(3):
    for path in paths:
        start = time.perf_counter()
        enc = tiktoken.Encoding.from_cartridge(path)
        loaded = time.perf_counter() - start
        ids = enc.encode("Tokenization should never be the bottleneck.")
        print(f"{Path(path).name:>20}: mapped in {loaded * 1e3:.3f} ms, {len(ids)} tokens")
