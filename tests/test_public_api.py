"""The public API as a user and a type checker see it: names, types, docstrings, `crayon_hf.load`,
one batch-to-numpy method on every face, and the generated reference in docs/api.md."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import crayon_hf
from support import ROOT, VOCAB, require_module, require_shared


def _gen_api_docs():
    spec = importlib.util.spec_from_file_location("gen_api_docs", ROOT / "tools" / "gen_api_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------ names and docstrings


def test_dir_and_all_list_the_lazy_names():
    listed = dir(crayon_hf)
    for name in crayon_hf.__all__:
        assert name in listed, name
        assert getattr(crayon_hf, name) is not None
    for name in ("Tokenizer", "CrayonTokenizer", "DecodeStream", "train_bpe", "load", "Encoding"):
        assert name in crayon_hf.__all__


def test_py_typed_ships_with_the_package():
    assert (ROOT / "src" / "crayon_hf" / "py.typed").exists()
    assert os.path.exists(os.path.join(os.path.dirname(crayon_hf.__file__), "py.typed"))


def test_every_public_method_of_every_face_has_a_docstring():
    require_module("transformers")
    gen = _gen_api_docs()
    missing = []
    checked = 0
    for _title, _intro, members in gen.sections():
        for qualname, obj in members:
            if isinstance(obj, type):
                if not gen.docstring(obj):
                    missing.append(qualname)
                for name, member in gen.public_members(obj):
                    checked += 1
                    if not gen.docstring(member):
                        missing.append(f"{qualname}.{name}")
            else:
                checked += 1
                if not gen.docstring(obj):
                    missing.append(qualname)
    assert checked > 100
    assert not missing, f"public methods without a docstring: {missing}"


def test_constructors_show_their_parameters():
    import inspect

    for cls in (crayon_hf.Tokenizer, crayon_hf.DecodeStream, crayon_hf.AddedToken):
        params = inspect.signature(cls).parameters.values()
        assert all(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params), cls


def test_api_reference_is_current():
    require_module("transformers")
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_api_docs.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT / "tools")
    assert out.returncode == 0, out.stdout + out.stderr


# ------------------------------------------------------------------------------ mypy

_USAGE = '''
import crayon_hf
import crayon_hf.tiktoken as tiktoken
from crayon_hf import CrayonTokenizer, DecodeStream, Tokenizer

enc = tiktoken.get_encoding("o200k_base")
reveal_type(enc.encode("hello world"))
reveal_type(enc.decode(enc.encode("hello world")))
tok = Tokenizer.from_file("tokenizer.json")
reveal_type(tok.encode("Hello world", "a pair"))
reveal_type(tok.encode("Hello world").offsets)
reveal_type(tok.encode_batch(["many", "documents"]))
reveal_type(tok.encode_batch_to_numpy(["many", "documents"]).doc_offsets)
reveal_type(crayon_hf.load("cl100k_base"))
reveal_type(crayon_hf.train_bpe(["corpus.txt"], vocab_size=300))
reveal_type(CrayonTokenizer.from_pretrained("folder"))
stream = DecodeStream(skip_special_tokens=True)
reveal_type(stream.step(tok, 1))
tok.encod("x")
'''

_REVEALED = [
    "list[int]",
    "str",
    "crayon_hf._hf.encoding.Encoding",
    "list[tuple[int, int]]",
    "list[crayon_hf._hf.encoding.Encoding]",
    "numpy.ndarray",
    "crayon_hf.tiktoken.core.Encoding | crayon_hf.tokenizer.Tokenizer",
    "crayon_hf.tokenizer.Tokenizer",
    "crayon_hf.transformers.CrayonTokenizer",
    "str | None",
]


def test_mypy_types_the_public_api(tmp_path):
    """mypy on code written the way the README uses the API: precise types, not Any, and a typo
    in a method name is an error. Offline: mypy reads the installed package (py.typed)."""
    require_module("mypy")
    (tmp_path / "usage.py").write_text(textwrap.dedent(_USAGE), encoding="utf-8")
    # The libraries behind the faces are not what is checked here: mypy skips them (their names
    # are Any to it), which takes this test from 75 s to 6 s on a 2-core machine, mostly
    # transformers' own sources. Every type asserted below is crayon-hf's own annotation.
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\n[mypy-transformers.*,torch.*,tokenizers.*,huggingface_hub.*,safetensors.*,ray.*,pyarrow.*]\n"
        "follow_imports = skip\n", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull, "--follow-imports=silent",
         "--config-file", "mypy.ini", "--no-error-summary", "usage.py"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    lines = out.stdout.splitlines()
    revealed = [line.split('Revealed type is "', 1)[1].rstrip('"') for line in lines if "Revealed type" in line]
    assert len(revealed) == len(_REVEALED), out.stdout + out.stderr
    for got, want in zip(revealed, _REVEALED):
        assert got.startswith(want) and "Any" not in got.replace("tuple[Any, ...]", "").replace("dtype[Any]", ""), \
            (got, want)
    errors = [line for line in lines if ": error:" in line]
    assert len(errors) == 1 and '"Tokenizer" has no attribute "encod"' in errors[0], out.stdout + out.stderr


# ------------------------------------------------------------------------------ crayon_hf.load


def test_load_names_and_files(tmp_path):
    import crayon_hf.tiktoken as tiktoken

    enc = crayon_hf.load("cl100k_base")
    assert isinstance(enc, tiktoken.Encoding) and enc.encode("hello world") == [15339, 1917]
    enc.save_cartridge(tmp_path / "cl100k.dat")
    mapped = crayon_hf.load(tmp_path / "cl100k.dat")  # a PathLike
    assert isinstance(mapped, tiktoken.Encoding) and mapped.encode("hello world") == [15339, 1917]

    folder = require_shared(VOCAB / "hf" / "gpt2")
    for spec in (folder, folder / "tokenizer.json"):
        tok = crayon_hf.load(spec)
        assert isinstance(tok, crayon_hf.Tokenizer) and tok.encode("Hello world").ids == [15496, 995]
    tok.save_cartridge(tmp_path / "gpt2.dat")
    assert crayon_hf.load(str(tmp_path / "gpt2.dat")).encode("Hello world").ids == [15496, 995]

    ranks = require_shared(VOCAB / "tiktoken" / "r50k_base.tiktoken")
    from_ranks = crayon_hf.load(ranks)
    assert isinstance(from_ranks, tiktoken.Encoding) and from_ranks.encode("Hello world") == [15496, 995]


def test_load_refuses_clearly(tmp_path):
    with pytest.raises(ValueError, match=r"crayon_hf\.load 'no_such_encoding'.*not a bundled encoding"):
        crayon_hf.load("no_such_encoding")
    with pytest.raises(ValueError, match="directory without a tokenizer.json"):
        crayon_hf.load(tmp_path)


# ------------------------------------------------------------------------------ encode_batch_to_numpy


def _check_flat(result, expected_ids: list[list[int]]) -> None:
    ids, *_, doc_offsets = result  # every face: ids first, document offsets last
    assert ids.dtype == np.uint32 and doc_offsets.dtype == np.int64
    assert [ids[a:b].tolist() for a, b in zip(doc_offsets[:-1], doc_offsets[1:])] == expected_ids


TEXTS = ["Hello world", "", "tokenization should never be the bottleneck", "日本語 🚀"]


def test_encode_batch_to_numpy_on_every_face():
    enc = crayon_hf.load("cl100k_base")
    _check_flat(enc.encode_batch_to_numpy(TEXTS), enc.encode_batch(TEXTS))

    folder = require_shared(VOCAB / "hf" / "llama3_1")
    tok = crayon_hf.Tokenizer.from_file(folder / "tokenizer.json")
    _check_flat(tok.encode_batch_to_numpy(TEXTS), [e.ids for e in tok.encode_batch(TEXTS)])

    require_module("transformers")
    ct = crayon_hf.CrayonTokenizer.from_pretrained(str(folder))
    for add in (True, False):
        expected = ct(TEXTS, add_special_tokens=add, return_offsets_mapping=True)
        arrays = ct.encode_batch_to_numpy(TEXTS, add_special_tokens=add)
        _check_flat(arrays, expected["input_ids"])
        assert [tuple(o) for o in arrays.offsets.tolist()] == [tuple(o) for row in expected["offset_mapping"]
                                                                 for o in row]
        # The same call on the stock backend (the path a folder the engine refuses takes).
        ct._crayon_skip = frozenset(("_encode_plus", "_decode"))
        try:
            stock = ct.encode_batch_to_numpy(TEXTS, add_special_tokens=add)
        finally:
            ct._crayon_sync()
        for a, b in zip(stock, arrays):
            assert np.array_equal(a, b)
    empty = ct.encode_batch_to_numpy([])
    assert empty.ids.size == 0 and empty.doc_offsets.tolist() == [0]
