"""The ``crayon`` command line: convert, inspect, encode."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

from crayon_hf import __version__

# Big inputs are encoded in chunks (for the progress bar); see _safe_chunks for why cuts there
# cannot change any token.
_CHUNK_BYTES = 1 << 20
_PROGRESS_MIN_BYTES = 8 << 20


def _parse_specials(items: Sequence[str]) -> dict[str, int] | None:
    if not items:
        return None
    specials: dict[str, int] = {}
    for item in items:
        token, sep, value = item.rpartition("=")
        if not sep or not token or not value.isdigit():
            raise SystemExit(f"crayon: --special expects TOKEN=ID, got {item!r}")
        specials[token] = int(value)
    return specials


def _verify_documents(corpus: str | None) -> list[str]:
    """The texts `convert --verify` compares on: a corpus file cut into ~4 KiB documents plus its
    lines, or the built-in multilingual sample (prose in many scripts, code, numbers, emoji,
    combining marks, whitespace runs, special-looking strings)."""
    if corpus:
        with open(corpus, encoding="utf-8", errors="replace") as f:
            text = f.read()
    else:
        from importlib.resources import files

        text = files("crayon_hf").joinpath("data/verify_sample.txt").read_text(encoding="utf-8")
    docs = [text[i : i + 4096] for i in range(0, len(text), 4096)]
    docs += [line for line in text.splitlines(keepends=True)[:5000] if line.strip()]
    return docs


def _report_parity(label: str, docs: list[str], ours, ref) -> int:
    """Encodes every document with both; prints the parity line and the first mismatch."""
    same = 0
    first: str | None = None
    for doc in docs:
        a, b = ours(doc), ref(doc)
        if a == b:
            same += 1
        elif first is None:
            i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            first = f"first mismatch in {doc[:80]!r}: at token {i}, crayon {a[i:i + 5]} vs {label} {b[i:i + 5]}"
    print(f"verify: {same}/{len(docs)} documents identical to {label}")
    if first:
        print(first, file=sys.stderr)
        return 1
    return 0


def _verify_against_tokenizers(args: argparse.Namespace, loaded, source: bytes) -> int:
    import tokenizers

    ref = tokenizers.Tokenizer.from_str(source.decode("utf-8"))

    def ours(doc: str):
        e = loaded.encode(doc)
        return list(zip(e.ids, e.offsets)) + [loaded.decode(e.ids)]

    def theirs(doc: str):
        e = ref.encode(doc)
        return list(zip(e.ids, e.offsets)) + [ref.decode(e.ids)]

    return _report_parity(f"tokenizers {tokenizers.__version__}", _verify_documents(args.verify or None), ours, theirs)


def _convert_tokenizer_json(args: argparse.Namespace, source: bytes, what: str, start: float, hint: str = "") -> int:
    """A tokenizer.json (the input's, or one converted from a SentencePiece model) -> cartridge."""
    from crayon_hf.tokenizer import Tokenizer

    try:
        tok = Tokenizer.from_buffer(source, source=args.input)
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - a file we hand to tokenizers, which refuses it
        raise SystemExit(f"crayon convert: {args.input} is not a valid tokenizer.json (tokenizers refuses it: {e})") \
            from None
    if tok.crayon_backend != "native":
        raise SystemExit(
            f"crayon convert: {args.input} needs a component the native engine does not run yet "
            f"({tok.crayon_backend}); crayon_hf.Tokenizer still loads it, through the tokenizers library{hint}"
        )
    tok.save_cartridge(args.output)
    loaded = Tokenizer.from_file(args.output)
    print(
        f"wrote {args.output}: {what}, {loaded.get_vocab_size():,} ids, "
        f"{os.path.getsize(args.output) / 1e6:.2f} MB, backend {loaded.crayon_backend}, "
        f"in {time.perf_counter() - start:.2f} s"
    )
    return 0 if args.verify is None else _verify_against_tokenizers(args, loaded, source)


def _convert_sentencepiece(args: argparse.Namespace, start: float) -> int:
    """A SentencePiece model -> the tokenizer.json transformers builds from it (see
    conversion/sentencepiece.py), written as is for ``-o NAME.json``, else compiled on."""
    from crayon_hf._cache import atomic_write
    from crayon_hf.conversion.sentencepiece import dumps, parse_model, tokenizer_json

    with open(args.input, "rb") as f:
        model = parse_model(f.read(), args.input)
    text = dumps(tokenizer_json(model)).encode("utf-8")
    if not args.output.endswith(".json"):
        hint = f"; `crayon convert {args.input} -o tokenizer.json` writes the tokenizer.json it converts to"
        return _convert_tokenizer_json(args, text, model.describe(), start, hint)
    atomic_write(args.output, text)
    print(f"wrote {args.output}: tokenizer.json of a {model.describe()}, {len(text) / 1e6:.2f} MB, "
          f"in {time.perf_counter() - start:.2f} s")
    if args.verify is None:
        return 0
    from crayon_hf.tokenizer import Tokenizer

    return _verify_against_tokenizers(args, Tokenizer.from_buffer(text, source=args.input), text)


def cmd_convert(args: argparse.Namespace) -> int:
    from crayon_hf._cache import atomic_write
    from crayon_hf.conversion.sniff import HEAD_BYTES, FileKind, explain_unknown, sniff_file

    kind = sniff_file(args.input)
    start = time.perf_counter()
    if kind is FileKind.TOKENIZER_JSON:
        with open(args.input, "rb") as f:
            source = f.read()
        return _convert_tokenizer_json(args, source, "tokenizer.json BPE", start)
    if kind is FileKind.SENTENCEPIECE:
        return _convert_sentencepiece(args, start)
    if kind is not FileKind.TIKTOKEN_RANKS:
        if kind is FileKind.UNKNOWN:
            with open(args.input, "rb") as f:
                what = f"not a file crayon-hf recognises: {explain_unknown(f.read(HEAD_BYTES))}"
        else:
            what = f"a {kind.value}"
        raise SystemExit(
            f"crayon convert: {args.input} is {what}; this version converts tokenizer.json files "
            "and tiktoken rank files (and SentencePiece .model files)"
        )
    from crayon_hf.conversion.tiktoken_rank import convert_rank_file

    image = convert_rank_file(args.input, pattern=args.pattern, special_tokens=_parse_specials(args.special), name=args.name)
    atomic_write(args.output, image)
    elapsed = time.perf_counter() - start
    from crayon_hf.tiktoken import Encoding

    enc = Encoding.from_cartridge(args.output)
    print(
        f"wrote {args.output}: {enc.name}, {enc.n_vocab} ids ({len(enc._special_tokens)} special), "
        f"{len(image) / 1e6:.2f} MB, backend {enc.crayon_backend}, in {elapsed:.2f} s"
    )
    if args.verify is None:
        return 0
    import tiktoken

    ref = tiktoken.Encoding(
        enc.name, pat_str=enc._pat_str, mergeable_ranks=enc._mergeable_ranks, special_tokens=enc._special_tokens
    )
    return _report_parity(
        f"tiktoken {tiktoken.__version__}", _verify_documents(args.verify or None), enc.encode_ordinary, ref.encode_ordinary
    )


def _inspect_data(path: str) -> dict:
    from crayon_hf._native import native

    info = native.cartridge_info(path, False)
    meta_bytes = native.section_bytes(path, "META")
    try:
        meta = json.loads(meta_bytes) if meta_bytes else None
    except ValueError:
        meta = None
    source = (meta or {}).get("source") or {}
    return {
        "path": os.path.abspath(path),
        "format_version": "{}.{}".format(*info["format_version"]),
        "unicode_version": info["unicode_version"],
        "file_size": info["file_size"],
        "checksum": f"{info['checksum']:016x}",
        "checksum_ok": info["checksum_ok"],
        "source_sha256": source.get("sha256"),
        "meta": meta,
        "sections": [
            {"id": s["id"], "offset": s["offset"], "size": s["size"], "required": bool(s["flags"] & 1)}
            for s in info["sections"]
        ],
    }


def cmd_inspect(args: argparse.Namespace) -> int:
    data = _inspect_data(args.file)
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))
        return 0 if data["checksum_ok"] else 1
    meta = data["meta"] or {}
    print(f"cartridge      {data['path']}")
    print(f"format         {data['format_version']} ({meta.get('format', 'unknown kind')})")
    print(f"name           {meta.get('name')}")
    print(f"pattern        {meta.get('pattern') or 'not native (runs on tiktoken)'}")
    print(f"unicode        {data['unicode_version']}")
    print(f"source sha256  {data['source_sha256'] or '-'}")
    print(f"created by     {meta.get('created_by', '-')}")
    print(f"size           {data['file_size']:,} bytes")
    print(f"checksum       {data['checksum']} ({'ok' if data['checksum_ok'] else 'MISMATCH: file is damaged'})")
    print("sections")
    for s in data["sections"]:
        print(f"  {s['id']}  offset {s['offset']:>10,}  size {s['size']:>12,}{'  required' if s['required'] else ''}")
    return 0 if data["checksum_ok"] else 1


def _safe_chunks(text: str, specials: Sequence[str]) -> Iterator[str]:
    """Cuts text into ~1 MiB chunks only at points where every shipped split pattern has a piece
    boundary that does not depend on the text around it: right after a newline that follows a
    non-space character and precedes an ASCII letter ("x\\nW"). There the newline is a piece of its
    own (or the tail of a punctuation piece) whatever comes after, and no pattern lets a newline
    prefix a letter. Never inside a special token: no cuts at all if a special token contains a
    newline."""
    if len(text) <= _CHUNK_BYTES or any("\n" in s for s in specials):
        yield text
        return
    cut = re.compile(r"(?<=\S)\n(?=[A-Za-z])")
    start = 0
    while len(text) - start > _CHUNK_BYTES:
        m = cut.search(text, start + _CHUNK_BYTES)
        if m is None:
            break
        yield text[start : m.end()]
        start = m.end()
    yield text[start:]


def _progress(total: int, desc: str):
    try:
        from tqdm import tqdm

        return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, file=sys.stderr)
    except ImportError:
        return _PlainProgress(total, desc)


class _PlainProgress:
    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.done, self.start = total, desc, 0, time.perf_counter()

    def update(self, n: int) -> None:
        self.done += n
        rate = self.done / max(time.perf_counter() - self.start, 1e-9) / (1 << 20)
        print(f"\r{self.desc}: {100 * self.done / max(self.total, 1):5.1f}% {rate:7.1f} MiB/s", end="", file=sys.stderr)

    def close(self) -> None:
        print(file=sys.stderr)


def _write_ids(outputs: list, args: argparse.Namespace) -> None:
    import numpy as np

    from crayon_hf._cache import atomic_write

    all_ids = np.concatenate(outputs) if outputs else np.zeros(0, dtype=np.uint32)
    if args.output.endswith(".npy"):
        import io

        buf = io.BytesIO()
        np.save(buf, all_ids)
        atomic_write(args.output, buf.getvalue())
    else:
        atomic_write(args.output, all_ids.astype("<u4").tobytes())
    print(f"wrote {len(all_ids):,} ids to {args.output}", file=sys.stderr)


def _emit(ids, outputs: list, args: argparse.Namespace) -> None:
    """One file's ids: kept for --output, else one line on stdout."""
    if args.output:
        outputs.append(ids)
    else:
        sys.stdout.write(" ".join(map(str, ids.tolist())) + "\n")


def _read_utf8(path: str) -> str:
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SystemExit(f"crayon encode: {path} is not valid UTF-8 (byte {e.start}: {e.reason})")


def _encode_with_tokenizer(tok, args: argparse.Namespace) -> int:
    """A tokenizer.json: each file is one `encode(text, add_special_tokens=False)`, exactly what
    tokenizers returns for it (no chunking: cut points are only proven safe for tiktoken patterns)."""
    import numpy as np

    outputs = []
    for path in args.files:
        _emit(np.asarray(tok.encode(_read_utf8(path), add_special_tokens=False).ids, dtype=np.uint32), outputs, args)
    if args.output:
        _write_ids(outputs, args)
    return 0


def cmd_encode(args: argparse.Namespace) -> int:
    import numpy as np

    from crayon_hf._resolve import load_tokenizer

    enc = load_tokenizer(args.tokenizer, pattern=args.pattern)
    threads = os.cpu_count() or 1
    from crayon_hf.tokenizer import Tokenizer

    if isinstance(enc, Tokenizer):
        if args.allowed_special is not None:
            raise SystemExit("crayon encode: --allowed-special is for tiktoken vocabularies; a tokenizer.json "
                             "matches its added tokens as tokenizers does")
        return _encode_with_tokenizer(enc, args)
    if args.allowed_special is None:

        def encode_chunks(chunks: list[str]) -> list[list[int]]:
            return enc.encode_ordinary_batch(chunks, num_threads=threads)

    else:
        allowed = "all" if args.allowed_special == "all" else set(args.allowed_special.split(","))
        unknown = set() if allowed == "all" else allowed - enc.special_tokens_set
        if unknown:
            raise SystemExit(f"crayon encode: not special tokens of {enc.name}: {', '.join(sorted(unknown))}")

        def encode_chunks(chunks: list[str]) -> list[list[int]]:
            return enc.encode_batch(chunks, num_threads=threads, allowed_special=allowed, disallowed_special=())

    outputs: list[np.ndarray] = []
    for path in args.files:
        text = _read_utf8(path)
        raw = text.encode("utf-8")
        chunks = list(_safe_chunks(text, list(enc.special_tokens_set)))
        bar = _progress(len(raw), os.path.basename(path)) if len(raw) >= _PROGRESS_MIN_BYTES else None
        parts = []
        # Chunks are independent (cut where no token can change), so each group of them is
        # encoded on all cores at once.
        for start in range(0, len(chunks), 2 * threads):
            group = chunks[start : start + 2 * threads]
            parts += [np.asarray(ids, dtype=np.uint32) for ids in encode_chunks(group)]
            if bar is not None:
                bar.update(sum(len(c.encode("utf-8")) for c in group))
        if bar is not None:
            bar.close()
        _emit(np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32), outputs, args)
    if args.output:
        _write_ids(outputs, args)
    return 0


def cmd_encode_corpus(args: argparse.Namespace) -> int:
    """Training data: every document of the inputs to one memory-mappable array (crayon_hf.corpus),
    on this machine or, with --ray, on a Ray cluster (crayon_hf.ray_corpus)."""
    from crayon_hf.corpus import encode_corpus

    fmt = args.format or ("npy" if args.output.endswith(".npy") else "uint32")
    if args.shards and args.ray is None:
        print("crayon encode-corpus: error: --shards writes one shard per Ray task; pass --ray too", file=sys.stderr)
        return 2
    common = dict(format=fmt, append_eos=args.append_eos, eos_token=args.eos_token, jsonl_field=args.jsonl_field,
                  progress=not args.quiet, pattern=args.pattern)
    try:
        if args.ray is not None:
            from crayon_hf.ray_corpus import encode_corpus_ray

            s = encode_corpus_ray(args.inputs, args.output, args.tokenizer, address=args.ray or None,
                                  shards=args.shards, cpus_per_task=args.threads or 1,
                                  task_bytes=int(args.task_mib * (1 << 20)) if args.task_mib else None, **common)
        else:
            s = encode_corpus(args.inputs, args.output, args.tokenizer, threads=args.threads, **common)
    except KeyboardInterrupt:
        print(f"crayon encode-corpus: interrupted; nothing written to {args.output}", file=sys.stderr)
        return 130
    if not args.quiet:
        rate = s["input_bytes"] / max(s["seconds"], 1e-9) / (1 << 20)
        where = f"in {s['tasks']} Ray tasks on {s['cluster_cpus']} CPUs, " if args.ray is not None else ""
        layout = "shards and manifest" if args.shards else f"{fmt}"
        print(f"wrote {s['n_tokens']:,} tokens of {s['n_docs']:,} documents to {args.output} ({layout}), "
              f"{where}in {s['seconds']:.1f} s ({rate:.1f} MiB/s)", file=sys.stderr)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Parity and speed side by side with the reference libraries (crayon_hf.bench)."""
    from crayon_hf import bench
    from crayon_hf.bench.measure import Config

    if args.suite == (args.tokenizer is not None):
        raise ValueError("name a --tokenizer, or run --suite (every shared vocabulary)")
    if args.sample_mib <= 0 or args.batch_mib < 0 or args.reps < 1 or args.threads < 1:
        raise ValueError("--sample-mib, --reps and --threads must be positive, --batch-mib not negative")
    bench.set_threads(args.threads)
    cfg = Config(reps=args.reps, batch_reps=args.batch_reps, sample_bytes=int(args.sample_mib * 2**20),
                 batch_bytes=int(args.batch_mib * 2**20), threads=args.threads, cold_reps=args.cold_reps,
                 memory=not args.no_memory, transformers=not args.no_transformers, max_length=args.max_length,
                 pin=not args.no_pin)
    if args.suite:
        from crayon_hf.bench.suite import run_suite

        shared = Path(args.shared or os.environ.get("CRAYON_SHARED") or "../shared")
        if not (shared / "vocab").is_dir():
            raise ValueError(f"--shared {shared}: no vocab/ folder (the shared vocabularies and corpora)")
        readme = None if args.no_readme else Path(args.readme)
        if readme is not None and not readme.exists():
            raise ValueError(f"--readme {readme}: no such file (or pass --no-readme)")
        run_suite(shared, Path(args.out or "benchmarks/results"), readme, cfg, args.only)
        return 0
    report = bench.run(args.tokenizer, args.corpus, pattern=args.pattern, out=args.out or "crayon-bench",
                       config=cfg, jsonl_field=args.jsonl_field)
    result = report["results"][0]
    exact = all(e.get("parity", 1.0) == 1.0 for row in result["corpora"].values()
                for label, e in row["libraries"].items() if label == "crayon-hf")
    if not exact:
        print("crayon bench: crayon-hf differs from the reference (see the first mismatch in bench.md)",
              file=sys.stderr)
    return 0 if exact else 1


def cmd_train(args: argparse.Namespace) -> int:
    """Train byte-level BPE like tokenizers' BpeTrainer; write tokenizer.json and a cartridge."""
    from .train import train_bpe

    missing = [f for f in args.files if not os.path.isfile(f)]
    if missing:
        raise ValueError(f"no such file: {missing[0]}")
    floor = len(dict.fromkeys(args.special_token)) + 256
    if args.vocab_size < floor:
        raise ValueError(f"--vocab-size {args.vocab_size} is below the special tokens plus the 256 byte-level "
                         f"characters ({floor}); nothing would be learned")
    os.makedirs(args.output, exist_ok=True)
    tok = train_bpe(args.files, args.vocab_size, args.special_token, min_frequency=args.min_frequency,
                    show_progress=not args.quiet, limit_alphabet=args.limit_alphabet,
                    max_token_length=args.max_token_length, threads=args.threads or 0)
    json_path = os.path.join(args.output, "tokenizer.json")
    dat_path = os.path.join(args.output, "tokenizer.dat")
    tok.save(json_path)
    tok.save_cartridge(dat_path)
    print(f"crayon train: {tok.get_vocab_size()} tokens -> {json_path}, {dat_path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crayon", description="crayon-hf: exact, fast tokenization from cartridges")
    p.add_argument("--version", action="version", version=f"crayon-hf {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("convert", help="compile a vocabulary into a cartridge")
    c.add_argument("input", help="a tokenizer.json, a tiktoken rank file or a SentencePiece model (recognised by content)")
    c.add_argument(
        "--pattern",
        help="split pattern: r50k_base, cl100k_base, o200k_base, llama3, or a regex "
        "(optional for rank files crayon-hf recognises)",
    )
    c.add_argument("--special", action="append", default=[], metavar="TOKEN=ID", help="a special token (repeatable)")
    c.add_argument("--name", help="encoding name stored in the cartridge")
    c.add_argument("-o", "--output", required=True,
                   help="cartridge to write (.dat); for a SentencePiece model, NAME.json writes the tokenizer.json it "
                   "converts to instead")
    c.add_argument(
        "--verify",
        nargs="?",
        const="",
        metavar="CORPUS",
        help="after converting, encode CORPUS (default: a built-in multilingual sample) with the "
        "cartridge and with the reference library (tokenizers or tiktoken) and report parity; "
        "exits 1 on any mismatch",
    )
    c.set_defaults(func=cmd_convert)

    i = sub.add_parser("inspect", help="show a cartridge's header, sections and checksum status")
    i.add_argument("file")
    i.add_argument("--json", action="store_true", help="machine-readable output with stable keys")
    i.set_defaults(func=cmd_inspect)

    e = sub.add_parser("encode", help="encode text files to token ids")
    e.add_argument("--tokenizer", required=True,
                   help="bundled encoding name, cartridge, tiktoken rank file, tokenizer.json or a folder with one")
    e.add_argument("--pattern", help="split pattern for a rank file crayon-hf does not recognise")
    e.add_argument("files", nargs="+", metavar="FILE")
    e.add_argument("-o", "--output", help="write all ids to OUT.npy (numpy uint32) or OUT.bin (raw little-endian uint32)")
    e.add_argument("--allowed-special", metavar="all|TOKEN,...", help="encode these special tokens as such")
    e.set_defaults(func=cmd_encode)

    ec = sub.add_parser("encode-corpus", help="encode a corpus into one memory-mappable array of ids (training data)")
    ec.add_argument("inputs", nargs="+", metavar="INPUT",
                    help="plain-text files (one document each), JSONL (one per line) or Parquet (one per row)")
    ec.add_argument("-o", "--output", required=True,
                    help="the ids; also writes OUTPUT.idx.npy (document starts) and OUTPUT.json (what, with what)")
    ec.add_argument("--tokenizer", required=True,
                    help="bundled encoding name, cartridge, tiktoken rank file, tokenizer.json or a folder with one")
    ec.add_argument("--pattern", help="split pattern for a rank file crayon-hf does not recognise")
    ec.add_argument("--format", choices=["uint16", "uint32", "npy", "megatron"],
                    help="raw little-endian uint16 or uint32, a .npy (default: npy for OUTPUT.npy, else uint32), or "
                    "Megatron-LM's indexed dataset OUTPUT.bin + OUTPUT.idx")
    ec.add_argument("--append-eos", action="store_true", help="append the end-of-text token after every document")
    ec.add_argument("--eos-token", metavar="TOKEN", help="with --append-eos: the token to append")
    ec.add_argument("--jsonl-field", default="text", help="the text field of JSONL records / Parquet column "
                    "(default: text)")
    ec.add_argument("--threads", type=int, help="encoding threads (default: $CRAYON_NUM_THREADS, "
                    "$RAYON_NUM_THREADS, else all cores)")
    ec.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    ec.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                    help="run on a Ray cluster (ADDRESS as ray.init takes it, e.g. ray://head:10001 or auto; "
                    "without one, a local Ray started for the run); needs crayon-hf[ray]; --threads is then "
                    "the CPUs per task (default 1)")
    ec.add_argument("--shards", action="store_true",
                    help="with --ray: OUTPUT is a folder of per-task shards and a manifest.json "
                    "(crayon_hf.corpus.open_corpus reads it as one array), instead of one array")
    ec.add_argument("--task-mib", type=float, metavar="MIB",
                    help="with --ray: input MiB per task (default: the input split four ways per CPU, 1-64 MiB)")
    ec.set_defaults(func=cmd_encode_corpus)

    b = sub.add_parser("bench", help="token parity and speed against tokenizers, tiktoken, transformers (and tokie, "
                       "fastokens when installed)")
    b.add_argument("--tokenizer", help="bundled encoding name, tokenizer.json, HF folder, tiktoken rank file or cartridge")
    b.add_argument("--pattern", help="split pattern for a rank file crayon-hf does not recognise")
    b.add_argument("--corpus", action="append", metavar="FILE",
                   help="plain text or JSONL (repeatable; default: a built-in multilingual sample). The first also "
                   "feeds the batch and transformers measures")
    b.add_argument("--jsonl-field", default="text", help="the text field of JSONL records (default: text)")
    b.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for batch encoding (default: all)")
    b.add_argument("--out", help="results folder (default: ./crayon-bench; with --suite, benchmarks/results)")
    b.add_argument("--reps", type=int, default=5, help="single-thread passes, each over new documents (default 5)")
    b.add_argument("--batch-reps", type=int, default=3, help="batch passes, each over new documents (default 3)")
    b.add_argument("--sample-mib", type=float, default=1.0, help="MiB of each corpus for the single-thread passes")
    b.add_argument("--batch-mib", type=float, default=3.0, help="MiB of the first corpus for the batch passes")
    b.add_argument("--cold-reps", type=int, default=5, help="fresh interpreters per library for the cold load (0: skip; "
                   "the transformers face gets one)")
    b.add_argument("--no-memory", action="store_true", help="do not measure peak memory")
    b.add_argument("--no-transformers", action="store_true", help="skip the transformers face")
    b.add_argument("--max-length", type=int, default=128, help="max_length of the transformers call (default 128)")
    b.add_argument("--no-pin", action="store_true", help="do not pin single-thread passes to one core")
    b.add_argument("--suite", action="store_true",
                   help="every vocabulary of --shared against every corpus; writes --out and README.md's summary")
    b.add_argument("--shared", help="with --suite: the shared data folder (default: $CRAYON_SHARED or ../shared)")
    b.add_argument("--only", action="append", metavar="NAME", help="with --suite: only these vocabularies, merged "
                   "into the last results")
    b.add_argument("--readme", default="README.md", help="with --suite: the README whose summary block is rewritten")
    b.add_argument("--no-readme", action="store_true", help="with --suite: leave README.md alone")
    b.set_defaults(func=cmd_bench)
    t = sub.add_parser("train", help="train a byte-level BPE tokenizer (tokenizers' BpeTrainer merges, faster)")
    t.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files, read line by line")
    t.add_argument("--vocab-size", type=int, required=True, help="final vocabulary size, special tokens included")
    t.add_argument("--special-token", action="append", default=[], metavar="TOKEN",
                   help="a special token (repeatable; ids 0.. in this order)")
    t.add_argument("--min-frequency", type=int, default=0, help="stop when the best pair occurs fewer times")
    t.add_argument("--limit-alphabet", type=int, help="keep at most this many initial characters")
    t.add_argument("--max-token-length", type=int, help="BpeTrainer's max_token_length")
    t.add_argument("--threads", type=int, help="counting threads (default: all cores)")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    t.add_argument("-o", "--output", required=True, metavar="OUT_DIR",
                   help="folder for tokenizer.json and tokenizer.dat (created if needed)")
    t.set_defaults(func=cmd_train)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, OSError) as e:
        print(f"crayon {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
