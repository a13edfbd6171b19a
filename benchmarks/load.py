#!/usr/bin/env python3
"""How long it takes to load a tokenizer: every shared vocabulary, every face.

What it answers:
  1. in-process load of a cartridge, median of many loads with the file in the page cache (what
     swapping vocabularies costs): the tiktoken face (`Encoding.from_cartridge`) for each rank file,
     the tokenizers face (`Tokenizer.from_cartridge`) for each tokenizer.json folder, and beside
     them the reference libraries' own load (`tokenizers.Tokenizer.from_file(tokenizer.json)`,
     `tiktoken.Encoding(...)` from the rank file);
  2. the one-time cost of the first encode after a load in a fresh process (checksum and table
     checks, deferred from load; docs/cartridge.md), and fresh-process import + load + first encode;
  3. `CrayonTokenizer.from_pretrained(folder saved by crayon-hf)` against stock
     `AutoTokenizer.from_pretrained` on the same folder; and the same on the shared folder itself
     (not saved by crayon-hf), from its second load on (restored from the cache), and its first
     load with an empty cache (the stock load, the state taken down, the cartridge compiled).

    python benchmarks/load.py                         # writes benchmarks/results/load.{md,json}
    python benchmarks/load.py --label before          # another build (run with its interpreter):
                                                      # kept beside the others in load.json/md
    python benchmarks/load.py --quick                 # fewer repetitions, three HF folders

Method: loads are timed back to back with time.perf_counter, after one untimed load (the file is
then in the page cache); the median is reported. Fresh-process numbers are medians of
--fresh runs of `python -c ...`. Everything runs on whatever machine runs it: the numbers in
benchmarks/results were taken on a shared 2-core VM and carry its noise (the JSON records the
load average).
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

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("CRAYON_SHARED", HERE.parent.parent / "shared"))
VOCAB = SHARED / "vocab"
RANK_FILES = ["r50k_base", "cl100k_base", "o200k_base", "llama3"]
HF_FOLDERS = ["gpt2", "roberta_base", "gpt_neox_20b", "phi2", "falcon", "llama3_1", "qwen2_5", "deepseek_v3", "clip",
              "whisper_large_v3", "mistral_v0_1", "phi3_mini", "gemma", "bert_base_uncased", "t5_small",
              "xlm_roberta_paraphrase_mpnet"]
PRETRAINED = ["gpt2", "llama3_1", "qwen2_5", "gemma", "bert_base_uncased"]


def median_ms(call, n: int) -> float:
    call()  # the file in the page cache, lazy imports done
    times = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def fresh(code: str, runs: int) -> dict[str, float]:
    """Medians of the timings a child prints as JSON."""
    results = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env=dict(os.environ, HF_HUB_OFFLINE="1"))
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {k: statistics.median(r[k] for r in results) for k in results[0]}


def build(work: Path, hf_folders: list[str]) -> tuple[dict[str, Path], dict[str, Path]]:
    """Cartridges for every rank file and tokenizer.json, in `work`."""
    from crayon_hf import Tokenizer
    from crayon_hf.conversion.tiktoken_rank import convert_rank_file

    tk, hf = {}, {}
    for name in RANK_FILES:
        target = work / f"{name}.tiktoken.dat"
        if not target.exists():
            target.write_bytes(convert_rank_file(VOCAB / "tiktoken" / f"{name}.tiktoken"))
        tk[name] = target
    for name in hf_folders:
        target = work / f"{name}.dat"
        if not target.exists():
            tok = Tokenizer.from_file(VOCAB / "hf" / name / "tokenizer.json")
            if tok.crayon_backend != "native":
                continue
            tok.save_cartridge(target)
        hf[name] = target
    return tk, hf


def reference_tiktoken(name: str):
    import tiktoken
    import tiktoken.load

    from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS

    known = KNOWN_ENCODINGS[name] if isinstance(KNOWN_ENCODINGS, dict) else next(k for k in KNOWN_ENCODINGS if k.name == name)
    ranks = tiktoken.load.load_tiktoken_bpe(str(VOCAB / "tiktoken" / f"{name}.tiktoken"))
    return lambda: tiktoken.Encoding(name, pat_str=known.pat_str, mergeable_ranks=ranks,
                                     special_tokens=dict(known.special_tokens))


def measure(args: argparse.Namespace) -> dict:
    from crayon_hf import Tokenizer
    from crayon_hf.tiktoken import Encoding

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    hf_folders = ["gpt2", "qwen2_5", "gemma"] if args.quick else HF_FOLDERS
    pretrained = ["qwen2_5", "gemma"] if args.quick else PRETRAINED
    n = 20 if args.quick else args.repeat
    tk, hf = build(work, hf_folders)
    rows: dict = {"tiktoken": {}, "tokenizers": {}, "fresh": {}, "from_pretrained": {}, "from_pretrained_plain": {},
                  "from_pretrained_first": {}}

    for name, path in tk.items():
        row = {"file_mb": round(path.stat().st_size / 2**20, 1),
               "crayon_ms": median_ms(lambda: Encoding.from_cartridge(path), n)}
        try:
            row["tiktoken_ms"] = median_ms(reference_tiktoken(name), 3)
        except Exception as e:  # noqa: BLE001 - the reference is optional here
            row["tiktoken_error"] = repr(e)
        rows["tiktoken"][name] = row
        print("tiktoken", name, row, flush=True)

    import tokenizers

    for name, path in hf.items():
        source = VOCAB / "hf" / name / "tokenizer.json"
        row = {"file_mb": round(path.stat().st_size / 2**20, 1),
               "crayon_ms": median_ms(lambda: Tokenizer.from_cartridge(path), n),
               "tokenizers_ms": median_ms(lambda: tokenizers.Tokenizer.from_file(str(source)), 3)}
        rows["tokenizers"][name] = row
        print("tokenizers", name, row, flush=True)

    timer = "import time, json; t0 = time.perf_counter()\n"
    cases = {
        "tiktoken face, o200k_base": (
            "import crayon_hf.tiktoken as ct; t1 = time.perf_counter()\n"
            f"e = ct.Encoding.from_cartridge({str(tk['o200k_base'])!r}); t2 = time.perf_counter()\n"
            "e.encode('hello world'); t3 = time.perf_counter()\n"),
        "tokenizers face, qwen2_5": (
            "from crayon_hf import Tokenizer; t1 = time.perf_counter()\n"
            f"e = Tokenizer.from_cartridge({str(hf['qwen2_5'])!r}); t2 = time.perf_counter()\n"
            "e.encode('hello world'); t3 = time.perf_counter()\n"),
        "reference tokenizers, qwen2_5": (
            "import tokenizers; t1 = time.perf_counter()\n"
            f"e = tokenizers.Tokenizer.from_file({str(VOCAB / 'hf' / 'qwen2_5' / 'tokenizer.json')!r}); "
            "t2 = time.perf_counter()\ne.encode('hello world'); t3 = time.perf_counter()\n"),
    }
    for label, body in cases.items():
        code = timer + body + ("print(json.dumps({'import_ms': (t1 - t0) * 1e3, 'load_ms': (t2 - t1) * 1e3, "
                               "'first_encode_ms': (t3 - t2) * 1e3, 'total_ms': (t3 - t0) * 1e3}))")
        rows["fresh"][label] = fresh(code, args.fresh)
        print("fresh", label, rows["fresh"][label], flush=True)

    # Cold load as `crayon bench --suite` measures it (the README's "cold load" column): a fresh
    # interpreter imports the library and loads the vocabulary, nothing else.
    from crayon_hf.bench.measure import fresh_process

    rows["cold"] = {}
    cold_reps = 2 if args.quick else 3
    for name, path in tk.items():
        known = f"from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS as K\nk = K[{name!r}]\n"
        ref = (f"import tiktoken, tiktoken.load\n{known}"
               f"tok = tiktoken.Encoding({name!r}, pat_str=k.pat_str, special_tokens=dict(k.special_tokens), "
               f"mergeable_ranks=tiktoken.load.load_tiktoken_bpe({str(VOCAB / 'tiktoken' / f'{name}.tiktoken')!r}))")
        ours = f"import crayon_hf.tiktoken as tk\ntok = tk.Encoding.from_cartridge({str(path)!r})"
        rows["cold"][name] = {
            "crayon_ms": statistics.median(fresh_process(ours)["load_ms"] for _ in range(cold_reps)),
            "reference_ms": statistics.median(fresh_process(ref)["load_ms"] for _ in range(cold_reps)),
        }
        print("cold", name, rows["cold"][name], flush=True)
    for name, path in hf.items():
        ours = f"from crayon_hf import Tokenizer\ntok = Tokenizer.from_file({str(path)!r})"
        ref = f"import tokenizers\ntok = tokenizers.Tokenizer.from_file({str(VOCAB / 'hf' / name / 'tokenizer.json')!r})"
        rows["cold"][name] = {
            "crayon_ms": statistics.median(fresh_process(ours)["load_ms"] for _ in range(cold_reps)),
            "reference_ms": statistics.median(fresh_process(ref)["load_ms"] for _ in range(cold_reps)),
        }
        print("cold", name, rows["cold"][name], flush=True)

    from transformers import AutoTokenizer

    from crayon_hf.transformers import CrayonTokenizer

    stock_load = getattr(AutoTokenizer, "_crayon_original_from_pretrained", None)
    for name in pretrained:
        saved = work / f"saved-{name}"
        if not saved.exists():
            CrayonTokenizer.from_pretrained(str(VOCAB / "hf" / name)).save_pretrained(str(saved))
        ours = median_ms(lambda: CrayonTokenizer.from_pretrained(str(saved)), 5 if args.quick else 10)
        if stock_load is not None:
            stock = median_ms(lambda: stock_load.__func__(AutoTokenizer, str(saved)), 3)
        else:
            stock = median_ms(lambda: AutoTokenizer.from_pretrained(str(saved)), 3)
        lazy = "_tokenizer" not in CrayonTokenizer.from_pretrained(str(saved)).__dict__
        rows["from_pretrained"][name] = {"crayon_ms": ours, "stock_ms": stock, "speedup": stock / ours,
                                         "backend_deferred": lazy}
        print("from_pretrained", name, rows["from_pretrained"][name], flush=True)
        # The shared folder itself, which crayon-hf did not save: restored from the cache from the
        # second load on (median_ms's untimed first call is the stock load that remembers it).
        plain = str(VOCAB / "hf" / name)
        ours = median_ms(lambda: CrayonTokenizer.from_pretrained(plain), 5 if args.quick else 10)
        if stock_load is not None:
            stock = median_ms(lambda: stock_load.__func__(AutoTokenizer, plain), 3)
        else:
            stock = median_ms(lambda: AutoTokenizer.from_pretrained(plain), 3)
        lazy = "_tokenizer" not in CrayonTokenizer.from_pretrained(plain).__dict__
        rows["from_pretrained_plain"][name] = {"crayon_ms": ours, "stock_ms": stock, "speedup": stock / ours,
                                               "backend_deferred": lazy}
        print("from_pretrained_plain", name, rows["from_pretrained_plain"][name], flush=True)
        # The first load of all, with an empty cache: once per folder and machine (median of 3,
        # each in a cache of its own).
        firsts = []
        previous = os.environ.get("CRAYON_HF_CACHE")
        for _ in range(3):
            with tempfile.TemporaryDirectory(dir=work) as empty:
                os.environ["CRAYON_HF_CACHE"] = empty
                try:
                    t = time.perf_counter()
                    CrayonTokenizer.from_pretrained(plain)
                    firsts.append((time.perf_counter() - t) * 1e3)
                finally:
                    if previous is None:
                        del os.environ["CRAYON_HF_CACHE"]
                    else:
                        os.environ["CRAYON_HF_CACHE"] = previous
        first = statistics.median(firsts)
        rows["from_pretrained_first"][name] = {"crayon_ms": first, "stock_ms": stock, "ratio": first / stock}
        print("from_pretrained_first", name, rows["from_pretrained_first"][name], flush=True)
    return rows


def render(results: dict) -> str:
    lines = ["# Load times", "",
             "Written by `benchmarks/load.py`; medians, file in the page cache. Machine, load average and",
             "versions per label are in load.json. Shared 2-core VM: expect noise of tens of percent.", ""]
    labels = list(results)

    def table(title: str, section: str, cols: list[tuple[str, str]]) -> None:
        lines.extend([f"## {title}", ""])
        header = ["vocabulary"] + [f"{c} ({lab})" for lab in labels for _, c in cols]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        names: list[str] = []
        for lab in labels:
            for k in results[lab]["rows"].get(section, {}):
                if k not in names:
                    names.append(k)
        for k in names:
            cells = [k]
            for lab in labels:
                row = results[lab]["rows"].get(section, {}).get(k, {})
                for key, _ in cols:
                    v = row.get(key)
                    if v is None:
                        cells.append("-")
                    elif key == "file_mb":
                        cells.append(f"{v:.1f}")
                    elif key == "speedup":
                        cells.append(f"{v:.0f}x")
                    elif key == "ratio":
                        cells.append(f"{v:.1f}x")
                    elif isinstance(v, float):
                        cells.append(f"{v:.3f}" if v < 10 else f"{v:.1f}")
                    else:
                        cells.append(str(v))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")

    table("tiktoken face: `Encoding.from_cartridge` (ms)", "tiktoken",
          [("file_mb", "MB"), ("crayon_ms", "crayon-hf"), ("tiktoken_ms", "tiktoken.Encoding(ranks)")])
    table("tokenizers face: `Tokenizer.from_cartridge` (ms)", "tokenizers",
          [("file_mb", "MB"), ("crayon_ms", "crayon-hf"), ("tokenizers_ms", "tokenizers.from_file")])
    table("Fresh process: import, load, first encode (ms)", "fresh",
          [("import_ms", "import"), ("load_ms", "load"), ("first_encode_ms", "first encode"), ("total_ms", "total")])
    table("Cold load: fresh interpreter, import + load (ms; the README's column)", "cold",
          [("reference_ms", "reference"), ("crayon_ms", "crayon-hf")])
    table("transformers face: `from_pretrained(folder saved by crayon-hf)` (ms)", "from_pretrained",
          [("crayon_ms", "CrayonTokenizer"), ("stock_ms", "stock AutoTokenizer"), ("speedup", "speedup"),
           ("backend_deferred", "backend deferred")])
    table("transformers face: `from_pretrained(the shared folder)`, second load on (ms)", "from_pretrained_plain",
          [("crayon_ms", "CrayonTokenizer"), ("stock_ms", "stock AutoTokenizer"), ("speedup", "speedup"),
           ("backend_deferred", "backend deferred")])
    table("transformers face: `from_pretrained(the shared folder)`, first load, empty cache (ms)",
          "from_pretrained_first",
          [("crayon_ms", "CrayonTokenizer"), ("stock_ms", "stock AutoTokenizer"), ("ratio", "ours / stock")])
    return "\n".join(lines) + "\n"


def update_readme(results_path: Path, label: str) -> int:
    """Rewrites the "cold load ms (ref / crayon)" cells of the README's summary table."""
    cold = json.loads(results_path.read_text())[label]["rows"]["cold"]
    readme = HERE.parent / "README.md"
    lines = readme.read_text(encoding="utf-8").split("\n")
    column = None
    for i, line in enumerate(lines):
        cells = line.split("|")
        if "cold load ms (ref / crayon)" in line:
            column = [c.strip() for c in cells].index("cold load ms (ref / crayon)")
            continue
        if column is None or not line.startswith("| ") or len(cells) <= column:
            continue
        name = cells[1].strip()
        if name in cold:
            row = cold[name]
            cells[column] = f" {row['reference_ms']:.0f} / {row['crayon_ms']:.0f} "
            lines[i] = "|".join(cells)
    readme.write_text("\n".join(lines), encoding="utf-8")
    print(f"updated the cold-load column of {readme}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "results"))
    ap.add_argument("--label", default="after")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "crayon-load-bench"))
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--fresh", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--readme", action="store_true",
                    help="only rewrite the README summary's cold-load column from load.json (label --label)")
    args = ap.parse_args()
    if args.readme:
        return update_readme(Path(args.out) / "load.json", args.label)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import crayon_hf

    rows = measure(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "load.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    results[args.label] = {
        "rows": rows,
        "crayon_hf": getattr(crayon_hf, "__version__", "?"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "loadavg": os.getloadavg(),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    path.write_text(json.dumps(results, indent=2) + "\n")
    (out / "load.md").write_text(render(results))
    print(f"wrote {path} and load.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
