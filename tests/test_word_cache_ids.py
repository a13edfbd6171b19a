"""Ids-only encoding of the word-level models (WordPiece, Unigram, SentencePiece-style BPE) keeps
whole words' ids in the thread's ShortPieceCache (HfEngine's encode_text_pieces), keyed by the
word's bytes and whether a Metaspace replacement is prepended. These tests pin cache hits to the
reference: every text is encoded twice (the second time mostly from the cache), against
tokenizers and against the offsets path, which never reads the cache."""

from __future__ import annotations

import json

import pytest

from support import (SENTENCEPIECE_BPE_FOLDERS, UNIGRAM_FOLDERS, VOCAB, WORDPIECE_FOLDERS, corpus_files,
                     corpus_text, hf_pair, random_slices, require_module, require_shared)

WORD_FOLDERS = WORDPIECE_FOLDERS + UNIGRAM_FOLDERS + SENTENCEPIECE_BPE_FOLDERS


def texts() -> list[str]:
    tail = " and so on, and so forth, until the end"  # keeps the words before it keyable (16 bytes follow)
    out = ["word word word" + tail, "Word word WORD word" + tail, "a a a a" + tail, "x" * 40 + " " + "x" * 40,
           # characters T5 has no token for (Unigram's unk keeps their text), repeated
           "☃ ☃ snow☃ 𝔘𝔫𝔦 𝔘𝔫𝔦 ☃" + tail, "the end"]
    for k, path in enumerate(corpus_files()):
        out += random_slices(corpus_text(path, 32 * 1024), 4, seed=900 + k, max_len=600)
    return out


@pytest.mark.parametrize("folder", WORD_FOLDERS)
def test_cached_word_ids_equal_reference(folder):
    ours, ref = hf_pair(folder)
    for _ in range(2):  # the second round is answered from the cache
        for text in texts():
            want = ref.encode(text)
            got = ours.encode(text)
            assert got.ids == want.ids, f"{folder}: {text[:60]!r}"
            assert got.tokens == want.tokens, f"{folder}: {text[:60]!r}"  # built after the ids
            assert ours._engine.encode_id_list(text, False) == ours._raw(text, False, 0).ids


def test_cached_words_with_and_without_the_prefix_differ():
    """Metaspace with prepend_scheme "first": the first word is encoded with U+2581 in front, the
    same bytes later in the text without it. The cache keys them apart."""
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    data = json.loads(require_shared(VOCAB / "hf" / "t5_small" / "tokenizer.json").read_text(encoding="utf-8"))
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"},
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}]}
    text = json.dumps(data)
    ours, ref = Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    plain, _ = hf_pair("t5_small")
    # A word is keyed only where 16 bytes of text follow its start: the tail keeps these keyable.
    tail = " and so on, and so forth, until the end"
    samples = [s + tail for s in ("stationary stationary", "ing ing ing", "stationary", "Hello hello Hello", "ing")]
    for _ in range(2):
        for t in samples + texts()[:12]:
            assert ours.encode(t).ids == ref.encode(t).ids, t[:60]
            assert plain.encode(t).ids == hf_pair("t5_small")[1].encode(t).ids, t[:60]


def test_engines_sharing_a_thread_keep_their_own_words():
    """Two vocabularies (and the same vocabulary loaded twice) taking turns on one thread: each
    engine's entries carry its own tags."""
    from crayon_hf import Tokenizer

    tokenizers = require_module("tokenizers")
    path = require_shared(VOCAB / "hf" / "t5_small" / "tokenizer.json")
    second = Tokenizer.from_file(path)
    ref_t5 = tokenizers.Tokenizer.from_file(str(path))
    bert, ref_bert = hf_pair("bert_base_uncased")
    xlm, ref_xlm = hf_pair("xlm_roberta_paraphrase_mpnet")
    for text in texts()[:20] * 2:
        for ours, ref in ((bert, ref_bert), (second, ref_t5), (xlm, ref_xlm)):
            assert ours.encode(text).ids == ref.encode(text).ids, text[:60]


def test_batch_ids_use_the_cache_on_every_thread():
    _, ref = hf_pair("t5_small")
    ours, _ = hf_pair("t5_small")
    docs = texts()
    want = [e.ids for e in ref.encode_batch(docs)]
    for _ in range(2):
        assert [e.ids for e in ours.encode_batch(docs)] == want
        arrays = ours.encode_batch_to_numpy(docs, offsets=False)
        assert [arrays.ids[a:b].tolist() for a, b in zip(arrays.doc_offsets[:-1], arrays.doc_offsets[1:])] == want
