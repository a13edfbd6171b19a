"""Loads the compiled engine with an error that says how to get it."""

from __future__ import annotations

try:
    from crayon_hf import _crayon as native  # type: ignore[attr-defined]
except ImportError as e:  # pragma: no cover - only on a broken install
    raise ImportError(
        "crayon-hf's native engine (crayon_hf._crayon) is not built. Install the package with "
        "`pip install .` (it compiles the C++ engine); running from a source checkout without "
        "installing does not work."
    ) from e

CartridgeError = native.CartridgeError

__all__ = ["native", "CartridgeError"]
