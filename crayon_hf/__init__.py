"""crayon-hf: exact tiktoken- and HuggingFace-compatible tokenization from memory-mapped cartridges.

Faces:
    crayon_hf.tiktoken    a drop-in for the ``tiktoken`` package
    crayon_hf.Tokenizer   a drop-in for ``tokenizers.Tokenizer`` (tokenizer.json files)
    crayon_hf.CrayonTokenizer   a transformers tokenizer (AutoTokenizer, save_pretrained, push_to_hub)
    crayon_hf.DecodeStream      streaming decode for every face (tokenizers.decoders.DecodeStream's API)

``import crayon_hf`` is cheap: the native engine and numpy load when a face is first used, and
transformers is never imported here -- a small import hook wraps `AutoTokenizer.from_pretrained`
when transformers loads it, so folders saved by crayon-hf come back as CrayonTokenizers.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "__version__", "Tokenizer", "Encoding", "AddedToken", "CrayonTokenizer", "patch_transformers",
    "unpatch_transformers", "DecodeStream", "BatchArrays", "train_bpe",
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
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'crayon_hf' has no attribute {name!r}")


def _install_transformers_hook() -> None:
    from crayon_hf import _transformers_hook

    _transformers_hook.install()


_install_transformers_hook()
