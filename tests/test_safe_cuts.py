"""Pieces of CJK (and other three- and four-byte) characters are cut where no token crosses
(native/models/safe_cuts.h) before BPE; the ids must stay tiktoken's and tokenizers'.

The cuts follow from the vocabulary: a boundary between two characters is kept whole when some
token holds both (a word), or ends or starts inside one of them (byte-level tokens such as
"し" + the first two bytes of "な" in Llama 3). So the texts here are built to meet such tokens:
strings of the vocabulary's own multi-character tokens glued together, tokens that cross a
character boundary glued to what completes them, runs of random characters from the scripts the
cuts serve, mixed with ASCII, and the CJK corpora. The fuzz target (fuzz/fuzz_encode_text.cc)
checks the same property on arbitrary bytes under the sanitizers, with a vocabulary whose tokens
cross boundaries on purpose.
"""
from __future__ import annotations

import random

import pytest

from support import corpus_files, corpus_text, our_encoding, reference_encoding

VOCABS = ("cl100k_base", "o200k_base", "llama3")


def _wide_tokens(ref, whole: bool) -> list[bytes]:
    """Tokens with a three- or four-byte character: whole-character strings (whole=True), or
    byte strings that start or end inside a character."""
    out = []
    for t in ref.token_byte_values():
        if not any(b >= 0xE0 for b in t):
            continue
        try:
            t.decode("utf-8")
            if whole and len(t) >= 6:
                out.append(t)
        except UnicodeDecodeError:
            if not whole:
                out.append(t)
    return out


def _assert_same(ref, ours, texts: list[str]) -> None:
    want = ref.encode_ordinary_batch(texts)
    got = ours.encode_ordinary_batch(texts)
    for text, a, b in zip(texts, want, got):
        if a != b:
            i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            pytest.fail(f"{ref.name}: ids differ at token {i} in {text[:80]!r}: tiktoken {a[i:i + 6]} crayon {b[i:i + 6]}")


@pytest.fixture(scope="module", params=VOCABS)
def encodings(request):
    return reference_encoding(request.param), our_encoding(request.param)


def test_glued_words(encodings):
    """The vocabulary's own CJK words, glued in random order: every glue point is a boundary a
    longer token may cross."""
    ref, ours = encodings
    words = [t.decode("utf-8") for t in _wide_tokens(ref, whole=True)]
    assert len(words) > 500
    rng = random.Random(1)
    texts = ["".join(rng.choice(words) for _ in range(rng.randint(2, 12))) for _ in range(3000)]
    _assert_same(ref, ours, texts)


def test_tokens_that_cross_characters(encodings):
    """Tokens that start or end inside a character, completed by the bytes of their neighbours
    into valid text: the boundaries such tokens cross must never be cut."""
    ref, ours = encodings
    partial = _wide_tokens(ref, whole=False)
    assert partial, "a byte-level vocabulary has tokens that split characters"
    rng = random.Random(2)
    texts = []
    while len(texts) < 3000:
        glued = b"".join(rng.choice(partial) for _ in range(rng.randint(2, 6)))
        text = glued.decode("utf-8", errors="ignore")
        if len(text) >= 2:
            texts.append(text)
    _assert_same(ref, ours, texts)


SCRIPTS = [(0x4E00, 0x9FFF), (0x3040, 0x30FF), (0xAC00, 0xD7A3), (0x0E00, 0x0E7F), (0x0900, 0x097F),
           (0x1F300, 0x1F64F), (0x20000, 0x2A6DF), (0x3000, 0x303F), (0xFF00, 0xFFEF)]


def test_random_runs(encodings):
    """Random characters of the scripts whose pieces are cut, some runs with ASCII letters,
    digits, spaces and punctuation mixed in (one piece may hold Han and Latin letters)."""
    ref, ours = encodings
    rng = random.Random(3)
    texts = []
    for _ in range(3000):
        lo, hi = rng.choice(SCRIPTS)
        chars = [chr(rng.randint(lo, hi)) for _ in range(rng.randint(2, 40))]
        if rng.random() < 0.3:
            for _ in range(rng.randint(1, 4)):
                chars.insert(rng.randrange(len(chars) + 1), rng.choice(["a", "Z", "x", " ", "7", ",", "。", "\n"]))
        texts.append("".join(chars))
    _assert_same(ref, ours, texts)


def test_one_and_two_character_tokens(encodings):
    """Every token of one or two characters of U+3000..U+9FFF, inside a run of Han characters:
    the cuts name such a part's token without BPE when merges reach it (SafeCuts::for_each_part),
    and must leave the ones they do not reach (a vocabulary may hold such tokens) to BPE."""
    ref, ours = encodings
    short = []
    for t in ref.token_byte_values():
        try:
            text = t.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if 1 <= len(text) <= 2 and all(0x3000 <= ord(c) < 0xA000 for c in text):
            short.append(text)
    assert len(short) > 500
    rng = random.Random(4)
    han = lambda: "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(rng.randint(1, 3)))
    _assert_same(ref, ours, [han() + word + han() for word in short])


def test_whole_pieces_that_are_tokens(encodings):
    """A CJK token of three characters or more, alone: one piece the cuts cannot cut (the token
    crosses every boundary in it), which must come out as that token by tiktoken's whole-piece
    rule even where BPE of its bytes would not reach it (Llama 3's "しない")."""
    ref, ours = encodings
    words = [t.decode("utf-8") for t in _wide_tokens(ref, whole=True) if len(t) >= 9]
    assert len(words) > 50
    _assert_same(ref, ours, words)


def test_cjk_behind_other_letters(encodings):
    """Pieces in which CJK characters come only after other letters (o200k_base's pattern keeps
    "abc中文" or "한국中文" one piece): they are cut too, wherever the first CJK character sits."""
    ref, ours = encodings
    rng = random.Random(5)
    leads = ["abc", "The", "Zürich", "한국어", "Москва", "ไทย", "x", "ab" * 12]
    texts = []
    for _ in range(1500):
        lo, hi = rng.choice(SCRIPTS[:2] + SCRIPTS[6:7])
        run = "".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 30)))
        tail = rng.choice(["", "def", "한", " next", "。"])
        texts.append(rng.choice(leads) + run + tail)
    _assert_same(ref, ours, texts)


@pytest.mark.parametrize("path", [p for p in corpus_files() if p.name.startswith(("zh_", "ja_", "multi_"))],
                         ids=lambda p: p.name)
def test_cjk_corpora(encodings, path):
    ref, ours = encodings
    _assert_same(ref, ours, [corpus_text(path)])


@pytest.mark.full
@pytest.mark.parametrize("path", [p for p in corpus_files() if p.name.startswith(("zh_", "ja_", "multi_"))],
                         ids=lambda p: p.name)
def test_cjk_corpora_whole(encodings, path):
    ref, ours = encodings
    text = corpus_text(path, None)
    _assert_same(ref, ours, [text[i:i + 65536] for i in range(0, len(text), 65536)])


def test_tokenizer_json_faces_cut_too():
    """The byte-level tokenizer.json folders reach the cuts through their fast engine: Qwen2's
    and DeepSeek-V3's ids on glued CJK words and crossing tokens, against tokenizers."""
    from support import hf_pair

    for folder in ("qwen2_5", "deepseek_v3", "llama3_1"):
        ours, ref = hf_pair(folder)
        vocab = ref.get_vocab()
        # Byte-level strings: the lead bytes of most CJK characters (E4-E9) show as äåæçèé.
        ids = sorted(i for w, i in vocab.items() if len(w) >= 6 and w[0] in "äåæçèé")[:4000]
        decoded = [ref.decode([i]) for i in ids]
        decoded = [d for d in decoded if len(d) >= 2 and "\ufffd" not in d and all(ord(c) >= 0x800 for c in d)]
        assert len(decoded) > 100, folder
        rng = random.Random(4)
        texts = ["".join(rng.choice(decoded) for _ in range(rng.randint(2, 10))) for _ in range(1500)]
        want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
        got = [e.ids for e in ours.encode_batch(texts, add_special_tokens=False)]
        for t, a, b in zip(texts, want, got):
            assert a == b, f"{folder}: {t[:60]!r}"


def test_tokenizer_json_one_and_two_character_tokens():
    """As test_one_and_two_character_tokens, for the byte-level tokenizer.json folders, whose
    merge lists (not ranks) decide which of those tokens BPE reaches."""
    from support import hf_pair

    rng = random.Random(6)
    han = lambda: "".join(chr(rng.randint(0x4E00, 0x9FFF)) for _ in range(rng.randint(1, 3)))
    for folder in ("qwen2_5", "deepseek_v3", "llama3_1"):
        ours, ref = hf_pair(folder)
        ids = sorted(i for w, i in ref.get_vocab().items() if 3 <= len(w) <= 6 and w[0] in "ãäåæçèé")
        words = [ref.decode([i]) for i in ids]
        words = [w for w in words if 1 <= len(w) <= 2 and all(0x3000 <= ord(c) < 0xA000 for c in w)]
        assert len(words) > 1000, folder
        texts = [han() + w + han() for w in words]
        want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
        got = [e.ids for e in ours.encode_batch(texts, add_special_tokens=False)]
        for t, a, b in zip(texts, want, got):
            assert a == b, f"{folder}: {t!r}"
