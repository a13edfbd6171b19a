"""BPE model options that the shared folders do not all exercise, on small byte-level models trained
with `tokenizers`' own BpeTrainer on real text and then edited: continuing_subword_prefix,
end_of_word_suffix, unk_token with and without fuse_unk (and bytes missing from the vocabulary),
ignore_merges, merges written as ["a", "b"] pairs, duplicated merges (the last one wins), and
added tokens with lstrip/rstrip/normalized/single_word around a normalizer. Every case is compared with the
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


def _single_word_texts(words: list[str]) -> list[str]:
    """Each word alone, at text start/end, twice in a row, and glued to word characters (letters,
    digits, '_', CJK, a combining mark, ZWJ) and non-word ones (superscript digit, punctuation,
    whitespace, emoji); then random strings of such pieces."""
    neighbours = ["a", "Z", "7", "_", "\u0663", "\u00b2", "\u00bd", "\u0301", "\u200d", "\u2160", "\u24b6", "日",
                  "語", "\u00e9", ",", "-", " ", "\t", "\n", "\u3000", "😀", "\u00a0", ".", "<|end|>"]
    texts = []
    for w in words:
        texts += [w, f" {w} ", f"{w}{w}", f"{w} {w}", f"{w}  {w}\t{w}", f"say {w}, then {w}."]
        for c in neighbours:
            texts += [c + w, w + c, c + w + c, f"{c} {w} {c}", f"{w}{c}{w}"]
    rng = random.Random(11)
    pieces = words + neighbours + ["  ", "x", "xy", "Test", "TEST"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(250)]
    return texts


def test_single_word_added_tokens():
    """single_word alone and with lstrip/rstrip/normalized/special: an occurrence touching a word
    character (the Rust regex crate's \\w) is not a token, and the search resumes after it."""
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    data = _train()
    n = len(data["model"]["vocab"])
    data["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
    extra = [
        {"content": "word", "lstrip": False, "rstrip": False, "normalized": False, "special": False},
        {"content": "<SW>", "lstrip": True, "rstrip": True, "normalized": False, "special": True},
        {"content": "ｔｅｓｔ", "lstrip": False, "rstrip": True, "normalized": True, "special": False},
        {"content": "日本", "lstrip": True, "rstrip": False, "normalized": False, "special": False},
        {"content": "[Mask]", "lstrip": False, "rstrip": False, "normalized": True, "special": True},
        {"content": "-+-", "lstrip": False, "rstrip": False, "normalized": False, "special": False},
        {"content": "wordy", "lstrip": False, "rstrip": False, "normalized": False, "special": False,
         "single_word": False},
    ]
    for i, t in enumerate(extra):
        assert t["content"] not in data["model"]["vocab"]  # tokenizers would give it the model's id
        data["added_tokens"].append({"single_word": True, **t, "id": n + i})
    text = json.dumps(data)
    ours, ref = Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    assert ours.crayon_backend == "native"
    texts = _texts() + _single_word_texts(["word", "<SW>", "test", "TEST", "ｔｅｓｔ", "日本", "[mask]", "-+-", "wordy"])
    check_texts(ours, ref, texts, "single_word")
    ours.encode_special_tokens = ref.encode_special_tokens = True
    check_texts(ours, ref, texts, "single_word, encode_special_tokens", decode=False)


def test_single_word_overlay():
    """Tokens added after load (the overlay) with single_word, as `tokenizers` adds them."""
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    text = json.dumps(_train())
    ours, ref = Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    for tok in (ours, ref):
        assert tok.add_tokens([tokenizers.AddedToken("word", single_word=True)]) == 1
        tok.add_tokens([tokenizers.AddedToken("ｗｏ", single_word=True, lstrip=True, normalized=False), "plain"])
        tok.add_special_tokens([tokenizers.AddedToken("<SW>", single_word=True, rstrip=True, normalized=False)])
    assert ours.crayon_backend == "native"
    assert ours.get_added_tokens_decoder() == ref.get_added_tokens_decoder()
    check_texts(ours, ref, _texts() + _single_word_texts(["word", "ｗｏ", "<SW>", "plain"]), "single_word overlay")


def test_added_token_already_in_vocabulary_takes_the_model_id():
    """tokenizers re-adds added tokens at load; content already in the model's vocabulary keeps the
    model's id, whatever id the file gives it."""
    data = _train()
    word = next(t for t in data["model"]["vocab"] if len(t) > 3 and t.isalpha())
    data["added_tokens"].append(
        {"id": len(data["model"]["vocab"]) + 7, "content": word, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": False}
    )
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    text = json.dumps(data)
    ours, ref = Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    check_texts(ours, ref, [f"a {word} b", word * 3, f"{word}{word} x"], "added token in vocab")
    assert ours.get_vocab() == ref.get_vocab() and ours.get_vocab_size() == ref.get_vocab_size()
    assert json.loads(ours.to_str())["added_tokens"] == json.loads(ref.to_str())["added_tokens"]


def test_bad_tokenizer_json_gives_clear_errors(tmp_path):
    from crayon_hf import Tokenizer

    with pytest.raises(ValueError, match="not valid JSON"):
        Tokenizer.from_str("{not json")
    with pytest.raises(ValueError, match="no 'model' object"):
        Tokenizer.from_str('{"version": "1.0"}')
    data = _train()
    broken = json.loads(json.dumps(data))
    broken["model"]["merges"].append("Ġqqq zzz")
    with pytest.raises(ValueError, match=r"model.merges\[\d+\]: token 'Ġqqq' is not in the vocabulary"):
        Tokenizer.from_str(json.dumps(broken))
    broken = json.loads(json.dumps(data))
    broken["model"]["merges"].append("a b c")
    with pytest.raises(ValueError, match="two tokens separated by one space"):
        Tokenizer.from_str(json.dumps(broken))
    broken = json.loads(json.dumps(data))
    broken["model"]["unk_token"] = "<nope>"
    # tokenizers loads this (it fails only if a word needs the unk token), so it runs there.
    with pytest.warns(UserWarning, match="unk_token"):
        tok = Tokenizer.from_str(json.dumps(broken))
    ref = require_module("tokenizers").Tokenizer.from_str(json.dumps(broken))
    assert tok.encode("hello wörld").ids == ref.encode("hello wörld").ids
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    with pytest.raises(ValueError):
        Tokenizer.from_file(path)


def test_damaged_tokenizer_cartridge_is_refused(tmp_path):
    from crayon_hf import Tokenizer

    tok = Tokenizer.from_str(json.dumps(_train()))
    good = tmp_path / "good.dat"
    tok.save_cartridge(good)
    image = bytearray(good.read_bytes())
    for where in (100, len(image) // 2, len(image) - 10):
        bad = tmp_path / f"bad{where}.dat"
        flipped = bytearray(image)
        flipped[where] ^= 0x40
        bad.write_bytes(bytes(flipped))
        # Loading checks the header and section table only; the checksum runs at first use
        # (docs/cartridge.md), so the damage surfaces at load or at the first encode.
        with pytest.raises(ValueError):
            Tokenizer.from_file(bad).encode("hello world")
    truncated = tmp_path / "short.dat"
    truncated.write_bytes(bytes(image[: len(image) // 3]))
    with pytest.raises(ValueError):
        Tokenizer.from_file(truncated)
