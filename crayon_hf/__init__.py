"""crayon-hf: exact tiktoken- and HuggingFace-compatible tokenization from memory-mapped cartridges.

Faces:
    crayon_hf.tiktoken    a drop-in for the ``tiktoken`` package
    crayon_hf.Tokenizer   a drop-in for ``tokenizers.Tokenizer`` (tokenizer.json files)

``import crayon_hf`` is cheap: the native engine and numpy load when a face is first used.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "Tokenizer", "Encoding", "AddedToken"]

_LAZY = {
    "Tokenizer": ("crayon_hf.tokenizer", "Tokenizer"),
    "AddedToken": ("crayon_hf.tokenizer", "AddedToken"),
    "Encoding": ("crayon_hf._hf.encoding", "Encoding"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'crayon_hf' has no attribute {name!r}")
