#!/usr/bin/env python3
"""crayon-hf against the fastest exact peers (fastokens, tokie) and the references, the fair way.

Method (../shared/BASELINES.md): one process, single thread, every library's own pool set to one
thread, text no instance has seen (the corpora cut into ~16 KiB documents; each document is
encoded once per library), libraries taking turns (the order rotates every pass; crayon-hf's two
instances never run back to back: turn_order), CPU time of the
process, garbage collection off while timing, each library's time including freeing its own output
(lists and ints), median over passes; `--warm-up-kib 2048` first warms every instance on text from
four corpora no cell measures (WARM_UP), to measure a tokenizer in use. Run it pinned:

    RAYON_NUM_THREADS=1 FASTOKENS_BPE_THREADS=1 taskset -c 1 python benchmarks/peers.py --runs 5
    python benchmarks/peers.py --vocab o200k_base --corpus en --passes 4   # a quick look

On a shared machine one run's cell moves by up to 0.2x; `--runs 5` repeats the whole measurement
with fresh instances and reports each cell's median and the range of its ratios.

Faces and outputs:
  tiktoken face (cl100k_base, o200k_base, llama3):  crayon `encode_ordinary` (a list) and
      `encode_to_numpy` (the engine with array output) against tiktoken and fastokens' tiktoken face;
  tokenizers face (qwen2_5, llama3_1, gpt2, deepseek_v3; mistral_v0_1 and gemma, SentencePiece-style BPE):  crayon `Tokenizer.encode(d).ids` and
      `encode_batch_to_numpy([d], offsets=False).ids` against tokenizers, fastokens and tokie.
Every pass checks every library's ids against the reference. A crayon-hf mismatch fails the run; a
peer's is reported, and the bar is the fastest exact peer (an inexact one only where no peer is
exact, marked "ids differ"). Folders are compared on whole documents (a tokenizer.json's
truncation and padding are turned off). Results: benchmarks/results/peers.{md,json,png}; ratio =
crayon MiB/s over the best peer's (fastokens or tokie; the references are reported separately).
`--more` runs the WordPiece and Unigram folders (bert_base_uncased, t5_small,
xlm_roberta_paraphrase_mpnet; only tokie loads them) into peers_more.{md,json,png}.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CRAYON_SHARED", ROOT.parent / "shared"))
RESULTS = ROOT / "benchmarks" / "results"
DOC_BYTES = 16 * 1024
CORPORA = {"en": "en_gutenberg_big.txt", "code": "code_python_stdlib.txt", "zh": "zh_hongloumeng.txt",
           "multi": "multi_udhr_scripts.txt"}
TIKTOKEN_VOCABS = ["cl100k_base", "o200k_base", "llama3"]
HF_VOCABS = ["qwen2_5", "llama3_1", "gpt2", "deepseek_v3", "mistral_v0_1", "gemma"]
# WordPiece and Unigram folders, where tokie is the only peer (fastokens loads none of them):
# measured with --more into results files of their own, peers_more.* (docs/benchmarks.md).
MORE_HF_VOCABS = ["bert_base_uncased", "t5_small", "xlm_roberta_paraphrase_mpnet"]
PEERS = ("fastokens", "tokie")
# With --warm-up-kib N, text every library instance encodes once before its first timed
# document: N / 4 KiB from each of four corpora that no cell measures. That measures a tokenizer
# in use (its caches filled, crayon-hf's hot tables on huge pages, which it moves after an eighth
# of their size in text) rather than a fresh one; the timed documents stay new to everyone. Off by
# default, the method of ../shared/BASELINES.md (docs/benchmarks.md compares the two).
WARM_UP = ("en_tinyshakespeare.txt", "code_cpython_headers.h.txt", "zh_xiyouji.txt", "ja_wagahaiwa_nekodearu.txt")
WARM_UP_BYTES_EACH = 512 * 1024


def documents(name: str, count: int) -> list[str]:
    return _cut((SHARED / "corpora" / CORPORA[name]).read_text(encoding="utf-8"), count)


def warm_up_documents(bytes_each: int = WARM_UP_BYTES_EACH) -> list[str]:
    docs = []
    for name in WARM_UP:
        text = (SHARED / "corpora" / name).read_bytes()[:bytes_each].decode("utf-8", errors="ignore")
        docs += _cut(text, len(text))
    return docs


def _cut(text: str, count: int) -> list[str]:
    """The first `count` documents of ~DOC_BYTES, cut after a newline where there is one."""
    docs, i = [], 0
    while i < len(text) and len(docs) < count:
        j = text.rfind("\n", i + DOC_BYTES // 2, i + DOC_BYTES)
        j = i + DOC_BYTES if j < 0 else j + 1
        docs.append(text[i:j])
        i = j
    return docs


def tiktoken_subjects(vocab: str) -> tuple[dict, str]:
    import tiktoken
    import tiktoken.load

    import crayon_hf.tiktoken as ct
    from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS

    known = KNOWN_ENCODINGS[vocab]
    rank_file = SHARED / "vocab" / "tiktoken" / f"{known.rank_file}.tiktoken"
    ranks = tiktoken.load.load_tiktoken_bpe(str(rank_file))
    ref = tiktoken.Encoding(vocab, pat_str=known.pat_str, mergeable_ranks=ranks, special_tokens={})
    # Two instances: each output style gets its own engine, so neither sees text the other one
    # already put in the per-thread caches.
    ours = ct.Encoding(vocab, pat_str=known.pat_str, mergeable_ranks=ranks, special_tokens={})
    ours_np = ct.Encoding(vocab, pat_str=known.pat_str, mergeable_ranks=ranks, special_tokens={})
    subs = {
        "crayon": lambda d: ours.encode_ordinary(d),
        "crayon (numpy)": lambda d: ours_np.encode_to_numpy(d, disallowed_special=()),
        "tiktoken": lambda d: ref.encode_ordinary(d),
    }
    try:
        import fastokens

        fast = fastokens.Tokenizer.from_tiktoken(str(rank_file), pattern=known.pat_str, special_tokens={})
        subs["fastokens"] = lambda d: fast.encode_ordinary(d).ids
    except Exception as e:  # noqa: BLE001 - an optional peer that cannot load is reported, not fatal
        print(f"  fastokens unavailable for {vocab}: {str(e)[:100]}", file=sys.stderr)
    return subs, "tiktoken"


def tokenizers_subjects(vocab: str) -> tuple[dict, str]:
    import tokenizers

    import crayon_hf

    path = str(SHARED / "vocab" / "hf" / vocab / "tokenizer.json")
    ours = crayon_hf.Tokenizer.from_file(path)
    ours_np = crayon_hf.Tokenizer.from_file(path)  # its own engine and caches, as above
    ref = tokenizers.Tokenizer.from_file(path)
    for t in (ours, ours_np, ref):  # whole documents (xlm_roberta's file truncates to 128; tokie does not)
        t.no_truncation()
        t.no_padding()
    subs = {
        "crayon": lambda d: ours.encode(d).ids,
        "crayon (numpy)": lambda d: ours_np.encode_batch_to_numpy([d], offsets=False).ids,
        "tokenizers": lambda d: ref.encode(d).ids,
    }
    try:
        import fastokens

        fast = fastokens.Tokenizer.from_file(path)
        subs["fastokens"] = lambda d: fast.encode(d, add_special_tokens=True).ids
    except Exception as e:  # noqa: BLE001
        print(f"  fastokens unavailable for {vocab}: {str(e)[:100]}", file=sys.stderr)
    try:
        import tokie

        tk = tokie.Tokenizer.from_json(path)
        subs["tokie"] = lambda d: tk.encode(d).ids
    except Exception as e:  # noqa: BLE001
        print(f"  tokie unavailable for {vocab}: {str(e)[:100]}", file=sys.stderr)
    return subs, "tokenizers"


def turn_order(names: list[str]) -> list[str]:
    """The libraries' order around the ring the passes rotate: crayon-hf's two instances apart, so
    that neither ever runs right after the other. Measured on qwen2_5 English: the numpy instance
    ran at 94-99 MiB/s right after the list one and at 75 after another library (the list
    instance leaves crayon-hf's code and the thread's tables warm; another library's turn evicts
    them), so its turns next to the list instance overstated it (docs/benchmarks.md, "Turn order")."""
    ours = [n for n in names if n.startswith("crayon")]
    others = [n for n in names if not n.startswith("crayon")]
    order = ours[:1] + others[:1] + ours[1:] + others[1:]
    return order if len(ours) == 2 and others else names


def cell(subs: dict, reference: str, docs: list[str], passes: int, per_pass: int) -> dict:
    names = turn_order(list(subs))
    for name in names:  # warm-up on two documents nobody is timed on
        for d in docs[:2]:
            subs[name](d)
    rates: dict[str, list[float]] = {n: [] for n in names}
    mismatches: dict[str, int] = {}  # passes whose ids differ from the reference, per library
    for p in range(passes):
        batch = docs[2 + p * per_pass: 2 + (p + 1) * per_pass]
        if len(batch) < per_pass:
            break
        nbytes = sum(len(d.encode("utf-8")) for d in batch)
        outs = {}
        for name in names[p % len(names):] + names[:p % len(names)]:
            f = subs[name]
            gc.disable()
            t0 = time.process_time()
            out = [f(d) for d in batch]
            dt = time.process_time() - t0
            # Copies that share no objects with the output, so that freeing the output (timed
            # below) frees all of it: each library pays for its own lists and ints. Before, the
            # output lived until the next library's `out = ...`, inside that library's timing.
            outs[name] = [np.array(o, dtype=np.int64) for o in out]
            t0 = time.process_time()
            del out
            dt += time.process_time() - t0
            gc.enable()
            rates[name].append(nbytes / max(dt, 1e-9) / 2**20)
        for n in names:
            if any(not np.array_equal(a, b) for a, b in zip(outs[n], outs[reference])):
                mismatches[n] = mismatches.get(n, 0) + 1
    med = {n: statistics.median(r) for n, r in rates.items() if r}
    # The bar is the fastest exact peer; a peer whose ids differ from the reference is reported
    # (peer_mismatches) and taken as the bar only when no peer is exact (best_peer_exact False).
    peers = [n for n in names if n in PEERS]
    exact = [n for n in peers if n not in mismatches]
    best = max(exact or peers, key=lambda n: med[n]) if peers else None
    ratio = lambda ours: statistics.median(a / b for a, b in zip(rates[ours], rates[best])) if best else None  # noqa: E731
    return {"mib_s": {n: round(v, 1) for n, v in med.items()}, "best_peer": best,
            "ratio_vs_best_peer": round(ratio("crayon"), 2) if best else None,
            "ratio_numpy_vs_best_peer": round(ratio("crayon (numpy)"), 2) if best else None,
            "ratio_vs_reference": round(statistics.median(a / b for a, b in zip(rates["crayon"], rates[reference])), 2),
            "passes": len(rates["crayon"]), "best_peer_exact": best is not None and best not in mismatches,
            "mismatches": sum(v for n, v in mismatches.items() if n not in PEERS),
            "peer_mismatches": {n: v for n, v in mismatches.items() if n in PEERS}}



def combine_runs(runs: list[list[dict]]) -> list[dict]:
    """One row per cell from several runs of the same cells: the median of every number, the
    best peer most runs had, the runs' ratios kept (`ratio_runs`), mismatches summed. On a
    shared machine a single run's cell moves by up to 0.2x; the median of five by far less."""
    if len(runs) == 1:
        return runs[0]
    out = []
    for cells in zip(*runs):
        first = dict(cells[0])
        named = [c["best_peer"] for c in cells if c["best_peer"]]
        first["best_peer"] = max(set(named), key=named.count) if named else None
        for key in ("ratio_vs_best_peer", "ratio_numpy_vs_best_peer", "ratio_vs_reference"):
            values = [c[key] for c in cells if c[key] is not None]
            first[key] = round(statistics.median(values), 2) if values else None
        first["ratio_runs"] = [c["ratio_vs_best_peer"] for c in cells]
        first["mib_s"] = {n: round(statistics.median(c["mib_s"][n] for c in cells if n in c["mib_s"]), 1)
                          for n in cells[0]["mib_s"]}
        first["mismatches"] = sum(c["mismatches"] for c in cells)
        first["passes"] = sum(c["passes"] for c in cells)
        peer_mm: dict[str, int] = {}
        for c in cells:
            for n, v in c["peer_mismatches"].items():
                peer_mm[n] = peer_mm.get(n, 0) + v
        first["peer_mismatches"] = peer_mm
        first["best_peer_exact"] = all(c["best_peer_exact"] for c in cells)
        out.append(first)
    return out


def _ratio(value: float | None, bold: bool = False) -> str:
    """A ratio cell: "–" where no peer loads the vocabulary."""
    if value is None:
        return "–"
    return f"**{value}x**" if bold else f"{value}x"

def render(rows: list[dict]) -> str:
    lines = ["| vocabulary | face | corpus | crayon MiB/s | crayon numpy | best peer | peer MiB/s | reference MiB/s "
             "| crayon / best peer | numpy / best peer | crayon / reference |",
             "|---|---|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        m = r["mib_s"]
        ref = m.get("tiktoken", m.get("tokenizers"))
        peer = r["best_peer"] or "–"
        if r["best_peer"] and not r.get("best_peer_exact", True):
            peer += " (ids differ)"
        spread = [v for v in r.get("ratio_runs", []) if v is not None]
        ratio = _ratio(r["ratio_vs_best_peer"], bold=True) + (f" ({min(spread)}-{max(spread)})" if len(spread) > 1 else "")
        lines.append(f"| {r['vocab']} | {r['face']} | {r['corpus']} | {m['crayon']} | {m['crayon (numpy)']} | {peer} | "
                     f"{m.get(r['best_peer'], '–')} | {ref} | {ratio} | "
                     f"{_ratio(r['ratio_numpy_vs_best_peer'])} | {r['ratio_vs_reference']}x |")
    return "\n".join(lines)


def pyplot():
    """matplotlib's pyplot on the file backend, or None where matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot(rows: list[dict], path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    rows = [r for r in rows if r["best_peer"]]  # no peer loads it: nothing to draw
    labels = [f"{r['vocab']} · {r['corpus']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.55), 5))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["ratio_vs_best_peer"] or 0 for r in rows], 0.4, label="list output")
    ax.bar([x + 0.2 for x in xs], [r["ratio_numpy_vs_best_peer"] or 0 for r in rows], 0.4, label="numpy output")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(2.0, color="green", lw=0.8, ls="--", label="goal: 2x")
    ax.set_xticks(list(xs), labels, fontsize=8, rotation=45, ha="right")
    ax.set_ylabel("crayon-hf MiB/s / best peer MiB/s")
    ax.set_title("Single thread, new text: crayon-hf against the fastest peer (fastokens, tokie)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", action="append", help="a vocabulary (repeatable; default: all nine)")
    ap.add_argument("--more", action="store_true", help="the WordPiece and Unigram folders (MORE_HF_VOCABS)")
    ap.add_argument("--corpus", action="append", choices=list(CORPORA), help="a corpus (repeatable; default: all)")
    ap.add_argument("--passes", type=int, default=8)
    ap.add_argument("--per-pass", type=int, default=5, help="documents per library per pass")
    ap.add_argument("--runs", type=int, default=1,
                    help="whole measurements in a row (fresh instances each); each cell reports the median "
                         "of its runs' values and the range of its ratios")
    ap.add_argument("--warm-up-kib", type=int, default=0,
                    help="text each library instance encodes before its first cell, from corpora no cell measures "
                         f"(default 0: fresh instances; {len(WARM_UP) * WARM_UP_BYTES_EACH // 1024}: a tokenizer in use)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="where peers.{md,json,png} (peers_more.* with --more) go")
    ap.add_argument("--replot", action="store_true", help="redraw peers.png from peers.json, measure nothing")
    args = ap.parse_args(argv)
    stem = "peers_more" if args.more else "peers"
    if args.replot:
        plot(json.loads((args.out / f"{stem}.json").read_text())["rows"], args.out / f"{stem}.png")
        return 0
    vocabs = args.vocab or (MORE_HF_VOCABS if args.more else TIKTOKEN_VOCABS + HF_VOCABS)
    corpora = args.corpus or list(CORPORA)
    docs = {c: documents(c, 2 + args.passes * args.per_pass) for c in corpora}
    warm_up = warm_up_documents(args.warm_up_kib * 1024 // len(WARM_UP)) if args.warm_up_kib else []
    runs: list[list[dict]] = []
    for run in range(args.runs):
        rows = []
        for vocab in vocabs:  # fresh instances every run
            subs, reference = tiktoken_subjects(vocab) if vocab in TIKTOKEN_VOCABS else tokenizers_subjects(vocab)
            face = "tiktoken" if reference == "tiktoken" else "tokenizers"
            for f in subs.values():
                for d in warm_up:
                    f(d)
            for c in corpora:
                r = cell(subs, reference, docs[c], args.passes, args.per_pass)
                r.update(vocab=vocab, face=face, corpus=c)
                rows.append(r)
                print(f"[run {run + 1}/{args.runs}] {vocab:12s} {c:5s} crayon/{r['best_peer']} = {r['ratio_vs_best_peer']}x "
                      f"(numpy {r['ratio_numpy_vs_best_peer']}x), vs {reference} {r['ratio_vs_reference']}x  "
                      f"MiB/s {r['mib_s']}  mismatches {r['mismatches']}  peers' {r['peer_mismatches']}", flush=True)
        runs.append(rows)
    rows = combine_runs(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "cpu_affinity":
            sorted(os.sched_getaffinity(0)), "doc_bytes": DOC_BYTES, "passes": args.passes, "per_pass": args.per_pass,
            "warm_up_kib": args.warm_up_kib, "runs": args.runs,
            "date": time.strftime("%Y-%m-%d")}
    (args.out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    title = "crayon-hf against tokie on WordPiece and Unigram folders" if args.more else "crayon-hf against the fastest peers"
    (args.out / f"{stem}.md").write_text(
        f"# {title}\n\nSingle thread (pinned, every pool at one thread), ~16 KiB "
        "documents no library had seen, libraries taking turns, each library's time including freeing its "
        "own output, median of per-pass ratios "
        f"({args.passes} passes of {args.per_pass} documents"
        + (f"; each cell the median of {args.runs} whole runs, fresh instances each" if args.runs > 1 else "") + ")"
        + (f", each library instance first warmed up on {args.warm_up_kib} KiB of text from corpora no cell "
           "measures" if args.warm_up_kib else "") + ". Made by `benchmarks/peers.py`.\n\n"
        + render(rows) + "\n")
    plot(rows, args.out / f"{stem}.png")
    for r in rows:
        for peer, n in r["peer_mismatches"].items():
            print(f"  {peer}'s ids differ from the reference on {r['vocab']} {r['corpus']} in {n} passes", file=sys.stderr)
    bad = sum(r["mismatches"] for r in rows)
    if bad:
        print(f"crayon-hf's ids differ from the reference in {bad} library-passes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
