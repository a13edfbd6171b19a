"""crayon_hf.DecodeStream against tokenizers.decoders.DecodeStream, step by step: the same chunk (or
None) after every id, on real vocabularies and text, random ids (incomplete UTF-8 everywhere),
special tokens, lists of ids per step, and streams primed with `ids=`; with every face."""

from __future__ import annotations

import random

import pytest

from crayon_hf import DecodeStream, Tokenizer
from support import CORPORA, VOCAB, corpus_text, require_shared

tokenizers = pytest.importorskip("tokenizers")
from tokenizers.decoders import DecodeStream as RefStream  # noqa: E402

# Byte-level BPE, byte-fallback SentencePiece BPE, WordPiece, Unigram with Metaspace.
FOLDERS = ["gpt2", "llama3_1", "mistral_v0_1", "gemma", "bert_base_uncased", "t5_small"]


def text_sample() -> str:
    parts = [corpus_text(CORPORA / name, 1500) for name in
             ("en_botchan.txt", "zh_hongloumeng.txt", "multi_udhr_scripts.txt", "code_python_stdlib.txt")]
    return "\n".join(parts) + " emoji 👩‍👩‍👧 🇯🇵 and combining e\u0301 "


def steps(stream, tok, groups) -> list:
    """What the stream returns after each group of ids (an exception's type counts as an output)."""
    out = []
    for g in groups:
        try:
            out.append(stream.step(tok, g))
        except Exception as e:  # noqa: BLE001 - the reference's error is part of what must match
            out.append(type(e).__name__)
            break
    return out


def id_streams(ref, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    n = ref.get_vocab_size()
    special = sorted(ref.get_added_tokens_decoder())
    real = ref.encode(text_sample()).ids
    noisy = [rng.randrange(n) for _ in range(300)]
    mixed = real[:200] + [rng.choice(special or [0])] + real[200:400] + noisy[:50] + real[400:500]
    return [real, noisy, mixed]


def groupings(ids: list[int], rng: random.Random) -> list:
    """Ids one at a time, then in random lists of 1-4."""
    groups, i = [], 0
    while i < len(ids):
        k = rng.randint(1, 4)
        groups.append(ids[i: i + k] if k > 1 else ids[i])
        i += k
    return groups


@pytest.mark.parametrize("name", FOLDERS)
@pytest.mark.parametrize("skip", [False, True])
def test_same_chunks_as_tokenizers(name, skip):
    path = require_shared(VOCAB / "hf" / name / "tokenizer.json")
    ref = tokenizers.Tokenizer.from_file(str(path))
    ours = Tokenizer.from_file(path)
    rng = random.Random(7)
    for k, ids in enumerate(id_streams(ref, 11)):
        for groups in (ids, groupings(ids, rng)):
            expected = steps(RefStream(skip_special_tokens=skip), ref, groups)
            assert steps(DecodeStream(skip_special_tokens=skip), ours, groups) == expected, (name, k)
        prompt = ids[:17]
        expected = steps(RefStream(ids=prompt, skip_special_tokens=skip), ref, ids[17:120])
        assert steps(DecodeStream(prompt, skip_special_tokens=skip), ours, ids[17:120]) == expected, (name, k)


def test_transformers_face():
    pytest.importorskip("transformers")
    from crayon_hf import CrayonTokenizer

    folder = require_shared(VOCAB / "hf" / "mistral_v0_1")
    tok = CrayonTokenizer.from_pretrained(str(folder))
    ref = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    for ids in id_streams(ref, 3):
        assert steps(DecodeStream(), tok, ids) == steps(RefStream(), ref, ids)


def test_tiktoken_face_matches_the_same_vocabulary_in_tokenizers():
    """r50k_base and GPT-2's tokenizer.json are one vocabulary: the tiktoken face streams what
    tokenizers streams for the same ids."""
    import crayon_hf.tiktoken as tk

    ref = tokenizers.Tokenizer.from_file(str(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json")))
    enc = tk.get_encoding("r50k_base")
    rng = random.Random(5)
    for ids in id_streams(ref, 5):
        ids = [i for i in ids if i < 50257]
        for groups in (ids, groupings(ids, rng)):
            assert steps(DecodeStream(), enc, groups) == steps(RefStream(), ref, groups)
    ids = enc.encode("hi <|endoftext|> there", allowed_special="all")
    assert "".join(c for c in steps(DecodeStream(skip_special_tokens=True), enc, ids) if c) == "hi  there"


def test_chunks_add_up_to_the_decoded_text():
    enc_ids = Tokenizer.from_file(require_shared(VOCAB / "hf" / "llama3_1" / "tokenizer.json"))
    text = text_sample()
    ids = enc_ids.encode(text, add_special_tokens=False).ids
    stream = DecodeStream()
    chunks = [stream.step(enc_ids, i) for i in ids]
    assert "".join(c for c in chunks if c) == enc_ids.decode(ids) == text
    assert any(c is None for c in chunks)  # emoji and CJK take several byte-level tokens
