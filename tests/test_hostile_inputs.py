"""Hostile tokenizer.json files, rank tables and regex patterns, each compared with the reference.

Rule, per case: where the reference (`tokenizers.Tokenizer.from_str`, `tiktoken.Encoding`) refuses
the input, we refuse it too, with a ValueError naming the problem or the reference's own exception
(when the Tokenizer face hands a file it does not run natively to `tokenizers`); where the reference
accepts it, we accept it and give the same ids, or raise a ValueError whose reason is listed in
`DOCUMENTED_REFUSALS`. Risky regex cases run in a child process under a timeout and an address-space
cap, so a hang or an unbounded allocation fails the test instead of the test run.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
import warnings
from typing import Any, Callable

import pytest

from support import child_python, require_module

tokenizers = require_module("tokenizers")
tiktoken = require_module("tiktoken")

import crayon_hf  # noqa: E402
import crayon_hf.tiktoken as ct  # noqa: E402
from crayon_hf._hf.decoders import bytes_to_unicode  # noqa: E402

TEXTS = ["the the hello world " * 20, "aaaab", "w5x w17x ab", "héllo wörld 日本 🙂", ""]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    # Compiled cartridges and remembered refusals are cached by content hash; a private cache keeps
    # these throwaway files out of the user's and makes every case go through the loader.
    monkeypatch.setenv("CRAYON_HF_CACHE", str(tmp_path / "cache"))


def _base() -> dict[str, Any]:
    """A small byte-level BPE tokenizer.json, built by tokenizers itself."""
    from tokenizers import decoders, models, pre_tokenizers

    vocab = {c: i for i, c in enumerate(sorted(bytes_to_unicode().values()))}
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he")]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    tok = tokenizers.Tokenizer(models.BPE(vocab, merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return json.loads(tok.to_str())


BASE = _base()


def _mut(f: Callable[[dict[str, Any]], Any]) -> str:
    d = copy.deepcopy(BASE)
    f(d)
    return json.dumps(d)


def _added(**kw: Any) -> list[dict[str, Any]]:
    t = {"id": 999, "content": "zzz", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True}
    t.update(kw)
    return [t]


def _split(pattern: str) -> str:
    def f(d: dict[str, Any]) -> None:
        d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            d["pre_tokenizer"]]}
    return _mut(f)


JSON_CASES: dict[str, str] = {
    "malformed": "{not json",
    "truncated": json.dumps(BASE)[:500],
    "empty": "",
    "top_level_list": "[]",
    "deeply_nested": "[" * 100_000 + "]" * 100_000,
    "deeply_nested_in_model": json.dumps(BASE)[:-1] + ', "x": ' + "[" * 50_000 + "]" * 50_000 + "}",
    "model_type_int": _mut(lambda d: d["model"].__setitem__("type", 5)),
    "model_type_unknown": _mut(lambda d: d["model"].__setitem__("type", "Foo")),
    "vocab_as_list": _mut(lambda d: d["model"].__setitem__("vocab", list(d["model"]["vocab"]))),
    "id_negative": _mut(lambda d: d["model"]["vocab"].__setitem__("a", -1)),
    "id_over_u32": _mut(lambda d: d["model"]["vocab"].__setitem__("a", 2**40)),
    "id_u32_max": _mut(lambda d: d["model"]["vocab"].__setitem__("a", 2**32 - 1)),
    "id_sparse_1e9": _mut(lambda d: d["model"]["vocab"].__setitem__("a", 10**9)),
    "id_float": _mut(lambda d: d["model"]["vocab"].__setitem__("a", 1.5)),
    "id_string": _mut(lambda d: d["model"]["vocab"].__setitem__("a", "7")),
    "id_bool": _mut(lambda d: d["model"]["vocab"].__setitem__("a", True)),
    "id_duplicate": _mut(lambda d: d["model"]["vocab"].__setitem__("a", d["model"]["vocab"]["b"])),
    "token_duplicate_key": json.dumps(BASE).replace('"a": ', '"b": 999, "a": ', 1),
    "merge_one_token": _mut(lambda d: d["model"].__setitem__("merges", [["Ġ"]])),
    "merge_three_tokens": _mut(lambda d: d["model"].__setitem__("merges", [["Ġ", "t", "x"]])),
    "merge_int": _mut(lambda d: d["model"].__setitem__("merges", [5])),
    "merge_string_no_space": _mut(lambda d: d["model"].__setitem__("merges", ["Ġt"])),
    "merge_unknown_token": _mut(lambda d: d["model"].__setitem__("merges", [["zz", "qq"]])),
    "merge_result_missing": _mut(lambda d: d["model"]["vocab"].pop("he")),
    "merges_missing": _mut(lambda d: d["model"].pop("merges")),
    "merges_not_list": _mut(lambda d: d["model"].__setitem__("merges", 5)),
    "merge_duplicate": _mut(lambda d: d["model"]["merges"].append(d["model"]["merges"][0])),
    "unk_token_not_in_vocab": _mut(lambda d: d["model"].__setitem__("unk_token", "zzzz")),
    "dropout_out_of_range": _mut(lambda d: d["model"].__setitem__("dropout", 5.0)),
    "added_id_of_other_vocab_token": _mut(lambda d: d.__setitem__("added_tokens", _added(id=5))),
    "added_content_in_vocab": _mut(lambda d: d.__setitem__("added_tokens", _added(content="a"))),
    "added_missing_content": _mut(lambda d: d.__setitem__("added_tokens", [{"id": 999}])),
    "added_not_list": _mut(lambda d: d.__setitem__("added_tokens", 5)),
    "added_id_negative": _mut(lambda d: d.__setitem__("added_tokens", _added(id=-3))),
    "added_id_huge": _mut(lambda d: d.__setitem__("added_tokens", _added(id=2**31))),
    "pre_tokenizer_unknown": _mut(lambda d: d.__setitem__("pre_tokenizer", {"type": "Nope"})),
    "pre_tokenizer_int": _mut(lambda d: d.__setitem__("pre_tokenizer", 5)),
    "normalizer_unknown": _mut(lambda d: d.__setitem__("normalizer", {"type": "Nope"})),
    "decoder_unknown": _mut(lambda d: d.__setitem__("decoder", {"type": "Nope"})),
    "post_processor_unknown": _mut(lambda d: d.__setitem__("post_processor", {"type": "Nope"})),
    "regex_unbalanced": _split("(a"),
    "regex_repeat_over_limit": _split("a{100001}"),
    # Oniguruma refuses nested fixed counts whose expansion overflows its compiled size.
    "regex_nested_repeat_overflow": _split("a{100000}{100000}"),
    "regex_nested_repeat_overflow_2": _split("x{55380}{77590}"),
    "regex_nested_repeat_loop": _split("f{90000,90000}{80000,80001}"),
    "regex_nested_repeat_small": _split("a{1000}{1000}"),
    "regex_backreference": _split(r"(a)\1"),
    "regex_variable_lookbehind": _split(r"(?<=a+)b"),
    "regex_lookbehind": _split(r"(?<=a)b"),
    "regex_empty": _split(""),
    "regex_deep_groups": _split("(" * 1000 + "a" + ")" * 1000),
    "regex_huge_alternation": _split("|".join(f"w{i}x" for i in range(20_000))),
    "regex_1mb_literal": _split("a" * (1 << 20)),
}

# Where the reference accepts and we refuse on purpose: (case, reason). Empty: every file the
# reference loads, we load (natively or through it).
DOCUMENTED_REFUSALS: dict[str, str] = {}


def _load_reference(text: str) -> tuple[Any, BaseException | None]:
    try:
        return tokenizers.Tokenizer.from_str(text), None
    except BaseException as e:  # tokenizers raises plain Exception (and PanicException)
        return None, e


@pytest.mark.parametrize("case", sorted(JSON_CASES))
def test_hostile_tokenizer_json(case: str) -> None:
    text = JSON_CASES[case]
    ref, ref_error = _load_reference(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback warning
        if ref_error is not None:
            with pytest.raises(Exception) as info:
                crayon_hf.Tokenizer.from_str(text)
            assert isinstance(info.value, (ValueError, type(ref_error))), repr(info.value)
            assert str(info.value), "the error must say what is wrong"
            return
        try:
            ours = crayon_hf.Tokenizer.from_str(text)
        except ValueError as e:
            assert case in DOCUMENTED_REFUSALS, f"reference accepts {case}, we raised {e!r}"
            return
    for t in TEXTS:
        assert ours.encode(t).ids == ref.encode(t).ids, (case, t)
        ids = ref.encode(t).ids
        if case != "id_duplicate":
            # With two tokens on one id, tokenizers decodes the id to either of them, whichever its
            # hash map's iteration order (random per instance) puts last: no fixed answer to match.
            assert ours.decode(ids) == ref.decode(ids)


def test_hostile_json_from_file_and_buffer(tmp_path) -> None:
    """from_file and from_buffer take the same checks as from_str (and invalid UTF-8 is a ValueError)."""
    path = tmp_path / "tokenizer.json"
    path.write_text(JSON_CASES["id_negative"], encoding="utf-8")
    with pytest.raises(ValueError, match="integer id"):
        crayon_hf.Tokenizer.from_file(path)
    with pytest.raises(ValueError, match="not valid JSON"):
        crayon_hf.Tokenizer.from_buffer(b'{"model": "\xff\xfe"}')
    with pytest.raises(ValueError, match="not valid JSON"):
        crayon_hf.Tokenizer.from_buffer(b"\x00" * 100)


# --- tiktoken face: Encoding(...) and rank files ----------------------------------------------

RANKS = {bytes([i]): i for i in range(256)} | {b"ab": 256}
PAT = r"\w+|\s+|[^\w\s]+"

ENCODING_CASES: dict[str, dict[str, Any]] = {
    "plain": {},
    "rank_duplicate": {"mergeable_ranks": RANKS | {b"ba": 256}},
    "rank_gap": {"mergeable_ranks": {k: v for k, v in RANKS.items() if v != 100} | {b"ab": 300}},
    "rank_negative": {"mergeable_ranks": RANKS | {b"ab": -1}},
    "rank_huge": {"mergeable_ranks": RANKS | {b"ab": 2**40}},
    "rank_string": {"mergeable_ranks": RANKS | {b"ab": "7"}},
    "rank_key_str": {"mergeable_ranks": RANKS | {"ab": 257}},
    "ranks_empty": {"mergeable_ranks": {}},
    "special_not_str": {"special_tokens": {5: 300}},
    "special_negative": {"special_tokens": {"<s>": -5}},
    "pattern_unbalanced": {"pat_str": "(a"},
    "pattern_1mb": {"pat_str": "a" * (1 << 20)},
    "pattern_backreference": {"pat_str": r"(a)\1"},
    "pattern_lookbehind": {"pat_str": r"(?<=a)b"},
}

# Reference accepts, we refuse with a ValueError on purpose.
ENCODING_REFUSALS = {
    "special_conflict": "a special token id that is also a rank makes decode ambiguous",
}
ENCODING_CASES["special_conflict"] = {"special_tokens": {"<s>": 256}}
# Accepted as tiktoken accepts it (issue 21: a published rank file has an empty token).
ENCODING_CASES["empty_token"] = {"mergeable_ranks": RANKS | {b"": 257}}


@pytest.mark.parametrize("case", sorted(ENCODING_CASES))
def test_hostile_encoding_constructor(case: str) -> None:
    args: dict[str, Any] = {"name": "hostile", "pat_str": PAT, "mergeable_ranks": RANKS, "special_tokens": {}}
    args.update(ENCODING_CASES[case])
    try:
        ref = tiktoken.Encoding(**args)
        ref_error: BaseException | None = None
    except BaseException as e:  # noqa: BLE001 - tiktoken panics (PanicException) on some of these
        ref, ref_error = None, e
    if ref_error is not None:
        with pytest.raises(Exception) as info:
            ct.Encoding(**args)
        # Our checks run first, in Python: a ValueError/TypeError naming the problem, never a panic.
        assert isinstance(info.value, (ValueError, TypeError)), repr(info.value)
        assert str(info.value)
        return
    if case in ENCODING_REFUSALS:
        with pytest.raises(ValueError):
            ct.Encoding(**args)
        return
    ours = ct.Encoding(**args)
    for t in ["abab hello", "x" * 500, "héllo wörld 日本"]:
        try:
            expected: Any = ref.encode(t)
        except BaseException as e:  # noqa: BLE001
            expected = type(e)
        if isinstance(expected, list):
            assert ours.encode(t) == expected
        else:
            with pytest.raises(Exception):
                ours.encode(t)


def test_missing_byte_token_is_a_clear_error() -> None:
    """Without a token for byte 'a' tiktoken panics on some texts and encodes others; we refuse every
    text that needs the missing byte with a ValueError that names it, and encode the rest equally."""
    ranks = {k: v for k, v in RANKS.items() if k != b"a"}
    ref = tiktoken.Encoding("x", pat_str=PAT, mergeable_ranks=ranks, special_tokens={})
    ours = ct.Encoding("x", pat_str=PAT, mergeable_ranks=ranks, special_tokens={})
    with pytest.raises(ValueError, match="0x61"):
        ours.encode("aaaab")
    assert ours.encode("bcd xyz") == ref.encode("bcd xyz")


RANK_FILES: dict[str, bytes] = {
    "empty": b"",
    "bad_base64": b"!!!! 0\n",
    "non_numeric_rank": b"YQ== zero\n",
    "missing_rank": b"YQ==\n",
    "three_fields": b"YQ== 0 1\n",
    "duplicate_rank": b"YQ== 0\nYg== 0\n",
    "gap": b"YQ== 0\nYg== 5\n",
    "binary_garbage": bytes(range(256)) * 4,
}


@pytest.mark.parametrize("case", sorted(RANK_FILES))
def test_hostile_rank_file(case: str, tmp_path) -> None:
    import tiktoken.load

    path = tmp_path / "ranks.tiktoken"
    path.write_bytes(RANK_FILES[case])
    try:
        expected: Any = tiktoken.load.load_tiktoken_bpe(str(path))
    except BaseException as e:  # noqa: BLE001
        expected = e
    if isinstance(expected, BaseException):
        with pytest.raises(ValueError) as info:
            ct.load.load_tiktoken_bpe(str(path))
        assert str(info.value)
    else:
        # The empty file included: {} as tiktoken (Encoding then refuses it, as tiktoken's does).
        assert ct.load.load_tiktoken_bpe(str(path)) == expected


def test_hostile_sentencepiece_model(tmp_path) -> None:
    """A file that sniffs as a SentencePiece model but is truncated garbage: a clear ValueError."""
    from crayon_hf.conversion.sentencepiece import convert_model

    for data in (b"\x0a\x05", b"\x0a\xff\xff\xff\xff\x0f" + b"x" * 10, b"\x0a" + b"\x80" * 20):
        with pytest.raises(ValueError):
            convert_model(data, "hostile.model")


# --- catastrophic regex patterns: bounded time and memory, in a capped child ---------------------

CATASTROPHIC = ["(a+)+$", "(a|a)*b", "((a*)*)*b", "(a|aa)+$", "(?:a*)*c", "(a+)+b|(a+)+c", "(\\w+\\s?)+$"]

_CHILD = textwrap.dedent("""
    import json, resource, sys, time, warnings
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    warnings.simplefilter("ignore")
    import crayon_hf, crayon_hf.tiktoken as ct, tiktoken
    cases = json.loads(sys.stdin.read())
    ranks = {bytes([i]): i for i in range(256)}
    for pattern, text in cases:
        t0 = time.perf_counter()
        enc = ct.Encoding("c", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        # tiktoken runs these through Rust's regex crate (no backtracking): its answer is the oracle.
        ref = tiktoken.Encoding("c", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        assert enc.encode(text) == ref.encode(text), pattern
        tj = json.loads(sys.argv[1])
        tj["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated",
                               "invert": False}
        tok = crayon_hf.Tokenizer.from_str(json.dumps(tj))
        # Oniguruma gives up on these (retry-limit-in-match, a panic in tokenizers): we finish, and
        # Isolated splitting keeps every character, so the round trip is exact.
        assert tok.decode(tok.encode(text).ids) == text
        print(json.dumps([pattern, len(text), tok._backend, round(time.perf_counter() - t0, 3)]), flush=True)
""")


def test_catastrophic_patterns_end_in_bounded_time() -> None:
    """Exponential-backtracking patterns on 3k-character adversarial texts: both faces finish (the
    engine's step budget switches to memoized search, O(program x text) per start position) under a
    2 GiB cap. A search that fails at every start position is therefore O(program x text^2) in the
    worst case (docs/robustness.md): polynomial, but 10k characters of `(a+)+$` take ~0.5 s."""
    cases = [(p, "a" * 3_000 + tail) for p in CATASTROPHIC for tail in ("", "c", "!")]
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(BASE)], input=json.dumps(cases), text=True,
                          capture_output=True, timeout=240, **child_python())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(proc.stdout.splitlines()) == len(cases)


# --- crayon convert ----------------------------------------------------------------------------

CLI_CASES: dict[str, bytes] = {
    "tokenizer.json": JSON_CASES["malformed"].encode(),
    "nested.json": JSON_CASES["deeply_nested"].encode(),
    "negative.json": JSON_CASES["id_negative"].encode(),
    "unknown_model.json": JSON_CASES["model_type_unknown"].encode(),
    "added.json": JSON_CASES["added_missing_content"].encode(),
    "sparse.json": JSON_CASES["id_sparse_1e9"].encode(),
    "ranks.tiktoken": RANK_FILES["bad_base64"],
    "empty.tiktoken": b"",
    "garbage.bin": bytes(range(256)) * 16,
}


@pytest.mark.parametrize("name", sorted(CLI_CASES))
@pytest.mark.filterwarnings("ignore:crayon-hf")
def test_convert_refuses_hostile_files_with_a_message(name: str, tmp_path, capsys) -> None:
    """Each ends with a one-line `crayon convert: ...` message and a non-zero status, no traceback."""
    from crayon_hf import cli

    path = tmp_path / name
    path.write_bytes(CLI_CASES[name])
    try:
        status = cli.main(["convert", str(path), "-o", str(tmp_path / "out.dat")])
    except SystemExit as e:
        message = str(e.code)
        status = 1
    else:
        message = capsys.readouterr().err
    assert status != 0
    assert message.startswith("crayon convert:"), message
    assert not (tmp_path / "out.dat").exists()


# --- huge counts -------------------------------------------------------------------------------

def test_huge_fixed_padding_is_a_memory_error_not_an_abort() -> None:
    """padding Fixed(2**40): tokenizers aborts the process ("memory allocation of 4398046511104
    bytes failed"), so there is nothing to compare with; we raise MemoryError naming the size."""
    d = copy.deepcopy(BASE)
    d["padding"] = {"strategy": {"Fixed": 2**40}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                    "pad_type_id": 0, "pad_token": "a"}
    tok = crayon_hf.Tokenizer.from_str(json.dumps(d))
    with pytest.raises(MemoryError):
        tok.encode("hello")


@pytest.mark.parametrize("value", [-1, "5", 2**32, 2**40])
def test_wordpiece_max_input_chars_extremes(value: Any) -> None:
    """Huge limits load and tokenize like tokenizers (no limit in practice). A negative or non-integer
    limit tokenizers does not refuse: its untagged model enum silently reads the file as a WordLevel
    model instead (to_str() then says "WordLevel"); we refuse it with a ValueError."""
    from support import VOCAB, require_shared

    d = json.loads(require_shared(VOCAB / "hf" / "bert_base_uncased" / "tokenizer.json").read_text(encoding="utf-8"))
    d["model"]["max_input_chars_per_word"] = value
    ref = tokenizers.Tokenizer.from_str(json.dumps(d))
    if json.loads(ref.to_str())["model"]["type"] == "WordLevel":
        with pytest.raises(ValueError, match="max_input_chars_per_word"):
            crayon_hf.Tokenizer.from_str(json.dumps(d))
        return
    ours = crayon_hf.Tokenizer.from_str(json.dumps(d))
    for text in ["hello world", "x" * 5000, "unbelievable " * 30]:
        assert ours.encode(text).ids == ref.encode(text).ids
