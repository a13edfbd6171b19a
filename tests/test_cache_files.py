"""The cartridge cache: where it lives (CRAYON_HF_CACHE, XDG_CACHE_HOME), what its files are called
(named after what they hold, found by their key, old names still read), its size bound, and
`crayon cache list|clear`."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from crayon_hf import _cache
from crayon_hf.cli import main
from support import VOCAB, require_shared


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("CRAYON_HF_CACHE", str(directory))
    monkeypatch.delenv("CRAYON_HF_CACHE_MAX_MB", raising=False)
    return directory


def test_location(monkeypatch, tmp_path):
    monkeypatch.setenv("CRAYON_HF_CACHE", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _cache.cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("CRAYON_HF_CACHE")
    assert _cache.cache_dir() == tmp_path / "xdg" / "crayon_hf"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG spec: relative values are ignored
    assert _cache.cache_dir() == Path.home() / ".cache" / "crayon_hf"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert _cache.cache_dir() == Path.home() / ".cache" / "crayon_hf"


def test_files_are_named_after_what_they_hold(cache):
    from crayon_hf import Tokenizer

    Tokenizer.from_file(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json"))
    (name,) = os.listdir(cache)
    assert name.startswith("tokenizer.json-gpt2-") and name.endswith(".dat")
    (entry,) = _cache.entries(cache)
    assert entry.kind == "cartridge" and "50257" in entry.what and "bpe" in entry.what


def test_same_content_elsewhere_and_old_names_are_reused(cache, tmp_path):
    from crayon_hf import Tokenizer

    source = require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json")
    Tokenizer.from_file(source)
    (name,) = os.listdir(cache)
    # The same file under another folder name: found by its key, not compiled again.
    other = tmp_path / "renamed"
    other.mkdir()
    shutil.copy(source, other / "tokenizer.json")
    tok = Tokenizer.from_file(other / "tokenizer.json")
    assert os.listdir(cache) == [name]
    assert tok._cartridge_path == str(cache / name)
    # A file from before labels ("tokenizer-<key>") is read as it is.
    key = name.split("-", 2)[2]
    old = cache / f"tokenizer-{key}"
    os.rename(cache / name, old)
    tok = Tokenizer.from_file(source)
    assert tok._cartridge_path == str(old)
    assert os.listdir(cache) == [old.name]


def test_size_bound_removes_oldest_first(cache, monkeypatch):
    cache.mkdir()
    for i, age in enumerate((300, 200, 100)):
        path = cache / f"old{i}.dat"
        path.write_bytes(b"x" * 400_000)
        os.utime(path, (time.time() - age, time.time() - age))
    monkeypatch.setenv("CRAYON_HF_CACHE_MAX_MB", "1")  # 1 MiB: room for two of the three, plus a new one
    assert _cache.store(cache / "new.dat", b"y" * 300_000)
    assert sorted(os.listdir(cache)) == ["new.dat", "old2.dat"]
    monkeypatch.setenv("CRAYON_HF_CACHE_MAX_MB", "0")  # unbounded
    _cache.store(cache / "more.dat", b"z" * 2_000_000)
    assert sorted(os.listdir(cache)) == ["more.dat", "new.dat", "old2.dat"]


def test_cli_list_and_clear(cache, capsys):
    import crayon_hf
    from crayon_hf import Tokenizer

    Tokenizer.from_file(require_shared(VOCAB / "hf" / "bert_base_uncased" / "tokenizer.json"))
    # A rank file by path (get_encoding would reuse an Encoding this process already made).
    crayon_hf.load(require_shared(VOCAB / "tiktoken" / "r50k_base.tiktoken"))
    leftover = cache / ".tokenizer.json-x.dat.abc123.tmp"  # a writer killed before its rename
    leftover.write_bytes(b"partial")
    os.utime(leftover, (time.time() - 7200, time.time() - 7200))
    fresh = cache / ".other.dat.def456.tmp"  # perhaps a write in progress: kept
    fresh.write_bytes(b"partial")
    old = next(p for p in cache.iterdir() if p.name.startswith("tokenizer.json-bert_base_uncased-"))
    os.utime(old, (time.time() - 40 * 86400, time.time() - 40 * 86400))

    assert main(["cache", "list"]) == 0
    out = capsys.readouterr().out
    assert str(cache) in out and "4 files" in out
    assert "wordpiece model of 30522 tokens" in out and "rankfile-r50k_base-" in out and "tiktoken encoding" in out
    assert "unfinished write" in out

    assert main(["cache", "clear", "--older-than", "30"]) == 0
    assert "removed 2 files" in capsys.readouterr().out
    assert sorted(p.name for p in cache.iterdir()) == sorted([fresh.name, _r50k(cache)])
    assert main(["cache", "clear"]) == 0
    assert [p.name for p in cache.iterdir()] == [fresh.name]


def _r50k(cache: Path) -> str:
    return next(p.name for p in cache.iterdir() if p.name.startswith("rankfile-r50k_base-"))
