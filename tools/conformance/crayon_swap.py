"""pytest plugin: runs a reference library's own test suite against a crayon-hf face.

Loaded by tools/conformance/run.py as ``-p crayon_swap``; the face is chosen by the environment:

    CRAYON_CONFORMANCE_FACE=tiktoken     ``import tiktoken`` (and its submodules) gives crayon_hf.tiktoken
    CRAYON_CONFORMANCE_FACE=tokenizers   ``from tokenizers import Tokenizer, AddedToken`` gives crayon-hf's,
                                         and ``tokenizers.decoders.DecodeStream`` crayon_hf.DecodeStream
                                         (the real one accepts only the real Tokenizer type)
    CRAYON_CONFORMANCE_FACE=reference    nothing is swapped (the reference's own pass set, for comparison)

The swap happens in ``pytest_configure``, before any test module is imported. crayon-hf keeps the
real library for its fallback path (``crayon_hf._references``), so a tokenizer that falls back
still runs on the real code, not on the face that replaced it.

Each test's outcome is written as JSON lines to CRAYON_CONFORMANCE_REPORT.
"""

from __future__ import annotations

import json
import os
import sys
import types

FACE = os.environ.get("CRAYON_CONFORMANCE_FACE", "reference")


def _swap_tiktoken() -> None:
    from crayon_hf import _references

    _references.tiktoken()  # the real module, kept for the fallback before it is replaced
    import crayon_hf.tiktoken as face
    from crayon_hf.tiktoken import core, load, model, registry

    for name in [n for n in sys.modules if n == "tiktoken" or n.startswith("tiktoken.")]:
        del sys.modules[name]
    sys.modules["tiktoken"] = face
    sys.modules["tiktoken.core"] = core
    sys.modules["tiktoken.load"] = load
    sys.modules["tiktoken.model"] = model
    sys.modules["tiktoken.registry"] = registry


class _TokenizersFace(types.ModuleType):
    """The real ``tokenizers`` package with crayon-hf's Tokenizer and AddedToken in their place;
    submodules (models, normalizers, ...) stay the real ones."""

    def __init__(self, real: types.ModuleType, overrides: dict[str, object]) -> None:
        super().__init__(real.__name__, real.__doc__)
        self.__dict__.update({k: v for k, v in vars(real).items() if k not in ("__name__", "__doc__")})
        self.__dict__.update(overrides)


def _swap_tokenizers() -> None:
    from crayon_hf import _references

    real = _references.tokenizers()
    import crayon_hf

    decoders = _TokenizersFace(real.decoders, {"DecodeStream": crayon_hf.DecodeStream})
    sys.modules["tokenizers.decoders"] = decoders
    sys.modules["tokenizers"] = _TokenizersFace(
        real, {"Tokenizer": crayon_hf.Tokenizer, "AddedToken": crayon_hf.AddedToken, "decoders": decoders}
    )


def pytest_configure(config) -> None:
    if FACE == "tiktoken":
        _swap_tiktoken()
    elif FACE == "tokenizers":
        _swap_tokenizers()
    elif FACE != "reference":
        raise ValueError(f"CRAYON_CONFORMANCE_FACE must be tiktoken, tokenizers or reference, not {FACE!r}")


_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report) -> None:
    # A test passes when its call passed and neither setup nor teardown failed.
    nodeid = report.nodeid
    if report.when == "setup" and report.outcome != "passed":
        _outcomes[nodeid] = "skipped" if report.skipped else "error"
    elif report.when == "call":
        _outcomes[nodeid] = "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
    elif report.when == "teardown" and report.failed:
        _outcomes[nodeid] = "error"


def pytest_sessionfinish(session, exitstatus) -> None:
    path = os.environ.get("CRAYON_CONFORMANCE_REPORT")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            for nodeid, outcome in sorted(_outcomes.items()):
                f.write(json.dumps({"test": nodeid, "outcome": outcome}) + "\n")
