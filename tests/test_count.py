"""`count` / `count_batch` on every face against the length of the reference's encoding.

tiktoken face: ``len(tiktoken.Encoding.encode_ordinary(text))``. tokenizers face:
``len(tokenizers.Tokenizer.encode(text, add_special_tokens=...).ids)`` with truncation and padding
off (a count is the full length). transformers face: ``len(stock(text, add_special_tokens=...)
["input_ids"])``."""

from __future__ import annotations

import pytest

from support import (CORPORA, NATIVE_FOLDERS, TIKTOKEN_VOCABS, VOCAB, corpus_files, corpus_text, our_encoding,
                     random_slices, reference_encoding, require_module, require_shared, short_docs)

pytestmark = pytest.mark.filterwarnings("ignore:crayon-hf.*not implemented natively:UserWarning")

ADVERSARIAL = [
    "", " ", "<|endoftext|> is plain text here", "😀🤗👩‍👩‍👧‍👦 emoji", "\u0301\u0301 combining", "a" * 5000,
    " " * 3000 + "x", "\r\n" * 500, "𠀀𠀁 rare CJK 龘", "tab\tnew\nline\r\n\n\n", "naïve café 🤗",
]


def _texts() -> list[str]:
    out = list(ADVERSARIAL) + short_docs(300)
    for path in corpus_files():
        text = corpus_text(path, 64 * 1024)
        out.append(text)
        out += random_slices(text, 30, seed=len(path.name))
    return out


@pytest.mark.parametrize("name", TIKTOKEN_VOCABS)
def test_tiktoken_count_matches_encode_ordinary(name):
    ours, ref = our_encoding(name), reference_encoding(name)
    texts = _texts()
    expected = [len(ids) for ids in ref.encode_ordinary_batch(texts)]
    assert ours.count_batch(texts) == expected
    assert ours.count_batch(texts, num_threads=1) == expected
    assert [ours.count(t) for t in texts[:200]] == expected[:200]
    assert ours.count_batch([]) == []


def test_tiktoken_count_lone_surrogates_like_tiktoken():
    ours, ref = our_encoding("cl100k_base"), reference_encoding("cl100k_base")
    for text in ["a\ud800b", "\udfff", "x\ud83d\ude00y"]:
        assert ours.count(text) == len(ref.encode_ordinary(text))
        assert ours.count_batch([text, "ok"]) == [len(ref.encode_ordinary(text)), 1]


@pytest.mark.parametrize("name", NATIVE_FOLDERS)
def test_tokenizer_count_matches_encode(name):
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    path = str(require_shared(VOCAB / "hf" / name / "tokenizer.json"))
    ours = Tokenizer.from_file(path)
    ref = tokenizers.Tokenizer.from_file(path)
    ref.no_truncation()
    ref.no_padding()
    texts = _texts()[:400]
    for add in (True, False):
        expected = [len(e.ids) for e in ref.encode_batch(texts, add_special_tokens=add)]
        assert ours.count_batch(texts, add_special_tokens=add) == expected, add
        assert [ours.count(t, add_special_tokens=add) for t in texts[:50]] == expected[:50]
    assert ours.count_batch([]) == []


def test_tokenizer_count_ignores_truncation_and_padding():
    """xlm_roberta's tokenizer.json enables truncation (128) and padding: `encode` is cut to 128
    ids, the count is the full length."""
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    path = str(require_shared(VOCAB / "hf" / "xlm_roberta_paraphrase_mpnet" / "tokenizer.json"))
    ours = Tokenizer.from_file(path)
    assert ours.truncation is not None
    ref = tokenizers.Tokenizer.from_file(path)
    text = corpus_text(CORPORA / "multi_udhr_scripts.txt", 8192)
    assert len(ours.encode(text).ids) == 128
    ref.no_truncation()
    ref.no_padding()
    assert ours.count(text) == len(ref.encode(text).ids) > 128


def test_tokenizer_count_with_added_tokens():
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    path = str(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json"))
    ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
    for tok in (ours, ref):
        tok.add_tokens(["hello world", "zzq"])
        tok.add_special_tokens(["<|sep|>"])
    texts = ["say hello world<|sep|>zzq now", "<|endoftext|>x", "plain"]
    assert ours.count_batch(texts) == [len(e.ids) for e in ref.encode_batch(texts)]


def test_tokenizer_count_on_fallback():
    """A tokenizer.json running on the tokenizers library counts as that library encodes."""
    require_module("tokenizers")
    import json

    import tokenizers

    from crayon_hf import Tokenizer

    data = json.loads(require_shared(VOCAB / "hf" / "bert_base_uncased" / "tokenizer.json").read_text("utf-8"))
    data["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Nmt"}, data["normalizer"]]}
    with pytest.warns(UserWarning):
        ours = Tokenizer.from_str(json.dumps(data))
    assert ours.crayon_backend.startswith("fallback")
    ref = tokenizers.Tokenizer.from_str(json.dumps(data))
    texts = short_docs(50)
    assert ours.count_batch(texts) == [len(e.ids) for e in ref.encode_batch(texts)]


@pytest.mark.parametrize("name", ["qwen2_5", "bert_base_uncased", "t5_small"])
def test_transformers_count_matches_call(name):
    require_module("transformers")
    from transformers import AutoTokenizer

    from crayon_hf.transformers import CrayonTokenizer

    folder = require_shared(VOCAB / "hf" / name)
    ours = CrayonTokenizer.from_pretrained(folder)
    ref = AutoTokenizer.from_pretrained(folder)
    assert not isinstance(ref, CrayonTokenizer)
    texts = _texts()[:200]
    for add in (True, False):
        expected = [len(ids) for ids in ref(texts, add_special_tokens=add, verbose=False)["input_ids"]]
        assert ours.count_batch(texts, add_special_tokens=add) == expected
        assert ours.count(texts[5], add_special_tokens=add) == expected[5]
