"""Corpus encoding throughput and memory: `crayon encode-corpus` against the reference libraries.

Each measurement runs in a fresh interpreter, so its peak RSS (VmHWM) is its own:

* **crayon-hf**: `crayon_hf.corpus.encode_corpus(inputs, out, tokenizer, threads=T)`, the function
  behind `crayon encode-corpus`; end to end (reading, encoding, writing the ids, the index and the
  sidecar), on 1 thread and on every core.
* **reference**: the same job written the obvious way with the reference library, on every core:
  read the documents, encode them with `tiktoken`'s `encode_ordinary_batch` or `tokenizers`'
  `encode_batch_fast` (plain text files are one document each, encoded whole), concatenate, write.
  It holds everything in memory, so it only runs on the small inputs; its ids are compared with
  crayon-hf's output (the run fails on any difference).

Inputs: `text` is every `*.txt` of the shared corpora concatenated (one document of ~27 MB, so the
parallel encoder's block splitting is what is measured); `jsonl` is `short_docs.jsonl` (17k short
documents, the batch path). `--big-gib N` adds a plain-text file of N GiB made by repeating the
corpora (generated under --tmp, deleted afterwards); it shows that RSS does not grow with input
size. MiB/s counts UTF-8 input bytes.

    python benchmarks/corpus.py                         # cl100k_base and gpt2, text + jsonl
    python benchmarks/corpus.py --big-gib 5 --only cl100k_base

Writes benchmarks/results/corpus.{md,json}.
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
CORPORA = SHARED / "corpora"
RESULTS = ROOT / "benchmarks" / "results"

# name -> (what encode_corpus is given, reference library)
TOKENIZERS = {
    "cl100k_base": ("cl100k_base", "tiktoken"),
    "gpt2": (str(SHARED / "vocab" / "hf" / "gpt2"), "tokenizers"),
}

# Runs in the child: one job, prints one JSON line (seconds, tokens, peak RSS).
_CHILD = r"""
import json, sys, time, resource
import numpy as np
job = json.loads(sys.argv[1])

def vmhwm_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def documents(path):
    if path.endswith(".jsonl"):
        with open(path, encoding="utf-8") as f:
            return [json.loads(line)["text"] for line in f if line.strip()]
    with open(path, encoding="utf-8", newline="") as f:  # every byte, \r\n included
        return [f.read()]

if job["kind"] == "crayon":
    from crayon_hf.corpus import encode_corpus
    start = time.perf_counter()
    s = encode_corpus(job["inputs"], job["out"], job["tokenizer"], threads=job["threads"], progress=False)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "tokens": s["n_tokens"], "rss_mib": vmhwm_mib()}))
else:
    if job["library"] == "tiktoken":
        import tiktoken
        import tiktoken.load
        from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS  # each name's pattern and specials
        known = KNOWN_ENCODINGS[job["tokenizer"]]
        ranks = tiktoken.load.load_tiktoken_bpe(job["rank_file"])
        enc = tiktoken.Encoding(job["tokenizer"], pat_str=known.pat_str, mergeable_ranks=ranks,
                                special_tokens=known.special_tokens)
        run = lambda docs: enc.encode_ordinary_batch(docs, num_threads=job["threads"])
    else:
        import os
        os.environ["RAYON_NUM_THREADS"] = str(job["threads"])
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(job["tokenizer"] + "/tokenizer.json")
        run = lambda docs: [e.ids for e in tok.encode_batch_fast(docs, add_special_tokens=False)]
    start = time.perf_counter()
    parts = []
    for path in job["inputs"]:
        parts.extend(np.asarray(ids, dtype=np.uint32) for ids in run(documents(path)))
    ids = np.concatenate(parts) if parts else np.zeros(0, np.uint32)
    ids.tofile(job["out"])
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "tokens": int(ids.size), "rss_mib": vmhwm_mib()}))
"""


def run_child(job: dict) -> dict:
    # This checkout's crayon_hf when it is built in place, else the installed one.
    built = any((ROOT / "src" / "crayon_hf").glob("_crayon*.so"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src")] * built + [os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(job)], capture_output=True, text=True,
                          cwd=tempfile.gettempdir(), env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{job['kind']} {job['tokenizer']} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def make_text(path: Path, target_bytes: int) -> None:
    """Concatenates the shared plain-text corpora (repeated until target_bytes, if given)."""
    sources = sorted(CORPORA.glob("*.txt"))
    if not sources:
        raise SystemExit(f"no corpora under {CORPORA}")
    written = 0
    with open(path, "wb") as out:
        while True:
            for src in sources:
                data = src.read_bytes()
                out.write(data)
                written += len(data)
                if target_bytes and written >= target_bytes:
                    return
            if not target_bytes:
                return


def measure(name: str, spec: str, library: str, input_name: str, inputs: list[str], reps: int,
            tmp: Path, reference: bool) -> list[dict]:
    nbytes = sum(os.path.getsize(p) for p in inputs)
    rows = []
    out = tmp / "tokens.bin"
    crayon_ids = None
    for label, kind, threads in [("crayon-hf, 1 thread", "crayon", 1), ("crayon-hf", "crayon", 0),
                                 *([(f"{library} (reference pipeline)", "reference", os.cpu_count() or 1)]
                                   if reference else [])]:
        runs = []
        for _ in range(reps):
            job = {"kind": kind, "library": library, "tokenizer": spec, "inputs": inputs,
                   "out": str(out), "threads": threads,
                   "rank_file": str(SHARED / "vocab" / "tiktoken" / f"{spec}.tiktoken")}
            runs.append(run_child(job))
            if kind == "crayon" and threads == 0 and crayon_ids is None and reference:
                import numpy as np

                crayon_ids = np.fromfile(out, dtype=np.uint32)
        seconds = statistics.median(r["seconds"] for r in runs)
        row = {"tokenizer": name, "input": input_name, "input_mib": nbytes / 2**20, "subject": label,
               "threads": threads or os.cpu_count(), "reps": reps,
               "seconds": seconds, "seconds_all": [r["seconds"] for r in runs],
               "mib_s": nbytes / 2**20 / seconds, "tokens": runs[0]["tokens"],
               "rss_mib": max(r["rss_mib"] for r in runs)}
        if kind == "reference" and crayon_ids is not None:
            import numpy as np

            ref_ids = np.fromfile(out, dtype=np.uint32)
            row["identical_ids"] = bool(ref_ids.size == crayon_ids.size and (ref_ids == crayon_ids).all())
            if not row["identical_ids"]:
                raise SystemExit(f"{name} on {input_name}: crayon-hf's ids differ from {library}'s")
        rows.append(row)
        print(f"{name:12} {input_name:10} {label:34} {row['mib_s']:7.1f} MiB/s  {seconds:8.2f} s  "
              f"RSS {row['rss_mib']:7.1f} MiB", flush=True)
        out.unlink(missing_ok=True)
        for extra in tmp.glob("tokens.bin.*"):
            extra.unlink()
    return rows


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def write_report(rows: list[dict], meta: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "corpus.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    lines = [
        "# Corpus encoding: `crayon encode-corpus`",
        "",
        f"Machine: {meta['cpu']}, {meta['cores']} cores, Python {meta['python']}; {meta['date']}; "
        f"load average at the end {meta['load_average_at_end'][0]:.1f} (1 min), "
        f"{meta['load_average_at_end'][2]:.1f} (15 min); "
        "generated by `benchmarks/corpus.py` (method in its docstring).",
        "",
        "End to end: read, encode, write ids + index + sidecar, each run a fresh process. MiB/s of UTF-8 "
        "input, median of the runs; RSS is the peak (VmHWM) of the process. The reference pipeline holds the "
        "whole corpus in memory and is run on the small inputs only; its ids equal crayon-hf's output.",
        "",
        "| tokenizer | input | MiB | subject | threads | runs | MiB/s | seconds | peak RSS MiB | x reference |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    refs = {(r["tokenizer"], r["input"]): r for r in rows if "reference" in r["subject"]}
    for r in rows:
        ref = refs.get((r["tokenizer"], r["input"]))
        ratio = f"{r['mib_s'] / ref['mib_s']:.2f}x" if ref and r is not ref else ""
        lines.append(f"| {r['tokenizer']} | {r['input']} | {r['input_mib']:,.0f} | {r['subject']} | {r['threads']} | "
                     f"{r['reps']} | {r['mib_s']:.1f} | {r['seconds']:.2f} | {r['rss_mib']:.0f} | {ratio} |")
    (RESULTS / "corpus.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", nargs="*", choices=sorted(TOKENIZERS))
    ap.add_argument("--big-gib", type=float, default=0.0, help="also encode a generated text file of this many GiB")
    ap.add_argument("--tmp", default=tempfile.gettempdir(), help="where generated inputs and outputs go")
    ap.add_argument("--big-only", action="store_true", help="measure only the --big-gib file")
    ap.add_argument("--merge", action="store_true", help="keep the rows of corpus.json not measured now")
    args = ap.parse_args()

    names = args.only or list(TOKENIZERS)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        tmp = Path(d)
        text = tmp / "corpora.txt"
        make_text(text, 0)
        inputs = [] if args.big_only else [("text", [str(text)], args.reps, True),
                                           ("jsonl", [str(CORPORA / "short_docs.jsonl")], args.reps, True)]
        if args.big_gib:
            big = tmp / "big.txt"
            print(f"writing {args.big_gib:g} GiB of text to {big} ...", flush=True)
            make_text(big, int(args.big_gib * 2**30))
            inputs.append((f"text {args.big_gib:g} GiB", [str(big)], 1, False))
        for name in names:
            spec, library = TOKENIZERS[name]
            for input_name, paths, reps, reference in inputs:
                rows += measure(name, spec, library, input_name, paths, reps, tmp, reference)
    if args.merge and (RESULTS / "corpus.json").exists():
        measured = {(r["tokenizer"], r["input"]) for r in rows}
        old = json.loads((RESULTS / "corpus.json").read_text())["rows"]
        rows = [r for r in old if (r["tokenizer"], r["input"]) not in measured] + rows
    meta = {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "load_average_at_end": os.getloadavg()}
    write_report(rows, meta)
    print(f"wrote {RESULTS / 'corpus.md'}")


if __name__ == "__main__":
    main()
