"""The numpy batch calls (tiktoken face: `encode_ordinary_batch_to_numpy`, `encode_batch_to_numpy`;
tokenizers face: `Tokenizer.encode_batch_to_numpy`) against the list calls and the references, and
the persistent worker pool behind every batch call (native/core/parallel.cc): many Python threads at
once, forked children (what `datasets.Dataset.map(num_proc=N)` does), exceptions inside a batch.
"""

from __future__ import annotations

import itertools
import os
import threading
import warnings

import numpy as np
import pytest

import crayon_hf
import crayon_hf.tiktoken as tk
from crayon_hf._native import native
from support import VOCAB, our_encoding, reference_encoding, require_module, require_shared, short_docs

TIKTOKEN_NAMES = ["cl100k_base", "o200k_base"]
HF_FOLDERS = ["gpt2", "bert_base_uncased", "t5_small"]
EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def docs() -> list[str]:
    return short_docs(2000)


def flat(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The expected arrays of a list of id lists."""
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(x) for x in lists])
    return np.fromiter(itertools.chain.from_iterable(lists), dtype=np.uint32, count=int(offsets[-1])), offsets


def assert_arrays(got: tuple[np.ndarray, np.ndarray], lists: list[list[int]]) -> None:
    ids, offsets = got
    assert ids.dtype == np.uint32 and ids.ndim == 1
    assert offsets.dtype == np.int64 and offsets.shape == (len(lists) + 1,)
    want_ids, want_offsets = flat(lists)
    np.testing.assert_array_equal(offsets, want_offsets)
    np.testing.assert_array_equal(ids, want_ids)


# ---------------------------------------------------------------------------- tiktoken face


@pytest.mark.parametrize("name", TIKTOKEN_NAMES)
@pytest.mark.parametrize("threads", [1, 2, 8])
def test_tiktoken_ordinary_numpy_matches_lists_and_reference(name, threads, docs):
    ours, ref = our_encoding(name), reference_encoding(name)
    expected = ref.encode_ordinary_batch(docs, num_threads=threads)
    assert ours.encode_ordinary_batch(docs, num_threads=threads) == expected
    assert_arrays(ours.encode_ordinary_batch_to_numpy(docs, num_threads=threads), expected)


@pytest.mark.parametrize("name", TIKTOKEN_NAMES)
@pytest.mark.parametrize("threads", [1, 2, 8])
def test_tiktoken_numpy_special_tokens(name, threads, docs):
    ours, ref = our_encoding(name), reference_encoding(name)
    texts = [d if i % 7 else f"{d}{EOT}{d[:20]}" for i, d in enumerate(docs[:500])]
    for kwargs in ({"allowed_special": "all"}, {"disallowed_special": ()}, {"allowed_special": {EOT}},
                   {"allowed_special": "all", "disallowed_special": ()}):
        expected = ref.encode_batch(texts, num_threads=threads, **kwargs)
        assert ours.encode_batch(texts, num_threads=threads, **kwargs) == expected
        assert_arrays(ours.encode_batch_to_numpy(texts, num_threads=threads, **kwargs), expected)
    # No special token in the text: the default (all disallowed) encodes it all.
    assert_arrays(ours.encode_batch_to_numpy(docs, num_threads=threads), ref.encode_batch(docs, num_threads=threads))


@pytest.mark.parametrize("threads", [1, 2, 8])
def test_tiktoken_numpy_disallowed_special_raises_like_encode_batch(threads, docs):
    ours, ref = our_encoding("cl100k_base"), reference_encoding("cl100k_base")
    with_eot = [*docs[:777], f"x {EOT} y", *docs[777:1000]]
    with_word = [*docs[1:777], "Sherlock Holmes", *docs[777:1000]]  # not a special token: checked in Python
    for texts, kwargs in ((with_eot, {}), (with_eot, {"disallowed_special": {EOT}}),
                          (with_word, {"disallowed_special": {"Holmes"}})):
        with pytest.raises(ValueError) as want:
            ref.encode_batch(texts, num_threads=threads, **kwargs)
        with pytest.raises(ValueError) as got_lists:
            ours.encode_batch(texts, num_threads=threads, **kwargs)
        with pytest.raises(ValueError) as got:
            ours.encode_batch_to_numpy(texts, num_threads=threads, **kwargs)
        assert str(got.value) == str(got_lists.value) == str(want.value)


def test_tiktoken_numpy_empty_inputs():
    enc = our_encoding("cl100k_base")
    for call in (enc.encode_ordinary_batch_to_numpy, enc.encode_batch_to_numpy):
        ids, offsets = call([])
        assert ids.dtype == np.uint32 and ids.shape == (0,)
        assert offsets.dtype == np.int64 and offsets.tolist() == [0]
        ids, offsets = call(["", "", ""], num_threads=2)
        assert ids.shape == (0,) and offsets.tolist() == [0, 0, 0, 0]
        assert_arrays(call(["", "hello world", ""], num_threads=2), [[], enc.encode_ordinary("hello world"), []])


def test_tiktoken_numpy_lone_surrogates():
    enc, ref = our_encoding("cl100k_base"), reference_encoding("cl100k_base")
    texts = ["ok", "bad \ud800 surrogate", "pair \ud83d\ude00"]
    assert_arrays(enc.encode_ordinary_batch_to_numpy(texts), ref.encode_ordinary_batch(texts))
    assert_arrays(enc.encode_batch_to_numpy(texts), ref.encode_batch(texts))


def test_tiktoken_numpy_on_the_fallback_twin(docs):
    tiktoken = require_module("tiktoken")
    ranks = reference_encoding("r50k_base")._mergeable_ranks
    pat = r"""(\w)\1|\w+|\s+|[^\w\s]+"""  # a backreference: the engine hands the pattern to tiktoken
    with pytest.warns(UserWarning, match="fallback"):
        enc = tk.Encoding("custom", pat_str=pat, mergeable_ranks=ranks, special_tokens={EOT: 50256})
    ref = tiktoken.Encoding("custom", pat_str=pat, mergeable_ranks=ranks, special_tokens={EOT: 50256})
    texts = [*docs[:200], f"a{EOT}b", ""]
    assert_arrays(enc.encode_ordinary_batch_to_numpy(texts, num_threads=2), ref.encode_ordinary_batch(texts))
    assert_arrays(enc.encode_batch_to_numpy(texts, allowed_special="all"), ref.encode_batch(texts, allowed_special="all"))
    with pytest.raises(ValueError, match="disallowed special token"):
        enc.encode_batch_to_numpy(texts)
    ids, offsets = enc.encode_batch_to_numpy([])
    assert ids.dtype == np.uint32 and offsets.tolist() == [0]


# ---------------------------------------------------------------------------- tokenizers face


def hf_pair(folder: str):
    tokenizers = require_module("tokenizers")
    path = require_shared(VOCAB / "hf" / folder / "tokenizer.json")
    return crayon_hf.Tokenizer.from_file(str(path)), tokenizers.Tokenizer.from_file(str(path))


def assert_hf_arrays(got: crayon_hf.BatchArrays, encodings: list) -> None:
    assert got.ids.dtype == np.uint32 and got.ids.ndim == 1
    assert got.offsets.dtype == np.int64 and got.offsets.shape == (len(got.ids), 2)
    assert got.doc_offsets.dtype == np.int64 and got.doc_offsets.shape == (len(encodings) + 1,)
    want_ids, bounds = flat([e.ids for e in encodings])
    np.testing.assert_array_equal(got.doc_offsets, bounds)
    np.testing.assert_array_equal(got.ids, want_ids)
    want_offsets = [o for e in encodings for o in e.offsets]
    np.testing.assert_array_equal(got.offsets, np.asarray(want_offsets, dtype=np.int64).reshape(-1, 2))


@pytest.mark.parametrize("folder", HF_FOLDERS)
@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_hf_numpy_matches_encode_batch_and_reference(folder, add_special_tokens, docs):
    ours, ref = hf_pair(folder)
    got = ours.encode_batch_to_numpy(docs, add_special_tokens=add_special_tokens)
    assert_hf_arrays(got, ref.encode_batch(docs, add_special_tokens=add_special_tokens))
    assert_hf_arrays(got, ours.encode_batch(docs, add_special_tokens=add_special_tokens))


@pytest.mark.parametrize("folder", HF_FOLDERS)
@pytest.mark.parametrize("settings", ["truncate", "pad", "truncate+pad", "pad-fixed-short", "pad-multiple-left"])
def test_hf_numpy_with_truncation_and_padding(folder, settings, docs):
    ours, ref = hf_pair(folder)
    for tok in (ours, ref):
        if "truncate" in settings:
            tok.enable_truncation(24, stride=4)
        if settings == "pad-fixed-short":
            tok.enable_padding(length=16, pad_id=3)  # shorter than many documents: ragged
        elif settings == "pad-multiple-left":
            tok.enable_padding(direction="left", pad_to_multiple_of=8, pad_id=1)
        elif "pad" in settings:
            tok.enable_padding(pad_id=0)
    texts = docs[:300]
    for add in (True, False):
        got = ours.encode_batch_to_numpy(texts, add_special_tokens=add)
        assert_hf_arrays(got, ref.encode_batch(texts, add_special_tokens=add))


@pytest.mark.parametrize("folder", HF_FOLDERS)
def test_hf_numpy_empty_inputs(folder):
    ours, ref = hf_pair(folder)
    got = ours.encode_batch_to_numpy([])
    assert got.ids.shape == (0,) and got.offsets.shape == (0, 2) and got.doc_offsets.tolist() == [0]
    for texts in (["", "", ""], ["", "Hello there", ""]):
        assert_hf_arrays(ours.encode_batch_to_numpy(texts), ref.encode_batch(texts))


def test_hf_numpy_pairs_and_added_tokens(docs):
    ours, ref = hf_pair("bert_base_uncased")
    pairs = [(a, b) for a, b in zip(docs[:50], docs[50:100])]
    assert_hf_arrays(ours.encode_batch_to_numpy(pairs), ref.encode_batch(pairs))
    texts = [f"[CLS] {d} [SEP] [MASK]" for d in docs[:100]]
    assert_hf_arrays(ours.encode_batch_to_numpy(texts), ref.encode_batch(texts))


def test_hf_numpy_on_the_fallback_path(docs):
    _, ref = hf_pair("gpt2")
    path = VOCAB / "hf" / "gpt2" / "tokenizer.json"
    with pytest.warns(UserWarning, match="runs on the tokenizers library"):
        fallback = crayon_hf.Tokenizer._fallback(path.read_bytes(), "test", "forced for the test")
    assert fallback.crayon_backend.startswith("fallback")
    assert_hf_arrays(fallback.encode_batch_to_numpy(docs[:300]), ref.encode_batch(docs[:300]))
    got = fallback.encode_batch_to_numpy([])
    assert got.ids.shape == (0,) and got.offsets.shape == (0, 2) and got.doc_offsets.tolist() == [0]


def assert_hf_ids(got: crayon_hf.BatchArrays, encodings: list) -> None:
    """The ids and document spans of `encodings`, and no offsets (offsets=False)."""
    assert got.offsets is None
    assert got.ids.dtype == np.uint32 and got.doc_offsets.dtype == np.int64
    want_ids, bounds = flat([e.ids for e in encodings])
    np.testing.assert_array_equal(got.doc_offsets, bounds)
    np.testing.assert_array_equal(got.ids, want_ids)


@pytest.mark.parametrize("folder", HF_FOLDERS)
@pytest.mark.parametrize("settings", ["plain", "plain-1-thread", "truncate", "truncate-left", "pad-fixed-short"])
def test_hf_numpy_without_offsets_keeps_ids_and_spans(folder, settings, docs, monkeypatch):
    """Ids-only batches are written as they are encoded (HfEngine.encode_batch_flat_ids) on one
    thread or several, with a processor's tokens around each document and truncation either way."""
    ours, ref = hf_pair(folder)
    monkeypatch.setenv("CRAYON_NUM_THREADS", "1" if settings == "plain-1-thread" else "2")
    for tok in (ours, ref):
        if settings == "truncate":
            tok.enable_truncation(24, stride=4)
        elif settings == "truncate-left":
            tok.enable_truncation(7, direction="left")
        elif settings == "pad-fixed-short":
            tok.enable_padding(length=16, pad_id=3)
    texts = docs[:300] + ["", " ", "<|endoftext|> inside"]
    for add in (True, False):
        got = ours.encode_batch_to_numpy(texts, add_special_tokens=add, offsets=False)
        assert_hf_ids(got, ref.encode_batch(texts, add_special_tokens=add))
    assert_hf_ids(ours.encode_batch_to_numpy([], offsets=False), [])


def test_hf_numpy_without_offsets_refuses_what_tokenizers_refuses(docs):
    """A stride as long as the room left is tokenizers' error whether or not offsets are asked for;
    documents short enough not to be cut encode."""
    ours, ref = hf_pair("bert_base_uncased")
    for tok in (ours, ref):
        tok.enable_truncation(8, stride=6)  # [CLS] and [SEP] leave room for 6: allowed, refused at encode
    long = [d for d in docs[:50] if len(ref.encode(d, add_special_tokens=False).ids) > 6][:5]
    with pytest.raises(BaseException) as want:  # pyo3's PanicException is a BaseException
        ref.encode_batch(long)
    for offsets in (True, False):
        with pytest.raises(BaseException) as got:
            ours.encode_batch_to_numpy(long, offsets=offsets)
        assert (type(got.value).__name__, str(got.value)) == (type(want.value).__name__, str(want.value))
    assert_hf_ids(ours.encode_batch_to_numpy(["a b", "c"], offsets=False), ref.encode_batch(["a b", "c"]))


def test_hf_numpy_without_offsets_on_pairs_the_fallback_and_transformers(docs):
    ours, ref = hf_pair("bert_base_uncased")
    pairs = [(a, b) for a, b in zip(docs[:50], docs[50:100])]  # the per-document path
    assert_hf_ids(ours.encode_batch_to_numpy(pairs, offsets=False), ref.encode_batch(pairs))
    _, gpt2 = hf_pair("gpt2")
    path = VOCAB / "hf" / "gpt2" / "tokenizer.json"
    with pytest.warns(UserWarning, match="runs on the tokenizers library"):
        fallback = crayon_hf.Tokenizer._fallback(path.read_bytes(), "test", "forced for the test")
    assert_hf_ids(fallback.encode_batch_to_numpy(docs[:100], offsets=False), gpt2.encode_batch(docs[:100]))
    require_module("transformers")
    tok = crayon_hf.CrayonTokenizer.from_pretrained(str(require_shared(VOCAB / "hf" / "gpt2")))
    full = tok.encode_batch_to_numpy(docs[:100])
    ids_only = tok.encode_batch_to_numpy(docs[:100], offsets=False)
    assert ids_only.offsets is None
    np.testing.assert_array_equal(ids_only.ids, full.ids)
    np.testing.assert_array_equal(ids_only.doc_offsets, full.doc_offsets)


# ---------------------------------------------------------------------------- the worker pool


def test_pool_threads_are_kept_between_calls(docs):
    enc = our_encoding("cl100k_base")
    enc.encode_ordinary_batch(docs[:100], num_threads=2)
    workers = native.pool_workers()
    assert workers >= 1 if (os.cpu_count() or 1) >= 2 else workers == 0
    for _ in range(20):
        enc.encode_ordinary_batch_to_numpy(docs[:100], num_threads=2)
    assert native.pool_workers() == workers  # no thread started per call


def test_pool_concurrent_python_threads(docs):
    enc = our_encoding("o200k_base")
    tok, _ = hf_pair("gpt2")
    chunks = [docs[i : i + 250] for i in range(0, len(docs), 250)]
    serial = [(enc.encode_ordinary_batch(c, num_threads=1), tok.encode_batch_to_numpy(c)) for c in chunks]
    failures: list[str] = []

    def worker(k: int) -> None:
        try:
            for round in range(4):
                i = (k + round) % len(chunks)
                want_lists, want_hf = serial[i]
                threads = (1, 2, 8)[(k + round) % 3]
                if enc.encode_ordinary_batch(chunks[i], num_threads=threads) != want_lists:
                    failures.append(f"thread {k}: encode_ordinary_batch of chunk {i}")
                ids, offsets = enc.encode_ordinary_batch_to_numpy(chunks[i], num_threads=threads)
                if not np.array_equal(ids, flat(want_lists)[0]) or not np.array_equal(offsets, flat(want_lists)[1]):
                    failures.append(f"thread {k}: encode_ordinary_batch_to_numpy of chunk {i}")
                got = tok.encode_batch_to_numpy(chunks[i])
                if not all(np.array_equal(a, b) for a, b in zip(got, want_hf)):
                    failures.append(f"thread {k}: Tokenizer.encode_batch_to_numpy of chunk {i}")
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(f"thread {k}: {e!r}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a batch call hung"
    assert failures == []


def test_pool_exceptions_propagate_and_pool_stays_usable(docs):
    enc = our_encoding("cl100k_base")
    want = flat(enc.encode_ordinary_batch(docs[:500], num_threads=1))
    bad = [*docs[:500], EOT, *docs[:500]]
    for threads in (1, 2, 8):
        with pytest.raises(ValueError, match="disallowed special token"):
            enc.encode_batch_to_numpy(bad, num_threads=threads)
        got = enc.encode_ordinary_batch_to_numpy(docs[:500], num_threads=threads)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
    # An exception thrown inside the engine on a worker thread (a byte with no token).
    holes = tk.Encoding("holes", pat_str=r"\w+|\W", mergeable_ranks={b"a": 0, b"b": 1}, special_tokens={})
    for threads in (2, 8):
        with pytest.raises(ValueError, match="has no token"):
            holes.encode_ordinary_batch_to_numpy(["ab"] * 300 + ["c"] + ["ba"] * 300, num_threads=threads)
        with pytest.raises(ValueError, match="has no token"):
            holes.encode_ordinary_batch(["ab"] * 300 + ["c"] + ["ba"] * 300, num_threads=threads)
        ids, offsets = holes.encode_ordinary_batch_to_numpy(["ab"] * 300, num_threads=threads)
        assert ids.tolist() == [0, 1] * 300 and offsets[-1] == 600
        got = enc.encode_ordinary_batch_to_numpy(docs[:500], num_threads=threads)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))


def _fork_and_check(check) -> None:
    """Runs check() in a forked child (exit status 0 when it returns) and waits for it, at most 60 s."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a multi-threaded process (3.12+)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import signal

            signal.alarm(60)  # a deadlocked child dies instead of hanging the suite
            check()
            code = 0
        except BaseException as e:  # noqa: BLE001 - the child must never return into pytest
            os.write(2, f"fork child failed: {e!r}\n".encode())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status:#x}"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_pool_in_forked_child(docs):
    enc = our_encoding("cl100k_base")
    tok, _ = hf_pair("gpt2")
    want = flat(enc.encode_ordinary_batch(docs, num_threads=2))  # the parent's pool is running
    want_hf = tok.encode_batch_to_numpy(docs)

    def check() -> None:
        assert native.pool_workers() == 0  # the parent's workers do not exist in the child
        for _ in range(3):
            got = enc.encode_ordinary_batch_to_numpy(docs, num_threads=2)
            assert all(np.array_equal(a, b) for a, b in zip(got, want))
            assert all(np.array_equal(a, b) for a, b in zip(tok.encode_batch_to_numpy(docs), want_hf))
        _fork_and_check(lambda: enc.encode_ordinary_batch_to_numpy(docs, num_threads=2))  # a grandchild

    _fork_and_check(check)
    # Forked while another Python thread is inside a batch call (the pool's mutex may be held).
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            enc.encode_ordinary_batch_to_numpy(docs, num_threads=2)

    thread = threading.Thread(target=busy)
    thread.start()
    try:
        for _ in range(5):
            _fork_and_check(lambda: np.testing.assert_array_equal(
                enc.encode_ordinary_batch_to_numpy(docs, num_threads=2)[0], want[0]))
    finally:
        stop.set()
        thread.join()
    got = enc.encode_ordinary_batch_to_numpy(docs, num_threads=2)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def _encode_rows(batch: dict) -> dict:
    ids, offsets = our_encoding("cl100k_base").encode_ordinary_batch_to_numpy(batch["text"], num_threads=2)
    return {"n_tokens": np.diff(offsets).tolist()}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_pool_under_datasets_map_num_proc(docs):
    datasets = pytest.importorskip("datasets")
    enc = our_encoding("cl100k_base")
    enc.encode_ordinary_batch(docs, num_threads=2)  # the parent's pool is running before the fork
    ds = datasets.Dataset.from_dict({"text": docs[:400]})
    out = ds.map(_encode_rows, batched=True, batch_size=50, num_proc=2, keep_in_memory=True)
    assert out["n_tokens"] == [len(x) for x in enc.encode_ordinary_batch(docs[:400], num_threads=1)]
