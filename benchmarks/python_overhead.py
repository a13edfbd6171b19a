#!/usr/bin/env python3
"""Per-call cost of the Python layer around the native engine, crayon_hf vs tokenizers.

What it answers: how much does `crayon_hf.Tokenizer.encode(...).ids` cost on top of the native
engine (`native` column: `HfEngine.encode`, the raw model output, no post-processing), and how
does the whole call compare with `tokenizers`? Short inputs are where the Python layer dominates.

    python benchmarks/python_overhead.py                      # gpt2, roberta_base, llama3_1
    python benchmarks/python_overhead.py --folders gpt2 --repeat 9
    python benchmarks/python_overhead.py --root /tmp/before   # another checkout's crayon_hf

Method: each case is timed with `timeit` (best of --repeat runs of a call count chosen for
~20 ms per run); crayon and tokenizers alternate case by case so a shared machine's drift hits
both. The same text is encoded repeatedly, so `tokenizers`' per-word cache is warm: this
measures per-call overhead, not throughput on new text (`crayon bench` does that).
Batch: the first 10,000 documents of short_docs.jsonl, both libraries on their default thread
pools (2 threads on the reference machine), reading `.ids` of every encoding.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CRAYON_SHARED", ROOT.parent / "shared"))
FOLDERS = ["gpt2", "roberta_base", "llama3_1"]


def short_docs(limit: int) -> list[str]:
    with open(SHARED / "corpora" / "short_docs.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["text"] for _, line in zip(range(limit), f)]


def pick_short(docs: list[str]) -> str:
    """An English document of about 100 bytes (the size the overhead figures are quoted for)."""
    best = min(docs[:2000], key=lambda d: (not d.isascii(), abs(len(d.encode()) - 100)))
    return best


def long_doc() -> str:
    data = (SHARED / "corpora" / "en_gutenberg_big.txt").read_bytes()[: 16 * 1024]
    return data.decode("utf-8", errors="ignore")


def per_call_us(fn, repeat: int) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()  # calls for >= 0.2 s; scale down to ~20 ms per run
    number = max(1, number // 10)
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folders", nargs="+", default=FOLDERS)
    ap.add_argument("--repeat", type=int, default=7, help="timeit runs per case (best is kept)")
    ap.add_argument("--batch-repeat", type=int, default=3)
    ap.add_argument("--root", type=Path, default=None,
                    help="import crayon_hf from this directory (default: the installed package)")
    args = ap.parse_args()

    if args.root:
        sys.path.insert(0, str(args.root))
    import crayon_hf
    import tokenizers

    docs = short_docs(10_000)
    short, long = pick_short(docs), long_doc()
    cases = [
        ("encode short", (short,)),
        ("encode short pair", (short, short)),
        ("encode long", (long,)),
        ("encode long pair", (long, long)),
    ]
    print(f"crayon_hf from {Path(crayon_hf.__file__).parent}; tokenizers {tokenizers.__version__}")
    print(f"short doc {len(short.encode())} B, long doc {len(long.encode())} B, batch {len(docs)} docs")
    print(f"{'folder':<14}{'case':<20}{'native':>10}{'crayon':>10}{'tokenizers':>12}{'crayon-native':>15}")

    for folder in args.folders:
        path = SHARED / "vocab" / "hf" / folder / "tokenizer.json"
        ours = crayon_hf.Tokenizer.from_file(path)
        ref = tokenizers.Tokenizer.from_file(str(path))
        engine = ours._engine
        ours.encode(short), ref.encode(short)  # warm vocabulary tables and caches
        for name, inputs in cases:
            native = per_call_us(lambda: [engine.encode(t, False) for t in inputs], args.repeat)
            a = per_call_us(lambda: ours.encode(*inputs).ids, args.repeat)
            b = per_call_us(lambda: ref.encode(*inputs).ids, args.repeat)
            print(f"{folder:<14}{name:<20}{native:>10.2f}{a:>10.2f}{b:>12.2f}{a - native:>15.2f}")
        native = min(timeit.repeat(lambda: engine.encode_batch(docs, False, 0), number=1, repeat=args.batch_repeat))
        a = min(timeit.repeat(lambda: [e.ids for e in ours.encode_batch(docs)], number=1, repeat=args.batch_repeat))
        b = min(timeit.repeat(lambda: [e.ids for e in ref.encode_batch(docs)], number=1, repeat=args.batch_repeat))
        n = len(docs)
        print(
            f"{folder:<14}{'batch (per doc)':<20}{native / n * 1e6:>10.2f}{a / n * 1e6:>10.2f}"
            f"{b / n * 1e6:>12.2f}{(a - native) / n * 1e6:>15.2f}"
        )


if __name__ == "__main__":
    main()
