"""`crayon encode-corpus` / crayon_hf.corpus.encode_corpus: every document's ids equal the reference
library's one-shot encoding of it (tiktoken's encode_ordinary, tokenizers' encode(text,
add_special_tokens=False) without truncation), whatever the read, block and batch sizes; the
outputs read back with numpy's memory maps; errors are one clear line; an interrupted run leaves
nothing under the final names; memory does not grow with the input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import crayon_hf.corpus as corpus
from crayon_hf.cli import main
from crayon_hf.corpus import encode_corpus
from crayon_hf.tiktoken import get_encoding
from support import CORPORA, VOCAB, corpus_text, reference_encoding, require_module, require_shared, short_docs

TEXT_FILES = ["en_botchan.txt", "ja_wagahaiwa_nekodearu.txt", "zh_hongloumeng.txt", "code_cpython_headers.h.txt",
              "multi_udhr_scripts.txt"]
# Each parity run goes through both paths: text files bigger than read_bytes stream through the
# parallel encoder, JSONL records and small files go in batches. The second row forces many cuts:
# reads that split characters, tiny encoder blocks, batches of a few documents.
SIZES = [dict(read_bytes=64 << 10), dict(read_bytes=1001, block_chars=257, batch_chars=3000)]


def hf_reference(folder: str):
    tokenizers = require_module("tokenizers")
    ref = tokenizers.Tokenizer.from_file(str(require_shared(VOCAB / "hf" / folder / "tokenizer.json")))
    ref.no_truncation()
    ref.no_padding()
    return lambda text: ref.encode(text, add_special_tokens=False).ids


REFERENCES = {
    "cl100k_base": lambda: reference_encoding("cl100k_base").encode_ordinary,
    "gpt2": lambda: hf_reference("gpt2"),
    "mistral_v0_1": lambda: hf_reference("mistral_v0_1"),
}


def spec(name: str) -> str:
    return name if name == "cl100k_base" else str(require_shared(VOCAB / "hf" / name))


def read_back(out, fmt: str = "uint32") -> tuple[np.ndarray, np.ndarray, dict]:
    out = str(out)
    if fmt == "npy":
        ids = np.load(out, mmap_mode="r")
    else:
        ids = np.memmap(out, dtype="<u2" if fmt == "uint16" else "<u4", mode="r")
    index = np.load(out + ".idx.npy", mmap_mode="r")
    with open(out + ".json", encoding="utf-8") as f:
        meta = json.load(f)
    assert index.dtype == np.int64 and index[0] == 0 and index[-1] == len(ids) == meta["n_tokens"]
    assert len(index) == meta["n_docs"] + 1 and np.all(np.diff(index) >= 0)
    return ids, index, meta


def documents(ids: np.ndarray, index: np.ndarray) -> list[list[int]]:
    return [ids[a:b].tolist() for a, b in zip(index[:-1].tolist(), index[1:].tolist())]


@pytest.fixture(scope="module")
def corpus_inputs(tmp_path_factory):
    """Text files of ~200 KiB (several scripts and code), an empty file, and a JSONL of short
    documents, with the documents they hold, in order."""
    d = tmp_path_factory.mktemp("corpus")
    paths, docs = [], []
    for name in TEXT_FILES:
        text = corpus_text(require_shared(CORPORA / name), 200 << 10)
        (d / name).write_text(text, encoding="utf-8", newline="")
        paths.append(str(d / name))
        docs.append(text)
        if name == TEXT_FILES[1]:
            (d / "empty.txt").write_bytes(b"")
            paths.append(str(d / "empty.txt"))
            docs.append("")
    records = short_docs(1500)
    with open(d / "short.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(records):
            f.write(json.dumps({"id": i, "text": text}) + "\n")
            if i % 100 == 7:
                f.write("\n")  # blank lines are skipped
    paths.append(str(d / "short.jsonl"))
    docs += records
    return paths, docs


@pytest.mark.parametrize("sizes", SIZES, ids=["default-blocks", "tiny-blocks"])
@pytest.mark.parametrize("name", list(REFERENCES))
def test_documents_equal_one_shot_reference(tmp_path, corpus_inputs, name, sizes):
    paths, docs = corpus_inputs
    reference = REFERENCES[name]()
    out = tmp_path / "tokens.bin"
    summary = encode_corpus(paths, out, spec(name), threads=2, progress=False, **sizes)
    ids, index, meta = read_back(out)
    assert meta["n_docs"] == len(docs) and meta["inputs"] == paths and summary["n_tokens"] == len(ids)
    got = documents(ids, index)
    for i, (doc, text) in enumerate(zip(got, docs)):
        assert doc == reference(text), f"document {i} ({text[:60]!r}) differs"


@pytest.mark.parametrize("fmt", ["uint16", "uint32", "npy"])
def test_formats_round_trip_with_memory_maps(tmp_path, fmt):
    docs = ["Hello world.", "", "Ünïcödé and 中文 text", "x" * 5000]
    out = tmp_path / f"tokens.{'npy' if fmt == 'npy' else 'bin'}"
    assert main(["encode-corpus", *write_docs(tmp_path, docs), "-o", str(out), "--tokenizer",
                 spec("gpt2"), "--format", fmt, "--quiet"]) == 0
    ids, index, meta = read_back(out, fmt)
    ref = hf_reference("gpt2")
    assert documents(ids, index) == [ref(t) for t in docs]
    assert meta["format"] == fmt and meta["dtype"] == ("<u2" if fmt == "uint16" else "<u4")
    assert meta["tokenizer"] == spec("gpt2") and meta["crayon_hf_version"]
    assert os.path.getsize(out) == len(ids) * (2 if fmt == "uint16" else 4) + (128 if fmt == "npy" else 0)
    assert sorted(os.listdir(tmp_path)) == sorted([*(f"doc{i}.txt" for i in range(len(docs))), out.name,
                                                   out.name + ".idx.npy", out.name + ".json"])


def test_npy_is_the_default_for_npy_outputs_and_empty_corpus(tmp_path):
    out = tmp_path / "t.npy"
    assert main(["encode-corpus", *write_docs(tmp_path, [""]), "-o", str(out), "--tokenizer", "cl100k_base",
                 "--quiet"]) == 0
    ids, index, meta = read_back(out, "npy")
    assert ids.shape == (0,) and index.tolist() == [0, 0] and meta["format"] == "npy"


def test_uint16_refused_up_front_for_large_vocabularies(tmp_path, capsys):
    out = tmp_path / "t.bin"
    assert main(["encode-corpus", *write_docs(tmp_path, ["a"]), "-o", str(out), "--tokenizer", "cl100k_base",
                 "--format", "uint16"]) == 2
    assert "ids go up to 100,276, past 65,535; use --format uint32" in capsys.readouterr().err
    assert not any(p.name.startswith(("t.bin", ".t.bin")) for p in tmp_path.iterdir())


def write_docs(d, docs: list[str]) -> list[str]:
    paths = []
    for i, text in enumerate(docs):
        (d / f"doc{i}.txt").write_text(text, encoding="utf-8", newline="")
        paths.append(str(d / f"doc{i}.txt"))
    return paths


@pytest.mark.parametrize("name, eos", [("cl100k_base", "<|endoftext|>"), ("gpt2", "<|endoftext|>"),
                                       ("mistral_v0_1", "</s>"), ("bert_base_uncased", "[SEP]"),
                                       ("t5_small", "</s>"), ("llama3_1", "<|end_of_text|>")])
def test_append_eos_after_every_document(tmp_path, name, eos):
    docs = ["First document.", "", "Second\n\nthird " * 50]
    out = tmp_path / "t.bin"
    # Small read blocks: the last document streams, the others are batched.
    s = encode_corpus(write_docs(tmp_path, docs), out, spec(name), append_eos=True, progress=False, read_bytes=100)
    ids, index, meta = read_back(out)
    assert meta["eos_token"] == eos and meta["append_eos"] is True
    if name == "cl100k_base":
        reference, eos_id = REFERENCES[name](), 100257
    else:
        tok = require_module("tokenizers").Tokenizer.from_file(str(VOCAB / "hf" / name / "tokenizer.json"))
        tok.no_truncation()
        reference, eos_id = (lambda t: tok.encode(t, add_special_tokens=False).ids), tok.token_to_id(eos)
    assert s["eos_id"] == eos_id
    assert documents(ids, index) == [reference(t) + [eos_id] for t in docs]


def test_eos_token_option_and_missing_eos(tmp_path, capsys):
    paths = write_docs(tmp_path, ["a b", "b"])
    out = str(tmp_path / "t.bin")
    assert main(["encode-corpus", *paths, "-o", out, "--tokenizer", "cl100k_base", "--append-eos",
                 "--eos-token", "<|fim_middle|>", "--quiet"]) == 0
    ids, index, _ = read_back(out)
    assert [d[-1] for d in documents(ids, index)] == [100259, 100259]
    assert main(["encode-corpus", *paths, "-o", out, "--tokenizer", "cl100k_base", "--append-eos",
                 "--eos-token", "<|nope|>"]) == 2
    assert "--eos-token '<|nope|>' is not a token" in capsys.readouterr().err
    # A tokenizer.json without any end-of-text token.
    word_level = tmp_path / "tokenizer.json"
    word_level.write_text(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1, "b": 2}, "unk_token": "[UNK]"}}))
    assert main(["encode-corpus", *paths, "-o", out, "--tokenizer", str(word_level), "--append-eos"]) == 2
    assert ("--append-eos: this tokenizer has no end-of-text token; pass --eos-token TOKEN"
            in capsys.readouterr().err)
    assert main(["encode-corpus", *paths, "-o", out, "--tokenizer", str(word_level), "--append-eos",
                 "--eos-token", "b", "--quiet"]) == 0
    ids, index, _ = read_back(out)
    assert documents(ids, index) == [[1, 2, 2], [2, 2]]


def test_jsonl_field_detected_by_content(tmp_path):
    docs = short_docs(50)
    src = tmp_path / "records.txt"  # JSONL without the extension
    src.write_text("\n\n" + "".join(json.dumps({"body": t, "n": 1}) + "\n" for t in docs), encoding="utf-8")
    out = tmp_path / "t.bin"
    assert main(["encode-corpus", str(src), "-o", str(out), "--tokenizer", "cl100k_base", "--jsonl-field", "body",
                 "--quiet"]) == 0
    ids, index, meta = read_back(out)
    ref = reference_encoding("cl100k_base")
    assert documents(ids, index) == [ref.encode_ordinary(t) for t in docs] and meta["jsonl_field"] == "body"
    assert corpus.input_kind(str(src)) == "jsonl"
    (tmp_path / "plain.txt").write_text('{"not": "closed"\nplain text', encoding="utf-8")
    assert corpus.input_kind(str(tmp_path / "plain.txt")) == "text"


@pytest.mark.parametrize("library", ["crayon_hf", "tiktoken"])
def test_documents_from_python_iterables(tmp_path, library):
    docs = short_docs(300)
    out = tmp_path / "t.npy"
    enc = get_encoding("cl100k_base") if library == "crayon_hf" else reference_encoding("cl100k_base")
    s = encode_corpus([iter(docs[:100]), docs[100:]], out, enc, format="npy", progress=False, batch_chars=500)
    ids, index, meta = read_back(out, "npy")
    assert meta["inputs"] == ["<documents>", "<documents>"] and s["n_docs"] == 300
    assert documents(ids, index) == [reference_encoding("cl100k_base").encode_ordinary(t) for t in docs]


@pytest.mark.parametrize("library", ["crayon_hf", "tokenizers"])
def test_tokenizer_objects_encode_without_truncation_or_padding(tmp_path, library):
    path = str(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json"))
    if library == "crayon_hf":
        from crayon_hf import Tokenizer

        tok = Tokenizer.from_file(path)
    else:
        tok = require_module("tokenizers").Tokenizer.from_file(path)
    tok.enable_truncation(8)
    tok.enable_padding(length=16)
    docs = short_docs(40) + [corpus_text(require_shared(CORPORA / "en_botchan.txt"), 20_000)]
    out = tmp_path / "t.bin"
    encode_corpus([docs], out, tok, progress=False, read_bytes=10_000, block_chars=1000)
    ids, index, _ = read_back(out)
    ref = hf_reference("gpt2")
    assert documents(ids, index) == [ref(t) for t in docs]
    assert tok.truncation is not None and tok.padding is not None  # the caller's settings are left alone


def test_parquet(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    docs = short_docs(200)
    pq.write_table(pa.table({"id": list(range(len(docs))), "text": docs}), tmp_path / "a.parquet", row_group_size=64)
    pq.write_table(pa.table({"text": ["tail document"]}), tmp_path / "b.data")  # recognised by its magic
    out = tmp_path / "t.bin"
    assert main(["encode-corpus", str(tmp_path / "a.parquet"), str(tmp_path / "b.data"), "-o", str(out),
                 "--tokenizer", spec("gpt2"), "--format", "uint16", "--quiet"]) == 0
    ids, index, _ = read_back(out, "uint16")
    ref = hf_reference("gpt2")
    assert documents(ids, index) == [ref(t) for t in docs + ["tail document"]]
    assert main(["encode-corpus", str(tmp_path / "a.parquet"), "-o", str(out), "--tokenizer", "cl100k_base",
                 "--jsonl-field", "body"]) == 2
    assert "no column 'body' (columns: id, text)" in capsys.readouterr().err
    pq.write_table(pa.table({"text": ["a", None]}), tmp_path / "c.parquet")
    assert main(["encode-corpus", str(tmp_path / "c.parquet"), "-o", str(out), "--tokenizer", "cl100k_base"]) == 2
    assert "c.parquet: row 1: 'text' is null" in capsys.readouterr().err


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    (tmp_path / "a.parquet").write_bytes(b"PAR1 not really")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ValueError, match=r"needs pyarrow \(pip install pyarrow\)"):
        encode_corpus([tmp_path / "a.parquet"], tmp_path / "t.bin", "cl100k_base", progress=False)


@pytest.mark.parametrize("content, message", [
    ('{"text": "a"}\n[1, 2]\n', r"bad\.jsonl:2: a JSON array, not an object"),
    ('{"text": "a"}\n{"text": }\n', r"bad\.jsonl:2: invalid JSON at column 10 \(Expecting value\)"),
    ('{"text": "a"}\n{"txt": "b"}\n', r"bad\.jsonl:2: no field 'text' \(fields: 'txt'\)"),
    ('{"text": "a"}\n\n{"text": 3}\n', r"bad\.jsonl:3: field 'text' is a JSON number, not a string"),
    ('{"text": "a"}\n{"text": "b\n', r"bad\.jsonl:2: invalid JSON at column 12 \(Invalid control character\)"),
])
def test_jsonl_errors_name_file_and_line(tmp_path, capsys, content, message):
    (tmp_path / "bad.jsonl").write_text(content, encoding="utf-8")
    out = tmp_path / "t.bin"
    assert main(["encode-corpus", str(tmp_path / "bad.jsonl"), "-o", str(out), "--tokenizer", "cl100k_base",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("crayon encode-corpus: error: ") and len(err.strip().splitlines()) == 1
    assert re.search(message, err), err
    assert os.listdir(tmp_path) == ["bad.jsonl"]


@pytest.mark.parametrize("read_bytes", [1 << 20, 7])
def test_invalid_utf8_names_file_and_byte(tmp_path, read_bytes):
    data = "héllo wörld ".encode() * 10
    bad = tmp_path / "bad.txt"
    bad.write_bytes(data[:50] + b"\xff" + data[50:])
    with pytest.raises(ValueError, match=r"bad\.txt: invalid UTF-8 at byte 50 \(invalid start byte\)"):
        encode_corpus([bad], tmp_path / "t.bin", "cl100k_base", progress=False, read_bytes=read_bytes)
    bad.write_bytes(data + "é".encode()[:1])  # cut inside the last character
    with pytest.raises(ValueError, match=rf"bad\.txt: invalid UTF-8 at byte {len(data)}"):
        encode_corpus([bad], tmp_path / "t.bin", "cl100k_base", progress=False, read_bytes=read_bytes)
    (tmp_path / "bad.jsonl").write_bytes(b'{"text": "ok"}\n{"text": "\xc3("}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: invalid UTF-8 at byte 25"):
        encode_corpus([tmp_path / "bad.jsonl"], tmp_path / "t.bin", "cl100k_base", progress=False)
    assert sorted(os.listdir(tmp_path)) == ["bad.jsonl", "bad.txt"]


def test_argument_errors(tmp_path, capsys):
    out = str(tmp_path / "t.bin")
    assert main(["encode-corpus", str(tmp_path / "missing.txt"), "-o", out, "--tokenizer", "cl100k_base"]) == 2
    assert f"crayon encode-corpus: error: {tmp_path / 'missing.txt'}: no such file" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown format 'int8'"):
        encode_corpus(write_docs(tmp_path, ["a"]), out, "cl100k_base", format="int8")
    with pytest.raises(SystemExit):
        main(["encode-corpus", str(tmp_path / "doc0.txt"), "-o", out, "--tokenizer", "cl100k_base", "--format", "x"])
    assert main(["encode-corpus", str(tmp_path / "doc0.txt"), "-o", out, "--tokenizer", "cl100k_base",
                 "--eos-token", "<|endoftext|>"]) == 2
    assert "pass --append-eos too" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["encode-corpus", str(tmp_path / "empty"), "-o", out, "--tokenizer", "cl100k_base"]) == 2
    assert "a directory without files" in capsys.readouterr().err
    assert main(["encode-corpus", str(tmp_path / "nothing-*.txt"), "-o", out, "--tokenizer", "cl100k_base"]) == 2
    assert "no file matches" in capsys.readouterr().err


def test_directories_and_globs_expand_to_sorted_files(tmp_path):
    docs = ["first", "second", "third"]
    (tmp_path / "in").mkdir()
    paths = write_docs(tmp_path / "in", docs)
    (tmp_path / "in" / ".hidden").write_text("skipped", encoding="utf-8")
    a = encode_corpus([tmp_path / "in"], tmp_path / "a.bin", "cl100k_base", progress=False)
    b = encode_corpus([str(tmp_path / "in" / "doc*.txt")], tmp_path / "b.bin", "cl100k_base", progress=False)
    assert a["inputs"] == b["inputs"] == [str(p) for p in paths]
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "b.bin").read_bytes()
    assert [corpus.open_corpus(tmp_path / "a.bin")[i].tolist() for i in range(3)] == [
        reference_encoding("cl100k_base").encode_ordinary(d) for d in docs]


@pytest.mark.parametrize("where", ["batch", "stream"])
def test_interrupted_run_leaves_nothing_under_the_final_name(tmp_path, monkeypatch, capsys, where):
    paths = write_docs(tmp_path, [corpus_text(require_shared(CORPORA / "en_botchan.txt"), 50_000)] * 3)
    out = tmp_path / "t.bin"
    out.write_bytes(b"previous run")
    calls = []
    method = "documents" if where == "batch" else "part"
    original = getattr(corpus._CorpusWriter, method)
    interrupt_at = [2]

    def interrupt(self, *args):
        calls.append(1)
        if len(calls) >= interrupt_at[0]:
            raise KeyboardInterrupt
        return original(self, *args)

    monkeypatch.setattr(corpus._CorpusWriter, method, interrupt)
    # After a first batch or block is on disk.
    sizes = dict(batch_chars=1000) if where == "batch" else dict(read_bytes=4096)
    with pytest.raises(KeyboardInterrupt):
        encode_corpus(paths, out, "cl100k_base", progress=False, **sizes)
    assert len(calls) == 2
    assert out.read_bytes() == b"previous run"
    assert sorted(os.listdir(tmp_path)) == ["doc0.txt", "doc1.txt", "doc2.txt", "t.bin"]
    if where == "batch":  # the command line: default sizes, one batch
        calls.clear()
        interrupt_at[0] = 1
        assert main(["encode-corpus", *paths, "-o", str(out), "--tokenizer", "cl100k_base", "--quiet"]) == 130
        assert "interrupted; nothing written" in capsys.readouterr().err
        assert out.read_bytes() == b"previous run"
        assert sorted(os.listdir(tmp_path)) == ["doc0.txt", "doc1.txt", "doc2.txt", "t.bin"]


def test_progress_and_summary_on_stderr(tmp_path, capsys):
    out = tmp_path / "t.bin"
    assert main(["encode-corpus", *write_docs(tmp_path, ["some text"] * 3), "-o", str(out), "--tokenizer",
                 "cl100k_base"]) == 0
    err = capsys.readouterr().err
    assert "wrote 6 tokens of 3 documents" in err and "MiB/s" in err


# ------------------------------------------------------------------------------------- memory

_CHILD = textwrap.dedent("""
    import sys
    from crayon_hf.corpus import encode_corpus
    s = encode_corpus([sys.argv[1]], sys.argv[2], sys.argv[3], threads=2, progress=False,
                      read_bytes=1 << 20, block_chars=1 << 16)
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    print(peak // 1024, s["n_tokens"], s["seconds"])
""")


def peak_rss_mib(src, out, tokenizer: str) -> int:
    import crayon_hf

    # The child imports the crayon_hf this test runs (installed, or a checkout with its built
    # engine), never the source tree by accident of its working directory.
    env = dict(os.environ, PYTHONPATH=str(Path(crayon_hf.__file__).resolve().parents[1]))
    run = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(out), tokenizer], capture_output=True,
                         text=True, cwd=Path(out).parent, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    peak, n_tokens, _ = run.stdout.split()
    assert int(n_tokens) == len(np.memmap(out, dtype="<u4", mode="r"))
    return int(peak)


def write_big_text(path, mib: int) -> None:
    """Varied text of about `mib` MiB: the corpora in turn, each copy numbered."""
    parts = [corpus_text(require_shared(CORPORA / name), None) for name in
             ("en_gutenberg_big.txt", "zh_hongloumeng.txt", "code_python_stdlib.txt", "multi_udhr_all.txt")]
    written, i = 0, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < mib << 20:
            block = f"\n\nPart {i}: {i * 7919 % 1000003}\n" + parts[i % len(parts)]
            f.write(block)
            written += len(block.encode("utf-8"))
            i += 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads VmHWM from /proc")
def test_peak_memory_does_not_grow_with_the_input(tmp_path):
    write_big_text(tmp_path / "small.txt", 20)
    write_big_text(tmp_path / "big.txt", 200)
    small = peak_rss_mib(tmp_path / "small.txt", tmp_path / "small.bin", "cl100k_base")
    (tmp_path / "small.bin").unlink()
    big = peak_rss_mib(tmp_path / "big.txt", tmp_path / "big.bin", "cl100k_base")
    assert big < 400 and big <= small + 100, f"peak RSS {big} MiB for 200 MiB of text, {small} MiB for 20 MiB"
