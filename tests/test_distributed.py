"""Tokenizers travel to worker processes as references to their cartridges: small pickles that
map the same file in the child (no copy of the vocabulary), for every face; datasets.map with
worker processes gives what a serial map gives; the Ray example's batch function works."""

from __future__ import annotations

import pickle
import sys

import pytest

import crayon_hf.tiktoken as tk
from crayon_hf import Tokenizer
from support import ROOT, VOCAB, require_module, require_shared, short_docs


def faces():
    return [tk.get_encoding("cl100k_base"), Tokenizer.from_file(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json"))]


@pytest.mark.parametrize("index", [0, 1])
def test_pickles_are_references_to_the_cartridge(index):
    tok = faces()[index]
    data = pickle.dumps(tok)
    assert len(data) < 4096  # the path and a few settings, not the vocabulary
    back = pickle.loads(data)
    path = tok.cartridge_path if hasattr(tok, "encode_ordinary") else tok._cartridge_path
    if path is not None:
        assert (back.cartridge_path if hasattr(back, "encode_ordinary") else back._cartridge_path) == path
    text = "pickled tokenizers encode alike: 文档 🚀"
    if hasattr(tok, "encode_ordinary"):
        assert back.encode_ordinary(text) == tok.encode_ordinary(text)
    else:
        assert back.encode(text).ids == tok.encode(text).ids


def _encode(batch, tok):
    if hasattr(tok, "encode_ordinary_batch"):
        return {"ids": tok.encode_ordinary_batch(batch["text"], num_threads=1)}
    return {"ids": [e.ids for e in tok.encode_batch(batch["text"])]}


@pytest.mark.parametrize("index", [0, 1])
def test_datasets_map_with_worker_processes(index):
    datasets = require_module("datasets")
    tok = faces()[index]
    ds = datasets.Dataset.from_dict({"text": short_docs(400)})
    got = ds.map(_encode, batched=True, batch_size=50, num_proc=2, fn_kwargs={"tok": tok})
    want = [_encode({"text": [t]}, tok)["ids"][0] for t in ds["text"]]
    assert got["ids"] == want


def test_ray_example_batch_function_travels_by_pickle():
    """The Ray example imports only the public API, and its batch function, crayon_hf.TokenizeBatch,
    pickles on every face (tests/test_ray_corpus.py runs it on a Ray cluster)."""
    source = (ROOT / "examples" / "ray_data.py").read_text(encoding="utf-8")
    assert "crayon_hf._" not in source and "crayon_hf.TokenizeBatch" in source
    import numpy as np

    import crayon_hf

    for tok in faces():
        fn = pickle.loads(pickle.dumps(crayon_hf.TokenizeBatch(tok)))
        texts = short_docs(20)
        out = fn({"text": np.array(texts, dtype=object)})["input_ids"]
        want = _encode({"text": texts}, tok)["ids"]
        assert [x.tolist() for x in out] == want and all(x.dtype == np.uint32 for x in out)
