"""A cache directory that cannot be written never stops a load, on any face.

Two real failures: CRAYON_HF_CACHE under a regular file (mkdir fails with ENOTDIR even for root,
as a read-only root in a container would), and a full disk (ENOSPC injected into the write). Each
face then warns once per directory, keeps the compiled cartridge in memory and gives the
reference's tokens.
"""

from __future__ import annotations

import errno
import os
import warnings
from pathlib import Path

import pytest

from support import VOCAB, require_module, require_shared

import crayon_hf._cache as cache
import crayon_hf.tiktoken as ct
from crayon_hf import Tokenizer
from crayon_hf.tiktoken import registry

_FSYNC = os.fsync
TEXT = "Hello, world! 123 don't  stop\n\n中文 <|endoftext|>"


@pytest.fixture(params=["read-only", "full"])
def broken_cache(request, tmp_path, monkeypatch):
    """A cache that refuses writes; yields the directory the faces will try."""
    cache._warned.clear()
    if request.param == "read-only":
        blocker = tmp_path / "not-a-directory"
        blocker.write_bytes(b"")
        directory = blocker / "cache"
    else:
        directory = tmp_path / "full"

        def no_space(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(cache.os, "fsync", no_space)
    monkeypatch.setenv("CRAYON_HF_CACHE", str(directory))
    yield directory
    cache._warned.clear()


def _cache_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "cannot write to the cache directory" in str(w.message)]


def test_tiktoken_face_loads_with_a_broken_cache(broken_cache, monkeypatch):
    tiktoken = require_module("tiktoken")

    monkeypatch.setattr(registry, "ENCODINGS", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        enc = ct.get_encoding("r50k_base")
        registry.ENCODINGS.clear()
        again = ct.get_encoding("r50k_base")
    assert len(_cache_warnings(caught)) == 1, [str(w.message) for w in caught]
    ref_ranks = enc._mergeable_ranks
    ref = tiktoken.Encoding("r50k_base", pat_str=enc._pat_str, mergeable_ranks=ref_ranks,
                            special_tokens=enc._special_tokens)
    assert enc.encode(TEXT, allowed_special="all") == ref.encode(TEXT, allowed_special="all")
    assert again.encode(TEXT, allowed_special="all") == ref.encode(TEXT, allowed_special="all")
    assert not any(Path(broken_cache).parent.glob("*.tmp"))


def test_tokenizers_face_loads_with_a_broken_cache(broken_cache):
    tokenizers = require_module("tokenizers")
    path = require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok = Tokenizer.from_file(path)
        again = Tokenizer.from_file(path)
    assert len(_cache_warnings(caught)) == 1, [str(w.message) for w in caught]
    assert tok.crayon_backend == "native"
    ref = tokenizers.Tokenizer.from_file(str(path))
    assert tok.encode(TEXT).ids == ref.encode(TEXT).ids
    assert again.encode(TEXT).offsets == ref.encode(TEXT).offsets
    assert tok.decode(ref.encode(TEXT).ids) == ref.decode(ref.encode(TEXT).ids)


def test_transformers_face_loads_with_a_broken_cache(broken_cache, tmp_path, monkeypatch):
    require_module("transformers")
    from transformers import AutoTokenizer

    from crayon_hf import CrayonTokenizer

    folder = require_shared(VOCAB / "hf" / "gpt2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok = CrayonTokenizer.from_pretrained(str(folder))
    assert len(_cache_warnings(caught)) == 1
    assert tok.crayon_backend == "native"
    ref = AutoTokenizer.from_pretrained(str(folder))
    assert tok(TEXT)["input_ids"] == ref(TEXT)["input_ids"]
    # save_pretrained (to a disk with room) still writes the cartridge, from memory, and tokenizer.json.
    monkeypatch.setattr(os, "fsync", _FSYNC)
    out = tmp_path / "saved"
    tok.save_pretrained(str(out))
    assert (out / "crayon.dat").is_file() and (out / "tokenizer.json").is_file()


def test_slow_compile_is_announced(caplog):
    """A first compile over a second leaves INFO records on the package logger."""
    import logging
    import time

    from crayon_hf._progress import compile_progress

    with caplog.at_level(logging.INFO, logger="crayon_hf"):
        with compile_progress("compiling something", after=0.05):
            time.sleep(0.2)
        with compile_progress("compiling quickly", after=5.0):
            pass
    messages = [r.getMessage() for r in caplog.records]
    assert any("compiling something (first load" in m for m in messages)
    assert any("compiling something took" in m for m in messages)
    assert not any("compiling quickly" in m for m in messages)
