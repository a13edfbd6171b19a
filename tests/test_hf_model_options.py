"""BPE model options that the shared folders do not all exercise, on small byte-level models trained
with `tokenizers`' own BpeTrainer on real text and then edited: continuing_subword_prefix,
end_of_word_suffix, unk_token with and without fuse_unk (and bytes missing from the vocabulary),
ignore_merges, merges written as ["a", "b"] pairs, duplicated merges (the last one wins), and
added tokens with lstrip/rstrip/normalized around a normalizer. Every case is compared with the
real `tokenizers` on corpus text and adversarial strings, offsets and decode included.
"""

from __future__ import annotations

import json
import random

import pytest

from support import corpus_files, corpus_text, random_slices, require_module
from test_hf_parity import check_texts


def _train(prefix: str | None = None, suffix: str | None = None, vocab_size: int = 600) -> dict:
    tokenizers = require_module("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    kwargs = {}
    if prefix is not None:
        kwargs["continuing_subword_prefix"] = prefix
    if suffix is not None:
        kwargs["end_of_word_suffix"] = suffix
    tok = tokenizers.Tokenizer(models.BPE(**kwargs))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|end|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False, **kwargs,
    )
    text = "".join(corpus_text(p, 30_000) for p in corpus_files()[:4])
    tok.train_from_iterator([text[i : i + 2000] for i in range(0, len(text), 2000)], trainer)
    return json.loads(tok.to_str())


def _texts() -> list[str]:
    texts = []
    for k, p in enumerate(corpus_files()):
        texts += random_slices(corpus_text(p), 12, seed=40 + k, max_len=200)
    rng = random.Random(3)
    alphabet = list(" \n\tabcXYZ'sé日本😀0123<|end|>")
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(60)]
    return texts


def _compare(data: dict, native: bool = True) -> None:
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    text = json.dumps(data)
    ours, ref = Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    if native:
        assert ours.crayon_backend == "native"
    check_texts(ours, ref, _texts(), "trained model")


@pytest.mark.parametrize(
    "prefix,suffix", [("##", None), (None, "</w>"), ("##", "</w>"), ("", "")], ids=["prefix", "suffix", "both", "empty"]
)
def test_prefix_and_suffix(prefix, suffix):
    _compare(_train(prefix, suffix))


@pytest.mark.parametrize("fuse", [False, True])
def test_unk_token_and_missing_bytes(fuse):
    data = _train()
    vocab = data["model"]["vocab"]
    # Drop a few single-byte tokens (and every merge that uses them) so some text has no symbol.
    dropped = {"é"[0], "Ã", "©", "æ", "Ĺ"} & set(vocab)
    merges = [m for m in data["model"]["merges"] if not any(d in (m.split(" ") if isinstance(m, str) else m) for d in dropped)]
    keep = {t: i for t, i in vocab.items() if t not in dropped}
    # ids must stay dense for tokenizers' vocab_r; renumber.
    order = sorted(keep, key=keep.get)
    data["model"]["vocab"] = {t: i for i, t in enumerate(order)}
    data["model"]["merges"] = [
        m for m in merges if all(part in data["model"]["vocab"] for part in (m.split(" ") if isinstance(m, str) else m))
        and "".join(m.split(" ") if isinstance(m, str) else m) in data["model"]["vocab"]
    ]
    data["added_tokens"] = [dict(t, id=data["model"]["vocab"][t["content"]]) for t in data["added_tokens"]]
    data["model"]["unk_token"] = "<|end|>"
    data["model"]["fuse_unk"] = fuse
    _compare(data)
    # Without an unk token, unknown bytes vanish (tokenizers drops them silently).
    data["model"]["unk_token"] = None
    _compare(data)


def test_merges_as_pairs_duplicates_and_ignore_merges():
    data = _train()
    merges = data["model"]["merges"]
    data["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in merges]
    _compare(data)
    # A duplicated pair: tokenizers keeps the last position, which changes the merge order.
    dup = list(data["model"]["merges"])
    dup.append(dup[5])
    dup.insert(0, dup[40])
    data["model"]["merges"] = dup
    _compare(data)
    data["model"]["ignore_merges"] = True
    _compare(data)


def test_added_tokens_flags_with_a_normalizer():
    data = _train()
    n = len(data["model"]["vocab"])
    data["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
    extra = [
        {"content": "<MASK>", "lstrip": True, "rstrip": False, "normalized": False, "special": True},
        {"content": "ｆｕｌｌ", "lstrip": False, "rstrip": True, "normalized": True, "special": False},
        {"content": "Hello", "lstrip": True, "rstrip": True, "normalized": True, "special": False},
        {"content": "  ", "lstrip": False, "rstrip": False, "normalized": True, "special": False},
    ]
    for i, t in enumerate(extra):
        data["added_tokens"].append(dict(t, id=n + i, single_word=False))
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    text = json.dumps(data)
    ours, ref = Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    assert ours.crayon_backend == "native"
    texts = _texts() + [
        "say <MASK> now", "x   <MASK>", "FULL full ｆｕｌｌ  tail", "HELLO   hello, Hello!", "a  b   c    d",
        "<MASK><MASK>", "ＨＥＬＬＯ world",
    ]
    check_texts(ours, ref, texts, "added-token flags")


def test_single_word_added_tokens_fall_back_loudly():
    data = _train()
    data["added_tokens"].append(
        {"id": len(data["model"]["vocab"]), "content": "word", "single_word": True, "lstrip": False,
         "rstrip": False, "normalized": False, "special": False}
    )
    from crayon_hf import Tokenizer

    with pytest.warns(UserWarning, match="single_word"):
        ours = Tokenizer.from_str(json.dumps(data))
    assert ours.crayon_backend == "fallback: added_tokens[1].single_word"
    _compare(data, native=False)
