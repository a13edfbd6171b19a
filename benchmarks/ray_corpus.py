"""`encode-corpus --ray` against single-machine `encode-corpus`, and how it scales with workers.

Input: a JSONL corpus of about --mib MiB made from every shared corpus (short_docs.jsonl's records,
and each *.txt cut into ~8 KiB documents), repeated until it is big enough, written under --tmp.
Each measurement:

* **single machine**: `encode_corpus(..., threads=2)` in a fresh process (the command's default
  on this machine: every core).
* **Ray, N CPUs**: `encode_corpus_ray` on a local Ray started once with `num_cpus=N` (one CPU and
  one encoding thread per task); the run is timed with the cluster already up (how a cluster is
  used), and Ray's start-up is reported apart. Every Ray output is compared byte for byte with the
  single-machine output (the run fails on a difference).

N above the machine's cores simulates more workers than there are: on the 2-core CI-class VM,
N = 1, 2 are real parallelism and N = 4 is two workers per core (it measures Ray's overhead with
more, smaller concurrent tasks, not speed-up). MiB/s counts UTF-8 input bytes; per-core MiB/s
divides by min(N, cores).

    python benchmarks/ray_corpus.py --mib 128 --workers 1 2 4

Writes benchmarks/results/ray_corpus.{md,json}.
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CRAYON_SHARED", ROOT.parent / "shared"))
CORPORA = SHARED / "corpora"
RESULTS = ROOT / "benchmarks" / "results"

_SINGLE = r"""
import json, sys, time
from crayon_hf.corpus import encode_corpus
t = time.perf_counter()
s = encode_corpus([sys.argv[1]], sys.argv[2], sys.argv[3], threads=2, progress=False)
print(json.dumps({"seconds": time.perf_counter() - t, "n_tokens": s["n_tokens"]}))
"""

_RAY = r"""
import json, sys, time
t0 = time.perf_counter()
import ray
ray.init(num_cpus=int(sys.argv[4]), include_dashboard=False, object_store_memory=256 << 20,
         _node_ip_address="127.0.0.1", log_to_driver=False)
up = time.perf_counter() - t0
from crayon_hf.ray_corpus import encode_corpus_ray
runs = []
for _ in range(int(sys.argv[5])):
    t = time.perf_counter()
    s = encode_corpus_ray([sys.argv[1]], sys.argv[2], sys.argv[3], progress=False)
    runs.append(time.perf_counter() - t)
ray.shutdown()
print(json.dumps({"startup": up, "runs": runs, "tasks": s["tasks"], "n_tokens": s["n_tokens"]}))
"""


def make_corpus(path: Path, mib: int) -> int:
    records = [json.loads(line)["text"] for line in open(CORPORA / "short_docs.jsonl", encoding="utf-8")]
    for txt in sorted(CORPORA.glob("*.txt")):
        text = txt.read_text(encoding="utf-8")
        records += [text[i:i + 8192] for i in range(0, len(text), 8192)]
    lines = [json.dumps({"text": r}, ensure_ascii=False) + "\n" for r in records]
    size = 0
    with open(path, "w", encoding="utf-8") as f:
        while size < mib << 20:
            for line in lines:
                f.write(line)
            size = f.tell()
    return size


def child(code: str, *args: str) -> dict:
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tempfile.gettempdir())
    if run.returncode:
        raise SystemExit(run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--tokenizer", default="cl100k_base")
    ap.add_argument("--tmp", default=tempfile.gettempdir())
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        src = Path(d) / "corpus.jsonl"
        size = make_corpus(src, args.mib)
        mib = size / (1 << 20)
        rows = []
        single = [child(_SINGLE, str(src), str(Path(d) / "single.bin"), args.tokenizer) for _ in range(args.runs)]
        best = min(r["seconds"] for r in single)
        rows.append({"subject": "single machine, 2 threads", "cpus": 2, "seconds": best, "startup": None, "tasks": None})
        for n in args.workers:
            r = child(_RAY, str(src), str(Path(d) / "ray.bin"), args.tokenizer, str(n), str(args.runs))
            for ext in ("", ".idx.npy"):
                if not filecmp.cmp(Path(d) / f"single.bin{ext}", Path(d) / f"ray.bin{ext}", shallow=False):
                    raise SystemExit(f"Ray output differs from the single-machine output (ray.bin{ext})")
            rows.append({"subject": f"Ray, {n} CPU{'s' if n > 1 else ''}" + (" (simulated: more workers than cores)"
                                                                           if n > cores else ""),
                         "cpus": n, "seconds": min(r["runs"]), "startup": r["startup"], "tasks": r["tasks"]})
    for r in rows:
        r["mib_s"] = mib / r["seconds"]
        r["per_core_mib_s"] = r["mib_s"] / min(r["cpus"], cores)
        r["x_single"] = r["seconds"] / best
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": f"{platform.processor() or platform.machine()}, {cores} cores",
            "python": platform.python_version(), "mib": round(mib, 1), "tokenizer": args.tokenizer, "runs": args.runs,
            "load_average": os.getloadavg()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ray_corpus.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    lines = [
        "# Corpus encoding on Ray: `encode-corpus --ray` vs single machine", "",
        f"{meta['date']}; {meta['machine']}, Python {meta['python']}; load average at the end "
        f"{meta['load_average'][0]:.1f} (1 min); generated by `benchmarks/ray_corpus.py` (method in its docstring). "
        f"Input: {meta['mib']} MiB of JSONL from every shared corpus; tokenizer {args.tokenizer}; best of "
        f"{args.runs} runs; every Ray output byte-identical to the single-machine one. All Ray workers run on this one "
        "machine: more CPUs than cores is a simulation.", "",
        "| subject | Ray CPUs | tasks | seconds | MiB/s | MiB/s per core | time / single machine | Ray start-up s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['subject']} | {r['cpus'] if r['startup'] is not None else '-'} | {r['tasks'] or '-'} | "
                     f"{r['seconds']:.2f} | {r['mib_s']:.1f} | {r['per_core_mib_s']:.1f} | {r['x_single']:.2f}x | "
                     f"{'-' if r['startup'] is None else format(r['startup'], '.1f')} |")
    (RESULTS / "ray_corpus.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
