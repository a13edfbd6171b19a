"""crayon_hf.Tokenizer against the real `tokenizers` on every folder in ../shared/vocab/hf
(byte-level BPE, SentencePiece-style BPE, WordPiece, Unigram) and on tokenizers built with transformers' TikTokenConverter from the rank
files in ../shared/vocab/tiktoken.

Every comparison checks the whole Encoding (ids, tokens, offsets, word ids, type ids, masks,
sequence ids) and decode, on real text (CI-sized samples of every corpus, random slices),
hypothesis strings over an adversarial alphabet, pairs, batches and added tokens in odd places.
Whole corpora run under `pytest -m full`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import (BPE_FOLDERS, NATIVE_FOLDERS, VOCAB, corpus_files, corpus_text, hf_pair, random_slices,
                     require_module, require_shared, short_docs)

load_pair = hf_pair


@pytest.fixture(params=NATIVE_FOLDERS)
def hf_pair(request):
    return load_pair(request.param)


def encoding_fields(enc) -> dict:
    return {
        "ids": enc.ids,
        "tokens": enc.tokens,
        "offsets": enc.offsets,
        "word_ids": enc.word_ids,
        "type_ids": enc.type_ids,
        "attention_mask": enc.attention_mask,
        "special_tokens_mask": enc.special_tokens_mask,
        "sequence_ids": enc.sequence_ids,
        "n_sequences": enc.n_sequences,
        "overflowing": [encoding_fields(o) for o in enc.overflowing],
    }


def assert_same_encoding(ours, ref, context: str) -> None:
    a, b = encoding_fields(ours), encoding_fields(ref)
    if a == b:
        return
    for key in a:
        if a[key] != b[key]:
            if isinstance(a[key], list) and isinstance(b[key], list):
                i = next((i for i, (x, y) in enumerate(zip(a[key], b[key])) if x != y), min(len(a[key]), len(b[key])))
                toks = b["tokens"][max(0, i - 3): i + 3]
                pytest.fail(
                    f"{context}: {key} differ at index {i}: ours {a[key][max(0, i - 3): i + 3]} vs "
                    f"tokenizers {b[key][max(0, i - 3): i + 3]} (reference tokens {toks}; lengths "
                    f"{len(a[key])} vs {len(b[key])})"
                )
            pytest.fail(f"{context}: {key} differ: ours {a[key]!r} vs tokenizers {b[key]!r}")


def check_texts(ours, ref, texts: list[str], context: str, decode: bool = True) -> None:
    for i, text in enumerate(texts):
        a, b = ours.encode(text), ref.encode(text)
        assert_same_encoding(a, b, f"{context} #{i} {text[:60]!r}")
        if decode:
            for skip in (True, False):
                assert ours.decode(b.ids, skip_special_tokens=skip) == ref.decode(b.ids, skip_special_tokens=skip), (
                    f"{context} #{i}: decode(skip_special_tokens={skip}) differs"
                )


def documents(text: str, size: int = 4096) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_every_folder_runs_natively(hf_pair):
    ours, _ = hf_pair
    assert ours.crayon_backend == "native"


@pytest.mark.parametrize("corpus", [p.name for p in corpus_files()] if (VOCAB.parent / "corpora").exists() else [])
def test_corpus_samples(hf_pair, corpus):
    ours, ref = hf_pair
    path = next(p for p in corpus_files() if p.name == corpus)
    text = corpus_text(path, 48 * 1024)
    check_texts(ours, ref, documents(text), corpus, decode=True)


@pytest.mark.full
@pytest.mark.parametrize("corpus", [p.name for p in corpus_files()] if (VOCAB.parent / "corpora").exists() else [])
def test_whole_corpora(hf_pair, corpus):
    ours, ref = hf_pair
    path = next(p for p in corpus_files() if p.name == corpus)
    check_texts(ours, ref, documents(corpus_text(path, None), 64 * 1024), corpus, decode=True)


def test_random_slices(hf_pair):
    ours, ref = hf_pair
    texts = []
    for k, path in enumerate(corpus_files()):
        texts += random_slices(corpus_text(path), 40, seed=k)
    check_texts(ours, ref, texts, "random slice")


def test_short_docs_batch(hf_pair):
    ours, ref = hf_pair
    docs = short_docs(300)
    for i, (a, b) in enumerate(zip(ours.encode_batch(docs), ref.encode_batch(docs))):
        assert_same_encoding(a, b, f"short doc #{i}")
    assert ours.decode_batch([e.ids for e in ref.encode_batch(docs[:50])]) == ref.decode_batch(
        [e.ids for e in ref.encode_batch(docs[:50])]
    )


def test_pairs(hf_pair):
    ours, ref = hf_pair
    rng = random.Random(7)
    text = corpus_text(corpus_files()[0], 20000)
    slices = random_slices(text, 40, seed=3, max_len=200)
    for i in range(0, len(slices), 2):
        a, b = slices[i], slices[i + 1]
        for add in (True, False):
            assert_same_encoding(ours.encode(a, b, add_special_tokens=add), ref.encode(a, b, add_special_tokens=add), f"pair {i}")
    batch = [(slices[i], slices[i + 1]) for i in range(0, 10, 2)]
    for x, y in zip(ours.encode_batch(batch), ref.encode_batch(batch)):
        assert_same_encoding(x, y, "pair batch")
    words = text.split()[:50]
    rng.shuffle(words)
    assert_same_encoding(ours.encode(words, is_pretokenized=True), ref.encode(words, is_pretokenized=True), "pretokenized")
    assert_same_encoding(
        ours.encode(words[:20], words[20:], is_pretokenized=True),
        ref.encode(words[:20], words[20:], is_pretokenized=True),
        "pretokenized pair",
    )


def _added_contents(ref) -> list[str]:
    added = ref.get_added_tokens_decoder()
    contents = [t.content for _, t in sorted(added.items())]
    # A few of each kind: first, last, and some from the middle.
    return contents[:6] + contents[-4:] + contents[len(contents) // 2 : len(contents) // 2 + 3]


def test_added_tokens_in_odd_places(hf_pair):
    ours, ref = hf_pair
    contents = _added_contents(ref)
    rng = random.Random(11)
    words = ["hello", " world", "  ", "\n", "x", "'s", "12", "日本", " ", "é"]
    texts = []
    for _ in range(200):
        parts = [rng.choice(contents + words) for _ in range(rng.randint(1, 8))]
        texts.append("".join(parts))
    texts += ["".join(contents), " ".join(contents), "\n".join(contents), contents[0] * 3, f"  {contents[-1]}  x"]
    check_texts(ours, ref, texts, "added tokens")
    ours.encode_special_tokens = ref.encode_special_tokens = True
    try:
        check_texts(ours, ref, texts[:60], "encode_special_tokens=True")
    finally:
        ours.encode_special_tokens = ref.encode_special_tokens = False


ADVERSARIAL = st.text(
    alphabet=st.sampled_from(
        list(" \t\n\r\x0b\x0c\x85\xa0\u2028\u3000\u200b'sStTdDmlLvVeErR0123456789٣²½Ⅳ.,!?-_/\\\"#@$%^&*()[]{}<>|~`")
        + list("aéèçßſKK日本語中文한국어ابجדהוшщɐʃ😀👍🏽\u0301\u0308\u0327\U0001F600\U00010000Ā")
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=ADVERSARIAL, folder=st.sampled_from(NATIVE_FOLDERS))
def test_hypothesis_strings(text, folder):
    ours, ref = load_pair(folder)
    check_texts(ours, ref, [text], f"{folder} hypothesis")


def test_truncation_and_padding(hf_pair):
    ours, ref = hf_pair
    text = corpus_text(corpus_files()[0], 5000)
    for kwargs in ({"max_length": 32}, {"max_length": 40, "stride": 8}, {"max_length": 30, "direction": "left"},
                   {"max_length": 50, "strategy": "only_second"}):
        ours.enable_truncation(**kwargs)
        ref.enable_truncation(**kwargs)
        ours.enable_padding(length=64, pad_id=0, pad_token="<pad>")
        ref.enable_padding(length=64, pad_id=0, pad_token="<pad>")
        try:
            assert ours.truncation == ref.truncation and ours.padding == ref.padding
            assert_same_encoding(ours.encode(text[:100], text[100:1200]), ref.encode(text[:100], text[100:1200]), str(kwargs))
            for args in ((text[:900],), (text[:600], text[600:640])):
                try:
                    expected = ref.encode(*args)
                except Exception as e:  # the reference refuses: so must we, with its message
                    with pytest.raises(Exception) as info:
                        ours.encode(*args)
                    assert str(info.value) == str(e)
                else:
                    assert_same_encoding(ours.encode(*args), expected, str(kwargs))
        finally:
            for t in (ours, ref):
                t.no_truncation()
                t.no_padding()
    ours.enable_padding(pad_to_multiple_of=8, direction="left")
    ref.enable_padding(pad_to_multiple_of=8, direction="left")
    try:
        docs = [text[:50], text[:300], text[100:110]]
        for a, b in zip(ours.encode_batch(docs), ref.encode_batch(docs)):
            assert_same_encoding(a, b, "batch padding")
    finally:
        ours.no_padding()
        ref.no_padding()


def test_vocabulary_api(hf_pair):
    ours, ref = hf_pair
    assert ours.get_vocab_size() == ref.get_vocab_size()
    assert ours.get_vocab_size(with_added_tokens=False) == ref.get_vocab_size(with_added_tokens=False)
    assert ours.get_vocab() == ref.get_vocab()
    assert ours.get_vocab(with_added_tokens=False) == ref.get_vocab(with_added_tokens=False)
    rng = random.Random(5)
    for i in rng.sample(range(ref.get_vocab_size()), 300) + [ref.get_vocab_size(), 10**9]:
        assert ours.id_to_token(i) == ref.id_to_token(i)
    for tok in rng.sample(sorted(ref.get_vocab()), 300) + ["definitely-not-a-token"]:
        assert ours.token_to_id(tok) == ref.token_to_id(tok)
    for pair in (False, True):
        assert ours.num_special_tokens_to_add(pair) == ref.num_special_tokens_to_add(pair)


def test_save_round_trip(hf_pair, tmp_path):
    tokenizers = require_module("tokenizers")
    ours, ref = hf_pair
    out = tmp_path / "tokenizer.json"
    ours.save(str(out))
    reloaded = tokenizers.Tokenizer.from_file(str(out))
    texts = random_slices(corpus_text(corpus_files()[1]), 30, seed=9)
    for t in texts:
        assert reloaded.encode(t).ids == ref.encode(t).ids
    assert json.loads(ours.to_str()) == json.loads(out.read_text())
    cart = tmp_path / "model.dat"
    ours.save_cartridge(cart)
    from crayon_hf import Tokenizer

    again = Tokenizer.from_file(cart)
    assert again.crayon_backend == "native"
    check_texts(again, ref, texts[:10], "from cartridge")


def test_added_tokens_overlay(tmp_path):
    tokenizers = require_module("tokenizers")
    from crayon_hf import AddedToken, Tokenizer

    path = require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json")
    ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    cartridge_before = Path(ours._cartridge_path).read_bytes()
    for t in (ours, ref):
        assert t.add_tokens(["<new>", "hello", "qqq"]) == 3
        assert t.add_special_tokens(["<|sp|>"]) == 1
    assert ours.add_tokens([AddedToken("<x>", lstrip=True, rstrip=True)]) == ref.add_tokens(
        [tokenizers.AddedToken("<x>", lstrip=True, rstrip=True)]
    )
    texts = ["a <new> b hello qqq<|sp|>", "  <x>  z", "<|sp|><|sp|>hello", "no added tokens here"]
    check_texts(ours, ref, texts, "overlay")
    assert ours.get_vocab() == ref.get_vocab()
    # The mapped file is untouched; saving writes the overlay into a new cartridge and a json.
    assert Path(ours._cartridge_path).read_bytes() == cartridge_before
    ours.save_cartridge(tmp_path / "with_added.dat")
    check_texts(Tokenizer.from_file(tmp_path / "with_added.dat"), ref, texts, "overlay cartridge")
    ours.save(str(tmp_path / "t.json"))
    check_texts(tokenizers.Tokenizer.from_file(str(tmp_path / "t.json")), ref, texts, "overlay json")


TIKTOKEN_RANK_FILES = {
    "r50k_base": "r50k_base",
    "cl100k_base": "cl100k_base",
    "o200k_base": "o200k_base",
    "llama3": "llama3",
}


def converted_tokenizer_json(name: str) -> str:
    """tokenizer.json produced by transformers' TikTokenConverter from a shared rank file."""
    require_module("transformers")
    from transformers.convert_slow_tokenizer import TikTokenConverter

    from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS

    known = KNOWN_ENCODINGS[name]
    path = require_shared(VOCAB / "tiktoken" / f"{known.rank_file}.tiktoken")
    specials = sorted(known.special_tokens, key=known.special_tokens.get)
    converter = TikTokenConverter(vocab_file=str(path), pattern=known.pat_str, extra_special_tokens=specials)
    return converter.converted().to_str()


@pytest.mark.parametrize("name", list(TIKTOKEN_RANK_FILES))
def test_tiktoken_converter_tokenizers(name):
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    text_json = converted_tokenizer_json(name)
    ours, ref = Tokenizer.from_str(text_json), tokenizers.Tokenizer.from_str(text_json)
    assert ours.crayon_backend == "native"
    texts = []
    for k, path in enumerate(corpus_files()):
        texts += documents(corpus_text(path, 12 * 1024))
        texts += random_slices(corpus_text(path), 15, seed=100 + k)
    check_texts(ours, ref, texts, name)


@pytest.mark.parametrize("folder", BPE_FOLDERS)
def test_model_fast_paths_equal_merge_loop(folder):
    """The BPE model's fast paths (whole-token shortcut, word cache, the backtracking encoder
    where the merge list is tiktoken-equivalent, sentence segmentation before U+2581 for character
    vocabularies) against the plain merge-list loop, piece by piece: corpus words, random slices
    as bytes, random bytes, long unbroken runs, and SentencePiece-style sentences."""
    ours, _ = load_pair(folder)
    engine = ours._engine
    rng = random.Random(17)
    pieces: list[bytes] = []
    for path in corpus_files():
        text = corpus_text(path, 64 * 1024)
        pieces += [w.encode("utf-8") for w in text.split()[:400]]
        pieces += [s.encode("utf-8") for s in random_slices(text, 60, seed=23, max_len=40)]
    pieces += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 30))) for _ in range(300)]
    pieces += ["日本語の文章です" * 200, "a" * 3000, " " * 2000, "0123456789" * 100]
    for path in corpus_files():  # sentences as SentencePiece-style models see them
        for s in random_slices(corpus_text(path, 64 * 1024), 30, seed=29, max_len=600):
            pieces.append("\u2581" + s.replace(" ", "\u2581"))
    pieces += ["\u2581\u2581a\u2581\u2581\u2581b\u2581", "\u2581" * 50, "a\u2581" * 100, "<0x41>\u2581x\U0010FFFF\u2581y"]
    pieces = [p if isinstance(p, bytes) else p.encode("utf-8") for p in pieces]
    for p in pieces:
        assert engine.model_encode(p) == engine.model_encode(p, reference=True), f"{folder}: piece {p[:40]!r}"
    # And again, now answered from the per-thread word cache.
    for p in pieces[:500]:
        assert engine.model_encode(p) == engine.model_encode(p, reference=True), f"{folder}: cached piece {p[:40]!r}"


def test_fast_path_is_used_where_the_merge_list_allows():
    """gpt2-style merge lists and lists with every cut of every token in blocks by rank
    (transformers' TikTokenConverter output, as in llama3_1, and the SentencePiece-style
    character vocabularies) run on the backtracking encoder;
    an end-of-word suffix (CLIP) keeps the merge-list loop (tests/test_fast_path_proof.py tries
    the conditions on random vocabularies)."""
    assert load_pair("gpt2")[0]._engine.has_fast_path
    assert load_pair("qwen2_5")[0]._engine.has_fast_path
    # Bytes with no token of their own (never in UTF-8 for GPT-NeoX; some control bytes for
    # Falcon) keep the fast path for every piece that does not contain one.
    assert load_pair("gpt_neox_20b")[0]._engine.has_fast_path
    assert load_pair("falcon")[0]._engine.has_fast_path
    assert load_pair("llama3_1")[0]._engine.has_fast_path
    # SentencePiece-style character vocabularies: a rank table that rebuilds characters first.
    for folder in ("mistral_v0_1", "phi3_mini", "gemma"):
        assert load_pair(folder)[0]._engine.has_fast_path, folder
    assert not load_pair("clip")[0]._engine.has_fast_path
    # Byte tokens at contiguous ids rank by id, so every id is its rank plus a step (no map read in
    # the ids-only loops): 0 where they are ids 0-255, 3 for DeepSeek-V3 (its special tokens come
    # first); bytes without a token of their own (GPT-NeoX) keep the map.
    for folder in ("gpt2", "qwen2_5", "llama3_1", "whisper_large_v3", "phi2"):
        assert load_pair(folder)[0]._engine.fast_rank_step == 0, folder
    assert load_pair("deepseek_v3")[0]._engine.fast_rank_step == 3
    assert load_pair("gpt_neox_20b")[0]._engine.fast_rank_step is None


def test_pickle_is_a_reference_to_the_cartridge():
    import pickle

    ours, ref = load_pair("llama3_1")
    blob = pickle.dumps(ours)
    assert len(blob) < 2000  # the cartridge path and settings, not the vocabulary
    again = pickle.loads(blob)
    check_texts(again, ref, ["Pickled tokenizers map the same cartridge.", "<|begin_of_text|>x"], "unpickled")


def test_bytes_without_a_token():
    """Falcon has no token for some control bytes: tokenizers drops them (there is no unk token)
    and shifts the offsets after them; such pieces leave the fast path for the merge loop."""
    ours, ref = load_pair("falcon")
    texts = ["a\x03b", "\x03\x04\x05", "word\x0bword \x11\x13x", "ok \x1c\x1d\x1e done", "\x03" * 40 + "tail",
             "日本\x17語", "x\x03" * 30]
    check_texts(ours, ref, texts, "falcon control bytes")


def test_native_merge_ids_equal_the_python_loop():
    """conversion/hf_json.py resolves a BPE file's merges natively (hf_merge_ids) and leaves
    anything unusual to its Python loop: the same ids on every shared BPE folder, list-form merges
    and a continuing-subword prefix included; None (the loop decides, and names the error) for a
    missing token, a malformed merge or a key that is not UTF-8."""
    from crayon_hf._native import native
    from crayon_hf.conversion.hf_json import _merge_ids

    seen = 0
    for path in sorted((VOCAB / "hf").glob("*/tokenizer.json")):
        model = json.loads(path.read_text(encoding="utf-8"))["model"]
        if model.get("type") != "BPE":
            continue
        vocab, merges, prefix = model["vocab"], model["merges"], model.get("continuing_subword_prefix") or ""
        assert native.hf_merge_ids(vocab, merges, prefix) == _merge_ids(vocab, merges, prefix), path.parent.name
        as_lists = [m.split(" ") if isinstance(m, str) else m for m in merges[:2000]]
        assert native.hf_merge_ids(vocab, as_lists, prefix) == _merge_ids(vocab, as_lists, prefix)
        seen += 1
    assert seen >= 8
    vocab = {"a": 0, "b": 1, "ab": 2, "##b": 3, "\udc80": 4}
    assert native.hf_merge_ids(vocab, ["a ##b"], "##") is None  # a key that is not UTF-8
    assert native.hf_merge_ids({k: v for k, v in vocab.items() if k != "\udc80"}, ["a ##b"], "##") == [(0, 3, 2)]
    assert _merge_ids(vocab, ["a ##b"], "##") == [(0, 3, 2)]
    small = {"a": 0, "b": 1, "ab": 2}
    for bad in (["a c"], ["a b b"], ["ab"], [["a"]], [3], ["b a"]):
        assert native.hf_merge_ids(small, bad, "") is None
        with pytest.raises(ValueError, match=r"model\.merges\[0\]"):
            _merge_ids(small, bad, "")


def test_byte_level_tokens_to_bytes():
    """_to_bytes (str.translate to Latin-1) is GPT-2's character -> byte map applied per character,
    None where a character is outside the alphabet: on every shared token and every code point."""
    from crayon_hf._hf.decoders import bytes_to_unicode
    from crayon_hf.conversion.hf_json import _to_bytes

    char_to_byte = {c: b for b, c in bytes_to_unicode().items()}

    def by_definition(token: str) -> bytes | None:
        return bytes(char_to_byte[c] for c in token) if all(c in char_to_byte for c in token) else None

    tokens = ["", "\ud800", "a\udc80b"] + [chr(c) for c in range(0x3000)]
    for path in sorted((VOCAB / "hf").glob("*/tokenizer.json")):
        vocab = json.loads(path.read_text(encoding="utf-8"))["model"].get("vocab")
        tokens += list(vocab) if isinstance(vocab, dict) else [t for t, _ in vocab]
    assert [_to_bytes(t) for t in tokens] == [by_definition(t) for t in tokens]
    assert _to_bytes("Ġhello") == b" hello" and _to_bytes(" x") is None


def test_floats_are_read_as_tokenizers_reads_them():
    """Unigram scores decide Viterbi ties to the last bit, and tokenizers' JSON reader is not
    correctly rounded: tokenizers_float must give back exactly the values tokenizers holds (its
    to_str() writes them so that a correctly rounded reading recovers them)."""
    import struct

    tokenizers = require_module("tokenizers")
    from crayon_hf.conversion.hf_json import tokenizers_float

    rng = random.Random(5)
    texts = [repr(struct.unpack("f", struct.pack("f", -rng.random() * 30))[0]) for _ in range(2000)]
    texts += [repr(-rng.random() * 10**rng.randint(-8, 8)) for _ in range(500)]
    texts += ["0", "-0.0", "-1e-5", "-2.5E3", "0.1", "-3.4028234663852886e+38", "-0.000001234567890123456789",
              "-123456789012345678901234.5", "-1.7976931348623157e308", "4.9e-324", "-12.000000000000000000001"]
    vocab = [[f"t{i}", json.loads(t)] for i, t in enumerate(texts)]
    body = ",".join(f'["t{i}", {t}]' for i, t in enumerate(texts))
    source = json.dumps({"model": {"type": "Unigram", "unk_id": 0, "vocab": vocab}}).replace(
        json.dumps(vocab), f"[{body}]")
    held = json.loads(tokenizers.Tokenizer.from_str(source).to_str())["model"]["vocab"]
    assert [tokenizers_float(t) for t in texts] == [score for _, score in held]
    assert any(float(t) != score for t, (_, score) in zip(texts, held)), "the case this exists for"


def test_deepseek_cjk_runs_of_every_kana_like_tokenizers():
    """A run of DeepSeek-V3's cjk class made only of letters and marks is one piece, found without
    the `words` search (deepseek_split.cc, cjk_run); any other character of the class (a
    middle dot, a sound mark that is a symbol, an unassigned one) sends the run to the search.
    Every character of U+3040-U+30FF inside and around runs of ideographs, the ideographs at
    the ends of the class's range, and runs of every length up to 7 ending in the text's last
    bytes or in characters just outside the range (the run loop reads four bytes at a time)."""
    import support

    ours, ref = support.hf_pair("deepseek_v3")
    texts = []
    for cp in range(0x3040, 0x3100):
        c = chr(cp)
        texts += [c, c * 3, "中" + c + "文", c + "漢字" + c, "ひら" + c + "がな", " " + c + "x", "1" + c + "2"]
    texts += ["一龥", "龥\u9fa6一", "\u4dff一", "一\u4dff", "中文" * 50, "かな" * 40 + "・" + "カナ" * 40]
    texts += [run + end for k in range(1, 8) for run in ("龥" * k, "一" * k, "中か" * k)
              for end in ("", "\u9fa6", "\u4dff", "。", "a", "é", "1", "\U0001f600")]
    for text in texts:
        assert_same_encoding(ours.encode(text), ref.encode(text), repr(text))
        assert ours.encode(text).ids == ref.encode(text).ids


def test_deepseek_sequence_streams_like_tokenizers():
    """DeepSeek-V3's three Splits (digits, cjk runs, words) stream as one scanner
    (native/text/deepseek_split.cc, deepseek_piece_end): the cuts between them decide what the
    `words` search may see (whitespace before a digit, a katakana middle dot inside a cjk run, a
    mark after one), and its normalized added tokens cut the text before any of it. Random strings
    of exactly those parts, every field compared, with and without special tokens, one by one and
    batched."""
    import support  # this module's hf_pair is a fixture

    ours, ref = support.hf_pair("deepseek_v3")
    parts = ["a", "Zq", " ", "  ", "   ", "\n", "\r\n", " \n ", "\t", "1", "12", "1234", "٣", "²", "Ⅻ", "中", "文字",
             "ひらがな", "カタカナ", "・", "ー", "゛", "\u3099", "\u0301", "é", ".", ",", "!?", "'s", "(x", "\x01",
             "😀", "€", " 1", " 中", "中1", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>", "<｜fim▁hole｜>",
             # words of other scripts (their characters are decoded once unless a cut is met)
             "жук", " Жук", "क\u093f", "א", "عربي", "\u3000", "\u00a0", "«", "»"]
    rng = random.Random(11)
    texts = ["".join(rng.choice(parts) for _ in range(rng.randint(1, 40))) for _ in range(1500)]
    for special in (True, False):
        for text in texts:
            a, b = ours.encode(text, add_special_tokens=special), ref.encode(text, add_special_tokens=special)
            assert_same_encoding(a, b, f"{text!r} (special tokens {special})")
        batched = ours.encode_batch(texts[:300], add_special_tokens=special)
        for text, a in zip(texts[:300], batched):
            assert_same_encoding(a, ref.encode(text, add_special_tokens=special), f"batch {text!r}")
