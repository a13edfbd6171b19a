"""The GPU engine's exactness check and benchmark (run by benchmarks/gpu_check.sh on a GPU machine).

For each vocabulary (cl100k_base, o200k_base and Llama 3 when its rank file is given), on >= 100 MB
of short documents cut from the shared corpora, plus an adversarial set:
  * exactness: the GPU's ids and document offsets against the CPU engine's encode_batch_to_numpy
    (itself tested identical to tiktoken), every document;
  * speed: the CPU engine on all of this machine's cores against the GPU path end to end with numpy
    output, and with the output left on the GPU; medians of --repeat runs, tokens/s and MiB/s,
    with the GPU path's parts (pre-tokenization, kernel) beside them.
Writes gpu.json and gpu.md to --out.

And for each --hf folder (tokenizer.json, byte-level BPE), the tokenizers face's
`encode_batch_to_numpy(..., device="cuda")` against its CPU call: exactness and speed.

  python benchmarks/gpu_check.py --corpora DIR [--llama3 llama3.tiktoken] [--hf FOLDER ...] --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def documents(corpora: Path, target_bytes: int, seed: int = 0) -> list[str]:
    """Short documents (100 B to 8 KiB, most under 2 KiB) cut from every corpus, at new cut points
    on each pass until `target_bytes` of UTF-8 is reached."""
    texts = []
    for p in sorted(corpora.glob("*.txt")):
        texts.append(p.read_text(encoding="utf-8", errors="ignore"))
    jsonl = corpora / "short_docs.jsonl"
    short = [json.loads(line)["text"] for line in jsonl.open(encoding="utf-8")] if jsonl.exists() else []
    if not texts:
        # Without a *.txt corpus the loop below could never reach target_bytes: say so instead of
        # spinning (a device run once spent its whole time limit here on a folder that did not
        # travel).
        sys.exit(f"no *.txt corpora in {corpora} (pass the shared corpora folder)")
    rng = random.Random(seed)
    docs: list[str] = list(short)
    size = sum(len(d.encode()) for d in docs)
    while size < target_bytes:
        for text in texts:
            pos = rng.randrange(64)
            while pos < len(text) and size < target_bytes:
                n = int(rng.lognormvariate(6.3, 0.9)) + 50
                doc = text[pos:pos + n]
                docs.append(doc)
                size += len(doc.encode())
                pos += n
    rng.shuffle(docs)
    return docs


def adversarial(seed: int = 1) -> list[str]:
    """Strings built to break piece boundaries and the GPU's hand-offs."""
    rng = random.Random(seed)
    alphabet = "aé中🙂 \t\n'sSx0-_/.<|>" + "".join(chr(c) for c in range(0x20, 0x7F))
    out = ["", " ", "\n\n\n", "a" * 5000, " " * 3000 + "x", "中" * 2000, "🙂" * 700, "ab" * 1500,
           "<|endoftext|>", "x<|endoftext|>y", "1234567890" * 300, "'s'S'll" * 400]
    for _ in range(2000):
        n = rng.randint(1, 300)
        out.append("".join(rng.choice(alphabet) for _ in range(n)))
    for _ in range(200):
        out.append("".join(chr(rng.choice([rng.randrange(0x20, 0x7F), rng.randrange(0xA0, 0x3000),
                                           rng.randrange(0x4E00, 0x9FFF), rng.randrange(0x1F300, 0x1FAFF)]))
                           for _ in range(rng.randint(1, 2000))))
    return out


def median_time(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def check(name: str, enc, docs: list[str], adv: list[str], repeat: int, threads: int) -> dict:
    import crayon_hf.cuda as cuda

    core = enc._engine
    mib = sum(len(d.encode()) for d in docs) / 2**20
    row: dict = {"vocabulary": name, "documents": len(docs), "mib": round(mib, 1)}

    # Exactness: every document, GPU against the CPU engine (ordinary text, then with specials).
    for label, batch in (("corpus", docs), ("adversarial", adv)):
        cpu_ids, cpu_off = enc.encode_ordinary_batch_to_numpy(batch, num_threads=threads)
        gpu_ids, gpu_off = enc.encode_ordinary_batch_to_numpy(batch, num_threads=threads, device="cuda")
        same_off = np.array_equal(cpu_off, gpu_off)
        bad_docs = 0
        if not (same_off and np.array_equal(cpu_ids, gpu_ids)):
            for i in range(len(batch)):
                a = cpu_ids[cpu_off[i]:cpu_off[i + 1]]
                b = gpu_ids[gpu_off[i]:gpu_off[i + 1]] if gpu_off.shape == cpu_off.shape else None
                if b is None or not np.array_equal(a, b):
                    bad_docs += 1
                    if bad_docs <= 3:
                        print(f"  MISMATCH {name} {label} doc {i}: {batch[i][:80]!r}", flush=True)
        row[f"{label}_mismatched_docs"] = bad_docs
        row[f"{label}_tokens"] = int(len(cpu_ids))
    # The device-resident output through DLPack, as a model pipeline would take it.
    try:
        import torch
    except ImportError:
        row["dlpack_torch"] = "torch not installed"
    else:
        try:
            ids_d, off_d = cuda.encode_batch_to_device(enc, adv, num_threads=threads, disallowed_special=())
            t_ids, t_off = torch.from_dlpack(ids_d), torch.from_dlpack(off_d)
            cpu_ids, cpu_off = enc.encode_ordinary_batch_to_numpy(adv, num_threads=threads)
            same = (t_ids.device.type == "cuda" and np.array_equal(t_ids.to(torch.int64).cpu().numpy(), cpu_ids)
                    and np.array_equal(t_off.cpu().numpy(), cpu_off))
            row["dlpack_torch"] = (f"torch.from_dlpack gives {t_ids.dtype} and {t_off.dtype} tensors on {t_ids.device}, "
                                   f"{'identical to the CPU engine' if same else 'DIFFERENT from the CPU engine'}")
        except Exception as e:  # noqa: BLE001 -- reported, not fatal to the rest of the check
            row["dlpack_torch"] = f"torch.from_dlpack failed: {e!r}"
    specials = ["<|endoftext|> a" + d[:200] for d in adv[:500]]
    a = enc.encode_batch_to_numpy(specials, allowed_special="all", num_threads=threads)
    b = enc.encode_batch_to_numpy(specials, allowed_special="all", num_threads=threads, device="cuda")
    row["specials_identical"] = bool(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))

    # Speed: CPU engine on every core vs the GPU path, same process, same documents.
    enc.encode_ordinary_batch_to_numpy(docs[:1000], num_threads=threads)
    t_cpu, (ids, _) = median_time(lambda: enc.encode_ordinary_batch_to_numpy(docs, num_threads=threads), repeat)
    t_gpu, _ = median_time(lambda: enc.encode_ordinary_batch_to_numpy(docs, num_threads=threads, device="cuda"), repeat)
    t_dev, (dev_ids, _) = median_time(lambda: cuda.encode_batch_to_device(enc, docs, num_threads=threads), repeat)
    engine, lock = cuda._device_engine(enc, core, 0)

    def mark():
        return core.mark_batch(docs, b"", b"", threads, True, engine.staging)

    t_split, _ = median_time(mark, repeat)
    stats = cuda.encode_pieces(enc, core, docs, b"", b"", True, threads, 0, True)[2]
    row.update({f"pretokenize_{k}": v for k, v in stats.items() if k == "mark_ms"})
    tokens = len(ids)
    row.update({
        "tokens": tokens, "device_tokens": len(dev_ids),
        "cpu_s": t_cpu, "gpu_numpy_s": t_gpu, "gpu_device_s": t_dev, "pretokenize_s": t_split,
        "kernel_ms": stats["kernel_ms"], "pieces": stats["n_pieces"], "upload_ms": stats["upload_ms"], "fix_ms": stats["fix_ms"],
        "tail_ms": stats["tail_ms"], "pieces_left_to_cpu": stats["n_left"], "long_pieces": stats["n_long"],
        "cpu_mtok_s": tokens / t_cpu / 1e6, "gpu_numpy_mtok_s": tokens / t_gpu / 1e6,
        "gpu_device_mtok_s": tokens / t_dev / 1e6,
        "cpu_mib_s": mib / t_cpu, "gpu_numpy_mib_s": mib / t_gpu, "gpu_device_mib_s": mib / t_dev,
        "speedup_numpy": t_cpu / t_gpu, "speedup_device": t_cpu / t_dev,
    })
    # Where the GPU starts to win (device="auto"): batches of growing size, same documents.
    sweep = []
    for mib_target in (0.25, 1, 4, 16):
        n_docs = max(1, int(len(docs) * mib_target / mib))
        part = docs[:n_docs]
        c, _ = median_time(lambda: enc.encode_ordinary_batch_to_numpy(part, num_threads=threads), repeat + 2)
        g, _ = median_time(lambda: enc.encode_ordinary_batch_to_numpy(part, num_threads=threads, device="cuda"),
                           repeat + 2)
        sweep.append({"mib": mib_target, "cpu_ms": c * 1e3, "gpu_ms": g * 1e3})
    row["sweep"] = sweep
    print(f"{name}: exact corpus={row['corpus_mismatched_docs'] == 0} adversarial={row['adversarial_mismatched_docs'] == 0} "
          f"specials={row['specials_identical']} dlpack={row.get('dlpack_torch')} | CPU {row['cpu_mtok_s']:.1f} Mtok/s, GPU numpy "
          f"{row['gpu_numpy_mtok_s']:.1f} ({row['speedup_numpy']:.2f}x), GPU device {row['gpu_device_mtok_s']:.1f} "
          f"({row['speedup_device']:.2f}x); pre-tokenize {t_split * 1e3:.0f} ms (threads {stats['mark_ms']:.0f}), upload {stats['upload_ms']:.0f} ms, "
          f"kernel {stats['kernel_ms']:.1f} ms, CPU hand-off {stats['fix_ms']:.0f} ms, scan+gather+copy back "
          f"{stats['tail_ms']:.0f} ms",
          flush=True)
    return row


def check_hf(folder: Path, docs: list[str], adv: list[str], repeat: int, threads: int) -> dict:
    """The tokenizers face: `Tokenizer.encode_batch_to_numpy(..., device="cuda")` against the CPU
    (ids, character offsets, document offsets), then both timed."""
    from crayon_hf import Tokenizer

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    row: dict = {"folder": folder.name, "documents": len(docs)}
    added = [t.content for t in tok.get_added_tokens_decoder().values()][:50]
    adv = adv + [f"{a}x {a} y{a}{a}" for a in added]
    for label, batch in (("corpus", docs), ("adversarial", adv)):
        cpu = tok.encode_batch_to_numpy(batch)
        gpu = tok.encode_batch_to_numpy(batch, device="cuda")
        same = all(np.array_equal(a, b) for a, b in zip(cpu, gpu))
        bad = 0
        if not same:
            for i in range(len(batch)):
                sl = slice(cpu.doc_offsets[i], cpu.doc_offsets[i + 1])
                gl = slice(gpu.doc_offsets[i], gpu.doc_offsets[i + 1]) if len(gpu.doc_offsets) == len(cpu.doc_offsets) else None
                if gl is None or not (np.array_equal(cpu.ids[sl], gpu.ids[gl]) and np.array_equal(cpu.offsets[sl], gpu.offsets[gl])):
                    bad += 1
                    if bad <= 3:
                        print(f"  MISMATCH {folder.name} {label} doc {i}: {batch[i][:80]!r}", flush=True)
        row[f"{label}_mismatched_docs"] = bad
    tok.enable_truncation(128)
    a = tok.encode_batch_to_numpy(docs[:20000])
    b = tok.encode_batch_to_numpy(docs[:20000], device="cuda")
    row["truncated_identical"] = all(np.array_equal(x, y) for x, y in zip(a, b))
    tok.no_truncation()
    t_cpu, out = median_time(lambda: tok.encode_batch_to_numpy(docs), repeat)
    t_gpu, _ = median_time(lambda: tok.encode_batch_to_numpy(docs, device="cuda"), repeat)
    tokens = len(out.ids)
    row.update({"tokens": tokens, "cpu_s": t_cpu, "gpu_s": t_gpu, "cpu_mtok_s": tokens / t_cpu / 1e6,
                "gpu_mtok_s": tokens / t_gpu / 1e6, "speedup": t_cpu / t_gpu})
    print(f"{folder.name} (tokenizers face): exact corpus={row['corpus_mismatched_docs'] == 0} "
          f"adversarial={row['adversarial_mismatched_docs'] == 0} truncated={row['truncated_identical']} | "
          f"CPU {row['cpu_mtok_s']:.1f} Mtok/s, GPU {row['gpu_mtok_s']:.1f} Mtok/s ({row['speedup']:.2f}x)", flush=True)
    return row


def gpu_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_markdown(run: dict, path: Path) -> None:
    lines = [
        "# GPU batch engine: exactness and speed",
        "",
        f"GPU: {run['gpu']}; CPU: {run['cpu_count']} cores ({run['cpu']}); {run['when']}.",
        f"Documents: {run['rows'][0]['documents']:,} short documents, {run['rows'][0]['mib']} MiB of UTF-8, cut from "
        "every shared corpus at new offsets on each pass (so text repeats across passes), plus "
        f"{run['adversarial']} adversarial strings. CPU = the CPU engine's `encode_ordinary_batch_to_numpy` on "
        f"all {run['threads']} threads; GPU = the same call with `device=\"cuda\"` (numpy out), and "
        "`crayon_hf.cuda.encode_batch_to_device` (ids left on the GPU). Medians of "
        f"{run['repeat']} runs, one process, warm caches.",
        "",
        "| vocabulary | docs mismatched (corpus / adversarial) | specials | tokens | CPU Mtok/s | GPU numpy Mtok/s | "
        "GPU device Mtok/s | speed-up numpy | speed-up device | pre-tokenize ms | upload ms | kernel ms | "
        "CPU hand-off ms | scan+gather+back ms | pieces to CPU |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in run["rows"]:
        lines.append(
            f"| {r['vocabulary']} | {r['corpus_mismatched_docs']} / {r['adversarial_mismatched_docs']} | "
            f"{'identical' if r['specials_identical'] else 'DIFFER'} | {r['tokens']:,} | {r['cpu_mtok_s']:.1f} | "
            f"{r['gpu_numpy_mtok_s']:.1f} | {r['gpu_device_mtok_s']:.1f} | {r['speedup_numpy']:.2f}x | "
            f"{r['speedup_device']:.2f}x | {r['pretokenize_s'] * 1e3:.0f} | {r['upload_ms']:.0f} | "
            f"{r['kernel_ms']:.1f} | {r['fix_ms']:.0f} | {r['tail_ms']:.0f} | "
            f"{r['pieces_left_to_cpu'] + r['long_pieces']:,} |")
    if run.get("hf_rows"):
        lines += ["", "Tokenizers face: `Tokenizer.encode_batch_to_numpy(docs)` against the same call with "
                  "`device=\"cuda\"` (ids, character offsets and document offsets compared; the same "
                  "documents; the adversarial set plus each folder's first 50 added tokens inside text).", "",
                  "| folder | docs mismatched (corpus / adversarial) | truncated to 128 | tokens | CPU Mtok/s | "
                  "GPU Mtok/s | speed-up |", "|---|---|---|---:|---:|---:|---:|"]
        for r in run["hf_rows"]:
            lines.append(f"| {r['folder']} | {r['corpus_mismatched_docs']} / {r['adversarial_mismatched_docs']} | "
                         f"{'identical' if r['truncated_identical'] else 'DIFFER'} | {r['tokens']:,} | "
                         f"{r['cpu_mtok_s']:.1f} | {r['gpu_mtok_s']:.1f} | {r['speedup']:.2f}x |")
    lines += ["", f"DLPack: {run['rows'][0].get('dlpack_torch', 'not checked')}."]
    lines += ["", "Batch size against time (numpy output; the first vocabulary): where `device=\"auto\"` should "
              "switch to the GPU.", "", "| batch MiB | CPU ms | GPU ms |", "|---:|---:|---:|"]
    for point in run["rows"][0]["sweep"]:
        lines.append(f"| {point['mib']} | {point['cpu_ms']:.1f} | {point['gpu_ms']:.1f} |")
    lines += ["", run.get("sanitizer", "compute-sanitizer: not run"), ""]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", type=Path, required=True)
    ap.add_argument("--llama3", type=Path, help="llama3.tiktoken (optional)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--mib", type=int, default=100, help="MiB of documents (default 100)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sanitizer-log", type=Path, help="compute-sanitizer's log, summarized in gpu.md")
    ap.add_argument("--hf", type=Path, nargs="*", default=[],
                    help="tokenizer.json folders to check on the tokenizers face (byte-level BPE)")
    args = ap.parse_args()

    import crayon_hf.cuda as cuda
    import crayon_hf.tiktoken as tiktoken

    if not cuda.is_available():
        sys.exit(f"no GPU: {cuda.unavailable_reason()}")
    threads = os.cpu_count() or 1
    t = time.perf_counter()
    docs = documents(args.corpora, args.mib << 20)
    adv = adversarial()
    print(f"{len(docs):,} documents, {sum(map(len, docs)) / 2**20:.0f} Mi characters, built in "
          f"{time.perf_counter() - t:.1f} s", flush=True)
    encodings = [("cl100k_base", tiktoken.get_encoding("cl100k_base")), ("o200k_base", tiktoken.get_encoding("o200k_base"))]
    if args.llama3:
        from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS
        known = KNOWN_ENCODINGS["llama3"]
        ranks = tiktoken.load.load_tiktoken_bpe(str(args.llama3))
        encodings.append(("llama3", tiktoken.Encoding("llama3", pat_str=known.pat_str, mergeable_ranks=ranks,
                                                      special_tokens=known.special_tokens)))
    rows = [check(name, enc, docs, adv, args.repeat, threads) for name, enc in encodings]
    hf_rows = [check_hf(folder, docs, adv, args.repeat, threads) for folder in args.hf]
    run = {"hf_rows": hf_rows, "gpu": gpu_name(), "cpu": platform.processor() or platform.machine(), "cpu_count": threads,
           "threads": threads, "repeat": args.repeat, "adversarial": len(adv),
           "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows}
    if args.sanitizer_log and args.sanitizer_log.exists():
        tail = [line for line in args.sanitizer_log.read_text(errors="replace").splitlines() if "ERROR SUMMARY" in line]
        run["sanitizer"] = "compute-sanitizer (memcheck) on a small batch of each path: " + (tail[-1] if tail else "no summary line")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu.json").write_text(json.dumps(run, indent=1) + "\n")
    write_markdown(run, args.out / "gpu.md")
    print((args.out / "gpu.md").read_text())


if __name__ == "__main__":
    main()
