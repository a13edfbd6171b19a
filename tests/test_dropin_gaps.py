"""Issue 21: the drop-in gaps found by running the references' own suites, each compared with the
real library (tools/conformance/run.py runs those suites; docs/compatibility.md has the counts)."""

from __future__ import annotations

import base64
import pickle
import sys
import types
import warnings

import numpy as np
import pytest

import crayon_hf
import crayon_hf.tiktoken as ctk
from support import VOCAB, require_module, require_shared

tokenizers = require_module("tokenizers")
tiktoken = require_module("tiktoken")
import tiktoken.load  # noqa: E402
from tokenizers import AddedToken  # noqa: E402
from tokenizers import models, normalizers, pre_tokenizers, processors  # noqa: E402


def both(folder: str):
    path = str(require_shared(VOCAB / "hf" / folder / "tokenizer.json"))
    return tokenizers.Tokenizer.from_file(path), crayon_hf.Tokenizer.from_file(path)


def same_encoding(ref, ours, *args, **kwargs):
    a, b = ref.encode(*args, **kwargs), ours.encode(*args, **kwargs)
    assert (b.ids, b.tokens, b.offsets) == (a.ids, a.tokens, a.offsets)
    return a


# ---------------------------------------------------------------- 1. special AddedTokens


@pytest.mark.parametrize(
    "folder,token,text",
    [
        ("bert_base_uncased", AddedToken("[MYSEP]"), "a [MYSEP] b"),
        ("gemma", AddedToken("[MYSEP]", lstrip=True), "a [MYSEP] b"),
        ("mistral_v0_1", AddedToken("[MYSEP]", lstrip=True), "a [MYSEP] b"),
        ("bert_base_uncased", AddedToken("[X2]", normalized=True), "a [X2] [x2] b"),
    ],
)
def test_add_special_tokens_added_token_is_not_normalized(folder, token, text):
    ref, ours = both(folder)
    assert ours.add_special_tokens([token]) == ref.add_special_tokens([token])
    enc = same_encoding(ref, ours, text)
    assert ours.decode(enc.ids, skip_special_tokens=True) == ref.decode(enc.ids, skip_special_tokens=True)
    assert ours.decode(enc.ids, skip_special_tokens=False) == ref.decode(enc.ids, skip_special_tokens=False)
    assert {k: repr(v) for k, v in ours.get_added_tokens_decoder().items()} == {
        k: repr(v) for k, v in ref.get_added_tokens_decoder().items()
    }


def test_add_tokens_special_added_token_flags():
    ref, ours = both("bert_base_uncased")
    tokens = [AddedToken("[Y1]"), AddedToken("[Y2]", special=True), "[Y3]", AddedToken("[Y4]", normalized=False)]
    assert ours.add_tokens(tokens) == ref.add_tokens(tokens)
    assert {k: repr(v) for k, v in ours.get_added_tokens_decoder().items()} == {
        k: repr(v) for k, v in ref.get_added_tokens_decoder().items()
    }
    same_encoding(ref, ours, "[Y1] [y2] [Y2] [Y3] [y4] [Y4]")


# ---------------------------------------------------------------- 2. single_word token strings


@pytest.mark.parametrize("text", ["foofoo foo", "foo foofoo", "a foo b", "foo", "xfoo foo."])
def test_single_word_token_strings(text):
    ref, ours = both("mistral_v0_1")
    for t in (ref, ours):
        t.add_tokens([AddedToken("foo", single_word=True)])
    same_encoding(ref, ours, text, add_special_tokens=False)
    a = ref.encode_batch([text, text + " foo"])
    b = ours.encode_batch([text, text + " foo"])
    assert [e.tokens for e in b] == [e.tokens for e in a]
    assert ours.id_to_token(8014) == ref.id_to_token(8014)


# ---------------------------------------------------------------- 3. empty model vocabulary


def test_empty_model_vocabulary_loads():
    ref = tokenizers.Tokenizer(models.BPE())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = crayon_hf.Tokenizer.from_str(ref.to_str())
        assert ours.crayon_backend.startswith("fallback: ")
        assert ours.encode("my name").ids == ref.encode("my name").ids == []
        assert ours.get_vocab_size() == 0
        built = crayon_hf.Tokenizer(models.BPE())
    for t in (ref, built):
        t.add_tokens(["my", "name", "is", "john"])
        t.enable_truncation(2)
    assert built.encode("my name is john").tokens == ref.encode("my name is john").tokens == ["my", "name"]


def test_added_tokens_only_runs_natively():
    ref = tokenizers.Tokenizer(models.BPE())
    ref.add_tokens(["my", "name"])
    ours = crayon_hf.Tokenizer.from_str(ref.to_str())
    assert ours.crayon_backend == "native"
    same_encoding(ref, ours, "my name is")


# ---------------------------------------------------------------- 4. components are never ignored


def test_component_setters_take_effect():
    ref, ours = both("bert_base_uncased")
    text = "Hello, y'all! How are you 😁 ?"
    for name, value in [
        ("pre_tokenizer", pre_tokenizers.Whitespace()),
        ("normalizer", normalizers.Lowercase()),
        ("post_processor", processors.TemplateProcessing(single="[CLS] $0 [SEP] [SEP]", special_tokens=[("[CLS]", 101), ("[SEP]", 102)])),
        ("pre_tokenizer", None),
        ("normalizer", None),
    ]:
        setattr(ref, name, value)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            setattr(ours, name, value)
        assert repr(getattr(ours, name)) == repr(getattr(ref, name))
        same_encoding(ref, ours, text)
    assert type(ours.model) is type(ref.model)
    assert repr(ours.decoder) == repr(ref.decoder)
    assert repr(ours) == repr(ref)


def test_component_setter_rejects_what_tokenizers_rejects():
    _, ours = both("bert_base_uncased")
    with pytest.raises(TypeError):
        ours.pre_tokenizer = "whitespace"


# ---------------------------------------------------------------- 5. str(AddedToken)


def test_added_token_str_repr_equality():
    for kwargs in [{}, {"special": True}, {"normalized": True, "special": True}, {"lstrip": True, "single_word": True}]:
        ref, ours = AddedToken("<mask>", **kwargs), crayon_hf.AddedToken("<mask>", **kwargs)
        assert str(ours) == str(ref) == "<mask>"
        assert repr(ours) == repr(ref)
        assert ours.normalized == ref.normalized
        assert ours.__getstate__() == ref.__getstate__()
    a = crayon_hf.AddedToken("x")
    a.special = True
    assert a.normalized is False  # as tokenizers': the default follows `special`
    assert crayon_hf.AddedToken("a") == crayon_hf.AddedToken("a") != crayon_hf.AddedToken("a", lstrip=True)
    assert pickle.loads(pickle.dumps(crayon_hf.AddedToken("z", rstrip=True))) == crayon_hf.AddedToken("z", rstrip=True)


# ---------------------------------------------------------------- 6. numpy batches


def test_encode_batch_numpy_pairs():
    ref, ours = both("bert_base_uncased")
    pairs = np.array([("My name is John", "pair"), ("Hello", "world")])
    singles = np.array(["My name is John", "pair"])
    for batch in (pairs, singles):
        assert [e.ids for e in ours.encode_batch(batch)] == [e.ids for e in ref.encode_batch(batch)]
        assert [e.type_ids for e in ours.encode_batch(batch)] == [e.type_ids for e in ref.encode_batch(batch)]


# ---------------------------------------------------------------- 7. tiktoken face


def test_encode_bytes_matches_tiktoken():
    ref = tiktoken.Encoding(
        "cl100k_base",
        pat_str=ctk.get_encoding("cl100k_base")._pat_str,
        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(require_shared(VOCAB / "tiktoken" / "cl100k_base.tiktoken"))),
        special_tokens={"<|endoftext|>": 100257},
    )
    ours = ctk.get_encoding("cl100k_base")
    cases = [b" \xec\x8b\xa4\xed", b"\x80" * 5, b"hello \xff", b"a   \xe2\x82", b"\n\n \t\xf0\x9f", b"", b"ok",
             "naïve 日本語".encode()[:-1], b"   \xc3", b"x\xed\xa0\x80y"]
    for data in cases:
        assert ours._encode_bytes(data) == ref._encode_bytes(data), data
        assert ours.decode_bytes(ours._encode_bytes(data)) == data


def test_registry_constructors_and_plugins(monkeypatch, tmp_path):
    from crayon_hf.tiktoken import registry

    assert {"gpt2", "r50k_base", "p50k_base", "p50k_edit", "cl100k_base", "o200k_base", "o200k_harmony"} <= set(
        registry.ENCODING_CONSTRUCTORS or registry._find_constructors() or registry.ENCODING_CONSTRUCTORS
    )
    # A third-party plugin in the tiktoken_ext namespace package is found by get_encoding.
    plugin_dir = tmp_path / "tiktoken_ext"
    plugin_dir.mkdir()
    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"ab"] = 256
    (plugin_dir / "crayon_test_plugin.py").write_text(
        "ENCODING_CONSTRUCTORS = {'crayon_test_enc': lambda: {'name': 'crayon_test_enc', "
        "'pat_str': r'''\\w+|\\s+|[^\\w\\s]+''', 'mergeable_ranks': " + repr(ranks) + ", "
        "'special_tokens': {'<|end|>': 257}}}\n"
    )
    import tiktoken_ext

    monkeypatch.setattr(tiktoken_ext, "__path__", [*tiktoken_ext.__path__, str(plugin_dir)])
    monkeypatch.setattr(registry, "ENCODING_CONSTRUCTORS", None)
    registry._available_plugin_modules.cache_clear()
    monkeypatch.setitem(sys.modules, "tiktoken_ext.crayon_test_plugin", None)
    del sys.modules["tiktoken_ext.crayon_test_plugin"]
    try:
        assert "crayon_test_enc" in ctk.list_encoding_names()
        enc = ctk.get_encoding("crayon_test_enc")
        assert enc.encode("ab ab<|end|>", allowed_special="all") == [256, 32, 256, 257]
    finally:
        registry._available_plugin_modules.cache_clear()
        registry.ENCODINGS.pop("crayon_test_enc", None)


def test_data_gym_matches_tiktoken(tmp_path):
    # GPT-2's data_gym files, written from r50k's ranks in data_gym's byte spelling.
    ranks = tiktoken.load.load_tiktoken_bpe(str(require_shared(VOCAB / "tiktoken" / "r50k_base.tiktoken")))
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    spell = {b: chr(b) for b in printable}
    spell.update({b: chr(256 + k) for k, b in enumerate(b for b in range(256) if b not in printable)})
    by_rank = sorted(ranks.items(), key=lambda kv: kv[1])
    # Each merged token's merge: the split whose parts both have lower ranks, as tiktoken's BPE finds it.
    merges = []
    for token, rank in by_rank[256:]:
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            if left in ranks and right in ranks and max(ranks[left], ranks[right]) < rank:
                merges.append((left, right))
                break
        else:
            pytest.skip("a token without a lower-ranked split")
        if len(merges) >= 2000:
            break
    kept = {t: r for t, r in by_rank[: 256 + len(merges)]}
    text = lambda b: "".join(spell[x] for x in b)  # noqa: E731
    (tmp_path / "vocab.bpe").write_text("#version: 0.2\n" + "".join(f"{text(a)} {text(b)}\n" for a, b in merges))
    import json

    (tmp_path / "encoder.json").write_text(json.dumps({text(t): r for t, r in kept.items()}))
    args = (str(tmp_path / "vocab.bpe"), str(tmp_path / "encoder.json"))
    assert ctk.load.data_gym_to_mergeable_bpe_ranks(*args) == tiktoken.load.data_gym_to_mergeable_bpe_ranks(*args)


# ---------------------------------------------------------------- 8. empty token in a rank file


def test_rank_file_with_empty_token(tmp_path):
    ranks = tiktoken.load.load_tiktoken_bpe(str(require_shared(VOCAB / "tiktoken" / "r50k_base.tiktoken")))
    lines = [base64.b64encode(t) + b" " + str(r).encode() for t, r in sorted(ranks.items(), key=lambda kv: kv[1])]
    lines.append(b"= " + str(len(ranks)).encode())  # the empty token, as a published rank file spells it
    path = tmp_path / "with_empty.tiktoken"
    path.write_bytes(b"\n".join(lines) + b"\n")
    ref_ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    our_ranks = ctk.load.load_tiktoken_bpe(str(path))
    assert our_ranks == ref_ranks and ref_ranks[b""] == len(ranks)
    pat = ctk.get_encoding("r50k_base")._pat_str
    specials = {"<|endoftext|>": len(ranks) + 1}
    ref = tiktoken.Encoding("e", pat_str=pat, mergeable_ranks=ref_ranks, special_tokens=specials)
    ours = ctk.Encoding("e", pat_str=pat, mergeable_ranks=our_ranks, special_tokens=specials)
    text = "Hello world, it's 2024 <|endoftext|> and more   text\n"
    assert ours.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")
    assert ours.n_vocab == ref.n_vocab
    assert ours.encode_single_token(b"") == ref.encode_single_token(b"")
    assert ours.decode_single_token_bytes(len(ranks)) == ref.decode_single_token_bytes(len(ranks)) == b""
    assert ours.token_byte_values() == ref.token_byte_values()
    path2 = tmp_path / "e.dat"
    ours.save_cartridge(path2)
    mapped = ctk.Encoding.from_cartridge(path2)
    assert mapped.encode_single_token(b"") == ref.encode_single_token(b"")
    assert mapped.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")


def test_load_tiktoken_bpe_errors_like_tiktoken(tmp_path):
    bad = tmp_path / "bad.tiktoken"
    bad.write_bytes(b"YQ== 0\nnot base64 and three\n")
    with pytest.raises(ValueError) as ref_err:
        tiktoken.load.load_tiktoken_bpe(str(bad))
    with pytest.raises(ValueError) as our_err:
        ctk.load.load_tiktoken_bpe(str(bad))
    assert str(our_err.value) == str(ref_err.value)
    empty = tmp_path / "empty.tiktoken"
    empty.write_bytes(b"")
    assert ctk.load.load_tiktoken_bpe(str(empty)) == tiktoken.load.load_tiktoken_bpe(str(empty)) == {}
