"""Importers that compile existing vocabularies into crayon-hf cartridges.

Installed as ``crayon_hf.conversion``; the command line front end is ``crayon convert``.
"""

from __future__ import annotations

from crayon_hf.conversion.sniff import FileKind, sniff_file
from crayon_hf.conversion.tiktoken_rank import (
    build_tiktoken_cartridge,
    convert_rank_file,
    parse_rank_file,
)

__all__ = ["FileKind", "sniff_file", "build_tiktoken_cartridge", "convert_rank_file", "parse_rank_file"]
