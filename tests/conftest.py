"""Fixtures for the whole suite; the helpers they use live in support.py."""

from __future__ import annotations

import gc
import importlib
import os

import pytest
from hypothesis import HealthCheck, settings

import crayon_hf
from support import TIKTOKEN_VOCABS, our_encoding, reference_encoding

if not os.path.exists(os.path.join(os.path.dirname(crayon_hf.__file__), "tiktoken")) or not any(
    name.startswith("_crayon") for name in os.listdir(os.path.dirname(crayon_hf.__file__))
):
    raise RuntimeError(
        f"crayon_hf was imported from {crayon_hf.__file__}, which has no compiled engine: install the "
        "package (pip install '.[test]') and run `pytest`"
    )


# Property tests, deterministic by default: the "ci" profile derives each test's examples from its
# name (derandomize) and keeps no example database, so the default run draws the same examples on
# every machine and cannot turn red by chance. A failure it finds is real and reproducible; every
# counterexample ever found is also pinned as an explicit case (@example, or the REGRESSIONS of
# tests/test_normalizer_hunt.py) so that it stays covered whatever the profile draws.
# CRAYON_HYPOTHESIS=random (developers, and before resolving anything that touches normalization
# or offsets): fresh random examples on every run (the tests' own max_examples), with the local
# database replaying earlier failures; run it repeatedly, pin what it finds, then fix it.
# The long differential hunt is `pytest -m fuzz` / fuzz/normalizer_hunt.py.
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("random", derandomize=False, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
_HYPOTHESIS_PROFILE = os.environ.get("CRAYON_HYPOTHESIS", "ci")
if _HYPOTHESIS_PROFILE not in ("ci", "random"):
    raise RuntimeError(f"CRAYON_HYPOTHESIS={_HYPOTHESIS_PROFILE!r}: use 'ci' (the default) or 'random'")
settings.load_profile(_HYPOTHESIS_PROFILE)


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (pyproject's addopts): one worker per core, at most 4 (each worker imports
    transformers, torch and the reference libraries; more would cost memory, not time)."""
    return max(1, min(4, os.cpu_count() or 1))


@pytest.fixture(autouse=True, scope="session")
def _long_lived_objects_frozen():
    """The cyclic GC sized for a test session. The objects every worker keeps to the end (the
    imported references, transformers and torch, the collected test modules: ~100k objects) are
    frozen out of its reach, and the youngest generation is collected every 10,000 allocations
    instead of 700: parsing a tokenizer.json makes ~10^5 lists, and with the defaults each full
    collection that parsing set off walked everything (0.2 s apiece on a 2-core CI machine; a fifth
    of the transformers tests' time went to the GC, a tenth now). Garbage is still collected."""
    for name in ("transformers", "tokenizers", "tiktoken", "numpy"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


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
