"""crayon-hf: exact tiktoken- and HuggingFace-compatible tokenization from memory-mapped cartridges.

Faces:
    crayon_hf.tiktoken    a drop-in for the ``tiktoken`` package
    crayon_hf.Tokenizer   a drop-in for ``tokenizers.Tokenizer`` (tokenizer.json files)
    crayon_hf.CrayonTokenizer   a transformers tokenizer (AutoTokenizer, save_pretrained, push_to_hub)
    crayon_hf.DecodeStream      streaming decode for every face (tokenizers.decoders.DecodeStream's API)
    crayon_hf.load        any tokenizer by name or path (a bundled encoding, a file, a folder)
    crayon_hf.chunk_by_tokens   split a text into chunks that each fit a token budget (RAG)

``import crayon_hf`` is cheap: the native engine and numpy load when a face is first used, and
transformers is never imported here -- a small import hook wraps `AutoTokenizer.from_pretrained`
when transformers loads it, so folders saved by crayon-hf come back as CrayonTokenizers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # What the module __getattr__ below hands out, for type checkers and editors. At run time
    # nothing is imported until first use (transformers in particular is only imported by
    # `crayon_hf.CrayonTokenizer`).
    from crayon_hf._hf.encoding import Encoding as Encoding
    from crayon_hf._resolve import load as load
    from crayon_hf.chunking import Chunk as Chunk
    from crayon_hf.chunking import chunk_by_tokens as chunk_by_tokens
    from crayon_hf.corpus import TokenizeBatch as TokenizeBatch
    from crayon_hf.corpus import encode_corpus as encode_corpus
    from crayon_hf.corpus import open_corpus as open_corpus
    from crayon_hf.streaming import DecodeStream as DecodeStream
    from crayon_hf.tokenizer import AddedToken as AddedToken
    from crayon_hf.tokenizer import BatchArrays as BatchArrays
    from crayon_hf.tokenizer import Tokenizer as Tokenizer
    from crayon_hf.train import train_bpe as train_bpe
    from crayon_hf.transformers import CrayonTokenizer as CrayonTokenizer
    from crayon_hf.transformers import patch_transformers as patch_transformers
    from crayon_hf.transformers import unpatch_transformers as unpatch_transformers

__version__ = "0.1.0"

__all__ = [
    "__version__", "Tokenizer", "Encoding", "AddedToken", "CrayonTokenizer", "patch_transformers",
    "unpatch_transformers", "DecodeStream", "BatchArrays", "train_bpe", "load", "encode_corpus",
    "chunk_by_tokens", "Chunk", "open_corpus", "TokenizeBatch",
]

_LAZY = {
    "Tokenizer": ("crayon_hf.tokenizer", "Tokenizer"),
    "AddedToken": ("crayon_hf.tokenizer", "AddedToken"),
    "BatchArrays": ("crayon_hf.tokenizer", "BatchArrays"),
    "Encoding": ("crayon_hf._hf.encoding", "Encoding"),
    "CrayonTokenizer": ("crayon_hf.transformers", "CrayonTokenizer"),
    "patch_transformers": ("crayon_hf.transformers", "patch_transformers"),
    "unpatch_transformers": ("crayon_hf.transformers", "unpatch_transformers"),
    "DecodeStream": ("crayon_hf.streaming", "DecodeStream"),
    "train_bpe": ("crayon_hf.train", "train_bpe"),
    "load": ("crayon_hf._resolve", "load"),
    "encode_corpus": ("crayon_hf.corpus", "encode_corpus"),
    "chunk_by_tokens": ("crayon_hf.chunking", "chunk_by_tokens"),
    "Chunk": ("crayon_hf.chunking", "Chunk"),
    "open_corpus": ("crayon_hf.corpus", "open_corpus"),
    "TokenizeBatch": ("crayon_hf.corpus", "TokenizeBatch"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'crayon_hf' has no attribute {name!r}")


def __dir__() -> list[str]:
    # The lazy names too, so dir(crayon_hf) and editors' completion list the public API.
    return sorted(set(globals()) | set(_LAZY))


def _install_transformers_hook() -> None:
    from crayon_hf import _transformers_hook

    _transformers_hook.install()


_install_transformers_hook()
