"""Compile a vocabulary to a cartridge once, then map it in well under a millisecond.

    python examples/cartridge_roundtrip.py [RANK_FILE]

Without an argument it uses the bundled o200k_base encoding.
"""

import os
import sys
import tempfile
import time

import crayon_hf.tiktoken as tiktoken
from crayon_hf.conversion import convert_rank_file

with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as folder:  # removed at the end
    out = os.path.join(folder, "model.dat")
    if len(sys.argv) > 1:
        # A rank file crayon-hf recognises by hash needs no pattern; pass pattern="cl100k_base" or a
        # regex for others (the `crayon convert` command does the same from the shell).
        with open(out, "wb") as f:
            f.write(convert_rank_file(sys.argv[1]))
    else:
        tiktoken.get_encoding("o200k_base").save_cartridge(out)

    start = time.perf_counter()
    enc = tiktoken.Encoding.from_cartridge(out)
    print(f"mapped {out} ({os.path.getsize(out) / 1e6:.1f} MB) in {(time.perf_counter() - start) * 1e3:.2f} ms")
    print(enc.name, enc.n_vocab, enc.encode("mapped, not parsed"))
    del enc  # unmapped before its folder goes
