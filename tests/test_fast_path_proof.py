"""The conditions under which a byte-level merge list runs on the backtracking encoder
(build_fast_path in native/engines/hf_engine.cc), tried on small random vocabularies built to be
hard for them: tokens made of a three-letter alphabet (so a text holds the same token many times,
in overlapping places), ranks that disagree with the order tokens were built in (inversions and
unreachable tokens), and merge lists that list every two-token cut of every token as
transformers' TikTokenConverter does, but in a shuffled order inside each token's block, so
tokenizers' tie-break between two cuts of one token is never the leftmost one by accident.

The proof says such lists give tiktoken's answer whatever the order inside a block; the tests
check it against `tokenizers` on random and repetitive texts with the whole text as one piece,
and check that a list breaking a condition (a token's split missing, a block torn in two) is
refused and still encoded exactly by the merge loop.
"""

from __future__ import annotations

import json
import random

import pytest

from support import require_module

ALPHABET = "abc"


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Tokens in rank order: the letters, then concatenations of earlier tokens, with the order
    shuffled locally so some tokens rank below their own parts."""
    made = list(ALPHABET)
    seen = set(made)
    while len(made) < size:
        token = rng.choice(made) + rng.choice(made)
        if len(token) <= 7 and token not in seen:
            seen.add(token)
            made.append(token)
    tail = made[len(ALPHABET):]
    keyed = sorted(range(len(tail)), key=lambda i: i + rng.uniform(-12, 12))
    return list(ALPHABET) + [tail[i] for i in keyed]


def _converter_merges(tokens: list[str], rng: random.Random) -> list[list[str]]:
    """Every cut of every token into two tokens, in blocks by the token's rank (as
    TikTokenConverter lists them), shuffled inside each block."""
    vocab = set(tokens)
    merges = []
    for token in tokens[len(ALPHABET):]:
        block = [[token[:k], token[k:]] for k in range(1, len(token)) if token[:k] in vocab and token[k:] in vocab]
        rng.shuffle(block)
        merges += block
    return merges


def _tokenizer_json(tokens: list[str], merges: list[list[str]], ignore_merges: bool = False) -> str:
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    })


def _texts(rng: random.Random, tokens: list[str]) -> list[str]:
    texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 60))) for _ in range(150)]
    # Repeated tokens, side by side and overlapping: where two cuts of one token meet.
    for _ in range(150):
        texts.append("".join(rng.choice(tokens) for _ in range(rng.randint(2, 10))))
        t = rng.choice(tokens[len(ALPHABET):])
        texts.append(t * rng.randint(2, 6) + t[: rng.randint(0, len(t))])
    return texts


def _check(text_json: str, texts: list[str]) -> bool:
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    ours, ref = Tokenizer.from_str(text_json), tokenizers.Tokenizer.from_str(text_json)
    assert ours.crayon_backend == "native"
    for text in texts:
        assert ours.encode(text).ids == ref.encode(text).ids, text
    return ours._engine.has_fast_path


@pytest.mark.parametrize("ignore_merges", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_converter_lists_take_the_fast_path_in_any_block_order(seed, ignore_merges):
    """Taken whenever the vocabulary has no unreachable token (one that BPE of its own text does
    not give back), and always with ignore_merges, which takes a whole-token piece as tiktoken
    does."""
    tokenizers = require_module("tokenizers")
    rng = random.Random(seed)
    tokens = _vocabulary(rng, rng.choice([40, 120, 300]))
    text_json = _tokenizer_json(tokens, _converter_merges(tokens, rng), ignore_merges)
    plain = tokenizers.Tokenizer.from_str(_tokenizer_json(tokens, _converter_merges(tokens, rng)))
    unreachable = [t for i, t in enumerate(tokens) if plain.encode(t).ids != [i]]
    assert _check(text_json, _texts(rng, tokens)) == (ignore_merges or not unreachable)


@pytest.mark.parametrize("seed", range(6))
def test_a_missing_split_keeps_the_merge_loop(seed):
    """Drop the cut that tiktoken forms some reachable token through: the lists now disagree
    somewhere, the fast path is refused, and the merge loop still matches tokenizers."""
    tokenizers = require_module("tokenizers")
    rng = random.Random(100 + seed)
    tokens = _vocabulary(rng, 120)
    merges = _converter_merges(tokens, rng)
    full = tokenizers.Tokenizer.from_str(_tokenizer_json(tokens, merges))
    several = [t for t in tokens[len(ALPHABET):] if sum(a + b == t for a, b in merges) > 1]
    reachable = [t for t in several if full.encode(t).ids == [tokens.index(t)]]
    token = rng.choice(reachable)
    # The token's split: what BPE holds just before its last merge, i.e. BPE of the token's own
    # text with every merge that makes the token taken away.
    without = [m for m in merges if m[0] + m[1] != token]
    split = [tokens[i] for i in tokenizers.Tokenizer.from_str(_tokenizer_json(tokens, without)).encode(token).ids]
    assert split in merges
    broken = [m for m in merges if m != split]
    assert _check(_tokenizer_json(tokens, merges, ignore_merges=True), [])
    assert not _check(_tokenizer_json(tokens, broken, ignore_merges=True), _texts(rng, tokens) + [token, token * 3])


def test_a_block_torn_in_two_keeps_the_merge_loop():
    rng = random.Random(7)
    tokens = _vocabulary(rng, 120)
    merges = _converter_merges(tokens, rng)
    block = next(t for t in tokens[len(ALPHABET):] if sum(a + b == t for a, b in merges) > 1)
    first = next(i for i, m in enumerate(merges) if m[0] + m[1] == block)
    moved = merges[first]
    torn = merges[:first] + merges[first + 1:]
    torn.append(moved)  # one cut of `block` now sits after every other token's merges
    assert _check(_tokenizer_json(tokens, merges, ignore_merges=True), [])
    assert not _check(_tokenizer_json(tokens, torn, ignore_merges=True), _texts(rng, tokens))
