"""The array path of a batch (crayon_hf/_hf/batch.py + native/engines/hf_batch.cc) against the
per-document path it replaces (`Tokenizer._encode_batch_with`: encode, `post_process`,
`pad_encodings`), which test_hf_parity.py holds equal to `tokenizers`. Every field of every
document must match, and so must the lazily built `Encoding` objects."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from crayon_hf._hf.batch import encode_singles
from crayon_hf._hf.encoding import as_dict
from crayon_hf._hf.postprocess import PaddingParams, TruncationParams
from crayon_hf._hf.processors import build_post_processor
from crayon_hf._native import native
from support import VOCAB, require_shared
from test_hf_postprocess import _GPT2_VARIANTS, sample_texts

FOLDERS = ["gpt2", "roberta_base", "llama3_1", "clip"]
TRUNCATIONS = [
    None,
    TruncationParams(16),
    TruncationParams(16, 4, "longest_first", "left"),
    TruncationParams(5, 0, "only_first"),
    TruncationParams(1),
    TruncationParams(0),
    TruncationParams(10, 0, "only_second"),
]
PADDINGS = [
    None,
    PaddingParams(),
    PaddingParams(None, "left", 8, 7, 1, "<pad>"),
    PaddingParams(40, "right", None, 3, 0, "!"),
]


def _tokenizer(name: str):
    from crayon_hf.tokenizer import Tokenizer

    return Tokenizer.from_file(require_shared(VOCAB / "hf" / name / "tokenizer.json"))


def _texts() -> list[str]:
    return sample_texts(91, 24) + ["", " ", "hello world", "  leading and trailing  ", "<|endoftext|> inside"]


def _compare(tok, texts: list[str], add: bool, trunc, pad, special: bool = False) -> bool:
    """Asserts the array path equals the per-document path; False when it declined the call."""
    try:
        expected = tok._encode_batch_with(texts, False, add, trunc, pad, special)
    except Exception as e:  # noqa: BLE001 - then the array path must decline, never answer
        assert encode_singles(tok, texts, add, trunc, pad, special) is None, repr(e)
        return False
    batch = encode_singles(tok, texts, add, trunc, pad, special)
    if batch is None:
        return False
    for i, enc in enumerate(expected):
        got = batch.padded[:, i, :] if batch.padded is not None else batch.m[:, batch.bounds[i] : batch.bounds[i + 1]]
        assert np.array_equal(got, enc._m), (i, texts[i][:40], add, trunc, pad)
        assert as_dict(batch.encodings[i]) == as_dict(enc), (i, texts[i][:40], add, trunc, pad)
    assert batch.lists(0) == [e.ids for e in expected]
    assert batch.lists(6) == [e.attention_mask for e in expected]
    assert batch.lists(1) == [e.type_ids for e in expected]
    assert batch.lists(5) == [e.special_tokens_mask for e in expected]
    assert batch.offset_lists() == [e.offsets for e in expected]
    assert batch.lengths() == [len(e) for e in expected]
    return True


@pytest.mark.parametrize("name", FOLDERS)
def test_array_path_equals_per_document_path(name: str) -> None:
    tok = _tokenizer(name)
    texts = _texts()
    answered = 0
    for add, trunc, pad in itertools.product([True, False], TRUNCATIONS, PADDINGS):
        answered += _compare(tok, texts, add, trunc, pad)
    assert answered >= 30  # the array path takes the common calls, not just the trivial ones
    assert _compare(tok, texts, True, TruncationParams(12), PaddingParams(), special=True)


@pytest.mark.parametrize("variant", range(len(_GPT2_VARIANTS)))
def test_array_path_on_every_processor_variant(variant: int) -> None:
    tok = _tokenizer("gpt2")
    tok._processor = build_post_processor(_GPT2_VARIANTS[variant])
    texts = _texts()
    for add, trunc, pad in itertools.product([True, False], TRUNCATIONS[:3], PADDINGS[:3]):
        _compare(tok, texts, add, trunc, pad)


def test_lazy_encodings_are_built_on_demand_and_pickle() -> None:
    import pickle

    tok = _tokenizer("gpt2")
    batch = encode_singles(tok, ["one two", "three"], True, None, PaddingParams(), False)
    assert batch.encodings._built == [None, None]
    assert batch.encodings[-1].ids == tok._encode_batch_with(["three"], False, True, None, PaddingParams(2), False)[0].ids
    restored = pickle.loads(pickle.dumps(batch.encodings))
    assert [e.ids for e in restored] == [e.ids for e in batch.encodings]


def test_native_list_builders_check_their_arguments() -> None:
    values = np.arange(10, dtype=np.int64)
    assert native.int_lists(values, np.array([0, 3, 3, 10])) == [[0, 1, 2], [], list(range(3, 10))]
    assert native.pair_lists(values, values + 1, np.array([0, 2])) == [[(0, 1), (1, 2)]]
    for bad in ([0, 11], [3, 2], [-1, 2]):
        with pytest.raises(ValueError):
            native.int_lists(values, np.array(bad))
    with pytest.raises(ValueError):
        native.pair_lists(values, values[:5], np.array([0, 5]))
    raw = _tokenizer("gpt2")._engine.encode_batch_raw(["hello world"], False, 1)
    no_block = np.zeros((7, 0), dtype=np.int64)
    with pytest.raises(ValueError):
        raw.assemble(np.array([99]), False, no_block, no_block, -1, None, None, False, -1, False, 0, 0)
    with pytest.raises(ValueError):
        raw.assemble(np.array([2]), False, no_block, no_block, -1, None, None, False, 1, False, 0, 0)
    with pytest.raises(ValueError):
        raw.assemble(np.array([2]), False, np.zeros((3, 1), dtype=np.int64), no_block, -1, None, None, False, -1,
                     False, 0, 0)
    with pytest.raises(IndexError):
        raw.doc(1)
