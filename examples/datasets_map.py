"""Tokenize a Hugging Face `datasets.Dataset` on several processes with crayon-hf.

    python examples/datasets_map.py [TOKENIZER] [NUM_PROC]

TOKENIZER is a bundled encoding (default cl100k_base), a tokenizer.json, or an HF folder. The
tokenizer is pickled into the worker processes as a reference to its cartridge: each worker maps
the same file (shared pages, no copy of the vocabulary) instead of rebuilding it.
"""

import sys

import datasets

import crayon_hf

spec = sys.argv[1] if len(sys.argv) > 1 else "cl100k_base"
num_proc = int(sys.argv[2]) if len(sys.argv) > 2 else 2
tok = crayon_hf.load(spec)  # a tiktoken Encoding or a crayon_hf.Tokenizer, by what SPEC names


def tokenize(batch):
    # Every face has encode_batch_to_numpy: flat ids first, document offsets last.
    ids, *_, doc_offsets = tok.encode_batch_to_numpy(batch["text"])
    return {"input_ids": [ids[a:b] for a, b in zip(doc_offsets[:-1], doc_offsets[1:])]}


texts = [f"Document {i}: tokenization should never be the bottleneck. 文档 {i} 🚀" for i in range(2000)]
ds = datasets.Dataset.from_dict({"text": texts})
out = ds.map(tokenize, batched=True, batch_size=256, num_proc=num_proc, remove_columns=["text"])
print(f"{len(out)} documents, {sum(map(len, out['input_ids'])):,} tokens on {num_proc} processes")
print(out[0]["input_ids"][:12])
