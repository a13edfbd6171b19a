"""The reference libraries crayon-hf falls back to, imported once and kept.

Kept so that code which puts a crayon-hf face in place of the reference (``sys.modules["tiktoken"]
= crayon_hf.tiktoken``, as tools/conformance does) still falls back to the real library instead of
to the face itself.
"""

from __future__ import annotations

import types

_cache: dict[str, types.ModuleType] = {}


def _load(name: str, hint: str) -> types.ModuleType:
    module = _cache.get(name)
    if module is None:
        import importlib

        try:
            module = importlib.import_module(name)
        except ImportError as e:
            raise ImportError(f"{hint}; install it with `pip install {name}`") from e
        if getattr(module, "__crayon_face__", False):
            raise ImportError(f"`import {name}` gives crayon-hf's own face, not the reference library")
        _cache[name] = module
    return module


def tiktoken() -> types.ModuleType:
    return _load("tiktoken", "this encoding needs the `tiktoken` package for its fallback")


def tokenizers() -> types.ModuleType:
    return _load(
        "tokenizers",
        "this tokenizer.json needs the `tokenizers` library for a component crayon-hf does not run natively",
    )
