"""The `crayon` command line: convert, inspect, encode."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import crayon_hf.tiktoken as tk
from crayon_hf import cli
from support import VOCAB, corpus_files, corpus_text, reference_encoding, require_shared


def run_cli(*args: str) -> int:
    return cli.main(list(args))


def test_entry_point_installed(tmp_path):
    out = subprocess.run(["crayon", "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0 and "crayon-hf" in out.stdout


def test_convert_named_pattern_and_specials(tmp_path, capsys):
    rank = require_shared(VOCAB / "tiktoken" / "llama3.tiktoken")
    out = tmp_path / "llama3.dat"
    specials = reference_encoding("llama3")._special_tokens
    args = ["convert", str(rank), "--pattern", "llama3", "-o", str(out)]
    for token, i in list(specials.items())[:2]:
        args += ["--special", f"{token}={i}"]
    assert run_cli(*args) == 0
    enc = tk.Encoding.from_cartridge(out)
    assert enc.crayon_backend == "native"
    assert len(enc._special_tokens) == 2
    ref = reference_encoding("llama3")
    text = corpus_text(corpus_files()[0], 20_000) + "<|begin_of_text|>"
    assert enc.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")


def test_convert_recognises_known_rank_file_without_pattern(tmp_path):
    rank = require_shared(VOCAB / "tiktoken" / "cl100k_base.tiktoken")
    out = tmp_path / "cl.dat"
    assert run_cli("convert", str(rank), "-o", str(out)) == 0
    enc = tk.Encoding.from_cartridge(out)
    assert enc.name == "cl100k_base"
    assert enc._special_tokens == reference_encoding("cl100k_base")._special_tokens


def test_convert_detects_by_content_not_name(tmp_path):
    rank = require_shared(VOCAB / "tiktoken" / "r50k_base.tiktoken")
    disguised = tmp_path / "tokenizer.model"
    disguised.write_bytes(rank.read_bytes())
    out = tmp_path / "r50k.dat"
    assert run_cli("convert", str(disguised), "--pattern", "r50k_base", "-o", str(out)) == 0
    assert tk.Encoding.from_cartridge(out).encode("hi there") == reference_encoding("r50k_base").encode("hi there")


def test_convert_custom_regex_falls_back_loudly(tmp_path):
    rank = require_shared(VOCAB / "tiktoken" / "r50k_base.tiktoken")
    out = tmp_path / "custom.dat"
    with pytest.warns(UserWarning, match="no native scanner"):
        assert run_cli("convert", str(rank), "--pattern", r"(\w)\1|\w+|\s+|[^\w\s]+", "-o", str(out)) == 0
    with pytest.warns(UserWarning, match="fallback"):
        enc = tk.Encoding.from_cartridge(out)
    assert enc.crayon_backend.startswith("fallback:")


def test_convert_rejects_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("not a rank file at all\n")
    assert run_cli("convert", str(bad), "--pattern", "cl100k_base", "-o", str(tmp_path / "x.dat")) == 2
    assert "converts tokenizer.json files and tiktoken rank files" in capsys.readouterr().err
    broken = tmp_path / "broken.tiktoken"
    broken.write_bytes(b"IQ== 0\nIg== 1\nIw== 2\nJA== 3\nJQ== 4\nJg== 5\nJw== 6\nKA== 7\nKQ==\n")
    assert run_cli("convert", str(broken), "--pattern", "cl100k_base", "-o", str(tmp_path / "x.dat")) == 2
    assert "Error parsing line 9" in capsys.readouterr().err
    assert run_cli("convert", str(broken), "--pattern", "x", "--special", "nope", "-o", str(tmp_path / "x.dat")) == 2
    assert "TOKEN=ID" in capsys.readouterr().err


def test_inspect_text_and_json(tmp_path, capsys):
    path = tmp_path / "o200k.dat"
    tk.get_encoding("o200k_base").save_cartridge(path)
    assert run_cli("inspect", str(path)) == 0
    text = capsys.readouterr().out
    assert "checksum" in text and "ok" in text and "TOKB" in text and "16.0.0" in text
    assert run_cli("inspect", str(path), "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(data) == sorted(
        ["path", "format_version", "unicode_version", "file_size", "checksum", "checksum_ok", "source_sha256", "meta",
         "sections", "tokenizer"]
    )
    assert data["tokenizer"]["kind"] == "tiktoken" and data["tokenizer"]["vocab_size"] == 200019
    assert data["tokenizer"]["backend"] == "native"
    assert data["checksum_ok"] is True and data["format_version"] == "1.0"
    assert data["source_sha256"].startswith("446a9538")
    # A damaged file: inspect still shows it, says the checksum is wrong, exits non-zero.
    raw = bytearray(path.read_bytes())
    raw[-10] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert run_cli("inspect", str(path), "--json") == 1
    assert json.loads(capsys.readouterr().out)["checksum_ok"] is False


def test_encode_stdout_one_line_per_file(tmp_path, capsys):
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_text("hello world\n")
    b.write_text("second file <|endoftext|>")
    assert run_cli("encode", "--tokenizer", "cl100k_base", str(a), str(b)) == 0
    lines = capsys.readouterr().out.splitlines()
    ref = reference_encoding("cl100k_base")
    assert [list(map(int, line.split())) for line in lines] == [
        ref.encode_ordinary("hello world\n"),
        ref.encode_ordinary("second file <|endoftext|>"),
    ]
    assert run_cli("encode", "--tokenizer", "cl100k_base", "--allowed-special", "all", str(b)) == 0
    assert list(map(int, capsys.readouterr().out.split())) == ref.encode(
        "second file <|endoftext|>", allowed_special="all"
    )


def test_encode_outputs_npy_and_bin(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("numpy output please " * 100)
    ref = reference_encoding("o200k_base").encode_ordinary("numpy output please " * 100)
    assert run_cli("encode", "--tokenizer", "o200k_base", str(src), "-o", str(tmp_path / "out.npy")) == 0
    assert np.load(tmp_path / "out.npy").tolist() == ref
    assert run_cli("encode", "--tokenizer", "o200k_base", str(src), "-o", str(tmp_path / "out.bin")) == 0
    assert np.fromfile(tmp_path / "out.bin", dtype="<u4").tolist() == ref


def test_encode_with_cartridge_and_rank_file(tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("by cartridge and by rank file")
    cart = tmp_path / "r.dat"
    tk.get_encoding("r50k_base").save_cartridge(cart)
    assert run_cli("encode", "--tokenizer", str(cart), str(src)) == 0
    by_cart = capsys.readouterr().out
    rank = require_shared(VOCAB / "tiktoken" / "r50k_base.tiktoken")
    assert run_cli("encode", "--tokenizer", str(rank), str(src)) == 0
    assert capsys.readouterr().out == by_cart


def test_encode_errors(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe not utf8")
    assert run_cli("encode", "--tokenizer", "cl100k_base", str(bad)) == 2
    assert "not valid UTF-8" in capsys.readouterr().err
    assert run_cli("encode", "--tokenizer", "no_such_encoding", str(bad)) == 2
    assert "not a bundled encoding" in capsys.readouterr().err
    assert run_cli("encode", "--tokenizer", "cl100k_base", "--allowed-special", "<|nope|>", str(bad)) == 2
    assert "not special tokens" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_base", "llama3"])
def test_chunked_encoding_equals_one_shot(name, monkeypatch):
    """The progress-bar chunking of big files cuts only where no token can change."""
    from support import our_encoding

    monkeypatch.setattr(cli, "_CHUNK_BYTES", 2000)
    enc = our_encoding(name)
    for path in corpus_files():
        text = corpus_text(path, 200_000)
        chunks = list(cli._safe_chunks(text, list(enc.special_tokens_set)))
        assert "".join(chunks) == text
        ids = [i for c in chunks for i in enc.encode_ordinary(c)]
        assert ids == enc.encode_ordinary(text), path.name


def test_encode_large_file_shows_progress(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_PROGRESS_MIN_BYTES", 1000)
    monkeypatch.setattr(cli, "_CHUNK_BYTES", 5000)
    src = tmp_path / "big.txt"
    text = corpus_text(corpus_files()[2], 100_000)
    src.write_text(text)
    assert run_cli("encode", "--tokenizer", "cl100k_base", str(src), "-o", str(tmp_path / "o.npy")) == 0
    assert np.load(tmp_path / "o.npy").tolist() == reference_encoding("cl100k_base").encode_ordinary(text)
    err = capsys.readouterr().err
    assert "big.txt" in err


def test_convert_tokenizer_json_with_verify(tmp_path, capsys):
    from crayon_hf import Tokenizer

    src = require_shared(VOCAB / "hf" / "qwen2_5" / "tokenizer.json")
    out = tmp_path / "qwen.dat"
    assert run_cli("convert", str(src), "-o", str(out), "--verify") == 0
    printed = capsys.readouterr().out
    assert "tokenizer.json BPE" in printed and "backend native" in printed
    done, total = printed.split("verify: ", 1)[1].split(" documents", 1)[0].split("/")
    assert done == total and int(total) > 20  # the built-in multilingual sample
    assert Tokenizer.from_file(out).crayon_backend == "native"
    corpus = corpus_files()[0]
    assert run_cli("convert", str(src), "-o", str(out), "--verify", str(corpus)) == 0
    assert "verify: " in capsys.readouterr().out


def test_convert_verify_reports_a_mismatch(tmp_path, capsys, monkeypatch):
    """--verify exits 1 and shows the first difference when the cartridge disagrees."""
    from crayon_hf import tokenizer as face

    src = require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json")
    real_encode = face.Tokenizer.encode

    def off_by_one(self, *args, **kwargs):
        enc = real_encode(self, *args, **kwargs)
        return type("Broken", (), {"ids": [i + 1 for i in enc.ids], "offsets": enc.offsets})()

    monkeypatch.setattr(face.Tokenizer, "encode", off_by_one)
    assert run_cli("convert", str(src), "-o", str(tmp_path / "g.dat"), "--verify") == 1
    captured = capsys.readouterr()
    assert "first mismatch" in captured.err


def test_convert_tokenizer_json_needing_fallback_is_refused(tmp_path, capsys):
    data = json.loads(require_shared(VOCAB / "hf" / "bert_base_uncased" / "tokenizer.json").read_text(encoding="utf-8"))
    data["normalizer"] = {"type": "Nmt"}  # a normalizer the engine does not run
    src = tmp_path / "tokenizer.json"
    src.write_text(json.dumps(data), encoding="utf-8")
    with pytest.warns(UserWarning, match="tokenizers library"):
        assert run_cli("convert", str(src), "-o", str(tmp_path / "bert.dat")) == 2
    assert "does not run yet" in capsys.readouterr().err


@pytest.mark.parametrize("folder", ["bert_base_uncased", "t5_small", "mistral_v0_1"])
def test_convert_every_model_family(tmp_path, folder):
    tokenizers = pytest.importorskip("tokenizers")
    src = require_shared(VOCAB / "hf" / folder / "tokenizer.json")
    out = tmp_path / f"{folder}.dat"
    assert run_cli("convert", str(src), "-o", str(out), "--verify") == 0
    from crayon_hf import Tokenizer

    ours = Tokenizer.from_file(out)
    assert ours.crayon_backend == "native"
    text = "Hello, Wörld! 日本語 \u2581 tokens  and   spaces"
    assert ours.encode(text).ids == tokenizers.Tokenizer.from_file(str(src)).encode(text).ids


def test_encode_with_a_tokenizer_json(tmp_path, capsys):
    tokenizers = pytest.importorskip("tokenizers")
    folder = require_shared(VOCAB / "hf" / "qwen2_5")
    src = corpus_files()[0]
    text = src.read_text(encoding="utf-8")[:30_000]
    doc = tmp_path / "doc.txt"
    doc.write_text(text, encoding="utf-8")
    expected = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    for spec in (str(folder), str(folder / "tokenizer.json")):
        assert run_cli("encode", "--tokenizer", spec, str(doc)) == 0
        assert capsys.readouterr().out.split() == [str(i) for i in expected]
    out = tmp_path / "ids.npy"
    assert run_cli("encode", "--tokenizer", str(folder), str(doc), "-o", str(out)) == 0
    assert np.load(out).tolist() == expected
    # A tokenizer.json matches all of its special tokens or none, as tokenizers does.
    assert run_cli("encode", "--tokenizer", str(folder), str(doc), "--allowed-special", "<|im_start|>") == 2
    assert "use --allowed-special all" in capsys.readouterr().err
    # Special tokens in the text: ordinary text by default (tokenizers' encode_special_tokens), matched
    # with --allowed-special all.
    special = tmp_path / "special.txt"
    special.write_text("a<|im_start|>b <|endoftext|>\n" + text[:2000], encoding="utf-8")
    ref = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    matched = ref.encode(special.read_text(encoding="utf-8"), add_special_tokens=False).ids
    ref.encode_special_tokens = True
    ordinary = ref.encode(special.read_text(encoding="utf-8"), add_special_tokens=False).ids
    assert ordinary != matched
    assert run_cli("encode", "--tokenizer", str(folder), str(special)) == 0
    assert capsys.readouterr().out.split() == [str(i) for i in ordinary]
    assert run_cli("encode", "--tokenizer", str(folder), str(special), "--allowed-special", "all") == 0
    assert capsys.readouterr().out.split() == [str(i) for i in matched]
