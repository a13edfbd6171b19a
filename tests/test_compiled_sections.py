"""What a tokenizer.json cartridge compiles so that loading is O(1) (docs/cartridge.md, format 3):
the added-token matchers (HADR, HADN), the added tokens' JSON (HADJ) and each Precompiled
normalizer's lookup tables (HNnn).

The matchers and tables read in place from the cartridge must give exactly what building them at
load gave, and what `tokenizers` gives: on real text and on strings made of added tokens, their
prefixes, whitespace and words. Loading must not read what it no longer needs (the vocabulary
strings, the added tokens' JSON): a file whose VSTR and HADJ are garbage still loads. No timing is
asserted here; benchmarks/load.py measures the load times.
"""

from __future__ import annotations

import json
import random
import struct

import pytest

from crayon_hf import Tokenizer
from crayon_hf._native import native
from crayon_hf.conversion.hf_json import added_token_rows, sentencepiece_shortcut
from support import (CORPORA, VOCAB, corpus_text, random_slices, reference_encoding, require_module,
                     require_shared)

# Many added tokens (Whisper: 1609, DeepSeek V3: 818, Llama 3.1: 256), normalized added tokens
# and a Precompiled normalizer (T5, XLM-R), and one with neither much of either (GPT-2).
FOLDERS = ["whisper_large_v3", "deepseek_v3", "llama3_1", "t5_small", "xlm_roberta_paraphrase_mpnet", "gpt2"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = {}
    work = tmp_path_factory.mktemp("compiled")
    for name in FOLDERS:
        path = VOCAB / "hf" / name / "tokenizer.json"
        if not path.exists():
            continue
        tok = Tokenizer.from_file(path)
        assert tok.crayon_backend == "native"
        target = work / f"{name}.dat"
        tok.save_cartridge(target)
        out[name] = target
    return out


def _cartridge(compiled, name: str):
    require_shared(VOCAB / "hf" / name / "tokenizer.json")
    return compiled[name]


def _adversarial(name: str, count: int, seed: int) -> list[str]:
    """Strings built from the folder's added tokens: whole, cut short, glued to words and to each
    other, between whitespace runs (lstrip / rstrip), inside words (single_word), in the text of
    a real corpus."""
    data = json.loads((VOCAB / "hf" / name / "tokenizer.json").read_text(encoding="utf-8"))
    contents = [t["content"] for t in data.get("added_tokens") or []] or ["<s>"]
    rng = random.Random(seed)
    prose = corpus_text(CORPORA / "multi_udhr_scripts.txt", 20000)
    fillers = [" ", "  ", "\n", "\t", " \n ", "word", "Wörter", "中文", "a", "", "\u3000", "x1"]
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randrange(1, 8)):
            r = rng.random()
            tok = rng.choice(contents)
            if r < 0.45:
                parts.append(tok)
            elif r < 0.6:
                parts.append(tok[: rng.randrange(1, len(tok) + 1)])  # a prefix: no match, or a shorter one
            elif r < 0.75:
                start = rng.randrange(len(prose) - 60)
                parts.append(prose[start : start + rng.randrange(1, 60)])
            else:
                parts.append(rng.choice(fillers))
        out.append("".join(parts))
    return out


def _texts(name: str) -> list[str]:
    texts = _adversarial(name, 300, seed=len(name))
    for corpus in ("en_botchan.txt", "multi_udhr_scripts.txt", "code_python_stdlib.txt"):
        texts += random_slices(corpus_text(CORPORA / corpus, 64 * 1024), 40, seed=7)
    return texts


def test_cartridge_carries_the_compiled_sections(compiled):
    for name in FOLDERS:
        path = _cartridge(compiled, name)
        c = native.Cartridge.open(str(path), False)
        meta = json.loads(c.section("META"))
        assert meta["format"] == 3
        assert {"HADR", "HADN", "HADJ"} <= set(c.section_ids)
        assert "added_tokens" not in meta  # in HADJ: loading parses nothing proportional to them
        source = json.loads((VOCAB / "hf" / name / "tokenizer.json").read_text(encoding="utf-8"))
        assert len(json.loads(c.section("HADJ"))) == len(source["added_tokens"])
        precompiled = [d for d in meta["normalizers"] if d["type"] == "Precompiled"]
        for d in precompiled:
            assert "charsmap" not in d and d["charsmap_section"] in c.section_ids
        assert bool(precompiled) == (name in ("t5_small", "xlm_roberta_paraphrase_mpnet"))


@pytest.mark.parametrize("name", FOLDERS)
def test_compiled_sections_match_the_reference(compiled, name):
    """Ids, tokens and offsets from the compiled matchers and charsmap tables equal tokenizers'."""
    tokenizers = require_module("tokenizers")
    ref = tokenizers.Tokenizer.from_file(str(VOCAB / "hf" / name / "tokenizer.json"))
    ours = Tokenizer.from_cartridge(_cartridge(compiled, name))
    for text in _texts(name):
        for special_as_text in (False, True):
            ref.encode_special_tokens = special_as_text
            ours.encode_special_tokens = special_as_text
            r, o = ref.encode(text), ours.encode(text)
            assert (o.ids, o.tokens, o.offsets) == (r.ids, r.tokens, r.offsets), (name, text, special_as_text)


@pytest.mark.parametrize("name", FOLDERS)
def test_compiled_sections_equal_the_ones_built_at_load(compiled, name):
    """The engine over the cartridge's HADR / HADN / HNnn gives the same raw output, byte for byte,
    as an engine given the added-token rows and the charsmap bytes, which builds them itself (the
    path tokens added after load take)."""
    tok = Tokenizer.from_cartridge(_cartridge(compiled, name))
    raw, normed, _ = added_token_rows(tok._added, tok._normalize_for_match, tok._model_strings())
    pre = tok._meta["pre_tokenizers"]

    def pipeline(in_place: bool):
        norms = tok._components("normalizers", in_place=in_place)
        shortcut = None if normed else sentencepiece_shortcut(norms, pre)
        return shortcut if shortcut is not None else (norms, pre)

    compiled_engine = native.HfEngine(tok._cartridge, *pipeline(True), None, None)
    built_engine = native.HfEngine(tok._cartridge, *pipeline(False), raw, normed)
    for text in _texts(name):
        for special_as_text in (False, True):
            a, b = compiled_engine.encode(text, special_as_text), built_engine.encode(text, special_as_text)
            assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist() and a[3] == b[3], text


def _entry(data: bytearray, section: str) -> int:
    for i in range(struct.unpack_from("<I", data, 16)[0]):
        at = 64 + 32 * i
        if bytes(data[at : at + 4]) == section.encode():
            return at
    raise AssertionError(section)


def _restamped(data: bytearray, tmp_path, label: str):
    from test_cartridge import checksum

    data[56:64] = struct.pack("<Q", checksum(bytes(data)))
    out = tmp_path / f"{label}.dat"
    out.write_bytes(bytes(data))
    return out


def _fill(data: bytearray, section: str, byte: int) -> None:
    at, size = struct.unpack_from("<QQ", data, _entry(data, section) + 8)
    data[at : at + size] = bytes([byte]) * size


def test_loading_reads_neither_vocabulary_strings_nor_added_tokens(compiled, tmp_path):
    """VSTR (every token's string) and HADJ (the added tokens' JSON) garbage: the file still loads
    and encodes ids, since neither is read at load or by the matchers; what needs them (token
    strings, the added-token list) raises ValueError on first need."""
    data = bytearray(_cartridge(compiled, "whisper_large_v3").read_bytes())
    _fill(data, "VSTR", 0xFF)
    _fill(data, "HADJ", 0xFF)
    path = _restamped(data, tmp_path, "garbage-strings")
    tok = Tokenizer.from_cartridge(path)
    good = Tokenizer.from_cartridge(_cartridge(compiled, "whisper_large_v3"))
    text = "<|startoftranscript|><|en|> hello <|0.00|> world<|endoftext|>"
    assert tok.encode_batch_to_numpy([text])[0].tolist() == good.encode_batch_to_numpy([text])[0].tolist()
    with pytest.raises(ValueError):
        tok.get_vocab()


@pytest.mark.parametrize(
    "section,mutate,message,where",
    [
        # The header's counts disagree with the section's size: O(1), at load.
        ("HADR", lambda d, at: struct.pack_into("<I", d, at, 0x7FFFFFF0), "size does not match its counts", "load"),
        ("HADN", lambda d, at: struct.pack_into("<i", d, at + 12, 300), "header is inconsistent", "load"),
        # A record pointing past the contents: found by the first-use pass over the records.
        ("HADR", lambda d, at: struct.pack_into("<I", d, at + 64 + 4, 0x7FFFFFFF), "outside the section", "first use"),
        # A trie value naming no record.
        ("HADR", lambda d, at: d.__setitem__(slice(at + 64 + 16 * struct.unpack_from("<I", d, at)[0]
                                                   + 8 * struct.unpack_from("<I", d, at + 4)[0],
                                                   at + 64 + 16 * struct.unpack_from("<I", d, at)[0]
                                                   + 12 * struct.unpack_from("<I", d, at + 4)[0]),
                                             b"\x7f\xff\xff\x00" * struct.unpack_from("<I", d, at + 4)[0]),
         "names a token that does not exist", "first use"),
    ],
    ids=["counts", "first-byte", "record", "trie-value"],
)
def test_hostile_added_token_sections(compiled, tmp_path, section, mutate, message, where):
    data = bytearray(_cartridge(compiled, "whisper_large_v3").read_bytes())
    at = struct.unpack_from("<Q", data, _entry(data, section) + 8)[0]
    mutate(data, at)
    path = _restamped(data, tmp_path, f"hostile-{section}")
    if where == "load":
        with pytest.raises(ValueError, match=message):
            Tokenizer.from_cartridge(path)
        return
    tok = Tokenizer.from_cartridge(path)
    for _ in range(2):  # remembered: every use raises
        with pytest.raises(ValueError, match=message):
            tok.encode("<|endoftext|> hello")
    with pytest.raises(ValueError, match=message):
        Tokenizer.from_cartridge(path, verify=True)


def test_hostile_precompiled_section(compiled, tmp_path):
    """A Precompiled section too short for its bitmaps, or whose strings are not UTF-8, is refused
    at load with ValueError (never a fallback to tokenizers: the file, not the tokenizer, is bad)."""
    data = bytearray(_cartridge(compiled, "t5_small").read_bytes())
    meta = json.loads(native.Cartridge.open(str(_cartridge(compiled, "t5_small")), False).section("META"))
    sid = next(d["charsmap_section"] for d in meta["normalizers"] if d["type"] == "Precompiled")
    entry = _entry(data, sid)
    short = bytearray(data)
    struct.pack_into("<Q", short, entry + 16, 1000)
    with pytest.raises(ValueError, match="shorter than its bitmaps"):
        Tokenizer.from_cartridge(_restamped(short, tmp_path, "short"))
    at, size = struct.unpack_from("<QQ", data, entry + 8)
    bad = bytearray(data)
    bad[at + size - 2 : at + size] = b"\xff\xfe"  # the last replacement string's bytes
    with pytest.raises(ValueError, match="Precompiled section is damaged"):
        Tokenizer.from_cartridge(_restamped(bad, tmp_path, "utf8"))


def test_tokens_added_after_load_still_match(compiled, tmp_path):
    """The overlay: tokens added after load are matched from lists built then; saving compiles them
    into a new file's sections, which loads with the same behaviour."""
    tok = Tokenizer.from_cartridge(_cartridge(compiled, "t5_small"))
    assert tok.add_tokens(["<extra_id_0>x", "zebra crossing"]) == 2
    text = "a zebra crossing<extra_id_0>x <extra_id_0> y"
    before = tok.encode(text)
    target = tmp_path / "overlay.dat"
    tok.save_cartridge(target)
    again = Tokenizer.from_cartridge(target)
    assert "HADR" in native.Cartridge.open(str(target), False).section_ids
    after = again.encode(text)
    assert (after.ids, after.tokens, after.offsets) == (before.ids, before.tokens, before.offsets)
    assert again.token_to_id("zebra crossing") == tok.token_to_id("zebra crossing")


def test_format_2_cartridges_still_load(compiled, tmp_path):
    """A cartridge written before format 3 (added tokens and charsmaps in META, no compiled
    sections) loads and encodes as before."""
    tok = Tokenizer.from_cartridge(_cartridge(compiled, "t5_small"))
    source = json.loads(tok._cartridge.section("TJSN"))
    from crayon_hf.conversion import hf_json

    plan = hf_json.plan_native(source)
    meta = {"engine": "hf", "format": 2, "model": plan.kind, "added_tokens": plan.added_tokens,
            "normalizers": plan.normalizers, "normalizer_paths": plan.normalizer_paths,
            "pre_tokenizers": plan.pre_tokenizers, "pre_tokenizer_paths": plan.pre_tokenizer_paths,
            "model_vocab_size": len(source["model"]["vocab"])}
    for key in ("normalizer", "post_processor", "decoder", "truncation", "padding"):
        meta[key] = source.get(key)
    model = {"kind": plan.kind, "byte_tokens": plan.byte_tokens, "merges": plan.merges, "scores": plan.scores,
             "n_ids": plan.n_ids, "unk_id": plan.unk_id, "fuse_unk": plan.fuse_unk,
             "ignore_merges": plan.ignore_merges, "byte_fallback": plan.byte_fallback, "prefix": plan.prefix,
             "suffix": plan.suffix, "max_input_chars_per_word": plan.max_input_chars_per_word}
    image = native.build_hf_cartridge(model, json.dumps(meta), json.dumps(source).encode(),
                                      json.dumps(plan.vocab_strings).encode(), plan.decode_bytes)
    old = tmp_path / "format2.dat"
    old.write_bytes(image)
    assert not {"HADR", "HADN", "HADJ"} & set(native.Cartridge.open(str(old), False).section_ids)
    legacy = Tokenizer.from_cartridge(old)
    for text in _texts("t5_small")[:150]:
        a, b = legacy.encode(text), tok.encode(text)
        assert (a.ids, a.tokens, a.offsets) == (b.ids, b.tokens, b.offsets), text


@pytest.mark.parametrize("name", FOLDERS)
def test_token_strings_read_in_place_equal_the_vocabulary(compiled, name):
    """VSTI, read per id right after a load (so the first encode parses no vocabulary), holds for
    every id the string the full list built from VSTR and the added tokens gives."""
    tok = Tokenizer.from_cartridge(_cartridge(compiled, name))
    lazy = tok._vocab_lazy
    assert lazy._native is not None
    n = tok._engine.token_string_count
    from_section = tok._engine.token_strings(list(range(n)))
    assert len(lazy) == n
    assert lazy[n - 1] == from_section[n - 1]
    assert from_section == tok._token_strings()
    with pytest.raises(IndexError):
        tok._engine.token_string(n)


def test_encoding_tokens_switch_to_the_full_list(compiled):
    """After lookups worth half the vocabulary, token strings come from the full list: same tokens."""
    tok = Tokenizer.from_cartridge(_cartridge(compiled, "whisper_large_v3"))
    texts = _texts("whisper_large_v3")
    first = [tok.encode(t).tokens for t in texts]
    lazy = tok._vocab_lazy
    lazy._budget = 0  # spend it
    second = [tok.encode(t).tokens for t in texts]
    assert lazy._native is None and first == second


def test_hostile_token_string_section(compiled, tmp_path):
    """VSTI's counts are checked at load; offsets out of order where a string is read."""
    data = bytearray(_cartridge(compiled, "gpt2").read_bytes())
    at = struct.unpack_from("<Q", data, _entry(data, "VSTI") + 8)[0]
    counts = bytearray(data)
    struct.pack_into("<I", counts, at, 7)
    with pytest.raises(ValueError, match="VSTI's size does not match"):
        Tokenizer.from_cartridge(_restamped(counts, tmp_path, "vsti-counts"))
    order = bytearray(data)
    struct.pack_into("<I", order, at + 8 + 4 * 100, 0xFFFFFFF0)  # the end of id 99, the start of id 100
    tok = Tokenizer.from_cartridge(_restamped(order, tmp_path, "vsti-order"))
    with pytest.raises(ValueError, match="VSTI's offsets"):
        tok._engine.token_string(100)
    assert tok._engine.token_string(5) == Tokenizer.from_cartridge(_cartridge(compiled, "gpt2"))._engine.token_string(5)


def test_lazy_vocabulary_iterates_the_full_list(compiled):
    tok = Tokenizer.from_cartridge(_cartridge(compiled, "gpt2"))
    lazy = tok._vocab_lazy
    assert list(lazy) == tok._token_strings() and lazy._native is not None


def test_pair_filter_of_older_cartridges_is_skipped(tmp_path):
    """The pair table's Bloom filter moved to section BPB1 when its layout changed (both bits of a
    pair in one word). A cartridge of the old layout holds BPBF instead: read as BPB1 it would turn
    merges away, so it must be skipped. Here the filter is emptied (no pair passes it): under its
    own name the ids go wrong, which shows the filter is read; renamed BPBF, the ids are
    tiktoken's."""
    import crayon_hf.tiktoken as ct

    enc = ct.get_encoding("cl100k_base")
    enc.save_cartridge(tmp_path / "new.dat")
    data = bytearray((tmp_path / "new.dat").read_bytes())
    _fill(data, "BPB1", 0)
    empty = ct.Encoding.from_cartridge(_restamped(bytearray(data), tmp_path, "empty"))
    at = _entry(data, "BPB1")
    data[at:at + 4] = b"BPBF"
    old = ct.Encoding.from_cartridge(_restamped(data, tmp_path, "old"))
    ref = reference_encoding("cl100k_base")
    texts = random_slices(corpus_text(require_shared(CORPORA / "en_gutenberg_big.txt")), 300, seed=11)
    texts += random_slices(corpus_text(require_shared(CORPORA / "multi_udhr_scripts.txt")), 300, seed=12)
    assert any(empty.encode_ordinary(t) != ref.encode_ordinary(t) for t in texts)
    for t in texts:
        assert old.encode_ordinary(t) == ref.encode_ordinary(t), t
