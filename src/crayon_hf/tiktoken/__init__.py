"""A drop-in for the ``tiktoken`` package (0.14 API), backed by crayon-hf's native engine.

    import crayon_hf.tiktoken as tiktoken
    enc = tiktoken.get_encoding("cl100k_base")   # offline: the rank file ships with crayon-hf
    enc.encode("hello world")                    # same ids as tiktoken

Beyond tiktoken: ``Encoding.save_cartridge(path)``, ``Encoding.from_cartridge(path)`` and the
``crayon_backend`` attribute ("native", or "fallback: ..." when a component runs on tiktoken).
"""

from crayon_hf.tiktoken import load as load
from crayon_hf.tiktoken.core import Encoding as Encoding
from crayon_hf.tiktoken.model import encoding_for_model as encoding_for_model
from crayon_hf.tiktoken.model import encoding_name_for_model as encoding_name_for_model
from crayon_hf.tiktoken.registry import get_encoding as get_encoding
from crayon_hf.tiktoken.registry import list_encoding_names as list_encoding_names

__version__ = "0.14.0"

# Tells crayon_hf._references that this module is the face, not the reference library.
__crayon_face__ = True

__all__ = [
    "Encoding",
    "encoding_for_model",
    "encoding_name_for_model",
    "get_encoding",
    "list_encoding_names",
    "load",
]
