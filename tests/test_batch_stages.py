"""The CUDA engine's batch stages, run by the host loop on CPU threads, against the CPU engine.

CI has no GPU, so the stages the kernels run (engines/batch_stages.h: pre-tokenized pieces, the
shared per-piece encoder of models/piece_encoder.h, the hand-off of long and undecidable pieces to
the CPU engine, the scan and the gathers) run here through `TiktokenEngine.encode_batch_staged`,
which calls the very same functors in a loop. Its result must equal `encode_batch_to_numpy` (the
CPU engine, itself tested against tiktoken) on every tiktoken vocabulary, every corpus and
adversarial batches; one comparison per vocabulary also goes straight to tiktoken.
benchmarks/gpu_check.sh runs the same comparison with the kernels on a GPU.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from support import (
    TIKTOKEN_VOCABS,
    VOCAB,
    corpus_files,
    corpus_text,
    our_encoding,
    random_slices,
    reference_encoding,
    require_shared,
    short_docs,
)


@pytest.fixture(scope="module", params=TIKTOKEN_VOCABS)
def enc(request):
    return our_encoding(request.param)


def staged(enc, texts, allowed="all", ordinary=True, num_threads=2):
    allowed_mask, deny_mask = enc._batch_masks(texts, set() if ordinary else allowed, set())
    return enc._engine.encode_batch_staged(texts, allowed_mask, deny_mask, num_threads, ordinary)


def assert_same_batches(enc, texts, ordinary=True):
    if ordinary:
        want = enc.encode_ordinary_batch_to_numpy(texts, num_threads=2)
    else:
        want = enc.encode_batch_to_numpy(texts, num_threads=2, allowed_special="all")
    got = staged(enc, texts, ordinary=ordinary)
    assert np.array_equal(got[1], want[1]), "document offsets differ"
    if not np.array_equal(got[0], want[0]):
        bad = next(i for i in range(len(texts)) if not np.array_equal(got[0][got[1][i]:got[1][i + 1]],
                                                                      want[0][want[1][i]:want[1][i + 1]]))
        pytest.fail(f"{enc.name}: document {bad} differs: {texts[bad][:120]!r}")


def documents(text: str, seed: int) -> list[str]:
    """Short documents cut from a corpus at random points (new boundaries for the stages)."""
    rng = random.Random(seed)
    docs, pos = [], 0
    while pos < len(text):
        n = rng.randint(1, 3000)
        docs.append(text[pos:pos + n])
        pos += n
    return docs


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_documents(enc, path):
    assert_same_batches(enc, documents(corpus_text(path), seed=len(path.name)))


def test_short_docs_and_slices(enc):
    texts = short_docs(1000)
    for i, path in enumerate(corpus_files()):
        texts += random_slices(corpus_text(path, 64 * 1024), 100, seed=i)
    assert_same_batches(enc, texts)


def test_against_tiktoken(enc):
    ref = reference_encoding(enc.name)
    texts = short_docs(500)
    ids, offsets = staged(enc, texts)
    assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(texts))] == ref.encode_ordinary_batch(texts)


def adversarial(seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "aé中🙂 \t\n\r'sSx0-_/.<|>\u00a0\u3000" + "".join(chr(c) for c in range(0x20, 0x7F))
    out = ["", " ", "\n\n\n", "a" * 5000, " " * 3000 + "x", "中" * 2000, "🙂" * 700, "ab" * 1500,
           "1234567890" * 300, "'s'S'll" * 400, "\u00e9" * 1100, "x" * 1024, "x" * 1025, " " * 1023 + "a"]
    for _ in range(800):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 300))))
    for _ in range(60):
        out.append("".join(chr(rng.choice([rng.randrange(0x20, 0x7F), rng.randrange(0xA0, 0x3000),
                                           rng.randrange(0x4E00, 0x9FFF), rng.randrange(0x1F300, 0x1FAFF)]))
                           for _ in range(rng.randint(1, 2000))))
    return out


def test_adversarial(enc):
    """Empty documents, pieces around the GPU's length limit (which the CPU takes), long runs."""
    assert_same_batches(enc, adversarial(seed=7))


def test_special_tokens(enc):
    specials = list(enc.special_tokens_set)
    rng = random.Random(3)
    texts = []
    for t in adversarial(seed=11)[:300]:
        cut = rng.randrange(len(t) + 1)
        texts.append(t[:cut] + rng.choice(specials) + t[cut:] + rng.choice(specials))
    assert_same_batches(enc, texts, ordinary=False)
    # Ordinary: the same texts, the specials' text encoded as text.
    assert_same_batches(enc, texts, ordinary=True)


def test_disallowed_special_is_reported(enc):
    special = sorted(enc.special_tokens_set)[0]
    texts = ["fine", f"bad {special}", "also fine"]
    allowed_mask, deny_mask = enc._batch_masks(texts, set(), "all")
    assert enc._engine.encode_batch_staged(texts, allowed_mask, deny_mask, 2, False) == (1, enc._special_index[special])


def test_marks(enc):
    """What the CUDA module uploads: the batch's bytes, and a mark on each byte that starts a piece
    (1), a special token (3) or text no piece covers (2); the marked bytes cut every document into
    the pieces the CPU engine encodes, in order."""
    special = sorted(enc.special_tokens_set)[0]
    texts = ["hello world", "", "a" * 2000, f"{special}x y", "  \n\n中文🙂"]
    allowed_mask, deny_mask = enc._batch_masks(texts, "all", set())
    bufs = []

    def alloc(n):
        bufs[:] = [np.full(n, 0xAA, np.uint8), np.full(n, 0xAA, np.uint8)]
        return bufs[0], bufs[1]

    n_bytes, doc_bytes, specials, _ = enc._engine.mark_batch(texts, allowed_mask, deny_mask, 2, False, alloc)
    text, marks = bufs
    data = b"".join(t.encode() for t in texts)
    assert n_bytes == len(data) and bytes(text) == data
    assert doc_bytes.tolist() == np.cumsum([0] + [len(t.encode()) for t in texts]).tolist()
    assert set(np.unique(marks).tolist()) <= {0, 1, 3}  # these patterns drop no text
    at = data.index(special.encode())
    assert marks[at] == 3 and specials.tolist() == [[at, enc.encode_single_token(special)]]
    assert all(marks[doc_bytes[d]] != 0 for d in range(len(texts)) if doc_bytes[d] < doc_bytes[d + 1])

    # The marked bytes cut the batch into pieces; the CPU engine's ids for them, with the special
    # token's id at its place, are the batch's encoding.
    starts = np.flatnonzero(marks).tolist() + [n_bytes]
    pieces = [(a, b - a) for a, b in zip(starts, starts[1:]) if marks[a] == 1]
    counts, ids = enc._engine.encode_pieces(text, np.array([a for a, _ in pieces], np.uint32),
                                            np.array([n for _, n in pieces], np.uint32))
    ends = np.cumsum(counts).tolist()
    by_start = {a: ids[e - c:e].tolist() for (a, _), c, e in zip(pieces, counts.tolist(), ends)}
    rebuilt = []
    for a in starts[:-1]:
        rebuilt += [enc.encode_single_token(special)] if marks[a] == 3 else by_start[a]
    assert rebuilt == [i for doc in enc.encode_batch(texts, allowed_special="all") for i in doc]


def test_regex_pattern_drops_unmatched_text():
    """A split regex that leaves text unmatched (tiktoken drops it): those bytes are marked 2, and
    the stages give the CPU engine's ids."""
    import crayon_hf.tiktoken as tiktoken

    ranks = tiktoken.load.load_tiktoken_bpe(str(require_shared(VOCAB / "tiktoken" / "cl100k_base.tiktoken")))
    enc = tiktoken.Encoding("letters_only", pat_str=r"[a-z]+|\d", mergeable_ranks=ranks, special_tokens={})
    assert enc._engine.pattern == "regex"
    texts = ["abc, def! 123", "", "...", "x" * 1500 + ";" + "y"]
    assert_same_batches(enc, texts)
    bufs = [np.empty(0, np.uint8)] * 2

    def alloc(n):
        bufs[:] = [np.empty(n, np.uint8), np.empty(n, np.uint8)]
        return bufs[0], bufs[1]

    enc._engine.mark_batch(texts, b"", b"", 1, True, alloc)
    data = "".join(texts).encode()
    dropped = [i for i, c in enumerate(data) if not (97 <= c <= 122 or 48 <= c <= 57)]
    assert np.flatnonzero(bufs[1] == 2).tolist() == dropped


@pytest.mark.full
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_full_corpus_documents(enc, path):
    assert_same_batches(enc, documents(corpus_text(path, None), seed=1))
