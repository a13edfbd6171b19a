"""crayon_hf.transformers.CrayonTokenizer against the stock transformers tokenizer, folder by folder.

For every folder in ../shared/vocab/hf, `ref = AutoTokenizer.from_pretrained(folder)` and
`ours = CrayonTokenizer.from_pretrained(folder)` (loaded once per folder for this module) must be
indistinguishable: the same class family, and for every call the same result -- the same keys in
the same order and the same values of the same types (lists, numpy arrays, torch tensors with the
same dtype and shape), the same `encodings` behind a BatchEncoding, and where the stock tokenizer
raises, the same exception type and message.

Covered: `__call__` over a matrix of options (padding, truncation, overflow, tensors, the
return_* flags, pairs, words, split special tokens), single strings and pairs, the BatchEncoding
helpers (tokens, word_ids, char_to_token, ...), encode / tokenize / vocabulary calls, decode and
batch_decode, attributes changed after loading, from_pretrained options, added tokens, chat
templates, errors and odd inputs, and hypothesis-generated batches. Samples are
CI-sized (short_docs.jsonl, random corpus slices, edge strings); `pytest -m full` runs the whole of
short_docs.jsonl through every folder.

The byte-level folders run natively; the others (WordPiece, Unigram, SentencePiece-style BPE) fall
back to the stock backend and must give identical outputs all the same.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import (
    BYTE_LEVEL_FOLDERS,
    NATIVE_FOLDERS,
    CORPORA,
    VOCAB,
    corpus_text,
    random_slices,
    require_module,
    require_shared,
    require_torch,
    scratch_dir,
    short_docs,
)

FOLDERS = NATIVE_FOLDERS
# The wide option matrices run on every byte-level folder and on one folder of each other family
# (with left padding); every folder still runs the core sample, decode, vocabulary and encode
# checks (and everything under -m full).
MATRIX_FOLDERS = BYTE_LEVEL_FOLDERS + ["bert_base_uncased", "mistral_v0_1", "xlm_roberta_paraphrase_mpnet"]

SLICE_CORPORA = [
    "en_tinyshakespeare.txt",
    "zh_hongloumeng.txt",
    "ja_wagahaiwa_nekodearu.txt",
    "code_python_stdlib.txt",
    "multi_udhr_scripts.txt",
]


# ---------------------------------------------------------------------------- loading


_LOADED: dict[str, tuple[object, object, list[str]]] = {}


def give_pad_token(tok) -> None:
    """gpt2, clip, ... have no pad token: use eos (or, without one, the first added token, or id 0),
    the same way on both tokenizers."""
    if tok.pad_token is None:
        added = [t.content for _, t in sorted(tok.added_tokens_decoder.items())]
        tok.pad_token = tok.eos_token or (added[0] if added else tok.convert_ids_to_tokens(0))


# True in tests/test_transformers_lazy.py: `ours` is then restored from a folder crayon-hf saved
# (crayon_state.json + crayon.dat), with its stock backend not built until something reads it.
LAZY = False
_SAVED: dict[str, str] = {}


def _saved_folder(folder: str, path: str) -> str:
    """The folder as CrayonTokenizer.save_pretrained writes it, once per session."""
    from crayon_hf.transformers import CrayonTokenizer

    if folder not in _SAVED:
        target = str(scratch_dir(f"crayon-saved-{folder}-"))
        CrayonTokenizer.from_pretrained(path).save_pretrained(target)
        _SAVED[folder] = target
    return _SAVED[folder]


def load_ours(folder: str):
    """CrayonTokenizer.from_pretrained of the shared folder, or (LAZY) of its saved copy."""
    from crayon_hf.transformers import CrayonTokenizer

    path = str(require_shared(VOCAB / "hf" / folder / "tokenizer.json").parent)
    if not LAZY:
        return CrayonTokenizer.from_pretrained(path)
    saved = _saved_folder(folder, path)
    ours = CrayonTokenizer.from_pretrained(saved)
    if "_crayon_lazy" in ours.__dict__:
        assert "_tokenizer" not in ours.__dict__, "restored with its backend already built"
    return ours


def load_fresh(folder: str):
    """(ref, ours) straight from the folder, untouched. LAZY: both from the saved copy (the stock
    load of a saved folder is not always the stock load of the original: Mistral's is not)."""
    transformers = require_module("transformers")

    path = str(require_shared(VOCAB / "hf" / folder / "tokenizer.json").parent)
    if LAZY:
        auto = transformers.AutoTokenizer
        stock = auto._crayon_original_from_pretrained.__func__  # the unwrapped stock method
        ours = load_ours(folder)
        return stock(auto, _saved_folder(folder, path)), ours
    return transformers.AutoTokenizer.from_pretrained(path), load_ours(folder)


def load_pair(folder: str):
    """(ref, ours) for a folder with a pad token, loaded once for this module. Tests that change a
    tokenizer restore it, or load their own (`load_fresh`)."""
    if folder not in _LOADED:
        ref, ours = load_fresh(folder)
        # The backend states as loaded (the stock tokenizer leaves padding/truncation settings on
        # its backend after each call, so this is only comparable now). LAZY: read from a twin, so
        # that `ours` runs the tests with its backend not built yet.
        twin = load_ours(folder) if LAZY else ours
        # Kept as text: parsed, a vocabulary's merges are ~10^5 lists the cyclic GC would walk
        # in every full collection for the rest of the module.
        states = [t.backend_tokenizer.to_str() for t in (ref, twin)]
        for t in (ref, ours):
            give_pad_token(t)
        _LOADED[folder] = (ref, ours, states)
    return _LOADED[folder][:2]


def loaded_states(folder: str) -> list[str]:
    """The backend states (tokenizer.json text) of (ref, ours) right after loading."""
    load_pair(folder)
    return _LOADED[folder][2]


@pytest.fixture(scope="module", autouse=True)
def _release_tokenizers():
    yield
    _LOADED.clear()


@pytest.fixture(params=FOLDERS)
def folder(request):
    return request.param


@pytest.fixture
def pair(folder):
    return load_pair(folder)


@pytest.fixture(params=MATRIX_FOLDERS)
def matrix_pair(request):
    return load_pair(request.param)


# ---------------------------------------------------------------------------- samples


@functools.cache
def base_texts() -> tuple[str, ...]:
    """~200 short documents and slices of a few corpora (the same for every folder)."""
    texts = short_docs(200)
    for k, name in enumerate(SLICE_CORPORA):
        texts += random_slices(corpus_text(require_shared(CORPORA / name)), 8, seed=40 + k)
    return tuple(texts)


@functools.cache
def long_doc() -> str:
    return corpus_text(require_shared(CORPORA / "en_gutenberg_big.txt"), 30_000)


def special_strings(ref) -> list[str]:
    """The folder's special tokens and a few of its added tokens, as text."""
    added = [t.content for _, t in sorted(ref.added_tokens_decoder.items())]
    return list(dict.fromkeys(list(ref.all_special_tokens) + added[:3] + added[-3:]))[:10]


def edge_texts(ref) -> list[str]:
    specials = special_strings(ref)
    eos = ref.eos_token or (specials[0] if specials else "</s>")
    return [
        "",
        " ",
        "\n\n",
        "\t x \r\n",
        "a",
        "  leading and trailing  ",
        "Hello world! Don't stop , ok ? I'm here .",
        "日本語 😀 é\u0301 ß",
        f"Hello{eos}world",
        eos,
        f" {eos} ",
        f"text {eos}{eos} more",
        " ".join(specials),
        "".join(specials),
    ]


def sample(ref) -> list[str]:
    """The CI sample: base texts plus this folder's edge strings."""
    return list(base_texts()) + edge_texts(ref)


def small_sample(ref) -> list[str]:
    """A smaller sample for the wide option matrix: docs, slices of every corpus, edge strings."""
    base = base_texts()
    return list(base[:16]) + list(base[200::6]) + edge_texts(ref)


SHORT_SECONDS = ["What is it?", "", " ", "Who?", "日本語は？", "a b c d e f g h", "x"]


def pair_batches(ref) -> dict[str, list[tuple[str, str]]]:
    """Pairs arranged so that each truncation strategy has room to work."""
    firsts = small_sample(ref)
    shorts = SHORT_SECONDS + [f"why{ref.eos_token or ''}not"]
    return {
        "long_first": [(t, shorts[i % len(shorts)]) for i, t in enumerate(firsts)],
        "long_second": [(shorts[i % len(shorts)], t) for i, t in enumerate(firsts)],
        "mixed": [(firsts[i], firsts[-1 - i]) for i in range(len(firsts))],
    }


def word_lists(ref) -> list[list[str]]:
    words = [t.split()[:40] for t in small_sample(ref)]
    words[1] = ["a b", "", " c", "日本", "x"]
    return words


# ---------------------------------------------------------------------------- comparison


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "shape")


def _first_difference(a, b, path: str) -> str | None:
    """Where `a` (ours) and `b` (stock) differ, in value or in type, or None."""
    if type(a) is not type(b):
        return f"{path}: type {type(a).__name__} vs {type(b).__name__} ({a!r:.80} vs {b!r:.80})"
    if isinstance(a, np.ndarray):
        for attr in ("dtype", "shape"):
            if getattr(a, attr) != getattr(b, attr):
                return f"{path}: {attr} {getattr(a, attr)} vs {getattr(b, attr)}"
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(a.ravel(), b.ravel())):
                if (d := _first_difference(x, y, f"{path}.flat[{i}]")) is not None:
                    return d
            return None
        if not np.array_equal(a, b):
            i = tuple(np.argwhere(a != b)[0])
            return f"{path}: values differ first at {i}: {a[i]} vs {b[i]}"
        if a.flags.c_contiguous != b.flags.c_contiguous or a.flags.writeable != b.flags.writeable:
            return f"{path}: flags {a.flags} vs {b.flags}"
        return None
    if _is_torch(a):
        import torch

        for attr in ("dtype", "shape", "device"):
            if getattr(a, attr) != getattr(b, attr):
                return f"{path}: {attr} {getattr(a, attr)} vs {getattr(b, attr)}"
        if not torch.equal(a, b):
            i = tuple((a != b).nonzero()[0].tolist())
            return f"{path}: values differ first at {i}: {a[i]} vs {b[i]}"
        if a.is_contiguous() != b.is_contiguous():
            return f"{path}: contiguity {a.is_contiguous()} vs {b.is_contiguous()}"
        return None
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{path}: keys {list(a)} vs {list(b)}"
        for k in a:
            if (d := _first_difference(a[k], b[k], f"{path}[{k!r}]")) is not None:
                return d
        return None
    if isinstance(a, (list, tuple)):
        # Fast path: equal values (== does not tell int from bool or np.int64, nor a list from a
        # tuple inside, so the types are compared along the first and last elements).
        if a == b and (not a or (_first_difference(a[0], b[0], path) is None
                                 and _first_difference(a[-1], b[-1], path) is None)):
            return None
        if len(a) != len(b):
            return f"{path}: lengths {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            if (d := _first_difference(x, y, f"{path}[{i}]")) is not None:
                return d
        return f"{path}: {a!r:.200} vs {b!r:.200}"
    if a != b or repr(a) != repr(b):
        return f"{path}: {a!r:.200} vs {b!r:.200}"
    return None


def assert_same(ours, ref, context: str) -> None:
    difference = _first_difference(ours, ref, "")
    assert difference is None, f"{context}: ours vs stock differ at {difference}"


ENCODING_FIELDS = ("ids", "type_ids", "tokens", "offsets", "attention_mask", "special_tokens_mask", "word_ids",
                   "sequence_ids", "n_sequences")


def encoding_fields(enc, overflowing: bool = True) -> dict:
    """An Encoding's fields; its overflowing encodings' too, or only how many there are."""
    fields = {name: getattr(enc, name) for name in ENCODING_FIELDS}
    fields["len"] = len(enc)
    fields["overflowing"] = [encoding_fields(o) for o in enc.overflowing] if overflowing else len(enc.overflowing)
    return fields


def assert_same_batch(ours, ref, context: str) -> None:
    """Two BatchEncodings (or whatever the call returned): keys in order, values with their types,
    and the encodings behind them."""
    from transformers import BatchEncoding

    if not isinstance(ref, BatchEncoding):
        assert_same(ours, ref, context)
        return
    assert isinstance(ours, BatchEncoding), f"{context}: ours returned {type(ours).__name__}, not a BatchEncoding"
    assert list(ours.keys()) == list(ref.keys()), f"{context}: keys {list(ours.keys())} vs {list(ref.keys())}"
    assert_same(dict(ours), dict(ref), context)
    assert ours.is_fast == ref.is_fast, f"{context}: is_fast"
    assert ours.n_sequences == ref.n_sequences, f"{context}: n_sequences {ours.n_sequences} vs {ref.n_sequences}"
    if ref.encodings is None:
        assert ours.encodings is None, f"{context}: ours has encodings, stock none"
        return
    assert ours.encodings is not None, f"{context}: ours has no encodings"
    assert len(ours.encodings) == len(ref.encodings), (
        f"{context}: {len(ours.encodings)} vs {len(ref.encodings)} encodings"
    )
    for i, (a, b) in enumerate(zip(ours.encodings, ref.encodings)):
        # Every encoding; the overflowing ones inside (quadratic with pairs) for the first few.
        full = i < 3
        assert_same(encoding_fields(a, full), encoding_fields(b, full), f"{context}: encodings[{i}]")


_PASS_THROUGH = (KeyboardInterrupt, SystemExit, pytest.fail.Exception, pytest.skip.Exception)


def outcome(call):
    """("ok", result) or ("raise", exception). Catches BaseException: a panic in the tokenizers
    library surfaces as pyo3_runtime.PanicException, which is not an Exception."""
    try:
        return "ok", call()
    except _PASS_THROUGH:
        raise
    except BaseException as e:  # noqa: BLE001
        return "raise", e


def _describe(e: BaseException) -> str:
    return f"{type(e).__module__}.{type(e).__qualname__}: {str(e)[:300]}"


def assert_same_call(ref_call, our_call, context: str, compare=assert_same_batch):
    """Run the stock call, then ours: the same result, or the same exception and message.
    Where the stock library panics (pyo3_runtime.PanicException, a BaseException), ours must raise
    its mirror (crayon_hf's PanicException, also a BaseException) with the same message.
    Returns (stock result, our result) when both succeed."""
    expected = outcome(ref_call)
    got = outcome(our_call)
    if expected[0] == "raise":
        e = expected[1]
        assert got[0] == "raise", f"{context}: stock raises {_describe(e)}, ours returns {got[1]!r:.200}"
        g = got[1]
        if type(e).__name__ == "PanicException":  # pyo3_runtime's type: ours mirrors it, by name
            assert type(g).__name__ == "PanicException" and not isinstance(g, Exception) and str(g) == str(e), (
                f"{context}: stock panics with {str(e)!r:.300}; ours raises {_describe(g)}"
            )
        else:
            assert type(g) is type(e) and str(g) == str(e), (
                f"{context}: stock raises {_describe(e)}; ours raises {_describe(g)}"
            )
        return None
    if got[0] == "raise":
        pytest.fail(f"{context}: stock returns, ours raises {_describe(got[1])}")
    compare(got[1], expected[1], context)
    return expected[1], got[1]


def call_both(ref, ours, context: str, *args, **kwargs):
    """`tok(*args, **kwargs)` on both, compared."""
    if kwargs.get("return_tensors") == "pt":
        require_torch()
    return assert_same_call(lambda: ref(*args, **kwargs), lambda: ours(*args, **kwargs), context)


# ---------------------------------------------------------------------------- loading and identity


def test_class_and_backend(folder):
    ref, ours = load_pair(folder)
    assert isinstance(ours, type(ref)), f"{type(ours).__mro__} is not a subclass of {type(ref).__name__}"
    assert type(ours).__name__ == f"Crayon{type(ref).__name__}" or type(ref).__name__ == "TokenizersBackend"
    # "native", or "native (except _decode)" where the class overrides or wraps decoding
    # (whisper's _decode, CLIP's backend decode)
    assert re.fullmatch(r"native( \(except [_a-z, ]+\))?", ours.crayon_backend), ours.crayon_backend
    for name in ("padding_side", "truncation_side", "model_input_names", "model_max_length",
                 "clean_up_tokenization_spaces", "split_special_tokens", "is_fast", "chat_template"):
        assert getattr(ours, name) == getattr(ref, name), name
    ref_state, our_state = loaded_states(folder)
    # Both written by tokenizers' to_str, so equal states are equal texts; parsed (a second for
    # Gemma's 12 MB) only to show where they differ.
    if our_state != ref_state:
        assert json.loads(our_state) == json.loads(ref_state), "the backend tokenizer.json states differ after loading"


# ---------------------------------------------------------------------------- __call__: batches of texts


CORE_OPTIONS = {
    "defaults": {},
    "offsets_special_mask_length": {"return_offsets_mapping": True, "return_special_tokens_mask": True,
                                    "return_length": True},
    "pad_truncate_64_np": {"padding": True, "truncation": True, "max_length": 64, "return_tensors": "np"},
}


@pytest.mark.parametrize("options", list(CORE_OPTIONS.values()), ids=list(CORE_OPTIONS))
def test_call_sample(pair, options):
    """The whole CI sample in one batch, with the options that matter most."""
    ref, ours = pair
    call_both(ref, ours, f"sample {options}", sample(ref), **options)


BATCH_OPTIONS = {
    "no_special_tokens": {"add_special_tokens": False},
    "pad_true": {"padding": True},
    "pad_longest_left": {"padding": "longest", "padding_side": "left"},
    "pad_max_length_truncate": {"padding": "max_length", "max_length": 48, "truncation": True},
    "pad_max_length_no_truncate": {"padding": "max_length", "max_length": 48},
    "pad_multiple_of_8": {"padding": True, "pad_to_multiple_of": 8},
    "pad_max_length_multiple_left": {"padding": "max_length", "max_length": 40, "pad_to_multiple_of": 8,
                                     "padding_side": "left", "truncation": True},
    "truncate_true_12": {"truncation": True, "max_length": 12},
    "truncate_longest_first_7": {"truncation": "longest_first", "max_length": 7},
    "truncate_only_first_9": {"truncation": "only_first", "max_length": 9},
    "truncate_model_max_length": {"truncation": True},
    "max_length_without_truncation": {"max_length": 10},
    "truncate_false_pad_max": {"truncation": False, "padding": "max_length", "max_length": 20},
    "overflow_without_truncation": {"return_overflowing_tokens": True},
    "overflow_stride_3": {"truncation": True, "max_length": 16, "stride": 3, "return_overflowing_tokens": True},
    "overflow_padded_offsets": {"truncation": True, "max_length": 20, "stride": 5, "return_overflowing_tokens": True,
                                "padding": True, "return_offsets_mapping": True},
    "overflow_no_stride_left": {"truncation": True, "max_length": 8, "return_overflowing_tokens": True,
                                "padding": "max_length", "padding_side": "left"},
    "offsets": {"return_offsets_mapping": True},
    "offsets_padded_multiple": {"return_offsets_mapping": True, "padding": True, "pad_to_multiple_of": 16},
    "special_tokens_mask": {"return_special_tokens_mask": True},
    "special_tokens_mask_padded": {"return_special_tokens_mask": True, "padding": True},
    "length": {"return_length": True},
    "length_padded": {"return_length": True, "padding": True},
    "token_type_ids_true": {"return_token_type_ids": True},
    "token_type_ids_false": {"return_token_type_ids": False},
    "attention_mask_false": {"return_attention_mask": False},
    "attention_mask_false_padded": {"return_attention_mask": False, "padding": True},
    "split_special_tokens": {"split_special_tokens": True},
    "split_special_tokens_padded_offsets": {"split_special_tokens": True, "padding": True,
                                            "return_offsets_mapping": True},
    "no_special_padded_truncated": {"add_special_tokens": False, "padding": True, "truncation": True,
                                    "max_length": 10},
    "verbose_false": {"verbose": False, "truncation": True},
    "everything": {"padding": True, "truncation": True, "max_length": 32, "return_offsets_mapping": True,
                   "return_special_tokens_mask": True, "return_length": True, "return_token_type_ids": True},
    "everything_overflow": {"padding": True, "truncation": True, "max_length": 24, "stride": 2,
                            "return_overflowing_tokens": True, "return_offsets_mapping": True,
                            "return_special_tokens_mask": True, "return_length": True,
                            "return_token_type_ids": True},
    "np_unpadded": {"return_tensors": "np"},
    "np_padded": {"padding": True, "return_tensors": "np"},
    "np_everything": {"padding": True, "truncation": True, "max_length": 32, "return_offsets_mapping": True,
                      "return_special_tokens_mask": True, "return_length": True, "return_token_type_ids": True,
                      "return_tensors": "np"},
    "np_overflow": {"padding": True, "truncation": True, "max_length": 16, "stride": 4,
                    "return_overflowing_tokens": True, "return_tensors": "np"},
    "np_no_attention_left": {"padding": True, "padding_side": "left", "return_attention_mask": False,
                             "return_tensors": "np"},
    "pt_unpadded": {"return_tensors": "pt"},
    "pt_padded": {"padding": True, "return_tensors": "pt"},
    "pt_everything": {"padding": "max_length", "truncation": True, "max_length": 32, "pad_to_multiple_of": 16,
                      "return_offsets_mapping": True, "return_special_tokens_mask": True, "return_length": True,
                      "return_token_type_ids": True, "return_tensors": "pt"},
    "pt_overflow": {"padding": True, "truncation": True, "max_length": 16, "stride": 4,
                    "return_overflowing_tokens": True, "return_offsets_mapping": True, "return_tensors": "pt"},
    "pt_split_special_left": {"padding": True, "padding_side": "left", "split_special_tokens": True,
                              "return_tensors": "pt"},
}


@pytest.mark.parametrize("options", list(BATCH_OPTIONS.values()), ids=list(BATCH_OPTIONS))
def test_call_batch_options(matrix_pair, options):
    ref, ours = matrix_pair
    call_both(ref, ours, f"batch {options}", small_sample(ref), **options)


SINGLE_OPTIONS = {
    "defaults": {},
    "no_special_tokens": {"add_special_tokens": False},
    "pad_max_length_left": {"padding": "max_length", "max_length": 24, "padding_side": "left", "truncation": True},
    "truncate_overflow": {"truncation": True, "max_length": 6, "stride": 1, "return_overflowing_tokens": True},
    "returns": {"return_offsets_mapping": True, "return_special_tokens_mask": True, "return_length": True,
                "return_token_type_ids": True},
    "split_special_tokens": {"split_special_tokens": True, "return_offsets_mapping": True,
                             "return_attention_mask": False},
    "np": {"return_tensors": "np", "return_offsets_mapping": True},
    "pt": {"return_tensors": "pt", "return_length": True},
}


@pytest.mark.parametrize("options", list(SINGLE_OPTIONS.values()), ids=list(SINGLE_OPTIONS))
def test_call_single_string_and_pair(matrix_pair, options):
    """A single string (no batch dimension in the result) and a single pair."""
    ref, ours = matrix_pair
    texts = edge_texts(ref) + list(base_texts()[:6]) + [base_texts()[-1]]
    for i, text in enumerate(texts):
        call_both(ref, ours, f"single #{i} {text[:40]!r} {options}", text, **options)
    for i, (a, b) in enumerate(zip(texts, reversed(texts))):
        call_both(ref, ours, f"single pair #{i} {options}", a, b, **options)
        if not options:
            call_both(ref, ours, f"single pair #{i} (keywords)", text=a, text_pair=b)


def test_call_long_document(matrix_pair):
    ref, ours = matrix_pair
    doc = long_doc()
    for options in ({"truncation": True}, {"return_offsets_mapping": True, "return_special_tokens_mask": True},
                    {"truncation": True, "max_length": 512, "stride": 64, "return_overflowing_tokens": True,
                     "padding": True, "return_tensors": "np"},
                    {"truncation": True, "max_length": 100, "padding": "max_length", "return_offsets_mapping": True}):
        call_both(ref, ours, f"long document {options}", doc, **options)
        if options.get("truncation"):
            call_both(ref, ours, f"long document in a batch {options}", [doc, "short", ""], **options)


# ---------------------------------------------------------------------------- __call__: pairs


PAIR_OPTIONS = {
    "defaults": ("mixed", {}),
    "no_special_tokens": ("mixed", {"add_special_tokens": False}),
    "token_type_ids_true": ("mixed", {"return_token_type_ids": True}),
    "special_tokens_mask_offsets": ("mixed", {"return_special_tokens_mask": True, "return_offsets_mapping": True}),
    "pad_true_left": ("mixed", {"padding": True, "padding_side": "left", "return_token_type_ids": True}),
    "truncate_true_24": ("mixed", {"truncation": True, "max_length": 24}),
    "truncate_longest_first_overflow": ("mixed", {"truncation": "longest_first", "max_length": 24, "stride": 2,
                                                  "return_overflowing_tokens": True}),
    "truncate_only_first": ("long_first", {"truncation": "only_first", "max_length": 32}),
    "truncate_only_first_overflow": ("long_first", {"truncation": "only_first", "max_length": 32, "stride": 4,
                                                    "return_overflowing_tokens": True,
                                                    "return_offsets_mapping": True}),
    "truncate_only_second": ("long_second", {"truncation": "only_second", "max_length": 32}),
    "truncate_only_second_overflow_padded": ("long_second", {"truncation": "only_second", "max_length": 32,
                                                             "stride": 3, "return_overflowing_tokens": True,
                                                             "padding": True}),
    "truncate_only_second_too_short": ("long_first", {"truncation": "only_second", "max_length": 12}),
    "truncate_only_first_too_short": ("long_second", {"truncation": "only_first", "max_length": 12}),
    "split_special_tokens": ("mixed", {"split_special_tokens": True, "return_offsets_mapping": True}),
    "np_everything": ("mixed", {"padding": "max_length", "truncation": True, "max_length": 40,
                                "return_offsets_mapping": True, "return_special_tokens_mask": True,
                                "return_length": True, "return_token_type_ids": True, "return_tensors": "np"}),
    "pt_overflow": ("long_first", {"padding": True, "truncation": "only_first", "max_length": 24, "stride": 2,
                                   "return_overflowing_tokens": True, "return_token_type_ids": True,
                                   "return_tensors": "pt"}),
}


@pytest.mark.parametrize("arrangement, options", list(PAIR_OPTIONS.values()), ids=list(PAIR_OPTIONS))
def test_call_pairs(matrix_pair, arrangement, options):
    ref, ours = matrix_pair
    pairs = pair_batches(ref)[arrangement]
    firsts, seconds = [a for a, _ in pairs], [b for _, b in pairs]
    call_both(ref, ours, f"pairs {arrangement} {options}", firsts, seconds, **options)
    if not options:
        call_both(ref, ours, f"pairs as tuples {arrangement}", tuple(firsts), tuple(seconds))


# ---------------------------------------------------------------------------- __call__: words


WORD_OPTIONS = {
    "defaults": {},
    "offsets_special_mask": {"return_offsets_mapping": True, "return_special_tokens_mask": True},
    "no_special_tokens": {"add_special_tokens": False},
    "pad_truncate_overflow": {"padding": True, "truncation": True, "max_length": 12, "stride": 2,
                              "return_overflowing_tokens": True},
    "np": {"padding": True, "return_tensors": "np", "return_offsets_mapping": True},
}


@pytest.mark.parametrize("options", list(WORD_OPTIONS.values()), ids=list(WORD_OPTIONS))
def test_call_split_into_words(matrix_pair, options):
    ref, ours = matrix_pair
    words = word_lists(ref)
    call_both(ref, ours, f"words batch {options}", words, is_split_into_words=True, **options)
    call_both(ref, ours, f"words single {options}", words[0], is_split_into_words=True, **options)
    call_both(ref, ours, f"words single pair {options}", words[0], words[2], is_split_into_words=True, **options)
    seconds = [s.split() for s in SHORT_SECONDS] * len(words)
    seconds = seconds[: len(words)]
    if options.get("return_overflowing_tokens"):
        # longest_first overflow of pairs multiplies the windows (tens of thousands of rows); and
        # the first sequence keeps more than the stride (else the stock library panics or errors,
        # which of the two depending on its threads)
        options = {**options, "truncation": "only_first", "max_length": 24}
    call_both(ref, ours, f"words batch pairs {options}", words, seconds, is_split_into_words=True, **options)


# ---------------------------------------------------------------------------- __call__: sides and errors


def test_side_attributes(matrix_pair):
    """padding_side / truncation_side set on the tokenizer (not per call) are honoured."""
    ref, ours = matrix_pair
    texts = small_sample(ref)[::4]
    saved = (ref.padding_side, ref.truncation_side)
    try:
        for padding_side in ("left", "right"):
            for truncation_side in ("left", "right"):
                for t in (ref, ours):
                    t.padding_side, t.truncation_side = padding_side, truncation_side
                context = f"padding_side={padding_side} truncation_side={truncation_side}"
                call_both(ref, ours, context, texts, padding=True, truncation=True, max_length=16,
                          return_offsets_mapping=True)
                call_both(ref, ours, context + " overflow", texts, padding=True, truncation=True, max_length=10,
                          stride=2, return_overflowing_tokens=True)
                call_both(ref, ours, context + " pairs", texts, texts[::-1], truncation="longest_first",
                          max_length=20, padding="max_length")
    finally:
        for t in (ref, ours):
            t.padding_side, t.truncation_side = saved


def test_other_attributes(matrix_pair):
    """split_special_tokens, model_max_length and pad_token changed on the tokenizer after loading
    (restored afterwards)."""
    ref, ours = matrix_pair
    texts = small_sample(ref)[::2]
    saved = (ref.split_special_tokens, ref.model_max_length, ref.pad_token)
    try:
        for t in (ref, ours):
            t.split_special_tokens = True
        call_both(ref, ours, "split_special_tokens attribute", texts, return_offsets_mapping=True)
        assert_same([ours.tokenize(t) for t in texts], [ref.tokenize(t) for t in texts], "tokenize, split attribute")
        call_both(ref, ours, "split_special_tokens attribute overridden", texts, split_special_tokens=False)
        for t in (ref, ours):
            t.split_special_tokens = saved[0]
            t.model_max_length = 12
        call_both(ref, ours, "model_max_length=12", texts, truncation=True, padding="max_length")
        call_both(ref, ours, "model_max_length=12 pairs", texts, texts[::-1], truncation=True)
        for t in (ref, ours):
            t.model_max_length = saved[1]
            t.pad_token = t.convert_ids_to_tokens(5)
        call_both(ref, ours, "another pad token", texts, texts[::-1], padding=True, return_token_type_ids=True)
    finally:
        for t in (ref, ours):
            t.split_special_tokens, t.model_max_length, t.pad_token = saved


def test_text_target_and_pad(matrix_pair):
    ref, ours = matrix_pair
    texts = small_sample(ref)
    call_both(ref, ours, "text_target", texts, text_target=texts[::-1], padding=True)
    call_both(ref, ours, "text_target only", text_target=texts, truncation=True, max_length=8)
    for name, call in {
        "pad(batch)": lambda t: t.pad(t(texts), return_tensors="np"),
        "pad(batch with special_tokens_mask)": lambda t: t.pad(t(texts, return_special_tokens_mask=True),
                                                               padding="max_length", max_length=300),
        "pad(list of encodings)": lambda t: t.pad([t(x) for x in texts[:6]], padding_side="left"),
        "get_special_tokens_mask": lambda t: [t.get_special_tokens_mask(ids, already_has_special_tokens=True)
                                              for ids in t(texts)["input_ids"]],
    }.items():
        assert_same_call(lambda: call(ref), lambda: call(ours), name)


LOAD_OPTIONS = {  # folder, from_pretrained arguments, whether to flip add_bos/eos_token afterwards
    "gpt2-add_prefix_space": ("gpt2", {"add_prefix_space": True}, False),
    "roberta_base-add_prefix_space": ("roberta_base", {"add_prefix_space": True}, False),
    "gpt2-add_bos_token": ("gpt2", {"add_bos_token": True}, True),
    "llama3_1-add_eos_token": ("llama3_1", {"add_eos_token": True}, False),
    "whisper-language-task": ("whisper_large_v3", {"language": "french", "task": "transcribe"}, False),
}


@pytest.mark.parametrize("folder, kwargs, flip", list(LOAD_OPTIONS.values()), ids=list(LOAD_OPTIONS))
def test_load_options(folder, kwargs, flip):
    """from_pretrained keyword arguments that change the backend (pre-tokenizer, post-processor),
    and the bos/eos switches flipped after loading (each new post-processor is a recompile, ~2 s for
    a 128k vocabulary, hence only on gpt2)."""
    transformers = require_module("transformers")
    from crayon_hf.transformers import CrayonTokenizer

    path = str(require_shared(VOCAB / "hf" / folder / "tokenizer.json").parent)
    ref = transformers.AutoTokenizer.from_pretrained(path, **kwargs)
    ours = CrayonTokenizer.from_pretrained(path, **kwargs)
    for t in (ref, ours):
        give_pad_token(t)
    assert ours.crayon_backend.startswith("native"), ours.crayon_backend
    texts = small_sample(ref)
    words = [t.split() for t in texts]
    call_both(ref, ours, f"{kwargs}", texts, padding=True, return_offsets_mapping=True)
    call_both(ref, ours, f"{kwargs} pairs", texts, texts[::-1], return_offsets_mapping=True)
    call_both(ref, ours, f"{kwargs} words", words, is_split_into_words=True, return_offsets_mapping=True)
    for name in ("add_bos_token", "add_eos_token") if flip else ():
        if hasattr(ref, name):
            for value in (True, False):
                for t in (ref, ours):
                    setattr(t, name, value)
                call_both(ref, ours, f"{kwargs} then {name}={value}", texts, texts[::-1])


ERROR_CALLS = {
    "int_text": ((123,), {}),
    "none_text": ((None,), {}),
    "nested_too_deep": (([[["a"]]],), {}),
    "batch_with_string_pair": ((["a", "b"], "c"), {}),
    "batch_length_mismatch": ((["a", "b"], ["c"]), {}),
    "empty_batch": (([],), {}),
    "empty_batch_padded": (([],), {"padding": True}),
    "empty_texts_padded": ((["", ""],), {"padding": True, "add_special_tokens": False}),
    "empty_texts_padded_np": ((["", ""],), {"padding": True, "add_special_tokens": False, "return_tensors": "np",
                                            "return_offsets_mapping": True}),
    "empty_texts_padded_pt": ((["", ""],), {"padding": True, "add_special_tokens": False, "return_tensors": "pt",
                                            "return_offsets_mapping": True}),
    "empty_single_np": (("",), {"add_special_tokens": False, "return_tensors": "np", "return_offsets_mapping": True}),
    "stride_not_below_max_length": ((["some text here for the stride"],), {"truncation": True, "max_length": 4,
                                                                             "stride": 4,
                                                                             "return_overflowing_tokens": True}),
    "only_second_without_pair": ((["some text here"],), {"truncation": "only_second", "max_length": 3}),
    "max_length_not_multiple": ((["x"],), {"padding": "max_length", "truncation": True, "max_length": 10,
                                           "pad_to_multiple_of": 8}),
    "bad_padding_value": ((["x"],), {"padding": "sideways"}),
    "bad_truncation_value": ((["x"],), {"truncation": "sideways"}),
    "bad_padding_side": ((["x", "longer text"],), {"padding": True, "padding_side": "middle"}),
    "bad_tensor_type": ((["x"],), {"return_tensors": "tf2"}),
    "ragged_pt": ((["x", "a longer text here"],), {"return_tensors": "pt"}),
    "max_length_zero": ((["x y z"],), {"truncation": True, "max_length": 0}),
    "words_not_split": (("plain string",), {"is_split_into_words": True}),
    "lone_surrogate": ((["a\ud800b"],), {}),
    "lone_surrogate_single": (("a\ud800b",), {}),
    "lone_surrogate_in_pair": ((["a"], ["b\udfffc"]), {}),
    "words_batch_empty_word_list": (([[], ["a", "b"]],), {"is_split_into_words": True, "padding": True}),
}


@pytest.mark.parametrize("args, kwargs", list(ERROR_CALLS.values()), ids=list(ERROR_CALLS))
def test_call_errors_and_odd_inputs(matrix_pair, args, kwargs):
    """Whatever the stock tokenizer does with these (raise, or return), ours does the same."""
    ref, ours = matrix_pair
    if kwargs.get("return_tensors") == "pt":
        require_torch()
    assert_same_call(lambda: ref(*args, **kwargs), lambda: ours(*args, **kwargs), f"{args!r:.60} {kwargs}")


def test_pad_to_model_max_length(pair):
    """padding="max_length" without max_length pads to model_max_length (or, where that is the
    "no limit" sentinel, does not pad); folders with long real limits (131072) pad two documents."""
    ref, ours = pair
    docs = 2 if 4096 < ref.model_max_length < 10**20 else 8  # 131072-long rows: keep the lists small
    call_both(ref, ours, "padding=max_length", small_sample(ref)[:docs], padding="max_length", return_tensors="np")
    call_both(ref, ours, "padding=max_length truncation", small_sample(ref)[:docs], padding="max_length",
              truncation=True, return_offsets_mapping=True)


def test_padding_without_pad_token():
    ref, ours = load_fresh("gpt2")
    assert ref.pad_token is None and ours.pad_token is None
    for kwargs in ({"padding": True}, {"padding": "max_length", "max_length": 8}):
        assert_same_call(lambda: ref(["a", "b c"], **kwargs), lambda: ours(["a", "b c"], **kwargs), str(kwargs))
    call_both(ref, ours, "no padding needed", ["a", "b c"])


def test_too_long_warning_is_logged_the_same(caplog):
    ref, ours = load_pair("gpt2")
    doc = long_doc()
    records = []
    for tok in (ref, ours):
        tok.deprecation_warnings.pop("sequence-length-is-longer-than-the-specified-maximum", None)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="transformers"):
            tok([doc])
        records.append([r.getMessage() for r in caplog.records])
    assert records[1] == records[0]


# ---------------------------------------------------------------------------- BatchEncoding helpers


def check_helpers(ref_batch, our_batch, texts: list, context: str) -> None:
    """Every BatchEncoding accessor, row by row, on both."""
    assert our_batch.n_sequences == ref_batch.n_sequences, context
    assert len(our_batch.encodings) == len(ref_batch.encodings), context
    mapping = ref_batch.get("overflow_to_sample_mapping")
    rng = random.Random(3)
    for i in range(len(ref_batch.encodings)):
        row = f"{context} row {i}"
        a, b = our_batch.encodings[i], ref_batch.encodings[i]
        assert_same(encoding_fields(a), encoding_fields(b), f"{row} encodings")
        assert_same(our_batch[i].ids, ref_batch[i].ids, f"{row} batch[i]")
        for name in ("tokens", "word_ids", "sequence_ids"):
            assert_same(getattr(our_batch, name)(i), getattr(ref_batch, name)(i), f"{row} {name}(i)")
        n = len(b.ids)
        for j in sorted(rng.sample(range(n), min(n, 12))) + [n, -1]:
            for name in ("token_to_chars", "token_to_word", "token_to_sequence"):
                assert_same_call(lambda: getattr(ref_batch, name)(i, j), lambda: getattr(our_batch, name)(i, j),
                                 f"{row} {name}({i}, {j})", compare=assert_same_value)
        text = texts[mapping[i] if mapping is not None else i]
        pieces = text if isinstance(text, tuple) else (text,)
        for seq, piece in enumerate(pieces):
            if not isinstance(piece, str):
                continue
            positions = sorted(set(rng.sample(range(len(piece) + 1), min(len(piece) + 1, 10)) + [0, len(piece)]))
            for pos in positions:
                assert_same_call(lambda: ref_batch.char_to_token(i, pos, sequence_index=seq),
                                 lambda: our_batch.char_to_token(i, pos, sequence_index=seq),
                                 f"{row} char_to_token({i}, {pos}, sequence_index={seq})", compare=assert_same_value)
                assert_same_call(lambda: ref_batch.char_to_word(i, pos, sequence_index=seq),
                                 lambda: our_batch.char_to_word(i, pos, sequence_index=seq),
                                 f"{row} char_to_word({i}, {pos}, sequence_index={seq})", compare=assert_same_value)
        for w in sorted({x for x in b.word_ids if x is not None})[:8]:
            for name in ("word_to_tokens", "word_to_chars"):
                assert_same_call(lambda: getattr(ref_batch, name)(i, w), lambda: getattr(our_batch, name)(i, w),
                                 f"{row} {name}({i}, {w})", compare=assert_same_value)


def assert_same_value(ours, ref, context: str) -> None:
    """Named tuples (CharSpan, TokenSpan) compare as tuples of their type."""
    assert type(ours) is type(ref) and ours == ref, f"{context}: {ours!r} vs {ref!r}"


HELPER_CASES = {
    "texts": {},
    "texts_offsets_no_special": {"return_offsets_mapping": True, "add_special_tokens": False},
    "texts_padded_left": {"padding": True, "padding_side": "left"},
    "texts_overflow": {"truncation": True, "max_length": 10, "stride": 2, "return_overflowing_tokens": True},
    "pairs": {"pairs": True},
    "pairs_overflow": {"pairs": True, "truncation": "only_second", "max_length": 40, "stride": 3,
                       "return_overflowing_tokens": True, "padding": True},
}


@pytest.mark.parametrize("options", list(HELPER_CASES.values()), ids=list(HELPER_CASES))
def test_batch_encoding_helpers(matrix_pair, options):
    ref, ours = matrix_pair
    options = dict(options)
    texts = small_sample(ref)[:30] + edge_texts(ref)[-6:]
    if options.pop("pairs", False):
        items = [(SHORT_SECONDS[i % len(SHORT_SECONDS)], t) for i, t in enumerate(texts)]
        args = ([a for a, _ in items], [b for _, b in items])
    else:
        items, args = texts, (texts,)
    result = call_both(ref, ours, f"helpers {options}", *args, **options)
    if result is None:
        return
    check_helpers(result[0], result[1], items, f"helpers {options}")


def test_batch_encoding_helpers_single(matrix_pair):
    """Without a batch index (single input): tokens(), word_ids(), char_to_token(pos), ..."""
    ref, ours = matrix_pair
    for text in (base_texts()[3], edge_texts(ref)[-4]):
        a, b = ours(text), ref(text)
        assert_same_batch(a, b, "single")
        assert_same(a.tokens(), b.tokens(), "tokens()")
        assert_same(a.word_ids(), b.word_ids(), "word_ids()")
        assert_same(a.sequence_ids(), b.sequence_ids(), "sequence_ids()")
        for pos in range(0, len(text) + 1, max(1, len(text) // 10)):
            assert_same_call(lambda: b.char_to_token(pos), lambda: a.char_to_token(pos), f"char_to_token({pos})",
                             compare=assert_same_value)
        for j in range(len(b["input_ids"])):
            assert_same_call(lambda: b.token_to_chars(j), lambda: a.token_to_chars(j), f"token_to_chars({j})",
                             compare=assert_same_value)


def test_batch_encoding_helpers_words(matrix_pair):
    ref, ours = matrix_pair
    words = word_lists(ref)[:12]
    result = call_both(ref, ours, "words helpers", words, is_split_into_words=True, return_offsets_mapping=True)
    if result is not None:
        b, a = result
        for i in range(len(words)):
            assert_same(a.word_ids(i), b.word_ids(i), f"word_ids({i})")
            for w in range(len(words[i]) + 1):
                assert_same_call(lambda: b.word_to_tokens(i, w), lambda: a.word_to_tokens(i, w),
                                 f"word_to_tokens({i}, {w})", compare=assert_same_value)


# ---------------------------------------------------------------------------- encode, tokenize, vocabulary


def test_encode_and_tokenize(pair):
    ref, ours = pair
    texts = small_sample(ref)[::2]
    for i, text in enumerate(texts):
        other = texts[-1 - i]
        context = f"#{i} {text[:40]!r}"
        assert_same(ours.encode(text), ref.encode(text), f"encode {context}")
        assert_same(ours.encode(text, other), ref.encode(text, other), f"encode pair {context}")
        assert_same(ours.encode(text, add_special_tokens=False), ref.encode(text, add_special_tokens=False),
                    f"encode no specials {context}")
        assert_same_call(lambda: ref.encode(text, other, truncation=True, max_length=24),
                         lambda: ours.encode(text, other, truncation=True, max_length=24),
                         f"encode truncated {context}")
        assert_same(ours.tokenize(text), ref.tokenize(text), f"tokenize {context}")
        assert_same(ours.tokenize(text, other, add_special_tokens=True),
                    ref.tokenize(text, other, add_special_tokens=True), f"tokenize pair {context}")
        assert_same(ours.tokenize(text, split_special_tokens=True), ref.tokenize(text, split_special_tokens=True),
                    f"tokenize split specials {context}")
        tokens = ref.tokenize(text)
        assert_same(ours.convert_tokens_to_ids(tokens), ref.convert_tokens_to_ids(tokens), f"tokens to ids {context}")
        assert_same(ours.convert_tokens_to_string(tokens), ref.convert_tokens_to_string(tokens),
                    f"tokens to string {context}")
        ids = ref.encode(text)
        for skip in (False, True):
            assert_same(ours.convert_ids_to_tokens(ids, skip_special_tokens=skip),
                        ref.convert_ids_to_tokens(ids, skip_special_tokens=skip), f"ids to tokens {skip} {context}")
    assert_same(ours.encode(texts[0], return_tensors="np"), ref.encode(texts[0], return_tensors="np"), "encode np")
    assert_same(ours.encode(texts[0], padding="max_length", max_length=100),
                ref.encode(texts[0], padding="max_length", max_length=100), "encode padded")


def test_single_text_shortcuts_warn_and_defer_as_the_stock_path(caplog):
    """`encode` and `tokenize` of one str skip `_encode_plus` (one native call). They warn past
    model_max_length as transformers does, and a class of the model's own that defines either
    (CodeLlama's `tokenize` fills in the middle) keeps its version."""
    from transformers import TokenizersBackend
    from transformers.utils import logging as hf_logging

    from crayon_hf.transformers import CrayonTokenizer, _crayon_class

    path = str(require_shared(VOCAB / "hf" / "gpt2"))
    long_text = "hello world " * 700  # 1,400 tokens, past gpt2's 1,024
    hf_logging.enable_propagation()
    try:
        for method in ("encode", "tokenize"):
            seen = []
            for tok in (TokenizersBackend.from_pretrained(path), CrayonTokenizer.from_pretrained(path)):
                caplog.clear()
                with caplog.at_level(logging.WARNING):
                    out = getattr(tok, method)(long_text)
                    getattr(tok, method)(long_text)  # as often as stock warns
                seen.append((out, [r.getMessage() for r in caplog.records if "sequence length" in r.getMessage()]))
            assert seen[0] == seen[1] and seen[0][1], method
    finally:
        hf_logging.disable_propagation()

    class Shouting(TokenizersBackend):
        def tokenize(self, text, pair=None, add_special_tokens=False, **kwargs):
            return super().tokenize(text.upper(), pair, add_special_tokens, **kwargs)

        def encode(self, text, *args, **kwargs):
            return super().encode(text.upper() if isinstance(text, str) else text, *args, **kwargs)

    ref = Shouting.from_pretrained(path)
    ours = _crayon_class(Shouting).from_pretrained(path)
    assert "encode" in ours.crayon_backend and "tokenize" in ours.crayon_backend, ours.crayon_backend
    for text in ("Hello world, quietly", "ß and ﬁ and İ"):
        assert ours.tokenize(text) == ref.tokenize(text) == ref.tokenize(text.upper())
        assert ours.encode(text) == ref.encode(text) == ref.encode(text.upper())


def test_vocabulary(pair):
    ref, ours = pair
    assert len(ours) == len(ref)
    assert ours.vocab_size == ref.vocab_size
    assert ours.get_vocab() == ref.get_vocab()
    assert ours.added_tokens_decoder == ref.added_tokens_decoder
    assert ours.all_special_tokens == ref.all_special_tokens and ours.all_special_ids == ref.all_special_ids
    for flag in (False, True):
        assert ours.num_special_tokens_to_add(flag) == ref.num_special_tokens_to_add(flag)
    rng = random.Random(1)
    ids = rng.sample(range(len(ref)), 200) + [0, len(ref) - 1]
    assert_same(ours.convert_ids_to_tokens(ids), ref.convert_ids_to_tokens(ids), "convert_ids_to_tokens")
    assert_same(ours.convert_ids_to_tokens(ids[0]), ref.convert_ids_to_tokens(ids[0]), "convert_ids_to_tokens(int)")
    tokens = ref.convert_ids_to_tokens(ids) + ["definitely-not-a-token", ""]
    assert_same(ours.convert_tokens_to_ids(tokens), ref.convert_tokens_to_ids(tokens), "convert_tokens_to_ids")
    assert_same(ours.convert_tokens_to_ids(tokens[0]), ref.convert_tokens_to_ids(tokens[0]),
                "convert_tokens_to_ids(str)")


# ---------------------------------------------------------------------------- decode


def random_id_lists(ref, count: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    special = ref.all_special_ids
    lists = []
    for _ in range(count):
        ids = [rng.randrange(len(ref)) for _ in range(rng.randint(0, 30))]
        if special and rng.random() < 0.5:
            ids.insert(rng.randint(0, len(ids)), rng.choice(special))
        lists.append(ids)
    return lists


def test_decode(pair):
    ref, ours = pair
    encoded = ref(sample(ref))["input_ids"]
    id_lists = encoded + random_id_lists(ref, 100, seed=2)
    for skip in (False, True):
        for clean in (None, True, False):
            options = {"skip_special_tokens": skip, "clean_up_tokenization_spaces": clean}
            for i, ids in enumerate(id_lists[::4]):
                assert_same_call(lambda: ref.decode(ids, **options), lambda: ours.decode(ids, **options),
                                 f"decode #{i} {options}", compare=assert_same)
            assert_same(ours.batch_decode(id_lists, **options), ref.batch_decode(id_lists, **options),
                        f"batch_decode {options}")
            assert_same(ours.decode(id_lists[:20], **options), ref.decode(id_lists[:20], **options),
                        f"decode of a batch {options}")


def test_decode_input_types(pair):
    ref, ours = pair
    batch = ref(small_sample(ref)[:8], padding=True, return_tensors="np")
    ids = batch["input_ids"]
    for value, name in ((ids, "np 2d"), (ids[0], "np 1d"), (int(ids[0][0]), "int"), (ids[0].tolist(), "list"),
                        (tuple(ids[0].tolist()), "tuple"), ([], "empty"), ([[]], "empty batch"),
                        (np.int64(ids[0][0]), "np scalar")):
        for skip in (False, True):
            assert_same_call(lambda: ref.decode(value, skip_special_tokens=skip),
                             lambda: ours.decode(value, skip_special_tokens=skip), f"decode {name} skip={skip}",
                             compare=assert_same)
    assert_same_call(lambda: ref.decode(dict(batch)), lambda: ours.decode(dict(batch)), "decode of a dict",
                     compare=assert_same)
    for bad, name in (([len(ref) + 10], "out of range"), ([-1], "negative"), ([1.5], "float"), (["a"], "string")):
        assert_same_call(lambda: ref.decode(bad), lambda: ours.decode(bad), f"decode {name}", compare=assert_same)


def test_decode_torch(pair):
    torch = require_torch()
    ref, ours = pair
    ids = ref(small_sample(ref)[:8], padding=True, return_tensors="pt")["input_ids"]
    for value, name in ((ids, "2d"), (ids[0], "1d"), (ids[0][0], "0d"), (ids.to(torch.int32), "int32")):
        for skip in (False, True):
            assert_same_call(lambda: ref.decode(value, skip_special_tokens=skip),
                             lambda: ours.decode(value, skip_special_tokens=skip), f"decode torch {name} skip={skip}",
                             compare=assert_same)
    assert_same(ours.batch_decode(ids), ref.batch_decode(ids), "batch_decode torch")


# ---------------------------------------------------------------------------- added tokens


# One folder per tokenizer class (GPT2, TokenizersBackend, CodeGen, Qwen2, CLIP, Whisper, Bert).
ADDED_TOKEN_FOLDERS = ["gpt2", "roberta_base", "llama3_1", "phi2", "qwen2_5", "clip", "whisper_large_v3",
                       "bert_base_uncased"]


@pytest.mark.parametrize("folder", ADDED_TOKEN_FOLDERS)
def test_added_tokens(folder):
    """Tokens added after loading, on fresh loads of both: the same ids, encodings and decodings."""
    ref, ours = load_fresh(folder)  # a second load maps the cached cartridge
    for t in (ref, ours):
        give_pad_token(t)
    assert_same(ours.add_tokens(["<new_tok>", "blarg"]), ref.add_tokens(["<new_tok>", "blarg"]), "add_tokens")
    assert_same(ours.add_special_tokens({"additional_special_tokens": ["<x1>"]}),
                ref.add_special_tokens({"additional_special_tokens": ["<x1>"]}), "add_special_tokens")
    assert len(ours) == len(ref)
    assert ours.get_vocab() == ref.get_vocab()
    assert ours.all_special_tokens == ref.all_special_tokens
    eos = ref.eos_token or ""
    texts = ["a <new_tok> b blarg c<x1>d", "<x1><x1>blargblarg", "no added tokens here", f"<new_tok>{eos} blarg ",
             " <x1> ", "blarg", "blargh unblarg <new_tok><new_tok>"] + list(base_texts()[:10])
    for options in ({}, {"return_offsets_mapping": True, "return_special_tokens_mask": True},
                    {"padding": True, "truncation": True, "max_length": 12, "return_tensors": "np"},
                    {"split_special_tokens": True}):
        call_both(ref, ours, f"added tokens {options}", texts, **options)
        call_both(ref, ours, f"added tokens pairs {options}", texts, texts[::-1], **options)
    ids = ref(texts)["input_ids"]
    for skip in (False, True):
        assert_same(ours.batch_decode(ids, skip_special_tokens=skip), ref.batch_decode(ids, skip_special_tokens=skip),
                    f"decode with added tokens skip={skip}")
    assert_same(ours.tokenize(texts[0]), ref.tokenize(texts[0]), "tokenize")
    assert ours.crayon_backend == load_pair(folder)[1].crayon_backend


# ---------------------------------------------------------------------------- chat templates


CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hello! 日本語で？"},
    {"role": "assistant", "content": "Hi. こんにちは"},
    {"role": "user", "content": "Say <|endoftext|> twice, then stop."},
]
CHAT_NO_SYSTEM = CHAT[1:]


@pytest.mark.parametrize("folder", ["llama3_1", "qwen2_5", "deepseek_v3", "phi3_mini", "gpt2"])
def test_apply_chat_template(folder):
    """The folders with a chat template, and gpt2 without one (both raise the same error)."""
    require_module("jinja2")
    ref, ours = load_pair(folder)
    assert ours.chat_template == ref.chat_template
    assert (ref.chat_template is None) == (folder == "gpt2")
    calls = {
        "text": ((CHAT,), {"tokenize": False}),
        "text_generation_prompt": ((CHAT_NO_SYSTEM,), {"tokenize": False, "add_generation_prompt": True}),
        "ids": ((CHAT,), {"tokenize": True, "return_dict": False}),
        "dict": ((CHAT,), {"tokenize": True, "return_dict": True}),
        "default_tokenize": ((CHAT_NO_SYSTEM,), {}),
        "np": ((CHAT_NO_SYSTEM,), {"return_dict": True, "return_tensors": "np"}),
        "truncated": ((CHAT,), {"tokenize": True, "return_dict": True, "truncation": True, "max_length": 10}),
        "continue_final_message": ((CHAT[:3],), {"tokenize": True, "continue_final_message": True}),
        "batch_padded": (([CHAT, CHAT_NO_SYSTEM[:1]],), {"tokenize": True, "return_dict": True, "padding": True}),
        "batch_padded_pt": (([CHAT, CHAT_NO_SYSTEM[:1]],), {"tokenize": True, "return_dict": True, "padding": True,
                                                             "return_tensors": "pt"}),
    }
    for name, (args, kwargs) in calls.items():
        if kwargs.get("return_tensors") == "pt":
            require_torch()
        assert_same_call(lambda: ref.apply_chat_template(*args, **kwargs),
                         lambda: ours.apply_chat_template(*args, **kwargs), f"chat {name}")


# ---------------------------------------------------------------------------- hypothesis


ALPHABET = list(" \t\n\r\u3000\u00a0'sStdDmlLvVeE0123456789.,!?-_/\\\"#@$%^&*()[]{}<>|~`") + list(
    "aéçßK日本語中文한국어ابجшщ😀👍🏽\u0301\u0308\U0001F600"
) + ["\ue000", "\ue001"]  # placeholders for the folder's special tokens

HYPOTHESIS_TEXT = st.text(alphabet=st.sampled_from(ALPHABET), max_size=40)


def with_specials(text: str, ref) -> str:
    specials = special_strings(ref) or ["</s>"]
    return text.replace("\ue000", ref.eos_token or specials[0]).replace("\ue001", specials[-1])


@pytest.mark.parametrize("folder", ["gpt2", "llama3_1"])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    texts=st.lists(HYPOTHESIS_TEXT, min_size=1, max_size=5),
    pairs=st.booleans(),
    padding=st.sampled_from([True, "max_length", False]),
    padding_side=st.sampled_from(["left", "right"]),
    truncation=st.sampled_from([True, "only_first", False]),
    max_length=st.integers(2, 40),
    pad_to_multiple_of=st.sampled_from([None, 4]),
)
def test_hypothesis_padding_truncation(folder, texts, pairs, padding, padding_side, truncation, max_length,
                                       pad_to_multiple_of):
    ref, ours = load_pair(folder)
    texts = [with_specials(t, ref) for t in texts]
    args = (texts, texts[::-1]) if pairs else (texts,)
    call_both(ref, ours, f"{folder} hypothesis", *args, padding=padding, padding_side=padding_side,
              truncation=truncation, max_length=max_length, pad_to_multiple_of=pad_to_multiple_of,
              return_offsets_mapping=True)


# ---------------------------------------------------------------------------- whole corpus


@pytest.mark.full
def test_whole_short_docs(folder):
    """All of short_docs.jsonl, in chunks of 2000: plain (offsets, special tokens mask), padded and
    truncated arrays, truncated pairs, decode."""
    ref, ours = load_pair(folder)
    docs = short_docs(None)
    for start in range(0, len(docs), 2000):
        chunk = docs[start : start + 2000]
        context = f"short_docs[{start}:{start + len(chunk)}]"
        result = call_both(ref, ours, context, chunk, return_offsets_mapping=True, return_special_tokens_mask=True)
        call_both(ref, ours, context + " padded", chunk, padding=True, truncation=True, max_length=128,
                  return_offsets_mapping=True, return_tensors="np")
        call_both(ref, ours, context + " pairs", chunk[::2], chunk[1::2], truncation=True, max_length=64,
                  return_offsets_mapping=True)
        if start == 0:  # overflowing pairs multiply the rows: one chunk's worth
            call_both(ref, ours, context + " pairs overflow", chunk[::2], chunk[1::2], truncation=True,
                      max_length=64, stride=8, return_overflowing_tokens=True)
        ids = result[0]["input_ids"]
        for skip in (False, True):
            assert_same(ours.batch_decode(ids, skip_special_tokens=skip),
                        ref.batch_decode(ids, skip_special_tokens=skip), f"{context} decode skip={skip}")
