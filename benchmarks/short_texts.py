#!/usr/bin/env python3
"""Short texts: the cost of one call, crayon-hf against the peers and the references.

peers.py measures throughput on ~16 KiB documents, where a call's fixed cost vanishes. Chat
messages, titles, RAG chunks and `len(tok.encode(x))` in a loop are short; there the fixed cost of
a call (the Python layer, the binding, the engine's set-up) is most of the time. This benchmark
times single calls on the real short documents of ../shared/corpora/short_docs.jsonl (English,
~500 languages, Python, Chinese, Japanese; median 167 bytes), in three sizes.

Method (../shared/BASELINES.md): one process, run it pinned; every library's own pool at one
thread; libraries taking turns in an order that rotates every pass; each pass gives every library
the same documents, new to all of them (no document is timed twice); garbage collection off while
timing; a library's time includes freeing its output; per-call time = a pass's time over its
documents, median over passes. Every library's ids are checked against the reference on every
timed document (untimed); a crayon-hf mismatch fails the run.

    RAYON_NUM_THREADS=1 FASTOKENS_BPE_THREADS=1 taskset -c 1 python benchmarks/short_texts.py
    python benchmarks/short_texts.py --vocab qwen2_5 --passes 5     # a quick look

Faces: tokenizers (`Tokenizer.encode(t).ids` against tokenizers, fastokens, tokie), tiktoken
(`encode_ordinary(t)` against tiktoken and fastokens' tiktoken face) and, as "VOCAB (transformers)",
transformers (`tok(t)["input_ids"]` of `CrayonTokenizer` against stock `AutoTokenizer` and the one
fastokens patches; `--transformers` names the folders, default qwen2_5 and llama3_1). Results:
benchmarks/results/short_texts.{md,json,png}; speed-up = the best peer's time per call over
crayon-hf's (the references are reported separately).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402 - the subjects, the turn order and the shared paths

SIZES = {"<= 64 B": (1, 64), "65-256 B": (65, 256), "257-1024 B": (257, 1024)}
VOCABS = ["qwen2_5", "llama3_1", "gpt2", "o200k_base", "cl100k_base"]
TRANSFORMERS = " (transformers)"  # a vocabulary name's suffix for the transformers face


def short_docs() -> list[str]:
    with open(peers.SHARED / "corpora" / "short_docs.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def by_size(docs: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {name: [] for name in SIZES}
    for d in docs:
        n = len(d.encode("utf-8"))
        for name, (lo, hi) in SIZES.items():
            if lo <= n <= hi:
                out[name].append(d)
    return out


def subjects(vocab: str) -> tuple[dict, str]:
    if vocab.endswith(TRANSFORMERS):
        return transformers_subjects(vocab[: -len(TRANSFORMERS)])
    subs, reference = (peers.tiktoken_subjects if vocab in peers.TIKTOKEN_VOCABS else peers.tokenizers_subjects)(vocab)
    subs.pop("crayon (numpy)", None)  # a one-text batch to numpy is not how short texts are encoded
    return subs, reference


def transformers_subjects(folder: str) -> tuple[dict, str]:
    """`tok(t)["input_ids"]`: CrayonTokenizer, stock transformers and fastokens' patched
    transformers (benchmarks/transformers_call.py loads the three)."""
    import transformers_call

    toks = transformers_call.load(folder)
    subs = {"crayon" if name == "crayon" else ("transformers" if name == "stock" else name):
            (lambda t: lambda d: t(d)["input_ids"])(tok) for name, tok in toks.items()}
    return subs, "transformers"


def cell(subs: dict, reference: str, docs: list[str], passes: int, per_pass: int) -> dict:
    names = peers.turn_order(list(subs))
    for f in subs.values():  # first use (tables, interned ints) on documents no pass times
        for d in docs[-200:]:
            f(d)
    times: dict[str, list[float]] = {n: [] for n in names}
    mismatches = {n: 0 for n in names}
    for p in range(passes):
        batch = docs[p * per_pass:(p + 1) * per_pass]
        order = names[p % len(names):] + names[:p % len(names)]
        for name in order:
            f = subs[name]
            gc.disable()
            t0 = time.perf_counter_ns()
            for d in batch:
                f(d)
            t1 = time.perf_counter_ns()
            gc.enable()
            times[name].append((t1 - t0) / len(batch))
        want = [subs[reference](d) for d in batch]
        for name in names:
            mismatches[name] += sum(list(subs[name](d)) != w for d, w in zip(batch, want))
    if mismatches.get("crayon"):
        raise SystemExit(f"crayon-hf ids differ from {reference} on {mismatches['crayon']} documents")
    ns = {n: statistics.median(v) for n, v in times.items()}
    exact_peers = [n for n in peers.PEERS if n in ns and mismatches[n] == 0]
    best = min(exact_peers, key=ns.get) if exact_peers else None
    return {"ns_per_call": ns, "mismatches": mismatches, "reference": reference, "best_peer": best,
            "vs_best_peer": ns[best] / ns["crayon"] if best else None,
            "vs_reference": ns[reference] / ns["crayon"], "docs_per_pass": len(batch), "passes": passes,
            "mean_bytes": statistics.mean(len(d.encode("utf-8")) for d in docs[:passes * per_pass])}


def render(rows: list[dict]) -> str:
    lines = ["| vocabulary | size | crayon-hf | fastokens | tokie | reference | vs best peer | vs reference |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ns = r["ns_per_call"]

        def us(name: str) -> str:
            if name not in ns:
                return "-"
            flag = " (ids differ)" if r["mismatches"].get(name) else ""
            return f"{ns[name] / 1000:.2f}{flag}"

        best = f"**{r['vs_best_peer']:.2f}x** ({r['best_peer']})" if r["best_peer"] else "-"
        lines.append(f"| {r['vocab']} | {r['size']} | {us('crayon')} | {us('fastokens')} | {us('tokie')} | "
                     f"{us(r['reference'])} ({r['reference']}) | {best} | {r['vs_reference']:.2f}x |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    plt = peers.pyplot()
    if plt is None:
        return
    libs = ["crayon", "fastokens", "tokie"]
    labels = [f"{r['vocab']}\n{r['size']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.9), 4.5))
    width = 0.8 / len(libs)
    for k, lib in enumerate(libs):
        xs = [i + (k - 1) * width for i in range(len(rows))]
        ax.bar(xs, [r["ns_per_call"].get(lib, 0) / 1000 for r in rows], width, label=lib)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("microseconds per call (lower is better)")
    ax.set_title("One call on a short text (short_docs.jsonl), single thread, new text")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", nargs="*", default=VOCABS)
    ap.add_argument("--transformers", nargs="*", default=["qwen2_5", "llama3_1"],
                    help="tokenizer.json folders measured on the transformers face too")
    ap.add_argument("--size", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--passes", type=int, default=9)
    ap.add_argument("--per-pass", type=int, default=200, help="documents each library encodes per pass")
    ap.add_argument("--out", type=Path, default=peers.RESULTS)
    args = ap.parse_args(argv)

    groups = by_size(short_docs())
    rows = []
    for vocab in args.vocab + [f + TRANSFORMERS for f in args.transformers]:
        subs, reference = subjects(vocab)
        for size in args.size:
            docs = groups[size]
            if len(docs) < args.passes * args.per_pass + 200:
                raise SystemExit(f"{size}: {len(docs)} documents, too few for {args.passes} passes of {args.per_pass}")
            r = cell(subs, reference, docs, args.passes, args.per_pass) | {"vocab": vocab, "size": size}
            rows.append(r)
            print(f"{vocab:12s} {size:11s} " + "  ".join(f"{n} {v / 1000:.2f} us" for n, v in r["ns_per_call"].items())
                  + (f"  vs {r['best_peer']} {r['vs_best_peer']:.2f}x" if r["best_peer"] else ""), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "passes": args.passes,
            "per_pass": args.per_pass, "method": "benchmarks/short_texts.py docstring"}
    (args.out / "short_texts.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    (args.out / "short_texts.md").write_text(
        "# One call on a short text\n\nMicroseconds per call, median over passes (benchmarks/short_texts.py). "
        "Speed-ups are the best peer's time over crayon-hf's.\n\n" + render(rows) + "\n")
    plot(rows, args.out / "short_texts.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
