"""Encode a text file into a flat numpy array of token ids, one document per line, in parallel.

    python examples/encode_corpus_to_numpy.py INPUT.txt OUT.npy [ENCODING]

Writes OUT.npy (uint32 ids), OUT.npy.idx.npy (where each line's ids start) and OUT.npy.json. For
whole files, JSONL or Parquet, and GB-sized inputs, see `crayon encode-corpus` (docs/corpus.md).
"""

import sys

import numpy as np

import crayon_hf.tiktoken as tiktoken
from crayon_hf.corpus import encode_corpus

src, dst = sys.argv[1], sys.argv[2]
enc = tiktoken.get_encoding(sys.argv[3] if len(sys.argv) > 3 else "o200k_base")

with open(src, encoding="utf-8") as f:
    lines = f.read().splitlines(keepends=True)
# An input may be an iterable of documents: each line is encoded on its own, in batches on native threads.
summary = encode_corpus([lines], dst, enc, format="npy", progress=False)

ids = np.load(dst, mmap_mode="r")                    # memory-mapped, nothing read yet
starts = np.load(dst + ".idx.npy")                   # n_docs + 1 offsets
print(f"{summary['n_docs']} lines -> {len(ids):,} tokens -> {dst}; line 0 is ids[{starts[0]}:{starts[1]}]")
