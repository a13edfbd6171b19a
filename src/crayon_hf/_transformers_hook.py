"""How `import crayon_hf` reaches transformers without importing it.

`AutoTokenizer.from_pretrained` must return a `CrayonTokenizer` for folders saved by crayon-hf
(their tokenizer_config.json has a ``"crayon"`` entry), and for every folder after
`crayon_hf.patch_transformers()`. transformers is heavy to import, so `install()` only arranges
for `AutoTokenizer.from_pretrained` to be wrapped when transformers' auto-tokenizer module is
loaded: at once if it already is, else by an import hook that steps aside after that one
module. The wrapper reads the folder's tokenizer_config.json and hands over to
`crayon_hf.transformers` only when crayon-hf has something to do; every other call goes to the
original method untouched.
"""

from __future__ import annotations

import _thread
import os
import sys
from typing import Any

TARGET = "transformers.models.auto.tokenization_auto"
CONFIG_KEY = "crayon"

_state = {"patch_all": False}
_lock = _thread.allocate_lock()  # (threading and importlib.abc would cost milliseconds at import)


def install() -> None:
    """Wrap `AutoTokenizer.from_pretrained` now or when transformers loads it (idempotent)."""
    module = sys.modules.get(TARGET)
    if module is not None and hasattr(module, "AutoTokenizer"):
        _wrap(module)
        return
    with _lock:
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())


def set_patch_all(value: bool) -> None:
    _state["patch_all"] = value
    install()


def patch_all() -> bool:
    return _state["patch_all"]


class _Loader:
    """The real loader of the auto-tokenizer module, followed by the wrap (an import loader by
    protocol: create_module and exec_module)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        _wrap(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Finder:
    """A meta path finder (by protocol: find_spec) that wraps one module's loader."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != TARGET:
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if finder is not self and find is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None:
            return spec
        sys.meta_path.remove(self)  # one module to watch (the import system stops at this spec)
        spec.loader = _Loader(spec.loader)
        return spec


def _wrap(module: Any) -> None:
    auto = module.AutoTokenizer
    with _lock:
        if getattr(auto, "_crayon_original_from_pretrained", None) is not None:
            return
        original = auto.__dict__["from_pretrained"]

        def from_pretrained(cls: type, pretrained_model_name_or_path: Any, *inputs: Any, **kwargs: Any) -> Any:
            entry = crayon_entry(pretrained_model_name_or_path, kwargs)
            if entry is None and not _state["patch_all"]:
                return original.__func__(cls, pretrained_model_name_or_path, *inputs, **kwargs)
            from crayon_hf.transformers import _auto_from_pretrained

            return _auto_from_pretrained(original.__func__, cls, pretrained_model_name_or_path, entry, inputs, kwargs)

        from_pretrained.__doc__ = original.__func__.__doc__
        from_pretrained.__wrapped__ = original.__func__  # type: ignore[attr-defined]
        auto._crayon_original_from_pretrained = original
        auto.from_pretrained = classmethod(from_pretrained)


_HUB_KWARGS = ("cache_dir", "force_download", "proxies", "token", "revision", "local_files_only", "subfolder")


def crayon_entry(path: Any, kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The ``"crayon"`` entry of the folder's tokenizer_config.json, or None (no file, no entry,
    or a hub repository that cannot be reached: transformers then reports it as usual)."""
    import json

    try:
        local = os.path.join(str(path), kwargs.get("subfolder") or "", "tokenizer_config.json")
        if os.path.isdir(str(path)):
            if not os.path.isfile(local):
                return None
            with open(local, encoding="utf-8") as f:
                config = json.load(f)
        else:
            from transformers.models.auto.tokenization_auto import get_tokenizer_config

            config = get_tokenizer_config(path, **{k: kwargs[k] for k in _HUB_KWARGS if k in kwargs})
    except (OSError, ValueError):
        return None
    entry = config.get(CONFIG_KEY) if isinstance(config, dict) else None
    return entry if isinstance(entry, dict) else None
