"""Writes docs/api.md, the API reference, from the docstrings of the public API.

    python tools/gen_api_docs.py            # rewrite docs/api.md
    python tools/gen_api_docs.py --check    # fail if docs/api.md is stale (tests/test_public_api.py)

The reference is built with `inspect` alone (no documentation toolchain, nothing downloaded), from
the crayon_hf that `import crayon_hf` finds: run it against the installed package. `SECTIONS` is
the list of what is public, face by face; tests/test_public_api.py checks that every method listed
here has a docstring, so a new public method without one fails the suite.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _generated import generator_main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "api.md"


def sections() -> list[tuple[str, str, list[tuple[str, Any]]]]:
    """(title, introduction, [(qualified name, object)]) for each part of the public API."""
    import crayon_hf
    import crayon_hf.cuda as cuda
    import crayon_hf.tiktoken as tiktoken
    from crayon_hf.ray_corpus import encode_corpus_ray
    from crayon_hf.streaming import EncodeStream

    return [
        ("crayon_hf", "Loading any tokenizer, training, corpus encoding, and the transformers switch.", [
            ("crayon_hf.load", crayon_hf.load),
            ("crayon_hf.train_bpe", crayon_hf.train_bpe),
            ("crayon_hf.encode_corpus", crayon_hf.encode_corpus),
            ("crayon_hf.open_corpus", crayon_hf.open_corpus),
            ("crayon_hf.TokenizeBatch", crayon_hf.TokenizeBatch),
            ("crayon_hf.ray_corpus.encode_corpus_ray", encode_corpus_ray),
            ("crayon_hf.patch_transformers", crayon_hf.patch_transformers),
            ("crayon_hf.unpatch_transformers", crayon_hf.unpatch_transformers),
        ]),
        ("crayon_hf.tiktoken", "The tiktoken face: the `tiktoken` package's API (0.14).", [
            ("crayon_hf.tiktoken.get_encoding", tiktoken.get_encoding),
            ("crayon_hf.tiktoken.list_encoding_names", tiktoken.list_encoding_names),
            ("crayon_hf.tiktoken.encoding_for_model", tiktoken.encoding_for_model),
            ("crayon_hf.tiktoken.encoding_name_for_model", tiktoken.encoding_name_for_model),
            ("crayon_hf.tiktoken.load.load_tiktoken_bpe", tiktoken.load.load_tiktoken_bpe),
            ("crayon_hf.tiktoken.load.dump_tiktoken_bpe", tiktoken.load.dump_tiktoken_bpe),
            ("crayon_hf.tiktoken.Encoding", tiktoken.Encoding),
        ]),
        ("crayon_hf.Tokenizer", "The tokenizers face: `tokenizers.Tokenizer`'s API (0.23) on tokenizer.json files.", [
            ("crayon_hf.Tokenizer", crayon_hf.Tokenizer),
            ("crayon_hf.Encoding", crayon_hf.Encoding),
            ("crayon_hf.AddedToken", crayon_hf.AddedToken),
            ("crayon_hf.BatchArrays", crayon_hf.BatchArrays),
        ]),
        ("crayon_hf.CrayonTokenizer", "The transformers face. A `CrayonTokenizer` is also an instance of the "
         "tokenizer class transformers would load (e.g. `Qwen2Tokenizer`); only the methods crayon-hf adds or "
         "documents differently are listed here, the rest is transformers' own API.", [
            ("crayon_hf.CrayonTokenizer", crayon_hf.CrayonTokenizer),
        ]),
        ("crayon_hf.cuda", "GPU batch encoding (docs/cuda.md): the same ids as the CPU engine. The tiktoken "
         "face's `encode_batch_to_numpy` and `encode_ordinary_batch_to_numpy` take `device=\"cuda\"`.", [
            ("crayon_hf.cuda.is_available", cuda.is_available),
            ("crayon_hf.cuda.unavailable_reason", cuda.unavailable_reason),
            ("crayon_hf.cuda.device_count", cuda.device_count),
            ("crayon_hf.cuda.encode_batch_to_device", cuda.encode_batch_to_device),
        ]),
        ("Streaming", "Incremental encoding and decoding, on every face.", [
            ("crayon_hf.DecodeStream", crayon_hf.DecodeStream),
            ("crayon_hf.streaming.EncodeStream", EncodeStream),
        ]),
    ]


def public_members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties a class defines itself, in source order: the constructor
    first (when the class defines one), then every name without a leading underscore."""
    if "__init__" in cls.__dict__:
        yield "__init__", cls.__dict__["__init__"]
    for name, member in cls.__dict__.items():
        if name.startswith("_") or not _is_method(member):
            continue
        yield name, member


def _is_method(member: Any) -> bool:
    return isinstance(member, (staticmethod, classmethod, property)) or inspect.isfunction(member) \
        or hasattr(member, "func")  # functools.cached_property


def _function(member: Any) -> Callable[..., Any] | None:
    if isinstance(member, (staticmethod, classmethod)):
        return member.__func__
    if inspect.isfunction(member):
        return member
    return None


def docstring(member: Any) -> str:
    """The docstring of a function, method, property or cached property ("" when it has none)."""
    fn = _function(member)
    if fn is None and isinstance(member, property):
        fn = member.fget
    if fn is None and hasattr(member, "func"):
        fn = member.func
    return inspect.cleandoc((fn or member).__doc__ or "")


def signature(fn: Callable[..., Any], drop_first: bool) -> str:
    """`(a: T, *, b: U = 1) -> R` from the source annotations (kept as written, so the text does
    not depend on what a Python version prints for a type)."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if drop_first and params:
        params = params[1:]
    parts: list[str] = []
    star_done = False
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.kind is p.VAR_POSITIONAL:
            star_done = True
        text = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {p.default!r}" if p.annotation is not p.empty else f"={p.default!r}"
        parts.append(text)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params) or params[i + 1].kind is not p.POSITIONAL_ONLY):
            parts.append("/")
    out = f"({', '.join(parts)})"
    if sig.return_annotation is not sig.empty and sig.return_annotation not in ("None", None):
        out += f" -> {_annotation(sig.return_annotation)}"
    return out


def _annotation(a: Any) -> str:
    return a if isinstance(a, str) else inspect.formatannotation(a)


def _class_md(qualname: str, cls: type) -> list[str]:
    short = qualname.rsplit(".", 1)[-1]
    lines = [f"### class `{qualname}`", ""]
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        lines += [docstring(cls), "", "Fields: " + ", ".join(f"`{f}`" for f in cls._fields) + ".", ""]
        return lines
    lines += [docstring(cls), ""]
    for name, member in public_members(cls):
        fn = _function(member)
        if name == "__init__":
            title = f"`{short}{signature(fn, True)}`"
        elif fn is not None:
            kind = "classmethod " if isinstance(member, classmethod) else \
                "staticmethod " if isinstance(member, staticmethod) else ""
            title = f"{kind}`{short}.{name}{signature(fn, not isinstance(member, staticmethod))}`"
        else:
            getter = member.fget if isinstance(member, property) else member.func
            returns = inspect.signature(getter).return_annotation
            ret = f": {_annotation(returns)}" if returns is not inspect.Signature.empty else ""
            title = f"property `{short}.{name}{ret}`"
        lines += [f"#### {title}", "", docstring(member), ""]
    return lines


def build() -> str:
    lines = [
        "# API reference",
        "",
        "<!-- Generated by tools/gen_api_docs.py from the docstrings; do not edit by hand "
        "(tests/test_public_api.py checks it is current). -->",
        "",
        "Everything here is importable as written; the three faces are drop-ins for `tiktoken`, "
        "`tokenizers.Tokenizer` and a transformers tokenizer, so their own documentation applies too. "
        "Examples in docstrings use `enc` for a tiktoken `Encoding` (cl100k_base) and `tok` for a "
        "tokenizer (Llama 3.1's tokenizer.json unless said otherwise).",
        "",
    ]
    for title, intro, members in sections():
        lines += [f"## {title}", "", intro, ""]
        for qualname, obj in members:
            if inspect.isclass(obj):
                lines += _class_md(qualname, obj)
            else:
                lines += [f"### `{qualname}{signature(obj, False)}`", "", docstring(obj), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.exit(generator_main(build, OUTPUT, __doc__, "gen_api_docs.py"))
