"""The command line as a first-time user meets it: count, decode, stdin, --model, one special-token
policy for both kinds of tokenizer, a readable first result, errors that say what to do, exit
statuses, help pages. Counts and ids are compared exactly with tiktoken and tokenizers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from crayon_hf import cli
from support import CORPORA, ROOT, VOCAB, corpus_files, corpus_text, reference_encoding, require_shared

SPECIAL_TEXT = "first document<|endoftext|>second one, with <|endoftext|> inside\n"


def run_cli(*args: str) -> int:
    return cli.main(list(args))


def crayon(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "crayon_hf", *args], input=stdin, capture_output=True, cwd=cwd,
                          timeout=300)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- special tokens


def test_special_tokens_are_ordinary_text_for_both_kinds(tmp_path, capsys):
    """`<|endoftext|>` in a file is text by default, whether the tokenizer is a tiktoken encoding
    or a tokenizer.json folder; --allowed-special all matches it in both."""
    tokenizers = pytest.importorskip("tokenizers")
    folder = require_shared(VOCAB / "hf" / "gpt2")
    doc = write(tmp_path / "doc.txt", SPECIAL_TEXT)
    ref_tt = reference_encoding("r50k_base")
    ref_hf = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))

    assert run_cli("encode", "-t", "r50k_base", str(doc)) == 0
    by_tiktoken = [int(x) for x in capsys.readouterr().out.split()]
    assert run_cli("encode", "-t", str(folder), str(doc)) == 0
    by_folder = [int(x) for x in capsys.readouterr().out.split()]
    assert by_tiktoken == ref_tt.encode_ordinary(SPECIAL_TEXT)
    ref_hf.encode_special_tokens = True
    assert by_folder == ref_hf.encode(SPECIAL_TEXT, add_special_tokens=False).ids
    assert 50256 not in by_folder and by_folder == by_tiktoken  # gpt2: the same vocabulary both ways

    assert run_cli("encode", "-t", "r50k_base", "--allowed-special", "all", str(doc)) == 0
    matched_tt = [int(x) for x in capsys.readouterr().out.split()]
    assert run_cli("encode", "-t", str(folder), "--allowed-special", "all", str(doc)) == 0
    matched_hf = [int(x) for x in capsys.readouterr().out.split()]
    assert matched_tt == ref_tt.encode(SPECIAL_TEXT, allowed_special="all")
    ref_hf.encode_special_tokens = False
    assert matched_hf == ref_hf.encode(SPECIAL_TEXT, add_special_tokens=False).ids
    assert matched_hf.count(50256) == 2 and matched_tt.count(50256) == 2


def test_encode_corpus_special_tokens_are_ordinary_text_for_a_folder(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    folder = require_shared(VOCAB / "hf" / "gpt2")
    doc = write(tmp_path / "doc.txt", SPECIAL_TEXT)
    ref = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    out = tmp_path / "ids.bin"
    assert run_cli("encode-corpus", str(doc), "-o", str(out), "-t", str(folder), "--quiet") == 0
    ref.encode_special_tokens = True
    assert np.fromfile(out, dtype="<u4").tolist() == ref.encode(SPECIAL_TEXT, add_special_tokens=False).ids
    assert run_cli("encode-corpus", str(doc), "-o", str(out), "-t", str(folder), "--quiet",
                   "--allowed-special", "all") == 0
    ref.encode_special_tokens = False
    assert np.fromfile(out, dtype="<u4").tolist() == ref.encode(SPECIAL_TEXT, add_special_tokens=False).ids
    assert run_cli("encode-corpus", str(doc), "-o", str(out), "-t", "r50k_base", "--quiet") == 0
    assert np.fromfile(out, dtype="<u4").tolist() == reference_encoding("r50k_base").encode_ordinary(SPECIAL_TEXT)


# ------------------------------------------------------------------------------------ count


def test_count_per_file_and_total_with_model_names(tmp_path, capsys):
    files = corpus_files()[:3]
    texts = [corpus_text(f, 40_000) for f in files]
    paths = [write(tmp_path / f.name, t) for f, t in zip(files, texts)]
    assert run_cli("count", "--model", "gpt-4o", *map(str, paths)) == 0
    lines = capsys.readouterr().out.splitlines()
    ref = reference_encoding("o200k_base")  # tiktoken.encoding_for_model("gpt-4o")
    expected = [len(ref.encode_ordinary(t)) for t in texts]
    assert [line.split() for line in lines] == [[str(n), str(p)] for n, p in zip(expected, paths)] + \
        [[str(sum(expected)), "total"]]
    assert run_cli("count", "-m", "gpt-3.5-turbo", str(paths[0])) == 0  # cl100k_base; one file, no total
    assert capsys.readouterr().out.split() == [str(len(reference_encoding("cl100k_base").encode_ordinary(texts[0]))),
                                               str(paths[0])]


def test_count_a_tokenizer_json_equals_tokenizers(tmp_path, capsys):
    tokenizers = pytest.importorskip("tokenizers")
    folder = require_shared(VOCAB / "hf" / "bert_base_uncased")
    text = corpus_text(corpus_files()[0], 30_000) + SPECIAL_TEXT + " [SEP] [CLS]"
    doc = write(tmp_path / "doc.txt", text)
    assert run_cli("count", "-t", str(folder), str(doc)) == 0
    ref = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    ref.encode_special_tokens = True
    n = len(ref.encode(text, add_special_tokens=False).ids)
    assert capsys.readouterr().out.split()[0] == str(n)
    # A tokenizer.json that truncates and pads: every token of the file is still counted.
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    data["truncation"] = {"direction": "Right", "max_length": 16, "strategy": "LongestFirst", "stride": 0}
    data["padding"] = {"strategy": {"Fixed": 16}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                       "pad_type_id": 0, "pad_token": "[PAD]"}
    truncating = write(tmp_path / "tokenizer.json", json.dumps(data))
    assert run_cli("count", "-t", str(truncating), str(doc)) == 0
    assert capsys.readouterr().out.split()[0] == str(n)


def test_stdin_and_python_dash_m(tmp_path):
    text = "hello world, from stdin 😀\n"
    ref = reference_encoding("cl100k_base")
    counted = crayon("count", "-t", "cl100k_base", "-", stdin=text.encode())
    assert counted.returncode == 0 and counted.stdout.decode().split() == [str(len(ref.encode_ordinary(text))),
                                                                           "<stdin>"]
    encoded = crayon("encode", "-t", "cl100k_base", "-", stdin=text.encode())
    assert encoded.returncode == 0 and [int(x) for x in encoded.stdout.split()] == ref.encode_ordinary(text)
    assert b"<stdin>: " in encoded.stderr
    decoded = crayon("decode", "-t", "cl100k_base", "-", stdin=encoded.stdout)
    assert decoded.returncode == 0 and decoded.stdout == text.encode()
    version = crayon("--version")
    assert version.returncode == 0 and b"crayon-hf" in version.stdout


# ----------------------------------------------------------------------------------- encode


def test_first_contact_encode_prints_a_summary(tmp_path):
    readme = ROOT / "README.md"
    out = subprocess.run(["crayon", "encode", "--tokenizer", "cl100k_base", str(readme)], capture_output=True,
                         text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0
    n = len(reference_encoding("cl100k_base").encode_ordinary(readme.read_text(encoding="utf-8")))
    assert len(out.stdout.split()) == n
    assert f"{readme}: {n:,} tokens" in out.stderr and "cl100k_base" in out.stderr


def test_encode_names_each_file_and_writes_text(tmp_path, capsys):
    a = write(tmp_path / "a.txt", "first file\n")
    b = write(tmp_path / "b.txt", "the second file, longer\n")
    out = tmp_path / "ids.txt"
    assert run_cli("encode", "-t", "o200k_base", str(a), str(b), "-o", str(out)) == 0
    ref = reference_encoding("o200k_base")
    expected = [ref.encode_ordinary(a.read_text()), ref.encode_ordinary(b.read_text())]
    assert [list(map(int, line.split())) for line in out.read_text().splitlines()] == expected
    err = capsys.readouterr().err
    assert f"{a}: {len(expected[0])} tokens" in err and f"{b}: {len(expected[1])} tokens" in err
    assert f"total: {len(expected[0]) + len(expected[1])} tokens in 2 files" in err
    # The text file decodes back to both files, in order.
    assert run_cli("decode", "-t", "o200k_base", str(out), "-o", str(tmp_path / "back.txt")) == 0
    assert (tmp_path / "back.txt").read_text() == a.read_text() + b.read_text()
    assert run_cli("encode", "-q", "-t", "o200k_base", str(a)) == 0
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------------- decode


@pytest.mark.parametrize("suffix", [".npy", ".bin", ".txt"])
def test_decode_reads_what_encode_writes(tmp_path, capsys, suffix):
    tokenizers = pytest.importorskip("tokenizers")
    folder = require_shared(VOCAB / "hf" / "llama3_1")
    text = corpus_text(corpus_files()[-1], 8_000) + SPECIAL_TEXT
    doc = write(tmp_path / "doc.txt", text)
    ids = tmp_path / f"ids{suffix}"
    assert run_cli("encode", "-q", "-t", str(folder), str(doc), "-o", str(ids)) == 0
    assert run_cli("decode", "-t", str(folder), str(ids)) == 0
    ref = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    ref.encode_special_tokens = True
    expected = ref.decode(ref.encode(text, add_special_tokens=False).ids, skip_special_tokens=False)
    assert capsys.readouterr().out == expected


def test_decode_errors(tmp_path, capsys):
    bad = write(tmp_path / "ids.txt", "15339 oops\n")
    assert run_cli("decode", "-t", "cl100k_base", str(bad)) == 2
    assert "line 1: 'oops' is not a token id" in capsys.readouterr().err
    write(bad, "15339 999999999\n")
    assert run_cli("decode", "-t", "cl100k_base", str(bad)) == 2
    assert "999999999 is not a token of cl100k_base" in capsys.readouterr().err
    folder = require_shared(VOCAB / "hf" / "bert_base_uncased")
    assert run_cli("decode", "-t", str(folder), str(bad)) == 2
    assert "999999999 is not a token" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- errors


def test_errors_say_what_to_do(tmp_path, capsys):
    doc = write(tmp_path / "doc.txt", "x")
    assert run_cli("count", "-t", "cl100k_bas", str(doc)) == 2
    assert "did you mean 'cl100k_base'?" in capsys.readouterr().err
    assert run_cli("count", "--model", "gtp-4o", str(doc)) == 2
    assert "did you mean 'gpt-4o'?" in capsys.readouterr().err
    assert run_cli("count", "-t", "gpt-4o", str(doc)) == 2
    assert "is a model name: use --model gpt-4o" in capsys.readouterr().err
    assert run_cli("encode", "-t", "cl100k_base", str(tmp_path)) == 2
    assert f"{tmp_path} is a directory; name the files in it" in capsys.readouterr().err
    assert run_cli("encode", "-t", "cl100k_base", str(tmp_path / "missing.txt")) == 2
    assert "missing.txt: no such file" in capsys.readouterr().err
    # A file that is no tokenizer: said in words, no "is a unknown".
    assert run_cli("count", "-t", str(doc), str(doc)) == 2
    err = capsys.readouterr().err
    assert "is not a tokenizer crayon-hf recognises" in err and "a unknown" not in err
    assert run_cli("inspect", str(tmp_path)) == 2
    assert "is a directory" in capsys.readouterr().err


def test_no_traceback_when_stdout_closes_early(tmp_path):
    big = require_shared(CORPORA / "en_gutenberg_big.txt")
    proc = subprocess.Popen(["crayon", "encode", "-t", "cl100k_base", str(big), str(big)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdout.read(10)
    proc.stdout.close()  # as `| head -c 10` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == cli.EXIT_BROKEN_PIPE
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_convert_verify_without_the_reference_names_the_extra(tmp_path, capsys, monkeypatch):
    src = require_shared(VOCAB / "hf" / "bert_base_uncased" / "tokenizer.json")
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # as if not installed
    assert run_cli("convert", str(src), "-o", str(tmp_path / "bert.dat"), "--verify") == 2
    assert "pip install 'crayon-hf[verify]'" in capsys.readouterr().err
    rank = require_shared(VOCAB / "tiktoken" / "r50k_base.tiktoken")
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    assert run_cli("convert", str(rank), "-o", str(tmp_path / "r50k.dat"), "--verify") == 2
    err = capsys.readouterr().err
    assert "needs the tiktoken library" in err and "pip install 'crayon-hf[verify]'" in err


# ---------------------------------------------------------------------- convert and inspect


@pytest.mark.parametrize("folder, model", [("bert_base_uncased", "WordPiece"), ("t5_small", "Unigram"),
                                           ("qwen2_5", "BPE")])
def test_convert_and_inspect_name_the_model(tmp_path, capsys, folder, model):
    tokenizers = pytest.importorskip("tokenizers")
    src = require_shared(VOCAB / "hf" / folder / "tokenizer.json")
    out = tmp_path / "t.dat"
    assert run_cli("convert", str(src), "-o", str(out)) == 0
    ref = tokenizers.Tokenizer.from_file(str(src))
    specials = sum(1 for t in ref.get_added_tokens_decoder().values() if t.special)
    assert f"tokenizer.json {model}, {ref.get_vocab_size():,} ids ({specials:,} special)" in capsys.readouterr().out
    assert run_cli("inspect", str(out)) == 0
    text = capsys.readouterr().out
    assert f"model           {model}" in text and "backend         native" in text
    assert f"vocabulary      {ref.get_vocab_size():,} ids" in text
    assert "None" not in text and "not native (runs on tiktoken)" not in text
    assert run_cli("inspect", str(out), "--json") == 0
    info = json.loads(capsys.readouterr().out)["tokenizer"]
    data = json.loads(src.read_text(encoding="utf-8"))
    assert info["model"] == model and info["vocab_size"] == ref.get_vocab_size()
    assert [t["content"] for t in info["added_tokens"]] == [t["content"] for t in data["added_tokens"]]
    if folder == "qwen2_5":
        assert info["pre_tokenizer"].startswith("Split(regex") and info["pre_tokenizer"].endswith("-> ByteLevel")
        assert info["normalizer"] == "NFC"


# ------------------------------------------------------------------------------------- help


@pytest.mark.parametrize("command", ["convert", "inspect", "encode", "count", "decode", "encode-corpus", "bench",
                                     "train"])
def test_every_subcommand_help_has_a_description_and_an_example(command, capsys):
    with pytest.raises(SystemExit) as exit:
        run_cli(command, "--help")
    assert exit.value.code == 0
    text = capsys.readouterr().out
    assert "examples:\n  crayon " in text
    description = text.split("\n\n")[1]
    assert len(description) > 40 and not description.startswith(("positional", "options"))
    if command == "bench":
        assert "--suite" not in text and "--readme" not in text and "--shared" not in text


def test_top_level_help_lists_exit_statuses(capsys):
    with pytest.raises(SystemExit):
        run_cli("--help")
    text = capsys.readouterr().out
    assert "count" in text and "decode" in text and "exit status:" in text and "141" in text


def test_usage_errors_exit_2(tmp_path):
    out = crayon("encode", "--tokenizer", "cl100k_base", cwd=tmp_path)  # no files
    assert out.returncode == cli.EXIT_ERROR and b"usage:" in out.stderr
    out = crayon("count", "x", cwd=tmp_path)  # no tokenizer
    assert out.returncode == cli.EXIT_ERROR
