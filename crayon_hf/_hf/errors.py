"""Errors raised by the post-model pipeline."""

from __future__ import annotations


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
