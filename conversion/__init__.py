"""Importers that compile existing vocabularies into crayon-hf cartridges.

Installed as ``crayon_hf.conversion``; the command line front end is ``crayon convert``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crayon_hf.conversion.sniff import FileKind, sniff_file
    from crayon_hf.conversion.tiktoken_rank import build_tiktoken_cartridge, convert_rank_file, parse_rank_file

__all__ = ["FileKind", "sniff_file", "build_tiktoken_cartridge", "convert_rank_file", "parse_rank_file"]

# Imported on first use: loading a tokenizer.json cartridge imports crayon_hf.conversion.hf_json,
# which must not pull in the tiktoken face and the SentencePiece reader (8 ms of a fresh
# process's first load, measured on qwen2_5).
_HOMES = {"FileKind": "sniff", "sniff_file": "sniff", "build_tiktoken_cartridge": "tiktoken_rank",
          "convert_rank_file": "tiktoken_rank", "parse_rank_file": "tiktoken_rank"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
