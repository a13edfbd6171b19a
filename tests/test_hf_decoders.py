"""Decode parity with `tokenizers` 0.23.3: `Tokenizer.decode` on every shared folder, and each
decoder type (including those no folder uses) on random token lists."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import require_module
from test_hf_postprocess import HF_FOLDERS, load_case, sample_texts

from crayon_hf._hf.decoders import build_decoder, bytes_to_unicode, decode_ids, skip_ids
from crayon_hf._hf.errors import PanicException, UnsupportedComponent


def _outcome(fn: Any) -> tuple[Any, BaseException | None]:
    try:
        return fn(), None
    except BaseException as exc:  # pyo3's PanicException is a BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return None, exc


def _same(ours: tuple[Any, BaseException | None], ref: tuple[Any, BaseException | None], context: str) -> None:
    if ref[1] is not None or ours[1] is not None:
        assert (type(ours[1]).__name__, str(ours[1])) == (type(ref[1]).__name__, str(ref[1])), (
            f"{context}: ours {ours[1]!r}, theirs {ref[1]!r}"
        )
    else:
        assert ours[0] == ref[0], context


# ---------------------------------------------------------------------------- Tokenizer.decode on real folders


@pytest.mark.parametrize("name", HF_FOLDERS)
def test_decode_parity(name: str) -> None:
    case = load_case(name)
    real = case.real()
    decoder = build_decoder(case.spec.get("decoder"))
    skip = skip_ids(case.id_to_token, case.special)
    vocab = case.id_to_token
    rng = random.Random(HF_FOLDERS.index(name))
    texts = sample_texts(0, 60)
    specials = [real.token_to_id(t) for t in case.added]

    def check(ids: list[int], context: str) -> None:
        for skip_special in (True, False):
            ours = _outcome(lambda: decode_ids(ids, skip_special, vocab, skip, decoder))
            ref = _outcome(lambda: real.decode(ids, skip_special_tokens=skip_special))
            _same(ours, ref, f"{name}: decode({context}, skip_special_tokens={skip_special})")

    for text in texts:
        ids = real.encode(text).ids
        check(ids, f"encode({text[:30]!r})")
        if ids and specials:
            mixed = list(ids)
            for _ in range(3):
                mixed.insert(rng.randrange(len(mixed) + 1), rng.choice(specials))
            check(mixed, "ids with added tokens")
    n = len(vocab)
    for _ in range(150):
        ids = [rng.randrange(n + 10) for _ in range(rng.randint(0, 24))]
        check(ids, "random ids")
    # Slices of real ids cut multi-byte characters and byte-fallback runs in the middle.
    for text in texts[:20]:
        ids = real.encode(text, add_special_tokens=False).ids
        if len(ids) > 2:
            a = rng.randrange(len(ids))
            check(ids[a : a + rng.randint(1, 6)], "slice")
    for bad in ([-1], [2**32], [1, -5, 2], ["x"]):
        check(bad, f"invalid {bad}")  # type: ignore[arg-type]


def test_skip_ids_tests_the_token_string() -> None:
    vocab = ["<s>", "hello", "<s>", None, "x"]
    assert skip_ids(vocab, ["<s>"]) == frozenset({0, 2})
    assert skip_ids(vocab, []) == frozenset()
    assert decode_ids([0, 1, 2, 3, 4, 99], True, vocab, skip_ids(vocab, ["<s>"]), None) == "hello x"
    assert decode_ids([0, 1, 2, 3, 4, 99], False, vocab, skip_ids(vocab, ["<s>"]), None) == "<s> hello <s> x"


# ---------------------------------------------------------------------------- each decoder type

DECODERS: list[dict[str, Any]] = [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    {"type": "WordPiece", "prefix": "##", "cleanup": True},
    {"type": "WordPiece", "prefix": "##", "cleanup": False},
    {"type": "WordPiece", "prefix": "", "cleanup": True},
    {"type": "BPEDecoder", "suffix": "</w>"},
    {"type": "BPEDecoder", "suffix": ""},
    {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True},
    {"type": "CTC", "pad_token": "a", "word_delimiter_token": "▁", "cleanup": False},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
    {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True},
    {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True},
    {"type": "Metaspace", "replacement": "_", "add_prefix_space": False, "prepend_scheme": "never", "str_rep": "_"},
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "Replace", "pattern": {"String": "ab"}, "content": "<ab>"},
    {"type": "Replace", "pattern": {"Regex": "\\.\\|"}, "content": "!"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    {"type": "Strip", "content": "a", "start": 2, "stop": 1},
    {"type": "Fuse"},
    {"type": "ByteFallback"},
    {
        "type": "Sequence",
        "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ],
    },
    {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"}]},
]

_BYTE_CHARS = "".join(bytes_to_unicode().values())
_PIECES = [
    "<0x41>", "<0xE2>", "<0x82>", "<0xAC>", "<0xF0>", "<0x9F>", "<0xC3>", "<0xA9>", "<0x+5>", "<0xZZ>", "<0x4>",
    "##ing", "##", "</w>", "a</w>", "<pad>", "|", " .", " 's", " n't", " do not", "▁▁", "▁the", "Ġhello", "âĤ¬",
    "ðŁĺĢ", "Ã", "ł", "", " ", "a", "ab", "aab", ".|", "é", "中",
]
tokens_strategy = st.lists(
    st.one_of(
        st.sampled_from(_PIECES),
        st.text(alphabet=st.sampled_from(list("a ▁#<>0xE2A|.'snt_é中") + list(_BYTE_CHARS[150:200])), max_size=5),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=3),
    ),
    max_size=12,
)


def _reference_decoder(spec: dict[str, Any]) -> Any:
    tokenizers = require_module("tokenizers")
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": spec,
        "model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
    }
    return tokenizers.Tokenizer.from_str(json.dumps(doc)).decoder


@pytest.mark.parametrize("index", range(len(DECODERS)))
def test_decoder_types(index: int) -> None:
    spec = DECODERS[index]
    ref = _reference_decoder(spec)
    ours = build_decoder(spec)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(tokens_strategy)
    def prop(tokens: list[str]) -> None:
        _same(_outcome(lambda: ours.decode(tokens)), _outcome(lambda: ref.decode(tokens)), f"{spec} on {tokens!r}")

    prop()
    for tokens in ([], [""], [" "], ["a"], [" a "], ["aa", "a"], ["<0xE2>", "<0x82>", "<0xAC>", "x"], ["▁a", "▁"]):
        _same(_outcome(lambda: ours.decode(tokens)), _outcome(lambda: ref.decode(tokens)), f"{spec} on {tokens!r}")


def test_byte_level_lossy_decoding_matches_rust() -> None:
    """Random byte strings through the byte-level alphabet: U+FFFD placement must match
    Rust's `from_utf8_lossy`."""
    spec = DECODERS[0]
    ref = _reference_decoder(spec)
    ours = build_decoder(spec)
    table = bytes_to_unicode()
    rng = random.Random(5)
    interesting = [0x41, 0x20, 0xC2, 0xC3, 0xE0, 0xE2, 0xED, 0xF0, 0xF4, 0xF5, 0x80, 0x82, 0x9F, 0xA0, 0xBF, 0xFF]
    for _ in range(400):
        data = bytes(rng.choice(interesting) if rng.random() < 0.8 else rng.randrange(256) for _ in range(rng.randint(0, 12)))
        tokens = ["".join(table[b] for b in data[i : i + 3]) for i in range(0, len(data), 3)]
        assert ours.decode(tokens) == ref.decode(tokens), data


def test_strip_panics_like_tokenizers() -> None:
    ours = build_decoder({"type": "Strip", "content": " ", "start": 1, "stop": 1})
    with pytest.raises(PanicException, match="slice index starts at 1 but ends at 0"):
        ours.decode([" "])
    with pytest.raises(PanicException, match="index out of bounds"):
        ours.decode([""])


def test_unsupported_decoders_name_their_path() -> None:
    with pytest.raises(UnsupportedComponent, match=r"decoder\.decoders\[1\]\.pattern"):
        build_decoder({"type": "Sequence", "decoders": [{"type": "Fuse"}, {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}]})
    with pytest.raises(UnsupportedComponent, match=r"decoder: Nope"):
        build_decoder({"type": "Nope"})
    with pytest.raises(UnsupportedComponent):
        build_decoder({"type": "Replace", "pattern": {"String": ""}, "content": "x"})
    assert build_decoder(None) is None
