"""The per-thread piece caches and the index of short tokens never change a result.

Three caches sit in front of the BPE encoder: ShortPieceCache (native/models/short_piece_cache.h:
every ASCII-led piece of up to 16 bytes and 3 ids, keyed by two masked loads that read past the
piece), PieceCache (native/models/piece_cache.h: pieces of several tokens up to 24 bytes and 7
ids) and LongPieceCache (native/models/long_piece_cache.h: the rest up to 256 bytes, emptied
whenever its arena fills).
Behind the first, each engine's ShortTokenIndex (native/models/short_token_index.h) answers a
piece that is one short token without the trie walk.
These tests encode the same texts with both bypassed, cold and warm, across engines sharing
threads, through the wrap-around of the short cache's engine tags, on the tiktoken face and on a
tokenizer.json face's ids-only path, and compare all of them with tiktoken and tokenizers.
"""

from __future__ import annotations

import random
import threading

import pytest

from crayon_hf import _crayon
from support import (
    TIKTOKEN_VOCABS,
    VOCAB,
    check_native,
    corpus_files,
    corpus_text,
    hf_pair,
    our_encoding,
    random_slices,
    reference_encoding,
    require_module,
    require_shared,
)


@pytest.fixture(params=TIKTOKEN_VOCABS)
def pair(request):
    return reference_encoding(request.param), our_encoding(request.param)


def _texts() -> list[str]:
    texts = []
    for i, path in enumerate(corpus_files()):
        texts += random_slices(corpus_text(path, 32 * 1024), 60, seed=100 + i, max_len=2000)
    rng = random.Random(7)
    # Pieces that fill every cache slot and collide: many distinct multi-token words (the cache
    # is direct mapped, so these evict each other), words of exactly the longest cached length and
    # one byte more, and the same word in several contexts.
    words = ["".join(rng.choice("qxzjkvwy") for _ in range(rng.randint(3, 26))) for _ in range(6000)]
    texts.append(" ".join(words))
    texts.append(" ".join(w[:24] for w in words) + " " + " ".join("x" + w[:24] for w in words))
    texts.append("".join(rng.choice(["ab", "c", " ", "\n", "é", "中文", "🙂", "123", "'s"]) for _ in range(20000)))
    # The short cache's key: pieces of 15, 16 and 17 bytes that differ only in their last byte,
    # pieces followed by different bytes (masked off), NUL bytes inside and after a piece, and
    # pieces in the last 16 bytes of a text (never keyed: the key reads 16 bytes).
    stems = ["".join(rng.choice("etaoinshrdlu") for _ in range(k)) for k in (14, 15, 16) for _ in range(40)]
    texts.append(" ".join(f"{s}{c}" for s in stems for c in "abz"))
    texts.append(" ".join(f"{s[:5]}\x00{s[5:9]}" for s in stems) + " the\x00 the\x00\x00 the")
    texts += [f"x {w}" for w in ("the", "the ", "thex", "a" * 16, "a" * 17)]
    # Under r50k's pattern, pieces led by another script's byte up to 8 bytes are keyed too
    # (TiktokenEngine::wide_key_limit): two- and three-byte letters, marks and punctuation, 1-5 of
    # them around that limit, each seen twice, after letters and alone (marks are pieces of their own).
    wide = " ".join(c * k for c in ("é", "ж", "ि", "！", "ं") for k in (1, 2, 3, 4, 5))
    texts.append(f"{wide} {wide} क{wide}")
    # The LongPieceCache's pieces: words of other scripts (up to 24 bytes but more than 7 ids on
    # an English-centred vocabulary, and longer), pieces of 255-257 bytes around its limit, each
    # repeated so that the second time is a hit.
    scripts = ["абвгдежзийклмнопрстуфхцчшщыэюя", "कखगघचछजझटडणतथदधनपबभमयरलवशसहािीुेो",
               "กขคงจฉชซญดตถทนบปผพฟภมยรลวศสหอัิีุ", "αβγδεζηθικλμνξοπρστυφχψω", "აბგდევზთიკლმნოპ"]
    long_words = ["".join(rng.choice(sc) for _ in range(rng.randint(2, 40))) for sc in scripts for _ in range(60)]
    texts.append(" ".join(long_words + long_words[::-1]) + " " + "".join(long_words[:40]))
    texts += [f" {c * k} {c * k}" for c in ("ж", "!", "7") for k in (127, 128, 129)]
    texts += [f"{'-' * k} {'-' * k}." for k in (254, 255, 256, 257)]
    # Whitespace runs, whose pieces skip the caches where no two adjacent bytes merge
    # (TiktokenEngine::encode_unmerged_space): indentation of every depth around the 24 bytes
    # that path takes, after one and two newlines, \r\n, tabs, \v, \f, a no-break space inside,
    # and runs at the end of the text; each twice, so that the second is met warm.
    runs = [lead + fill * k for lead in ("\n", "\n\n", "\r\n", "", "\t") for fill in (" ", "\t", " \t")
            for k in (1, 2, 3, 7, 8, 11, 12, 22, 23, 24, 25)]
    runs += ["\n \u00a0 ", "\n\x0b\x0c ", " \n \n ", "\n" * 30 + " " * 3]
    texts.append("".join(f"{r}x" for r in runs * 2))
    texts += [f"def f():{r}" for r in runs[:: 7]]
    return texts


def test_cache_bypassed_cold_and_warm_agree_with_tiktoken(pair):
    ref, ours = pair
    engine = ours._engine
    for text in _texts():
        expected = ref.encode_ordinary(text)
        assert engine.encode_ordinary(text, cached=False) == expected
        assert engine.encode_ordinary(text) == expected  # cold, or warmed by earlier texts
        assert engine.encode_ordinary(text) == expected  # warm


def test_engines_sharing_a_thread_never_see_each_others_entries():
    # Two vocabularies alternate on one thread: a cached piece of one must never answer for the
    # other (their ids for the same bytes differ).
    encs = [(reference_encoding(n), our_encoding(n)) for n in ("r50k_base", "cl100k_base", "o200k_base")]
    texts = _texts()[:40]
    for text in texts:
        for ref, ours in encs:
            assert ours.encode_ordinary(text) == ref.encode_ordinary(text)


def test_threads_have_their_own_cache():
    ref, ours = reference_encoding("cl100k_base"), our_encoding("cl100k_base")
    texts = _texts()[:80]
    expected = [ref.encode_ordinary(t) for t in texts]
    failures = []

    def work(offset: int) -> None:
        order = texts[offset:] + texts[:offset]
        want = expected[offset:] + expected[:offset]
        for t, e in zip(order, want):
            if ours.encode_ordinary(t) != e:
                failures.append(t[:40])

    threads = [threading.Thread(target=work, args=(k * 10,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_engine_tags_wrap_around_without_stale_hits():
    # On a fresh thread: cl100k's pieces fill the short cache (and its pairs the backtracking
    # memo) under tag 1; o200k takes the last tag (65535); r50k, new to the thread, starts the
    # wrap-around: the caches are cleared and r50k gets tag 1. Without that clear r50k would read
    # cl100k's ids for the same bytes.
    names = ("cl100k_base", "o200k_base", "r50k_base")
    encs = {n: (reference_encoding(n), our_encoding(n)) for n in names}
    text = " ".join(_texts()[-5:]) + " " + " ".join(corpus_text(p, 8 * 1024) for p in corpus_files())
    failures = []

    def work() -> None:
        for name in ("cl100k_base",):
            failures.append(encs[name][1].encode_ordinary(text) != encs[name][0].encode_ordinary(text))
        _crayon.engine_tags_skip_to_last_tag()
        for name in ("o200k_base", "r50k_base", "cl100k_base", "o200k_base"):
            ref, ours = encs[name]
            failures.append(ours.encode_ordinary(text) != ref.encode_ordinary(text))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert failures == [False] * 5


def _short_slot(piece: bytes, tag: int) -> int:
    """The ShortPieceCache slot of a piece of up to 16 bytes for an engine tag (make_key in
    native/models/short_piece_cache.h), so that a test can aim two pieces at one slot."""
    m = (1 << 64) - 1
    padded = piece + bytes(16)
    a = int.from_bytes(padded[:8], "little")
    b = int.from_bytes(padded[8:16], "little")
    h = ((a ^ ((b * 0xC2B2AE3D27D4EB4F) & m) ^ (tag << 8 | len(piece))) * 0x9E3779B97F4A7C15) & m
    return h >> 48


def test_a_miss_taking_the_slot_of_a_later_hit_in_its_batch():
    # The cached loop reads a batch of pieces' slots before it encodes the batch's misses
    # (encode_cached in native/engines/tiktoken_engine.cc), and an encoded miss stores its ids in
    # its slot: the slot a later piece of the same batch was found in, when the two share one.
    # Two words aimed at one slot: " B" is cached first; then in " A B" A misses and takes the
    # slot, after B was found there. B must still come out as B (a loop that copied the hits'
    # ids after encoding the misses gave A's ids for it). On a new thread the engine's tag is 1.
    ref, ours = reference_encoding("cl100k_base"), our_encoding("cl100k_base")
    rng = random.Random(11)
    words = sorted({"".join(rng.choice("abcdefghiklmnoprstu") for _ in range(rng.randint(3, 9))) for _ in range(3000)})
    by_slot: dict[int, list[str]] = {}
    for w in words:
        by_slot.setdefault(_short_slot(f" {w}".encode(), 1), []).append(w)
    pairs = [(ws[0], ws[1]) for ws in by_slot.values() if len(ws) > 1][:20]
    assert len(pairs) == 20
    tail = " and some more words after it."  # the key reads 16 bytes: pieces before the last 16 are keyed
    failures = []

    def work() -> None:
        for a, b in pairs:
            for text in (f" {b}{tail}", f" {a} {b}{tail}", f" {b} {a}{tail}"):
                if ours.encode_ordinary(text) != ref.encode_ordinary(text):
                    failures.append(text)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert failures == []


@pytest.mark.parametrize("folder", ["gpt2", "llama3_1"])
def test_tokenizer_json_ids_share_the_thread_with_the_tiktoken_face(folder):
    # The tokenizer.json face's byte-level path goes through the same short cache (its own engine
    # tag), for ids alone and with offsets; alternating it with the tiktoken faces on one thread
    # must not mix their entries.
    ours_hf, ref_hf = hf_pair(folder)
    ref_tk, ours_tk = reference_encoding("cl100k_base"), our_encoding("cl100k_base")
    for text in _texts()[::3]:
        expected = ref_hf.encode(text, add_special_tokens=False)
        assert ours_hf.encode(text, add_special_tokens=False).ids == expected.ids
        got = ours_hf.encode(text, add_special_tokens=False)
        assert (got.offsets, got.ids) == (expected.offsets, expected.ids)  # offsets first: the full path
        assert ours_tk.encode_ordinary(text) == ref_tk.encode_ordinary(text)
        assert ours_hf.encode_batch([text, text[::-1]], add_special_tokens=False)[1].ids == (
            ref_hf.encode(text[::-1], add_special_tokens=False).ids
        )


def test_engine_tags_name_one_engine_until_cleared(tmp_path):
    # The tags behind the short cache and the backtracking pair memo (native/core/engine_tags.h),
    # checked directly: a tag names one owner until the caller's clear, across forgotten owners and
    # the wrap-around after 65,535 tags (tests/native/test_engine_tags.cc), under the sanitizers.
    check_native(tmp_path, "test_engine_tags.cc", "the engine tag test")


def test_once_runs_once_and_again_after_a_throw(tmp_path):
    # native/core/once.h (the tables built at first use and asked per piece: SafeCuts, the byte
    # pairs, the short token index): one run under 8 racing threads, callers return after it, a
    # throwing run is run again (tests/native/test_once.cc), under the sanitizers.
    check_native(tmp_path, "test_once.cc", "the first-use test", ("-pthread",))


def test_long_pieces_fill_and_empty_the_long_cache(pair):
    # Far more distinct long pieces than the LongPieceCache's 512 KiB arena holds, each met twice
    # a few pieces apart (a hit, unless a clearing came in between), then all of it again.
    ref, ours = pair
    rng = random.Random(11)
    letters = "абвгдежзийклмнопрстуфхцчшщыэюяαβγδεζηθικλμνξοπρστυφχψωéèêëàâîïôûç"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(13, 60))) for _ in range(12000)]
    text = " ".join(w for i in range(0, len(words), 4) for w in words[i:i + 4] * 2)
    expected = ref.encode_ordinary(text)
    assert ours.encode_ordinary(text) == expected
    assert ours.encode_ordinary(text) == expected


def test_long_piece_cache_native(tmp_path):
    # native/models/long_piece_cache.h checked directly (tests/native/test_long_piece_cache.cc):
    # forced hash collisions, two engine tags with the same bytes, several clearings, the limits, a
    # piece offered twice kept once.
    check_native(tmp_path, "test_long_piece_cache.cc", "the long piece cache test",
                 sources=("native/core/xxhash64.cc",))


def test_short_piece_cache_native(tmp_path):
    # native/models/short_piece_cache.h checked directly (tests/native/test_short_piece_cache.cc):
    # every probe against the ids last put, runs of every length given back whole by find and
    # holds_or_run and missed by holds (whose callers have room for three ids), near-runs and
    # too many ids not kept, two engine tags over the same bytes.
    check_native(tmp_path, "test_short_piece_cache.cc", "the short piece cache test",
                 sources=("native/core/huge_pages.cc",))


@pytest.mark.parametrize("flags", [[], ["-U__SSE2__"]], ids=["as-built", "plain-loop"])
def test_rank_step_native(tmp_path, flags):
    # native/core/rank_step.h (the ids-only loop's ranks made ids, four at a time with SSE2)
    # against the plain loop: every tail length, the edges of the signed compare, an out-of-range
    # rank at every position (tests/native/test_rank_step.cc).
    check_native(tmp_path, "test_rank_step.cc", "the rank step test", tuple(flags))


def test_short_token_index_answers_every_short_token_as_tiktoken(pair):
    # Every ASCII-led token of up to 16 bytes that is UTF-8, in texts where most of them are a
    # piece of their own: each one the index holds comes back from it (cold, after a clear), the
    # ones it leaves out (a full bucket) and the ones BPE cannot reach (Llama 3's: tiktoken's
    # whole-piece shortcut answers them, the index never holds them) from the trie walk.
    ref, ours = pair
    engine = ours._engine
    stats = engine.short_token_index()
    short, ascii_led = [], 0
    for token, rank in engine.mergeable_ranks().items():
        if 1 <= len(token) <= 16 and token[0] < 0x80:
            ascii_led += 1
            try:
                short.append((rank, token.decode("utf-8")))
            except UnicodeDecodeError:
                pass
    # Every ASCII-led short token is held, left out (its bucket full) or unreached (BPE cannot
    # reach it: only Llama 3 has such tokens).
    assert stats is not None and stats["tokens"] + stats["left_out"] + stats["unreached"] == ascii_led
    assert stats["tokens"] > 0.9 * (stats["tokens"] + stats["left_out"])  # buckets at most half full
    assert stats["bytes"] >= 64 * stats["tokens"] // 2
    assert (stats["unreached"] > 0) == (ref.name == "llama3")
    # A piece the index lacks, in a bucket that lacks none of its tokens, is known to be no token,
    # and its BPE skips the whole-piece walk: on every vocabulary, Llama 3's too (its unreached
    # tokens mark their buckets only).
    assert stats["complete"]
    short.sort()
    for sep in ("\n", " ", ""):
        text = sep.join(t for _, t in short)
        expected = ref.encode_ordinary(text)
        _crayon.engine_tags_skip_to_last_tag()  # the next encode starts from cleared caches
        assert engine.encode_ordinary(text) == expected
        assert engine.encode_ordinary(text) == expected
        assert engine.encode_ordinary(text, cached=False) == expected


def test_short_token_index_of_a_small_vocabulary():
    # 256 byte tokens and one merge: the index holds the 128 ASCII bytes and "ab" (pieces that
    # start with a byte >= 0x80 are never looked up there), and encodes as tiktoken does.
    import tiktoken

    import crayon_hf.tiktoken as tk

    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"ab"] = 256
    ours = tk.Encoding("tiny", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    ref = tiktoken.Encoding("tiny", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    assert ours._engine.short_token_index() == {"tokens": 129, "left_out": 0, "unreached": 0, "bytes": 16384,
                                                "complete": True}
    text = "ab abab a b ba \u00e9ab " * 40
    assert ours.encode(text) == ref.encode(text)


def test_short_token_index_waits_for_text_and_changes_no_id():
    """A fresh engine encodes its first 16 KiB without the index (its build costs more than a
    few sentences take), then with it: the same ids as tiktoken before and after."""
    import crayon_hf.tiktoken as tk

    ref = reference_encoding("cl100k_base")
    ours = tk.Encoding("cl100k_fresh", pat_str=ref._pat_str, mergeable_ranks=ref._mergeable_ranks, special_tokens={})
    engine = ours._engine  # a new engine over the cached cartridge: nothing encoded yet
    rng = random.Random(5)
    words = ["the", " of", " and", "Hello", " world", "!", " 2026", "\n", " naïve", " 東京", "  ", "x" * 17, "'s"]
    texts = ["".join(rng.choice(words) for _ in range(rng.randint(1, 30))) for _ in range(40)]
    assert sum(len(t.encode()) for t in texts) < 8 * 1024
    expected = [ref.encode_ordinary(t) for t in texts]
    _crayon.engine_tags_skip_to_last_tag()  # cleared caches: every piece goes to the engine
    assert [engine.encode_ordinary(t) for t in texts] == expected
    assert not engine.short_token_index_in_use()
    big = "Hello world, the naïve cat's 2026 words.\n" * 500  # 21 KB: past the bound
    assert engine.encode_ordinary(big) == ref.encode_ordinary(big)
    assert engine.short_token_index_in_use()
    _crayon.engine_tags_skip_to_last_tag()  # cleared again: now the index answers them
    assert [engine.encode_ordinary(t) for t in texts] == expected


@pytest.mark.parametrize("folder", ["falcon", "roberta_base"])
def test_tokens_no_merge_makes_as_pieces_on_the_tokenizers_face(folder):
    # Tokens of the short index's shape that no merge makes (falcon's ">>TITLE<<", roberta's "<s>"):
    # as special tokens, and as plain text (encode_special_tokens), whole pieces and mixed with
    # others, past the 16 KiB after which the index is used; the ids must be tokenizers'.
    import json

    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    path = require_shared(VOCAB / "hf" / folder / "tokenizer.json")
    added = [t["content"] for t in json.loads(path.read_text(encoding="utf-8"))["added_tokens"]][:20]
    rng = random.Random(7)
    texts = [" ".join(added), "\n".join(added), "".join(added)]
    texts += [" x ".join(rng.sample(added, len(added))) + " plain words" for _ in range(4)]
    texts = [t * 60 for t in texts]
    for special in (False, True):
        ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
        ours.encode_special_tokens = ref.encode_special_tokens = special
        for text in texts:
            assert ours.encode(text).ids == ref.encode(text).ids, (special, text[:80])
