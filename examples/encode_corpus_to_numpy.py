"""Encode a text file into a flat numpy array of token ids, in parallel.

    python examples/encode_corpus_to_numpy.py INPUT.txt OUT.npy [ENCODING]
"""

import sys

import numpy as np

import crayon_hf.tiktoken as tiktoken

src, dst = sys.argv[1], sys.argv[2]
enc = tiktoken.get_encoding(sys.argv[3] if len(sys.argv) > 3 else "o200k_base")

with open(src, encoding="utf-8") as f:
    lines = f.read().splitlines(keepends=True)
# Each line is encoded on its own (as a document), on native threads.
ids = enc.encode_ordinary_batch(lines, num_threads=8)
flat = np.fromiter((i for doc in ids for i in doc), dtype=np.uint32)
np.save(dst, flat)
print(f"{len(lines)} lines -> {len(flat):,} tokens -> {dst}")
