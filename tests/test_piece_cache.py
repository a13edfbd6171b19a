"""The per-thread PieceCache (native/models/piece_cache.h) never changes a result.

Pieces of several tokens are remembered per thread and engine; these tests encode the same texts
with the cache bypassed, cold and warm, across engines sharing threads, and compare all of them
with the real tiktoken.
"""

from __future__ import annotations

import random
import threading

import pytest

from support import TIKTOKEN_VOCABS, corpus_files, corpus_text, our_encoding, random_slices, reference_encoding


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
