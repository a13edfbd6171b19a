"""What is benchmarked: a target (the vocabulary the user named) and the libraries that run it.

Every library is a `Subject`: a few lines of Python source that bind `tok`, and the expressions
that encode, batch-encode and decode with it. The same source builds the tokenizer in this
process and, for the cold-load and memory measures, in a fresh interpreter, so both measure
exactly the same thing. A subject's role is "crayon" (the library under test), "reference" (the
library whose output is the truth: `tokenizers` or `tiktoken`) or "optional" (another fast
tokenizer, run when installed and labelled as such).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import lzma
import os
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path


@dataclass(frozen=True)
class Api:
    """How to call one kind of library. Expressions see `tok`, and `d` (a document), `r` (what
    `encode` returned), `texts` and `threads` (a batch), `ids` (a token list)."""

    encode: str
    ids: str
    batch: str
    decode: str
    offsets: str | None = None  # where the library reports character offsets


TIKTOKEN = Api("tok.encode_ordinary(d)", "r", "tok.encode_ordinary_batch(texts, num_threads=threads)", "tok.decode(ids)")
TOKENIZERS = Api("tok.encode(d)", "r.ids", "[e.ids for e in tok.encode_batch(texts)]", "tok.decode(ids)", "r.offsets")
TOKIE = Api("tok.encode(d)", "r.ids", "[e.ids for e in tok.encode_batch(texts)]", "tok.decode(ids)")
# fastokens adds no special tokens unless asked; tokenizers does.
FASTOKENS = Api("tok.encode(d, add_special_tokens=True)", "r.ids",
                "[e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]", "tok.decode(ids)")
FASTOKENS_TIKTOKEN = Api("tok.encode_ordinary(d)", "r.ids", "[e.ids for e in tok.encode_batch(texts)]",
                         "tok.decode(ids)")


@dataclass(frozen=True)
class Subject:
    label: str
    role: str  # "crayon", "reference" or "optional"
    module: str  # the import that must exist for this subject to run
    setup: str  # Python source binding `tok`
    api: Api


@dataclass(frozen=True)
class TransformersSubject:
    label: str
    role: str
    setup: str  # binds `tok`, a transformers tokenizer


@dataclass
class Target:
    name: str
    family: str  # "tiktoken" or "tokenizers"
    source: str  # the file the user named (its size is reported)
    subjects: list[Subject]
    transformers: list[TransformersSubject] = field(default_factory=list)
    cartridge: str | None = None  # crayon-hf's compiled cartridge
    backend: str = "native"


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _load(setup: str):
    namespace: dict = {}
    exec(compile(setup, "<bench setup>", "exec"), namespace)
    return namespace["tok"]


# ------------------------------------------------------------------------------------ tiktoken


def _write_rank_file(ranks: dict[bytes, int], path: Path) -> None:
    lines = (f"{base64.b64encode(token).decode()} {rank}" for token, rank in sorted(ranks.items(), key=lambda x: x[1]))
    path.write_text("\n".join(lines) + "\n")


def _tiktoken_target(name: str, rank_file: str, pat_str: str, specials: dict[str, int], crayon_setup: str,
                     source: str) -> Target:
    reference = (
        "import tiktoken, tiktoken.load\n"
        f"tok = tiktoken.Encoding({name!r}, pat_str={pat_str!r}, "
        f"mergeable_ranks=tiktoken.load.load_tiktoken_bpe({rank_file!r}), special_tokens={specials!r})"
    )
    fastokens = (
        "import fastokens\n"
        f"tok = fastokens.Tokenizer.from_tiktoken({rank_file!r}, pattern={pat_str!r}, special_tokens={{}})"
    )
    return Target(name, "tiktoken", source, [
        Subject("crayon-hf", "crayon", "crayon_hf", crayon_setup, TIKTOKEN),
        Subject("tiktoken", "reference", "tiktoken", reference, TIKTOKEN),
        Subject("fastokens", "optional", "fastokens", fastokens, FASTOKENS_TIKTOKEN),
    ])


def _tiktoken_from_encoding(name: str, enc, workdir: Path, source: str) -> Target:
    """A target for a crayon-hf tiktoken Encoding (bundled, from a rank file or a cartridge): the
    reference gets the same ranks, pattern and special tokens; crayon-hf maps the cartridge."""
    cartridge = enc.cartridge_path
    if cartridge is None:
        cartridge = str(workdir / f"{name}.dat")
        enc.save_cartridge(cartridge)
    rank_file = workdir / f"{name}.tiktoken"
    _write_rank_file(enc._mergeable_ranks, rank_file)
    setup = f"import crayon_hf.tiktoken as tk\ntok = tk.Encoding.from_cartridge({cartridge!r})"
    target = _tiktoken_target(name, str(rank_file), enc._pat_str, dict(enc._special_tokens), setup, source)
    target.cartridge = cartridge
    return target


def _bundled_target(name: str, workdir: Path) -> Target:
    """A bundled encoding: tiktoken loads the same rank file, decompressed (what get_encoding reads
    from its cache), and crayon-hf maps its bundled cartridge as get_encoding does."""
    from crayon_hf.tiktoken import get_encoding
    from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS

    known = KNOWN_ENCODINGS[name]
    enc = get_encoding(name)
    rank_file = workdir / f"{known.rank_file}.tiktoken"
    if not rank_file.exists():
        data = files("crayon_hf").joinpath(f"data/{known.rank_file}.tiktoken.xz").read_bytes()
        rank_file.write_bytes(lzma.decompress(data))
    setup = f"import crayon_hf.tiktoken as tk\ntok = tk.get_encoding({name!r})"
    target = _tiktoken_target(name, str(rank_file), known.pat_str, dict(known.special_tokens), setup, name)
    target.cartridge = enc.cartridge_path
    return target


# ------------------------------------------------------------------------------- tokenizers


def _hf_target(name: str, json_path: str, crayon, folder: str | None, source: str) -> Target:
    cartridge = getattr(crayon, "_cartridge_path", None)
    backend = crayon.crayon_backend
    if cartridge:
        setup = f"from crayon_hf import Tokenizer\ntok = Tokenizer.from_file({cartridge!r})"
    else:
        setup = f"from crayon_hf import Tokenizer\ntok = Tokenizer.from_file({json_path!r})"
    subjects = [
        Subject("crayon-hf", "crayon", "crayon_hf", setup, TOKENIZERS),
        Subject("tokenizers", "reference", "tokenizers",
                f"import tokenizers\ntok = tokenizers.Tokenizer.from_file({json_path!r})", TOKENIZERS),
        Subject("tokie", "optional", "tokie", f"import tokie\ntok = tokie.Tokenizer.from_json({json_path!r})", TOKIE),
        Subject("fastokens", "optional", "fastokens",
                f"import fastokens\ntok = fastokens.Tokenizer.from_file({json_path!r})", FASTOKENS),
    ]
    tf = []
    if folder is not None:
        tf = [
            TransformersSubject("CrayonTokenizer", "crayon",
                                "from crayon_hf.transformers import CrayonTokenizer\n"
                                f"tok = CrayonTokenizer.from_pretrained({folder!r})"),
            TransformersSubject("transformers", "reference",
                                f"from transformers import AutoTokenizer\ntok = AutoTokenizer.from_pretrained({folder!r})"),
        ]
    return Target(name, "tokenizers", source, subjects, tf, cartridge, backend)


def resolve(spec: str, workdir: Path, *, pattern: str | None = None) -> Target:
    """The target for `crayon bench --tokenizer SPEC` (the forms `crayon encode` accepts, except a
    SentencePiece model, whose reference would be our own conversion)."""
    from crayon_hf._resolve import load_tokenizer
    from crayon_hf.conversion.sniff import FileKind, sniff_file
    from crayon_hf.tiktoken._encodings import BUNDLED

    if not os.path.exists(spec):
        if spec in BUNDLED:
            return _bundled_target(spec, workdir)
        raise ValueError(f"--tokenizer {spec!r}: no such file, and not a bundled encoding ({', '.join(BUNDLED)})")
    path = Path(spec).resolve()
    folder = None
    if path.is_dir():
        folder, path = str(path), path / "tokenizer.json"
        if not path.exists():
            raise ValueError(f"--tokenizer {spec!r} is a directory without a tokenizer.json")
    name = Path(folder).name if folder else path.name
    kind = sniff_file(str(path))
    if kind is FileKind.SENTENCEPIECE:
        raise ValueError(
            f"--tokenizer {spec!r} is a SentencePiece model: its only reference here would be crayon-hf's own "
            "conversion. Benchmark the tokenizer.json transformers makes of it (crayon convert MODEL -o tokenizer.json)"
        )
    loaded = load_tokenizer(str(path), pattern=pattern)
    if kind is FileKind.TOKENIZER_JSON:
        if folder is None and (path.parent / "tokenizer_config.json").exists():
            folder = str(path.parent)  # the transformers face needs the folder
        return _hf_target(name, str(path), loaded, folder, spec)
    if hasattr(loaded, "encode_ordinary"):  # a rank file or a tiktoken cartridge
        return _tiktoken_from_encoding(Path(name).stem, loaded, workdir, spec)
    # A tokenizer.json cartridge: the reference reads the tokenizer.json it was compiled from.
    json_path = workdir / f"{path.stem}.tokenizer.json"
    loaded.save(json_path)
    return _hf_target(name, str(json_path), loaded, None, spec)


def shared_targets(shared: Path) -> list[tuple[str, str]]:
    """(name, spec) of every vocabulary in ../shared/vocab: tiktoken rank files by their known
    names (bundled ones as bundled encodings), then every HF folder."""
    from crayon_hf.tiktoken._encodings import BUNDLED, KNOWN_ENCODINGS

    out = []
    tiktoken_dir = shared / "vocab" / "tiktoken"
    for rank in sorted(tiktoken_dir.glob("*.tiktoken")):
        stem = rank.name[: -len(".tiktoken")]
        out.append((stem, stem if stem in BUNDLED and KNOWN_ENCODINGS[stem].bundled else str(rank)))
    for folder in sorted((shared / "vocab" / "hf").iterdir()):
        if (folder / "tokenizer.json").exists():
            out.append((folder.name, str(folder)))
    return out


def versions() -> dict[str, str | None]:
    """Versions of every library the harness can run."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for dist in ("crayon-hf", "tokenizers", "tiktoken", "transformers", "tokie", "fastokens", "numpy"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    return out


def json_safe(value):
    return json.loads(json.dumps(value, default=str))
