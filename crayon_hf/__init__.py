"""crayon-hf: exact tiktoken- and HuggingFace-compatible tokenization from memory-mapped cartridges.

Faces:
    crayon_hf.tiktoken   a drop-in for the ``tiktoken`` package

``import crayon_hf`` is cheap: the native engine loads when a face is first used.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
