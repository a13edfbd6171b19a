"""Tokenize a corpus with Ray Data (`pip install "crayon-hf[ray]"`) and crayon-hf's public API.

    python examples/ray_data.py INPUT.jsonl OUTPUT_DIR [TOKENIZER]

`crayon_hf.TokenizeBatch` is a picklable batch function: `map_batches` ships it to every worker,
where it loads the tokenizer once (a bundled name or a path; a loaded tokenizer travels as a
reference to its cartridge) and turns a numpy batch of text into a numpy array of uint32 id
arrays, one per document, equal to what `crayon encode-corpus` writes for each document. The same
function works with Spark's `mapInPandas` or any engine that pickles functions.

To write one training array instead of Parquet, `crayon encode-corpus INPUT -o tokens.bin
--tokenizer T --ray` does the whole job on the cluster (see docs/scale.md).
"""

from __future__ import annotations

import sys

import crayon_hf


def main() -> None:
    import ray

    src, dst = sys.argv[1], sys.argv[2]
    spec = sys.argv[3] if len(sys.argv) > 3 else "cl100k_base"
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=256 << 20)
    try:
        ds = ray.data.read_json(src)
        ds = ds.map_batches(crayon_hf.TokenizeBatch(spec, append_eos=True, keep_columns=False),
                            batch_format="numpy", batch_size=1024)
        ds.write_parquet(dst)
        print(f"wrote token ids of {ds.count()} documents to {dst}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
