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

BUNDLED = ("r50k_base", "cl100k_base", "o200k_base")


def swap(paths: list[str]) -> None:
    for _ in range(3):
        for path in paths:
            start = time.perf_counter()
            enc = tiktoken.Encoding.from_cartridge(path)
            loaded = time.perf_counter() - start
            ids = enc.encode("Tokenization should never be the bottleneck.")
            print(f"{Path(path).name:>20}: mapped in {loaded * 1e3:.3f} ms, {len(ids)} tokens")


if sys.argv[1:]:
    swap(sys.argv[1:])
else:
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:  # removed at the end
        folder = Path(tmp)
        for name in BUNDLED:
            tiktoken.get_encoding(name).save_cartridge(folder / f"{name}.dat")  # compile once
        swap([str(folder / f"{name}.dat") for name in BUNDLED])
