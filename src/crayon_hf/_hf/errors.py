"""Errors raised by the post-model pipeline."""

from __future__ import annotations

from typing import Any, Callable


class UnsupportedComponent(ValueError):
    """A tokenizer.json component we do not reproduce exactly.

    The caller falls back to the reference library for the affected path; ``path`` is the JSON
    path of the component (e.g. ``post_processor.processors[1]``), ``type_name`` its ``type``.
    """

    def __init__(self, path: str, type_name: object, reason: str = "not supported") -> None:
        self.path = path
        self.type_name = type_name
        super().__init__(f"{path}: {type_name!s} is {reason} by crayon_hf; falling back to the reference library")


class PanicException(BaseException):
    """Raised where `tokenizers` panics (its Python binding raises pyo3's PanicException,
    a BaseException subclass), e.g. a truncation stride not smaller than the length kept."""


def build_sequence(d: dict[str, Any], path: str, key: str, build: Callable[[Any, str], Any]) -> list[Any]:
    """The built members of a {"type": "Sequence", key: [...]} component (decoders, processors)."""
    items = d.get(key)
    if not isinstance(items, list):
        raise UnsupportedComponent(f"{path}.{key}", d.get("type"), f"missing its {key} list")
    built = []
    for i, item in enumerate(items):
        member = build(item, f"{path}.{key}[{i}]")
        if member is None:
            raise UnsupportedComponent(f"{path}.{key}[{i}]", "null", f"a null member of {key}")
        built.append(member)
    return built
