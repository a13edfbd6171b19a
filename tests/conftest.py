"""Fixtures for the whole suite; the helpers they use live in support.py."""

from __future__ import annotations

import os

import pytest

import crayon_hf
from support import TIKTOKEN_VOCABS, our_encoding, reference_encoding

if not os.path.exists(os.path.join(os.path.dirname(crayon_hf.__file__), "tiktoken")) or not any(
    name.startswith("_crayon") for name in os.listdir(os.path.dirname(crayon_hf.__file__))
):
    raise RuntimeError(
        f"crayon_hf was imported from {crayon_hf.__file__}, which has no compiled engine: install the "
        "package (pip install '.[test]') and run `pytest` (not `python -m pytest`, which puts the "
        "source tree first on sys.path)"
    )


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (pyproject's addopts): one worker per core, at most 4 (each worker imports
    transformers, torch and the reference libraries; more would cost memory, not time)."""
    return max(1, min(4, os.cpu_count() or 1))


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    """Each test session builds its cartridges in a fresh cache (exercising the first-use path).
    Under pytest-xdist the workers of one run share it: writes to the cache are atomic, so workers
    racing to build the same cartridge is itself a case the cache must handle."""
    if "CRAYON_HF_CACHE" not in os.environ:
        base = tmp_path_factory.getbasetemp()
        shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
        cache = shared / "crayon_cache"
        cache.mkdir(exist_ok=True)
        os.environ["CRAYON_HF_CACHE"] = str(cache)
    yield


@pytest.fixture(params=TIKTOKEN_VOCABS)
def pair(request):
    """(reference tiktoken Encoding, our Encoding) for each vocabulary."""
    return reference_encoding(request.param), our_encoding(request.param)
