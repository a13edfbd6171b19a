"""`chunk_by_tokens` on real text, checked with the references' own encodings.

For every chunking: the chunks rebuild the text; each lies at its offsets; the reference counts
each chunk within the budget (and equal to `n_tokens`); the whole text's reference tokens in
[token_start, token_end) are exactly the chunk's bytes (tiktoken) or lie inside its characters
(tokenizers, transformers); and a face gives the same chunks as its reference."""

from __future__ import annotations

import pytest

from crayon_hf import chunk_by_tokens
from support import CORPORA, VOCAB, corpus_text, our_encoding, reference_encoding, require_module, require_shared

pytestmark = pytest.mark.filterwarnings("ignore:crayon-hf.*not implemented natively:UserWarning")

CORPUS = ["zh_hongloumeng.txt", "multi_udhr_scripts.txt", "code_cpython_headers.h.txt", "ja_wagahaiwa_nekodearu.txt",
          "en_botchan.txt"]
SAMPLE = 24 * 1024

ADVERSARIAL = [
    "😀" * 40,  # two tokens per emoji in cl100k: the boundary between them is inside the character
    "𠀀𠀁𠀂 rare CJK 龘龘龘 " * 20,
    "👩‍👩‍👧‍👦 family " * 15,
    "e\u0301" * 100 + " combining",
    "a" * 3000,
    " " * 500 + "x" + "\n" * 300 + "y\r\n\r\n",
    "Mixed: naïve café — «quotes» “curly” 12345678901234 3.14159!? Done. Next.\n\nNew para." * 5,
    "<|endoftext|> special text, chunked as ordinary text <|endoftext|>" * 5,
]


def _texts() -> list[tuple[str, str]]:
    out = [(name, corpus_text(require_shared(CORPORA / name), SAMPLE)) for name in CORPUS]
    return out + [(f"adversarial{i}", t) for i, t in enumerate(ADVERSARIAL)]


def _check_layout(text: str, chunks, overlap: int) -> None:
    assert all(text[c.start:c.end] == c for c in chunks)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    stitched = str(chunks[0]) + "".join(str(c)[p.end - c.start:] for p, c in zip(chunks, chunks[1:]))
    assert stitched == text
    for p, c in zip(chunks, chunks[1:]):
        assert p.start < c.start <= p.end
        assert p.token_start < c.token_start <= p.token_end
        assert p.token_end - c.token_start <= overlap
    if overlap == 0:
        assert "".join(chunks) == text


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_base"])
@pytest.mark.parametrize("boundary,overlap", [("token", 0), ("sentence", 0), ("paragraph", 16), ("token", 7)])
def test_tiktoken_chunks_against_reference(name, boundary, overlap):
    ours, ref = our_encoding(name), reference_encoding(name)
    for label, text in _texts():
        max_tokens = 64 if label.startswith("adversarial") else 200
        chunks = chunk_by_tokens(text, max_tokens, tokenizer=ours, overlap=overlap, boundary=boundary)
        assert chunks == chunk_by_tokens(text, max_tokens, tokenizer=ref, overlap=overlap, boundary=boundary), label
        _check_layout(text, chunks, overlap)
        ids = ref.encode_ordinary(text)
        assert chunks[-1].token_end == len(ids)
        for c in chunks:
            assert len(ref.encode_ordinary(c)) == c.n_tokens <= max_tokens, label
            # The whole text's tokens [token_start, token_end) are exactly this chunk's bytes.
            assert ref.decode_bytes(ids[c.token_start:c.token_end]) == c.encode("utf-8"), label


def test_cut_inside_a_character_is_never_made():
    enc, ref = our_encoding("cl100k_base"), reference_encoding("cl100k_base")
    emoji = "😀"
    assert len(ref.encode_ordinary(emoji)) == 2  # the premise: one character, two tokens
    chunks = chunk_by_tokens(emoji * 5, 3, tokenizer=enc)
    assert [str(c) for c in chunks] == [emoji] * 5
    assert all(c.n_tokens == 2 for c in chunks)
    with pytest.raises(ValueError, match="cannot cut"):
        chunk_by_tokens("ab" + emoji, 1, tokenizer=enc)


def test_lone_surrogates_follow_tiktoken():
    """tiktoken encodes a lone surrogate as U+FFFD and a surrogate pair as one character."""
    enc, ref = our_encoding("cl100k_base"), reference_encoding("cl100k_base")
    text = ("ab\ud800cd \ud83d\ude00 e" * 20)
    chunks = chunk_by_tokens(text, 5, tokenizer=enc)
    assert chunks == chunk_by_tokens(text, 5, tokenizer=ref)
    assert "".join(chunks) == text
    assert all(len(ref.encode_ordinary(c)) <= 5 for c in chunks)
    assert not any(c.endswith("\ud83d") for c in chunks)  # never between the halves of a pair


def test_arguments():
    enc = our_encoding("cl100k_base")
    assert chunk_by_tokens("", 10, tokenizer=enc) == []
    with pytest.raises(ValueError, match="overlap"):
        chunk_by_tokens("hello world", 4, tokenizer=enc, overlap=4)
    with pytest.raises(ValueError, match="max_tokens"):
        chunk_by_tokens("hello world", 0, tokenizer=enc)
    with pytest.raises(ValueError, match="boundary"):
        chunk_by_tokens("hello world", 4, tokenizer=enc, boundary="word")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tokenizer"):
        chunk_by_tokens("hello world", 4, tokenizer=object())


def test_boundaries_prefer_sentences_and_paragraphs():
    enc = our_encoding("cl100k_base")
    text = corpus_text(require_shared(CORPORA / "en_gutenberg_big.txt"), 60_000)
    assert text.count("\n\n") > 100
    by_paragraph = chunk_by_tokens(text, 300, tokenizer=enc, boundary="paragraph")
    by_sentence = chunk_by_tokens(text, 300, tokenizer=enc, boundary="sentence")
    by_token = chunk_by_tokens(text, 300, tokenizer=enc)
    for chunks in (by_paragraph, by_sentence, by_token):
        assert "".join(chunks) == text
        assert all(enc.count(c) <= 300 for c in chunks)
    assert all(t.n_tokens == 300 or t is by_token[-1] or t.n_tokens >= 299 for t in by_token)
    # Where a paragraph fits, paragraph chunks end at a blank line.
    ends = [str(c)[-20:] for c in by_paragraph[:-1]]
    assert sum(e.endswith("\n\n") for e in ends) >= len(ends) - 1, ends
    assert all(str(c).rstrip()[-1:] in ".!?\"'”’)" or "\n" in str(c)[-3:] for c in by_sentence[:-1])


HF = ["gpt2", "qwen2_5", "bert_base_uncased", "t5_small", "mistral_v0_1", "xlm_roberta_paraphrase_mpnet"]


def _check_offsets(text, chunks, encoding) -> None:
    """The whole text's tokens [token_start, token_end) lie inside the chunk's characters."""
    offsets = [o for o in encoding.offsets]
    for c in chunks:
        for start, end in offsets[c.token_start:c.token_end]:
            if end > start:
                assert c.start <= start and end <= c.end, (c, start, end)


@pytest.mark.parametrize("name", HF)
def test_tokenizers_chunks_against_reference(name):
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    path = str(require_shared(VOCAB / "hf" / name / "tokenizer.json"))
    ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)
    ref.no_truncation()
    ref.no_padding()
    for label, text in _texts():
        text = text[:8000]
        for boundary, overlap in (("token", 0), ("sentence", 10)):
            chunks = chunk_by_tokens(text, 96, tokenizer=ours, boundary=boundary, overlap=overlap)
            assert chunks == chunk_by_tokens(text, 96, tokenizer=ref, boundary=boundary, overlap=overlap), label
            _check_layout(text, chunks, overlap)
            for c in chunks:
                assert len(ref.encode(c).ids) == c.n_tokens <= 96, (label, c)
            _check_offsets(text, chunks, ref.encode(text, add_special_tokens=False))


def test_tokenizers_budget_without_special_tokens():
    from crayon_hf import Tokenizer

    tok = Tokenizer.from_file(str(require_shared(VOCAB / "hf" / "bert_base_uncased" / "tokenizer.json")))
    text = corpus_text(require_shared(CORPORA / "en_botchan.txt"), 6000)
    with_specials = chunk_by_tokens(text, 50, tokenizer=tok)
    without = chunk_by_tokens(text, 50, tokenizer=tok, add_special_tokens=False)
    assert all(tok.count(c) <= 50 for c in with_specials)
    assert all(tok.count(c, add_special_tokens=False) <= 50 for c in without)
    assert len(without) < len(with_specials)
    with pytest.raises(ValueError, match="no room"):
        chunk_by_tokens(text, 2, tokenizer=tok)


@pytest.mark.parametrize("name", ["qwen2_5", "bert_base_uncased"])
def test_transformers_chunks_against_stock(name):
    require_module("transformers")
    from transformers import AutoTokenizer

    from crayon_hf.transformers import CrayonTokenizer

    folder = require_shared(VOCAB / "hf" / name)
    ours, ref = CrayonTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    assert not isinstance(ref, CrayonTokenizer)
    for label, text in _texts()[:6]:
        text = text[:6000]
        chunks = chunk_by_tokens(text, 128, tokenizer=ours, boundary="sentence", overlap=8)
        assert chunks == chunk_by_tokens(text, 128, tokenizer=ref, boundary="sentence", overlap=8), label
        _check_layout(text, chunks, 8)
        for c in chunks:
            assert len(ref(str(c), verbose=False)["input_ids"]) == c.n_tokens <= 128
