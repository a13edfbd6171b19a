"""Tokenize a corpus with Ray Data (`pip install "ray[data]"`) and crayon-hf.

    python examples/ray_data.py INPUT.jsonl OUTPUT_DIR [TOKENIZER]

Each Ray worker receives the tokenizer pickled as a reference to its cartridge, so it maps the
same file instead of copying the vocabulary; `map_batches` hands it numpy batches of text and gets
back numpy arrays of token ids (one per document). The batch function is plain Python: the same
`tokenize_batch` works with Spark's `mapInPandas` or any other engine that ships functions to
workers by pickling.
"""

from __future__ import annotations

import sys

import numpy as np

import crayon_hf


class TokenizeBatch:
    """A batch function over {"text": array of str} -> {"input_ids": array of uint32 arrays}.
    Pickles with its tokenizer (a reference to the cartridge), as Ray ships it to workers."""

    def __init__(self, tok) -> None:
        self.tok = tok

    def __call__(self, batch: dict) -> dict:
        texts = [str(t) for t in batch["text"]]
        # Every face has encode_batch_to_numpy: flat ids first, document offsets last.
        ids, *_, doc_offsets = self.tok.encode_batch_to_numpy(texts)
        out = np.empty(len(texts), dtype=object)
        out[:] = [ids[a:b] for a, b in zip(doc_offsets[:-1], doc_offsets[1:])]
        return {"input_ids": out}


def main() -> None:
    import ray

    src, dst = sys.argv[1], sys.argv[2]
    tok = crayon_hf.load(sys.argv[3] if len(sys.argv) > 3 else "cl100k_base")
    ray.init()
    ds = ray.data.read_json(src)
    ds = ds.map_batches(TokenizeBatch(tok), batch_format="numpy", batch_size=1024)
    ds.write_parquet(dst)
    print(f"wrote token ids of {ds.count()} documents to {dst}")


if __name__ == "__main__":
    main()
