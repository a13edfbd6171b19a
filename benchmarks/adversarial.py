#!/usr/bin/env python3
"""Is encoding time linear, and memory bounded, on adversarial text of 1 to 10 MB?

For each face (tiktoken face on cl100k_base and o200k_base: `encode_ordinary`; Tokenizer face on
gpt2 (byte-level BPE), mistral_v0_1 (SentencePiece BPE with byte fallback), t5_small (Unigram) and
bert_base_uncased (WordPiece): `encode`) and each adversarial family of tests/test_adversarial_text.py,
encodes inputs of 1, 2, 5 and 10 MB (characters for one-byte families; the multi-byte families use
the same number of characters, so their UTF-8 is larger). Every (face, family, size) runs in a new
child process, which builds the text, loads the tokenizer, encodes once untimed on 64 KB (so
loading is not timed), then times three calls (the best is kept: the machine may be shared), and reports its peak RSS (ru_maxrss) before and after
the call: the growth is the call's working memory, the text itself included in "before".

    python benchmarks/adversarial.py                 # writes benchmarks/results/adversarial.{md,json}
    python benchmarks/adversarial.py --sizes 1 2 --faces cl100k_base --families letter spaces

Linearity is reported as time(10 MB) / (10 x time(1 MB)): 1.0 is linear, 2.0 would mean time per MB
doubled; a ratio well above that points at a quadratic step. The references are not timed here
(tiktoken is quadratic on a 10 MB run of one letter).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SHARED = Path(os.environ.get("CRAYON_SHARED", ROOT.parent / "shared"))

FACES = ["cl100k_base", "o200k_base", "gpt2", "mistral_v0_1", "t5_small", "bert_base_uncased"]
FAMILIES = ["letter", "pairs", "digits", "cjk", "emoji", "random_latin1", "spaces", "newlines", "mixed_ws",
            "ideographic_space", "combining", "nul"]

_CHILD = """
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[4])
from test_adversarial_text import FAMILIES
face, family, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if face.endswith("_base"):
    import crayon_hf.tiktoken as ct
    enc = ct.get_encoding(face)
    call = enc.encode_ordinary
else:
    import crayon_hf
    tok = crayon_hf.Tokenizer.from_file(sys.argv[5] + "/vocab/hf/" + face + "/tokenizer.json")
    call = lambda t: tok.encode(t).ids
call(FAMILIES[family](65536))
text = FAMILIES[family](n)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
seconds = float("inf")
for _ in range(3):  # best of 3: the machine is shared, and a single call is at its mercy
    t0 = time.perf_counter()
    ids = call(text)
    seconds = min(seconds, time.perf_counter() - t0)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "tokens": len(ids), "rss_before_mb": before / 1024,
                  "rss_peak_mb": after / 1024, "utf8_mb": len(text.encode("utf-8", "surrogatepass")) / 1e6}))
"""


def measure(face: str, family: str, mb: int) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", _CHILD, face, family, str(mb * 1_000_000), str(ROOT / "tests"),
                           str(SHARED)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{face}/{family}/{mb} MB failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 5, 10], help="input sizes in millions of characters")
    ap.add_argument("--faces", nargs="+", default=FACES)
    ap.add_argument("--families", nargs="+", default=FAMILIES)
    ap.add_argument("--out", default=str(RESULTS / "adversarial"))
    ap.add_argument("--merge", action="store_true",
                    help="keep the rows already in OUT.json (other faces/families) and replace only those measured now")
    args = ap.parse_args()

    rows: list[dict[str, object]] = []
    if args.merge and Path(args.out + ".json").exists():
        rows = json.loads(Path(args.out + ".json").read_text())["rows"]
    for face in args.faces:
        for family in args.families:
            row: dict[str, object] = {"face": face, "family": family, "runs": {}}
            for mb in args.sizes:
                r = measure(face, family, mb)
                row["runs"][str(mb)] = r  # type: ignore[index]
                print(f"{face:18} {family:18} {mb:>3} M chars {r['seconds']:8.3f} s  peak {r['rss_peak_mb']:7.0f} MB "
                      f"(before call {r['rss_before_mb']:6.0f})", flush=True)
            runs = row["runs"]
            lo, hi = str(min(args.sizes)), str(max(args.sizes))
            scale = int(hi) / int(lo)
            row["linearity"] = runs[hi]["seconds"] / (scale * runs[lo]["seconds"])  # type: ignore[index]
            rows = [r for r in rows if (r["face"], r["family"]) != (face, family)] + [row]
            write(rows, args.sizes, args.out)  # after every row: a long run interrupted keeps what it measured


def write(rows: list[dict[str, object]], sizes: list[int], out: str) -> None:
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "python": sys.version.split()[0],
            "cpus": os.cpu_count(), "sizes_m_chars": sizes}
    Path(out + ".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "# Adversarial text: time and memory from 1 to 10 M characters",
        "",
        f"Generated by `benchmarks/adversarial.py` on {meta['date']} ({meta['cpus']} CPUs, Python {meta['python']}).",
        "Seconds for one encode call (best of 3); peak RSS of the child process after the call (before the call, it holds",
        "the text and the loaded tokenizer). Linearity = time(largest) / (size ratio x time(smallest)); 1.0 is linear.",
        "",
        "| face | family | " + " | ".join(f"{s} M s" for s in sizes) + " | s per M (largest) | linearity | peak RSS MB (largest) | growth during call MB |",
        "|---|---|" + "---|" * len(sizes) + "---|---|---|---|",
    ]
    for row in rows:
        runs = row["runs"]
        big = runs[str(sizes[-1])]  # type: ignore[index]
        lines.append(f"| {row['face']} | {row['family']} | " + " | ".join(
            f"{runs[str(s)]['seconds']:.3f}" for s in sizes) +  # type: ignore[index]
            f" | {big['seconds'] / sizes[-1]:.3f} | {row['linearity']:.2f} | {big['rss_peak_mb']:.0f} | "
            f"{big['rss_peak_mb'] - big['rss_before_mb']:.0f} |")
    Path(out + ".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
