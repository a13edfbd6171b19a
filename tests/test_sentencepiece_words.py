"""The SentencePiece-style folders (a character BPE behind Metaspace without split) find their
words in the text itself: a space stands for U+2581, runs of ASCII letters are skipped at once,
inert characters cut on both sides, and ids-only calls take each word's ids straight from the fast
path's ranks (a character the vocabulary lacks becomes its bytes' <0xXX> tokens) or from the
thread's ShortPieceCache. Both the ids-only path and the offsets path are held to tokenizers here,
on the text shapes each rule meets, and to each other.

Also here: a piece holding CJK characters anywhere is cut where no token crosses
(TiktokenEngine::encode_multi), not only when one leads it: a Chinese paragraph behind "▁▁" is one
SentencePiece word, and was backtracked whole before."""

from __future__ import annotations

import random

import pytest

from support import SENTENCEPIECE_BPE_FOLDERS, corpus_files, corpus_text, hf_pair, random_slices

TAIL = " and the rest of the sentence goes on for a while"  # keeps the words before it keyable

SHAPES = [
    "plain words with single spaces",
    "  two leading spaces, then    four inside and three at the end   ",
    "▁literal▁replacement ▁ mixed with  spaces▁▁",
    "tabs\tand\nnewlines\r\n  indented\n\n\nlines",
    "UPPER lower MiXeD 12345 3.14159 x=1;y=2 (paren) [bracket] {brace}",
    "emoji 😀😀 and rare 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 letters: the vocabulary lacks them (byte fallback)",
    "　　宝玉道：“好。”黛玉笑道，你又来了。\n　　二人正说着，只见袭人走来",
    "  " + "红楼梦第一回甄士隐梦幻识通灵贾雨村风尘怀闺秀" * 3,
    "▁▁" + "吾輩は猫である。名前はまだ無い。" * 2,
    "mixed中文English日本語한국어 text",
    "a" * 300 + " " + "b" * 17 + " " + "x" * 16,
    "",
    " ",
    "▁",
    "\n",
]


def texts() -> list[str]:
    out = [s + TAIL for s in SHAPES] + SHAPES
    for k, path in enumerate(corpus_files()):
        out += random_slices(corpus_text(path, 32 * 1024), 6, seed=4200 + k, max_len=900)
    rng = random.Random(77)
    alphabet = "  \n\t▁▁ab中文\u3000“”，。<>é😀\u200b" + "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(40))
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 60))) for _ in range(300)]
    return out


@pytest.mark.parametrize("folder", SENTENCEPIECE_BPE_FOLDERS)
def test_words_found_in_the_text_equal_reference(folder):
    ours, ref = hf_pair(folder)
    for _ in range(2):  # the second round answers short words from the ShortPieceCache
        for text in texts():
            want = ref.encode(text, add_special_tokens=False)
            got = ours.encode(text, add_special_tokens=False)
            assert got.ids == want.ids, f"{folder}: {text[:60]!r}"
            assert got.offsets == want.offsets, f"{folder}: {text[:60]!r}"
            ids_only = ours._engine.encode_id_list(text, False)
            assert ids_only == list(ours._raw(text, False, 0).ids), f"{folder}: {text[:60]!r}"


@pytest.mark.parametrize("folder", SENTENCEPIECE_BPE_FOLDERS)
def test_cjk_paragraphs_behind_marks_equal_reference(folder):
    """Whole paragraphs of Chinese and Japanese, each behind "  " (two U+2581 in the model's eyes):
    the pieces are cut although no CJK character leads them."""
    ours, ref = hf_pair(folder)
    for path in corpus_files():
        if not any(tag in path.name for tag in ("zh_", "ja_")):
            continue
        text = corpus_text(path, 24 * 1024)
        for para in [p for p in text.split("\n") if len(p) > 20][:40]:
            for lead in ("  ", "▁▁", " x ", ""):
                sample = lead + para
                assert ours.encode(sample).ids == ref.encode(sample).ids, f"{folder}: {sample[:40]!r}"


@pytest.mark.parametrize("folder", SENTENCEPIECE_BPE_FOLDERS)
def test_truncated_ids_are_the_prefix(folder):
    ours, ref = hf_pair(folder)
    for text in texts()[:40]:
        full = ref.encode(text, add_special_tokens=False).ids
        for k in (1, 2, 7, 64):
            ours.enable_truncation(k)
            try:
                assert ours.encode(text, add_special_tokens=False).ids == full[:k], f"{folder} {k}: {text[:40]!r}"
            finally:
                ours.no_truncation()
