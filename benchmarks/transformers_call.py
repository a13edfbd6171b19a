"""The transformers call of issue 19, three ways in one process: stock, fastokens-patched, CrayonTokenizer.

    tok(1000 texts, padding=True, truncation=True, max_length=128, return_tensors="np")

Texts are `corpora/short_docs.jsonl` cut into slices of 1000 documents, a new slice every pass (all
three keep per-piece caches across calls), the three taking turns. Every output row is compared with
stock. Run it pinned for single-thread numbers:

    taskset -c 0 env RAYON_NUM_THREADS=1 FASTOKENS_BPE_THREADS=1 CRAYON_NUM_THREADS=1 \\
        python benchmarks/transformers_call.py --vocab qwen2_5 --vocab llama3_1 --vocab gpt2
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[2] / "shared"
if not SHARED.exists():
    SHARED = Path("/work/shared")


def slices(size: int, count: int) -> list[list[str]]:
    docs = []
    with open(SHARED / "corpora" / "short_docs.jsonl", encoding="utf-8") as f:
        for line in f:
            docs.append(json.loads(line)["text"])
            if len(docs) >= size * count:
                break
    return [docs[i * size:(i + 1) * size] for i in range(count)]


def load(folder: str) -> dict:
    import transformers

    import crayon_hf

    path = str(SHARED / "vocab" / "hf" / folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        subjects = {"stock": transformers.AutoTokenizer.from_pretrained(path)}
        try:
            import fastokens

            fastokens.patch_transformers()
            subjects["fastokens"] = transformers.AutoTokenizer.from_pretrained(path)
            fastokens.unpatch_transformers()
        except Exception as e:  # noqa: BLE001
            print(f"  fastokens unavailable: {str(e)[:100]}")
        subjects["crayon"] = crayon_hf.CrayonTokenizer.from_pretrained(path)
    for tok in subjects.values():
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token or tok.unk_token or tok.bos_token
    return subjects


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", action="append")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    kwargs = dict(padding=True, truncation=True, max_length=args.max_length, return_tensors="np")
    batches = slices(1000, args.passes + 1)
    results = {}
    for folder in args.vocab or ["qwen2_5", "llama3_1", "gpt2"]:
        subjects = load(folder)
        names = list(subjects)
        for name in names:
            subjects[name](batches[0], **kwargs)  # warm-up
        ms = {n: [] for n in names}
        same = True
        for p, texts in enumerate(batches[1:]):
            outs = {}
            for name in names[p % len(names):] + names[:p % len(names)]:
                gc.disable()
                t0 = time.perf_counter()
                outs[name] = subjects[name](texts, **kwargs)
                ms[name].append(1e3 * (time.perf_counter() - t0))
                gc.enable()
            for name in names:
                for key in ("input_ids", "attention_mask"):
                    same &= np.array_equal(np.asarray(outs[name][key]), np.asarray(outs["stock"][key]))
        med = {n: round(statistics.median(v), 1) for n, v in ms.items()}
        row = {"ms": med, "identical": same}
        if "fastokens" in med:
            row["x_fastokens"] = round(med["fastokens"] / med["crayon"], 2)
        row["x_stock"] = round(med["stock"] / med["crayon"], 2)
        results[folder] = row
        print(folder, row, flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
