"""One tokenizer object of each face shared by many Python threads: every result equals serial use.

tests/test_batch_numpy.py already covers concurrent callers of the batch thread pool; here each
thread mixes single encodes, decodes, batch encodes and streaming on a shared object. The native
calls release the GIL, so on a GIL build they still run in parallel; on a free-threaded build
(python3.13t, `sys._is_gil_enabled() is False`) the Python layers run in parallel too, and this
test is the one to run there. Configuration (enable_truncation / no_truncation, padding) is an
immutable parameter object that a call reads once, and that a setter replaces whole: a call running
while another thread reconfigures sees the old or the new setting, never a mix
(test_truncation_toggled_while_encoding). tokenizers itself raises "Already borrowed" there.
"""

from __future__ import annotations

import random
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pytest

from support import VOCAB, corpus_files, corpus_text, our_encoding, random_slices, require_shared

THREADS = 12
ROUNDS = 6


def _texts(seed: int, count: int = 40) -> list[str]:
    rng = random.Random(seed)
    real = random_slices(corpus_text(corpus_files()[seed % len(corpus_files())], 100_000), count, seed, 400)
    noise = ["".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000), 0x1F642]))
                     for _ in range(rng.randrange(1, 200))) for _ in range(count // 2)]
    return real + noise


def _stress(work: Callable[[list[str]], Any], rounds: int = ROUNDS) -> None:
    """Runs work(texts) serially, then from THREADS threads at once (each on its own texts, started
    together by a barrier), and compares."""
    inputs = [_texts(seed) for seed in range(THREADS)]
    expected = [work(t) for t in inputs]
    barrier = threading.Barrier(THREADS)

    def run(i: int) -> list[Any]:
        barrier.wait()
        return [work(inputs[i]) for _ in range(rounds)]

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(run, range(THREADS)))
    for i, got in enumerate(results):
        for r in got:
            assert r == expected[i], f"thread {i} differs from serial use"


def test_tiktoken_face_shared_by_threads() -> None:
    from crayon_hf.streaming import EncodeStream

    enc = our_encoding("cl100k_base")

    def work(texts: list[str]) -> Any:
        singles = [enc.encode(t, allowed_special="all") for t in texts]
        decoded = [enc.decode(ids) for ids in singles]
        batch = enc.encode_ordinary_batch(texts, num_threads=2)
        stream = EncodeStream(enc)
        streamed = [i for t in texts for i in stream.feed(t)] + stream.finish()
        return singles, decoded, batch, streamed

    _stress(work)


@pytest.mark.parametrize("folder", ["gpt2", "t5_small"])
def test_tokenizer_face_shared_by_threads(folder: str) -> None:
    import crayon_hf

    tok = crayon_hf.Tokenizer.from_file(require_shared(VOCAB / "hf" / folder / "tokenizer.json"))
    tok.enable_truncation(64)  # configured before the threads start, as documented

    def work(texts: list[str]) -> Any:
        singles = [(e.ids, e.offsets) for e in map(tok.encode, texts)]
        batch = [e.ids for e in tok.encode_batch(texts)]
        pairs = [e.ids for e in tok.encode_batch(list(zip(texts, reversed(texts))))]
        decoded = tok.decode_batch(batch)
        return singles, batch, pairs, decoded

    _stress(work, rounds=3)


def test_crayon_tokenizer_shared_by_threads() -> None:
    from crayon_hf.transformers import CrayonTokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = CrayonTokenizer.from_pretrained(require_shared(VOCAB / "hf" / "gpt2"))

    def work(texts: list[str]) -> Any:
        out = tok(texts, truncation=True, max_length=32)["input_ids"]
        return out, tok.batch_decode(out)

    _stress(work, rounds=3)



def test_truncation_toggled_while_encoding() -> None:
    """Encoders race a thread that toggles truncation: every encoding equals the serial result
    under one of the two settings, and the pair (ids, offsets) is never a mix of both."""
    import crayon_hf

    tok = crayon_hf.Tokenizer.from_file(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json"))
    texts = _texts(3, 30)
    full = [(e.ids, e.offsets) for e in map(tok.encode, texts)]
    tok.enable_truncation(8)
    cut = [(e.ids, e.offsets) for e in map(tok.encode, texts)]
    tok.no_truncation()
    stop = threading.Event()

    def toggle() -> None:
        while not stop.is_set():
            tok.enable_truncation(8)
            tok.no_truncation()

    def encode(_: int) -> list[tuple[list[int], list[tuple[int, int]]]]:
        return [(e.ids, e.offsets) for _ in range(20) for e in map(tok.encode, texts)]

    toggler = threading.Thread(target=toggle)
    toggler.start()
    try:
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(encode, range(8)))
    finally:
        stop.set()
        toggler.join()
    for got in results:
        for k, r in enumerate(got):
            assert r in (full[k % len(texts)], cut[k % len(texts)])



def test_encode_reentered_from_a_gc_callback() -> None:
    # encode_ordinary and encode build their lists from the thread's id vector (bindings.cc,
    # CallIds), and a call made while that vector is in use on the same thread gets its own: the
    # garbage collector may run inside a native call (before the encode, or on CPython 3.11 where
    # the result list's memory does not come from the free list, while it is being built), and a
    # gc callback or a finalizer may encode. Collections are forced at nearly every allocation,
    # with the list free list drained, and each callback that lands inside an outer call encodes
    # other text: every result, inner and outer, must equal a plain call's.
    import gc

    enc = our_encoding("cl100k_base")
    texts = _texts(3, 30)
    other = "inner call"
    expected = [enc.encode_ordinary(t) for t in texts]
    expected_special = [enc.encode(t, disallowed_special=()) for t in texts]
    expected_other = enc.encode_ordinary(other)
    calling = [False]
    inner: list[bool] = []

    class Tracked:
        pass

    def callback(phase: str, info: dict) -> None:
        if phase == "start" and calling[0]:
            inner.append(enc.encode_ordinary(other) == expected_other)

    hold: list = []
    got, got_special = [], []
    thresholds = gc.get_threshold()
    gc.callbacks.append(callback)
    gc.set_threshold(1, 1, 1)
    try:
        for k in range(3):
            for t in texts:
                hold.append([[] for _ in range(100)])  # keeps the list free list empty
                hold.extend(Tracked() for _ in range(k))  # shifts where the collections fall
                calling[0] = True
                got.append(enc.encode_ordinary(t))
                got_special.append(enc.encode(t, disallowed_special=()))
                calling[0] = False
    finally:
        calling[0] = False
        gc.set_threshold(*thresholds)
        gc.callbacks.remove(callback)
    assert inner, "no collection ran inside an encode call: the case is not exercised"
    assert all(inner), "a call made from the collector went wrong"
    assert got == expected * 3
    assert got_special == expected_special * 3
