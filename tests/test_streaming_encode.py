"""encode_stream / encode_iter on every face: whatever the chunk boundaries (text or UTF-8 bytes
split inside characters), the ids handed out add up to the reference's one-shot encoding
(tiktoken's encode_ordinary, tokenizers' encode(text, add_special_tokens=False) without truncation),
and the stream's state stays bounded on long inputs."""

from __future__ import annotations

import random

import pytest

import crayon_hf.tiktoken as tk
from crayon_hf import Tokenizer
from support import CORPORA, NATIVE_FOLDERS, TIKTOKEN_VOCABS, VOCAB, corpus_text, reference_encoding, require_shared

ADVERSARIAL = [
    "x" * 3000,  # one long pre-token
    " " * 700 + "\n\n\n\t \n" + "  a  b   c \n",  # whitespace runs
    "<|endoftext|> </s> <s> [CLS] <unk> <pad> [SEP] <mask>",  # added tokens of the shared folders
    "e\u0301\u0301\u0301 👩‍👩‍👧 🇯🇵\u200b\ufeff\x00 Ⅻ ½ ",  # combining marks, ZWJ sequences, odd characters
    "don't we'll I'M 123456789 3.14159 (parenthesised) [x]{y} #!/usr/bin/env",
]


def sample_text() -> str:
    parts = [corpus_text(CORPORA / name, 4000) for name in
             ("en_botchan.txt", "zh_hongloumeng.txt", "ja_wagahaiwa_nekodearu.txt", "multi_udhr_scripts.txt",
              "code_python_stdlib.txt")]
    rng = random.Random(3)
    pieces = parts + ADVERSARIAL
    rng.shuffle(pieces)
    return "\n".join(pieces)


def text_chunks(text: str, rng: random.Random, most: int) -> list[str]:
    out, i = [], 0
    while i < len(text):
        n = rng.randint(0, most)
        out.append(text[i: i + n])
        i += n
    return out


def byte_chunks(data: bytes, rng: random.Random) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, 300)
        out.append(data[i: i + n])
        i += n
    return out


def check_stream(tok, text: str, one_shot, seed: int) -> None:
    """`one_shot(text)` is the reference's encoding."""
    expected = one_shot(text)
    rng = random.Random(seed)
    stream = tok.encode_stream()
    for most in (1, 40, 900):
        chunks = text_chunks(text if most > 1 else text[:1500], rng, most)
        want = expected if most > 1 else None
        got = [i for c in chunks for i in stream.feed(c)] + stream.finish()
        if want is None:  # one character at a time, on a prefix: against a one-shot of that prefix
            want = list(one_shot(text[:1500]))
        assert got == want, (most, seed)
    got = [i for c in byte_chunks(text.encode("utf-8"), rng) for i in stream.feed_bytes(c)] + stream.finish()
    assert got == expected
    assert list(tok.encode_iter(text_chunks(text, rng, 500))) == expected


def tk_or_hf_one_shot(tok, text: str) -> list[int]:
    if hasattr(tok, "encode_ordinary"):
        return tok.encode_ordinary(text)
    return tok.encode(text, add_special_tokens=False).ids


# One vocabulary per family runs by default; the rest under -m full.
DEFAULT = {"cl100k_base", "o200k_base", "gpt2", "llama3_1", "qwen2_5", "mistral_v0_1", "gemma", "bert_base_uncased",
           "t5_small", "xlm_roberta_paraphrase_mpnet"}


def by_family(names):
    return [n if n in DEFAULT else pytest.param(n, marks=pytest.mark.full) for n in names]


@pytest.mark.parametrize("name", by_family(TIKTOKEN_VOCABS))
def test_tiktoken_face(name):
    ref = reference_encoding(name)
    ours = tk.get_encoding(name) if name != "llama3" else tk.Encoding(
        name, pat_str=ref._pat_str, mergeable_ranks=ref._mergeable_ranks, special_tokens=ref._special_tokens)
    text = sample_text()
    check_stream(ours, text, ref.encode_ordinary, 1)


@pytest.mark.parametrize("name", by_family(NATIVE_FOLDERS))
def test_tokenizers_face(name):
    tokenizers = pytest.importorskip("tokenizers")
    path = require_shared(VOCAB / "hf" / name / "tokenizer.json")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.no_truncation()
    ref.no_padding()
    text = sample_text()
    check_stream(Tokenizer.from_file(path), text, lambda t: ref.encode(t, add_special_tokens=False).ids, 2)


def test_transformers_face():
    pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from crayon_hf import CrayonTokenizer

    folder = require_shared(VOCAB / "hf" / "xlm_roberta_paraphrase_mpnet")
    tok = CrayonTokenizer.from_pretrained(str(folder))
    ref = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    ref.no_truncation()  # this folder's tokenizer.json truncates at 128: a stream does not
    text = sample_text()
    expected = ref.encode(text, add_special_tokens=False).ids
    assert tok.encode(text, add_special_tokens=False) == expected
    stream = tok.encode_stream()
    rng = random.Random(4)
    assert [i for c in text_chunks(text, rng, 300) for i in stream.feed(c)] + stream.finish() == expected


@pytest.mark.parametrize("name", ["cl100k_base", "gpt2", "t5_small"])
def test_state_is_bounded_by_the_text_not_the_input(name):
    tok = tk.get_encoding(name) if name == "cl100k_base" else \
        Tokenizer.from_file(require_shared(VOCAB / "hf" / name / "tokenizer.json"))
    text = corpus_text(CORPORA / "en_gutenberg_big.txt", 400_000)
    stream = tok.encode_stream()
    longest, count = 0, 0
    for i in range(0, len(text), 1000):
        count += len(stream.feed(text[i: i + 1000]))
        longest = max(longest, len(stream._buf))
    count += len(stream.finish())
    assert count == len(tk_or_hf_one_shot(tok, text))
    assert longest < 6000  # a few lines of margin and one 1000-character feed, not 400 kB


def test_bad_input():
    stream = tk.get_encoding("r50k_base").encode_stream()
    with pytest.raises(TypeError, match="feed_bytes"):
        stream.feed(b"bytes")
    assert stream.feed_bytes("é".encode()[:1]) == []
    assert stream.feed_bytes("é".encode()[1:] + b" ok") == [] and stream.finish() == \
        tk.get_encoding("r50k_base").encode_ordinary("é ok")
    with pytest.raises(UnicodeDecodeError):
        stream.feed_bytes(b"\xff\xfe")


@pytest.mark.parametrize("name", ["cl100k_base", "gpt2", "mistral_v0_1", "t5_small", "bert_base_uncased", "phi2"])
def test_parallel_encoder_blocks_add_up(name):
    """ParallelEncoder (encode-corpus's engine for long documents): small blocks, so that many
    windows are encoded in parallel and stitched; text and byte feeds of random sizes."""
    from crayon_hf.streaming import ParallelEncoder

    if name == "cl100k_base":
        tok, ref = tk.get_encoding(name), reference_encoding(name).encode_ordinary
    else:
        tokenizers = pytest.importorskip("tokenizers")
        path = require_shared(VOCAB / "hf" / name / "tokenizer.json")
        tok, r = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
        r.no_truncation()
        ref = lambda t: r.encode(t, add_special_tokens=False).ids  # noqa: E731
    text = sample_text() * 2
    expected = ref(text)
    rng = random.Random(9)
    for block in (300, 5000):
        enc = ParallelEncoder(tok, threads=2, block_chars=block)
        got = [enc.feed(c) for c in text_chunks(text, rng, 7000)] + [enc.finish()]
        assert [int(i) for part in got for i in part] == expected, block
        assert all(part.dtype.name == "uint32" for part in got)
    enc = ParallelEncoder(tok, threads=2, block_chars=700)
    got = [enc.feed_bytes(c) for c in byte_chunks(text.encode("utf-8"), rng)] + [enc.finish()]
    assert [int(i) for part in got for i in part] == expected
