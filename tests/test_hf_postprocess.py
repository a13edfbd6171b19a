"""Post-model parity with `tokenizers` 0.23.3: Encoding, post-processors, truncation, padding.

The raw (pre-post-processing) encoding comes from `tokenizers` itself: the folder's tokenizer.json
with `post_processor`, `truncation` and `padding` set to null, encoded with
`add_special_tokens=False`. We feed it to our `post_process` with the folder's real post-processor
and random truncation/padding settings, and compare every field (overflowing recursively, plus
the char/word/token lookups) with the real tokenizer configured the same way.
"""

from __future__ import annotations

import copy
import functools
import json
import pickle
import random
from dataclasses import dataclass
from typing import Any

import pytest

from support import VOCAB, corpus_files, corpus_text, random_slices, require_module, require_shared, short_docs

from crayon_hf._hf.encoding import Encoding, as_dict
from crayon_hf._hf.errors import PanicException, UnsupportedComponent
from crayon_hf._hf.postprocess import PaddingParams, TruncationParams, pad_encodings, post_process
from crayon_hf._hf.processors import PostProcessor, build_post_processor

HF_FOLDERS = [
    "bert_base_uncased",
    "clip",
    "deepseek_v3",
    "falcon",
    "gemma",
    "gpt2",
    "gpt_neox_20b",
    "llama3_1",
    "mistral_v0_1",
    "phi2",
    "phi3_mini",
    "qwen2_5",
    "roberta_base",
    "t5_small",
    "whisper_large_v3",
    "xlm_roberta_paraphrase_mpnet",
]


# ---------------------------------------------------------------------------- reference cases


@dataclass
class Case:
    name: str
    spec: dict[str, Any]
    raw: Any  # tokenizers.Tokenizer without post-processor, truncation, padding
    id_to_token: list[str | None]
    added: list[str]  # contents of every added token
    special: list[str]  # contents of the special ones

    def real(self, post_processor: Any = "same") -> Any:
        """A fresh real tokenizer (optionally with another post-processor), no truncation/padding."""
        tokenizers = require_module("tokenizers")
        spec = dict(self.spec)
        spec["truncation"] = None
        spec["padding"] = None
        if post_processor != "same":
            spec["post_processor"] = post_processor
        return tokenizers.Tokenizer.from_str(json.dumps(spec))

    def ours_raw(self, text: str, type_id: int = 0) -> Encoding:
        """The raw encoding, through `Encoding.from_arrays` as the engine would build it."""
        e = self.raw.encode(text, add_special_tokens=False)
        tokens = e.tokens
        vocab = self.id_to_token
        derived = all(vocab[i] == t for i, t in zip(e.ids, tokens))
        return Encoding.from_arrays(
            e.ids,
            e.offsets,
            [-1 if w is None else w for w in e.word_ids],
            None,
            vocab,
            type_id,
            None if derived else tokens,  # Unigram's unknown token keeps the text it covers
        )


@functools.lru_cache(maxsize=None)
def load_case(name: str) -> Case:
    tokenizers = require_module("tokenizers")
    path = require_shared(VOCAB / "hf" / name / "tokenizer.json")
    spec = json.loads(path.read_text(encoding="utf-8"))
    raw_spec = dict(spec, post_processor=None, truncation=None, padding=None)
    raw = tokenizers.Tokenizer.from_str(json.dumps(raw_spec))
    size = max(raw.get_vocab(with_added_tokens=True).values()) + 1
    id_to_token = [raw.id_to_token(i) for i in range(size)]
    added_map = raw.get_added_tokens_decoder()
    added = [t.content for t in added_map.values()]
    special = [t.content for t in added_map.values() if t.special]
    return Case(name, spec, raw, id_to_token, added, special)


@functools.lru_cache(maxsize=None)
def sample_texts(seed: int, count: int) -> list[str]:
    """Real text: slices of every corpus, a few short documents, and edge cases."""
    files = corpus_files()
    assert files, "no corpora found"
    out: list[str] = []
    per_file = max(2, count // len(files))
    for i, f in enumerate(files):
        out += random_slices(corpus_text(f, 64 * 1024), per_file, seed + i, 200)
    out += short_docs(40)[:8]
    out += ["", " ", "   ", "\n", "a", "Hello world", "  two  spaces  ", "x" * 50]
    return out


def texts_with_added(case: Case, rng: random.Random, base: list[str], count: int) -> list[str]:
    """Texts with the tokenizer's added tokens (special or not) inside them."""
    out = []
    for _ in range(count):
        pieces = [rng.choice(base)[: rng.randint(0, 40)]]
        for _ in range(rng.randint(1, 3)):
            pieces.append(rng.choice(case.added) if case.added else "<s>")
            pieces.append(rng.choice(["", " ", "  ", "word", " text here "]))
        out.append("".join(pieces))
    return out


# ---------------------------------------------------------------------------- comparison


def _overlapping_ranges(enc: Encoding) -> bool:
    spans = sorted(enc._ranges.values())
    return any(a[1] > b[0] for a, b in zip(spans, spans[1:]))


def _lookups(enc: Any, rng: random.Random, ambiguous: bool = False) -> dict[str, Any]:
    """The index lookups on sampled positions (ours and theirs answer the same questions).
    `ambiguous`: sequence ranges overlap (after `set_sequence_id` on a merged encoding), and
    `tokenizers` then answers `token_to_sequence` in hash-map order, so we do not compare it."""
    n = len(enc)
    out: dict[str, Any] = {}
    tokens = sorted(set(rng.sample(range(n + 2), min(n + 2, 12))))
    for t in tokens:
        if not ambiguous:
            out[f"token_to_sequence({t})"] = enc.token_to_sequence(t)
        out[f"token_to_chars({t})"] = enc.token_to_chars(t)
        out[f"token_to_word({t})"] = enc.token_to_word(t)
    max_char = max((o[1] for o in enc.offsets), default=0)
    max_word = max((w for w in enc.word_ids if w is not None), default=0)
    for s in (0, 1):
        for c in sorted(set(rng.sample(range(max_char + 2), min(max_char + 2, 8)))):
            out[f"char_to_token({c},{s})"] = enc.char_to_token(c, s)
            out[f"char_to_word({c},{s})"] = enc.char_to_word(c, s)
        for w in sorted(set(rng.sample(range(max_word + 2), min(max_word + 2, 6)))):
            out[f"word_to_tokens({w},{s})"] = enc.word_to_tokens(w, s)
            out[f"word_to_chars({w},{s})"] = enc.word_to_chars(w, s)
    out["repr"] = repr(enc)
    return out


def assert_same(ours: Any, ref: Any, context: str, seed: int = 0) -> None:
    a, b = as_dict(ours), as_dict(ref)
    if a != b:
        diff = {k: (a[k], b[k]) for k in a if a[k] != b[k]}
        pytest.fail(f"{context}: fields differ (ours, theirs): {str(diff)[:2000]}")
    ambiguous = _overlapping_ranges(ours)
    la, lb = _lookups(ours, random.Random(seed), ambiguous), _lookups(ref, random.Random(seed), ambiguous)
    if la != lb:
        diff = {k: (la[k], lb[k]) for k in la if la[k] != lb[k]}
        pytest.fail(f"{context}: lookups differ (ours, theirs): {str(diff)[:2000]}")
    for i, (o, r) in enumerate(zip(ours._overflowing[:2], ref.overflowing[:2])):
        ambiguous = _overlapping_ranges(o)
        lo, lr = _lookups(o, random.Random(seed + i), ambiguous), _lookups(r, random.Random(seed + i), ambiguous)
        assert lo == lr, f"{context}: lookups of overflowing[{i}] differ"


def _outcome(fn: Any) -> tuple[Any, BaseException | None]:
    try:
        return fn(), None
    except BaseException as exc:  # PanicException is a BaseException, in both libraries
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return None, exc


def assert_same_error(ours: BaseException | None, ref: BaseException | None, context: str) -> None:
    assert (type(ours).__name__, str(ours)) == (type(ref).__name__, str(ref)), (
        f"{context}: errors differ: ours {ours!r}, theirs {ref!r}"
    )


def random_truncation(rng: random.Random, floor: int = 0) -> dict[str, Any] | None:
    if rng.random() < 0.25:
        return None
    return {
        "max_length": rng.choice([n for n in (0, 1, 2, 3, 4, 5, 6, 8, 11, 16, 24, 32, 64, 200) if n >= floor]),
        "stride": rng.choice([0, 0, 0, 1, 2, 3, 5]),
        "strategy": rng.choice(["longest_first", "longest_first", "only_first", "only_second"]),
        "direction": rng.choice(["right", "left"]),
    }


def random_padding(rng: random.Random, case: Case) -> dict[str, Any] | None:
    if rng.random() < 0.4:
        return None
    pad_id = rng.choice([0, 1, 3, len(case.id_to_token) - 1])
    return {
        "direction": rng.choice(["right", "left"]),
        "pad_id": pad_id,
        "pad_type_id": rng.choice([0, 0, 1, 2]),
        "pad_token": rng.choice([case.id_to_token[pad_id] or "[PAD]", "[PAD]", "<pad>"]),
        "length": rng.choice([None, None, 0, 5, 17, 40, 96]),
        "pad_to_multiple_of": rng.choice([None, None, 0, 1, 3, 8]),
    }


def configure(real: Any, processor: PostProcessor | None, trunc: dict | None, pad: dict | None):
    """Configure the real tokenizer and build our params the same way; returns ours, or the
    error both raised."""
    real.no_truncation()
    real.no_padding()
    tp = pp = None
    if trunc is not None:
        kwargs = dict(trunc)
        max_length = kwargs.pop("max_length")
        _, ref_err = _outcome(lambda: real.enable_truncation(max_length, **kwargs))
        tp = TruncationParams.from_kwargs(max_length, **kwargs)
        _, our_err = _outcome(lambda: tp.validate(processor.added_tokens(False) if processor else 0))
        assert_same_error(our_err, ref_err, f"enable_truncation({trunc})")
        if ref_err is not None:
            return None
        assert real.truncation == tp.as_dict()
    if pad is not None:
        real.enable_padding(**pad)
        pp = PaddingParams.from_kwargs(**pad)
        assert real.padding == pp.as_dict()
    return tp, pp


def check_one(case: Case, real: Any, processor: PostProcessor | None, a: str, b: str | None, add: bool, tp, pp, seed: int) -> None:
    context = f"{case.name}: encode({a[:40]!r}, {None if b is None else b[:40]!r}, add_special_tokens={add}), {tp}, {pp}"
    ref, ref_err = _outcome(lambda: real.encode(a, b, add_special_tokens=add))
    ea = case.ours_raw(a, 0)
    eb = case.ours_raw(b, 1) if b is not None else None
    before = (as_dict(ea), None if eb is None else as_dict(eb))
    ours, our_err = _outcome(lambda: post_process(ea, eb, add, tp, pp, processor))
    assert (as_dict(ea), None if eb is None else as_dict(eb)) == before, "post_process changed its inputs"
    if ref_err is not None or our_err is not None:
        assert_same_error(our_err, ref_err, context)
        return
    assert_same(ours, ref, context, seed)


def run_random_configs(case: Case, processor_spec: Any, trials: int, seed: int, truncation_floor: int = 0) -> None:
    """`truncation_floor` bounds the number of overflowing parts: with a sequence used twice in
    a template, `merge` combines overflowings pairwise and their number grows polynomially."""
    rng = random.Random(seed)
    real = case.real(processor_spec)
    processor = build_post_processor(real_spec_post_processor(case, processor_spec))
    base = sample_texts(seed % 3, 60)
    texts = base + texts_with_added(case, rng, base, 20)
    for trial in range(trials):
        configured = configure(real, processor, random_truncation(rng, truncation_floor), random_padding(rng, case))
        if configured is None:
            continue
        tp, pp = configured
        a = rng.choice(texts)
        b = rng.choice(texts) if rng.random() < 0.5 else None
        check_one(case, real, processor, a, b, rng.random() < 0.75, tp, pp, seed + trial)


def real_spec_post_processor(case: Case, processor_spec: Any) -> Any:
    return case.spec.get("post_processor") if processor_spec == "same" else processor_spec


# ---------------------------------------------------------------------------- tests: real folders


@pytest.mark.parametrize("name", HF_FOLDERS)
def test_raw_encoding_is_the_pre_post_process_encoding(name: str) -> None:
    """The oracle's raw encoding really is what `post_process` receives in `tokenizers`."""
    case = load_case(name)
    real = case.real()
    rng = random.Random(1)
    base = sample_texts(0, 60)
    texts = rng.sample(base, 12) + texts_with_added(case, rng, base, 6)
    for a in texts:
        raw_no, raw_yes = case.raw.encode(a, add_special_tokens=False), case.raw.encode(a, add_special_tokens=True)
        assert as_dict(raw_no) == as_dict(raw_yes), "add_special_tokens must not change the raw encoding"
        assert set(raw_no.special_tokens_mask) <= {0}, "the raw special_tokens_mask is all zeros"
        assert as_dict(case.ours_raw(a)) == as_dict(raw_no), "from_arrays must reproduce the raw encoding"
        for add in (True, False):
            assert as_dict(real.post_process(raw_no, None, add)) == as_dict(real.encode(a, add_special_tokens=add))
        b = rng.choice(texts)
        pair = case.raw.encode(a, b, add_special_tokens=False)
        lb = len(case.raw.encode(b, add_special_tokens=False))
        assert pair.type_ids == [0] * (len(pair) - lb) + [1] * lb, "the pair is encoded with type id 1"
        ours_pair = post_process(case.ours_raw(a, 0), case.ours_raw(b, 1), False, None, None, None)
        assert_same(ours_pair, pair, f"{name}: raw pair")


@pytest.mark.parametrize("name", HF_FOLDERS)
def test_post_process_parity(name: str) -> None:
    case = load_case(name)
    run_random_configs(case, "same", trials=90, seed=HF_FOLDERS.index(name) * 1000)


@pytest.mark.full
@pytest.mark.parametrize("name", HF_FOLDERS)
def test_post_process_parity_full(name: str) -> None:
    case = load_case(name)
    for seed in range(5):
        run_random_configs(case, "same", trials=600, seed=HF_FOLDERS.index(name) * 1000 + 100 + seed)


@pytest.mark.parametrize("name", HF_FOLDERS)
def test_encode_batch_padding(name: str) -> None:
    """`encode_batch` pads each encoding in post_process, then the batch (BatchLongest: the
    longest of the batch, overflowings not counted)."""
    case = load_case(name)
    real = case.real()
    processor = build_post_processor(case.spec.get("post_processor"))
    rng = random.Random(7 + HF_FOLDERS.index(name))
    texts = sample_texts(1, 60)
    for _ in range(12):
        pad = random_padding(rng, case) or {"length": None}
        trunc = random_truncation(rng) if rng.random() < 0.5 else None
        configured = configure(real, processor, trunc, pad)
        if configured is None:
            continue
        tp, pp = configured
        inputs = [
            (rng.choice(texts), rng.choice(texts)) if rng.random() < 0.4 else rng.choice(texts)
            for _ in range(rng.randint(1, 6))
        ]
        add = rng.random() < 0.8
        ref, ref_err = _outcome(lambda: real.encode_batch(inputs, add_special_tokens=add))

        def ours_batch() -> list[Encoding]:
            out = []
            for item in inputs:
                a, b = item if isinstance(item, tuple) else (item, None)
                eb = case.ours_raw(b, 1) if b is not None else None
                out.append(post_process(case.ours_raw(a, 0), eb, add, tp, pp, processor))
            pad_encodings(out, pp)
            return out

        ours, our_err = _outcome(ours_batch)
        if ref_err is not None or our_err is not None:
            # tokenizers encodes a batch in parallel and reports whichever failing item its
            # threads hit first, so with several failing items any of their errors is right.
            possible = []
            for item in inputs:
                _, err = _outcome(lambda: real.encode_batch([item], add_special_tokens=add))
                if err is not None:
                    possible.append((type(err).__name__, str(err)))
            assert ref_err is not None and our_err is not None, f"{name}: encode_batch: ours {our_err!r}, theirs {ref_err!r}"
            assert (type(our_err).__name__, str(our_err)) in possible, f"{name}: encode_batch: ours {our_err!r} not in {possible}"
            continue
        assert len(ours) == len(ref)
        for o, r in zip(ours, ref):
            assert_same(o, r, f"{name}: encode_batch {tp} {pp}")


@pytest.mark.parametrize("name", HF_FOLDERS)
def test_truncation_validation_and_shapes(name: str) -> None:
    """`enable_truncation`'s stride check uses the single-sequence added tokens, with usize
    wrap-around; the dict shapes equal `Tokenizer.truncation` / `.padding`."""
    case = load_case(name)
    real = case.real()
    processor = build_post_processor(case.spec.get("post_processor"))
    for max_length in range(0, 7):
        for stride in range(0, 7):
            for strategy in ("longest_first", "only_second"):
                configure(real, processor, {"max_length": max_length, "stride": stride, "strategy": strategy, "direction": "left"}, None)
    for kwargs in ({}, {"length": 7}, {"length": None, "pad_to_multiple_of": 4, "direction": "left", "pad_token": "<x>"}):
        real.enable_padding(**kwargs)
        assert real.padding == PaddingParams.from_kwargs(**kwargs).as_dict()
    real.enable_truncation(9)
    assert real.truncation == TruncationParams.from_kwargs(9).as_dict()
    for bad in ({"strategy": "nope"}, {"direction": "up"}):
        _, ref_err = _outcome(lambda: real.enable_truncation(9, **bad))
        _, our_err = _outcome(lambda: TruncationParams.from_kwargs(9, **bad))
        assert_same_error(our_err, ref_err, f"enable_truncation(9, {bad})")
    _, ref_err = _outcome(lambda: real.enable_padding(direction="up"))
    _, our_err = _outcome(lambda: PaddingParams.from_kwargs(direction="up"))
    assert_same_error(our_err, ref_err, "enable_padding(direction='up')")


def test_tokenizer_json_params_round_trip() -> None:
    case = load_case("xlm_roberta_paraphrase_mpnet")
    tp = TruncationParams.from_json(case.spec["truncation"])
    pp = PaddingParams.from_json(case.spec["padding"])
    assert tp == TruncationParams(128, 0, "longest_first", "right")
    assert pp == PaddingParams(None, "right", None, 1, 0, "<pad>")
    assert PaddingParams.from_json(pp.to_json()) == pp
    assert TruncationParams.from_json(tp.to_json()) == tp
    # What tokenizers itself writes for the same settings.
    real = case.real()
    real.enable_truncation(33, stride=2, strategy="only_first", direction="left")
    real.enable_padding(length=12, pad_to_multiple_of=4, direction="left", pad_id=5, pad_type_id=1, pad_token="<q>")
    saved = json.loads(real.to_str())
    assert TruncationParams.from_kwargs(33, stride=2, strategy="only_first", direction="left").to_json() == saved["truncation"]
    assert PaddingParams.from_kwargs(length=12, pad_to_multiple_of=4, direction="left", pad_id=5, pad_type_id=1, pad_token="<q>").to_json() == saved["padding"]


# ---------------------------------------------------------------------------- processors not in the folders

_GPT2_VARIANTS = [
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 50256], "cls": ["!", 0], "trim_offsets": True, "add_prefix_space": True},
    {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 50256], "cls": ["!", 0], "trim_offsets": False, "add_prefix_space": False},
    {"type": "BertProcessing", "sep": ["<|endoftext|>", 50256], "cls": ["[CLS]", 7]},
    {
        "type": "Sequence",
        "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<bos>", "type_id": 3}}, {"Sequence": {"id": "A", "type_id": 2}}],
                "pair": [
                    {"Sequence": {"id": "B", "type_id": 1}},
                    {"SpecialToken": {"id": "<sep>", "type_id": 0}},
                    {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": "<bos>", "type_id": 1}},
                ],
                "special_tokens": {
                    "<bos>": {"id": "<bos>", "ids": [50256, 11], "tokens": ["<|endoftext|>", "a-spelling-not-in-vocab"]},
                    "<sep>": {"id": "<sep>", "ids": [13], "tokens": ["."]},
                },
            },
        ],
    },
    {
        # A processor after the template sees one encoding per template piece.
        "type": "Sequence",
        "processors": [
            {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "X", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "X", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "X", "type_id": 1}}],
                "special_tokens": {"X": {"id": "X", "ids": [220], "tokens": ["Ġ"]}},
            },
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            {"type": "BertProcessing", "sep": ["[SEP]", 5], "cls": ["[CLS]", 6]},
        ],
    },
    {
        "type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 1}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 1}}],
        "special_tokens": {},
    },
]


@pytest.mark.parametrize("variant", range(len(_GPT2_VARIANTS)))
def test_processor_variants(variant: int) -> None:
    case = load_case("gpt2")
    repeats_a_sequence = variant == len(_GPT2_VARIANTS) - 1
    run_random_configs(case, _GPT2_VARIANTS[variant], trials=70, seed=50_000 + variant, truncation_floor=32 if repeats_a_sequence else 0)


@pytest.mark.parametrize("variant", [None, {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}])
def test_processor_variants_wordpiece(variant: Any) -> None:
    case = load_case("bert_base_uncased")
    run_random_configs(case, variant, trials=80, seed=60_000)


def test_unsupported_components_name_their_path() -> None:
    with pytest.raises(UnsupportedComponent, match=r"post_processor: Nope"):
        build_post_processor({"type": "Nope"})
    with pytest.raises(UnsupportedComponent, match=r"post_processor\.processors\[1\]: Mystery"):
        build_post_processor({"type": "Sequence", "processors": [{"type": "ByteLevel"}, {"type": "Mystery"}]})
    with pytest.raises(UnsupportedComponent, match="missing special token"):
        build_post_processor({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "[X]", "type_id": 0}}], "pair": [], "special_tokens": {}})
    assert build_post_processor(None) is None


# ---------------------------------------------------------------------------- Encoding methods


def _random_op(rng: random.Random) -> tuple[str, Any]:
    kind = rng.choice(["truncate", "pad", "pad", "set_sequence_id", "merge", "merge"])
    if kind == "truncate":
        return kind, (rng.choice([0, 1, 2, 3, 5, 9, 30]), rng.choice([0, 0, 1, 2, 4]), rng.choice(["left", "right"]))
    if kind == "pad":
        return kind, (
            rng.choice([0, 3, 12, 40]),
            {"direction": rng.choice(["left", "right"]), "pad_id": rng.randint(0, 9), "pad_type_id": rng.randint(0, 2), "pad_token": rng.choice(["[PAD]", "!"])},
        )
    if kind == "set_sequence_id":
        return kind, rng.choice([0, 1, 2])
    return kind, rng.choice([True, False])


@pytest.mark.parametrize("name", ["bert_base_uncased", "roberta_base", "llama3_1", "t5_small"])
def test_encoding_methods(name: str) -> None:
    """truncate / pad / set_sequence_id / merge applied to ours and to theirs alike."""
    tokenizers = require_module("tokenizers")
    case = load_case(name)
    real = case.real()
    processor = build_post_processor(case.spec.get("post_processor"))
    rng = random.Random(11)
    texts = sample_texts(2, 30)
    for trial in range(60):
        a, b = rng.choice(texts), rng.choice(texts) if rng.random() < 0.5 else None
        ref = real.encode(a, b)
        ours = post_process(case.ours_raw(a), case.ours_raw(b, 1) if b is not None else None, True, None, None, processor)
        other_text = rng.choice(texts)
        ref_other = real.encode(other_text)
        ours_other = post_process(case.ours_raw(other_text), None, True, None, None, processor)
        for _ in range(4):
            kind, arg = _random_op(rng)
            if kind == "truncate":
                _, re_ = _outcome(lambda: ref.truncate(*arg))
                _, oe = _outcome(lambda: ours.truncate(*arg))
                assert_same_error(oe, re_, f"truncate{arg}")
            elif kind == "pad":
                ref.pad(arg[0], **arg[1])
                ours.pad(arg[0], **arg[1])
            elif kind == "set_sequence_id":
                ref.set_sequence_id(arg)
                ours.set_sequence_id(arg)
            else:
                ref = tokenizers.Encoding.merge([ref, ref_other], growing_offsets=arg)
                ours = Encoding.merge([ours, ours_other], growing_offsets=arg)
            assert_same(ours, ref, f"{name}: after {kind}{arg}", trial)
    with pytest.raises(ValueError, match="Invalid truncation direction value : up"):
        ours.truncate(3, direction="up")
    with pytest.raises(ValueError, match="Unknown `direction`: `up`"):
        ours.pad(3, direction="up")
    with pytest.raises(OverflowError):
        ours.char_to_token(-1)
    with pytest.raises(PanicException, match="stride"):
        big = post_process(case.ours_raw("one two three four five six"), None, True, None, None, processor)
        big.truncate(2, stride=2)


def test_encoding_copies_and_pickle() -> None:
    case = load_case("llama3_1")
    processor = build_post_processor(case.spec.get("post_processor"))
    enc = post_process(case.ours_raw("Hello there, general Kenobi " * 5), None, True, TruncationParams(8, 2), None, processor)
    expected = as_dict(enc)
    assert as_dict(pickle.loads(pickle.dumps(enc))) == expected
    assert as_dict(copy.deepcopy(enc)) == expected
    ids = enc.ids
    ids.append(5)  # the returned lists are the caller's own
    assert enc.ids == expected["ids"]
    assert len(enc.overflowing) == len(expected["overflowing"]) > 0
    empty = Encoding()
    assert len(empty) == 0 and empty.ids == [] and empty.n_sequences == 1 and empty.token_to_sequence(0) == 0
    with pytest.warns(DeprecationWarning):
        assert enc.words == enc.word_ids


def test_from_arrays_accepts_numpy_and_lists() -> None:
    np = require_module("numpy")
    vocab = ["a", "b", "c", "[PAD]"]
    e1 = Encoding.from_arrays([0, 1, 2], [(0, 1), (1, 2), (2, 3)], [0, 0, -1], None, vocab)
    e2 = Encoding.from_arrays(np.array([0, 1, 2], np.uint32), np.array([[0, 1], [1, 2], [2, 3]]), np.array([0, 0, -1]), None, vocab)
    assert as_dict(e1) == as_dict(e2)
    assert e1.tokens == ["a", "b", "c"] and e1.word_ids == [0, 0, None] and e1.special_tokens_mask == [0, 0, 0]
    e1.pad(5, pad_id=3, pad_token="[PAD]")
    assert e1._tokens is None, "padding with the vocabulary's own spelling keeps tokens derived"
    assert e1.tokens == ["a", "b", "c", "[PAD]", "[PAD]"]
    e2.pad(5, direction="left", pad_id=3, pad_token="<other>")
    assert e2.tokens == ["<other>", "<other>", "a", "b", "c"]
    empty = Encoding.from_arrays([], np.zeros((0, 2)), [], None, vocab)
    assert len(empty) == 0 and empty.offsets == []


@pytest.mark.parametrize("name", ["xlm_roberta_paraphrase_mpnet", "bert_base_uncased", "roberta_base", "t5_small", "llama3_1"])
def test_truncated_windows_fast_path(name: str) -> None:
    """One sequence cut into overflowing windows takes the windowed path (the layout applied to
    each window) and gives what `tokenizers` gives: every window, its special tokens, offsets,
    masks and sequence ids."""
    from crayon_hf._hf import postprocess

    case = load_case(name)
    real = case.real()
    processor = build_post_processor(case.spec.get("post_processor"))
    texts = [t for t in sample_texts(7, 60) if len(t) > 120][:12]
    assert texts
    taken = 0
    for max_length, stride, direction in [(16, 0, "right"), (33, 3, "left"), (9, 2, "right"), (64, 0, "left")]:
        for add in (True, False):
            configured = configure(real, processor, {"max_length": max_length, "stride": stride,
                                                     "strategy": "longest_first", "direction": direction}, None)
            if configured is None:
                continue
            tp, _ = configured
            for a in texts:
                windowed = postprocess._post_process_windows(case.ours_raw(a, 0), add, tp, processor)
                if windowed is not None and windowed.overflowing:
                    taken += 1
                    assert_same(windowed, real.encode(a, add_special_tokens=add), f"{name}: {a[:40]!r}", max_length)
                check_one(case, real, processor, a, None, add, tp, None, max_length)
    assert taken > 0, "the windowed path never ran"
