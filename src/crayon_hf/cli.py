"""The ``crayon`` command line (also `python -m crayon_hf`): convert, inspect, encode, count, decode,
encode-corpus, bench, train.

Exit status, the same for every subcommand (docs/cli.md):

    0    done
    1    a check failed: `convert --verify` or `bench` found a token that differs from the
         reference, `inspect` found a damaged file
    2    the command could not run: a usage error, a missing or unreadable input, a file that is
         not what it should be, an optional library that is not installed
    130  interrupted (Ctrl-C)
    141  stdout was closed early (`crayon encode ... | head`), as for other Unix tools; no traceback
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Iterator, Sequence, cast

from crayon_hf import __version__

# Big inputs are encoded in chunks (for the progress bar); see _safe_chunks for why cuts there
# cannot change any token.
_CHUNK_BYTES = 1 << 20
_PROGRESS_MIN_BYTES = 8 << 20

EXIT_OK, EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 0, 1, 2, 130, 141


class CliError(Exception):
    """A reason the command cannot run, said to the user as `crayon CMD: error: MESSAGE` (exit 2)."""


def _need(module: str, extra: str, what: str) -> Any:
    """Imports an optional library or says which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise CliError(f"{what} needs the {module} library, which is not installed: "
                       f"pip install 'crayon-hf[{extra}]'") from None


def _parse_specials(items: Sequence[str]) -> dict[str, int] | None:
    if not items:
        return None
    specials: dict[str, int] = {}
    for item in items:
        token, sep, value = item.rpartition("=")
        if not sep or not token or not value.isdigit():
            raise CliError(f"--special expects TOKEN=ID, got {item!r}")
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
    tokenizers = _need("tokenizers", "verify", "--verify (a comparison with the reference library)")

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
        raise CliError(f"{args.input} is not a valid tokenizer.json (tokenizers refuses it: {e})") from None
    if tok.crayon_backend != "native":
        raise CliError(
            f"{args.input} needs a component the native engine does not run yet "
            f"({tok.crayon_backend}); crayon_hf.Tokenizer still loads it, through the tokenizers library{hint}"
        )
    tok.save_cartridge(args.output)
    loaded = Tokenizer.from_file(args.output)
    specials = sum(1 for t in json.loads(loaded.to_str()).get("added_tokens") or () if t.get("special"))
    print(
        f"wrote {args.output}: {what}, {loaded.get_vocab_size():,} ids ({specials:,} special), "
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
        try:
            model_type = _model_type(json.loads(source).get("model") or {})
        except ValueError:
            model_type = "model"  # tokenizers says what is wrong with the file
        return _convert_tokenizer_json(args, source, f"tokenizer.json {model_type}", start)
    if kind is FileKind.SENTENCEPIECE:
        return _convert_sentencepiece(args, start)
    if kind is not FileKind.TIKTOKEN_RANKS:
        if kind is FileKind.UNKNOWN:
            with open(args.input, "rb") as f:
                what = f"not a file crayon-hf recognises: {explain_unknown(f.read(HEAD_BYTES))}"
        else:
            what = f"a {kind.value}"
        raise CliError(
            f"{args.input} is {what}; this version converts tokenizer.json files "
            "and tiktoken rank files (and SentencePiece .model files)"
        )
    from crayon_hf.conversion.tiktoken_rank import convert_rank_file

    image = convert_rank_file(args.input, pattern=args.pattern, special_tokens=_parse_specials(args.special), name=args.name)
    atomic_write(args.output, image)
    elapsed = time.perf_counter() - start
    from crayon_hf.tiktoken import Encoding

    enc = Encoding.from_cartridge(args.output)
    print(
        f"wrote {args.output}: tiktoken {enc.name}, {enc.n_vocab:,} ids ({len(enc._special_tokens):,} special), "
        f"{len(image) / 1e6:.2f} MB, backend {enc.crayon_backend}, in {elapsed:.2f} s"
    )
    if args.verify is None:
        return 0
    tiktoken = _need("tiktoken", "verify", "--verify (a comparison with the reference library)")
    ref = tiktoken.Encoding(
        enc.name, pat_str=enc._pat_str, mergeable_ranks=enc._mergeable_ranks, special_tokens=enc._special_tokens
    )
    return _report_parity(
        f"tiktoken {tiktoken.__version__}", _verify_documents(args.verify or None), enc.encode_ordinary, ref.encode_ordinary
    )


def _model_type(model: dict) -> str:
    """A tokenizer.json model's kind; older files leave "type" out and tokenizers tells the kinds
    apart by their fields, as here."""
    if model.get("type"):
        return str(model["type"])
    if "merges" in model:
        return "BPE"
    if isinstance(model.get("vocab"), list):
        return "Unigram"
    if "continuing_subword_prefix" in model or "max_input_chars_per_word" in model:
        return "WordPiece"
    return "WordLevel"


def _component(c: dict | None) -> str:
    """One pipeline stage as a short chain: `Split(regex, isolated) -> ByteLevel`."""
    if not c:
        return "none"
    kind = c.get("type", "?")
    if kind == "Sequence":
        parts: list = next((c[k] for k in ("normalizers", "pretokenizers", "processors", "decoders") if k in c), [])
        return " -> ".join(_component(x) for x in parts) or "empty Sequence"
    if kind == "Split":
        pattern = c.get("pattern") or {}
        regex = pattern.get("Regex")
        shown = f"regex {regex[:40]!r}{'...' if len(regex) > 40 else ''}" if regex else f"string {pattern.get('String')!r}"
        return f"Split({shown}, {str(c.get('behavior', '')).lower()})"
    return str(kind)


def _tokenizer_json_summary(path: str) -> dict:
    """What a tokenizer.json cartridge runs, from the tokenizer.json it carries."""
    from crayon_hf.tokenizer import Tokenizer

    tok = Tokenizer.from_file(path)
    data = json.loads(tok.to_str())
    model = data.get("model") or {}
    added = data.get("added_tokens") or []
    return {
        "model": _model_type(model),
        "model_vocab_size": len(model.get("vocab") or ()),
        "byte_fallback": bool(model.get("byte_fallback")),
        "normalizer": _component(data.get("normalizer")),
        "pre_tokenizer": _component(data.get("pre_tokenizer")),
        "post_processor": _component(data.get("post_processor")),
        "decoder": _component(data.get("decoder")),
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        "added_tokens": [{"id": t["id"], "content": t["content"], "special": bool(t.get("special"))} for t in added],
        "backend": tok.crayon_backend,
    }


def _tiktoken_summary(path: str) -> dict:
    from crayon_hf.tiktoken import Encoding

    enc = Encoding.from_cartridge(path)
    return {
        "name": enc.name,
        "pattern": enc._pat_str,
        "vocab_size": enc.n_vocab,
        "special_tokens": [{"id": i, "content": t} for t, i in sorted(enc._special_tokens.items(), key=lambda x: x[1])],
        "backend": enc.crayon_backend,
    }


def _inspect_data(path: str) -> dict:
    from crayon_hf._native import native

    if os.path.isdir(path):
        raise CliError(f"{path} is a directory; name the cartridge file in it (a .dat)")
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    info = native.cartridge_info(path, False)
    meta_bytes = native.section_bytes(path, "META")
    try:
        meta = json.loads(meta_bytes) if meta_bytes else None
    except ValueError:
        meta = None
    source = (meta or {}).get("source") or {}
    ids = {s["id"] for s in info["sections"]}
    tokenizer: dict | None = None
    if info["checksum_ok"]:  # a damaged file is described, never loaded
        try:
            tokenizer = _tokenizer_json_summary(path) if "HFHD" in ids else _tiktoken_summary(path)
            tokenizer["kind"] = "tokenizer.json" if "HFHD" in ids else "tiktoken"
        except ValueError as e:
            tokenizer = {"error": str(e)}
    return {
        "path": os.path.abspath(path),
        "format_version": "{}.{}".format(*info["format_version"]),
        "unicode_version": info["unicode_version"],
        "file_size": info["file_size"],
        "checksum": f"{info['checksum']:016x}",
        "checksum_ok": info["checksum_ok"],
        "source_sha256": source.get("sha256"),
        "meta": meta,
        "tokenizer": tokenizer,
        "sections": [
            {"id": s["id"], "offset": s["offset"], "size": s["size"], "required": bool(s["flags"] & 1)}
            for s in info["sections"]
        ],
    }


def _token_list(tokens: list[dict], limit: int = 8) -> str:
    shown = ", ".join(f"{t['content']!r}={t['id']}" for t in tokens[:limit])
    return shown + (f", ... ({len(tokens) - limit:,} more)" if len(tokens) > limit else "")


def cmd_inspect(args: argparse.Namespace) -> int:
    data = _inspect_data(args.file)
    status = EXIT_OK if data["checksum_ok"] else EXIT_CHECK_FAILED
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))
        return status
    meta = data["meta"] or {}
    t = data["tokenizer"] or {}
    print(f"cartridge       {data['path']}")
    print(f"format          {data['format_version']} ({t.get('kind') or meta.get('format', 'unknown kind')})")
    if "error" in t:
        print(f"tokenizer       cannot be loaded: {t['error']}")
    elif t.get("kind") == "tokenizer.json":
        fallback = ", byte fallback" if t["byte_fallback"] else ""
        print(f"model           {t['model']} ({t['model_vocab_size']:,} entries{fallback})")
        print(f"normalizer      {t['normalizer']}")
        print(f"pre-tokenizer   {t['pre_tokenizer']}")
        print(f"post-processor  {t['post_processor']}")
        print(f"decoder         {t['decoder']}")
        specials = [x for x in t["added_tokens"] if x["special"]]
        print(f"vocabulary      {t['vocab_size']:,} ids ({len(t['added_tokens']):,} added, {len(specials):,} special)")
        print(f"added tokens    {_token_list(t['added_tokens']) or 'none'}")
        print(f"backend         {t['backend']}")
    elif t.get("kind") == "tiktoken":
        print(f"name            {t['name']}")
        pattern = t["pattern"]
        print(f"pattern         {pattern[:70]!r}{'...' if len(pattern) > 70 else ''}")
        print(f"vocabulary      {t['vocab_size']:,} ids ({len(t['special_tokens']):,} special)")
        print(f"special tokens  {_token_list(t['special_tokens']) or 'none'}")
        print(f"backend         {t['backend']}")
    print(f"unicode         {data['unicode_version']}")
    print(f"source sha256   {data['source_sha256'] or 'not recorded'}")
    print(f"created by      {meta.get('created_by', 'not recorded')}")
    print(f"size            {data['file_size']:,} bytes")
    print(f"checksum        {data['checksum']} ({'ok' if data['checksum_ok'] else 'MISMATCH: file is damaged'})")
    print("sections")
    for s in data["sections"]:
        print(f"  {s['id']}  offset {s['offset']:>12,}  size {s['size']:>12,}{'  required' if s['required'] else ''}")
    return status


# ------------------------------------------------------------------- encode, count, decode


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


def _names() -> tuple[list[str], list[str]]:
    from crayon_hf.tiktoken._encodings import BUNDLED
    from crayon_hf.tiktoken.model import MODEL_TO_ENCODING

    return list(BUNDLED), list(MODEL_TO_ENCODING)


def _did_you_mean(word: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _spec(args: argparse.Namespace) -> str:
    """The --tokenizer (or --model's encoding) as load_tokenizer takes it, checked with a hint."""
    bundled, models = _names()
    if getattr(args, "model", None):
        from crayon_hf.tiktoken.model import encoding_name_for_model

        try:
            return encoding_name_for_model(args.model)
        except KeyError:
            raise CliError(f"--model {args.model!r} is not a model name tiktoken maps to an encoding (or name the "
                           f"encoding: --tokenizer {'|'.join(bundled)}){_did_you_mean(args.model, models)}") from None
    spec = args.tokenizer
    if spec is None:
        raise CliError("name a tokenizer: --tokenizer NAME|PATH, or --model NAME (gpt-4o, gpt-3.5-turbo, ...)")
    if not os.path.exists(spec) and spec not in bundled:
        if spec in models:
            raise CliError(f"--tokenizer {spec!r} is a model name: use --model {spec}")
        raise CliError(f"--tokenizer {spec!r}: no such file, and not a bundled encoding ({', '.join(bundled)})"
                       f"{_did_you_mean(spec, bundled + models)}")
    return spec


class _Codec:
    """A loaded tokenizer of either kind with the CLI's special-token policy: special tokens in the
    text are ordinary text unless --allowed-special says otherwise (`encode_ordinary` for tiktoken,
    `encode_special_tokens = True` for a tokenizer.json, as tokenizers has it)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from crayon_hf._resolve import load_tokenizer
        from crayon_hf.tokenizer import Tokenizer

        spec = _spec(args)
        self.tok: Any = cast(Any, load_tokenizer(spec, pattern=getattr(args, "pattern", None)))  # either face
        self.tiktoken = not isinstance(self.tok, Tokenizer)
        self.label = self.tok.name if self.tiktoken else spec
        allowed = getattr(args, "allowed_special", None)
        self.allowed: Any = None
        if self.tiktoken:
            if allowed is not None:
                self.allowed = "all" if allowed == "all" else set(allowed.split(","))
                unknown = set() if self.allowed == "all" else self.allowed - self.tok.special_tokens_set
                if unknown:
                    raise CliError(f"not special tokens of {self.tok.name}: {', '.join(sorted(unknown))}"
                                   f"{_did_you_mean(sorted(unknown)[0], sorted(self.tok.special_tokens_set))}")
        else:
            if allowed not in (None, "all"):
                raise CliError("a tokenizer.json matches all of its special tokens or none (tokenizers' "
                               "encode_special_tokens): use --allowed-special all, or leave it out for ordinary text")
            self.tok.encode_special_tokens = allowed is None
            self.allowed = allowed
            # Every token of the file: a tokenizer.json's own truncation or padding does not apply.
            if self.tok.truncation is not None:
                self.tok.no_truncation()
            if self.tok.padding is not None:
                self.tok.no_padding()

    @property
    def vocab_size(self) -> int:
        return self.tok.n_vocab if self.tiktoken else self.tok.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, name: str):
        """All ids of one text, uint32. tiktoken: cut where no token can change and encoded on all
        cores; a tokenizer.json: one encode, exactly what tokenizers returns for the text (without
        the post-processor's special tokens, truncation or padding)."""
        import numpy as np

        if not self.tiktoken:
            engine = getattr(self.tok, "_engine", None)
            if getattr(self.tok, "_ref", None) is None and hasattr(engine, "encode_ids"):
                try:  # the native engine, ids only: no offsets computed for a file's worth of text
                    return np.asarray(engine.encode_ids(text, self.tok.encode_special_tokens), dtype=np.uint32)
                except UnicodeEncodeError:
                    pass  # a lone surrogate: the call below raises tokenizers' error
            return np.asarray(self.tok.encode_batch_to_numpy([text], add_special_tokens=False, offsets=False)[0],
                              dtype=np.uint32)
        threads = os.cpu_count() or 1
        enc = self.tok
        chunks = list(_safe_chunks(text, list(enc.special_tokens_set)))
        size = len(text.encode("utf-8")) if len(text) >= _PROGRESS_MIN_BYTES // 4 else len(text)
        bar = _progress(size, name) if size >= _PROGRESS_MIN_BYTES else None
        parts = []
        # Chunks are independent (cut where no token can change), so each group of them is
        # encoded on all cores at once.
        for start in range(0, len(chunks), 2 * threads):
            group = chunks[start : start + 2 * threads]
            if self.allowed is None:
                lists = enc.encode_ordinary_batch(group, num_threads=threads)
            else:
                lists = enc.encode_batch(group, num_threads=threads, allowed_special=self.allowed, disallowed_special=())
            parts += [np.asarray(ids, dtype=np.uint32) for ids in lists]
            if bar is not None:
                bar.update(sum(len(c.encode("utf-8")) for c in group))
        if bar is not None:
            bar.close()
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)

    def decode(self, ids: list[int]) -> bytes:
        if self.tiktoken:
            try:
                return self.tok.decode_bytes(ids)
            except KeyError as e:
                raise CliError(f"id {e.args[0]} is not a token of {self.label}") from None
        n = self.vocab_size
        bad = next((i for i in ids if not 0 <= i < n), None)
        if bad is not None:
            raise CliError(f"id {bad} is not a token of {self.label} (ids 0 to {n - 1:,})")
        return self.tok.decode(ids, skip_special_tokens=False).encode("utf-8")


def _read_bytes(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    _read_bytes_check(path)
    with open(path, "rb") as f:
        return f.read()


def _read_text(path: str) -> str:
    raw = _read_bytes(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CliError(f"{_display(path)} is not valid UTF-8 (byte {e.start:,}: {e.reason})") from None


def _display(path: str) -> str:
    return "<stdin>" if path == "-" else path


def _check_inputs(paths: Sequence[str]) -> None:
    """Every input is readable before any work starts (and stdin is named at most once)."""
    if list(paths).count("-") > 1:
        raise CliError("stdin ('-') can be read only once")
    for path in paths:
        if path != "-":
            _read_bytes_check(path)


def _read_bytes_check(path: str) -> None:
    if os.path.isdir(path):
        raise CliError(f"{path} is a directory; name the files in it (for example {path.rstrip('/')}/*.txt)")
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")


def _ids_line(ids) -> str:
    return " ".join(map(str, ids.tolist())) + "\n"


def cmd_encode(args: argparse.Namespace) -> int:
    """Ids of each file, one line per file on stdout or to -o (.npy, .bin, or text)."""
    import numpy as np

    from crayon_hf._cache import atomic_write

    codec = _Codec(args)
    _check_inputs(args.files)
    out = args.output
    binary = out is not None and out.endswith((".npy", ".bin"))
    arrays, lines, counts = [], [], []
    for path in args.files:
        ids = codec.encode(_read_text(path), os.path.basename(path))
        counts.append((path, len(ids)))
        if binary:
            arrays.append(ids)
        elif out is not None:
            lines.append(_ids_line(ids))
        else:
            sys.stdout.write(_ids_line(ids))
    if binary:
        all_ids = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.uint32)
        if out.endswith(".npy"):
            import io

            buf = io.BytesIO()
            np.save(buf, all_ids)
            atomic_write(out, buf.getvalue())
        else:
            atomic_write(out, all_ids.astype("<u4").tobytes())
    elif out is not None:
        atomic_write(out, "".join(lines).encode("ascii"))
    if not args.quiet:
        where = f"written to {out}" if out else "on stdout"
        for path, n in counts:
            print(f"{_display(path)}: {n:,} tokens", file=sys.stderr)
        total = sum(n for _, n in counts)
        if len(counts) > 1:
            print(f"total: {total:,} tokens in {len(counts):,} files", file=sys.stderr)
        mode = "special tokens matched" if codec.allowed is not None else "special tokens as text"
        print(f"({codec.label}, {mode}; ids {where}{', one line per file' if not binary else ''})", file=sys.stderr)
    return EXIT_OK


def cmd_count(args: argparse.Namespace) -> int:
    """Tokens per file and in all, like `wc`: exactly len(encode(text))."""
    codec = _Codec(args)
    _check_inputs(args.files)
    total = 0
    for path in args.files:
        n = len(codec.encode(_read_text(path), os.path.basename(path)))
        total += n
        print(f"{n:>10} {_display(path)}")
    if len(args.files) > 1:
        print(f"{total:>10} total")
    return EXIT_OK


def _parse_ids(raw: bytes, path: str) -> list[list[int]]:
    """Ids as `crayon encode` writes them: a .npy, a raw little-endian uint32 .bin, or text with
    one document per line (ids separated by spaces or commas; JSON lists too)."""
    import numpy as np

    if path.endswith(".npy"):
        import io

        return [np.load(io.BytesIO(raw)).astype(np.int64).ravel().tolist()]
    if path.endswith(".bin"):
        if len(raw) % 4:
            raise CliError(f"{path}: {len(raw):,} bytes, not a whole number of uint32 ids")
        return [np.frombuffer(raw, dtype="<u4").astype(np.int64).tolist()]
    docs = []
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        fields = line.replace(",", " ").replace("[", " ").replace("]", " ").split()
        if not fields:
            continue
        try:
            docs.append([int(x) for x in fields])
        except ValueError:
            bad = next(x for x in fields if not x.lstrip("-").isdigit())
            raise CliError(f"{_display(path)} line {number}: {bad!r} is not a token id") from None
    return docs


def cmd_decode(args: argparse.Namespace) -> int:
    """Ids back to text: each document's text, in order, nothing added between them."""
    from crayon_hf._cache import atomic_write

    codec = _Codec(args)
    _check_inputs(args.files)
    chunks = [codec.decode(ids) for path in args.files for ids in _parse_ids(_read_bytes(path), path)]
    data = b"".join(chunks)
    if args.output:
        atomic_write(args.output, data)
        return EXIT_OK
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    return EXIT_OK


def cmd_encode_corpus(args: argparse.Namespace) -> int:
    """Training data: every document of the inputs to one memory-mappable array (crayon_hf.corpus),
    on this machine or, with --ray, on a Ray cluster (crayon_hf.ray_corpus)."""
    from crayon_hf.corpus import encode_corpus

    fmt = args.format or ("npy" if args.output.endswith(".npy") else "uint32")
    if args.shards and args.ray is None:
        raise CliError("--shards writes one shard per Ray task; pass --ray too")
    tokenizer: Any = args.tokenizer
    # Special tokens in documents are ordinary text, as `crayon encode` has them: a tiktoken
    # encoding's corpus is encode_ordinary already; a tokenizer.json's is loaded here with
    # encode_special_tokens set, unless --allowed-special all asks for its special tokens.
    codec = _Codec(args)
    if codec.tiktoken:
        if args.allowed_special is not None:
            raise CliError("encode-corpus encodes a tiktoken encoding's documents as ordinary text; "
                           "--allowed-special is for tokenizer.json vocabularies here (crayon encode takes it for both)")
    else:
        tokenizer = codec.tok
        # OUTPUT.json names a loaded tokenizer by its `name`: the spec as given, as for a spec string.
        tokenizer.name = args.tokenizer
    common = dict(format=fmt, append_eos=args.append_eos, eos_token=args.eos_token, jsonl_field=args.jsonl_field,
                  progress=not args.quiet, pattern=args.pattern)
    try:
        if args.ray is not None:
            from crayon_hf.ray_corpus import encode_corpus_ray

            # A loaded tokenizer reaches the workers as its cartridge, through the object store.
            s = encode_corpus_ray(args.inputs, args.output, tokenizer, address=args.ray or None,
                                  shards=args.shards, cpus_per_task=args.threads or 1,
                                  task_bytes=int(args.task_mib * (1 << 20)) if args.task_mib else None, **common)
        else:
            s = encode_corpus(args.inputs, args.output, tokenizer, threads=args.threads, **common)
    except KeyboardInterrupt:
        print(f"crayon encode-corpus: interrupted; nothing written to {args.output}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if not args.quiet:
        rate = s["input_bytes"] / max(s["seconds"], 1e-9) / (1 << 20)
        where = f"in {s['tasks']} Ray tasks on {s['cluster_cpus']} CPUs, " if args.ray is not None else ""
        index = f", index {s['index_path']}" if s.get("index_path") else ""
        layout = "shards and manifest" if args.shards else f"{fmt}{index}"
        print(f"wrote {s['n_tokens']:,} tokens of {s['n_docs']:,} documents to {args.output} ({layout}), "
              f"{where}in {s['seconds']:.1f} s ({rate:.1f} MiB/s)", file=sys.stderr)
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    """Parity and speed side by side with the reference libraries (crayon_hf.bench)."""
    from crayon_hf import bench
    from crayon_hf.bench.measure import Config

    if args.suite == (args.tokenizer is not None):
        raise CliError("name a tokenizer: --tokenizer NAME|PATH")
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
    return EXIT_OK if exact else EXIT_CHECK_FAILED


def cmd_train(args: argparse.Namespace) -> int:
    """Train byte-level BPE like tokenizers' BpeTrainer; write tokenizer.json and a cartridge."""
    from .train import train_bpe

    _check_inputs(args.files)
    if "-" in args.files:
        raise CliError("crayon train reads files (twice); save stdin to a file first")
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
    print(f"crayon train: {tok.get_vocab_size():,} tokens -> {json_path}, {dat_path}")
    return EXIT_OK


_TOKENIZER_HELP = ("a bundled encoding (cl100k_base, o200k_base, r50k_base, ...), a cartridge, a tiktoken rank file, "
                   "a tokenizer.json, a SentencePiece model or a HuggingFace folder (recognised by content)")
_SPECIAL_HELP = ("match these special tokens in the text (all, or TOKEN,... for a tiktoken encoding; a "
                 "tokenizer.json takes all). Default: special tokens are ordinary text, for every kind of tokenizer")


def _add_tokenizer(p: argparse.ArgumentParser, model: bool = True) -> None:
    g = p.add_mutually_exclusive_group(required=model)
    g.add_argument("-t", "--tokenizer", metavar="NAME|PATH", help=_TOKENIZER_HELP)
    if model:
        g.add_argument("-m", "--model", metavar="MODEL",
                       help="a model name, as tiktoken's encoding_for_model takes it (gpt-4o, gpt-4, gpt-3.5-turbo, ...)")
    p.add_argument("--pattern", help="split pattern for a rank file crayon-hf does not recognise")


def _sub(sub, name: str, summary: str, description: str, examples: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=summary, description=description, epilog="examples:\n" + examples,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


EXIT_HELP = """exit status:
  0    done
  1    a check failed (convert --verify or bench found a differing token; inspect: damaged file)
  2    the command could not run (usage, a missing or unreadable input, a missing optional library)
  130  interrupted; 141: stdout closed early (| head)"""


def build_parser(prog: str = "crayon") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="crayon-hf: exact, fast tokenization from cartridges",
        epilog="examples:\n  crayon count --model gpt-4o README.md\n  crayon encode -t cl100k_base notes.txt | "
        "crayon decode -t cl100k_base -\n  crayon SUBCOMMAND --help\n\n" + EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"crayon-hf {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")

    c = _sub(sub, "convert", "compile a vocabulary into a cartridge",
             "Compiles a tokenizer.json, a tiktoken rank file or a SentencePiece model into a cartridge (one "
             "memory-mapped file),\noptionally checking it against the reference library.",
             "  crayon convert tokenizer.json -o model.dat --verify\n"
             "  crayon convert llama3.tiktoken --pattern llama3 --special '<|begin_of_text|>=128000' -o llama3.dat")
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
        "cartridge and with the reference library (tokenizers or tiktoken: pip install 'crayon-hf[verify]') "
        "and report parity; exits 1 on any mismatch",
    )
    c.set_defaults(func=cmd_convert)

    i = _sub(sub, "inspect", "show what a cartridge holds and whether it is intact",
             "Shows a cartridge's tokenizer (model, normalizer, pre-tokenizer chain, vocabulary, added or special "
             "tokens,\nbackend), its header and sections, and verifies its checksum (exit 1 if the file is damaged).",
             "  crayon inspect model.dat\n  crayon inspect model.dat --json | jq .tokenizer")
    i.add_argument("file")
    i.add_argument("--json", action="store_true", help="machine-readable output with stable keys")
    i.set_defaults(func=cmd_inspect)

    e = _sub(sub, "encode", "encode text files to token ids",
             "Encodes each file (or stdin, '-') to token ids: one line of ids per file on stdout, or all of them "
             "to -o.\nA summary (tokens per file) goes to stderr. Special tokens in the text are ordinary text "
             "unless\n--allowed-special says otherwise.",
             "  crayon encode --tokenizer cl100k_base README.md\n"
             "  cat notes.txt | crayon encode --model gpt-4o -\n"
             "  crayon encode -t path/to/hf_folder corpus/*.txt -o ids.npy")
    _add_tokenizer(e)
    e.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files; - reads stdin")
    e.add_argument("-o", "--output", help="OUT.npy (numpy uint32, all ids), OUT.bin (raw little-endian uint32, all ids), "
                   "or any other name: text, one line of ids per file")
    e.add_argument("--allowed-special", metavar="all|TOKEN,...", help=_SPECIAL_HELP)
    e.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    e.set_defaults(func=cmd_encode)

    n = _sub(sub, "count", "count tokens per file and in all",
             "Prints the number of tokens of each file (or stdin, '-') and the total, like wc: exactly\n"
             "len(encode(text)), with special tokens as ordinary text unless --allowed-special says otherwise.",
             "  crayon count --model gpt-4o README.md docs/*.md\n  git diff | crayon count -t o200k_base -")
    _add_tokenizer(n)
    n.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files; - reads stdin")
    n.add_argument("--allowed-special", metavar="all|TOKEN,...", help=_SPECIAL_HELP)
    n.set_defaults(func=cmd_count)

    d = _sub(sub, "decode", "turn token ids back into text",
             "Decodes ids as crayon encode writes them (text with one document per line, .npy, or raw uint32 .bin)\n"
             "and writes the text of each document, in order, to stdout or -o. Special tokens are kept.",
             "  crayon decode --tokenizer cl100k_base ids.txt\n  echo 15339 1917 | crayon decode -t cl100k_base -")
    _add_tokenizer(d)
    d.add_argument("files", nargs="+", metavar="FILE", help="ids: text, .npy or .bin; - reads text from stdin")
    d.add_argument("-o", "--output", help="write the text here instead of stdout")
    d.set_defaults(func=cmd_decode)

    ec = _sub(sub, "encode-corpus", "encode a corpus into one memory-mappable array of ids (training data)",
              "Encodes every document of the inputs, in order, into one array of ids with an index of document "
              "starts\nand a JSON sidecar (docs/corpus.md). Special tokens in documents are ordinary text.",
              "  crayon encode-corpus books/*.txt web.jsonl -o tokens.bin --tokenizer cl100k_base --append-eos")
    ec.add_argument("inputs", nargs="+", metavar="INPUT",
                    help="plain-text files (one document each), JSONL (one per line) or Parquet (one per row)")
    ec.add_argument("-o", "--output", required=True,
                    help="the ids; also writes OUTPUT.idx.npy (document starts) and OUTPUT.json (what, with what)")
    _add_tokenizer(ec, model=False)
    ec.add_argument("--allowed-special", metavar="all", help="a tokenizer.json's special tokens in documents are "
                    "matched as tokens (default: ordinary text)")
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

    b = _sub(sub, "bench", "token parity and speed against tokenizers, tiktoken, transformers (and tokie, "
             "fastokens when installed)",
             "Measures parity and speed side by side with the reference libraries on your text and writes "
             "bench.md,\nbench.json and bench.png (pip install 'crayon-hf[bench]'). Exits 1 if any token differs.",
             "  crayon bench --tokenizer path/to/hf_folder --corpus corpus.txt --out results/")
    b.add_argument("-t", "--tokenizer", metavar="NAME|PATH", help=_TOKENIZER_HELP)
    b.add_argument("--pattern", help="split pattern for a rank file crayon-hf does not recognise")
    b.add_argument("--corpus", action="append", metavar="FILE",
                   help="plain text or JSONL (repeatable; default: a built-in multilingual sample). The first also "
                   "feeds the batch and transformers measures")
    b.add_argument("--jsonl-field", default="text", help="the text field of JSONL records (default: text)")
    b.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads for batch encoding (default: all)")
    b.add_argument("--out", help="results folder (default: ./crayon-bench)")
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
    # The maintainers' suite (every shared vocabulary; rewrites README.md's summary): hidden from
    # users' --help, documented in docs/benchmarks.md.
    b.add_argument("--suite", action="store_true", help=argparse.SUPPRESS)
    b.add_argument("--shared", help=argparse.SUPPRESS)
    b.add_argument("--only", action="append", metavar="NAME", help=argparse.SUPPRESS)
    b.add_argument("--readme", default="README.md", help=argparse.SUPPRESS)
    b.add_argument("--no-readme", action="store_true", help=argparse.SUPPRESS)
    b.set_defaults(func=cmd_bench)

    t = _sub(sub, "train", "train a byte-level BPE tokenizer (tokenizers' BpeTrainer merges, faster)",
             "Trains a byte-level BPE vocabulary with the merges tokenizers' BpeTrainer would learn, and writes\n"
             "tokenizer.json and a cartridge (tokenizer.dat) to OUT_DIR.",
             "  crayon train corpus/*.txt --vocab-size 32000 --special-token '<|endoftext|>' -o out/")
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

    from crayon_hf._cache import add_cache_command

    add_cache_command(sub)  # crayon cache list|clear (self-contained in _cache.py)
    return p


def _quiet_stdout() -> None:
    """After a closed pipe: stdout goes nowhere, so the interpreter's final flush cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None, prog: str = "crayon") -> int:
    """Runs one subcommand; returns the exit status (see the module docstring)."""
    args = build_parser(prog).parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        print(f"crayon {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (CliError, ValueError, OSError) as e:
        message = str(e)
        if isinstance(e, FileNotFoundError) and e.filename:
            message = f"{e.filename}: no such file"
        elif isinstance(e, IsADirectoryError) and e.filename:
            message = f"{e.filename} is a directory"
        print(f"crayon {args.command}: error: {message}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
