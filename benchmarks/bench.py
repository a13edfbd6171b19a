#!/usr/bin/env python3
"""Speed and parity of crayon-hf side by side with the reference, in one process.

Method (../shared/BASELINES.md): the process is pinned to one core for single-thread numbers.
Each library keeps one long-lived instance, as an application would, and every timed pass encodes
text that instance has never seen: the corpus is cut into ~16 KiB documents and each pass takes its
own slice of them (--slice-bytes, default 256 KiB), so per-word caches cannot help and every pass
is a first pass. Passes alternate between the libraries so that a shared machine's slow drifts hit
both alike; the cyclic GC is off inside timed regions (as in timeit). Medians over passes, min and
max as the spread. Batch numbers use the first 10,000 documents of short_docs.jsonl on 2 threads.
Load is timed in process (mapping a cartridge vs building tiktoken's CoreBPE from ranks) and in a
fresh process (import + load).

    python benchmarks/bench.py                       # all tiktoken vocabularies, default corpora
    python benchmarks/bench.py --vocab cl100k_base --corpus en_gutenberg_big.txt --reps 3
    python benchmarks/bench.py --isolated            # also each library alone in its own process
    python benchmarks/bench.py --hf                  # crayon_hf.Tokenizer vs tokenizers, every HF folder
    python benchmarks/bench.py --hf --folder gpt2 --corpus en_gutenberg_big.txt --reps 3
    python benchmarks/bench.py --transformers        # CrayonTokenizer vs the stock transformers tokenizer

Writes benchmarks/results/tiktoken.{md,json,png}, or with --hf benchmarks/results/tokenizers.{md,json,png},
or with --transformers benchmarks/results/transformers.{md,json,png}.
For --hf, single-thread passes run pinned to one core and the batch runs on two (tokenizers' rayon
pool is sized to 2); both libraries return Encoding objects and the timing includes reading `.ids`.
For --transformers, both tokenizers come from the same folder in one process and run on two cores:
`tok(1000 short texts, padding=True, truncation=True, max_length=128, return_tensors="np")` and the
same call unpadded (lists); every pass takes the next 1000 documents of short_docs.jsonl (both
tokenizers see each slice once, which goes first alternates), and parity compares every field.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CRAYON_SHARED", ROOT.parent / "shared"))
RESULTS = ROOT / "benchmarks" / "results"

DEFAULT_CORPORA = ["en_gutenberg_big.txt", "code_python_stdlib.txt", "zh_hongloumeng.txt", "multi_udhr_scripts.txt"]
VOCABS = ["r50k_base", "cl100k_base", "o200k_base", "llama3"]
BYTE_LEVEL_FOLDERS = ["gpt2", "roberta_base", "gpt_neox_20b", "phi2", "falcon", "llama3_1", "qwen2_5", "deepseek_v3",
                      "clip", "whisper_large_v3"]
# SentencePiece-style BPE, WordPiece, Unigram.
FAMILY_FOLDERS = ["mistral_v0_1", "phi3_mini", "gemma", "bert_base_uncased", "t5_small", "xlm_roberta_paraphrase_mpnet"]
HF_FOLDERS = BYTE_LEVEL_FOLDERS + FAMILY_FOLDERS
TRANSFORMERS_FOLDERS = HF_FOLDERS
DOC_BYTES = 16 * 1024


def documents(path: Path, limit_bytes: int) -> list[str]:
    data = path.read_bytes()[:limit_bytes].decode("utf-8", errors="ignore")
    docs, start = [], 0
    while start < len(data):
        end = min(len(data), start + DOC_BYTES)
        # Cut at a newline when one is near, so documents look like real ones.
        nl = data.rfind("\n", start + DOC_BYTES // 2, end)
        end = nl + 1 if nl > 0 and end < len(data) else end
        docs.append(data[start:end])
        start = end
    return docs


def short_docs(n: int) -> list[str]:
    out = []
    with open(SHARED / "corpora" / "short_docs.jsonl", encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line)["text"])
            if len(out) >= n:
                break
    return out


def timed(fn, reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        with _no_gc():
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return times


class _no_gc:
    """Timed regions run with the cyclic GC off, as `timeit` does: the results lists are large, and
    a collection landing inside one library's timing but not the other's is noise, not speed."""

    def __enter__(self):
        import gc

        self.was_enabled = gc.isenabled()
        gc.collect()
        gc.disable()

    def __exit__(self, *exc):
        import gc

        if self.was_enabled:
            gc.enable()


def encodings(name: str):
    import tiktoken
    import tiktoken.load

    import crayon_hf.tiktoken as tk
    from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS

    k = KNOWN_ENCODINGS[name]
    rank_path = SHARED / "vocab" / "tiktoken" / f"{k.rank_file}.tiktoken"
    ranks = tiktoken.load.load_tiktoken_bpe(str(rank_path))
    ref = tiktoken.Encoding(name, pat_str=k.pat_str, mergeable_ranks=ranks, special_tokens=k.special_tokens)
    if k.bundled:
        ours = tk.get_encoding(name)
    else:
        built = tk.Encoding(name, pat_str=k.pat_str, mergeable_ranks=ranks, special_tokens=k.special_tokens)
        path = os.path.join(tempfile.mkdtemp(), f"{name}.dat")
        built.save_cartridge(path)
        ours = tk.Encoding.from_cartridge(path)
    return ref, ours, ranks, k


def split_passes(docs: list[str], reps: int) -> list[list[str]]:
    """Deals the documents into `reps` consecutive groups of about equal size."""
    per = max(1, len(docs) // reps)
    return [docs[i * per : (i + 1) * per] for i in range(reps) if docs[i * per : (i + 1) * per]]


def bench_vocab(name: str, corpora: list[str], reps: int, slice_bytes: int) -> dict:
    ref, ours, ranks, known = encodings(name)
    result: dict = {"vocab": name, "corpora": {}}
    for corpus in corpora:
        docs = documents(SHARED / "corpora" / corpus, reps * slice_bytes)
        passes = split_passes(docs, reps)
        nbytes_pass = [sum(len(d.encode("utf-8")) for d in p) for p in passes]
        expected = [[ref.encode_ordinary(d) for d in p] for p in passes]  # tiktoken keeps no cache
        ndocs = sum(map(len, passes))
        ntokens = sum(len(ids) for e in expected for ids in e)
        row = {"bytes": sum(nbytes_pass), "docs": ndocs, "tokens": ntokens}
        speeds: dict[str, list[float]] = {"tiktoken": [], "crayon": []}
        decode: dict[str, list[float]] = {"tiktoken": [], "crayon": []}
        for k, p in enumerate(passes):
            for label, enc in [("tiktoken", ref), ("crayon", ours)]:
                t = timed(lambda: [enc.encode_ordinary(d) for d in p], 1)[0]
                speeds[label].append(nbytes_pass[k] / t / 2**20)
                t = timed(lambda: [enc.decode_bytes(ids) for ids in expected[k]], 1)[0]
                decode[label].append(nbytes_pass[k] / t / 2**20)
        # Parity is checked after timing, so crayon-hf never sees the timed text beforehand.
        same = sum(ours.encode_ordinary(d) == ids for p, e in zip(passes, expected) for d, ids in zip(p, e))
        row["parity"] = same / ndocs
        for label in ("tiktoken", "crayon"):
            med = statistics.median(speeds[label])
            row[label] = {
                "mib_s": med,
                "mib_s_min": min(speeds[label]),
                "mib_s_max": max(speeds[label]),
                "tokens_s": med * 2**20 * ntokens / row["bytes"],
                "decode_mib_s": statistics.median(decode[label]),
            }
        row["ratio"] = row["crayon"]["mib_s"] / row["tiktoken"]["mib_s"]
        row["decode_ratio"] = row["crayon"]["decode_mib_s"] / row["tiktoken"]["decode_mib_s"]
        result["corpora"][corpus] = row
        print(
            f"{name:12s} {corpus:26s} parity {100 * row['parity']:5.1f}%  tiktoken {row['tiktoken']['mib_s']:6.1f}  "
            f"crayon {row['crayon']['mib_s']:6.1f} MiB/s  x{row['ratio']:.2f}   decode x{row['decode_ratio']:.2f}",
            flush=True,
        )

    # Batch: 10k short documents on 2 threads.
    batch = short_docs(10_000)
    nbytes = sum(len(d.encode("utf-8")) for d in batch)
    assert ours.encode_ordinary_batch(batch, num_threads=2) == ref.encode_ordinary_batch(batch, num_threads=2)
    result["batch"] = {"docs": len(batch), "bytes": nbytes}
    batch_times: dict[str, list[float]] = {"tiktoken": [], "crayon": []}
    for _ in range(reps):
        for label, enc in [("tiktoken", ref), ("crayon", ours)]:
            batch_times[label] += timed(lambda: enc.encode_ordinary_batch(batch, num_threads=2), 1)
    for label in ("tiktoken", "crayon"):
        result["batch"][label] = nbytes / statistics.median(batch_times[label]) / 2**20

    # Load in process: tiktoken builds from ranks; crayon maps a cartridge.
    with tempfile.TemporaryDirectory() as tmp:
        cart = os.path.join(tmp, f"{name}.dat")
        ours.save_cartridge(cart)
        import crayon_hf.tiktoken as tk
        import tiktoken

        load_ours = timed(lambda: tk.Encoding.from_cartridge(cart), max(reps, 20))
        load_ref = timed(
            lambda: tiktoken.Encoding(name, pat_str=known.pat_str, mergeable_ranks=ranks, special_tokens=known.special_tokens),
            3,
        )
        fresh_ours = fresh_process_load(f"import crayon_hf.tiktoken as tk; tk.Encoding.from_cartridge({cart!r})")
        rank_path = SHARED / "vocab" / "tiktoken" / f"{known.rank_file}.tiktoken"
        fresh_ref = fresh_process_load(
            "import tiktoken, tiktoken.load; "
            f"tiktoken.Encoding('x', pat_str={known.pat_str!r}, "
            f"mergeable_ranks=tiktoken.load.load_tiktoken_bpe({str(rank_path)!r}), special_tokens={{}})"
        )
        result["load"] = {
            "crayon_in_process_ms": 1e3 * statistics.median(load_ours),
            "tiktoken_in_process_ms": 1e3 * statistics.median(load_ref),
            "crayon_fresh_process_ms": fresh_ours,
            "tiktoken_fresh_process_ms": fresh_ref,
            "cartridge_bytes": os.path.getsize(cart),
        }
    print(f"{name:12s} batch x{result['batch']['crayon'] / result['batch']['tiktoken']:.2f}  load {result['load']}", flush=True)
    return result


def isolated_speeds(lib: str, name: str, corpus: str, reps: int, slice_bytes: int) -> list[float]:
    """Worker for --isolated: one library alone in this process, new text every pass."""
    from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS

    k = KNOWN_ENCODINGS[name]
    rank_path = str(SHARED / "vocab" / "tiktoken" / f"{k.rank_file}.tiktoken")
    if lib == "tiktoken":
        import tiktoken
        import tiktoken.load

        enc = tiktoken.Encoding(
            name, pat_str=k.pat_str, mergeable_ranks=tiktoken.load.load_tiktoken_bpe(rank_path), special_tokens=k.special_tokens
        )
    else:
        import crayon_hf.tiktoken as tk

        enc = tk.get_encoding(name) if k.bundled else tk.Encoding(
            name, pat_str=k.pat_str, mergeable_ranks=tk.load.load_tiktoken_bpe(rank_path), special_tokens=k.special_tokens
        )
    passes = split_passes(documents(SHARED / "corpora" / corpus, reps * slice_bytes), reps)
    speeds = []
    for p in passes:
        nbytes = sum(len(d.encode("utf-8")) for d in p)
        speeds.append(nbytes / timed(lambda: [enc.encode_ordinary(d) for d in p], 1)[0] / 2**20)
    return speeds


def run_isolated(vocabs: list[str], corpora: list[str], reps: int, slice_bytes: int) -> dict:
    """Each library alone in its own process (no shared caches), new text every pass."""
    out: dict = {}
    for name in vocabs:
        for corpus in corpora:
            row = {}
            for lib in ("tiktoken", "crayon"):
                cmd = [sys.executable, __file__, "--worker", lib, name, corpus, str(reps), str(slice_bytes)]
                res = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tempfile.gettempdir())
                row[lib] = statistics.median(json.loads(res.stdout.strip().splitlines()[-1]))
            row["ratio"] = row["crayon"] / row["tiktoken"]
            out.setdefault(name, {})[corpus] = row
            print(f"isolated {name:12s} {corpus:26s} tiktoken {row['tiktoken']:6.1f}  crayon {row['crayon']:6.1f} MiB/s  x{row['ratio']:.2f}", flush=True)
    return out


# ---- crayon_hf.Tokenizer vs tokenizers ------------------------------------------------------------


class _pinned:
    """Runs the block on one core (single-thread numbers), restoring the affinity after."""

    def __enter__(self):
        self.saved = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        if self.saved:
            os.sched_setaffinity(0, {sorted(self.saved)[0]})

    def __exit__(self, *exc):
        if self.saved:
            os.sched_setaffinity(0, self.saved)


def _optional_hf_libraries(path: Path) -> dict:
    """tokie and fastokens, when installed (clearly labelled optional competitors)."""
    out = {}
    try:
        import tokie

        out["tokie"] = tokie.Tokenizer.from_json(str(path))
    except Exception:  # not installed, or cannot load this file
        pass
    try:
        import fastokens

        out["fastokens"] = fastokens.Tokenizer.from_file(str(path))
    except Exception:
        pass
    return out


def bench_hf(folder: str, corpora: list[str], reps: int, slice_bytes: int) -> dict:
    import tokenizers

    from crayon_hf import Tokenizer

    path = SHARED / "vocab" / "hf" / folder / "tokenizer.json"
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = Tokenizer.from_file(path)
    libs = {"tokenizers": ref, "crayon": ours, **_optional_hf_libraries(path)}
    result: dict = {"vocab": folder, "backend": ours.crayon_backend, "libraries": list(libs), "corpora": {}}
    for corpus in corpora:
        docs = documents(SHARED / "corpora" / corpus, reps * slice_bytes)
        passes = split_passes(docs, reps)
        nbytes_pass = [sum(len(d.encode("utf-8")) for d in p) for p in passes]
        speeds: dict[str, list[float]] = {label: [] for label in libs}
        decode: dict[str, list[float]] = {"tokenizers": [], "crayon": []}
        with _pinned():
            for k, p in enumerate(passes):
                for label, tok in libs.items():
                    t = timed(lambda: [tok.encode(d).ids for d in p], 1)[0]
                    speeds[label].append(nbytes_pass[k] / t / 2**20)
        # Parity after timing (so no library saw the timed text before), then decode.
        expected = [[ref.encode(d) for d in p] for p in passes]
        ids = [[e.ids for e in es] for es in expected]
        parity = {}
        for label, tok in libs.items():
            if label == "tokenizers":
                continue
            same = 0
            for p, es in zip(passes, expected):
                for d, e in zip(p, es):
                    got = tok.encode(d)
                    same += got.ids == e.ids and (label != "crayon" or got.offsets == e.offsets)
            parity[label] = same / sum(map(len, passes))
        with _pinned():
            for k in range(len(passes)):
                for label in ("tokenizers", "crayon"):
                    tok = libs[label]
                    t = timed(lambda: [tok.decode(x) for x in ids[k]], 1)[0]
                    decode[label].append(nbytes_pass[k] / t / 2**20)
        ndocs = sum(map(len, passes))
        ntokens = sum(len(x) for group in ids for x in group)
        row = {"bytes": sum(nbytes_pass), "docs": ndocs, "tokens": ntokens, "parity": parity["crayon"],
               "parity_all": parity}
        for label in libs:
            med = statistics.median(speeds[label])
            row[label] = {
                "mib_s": med,
                "mib_s_min": min(speeds[label]),
                "mib_s_max": max(speeds[label]),
                "tokens_s": med * 2**20 * ntokens / row["bytes"],
            }
        for label in ("tokenizers", "crayon"):
            row[label]["decode_mib_s"] = statistics.median(decode[label])
        row["ratio"] = row["crayon"]["mib_s"] / row["tokenizers"]["mib_s"]
        others = [row[label]["mib_s"] for label in libs if label not in ("crayon", "tokenizers")]
        row["ratio_vs_fastest_other"] = row["crayon"]["mib_s"] / max(others) if others else None
        row["decode_ratio"] = row["crayon"]["decode_mib_s"] / row["tokenizers"]["decode_mib_s"]
        result["corpora"][corpus] = row
        extra = "  ".join(f"{label} {row[label]['mib_s']:.1f} ({100 * parity[label]:.0f}%)" for label in libs
                          if label not in ("crayon", "tokenizers"))
        print(
            f"{folder:16s} {corpus:26s} parity {100 * row['parity']:5.1f}%  tokenizers {row['tokenizers']['mib_s']:6.1f}  "
            f"crayon {row['crayon']['mib_s']:6.1f} MiB/s  x{row['ratio']:.1f}   decode x{row['decode_ratio']:.1f}  {extra}",
            flush=True,
        )

    batch = short_docs(10_000)
    nbytes = sum(len(d.encode("utf-8")) for d in batch)
    assert [e.ids for e in ours.encode_batch(batch)] == [e.ids for e in ref.encode_batch(batch)]
    result["batch"] = {"docs": len(batch), "bytes": nbytes}
    batch_times: dict[str, list[float]] = {label: [] for label in libs}
    for _ in range(reps):
        for label, tok in libs.items():
            batch_times[label] += timed(lambda: [e.ids for e in tok.encode_batch(batch)], 1)
    for label in libs:
        result["batch"][label] = nbytes / statistics.median(batch_times[label]) / 2**20

    with tempfile.TemporaryDirectory() as tmp:
        cart = os.path.join(tmp, f"{folder}.dat")
        ours.save_cartridge(cart)
        load_ours = timed(lambda: Tokenizer.from_file(cart), max(reps, 10))
        load_ref = timed(lambda: tokenizers.Tokenizer.from_file(str(path)), 3)
        result["load"] = {
            "crayon_in_process_ms": 1e3 * statistics.median(load_ours),
            "tokenizers_in_process_ms": 1e3 * statistics.median(load_ref),
            "crayon_fresh_process_ms": fresh_process_load(f"from crayon_hf import Tokenizer; Tokenizer.from_file({cart!r})"),
            "tokenizers_fresh_process_ms": fresh_process_load(
                f"import tokenizers; tokenizers.Tokenizer.from_file({str(path)!r})"
            ),
            "cartridge_bytes": os.path.getsize(cart),
        }
    b = result["batch"]
    print(f"{folder:16s} batch x{b['crayon'] / b['tokenizers']:.1f}  load {result['load']}", flush=True)
    return result


def write_hf_results(results: list[dict], info: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tokenizers.json").write_text(json.dumps({"machine": info, "results": results}, indent=2) + "\n")
    lines = [
        f"# crayon_hf.Tokenizer vs tokenizers {info['versions'].get('tokenizers', '?')}",
        "",
        f"{info['date']}, {info['cpu']} ({info['cores']} cores), Python {info['python']}. Single thread (pinned), "
        "a long-lived instance per library, every pass over text it has not seen (~16 KiB documents), passes "
        "alternating between libraries; `encode(doc).ids` for both; median MiB/s (min-max) over passes; parity = "
        "documents with identical ids and offsets.",
        "",
        "| tokenizer.json | corpus | parity | tokenizers MiB/s | crayon MiB/s | encode ratio | decode ratio | optional: tokie / fastokens MiB/s (parity) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        for corpus, row in r["corpora"].items():
            t, c = row["tokenizers"], row["crayon"]
            optional = " / ".join(
                f"{row[lib]['mib_s']:.1f} ({100 * row['parity_all'][lib]:.0f}%)" if lib in row else "-"
                for lib in ("tokie", "fastokens")
            )
            lines.append(_speed_row(r["vocab"], corpus, row, t, c, 1) + f" {optional} |")
    lines += [
        "",
        "| tokenizer.json | backend | batch 10k short docs, 2 threads: tokenizers / crayon MiB/s (tokie / fastokens) | load in process: tokenizers / crayon ms | fresh process (import + load): tokenizers / crayon ms | cartridge MB |",
        "|---|---|---|---|---|---:|",
    ]
    for r in results:
        b = r["batch"]
        optional = " / ".join(f"{b[x]:.1f}" if x in b else "-" for x in ("tokie", "fastokens"))
        lines.append(_batch_load_row(f"{r['vocab']} | {r['backend']}", r, "tokenizers", 1, 2, f" ({optional})"))
    (RESULTS / "tokenizers.md").write_text("\n".join(lines) + "\n")
    try:
        plot(results, info, reference="tokenizers", stem="tokenizers")
    except ImportError:
        print("matplotlib not installed: no plot (pip install matplotlib)")


# ---------------------------------------------------------------------------- transformers face


def _same_batch(a, b) -> bool:
    import numpy as np

    if list(a.keys()) != list(b.keys()):
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, np.ndarray):
            if not (isinstance(y, np.ndarray) and x.dtype == y.dtype and np.array_equal(x, y)):
                return False
        elif x != y:
            return False
    return True


def bench_transformers(folder: str, reps: int, batch: int = 1000) -> dict:
    from transformers import AutoTokenizer

    from crayon_hf.transformers import CrayonTokenizer

    path = str(SHARED / "vocab" / "hf" / folder)
    CrayonTokenizer.from_pretrained(path)  # compile into the cache once; the load below maps it
    t = time.perf_counter()
    ref = AutoTokenizer.from_pretrained(path)
    load_ref = time.perf_counter() - t
    t = time.perf_counter()
    ours = CrayonTokenizer.from_pretrained(path)
    load_ours = time.perf_counter() - t
    for tok in (ref, ours):
        if tok.pad_token is None:  # some folders name no pad token: borrow one the vocabulary has
            vocab = tok.get_vocab()
            tok.pad_token = next(t for t in (tok.eos_token, tok.unk_token, "<pad>", "<|endoftext|>", "</s>")
                                 if t is not None and t in vocab)
    docs = short_docs(batch * (reps + 1))
    slices = [docs[i * batch : (i + 1) * batch] for i in range(reps + 1)]
    calls = {
        "padded": dict(padding=True, truncation=True, max_length=128, return_tensors="np"),
        "unpadded": {},
    }
    out: dict = {"folder": folder, "class": type(ref).__name__, "backend": ours.crayon_backend,
                 "load_ms": {"transformers": 1e3 * load_ref, "crayon": 1e3 * load_ours}, "calls": {}}
    for name, kwargs in calls.items():
        times: dict[str, list[float]] = {"transformers": [], "crayon": []}
        same = 0
        ref(slices[0], **kwargs), ours(slices[0], **kwargs)  # warm-up slice, not timed
        for k, texts in enumerate(slices[1:]):
            results = {}
            order = (("transformers", ref), ("crayon", ours))
            for label, tok in order if k % 2 == 0 else order[::-1]:  # who goes first alternates
                with _no_gc():
                    t = time.perf_counter()
                    results[label] = tok(texts, **kwargs)
                    times[label].append(time.perf_counter() - t)
            same += _same_batch(results["transformers"], results["crayon"])
        row = {lib: {"ms": 1e3 * statistics.median(v), "ms_min": 1e3 * min(v), "ms_max": 1e3 * max(v)}
               for lib, v in times.items()}
        row["ratio"] = row["transformers"]["ms"] / row["crayon"]["ms"]
        row["parity"] = same / len(slices[1:])
        out["calls"][name] = row
    return out


def write_transformers_results(results: list[dict], info: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "transformers.json").write_text(json.dumps({"machine": info, "results": results}, indent=2) + "\n")
    lines = [
        f"# CrayonTokenizer vs transformers {info['versions'].get('transformers', '?')} (same folder, same process)",
        "",
        f"{info['date']}, {info['cpu']} ({info['cores']} cores), Python {info['python']}. One call tokenizes 1000 "
        "short documents of short_docs.jsonl (a new slice every pass, both tokenizers on the same slices, both on "
        "all cores); median ms per call (min-max). Padded: `tok(texts, padding=True, truncation=True, "
        "max_length=128, return_tensors=\"np\")`; unpadded: `tok(texts)`. Parity: passes whose outputs are "
        "identical in every field (keys, dtypes, values).",
        "",
        "| folder | class | crayon backend | padded: transformers / crayon ms | ratio | unpadded: transformers / crayon ms | ratio | parity | load: transformers / crayon ms |",
        "|---|---|---|---|---:|---|---:|---:|---|",
    ]
    for r in results:
        p, u = r["calls"]["padded"], r["calls"]["unpadded"]
        parity = min(p["parity"], u["parity"])
        lines.append(
            f"| {r['folder']} | {r['class']} | {r['backend']} "
            f"| {p['transformers']['ms']:.1f} / {p['crayon']['ms']:.1f} | **{p['ratio']:.1f}x** "
            f"| {u['transformers']['ms']:.1f} / {u['crayon']['ms']:.1f} | **{u['ratio']:.1f}x** "
            f"| {100 * parity:.0f}% | {r['load_ms']['transformers']:.0f} / {r['load_ms']['crayon']:.0f} |"
        )
    (RESULTS / "transformers.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
        names = [r["folder"] for r in results]
        for ax, call in zip(axes, ("padded", "unpadded")):
            xs = range(len(results))
            ax.bar([x - 0.2 for x in xs], [r["calls"][call]["transformers"]["ms"] for r in results], width=0.4,
                   label="transformers (stock)", color="#999999")
            ax.bar([x + 0.2 for x in xs], [r["calls"][call]["crayon"]["ms"] for r in results], width=0.4,
                   label="CrayonTokenizer", color="#d9534f")
            ax.set_xticks(list(xs))
            ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
            ax.set_title(f"tok(1000 short texts) {call}", fontsize=10)
            ax.grid(axis="y", alpha=0.3)
        axes[0].set_ylabel("ms per call (lower is better)")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper right", ncol=2, fontsize=8, frameon=False)
        fig.suptitle(f"CrayonTokenizer vs transformers {info['versions'].get('transformers')} "
                     f"({info['cpu']}, {info['cores']} cores, {info['date']})", fontsize=9, x=0.3)
        fig.tight_layout(rect=(0, 0, 1, 0.95))
        fig.savefig(RESULTS / "transformers.png", dpi=110)
    except ImportError:
        print("matplotlib not installed: no plot (pip install matplotlib)")


def fresh_process_load(code: str, reps: int = 5) -> float:
    """Median wall time of `python -c code` in a fresh interpreter, in ms."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=tempfile.gettempdir())
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except ImportError:
        return None


def machine() -> dict:
    import numpy
    import tiktoken

    import crayon_hf

    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": time.strftime("%Y-%m-%d"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {"crayon-hf": crayon_hf.__version__, "tiktoken": tiktoken.__version__, "numpy": numpy.__version__,
                     "tokenizers": _version("tokenizers")},
    }


def _speed_row(vocab: str, corpus: str, row: dict, ref: dict, ours: dict, digits: int) -> str:
    """One markdown row: parity, both speeds with their spread, encode and decode ratios."""
    return (
        f"| {vocab} | {corpus.rsplit('.', 1)[0]} | {100 * row['parity']:.1f}% "
        f"| {ref['mib_s']:.1f} ({ref['mib_s_min']:.1f}-{ref['mib_s_max']:.1f}) "
        f"| {ours['mib_s']:.1f} ({ours['mib_s_min']:.1f}-{ours['mib_s_max']:.1f}) "
        f"| **{row['ratio']:.{digits}f}x** | {row['decode_ratio']:.{digits}f}x |"
    )


def _batch_load_row(label: str, r: dict, ref: str, ratio_digits: int, ms_digits: int, extra: str = "") -> str:
    """One markdown row: batch speeds and ratio, in-process and fresh-process load, cartridge size."""
    b, ld = r["batch"], r["load"]
    return (
        f"| {label} | {b[ref]:.1f} / {b['crayon']:.1f} (x{b['crayon'] / b[ref]:.{ratio_digits}f}){extra} "
        f"| {ld[f'{ref}_in_process_ms']:.1f} / {ld['crayon_in_process_ms']:.{ms_digits}f} "
        f"| {ld[f'{ref}_fresh_process_ms']:.0f} / {ld['crayon_fresh_process_ms']:.0f} | {ld['cartridge_bytes'] / 1e6:.1f} |"
    )


def write_results(results: list[dict], info: dict, isolated: dict | None = None) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tiktoken.json").write_text(
        json.dumps({"machine": info, "results": results, "isolated": isolated}, indent=2) + "\n"
    )
    lines = [
        f"# crayon-hf vs tiktoken {info['versions']['tiktoken']}",
        "",
        f"{info['date']}, {info['cpu']} ({info['cores']} cores), Python {info['python']}. Single thread (pinned), "
        "a long-lived instance per library, every pass over text it has not seen (~16 KiB documents), passes alternating "
        "between libraries; median MiB/s (min-max) over passes; parity = documents with identical ids.",
        "",
        "| vocab | corpus | parity | tiktoken MiB/s | crayon MiB/s | encode ratio | decode ratio |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for corpus, row in r["corpora"].items():
            t, c = row["tiktoken"], row["crayon"]
            lines.append(_speed_row(r["vocab"], corpus, row, t, c, 2))
    lines += [
        "",
        "| vocab | batch 10k short docs, 2 threads: tiktoken / crayon MiB/s | load in process: tiktoken / crayon ms | fresh process (import + load): tiktoken / crayon ms | cartridge MB |",
        "|---|---|---|---|---:|",
    ]
    for r in results:
        lines.append(_batch_load_row(r["vocab"], r, "tiktoken", 2, 3))
    if isolated:
        lines += [
            "",
            "Isolated: each library alone in its own pinned process (no shared caches), same new-text passes, median MiB/s.",
            "",
            "| vocab | corpus | tiktoken | crayon | ratio |",
            "|---|---|---:|---:|---:|",
        ]
        for name, rows in isolated.items():
            for corpus, row in rows.items():
                lines.append(
                    f"| {name} | {corpus.rsplit('.', 1)[0]} | {row['tiktoken']:.1f} | {row['crayon']:.1f} | **{row['ratio']:.2f}x** |"
                )
    (RESULTS / "tiktoken.md").write_text("\n".join(lines) + "\n")
    try:
        plot(results, info)
    except ImportError:
        print("matplotlib not installed: no plot (pip install matplotlib)")


def plot(results: list[dict], info: dict, reference: str = "tiktoken", stem: str = "tiktoken") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    corpora = list(results[0]["corpora"])
    cols = min(len(results), 5)
    rows = (len(results) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.6 * rows), sharey=True, squeeze=False)
    for ax in axes.flat[len(results):]:
        ax.set_visible(False)
    axes = list(axes.flat)
    for ax, r in zip(axes, results):
        xs = range(len(corpora))
        ref = [r["corpora"][c][reference]["mib_s"] for c in corpora]
        ours = [r["corpora"][c]["crayon"]["mib_s"] for c in corpora]
        ax.bar([x - 0.2 for x in xs], ref, width=0.4, label=reference, color="#999999")
        ax.bar([x + 0.2 for x in xs], ours, width=0.4, label="crayon-hf", color="#d9534f")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([c.split("_")[0] + "\n" + c.split("_")[1].split(".")[0] for c in corpora], fontsize=8)
        ax.set_title(r["vocab"])
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("single-thread encode, MiB/s")
    axes[0].legend()
    fig.suptitle(f"crayon-hf vs {reference} {info['versions'].get(reference)} ({info['cpu']}, {info['date']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{stem}.png", dpi=110)


def _merged(previous: Path, results: list[dict], folders: list[str] | None) -> list[dict]:
    """With --folder, the new rows replace those folders' rows in the committed results (kept in
    their order); without it, the new results are the whole table."""
    if not folders or not previous.exists():
        return results
    old = json.loads(previous.read_text())["results"]
    fresh = {r.get("vocab", r.get("folder")): r for r in results}
    merged = [fresh.pop(r.get("vocab", r.get("folder")), r) for r in old]
    return merged + list(fresh.values())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", action="append", choices=VOCABS)
    p.add_argument("--corpus", action="append")
    p.add_argument("--reps", type=int, default=5, help="passes per library, each over new text")
    p.add_argument("--slice-bytes", type=int, default=256 << 10, help="bytes of new text per pass (default 256 KiB)")
    p.add_argument("--no-pin", action="store_true", help="do not pin the process to one core")
    p.add_argument("--isolated", action="store_true", help="also run each library alone in its own process")
    p.add_argument("--hf", action="store_true", help="crayon_hf.Tokenizer vs tokenizers on every tokenizer.json folder")
    p.add_argument("--folder", action="append", choices=TRANSFORMERS_FOLDERS,
                   help="with --hf or --transformers: only these folders")
    p.add_argument("--transformers", action="store_true", help="CrayonTokenizer vs the stock transformers tokenizer")
    p.add_argument("--worker", nargs=5, metavar=("LIB", "VOCAB", "CORPUS", "REPS", "SLICE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        lib, name, corpus, reps, slice_bytes = args.worker
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        print(json.dumps(isolated_speeds(lib, name, corpus, int(reps), int(slice_bytes))))
        return
    if args.transformers:
        os.environ.setdefault("RAYON_NUM_THREADS", "2")
        info = machine()
        info["versions"]["transformers"] = _version("transformers")
        results = [bench_transformers(f, args.reps) for f in args.folder or TRANSFORMERS_FOLDERS]
        write_transformers_results(_merged(RESULTS / "transformers.json", results, args.folder), info)
        print(f"wrote {RESULTS}/transformers.md, .json, .png")
        return
    if args.hf:
        os.environ.setdefault("RAYON_NUM_THREADS", "2")
        os.environ.setdefault("FASTOKENS_BPE_THREADS", "1")  # no second core inside one encode
        info = machine()
        results = [bench_hf(f, args.corpus or DEFAULT_CORPORA, args.reps, args.slice_bytes) for f in args.folder or HF_FOLDERS]
        write_hf_results(_merged(RESULTS / "tokenizers.json", results, args.folder), info)
        print(f"wrote {RESULTS}/tokenizers.md, .json, .png")
        return
    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    info = machine()
    results = [bench_vocab(v, args.corpus or DEFAULT_CORPORA, args.reps, args.slice_bytes) for v in args.vocab or VOCABS]
    isolated = (
        run_isolated(args.vocab or VOCABS, args.corpus or DEFAULT_CORPORA, args.reps, args.slice_bytes)
        if args.isolated
        else None
    )
    write_results(results, info, isolated)
    print(f"wrote {RESULTS}/tiktoken.md, .json, .png")


if __name__ == "__main__":
    main()
