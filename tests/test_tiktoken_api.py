"""The tiktoken 0.14 public surface: same names, signatures, defaults, results and errors."""

from __future__ import annotations

import inspect
import pickle

import numpy as np
import pytest

import crayon_hf.tiktoken as tk
from support import our_encoding, reference_encoding, require_module

PUBLIC_METHODS = [
    "__init__",
    "encode",
    "encode_ordinary",
    "encode_batch",
    "encode_ordinary_batch",
    "encode_to_numpy",
    "encode_with_unstable",
    "encode_single_token",
    "decode",
    "decode_bytes",
    "decode_single_token_bytes",
    "decode_tokens_bytes",
    "decode_with_offsets",
    "decode_batch",
    "decode_bytes_batch",
    "token_byte_values",
    "is_special_token",
]


@pytest.mark.parametrize("method", PUBLIC_METHODS)
def test_signatures_match_tiktoken(method):
    tiktoken = require_module("tiktoken")
    theirs = inspect.signature(getattr(tiktoken.Encoding, method))
    ours = inspect.signature(getattr(tk.Encoding, method))
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()
    ]


def test_module_surface():
    tiktoken = require_module("tiktoken")
    import tiktoken.load

    for name in ["Encoding", "get_encoding", "encoding_for_model", "encoding_name_for_model", "list_encoding_names"]:
        assert hasattr(tk, name)
    assert inspect.signature(tk.load.load_tiktoken_bpe) == inspect.signature(tiktoken.load.load_tiktoken_bpe)
    from crayon_hf.tiktoken import model

    import tiktoken.model

    assert model.MODEL_TO_ENCODING == tiktoken.model.MODEL_TO_ENCODING
    assert model.MODEL_PREFIX_TO_ENCODING == tiktoken.model.MODEL_PREFIX_TO_ENCODING


def test_properties(pair):
    ref, ours = pair
    assert ours.n_vocab == ref.n_vocab
    assert ours.max_token_value == ref.max_token_value
    assert ours.special_tokens_set == ref.special_tokens_set
    assert ours.name == ref.name
    assert ours._pat_str == ref._pat_str
    assert ours._special_tokens == ref._special_tokens
    if ref.name != "llama3":
        assert ours.eot_token == ref.eot_token
    for token in list(ref._special_tokens.values())[:5] + [0, 1, 100]:
        assert ours.is_special_token(token) == ref.is_special_token(token)
    assert repr(ours) == repr(ref)
    assert ours.crayon_backend == "native"


def test_private_attributes_match(pair):
    ref, ours = pair
    assert ours._mergeable_ranks == ref._mergeable_ranks


def test_token_byte_values(pair):
    ref, ours = pair
    assert ours.token_byte_values() == ref.token_byte_values()


def test_single_tokens(pair):
    ref, ours = pair
    for token in [0, 1, 255, 1000, ref.max_token_value, *list(ref._special_tokens.values())[:3]]:
        try:
            expected = ref.decode_single_token_bytes(token)
        except KeyError:
            with pytest.raises(KeyError):
                ours.decode_single_token_bytes(token)
            continue
        assert ours.decode_single_token_bytes(token) == expected
        assert ours.encode_single_token(expected) == ref.encode_single_token(expected)
    for special in list(ref.special_tokens_set)[:3]:
        assert ours.encode_single_token(special) == ref.encode_single_token(special)
    with pytest.raises(KeyError) as a:
        ref.encode_single_token("qqqqqqqqqqqqqqq")
    with pytest.raises(KeyError) as b:
        ours.encode_single_token("qqqqqqqqqqqqqqq")
    assert a.value.args == b.value.args


def test_decode_errors_match():
    ref, ours = reference_encoding("r50k_base"), our_encoding("r50k_base")
    for call in [
        lambda e: e.decode_bytes([10**6]),
        lambda e: e.decode_single_token_bytes(10**6),
        lambda e: e.decode([-1]),
        lambda e: e.decode_bytes([2**32]),
        lambda e: e.decode_tokens_bytes([10**6]),
    ]:
        with pytest.raises(Exception) as a:
            call(ref)
        with pytest.raises(Exception) as b:
            call(ours)
        assert type(a.value) is type(b.value)
        assert a.value.args == b.value.args


def test_encode_to_numpy(pair):
    ref, ours = pair
    text = "hello world <|endoftext|> and more"
    for kwargs in [{"disallowed_special": ()}, {"allowed_special": "all"}]:
        a = ref.encode_to_numpy(text, **kwargs)
        b = ours.encode_to_numpy(text, **kwargs)
        assert b.dtype == np.uint32 and a.dtype == b.dtype
        assert np.array_equal(a, b)


def test_batches(pair):
    ref, ours = pair
    texts = ["hello world", "", "goodbye  world\n\n", "数字 123456 ok"] * 50
    assert ours.encode_ordinary_batch(texts) == ref.encode_ordinary_batch(texts)
    assert ours.encode_batch(texts, num_threads=2) == ref.encode_batch(texts, num_threads=2)
    ids = ref.encode_ordinary_batch(texts)
    assert ours.decode_batch(ids) == ref.decode_batch(ids)
    assert ours.decode_bytes_batch(ids, num_threads=1) == ref.decode_bytes_batch(ids, num_threads=1)
    assert ours.encode_batch(texts, num_threads=1) == ours.encode_batch(texts, num_threads=8)


@pytest.mark.parametrize(
    "text", ["hello fanta", "hello world ", "hello\n\n", "it's 202", "  ", "<|endoftext|>", "привет", "中文", "x\t"]
)
def test_encode_with_unstable(pair, text):
    ref, ours = pair
    kwargs = {"allowed_special": "all"}
    stable_a, comp_a = ref.encode_with_unstable(text, **kwargs)
    stable_b, comp_b = ours.encode_with_unstable(text, **kwargs)
    assert stable_a == stable_b
    assert sorted(map(tuple, comp_a)) == sorted(map(tuple, comp_b))


def test_encode_single_piece_and_native_bpe(pair):
    ref, ours = pair
    for text in ["helloqqqq", " antidisestablishmentarianism", "中文字符"]:
        assert ours._encode_single_piece(text) == ref._encode_single_piece(text)
    text = "Hello, world! It's 2024."
    assert ours._encode_only_native_bpe(text) == ref._encode_only_native_bpe(text)


def test_get_encoding_and_models():
    enc = tk.get_encoding("cl100k_base")
    assert tk.get_encoding("cl100k_base") is enc
    assert tk.encoding_for_model("gpt-4") is enc
    assert tk.encoding_for_model("gpt-4o").name == "o200k_base"
    assert tk.encoding_for_model("gpt2").name == "gpt2"
    assert tk.encoding_for_model("gpt-oss-120b").name == "o200k_harmony"
    assert set(tk.list_encoding_names()) == {"gpt2", "r50k_base", "cl100k_base", "o200k_base", "o200k_harmony"}
    with pytest.raises(KeyError, match="Could not automatically map"):
        tk.encoding_for_model("no-such-model")
    with pytest.raises(ValueError, match="Unknown encoding nope"):
        tk.get_encoding("nope")


@pytest.mark.parametrize("name", ["p50k_base", "p50k_edit"])
def test_unbundled_names_explain_how_to_build(name):
    with pytest.raises(ValueError, match="crayon convert"):
        tk.get_encoding(name)


def test_gpt2_matches_r50k():
    assert tk.get_encoding("gpt2").encode("hello world") == tk.get_encoding("r50k_base").encode("hello world")
    assert tk.get_encoding("gpt2").n_vocab == 50257


def test_pickle_registered_by_name():
    enc = tk.get_encoding("o200k_base")
    data = pickle.dumps(enc)
    assert len(data) < 200
    assert pickle.loads(data).encode("hello") == enc.encode("hello")


def test_pickle_cartridge_by_path(tmp_path):
    enc = tk.get_encoding("r50k_base")
    path = tmp_path / "r50k.dat"
    enc.save_cartridge(path)
    mapped = tk.Encoding.from_cartridge(path)
    data = pickle.dumps(mapped)
    assert len(data) < 500
    again = pickle.loads(data)
    assert again.cartridge_path == str(path)
    assert again.encode("hello world") == enc.encode("hello world")


def test_pickle_constructed():
    enc = tk.Encoding(
        "tiny", pat_str=tk.get_encoding("r50k_base")._pat_str,
        mergeable_ranks={bytes([b]): b for b in range(256)} | {b"ab": 256},
        special_tokens={"<|x|>": 257},
    )
    again = pickle.loads(pickle.dumps(enc))
    assert again.crayon_backend == "native"
    tiktoken = require_module("tiktoken")
    ref = tiktoken.Encoding("tiny", pat_str=enc._pat_str, mergeable_ranks=enc._mergeable_ranks, special_tokens={"<|x|>": 257})
    assert again.encode("abab ab<|x|>", allowed_special="all") == ref.encode("abab ab<|x|>", allowed_special="all")


def test_explicit_n_vocab_checked():
    ranks = {bytes([b]): b for b in range(256)}
    tk.Encoding("ok", pat_str=tk.get_encoding("r50k_base")._pat_str, mergeable_ranks=ranks, special_tokens={"<s>": 256}, explicit_n_vocab=257)
    with pytest.raises(AssertionError):
        tk.Encoding("bad", pat_str="x", mergeable_ranks=ranks, special_tokens={}, explicit_n_vocab=300)


def test_bad_vocabularies_give_clear_errors():
    pat = tk.get_encoding("r50k_base")._pat_str
    with pytest.raises(ValueError, match="used twice"):
        tk.Encoding("dup", pat_str=pat, mergeable_ranks={b"a": 0, b"b": 0}, special_tokens={})
    with pytest.raises(ValueError, match="too large"):
        tk.Encoding("big", pat_str=pat, mergeable_ranks={b"a": 2**31}, special_tokens={})
    enc = tk.Encoding("holes", pat_str=pat, mergeable_ranks={b"a": 0, b"b": 1}, special_tokens={})
    assert enc.encode("ab") == [0, 1]
    with pytest.raises(ValueError, match="has no token"):
        enc.encode("c")


def test_unknown_pattern_falls_back_to_tiktoken_loudly():
    tiktoken = require_module("tiktoken")
    ranks = reference_encoding("r50k_base")._mergeable_ranks
    pat = r"""(\w)\1|\w+|\s+|[^\w\s]+"""  # a backreference: the native engine refuses it
    with pytest.warns(UserWarning, match="fallback"):
        enc = tk.Encoding("custom", pat_str=pat, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
    assert enc.crayon_backend.startswith("fallback: pat_str")
    ref = tiktoken.Encoding("custom", pat_str=pat, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
    text = "Hello, world! don't stop <|endoftext|>"
    assert enc.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")
    assert enc.decode(ref.encode_ordinary(text)) == text
