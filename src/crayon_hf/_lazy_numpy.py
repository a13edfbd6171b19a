"""numpy, imported by a module only when it first uses it.

Importing numpy costs ~60-120 ms, more than importing crayon-hf and loading a cartridge together,
and encoding to Python lists never needs it. Modules that need numpy only for arrays write::

    if TYPE_CHECKING:
        import numpy as np
    else:
        np = lazy_numpy(globals())

On the first ``np.<name>`` the stand-in imports numpy and puts the real module in the module's
namespace, so every later ``np`` is the plain module (one global lookup, as before).
"""

from __future__ import annotations

import sys
from typing import Any


class _LazyNumpy:
    __slots__ = ("_namespace",)

    def __init__(self, namespace: dict[str, Any]) -> None:
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
        import numpy

        self._namespace["np"] = numpy
        return getattr(numpy, name)


def lazy_numpy(namespace: dict[str, Any]) -> Any:
    """A stand-in for numpy in `namespace` (a module's globals(), bound to the name ``np``)."""
    return _LazyNumpy(namespace)


def is_ndarray(x: object) -> bool:
    """isinstance(x, numpy.ndarray), without importing numpy (no array exists before it is)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(x, numpy.ndarray)
