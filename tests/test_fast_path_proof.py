"""The conditions under which a merge list runs on the backtracking encoder (build_fast_path in
native/engines/hf_engine.cc), tried on small random vocabularies built to be hard for them:
tokens made of a three-letter alphabet (so a text holds the same token many times, in
overlapping places), ranks that disagree with the order tokens were built in (inversions and
unreachable tokens), and merge lists that list every two-token cut of every token as
transformers' TikTokenConverter does, but in a shuffled order inside each token's block, so
tokenizers' tie-break between two cuts of one token is never the leftmost one by accident.

Two kinds of vocabulary: byte-level (ByteLevel pre-tokenizer, GPT-2 style) and character-level
(SentencePiece style, Mistral/Gemma: multi-byte characters, U+2581, and texts with characters the
vocabulary lacks), the latter with byte fallback and an unk token ("chars") or with neither
("chars_drop": tokenizers drops such a character and shifts every later offset of the word).

The proof says such lists give tiktoken's answer whatever the order inside a block; the tests
check it against `tokenizers` with the whole text as one piece, and check that a list breaking
a condition (a token's split missing, a block torn in two) is refused and still encoded exactly
by the merge loop.
"""

from __future__ import annotations

import json
import random

import pytest

from support import require_module

ALPHABETS = {"bytes": "abc", "chars": "a\u00e9\u65e5\u2581", "chars_drop": "a\u00e9\u65e5\u2581"}
STRANGERS = "z\u0436\U0001F600"  # characters a character vocabulary lacks: byte fallback
KINDS = list(ALPHABETS)


def _vocabulary(rng: random.Random, size: int, kind: str) -> list[str]:
    """Tokens in rank order: the letters, then concatenations of earlier tokens, with the order
    shuffled locally so some tokens rank below their own parts."""
    alphabet = ALPHABETS[kind]
    made = list(alphabet)
    seen = set(made)
    while len(made) < size:
        token = rng.choice(made) + rng.choice(made)
        if len(token) <= 7 and token not in seen:
            seen.add(token)
            made.append(token)
    tail = made[len(alphabet):]
    keyed = sorted(range(len(tail)), key=lambda i: i + rng.uniform(-12, 12))
    return list(alphabet) + [tail[i] for i in keyed]


def _converter_merges(tokens: list[str], rng: random.Random, kind: str) -> list[list[str]]:
    """Every cut of every token into two tokens, in blocks by the token's rank (as
    TikTokenConverter lists them), shuffled inside each block."""
    vocab = set(tokens)
    merges = []
    for token in tokens[len(ALPHABETS[kind]):]:
        block = [[token[:k], token[k:]] for k in range(1, len(token)) if token[:k] in vocab and token[k:] in vocab]
        rng.shuffle(block)
        merges += block
    return merges


def _tokenizer_json(tokens: list[str], merges: list[list[str]], kind: str, ignore_merges: bool = False) -> str:
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
             "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges}
    if kind == "bytes":
        level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
        pre_tokenizer, decoder = level, level
    else:
        if kind == "chars":
            extra = ["<unk>"] + [f"<0x{b:02X}>" for b in range(256)]
            model["vocab"].update({t: len(tokens) + i for i, t in enumerate(extra)})
            model.update(unk_token="<unk>", fuse_unk=True, byte_fallback=True)
        pre_tokenizer, decoder = None, {"type": "ByteFallback"}
    return json.dumps({"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                       "normalizer": None, "pre_tokenizer": pre_tokenizer, "post_processor": None,
                       "decoder": decoder, "model": model})


def _texts(rng: random.Random, tokens: list[str], kind: str) -> list[str]:
    letters = ALPHABETS[kind] + (STRANGERS if kind != "bytes" else "")
    texts = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 60))) for _ in range(150)]
    # Repeated tokens, side by side and overlapping: where two cuts of one token meet.
    for _ in range(150):
        texts.append("".join(rng.choice(tokens) for _ in range(rng.randint(2, 10))))
        t = rng.choice(tokens[len(ALPHABETS[kind]):])
        texts.append(t * rng.randint(2, 6) + t[: rng.randint(0, len(t))])
    if kind != "bytes":
        texts += [t + rng.choice(STRANGERS) + t for t in rng.sample(tokens, 30)]
    return texts


def _check(text_json: str, texts: list[str]) -> bool:
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    ours, ref = Tokenizer.from_str(text_json), tokenizers.Tokenizer.from_str(text_json)
    assert ours.crayon_backend == "native"
    for text in texts:
        a, b = ours.encode(text), ref.encode(text)
        assert (a.ids, a.offsets) == (b.ids, b.offsets), text
    return ours._engine.has_fast_path


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ignore_merges", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_converter_lists_take_the_fast_path_in_any_block_order(seed, ignore_merges, kind):
    """Taken whatever the unreachable tokens (one that BPE of its own text does not give back:
    left out of the table, or kept with ignore_merges, which takes a whole-token piece as
    tiktoken does)."""
    rng = random.Random(seed)
    tokens = _vocabulary(rng, rng.choice([40, 120, 300]), kind)
    text_json = _tokenizer_json(tokens, _converter_merges(tokens, rng, kind), kind, ignore_merges)
    assert _check(text_json, _texts(rng, tokens, kind))


def test_the_random_vocabularies_have_unreachable_tokens():
    """So the test above meets them (on both kinds)."""
    tokenizers = require_module("tokenizers")
    for kind in KINDS:
        rng = random.Random(5)
        tokens = _vocabulary(rng, 300, kind)
        plain = tokenizers.Tokenizer.from_str(_tokenizer_json(tokens, _converter_merges(tokens, rng, kind), kind))
        assert any(plain.encode(t).ids != [i] for i, t in enumerate(tokens)), kind


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
def test_a_missing_split_keeps_the_merge_loop(seed, kind):
    """Drop the cut that tiktoken forms some reachable token through: the lists now disagree
    somewhere, the fast path is refused, and the merge loop still matches tokenizers."""
    tokenizers = require_module("tokenizers")
    rng = random.Random(100 + seed)
    tokens = _vocabulary(rng, 120, kind)
    merges = _converter_merges(tokens, rng, kind)
    full = tokenizers.Tokenizer.from_str(_tokenizer_json(tokens, merges, kind))
    several = [t for t in tokens[len(ALPHABETS[kind]):] if sum(a + b == t for a, b in merges) > 1]
    reachable = [t for t in several if full.encode(t).ids == [tokens.index(t)]]
    token = rng.choice(reachable)
    # The token's split: what BPE holds just before its last merge, i.e. BPE of the token's own
    # text with every merge that makes the token taken away.
    without = [m for m in merges if m[0] + m[1] != token]
    split = [tokens[i] for i in tokenizers.Tokenizer.from_str(_tokenizer_json(tokens, without, kind)).encode(token).ids]
    assert split in merges
    broken = [m for m in merges if m != split]
    assert _check(_tokenizer_json(tokens, merges, kind, ignore_merges=True), [])
    assert not _check(_tokenizer_json(tokens, broken, kind, ignore_merges=True),
                      _texts(rng, tokens, kind) + [token, token * 3])


@pytest.mark.parametrize("kind", KINDS)
def test_a_block_torn_in_two_keeps_the_merge_loop(kind):
    rng = random.Random(7)
    tokens = _vocabulary(rng, 120, kind)
    merges = _converter_merges(tokens, rng, kind)
    block = next(t for t in tokens[len(ALPHABETS[kind]):] if sum(a + b == t for a, b in merges) > 1)
    first = next(i for i, m in enumerate(merges) if m[0] + m[1] == block)
    moved = merges[first]
    torn = merges[:first] + merges[first + 1:]
    torn.append(moved)  # one cut of `block` now sits after every other token's merges
    assert _check(_tokenizer_json(tokens, merges, kind, ignore_merges=True), [])
    assert not _check(_tokenizer_json(tokens, torn, kind, ignore_merges=True), _texts(rng, tokens, kind))


@pytest.mark.parametrize("seed", range(2))
def test_byte_tokens_in_any_id_order_rank_by_id(seed):
    """Where the 256 byte tokens are contiguous ids, in whatever order, the backtracking encoder
    ranks each byte by its token's id, so every id is its rank plus a step and the ids-only loops
    read no map (native/engines/hf_engine.cc, build_fast_path): GPT-2's vocabulary with its byte
    tokens' ids shuffled (and, for seed 1, every id moved up by 5 behind five added tokens)
    encodes as tokenizers does, ids and offsets."""
    import support

    data = json.loads(support.require_shared(support.VOCAB / "hf" / "gpt2" / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    byte_tokens = sorted((t for t, i in vocab.items() if i < 256), key=vocab.__getitem__)
    assert len(byte_tokens) == 256
    shuffled = list(range(256))
    random.Random(seed).shuffle(shuffled)
    for token, new_id in zip(byte_tokens, shuffled):
        vocab[token] = new_id
    shift = 5 * seed
    if shift:
        for token in vocab:
            vocab[token] += shift
        specials = [f"<|special_{k}|>" for k in range(shift)]
        for k, content in enumerate(specials):
            vocab[content] = k
        data["added_tokens"] = [{"id": k, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                                 "normalized": False, "special": True} for k, c in enumerate(specials)]
    rng = random.Random(10 + seed)
    texts = support.random_slices(support.corpus_text(support.corpus_files()[0], 64 * 1024), 40, seed=seed, max_len=400)
    texts += ["".join(chr(rng.choice([rng.randint(0, 0x7F), rng.randint(0x80, 0x7FF), rng.randint(0x4E00, 0x9FFF),
                                      rng.randint(0x1F300, 0x1F64F)])) for _ in range(rng.randint(1, 80)))
              for _ in range(200)]
    assert _check(json.dumps(data), texts)
    from crayon_hf import Tokenizer

    assert Tokenizer.from_str(json.dumps(data))._engine.fast_rank_step == shift
