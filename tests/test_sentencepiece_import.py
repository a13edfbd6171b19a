"""SentencePiece .model files: the protobuf reader, detection by content, and parity of the
tokenizer.json we convert to with transformers' own conversion of the same file.

    .model --crayon_hf.conversion.sentencepiece--> tokenizer.json --tokenizers--> (a) ids, offsets, text
    .model --transformers <Class>.from_pretrained(folder)---------------------> (b) ids, offsets, text
    .model --crayon_hf.Tokenizer.from_file / crayon convert -o x.dat---------> (c) ids  == (a)

Models: the four distinct SentencePiece BPE files mistral-common ships (Llama-style; reference
LlamaTokenizer), and files this test writes itself from ../shared tokenizer.json folders: t5's
spiece.model (T5Tokenizer), XLM-R's sentencepiece.bpe.model in its original layout
(XLMRobertaTokenizer, ids under fairseq's offset), Mistral 7B's BPE vocabulary (LlamaTokenizer, no
download needed) and a Gemma-style BPE file without a dummy prefix (GemmaTokenizer; the whole
256k Gemma vocabulary under -m full). Files whose flags no transformers class follows are checked
against the `sentencepiece` library itself.

Test-only dependencies: `sentencepiece` and `protobuf` (transformers' SentencePieceExtractor needs
both; `sentencepiece` is also the oracle). The mistral-common files come from its wheel, fetched
with `pip download --no-deps` into pytest's cache (or from an installed mistral_common).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import json
import os
import random
import re
import struct
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from crayon_hf import cli
from crayon_hf.conversion import sentencepiece as spm_import
from crayon_hf.conversion.sentencepiece import ModelType, PieceType, convert_model, parse_model
from crayon_hf.conversion.sniff import FileKind, explain_unknown, sniff_bytes, sniff_file
from support import SAMPLE_BYTES, VOCAB, corpus_files, corpus_text, require_module, require_shared, short_docs

# ---------------------------------------------------------------------------- a protobuf writer
# The test's own, so the reader is checked against an independent encoder (and, below, against
# the protobuf library on real files).


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int32s are written as 10-byte two's complement
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, value: int | float | str | bytes) -> bytes:
    if isinstance(value, (str, bytes)):
        raw = value.encode("utf-8") if isinstance(value, str) else value
        return _varint(number << 3 | 2) + _varint(len(raw)) + raw
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    return _varint(number << 3 | 0) + _varint(int(value))


TRAINER_FIELDS = {"model_type": 3, "vocab_size": 4, "byte_fallback": 35, "unk_id": 40, "bos_id": 41, "eos_id": 42,
                  "pad_id": 43, "unk_piece": 45, "bos_piece": 46, "eos_piece": 47, "pad_piece": 48,
                  "control_symbols": 30, "user_defined_symbols": 31}
NORMALIZER_FIELDS = {"name": 1, "precompiled_charsmap": 2, "add_dummy_prefix": 3, "remove_extra_whitespaces": 4,
                     "escape_whitespaces": 5}


def write_model(pieces: list[tuple[str, float, int]], trainer: dict, normalizer: dict) -> bytes:
    """A serialized ModelProto: pieces as (piece, score, type), then trainer_spec, normalizer_spec."""
    out = bytearray()
    for piece, score, kind in pieces:
        body = _field(1, piece) + _field(2, float(score)) + (_field(3, kind) if kind != 1 else b"")
        out += _field(1, body)
    for number, spec, names in ((2, trainer, TRAINER_FIELDS), (3, normalizer, NORMALIZER_FIELDS)):
        body = b""
        for key, value in spec.items():
            for v in value if isinstance(value, list) else [value]:
                body += _field(names[key], int(v) if isinstance(v, bool) else v)
        out += _field(number, body)
    return bytes(out)


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---------------------------------------------------------------------------- the models

BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")
IDENTITY = {"name": "identity", "add_dummy_prefix": True, "remove_extra_whitespaces": False, "escape_whitespaces": True}


def _hf_json(folder: str) -> dict:
    return json.loads(require_shared(VOCAB / "hf" / folder / "tokenizer.json").read_text(encoding="utf-8"))


def _charsmap(folder: str) -> bytes:
    return base64.b64decode(_hf_json(folder)["normalizer"]["precompiled_charsmap"])


def _unigram_t5() -> bytes:
    """t5's spiece.model: the first 32,000 entries of t5_small (the rest are T5Tokenizer's sentinels)."""
    types = {"<pad>": 3, "</s>": 3, "<unk>": 2}
    pieces = [(p, s, types.get(p, 1)) for p, s in _hf_json("t5_small")["model"]["vocab"][:32000]]
    return write_model(pieces, {"model_type": 1, "vocab_size": 32000, "unk_id": 2, "bos_id": -1, "eos_id": 1, "pad_id": 0},
                       {"name": "nmt_nfkc", "precompiled_charsmap": _charsmap("t5_small"), "add_dummy_prefix": True,
                        "remove_extra_whitespaces": True, "escape_whitespaces": True})


def _unigram_xlmr() -> bytes:
    """XLM-R's sentencepiece.bpe.model as fairseq shipped it: <unk>, <s>, </s>, then the pieces
    (the tokenizer.json has <s>, <pad>, </s>, <unk> first, one id higher, and <mask> last)."""
    vocab = _hf_json("xlm_roberta_paraphrase_mpnet")["model"]["vocab"]
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)] + [(p, s, 1) for p, s in vocab[4:-1]]
    return write_model(pieces, {"model_type": 1, "vocab_size": len(pieces), "unk_id": 0, "bos_id": 1, "eos_id": 2},
                       {"name": "nmt_nfkc", "precompiled_charsmap": _charsmap("xlm_roberta_paraphrase_mpnet"),
                        "add_dummy_prefix": True, "remove_extra_whitespaces": True, "escape_whitespaces": True})


def _bpe_from_hf(folder: str, specials: dict[str, int], normalizer: dict, rename: dict[int, str] | None = None) -> bytes:
    """A SentencePiece BPE file with a tokenizer.json's vocabulary, in id order, scored -id as
    SentencePiece's BPE trainer scores pieces; `specials` gives pieces a type, `rename` renames ids."""
    vocab = sorted(_hf_json(folder)["model"]["vocab"].items(), key=lambda kv: kv[1])
    pieces = []
    for i, (piece, _) in enumerate(vocab):
        piece = (rename or {}).get(i, piece)
        kind = specials.get(piece, 6 if BYTE_PIECE.fullmatch(piece) else 1)
        pieces.append((piece, -float(i) if kind == 1 else 0.0, kind))
    ids = {p: i for i, (p, _, _) in enumerate(pieces)}
    unk = next(p for p, t in specials.items() if t == 2)
    return write_model(pieces, {"model_type": 2, "vocab_size": len(pieces), "byte_fallback": True, "unk_id": ids[unk],
                                "unk_piece": unk}, normalizer)


def _bpe_mistral() -> bytes:
    return _bpe_from_hf("mistral_v0_1", {"<unk>": 2, "<s>": 3, "</s>": 3}, IDENTITY)


def _bpe_gemma_style() -> bytes:
    """Mistral's vocabulary under Gemma's special pieces and flags (no dummy prefix): GemmaTokenizer's
    case at 32k pieces. Ids 0-2 become <pad> <eos> <bos>, <0x00>/<0x01> become <unk>/<mask>."""
    rename = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 4: "<mask>"}
    return _bpe_from_hf("mistral_v0_1", {"<pad>": 3, "<eos>": 3, "<bos>": 3, "<unk>": 2, "<mask>": 3},
                        dict(IDENTITY, add_dummy_prefix=False), rename)


def _bpe_gemma() -> bytes:
    specials = {"<pad>": 3, "<eos>": 3, "<bos>": 3, "<unk>": 2, "<mask>": 3}
    return _bpe_from_hf("gemma", specials, dict(IDENTITY, add_dummy_prefix=False))


MISTRAL_WHEEL_FILES = {
    "mistral_v1": ("mistral_common/data/tokenizer.model.v1", "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055"),
    "mistral_v2": ("mistral_common/data/mistral_instruct_tokenizer_240216.model.v2",
                   "37f00374dea48658ee8f5d0f21895b9bc55cb0103939607c8185bfd1c6ca1f89"),
    "mistral_v3": ("mistral_common/data/mistral_instruct_tokenizer_240323.model.v3",
                   "9addc8bdce5988448ae81b729336f43a81262160ae8da760674badab9d4c7d33"),
    "mistral_v7": ("mistral_common/data/mistral_instruct_tokenizer_241114.model.v7",
                   "1b968b8dc352f42192367337c78ccc61e1eaddc6d641a579372d4f20694beb7a"),
}


def _require(condition: bool, reason: str) -> None:
    """Skips, or fails under CRAYON_REQUIRE_SHARED=1 (CI), like support.require_shared."""
    if not condition:
        if os.environ.get("CRAYON_REQUIRE_SHARED") == "1":
            pytest.fail(f"{reason} (CRAYON_REQUIRE_SHARED=1)")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def mistral_files(request, tmp_path_factory) -> dict[str, bytes]:
    """The mistral-common .model files: from an installed mistral_common, else from pytest's cache,
    else from its wheel (pip download --no-deps: the package's own dependencies are not needed)."""
    store = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    cache = Path(store.mkdir("crayon-mistral-common")) if store else tmp_path_factory.mktemp("mistral-common")
    spec = importlib.util.find_spec("mistral_common")
    installed = Path(spec.origin).parent.parent if spec and spec.origin else None
    out: dict[str, bytes] = {}
    for name, (member, sha) in MISTRAL_WHEEL_FILES.items():
        for candidate in (installed / member if installed else None, cache / Path(member).name):
            if candidate is not None and candidate.exists() and hashlib.sha256(candidate.read_bytes()).hexdigest() == sha:
                out[name] = candidate.read_bytes()
                break
    if len(out) < len(MISTRAL_WHEEL_FILES):
        download = cache / "wheel"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet", "-d", str(download),
             "mistral-common>=1.12,<2"],
            capture_output=True, text=True, timeout=600,
        )
        wheels = sorted(download.glob("mistral_common-*.whl"))
        _require(done.returncode == 0 and bool(wheels), f"could not download the mistral-common wheel: {done.stderr[-500:]}")
        with zipfile.ZipFile(wheels[-1]) as wheel:
            for name, (member, sha) in MISTRAL_WHEEL_FILES.items():
                data = wheel.read(member)
                assert hashlib.sha256(data).hexdigest() == sha, f"{wheels[-1].name}: {member} changed"
                (cache / Path(member).name).write_bytes(data)
                out[name] = data
    return out


SYNTHESIZED = {
    "t5": _unigram_t5,
    "xlm_roberta": _unigram_xlmr,
    "mistral_synth": _bpe_mistral,
    "gemma_style": _bpe_gemma_style,
    "gemma": _bpe_gemma,
}
# (transformers class, ids ours -> transformers', add_special_tokens for the comparison)
REFERENCE = {
    "mistral_v1": "LlamaTokenizer", "mistral_v2": "LlamaTokenizer", "mistral_v3": "LlamaTokenizer",
    "mistral_v7": "LlamaTokenizer", "mistral_synth": "LlamaTokenizer", "t5": "T5Tokenizer",
    "xlm_roberta": "XLMRobertaTokenizer", "gemma_style": "GemmaTokenizer", "gemma": "GemmaTokenizer",
}
DEFAULT_MODELS = ["mistral_v1", "mistral_v2", "mistral_v3", "mistral_v7", "mistral_synth", "t5", "xlm_roberta",
                  "gemma_style"]


def _xlmr_id(i: int) -> int:
    """An id of XLM-R's original .model as XLMRobertaTokenizer numbers it (fairseq's layout)."""
    return {0: 3, 1: 0, 2: 2}.get(i, i + 1)


@pytest.fixture(scope="session")
def model_bytes(mistral_files):
    cache: dict[str, bytes] = {}

    def get(name: str) -> bytes:
        if name not in cache:
            cache[name] = mistral_files[name] if name in mistral_files else SYNTHESIZED[name]()
        return cache[name]

    return get


@pytest.fixture(scope="session")
def model_dir(model_bytes, tmp_path_factory):
    """A folder holding only tokenizer.model, as transformers would be given it."""

    @functools.lru_cache(maxsize=None)
    def get(name: str) -> Path:
        folder = tmp_path_factory.mktemp(name)
        (folder / "tokenizer.model").write_bytes(model_bytes(name))
        return folder

    return get


@pytest.fixture(scope="session")
def ours(model_bytes):
    tokenizers = require_module("tokenizers")

    @functools.lru_cache(maxsize=None)
    def get(name: str):
        return tokenizers.Tokenizer.from_str(convert_model(model_bytes(name), name))

    return get


@pytest.fixture(scope="session")
def reference(model_dir):
    """transformers' tokenizer for the folder: the class the module docstring of
    crayon_hf.conversion.sentencepiece names as the reference."""
    require_module("sentencepiece")
    require_module("google.protobuf")
    transformers = require_module("transformers")

    @functools.lru_cache(maxsize=None)
    def get(name: str):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return getattr(transformers, REFERENCE[name]).from_pretrained(str(model_dir(name)))

    return get


# ---------------------------------------------------------------------------- comparison


def _sample_texts() -> list[str]:
    """CI-sized: 48 KiB of every corpus, in ~2 KiB documents and some single lines, and short docs."""
    texts: list[str] = []
    for path in corpus_files():
        text = corpus_text(path, SAMPLE_BYTES // 5 if SAMPLE_BYTES else None)
        texts += [text[i : i + 2048] for i in range(0, len(text), 2048)]
        texts += [line for line in text.splitlines()[:40] if line.strip()]
    return texts + short_docs(200)


def _full_texts() -> list[str]:
    texts: list[str] = []
    for path in corpus_files():
        text = corpus_text(path, None)
        texts += [text[i : i + 8192] for i in range(0, len(text), 8192)]
    return texts + short_docs(None)


def _mismatch(name: str, ours_tok, ref_tok, texts: list[str]) -> str | None:
    """The first text where (a) and (b) differ in ids, offsets or decoded text; None if none."""
    id_map = _xlmr_id if name == "xlm_roberta" else (lambda i: i)
    backend = ref_tok.backend_tokenizer
    # T5Tokenizer and XLMRobertaTokenizer add their own </s> (and <s>); the .model does not say.
    special = REFERENCE[name] not in ("T5Tokenizer", "XLMRobertaTokenizer")
    ours_batch = ours_tok.encode_batch(texts, add_special_tokens=special)
    ref_batch = backend.encode_batch(texts, add_special_tokens=special)
    for text, a, b in zip(texts, ours_batch, ref_batch):
        ids = [id_map(i) for i in a.ids]
        if ids != b.ids or a.offsets != b.offsets:
            k = next((k for k, (x, y) in enumerate(zip(zip(ids, a.offsets), zip(b.ids, b.offsets))) if x != y),
                     min(len(ids), len(b.ids)))
            return (f"{name}: {text[:60]!r}: token {k}: ours {a.tokens[k:k + 4]} {a.offsets[k:k + 2]}, "
                    f"transformers {b.tokens[k:k + 4]} {b.offsets[k:k + 2]}")
        if ours_tok.decode(a.ids) != backend.decode(b.ids):
            return f"{name}: {text[:60]!r}: decode differs: {ours_tok.decode(a.ids)[:60]!r} vs {backend.decode(b.ids)[:60]!r}"
    return None


@pytest.mark.parametrize("name", DEFAULT_MODELS)
def test_parity_on_corpora(name, ours, reference):
    assert _mismatch(name, ours(name), reference(name), _sample_texts()) is None


@pytest.mark.full
@pytest.mark.parametrize("name", DEFAULT_MODELS + ["gemma"])
def test_parity_on_whole_corpora(name, ours, reference):
    assert _mismatch(name, ours(name), reference(name), _full_texts()) is None


_PIECES = ["[INST]", "[/INST]", "<s>", "</s>", "<unk>", "<pad>", "<eos>", "<bos>", "<mask>", "[REFERENCE_DOC_0]",
           "[TOOL_CALLS]", "▁", " ", "  ", "\n", "\t", "<0x41>", "\u3000", "\ufeff", "e\u0301", "日本", "🙂", "ǅ"]
_TEXTS = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(_PIECES)), max_size=10).map("".join)


# Tokens a class adds by itself, beyond the .model (fairseq's <pad> and <mask>, T5's sentinels).
_CLASS_ONLY = {"xlm_roberta": ("<pad>", "<mask>"), "t5": ("<extra_id_",)}


@pytest.mark.parametrize("name", DEFAULT_MODELS)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXTS)
def test_parity_on_random_strings(name, ours, reference, text):
    assume(not any(token in text for token in _CLASS_ONLY.get(name, ())))
    assert _mismatch(name, ours(name), reference(name), [text]) is None


@pytest.mark.parametrize("name", ["mistral_v7", "mistral_synth", "gemma_style"])
def test_bpe_tokenizer_json_is_transformers(name, ours, reference, model_bytes):
    """For BPE files the tokenizer.json is transformers' own, component by component (only
    unk_token differs: transformers leaves it unset, we name the .model's unknown piece)."""
    mine = json.loads(convert_model(model_bytes(name)))
    theirs = json.loads(reference(name).backend_tokenizer.to_str())
    assert mine["added_tokens"] == theirs["added_tokens"]
    assert mine["model"]["vocab"] == theirs["model"]["vocab"]
    assert mine["model"]["merges"] == theirs["model"]["merges"]
    assert {k: v for k, v in mine["model"].items() if k not in ("vocab", "merges", "unk_token")} == \
        {k: v for k, v in theirs["model"].items() if k not in ("vocab", "merges", "unk_token")}
    assert mine["post_processor"] == theirs["post_processor"]
    assert mine["decoder"] == theirs["decoder"]
    if name != "gemma_style":  # GemmaTokenizer: Replace(" ", "▁") + Split(" "), the same pipeline in other words
        assert (mine["normalizer"], mine["pre_tokenizer"]) == (theirs["normalizer"], theirs["pre_tokenizer"])


def test_unigram_tokenizer_json_is_transformers(ours, reference, model_bytes):
    mine = json.loads(convert_model(model_bytes("t5")))
    theirs = json.loads(reference("t5").backend_tokenizer.to_str())
    for key in ("normalizer", "pre_tokenizer", "decoder"):
        assert mine[key] == theirs[key]
    assert mine["model"]["unk_id"] == theirs["model"]["unk_id"] == 2
    assert mine["model"]["vocab"] == theirs["model"]["vocab"][:32000]


def test_unigram_scores_survive_tokenizers_json_reader(ours, model_bytes):
    """tokenizers reads JSON floats with serde_json's fast parser (not correctly rounded); the
    scores we write come back as exactly the file's float32 values, as transformers uses them.
    (The repr of 8,000-odd of t5's scores would come back 1 ulp off and flip ties.)"""
    model = parse_model(model_bytes("t5"))
    back = json.loads(ours("t5").to_str())["model"]["vocab"]
    assert [s for _, s in back] == [p.score for p in model.pieces]


def test_score_text_round_trips_through_tokenizers():
    tokenizers = require_module("tokenizers")
    rng = random.Random(7)
    scores = [_f32(-rng.choice([rng.uniform(0, 30), rng.uniform(0, 1e-3), rng.uniform(0, 1e4)])) for _ in range(20000)]
    pieces = [("<unk>", 0.0, 2)] + [(f"p{i}", s, 1) for i, s in enumerate(scores)]
    data = write_model(pieces, {"model_type": 1, "unk_id": 0}, IDENTITY)
    back = json.loads(tokenizers.Tokenizer.from_str(convert_model(data)).to_str())["model"]["vocab"]
    exact = sum(b[1] == p[1] for b, p in zip(back, pieces))
    # A score that no decimal of up to 20 digits gets through exactly keeps its repr, 1 ulp off:
    # about 0.1% of float32 values (4 distinct scores of XLM-R's, 260 of its 250,000 pieces).
    assert exact >= len(pieces) * 0.995
    assert all(abs(b[1] - p[1]) <= abs(p[1]) * 2**-51 for b, p in zip(back, pieces))


# ---------------------------------------------------------------------------- our face and the CLI


@pytest.mark.parametrize("name", ["mistral_v7", "t5", "gemma_style"])
def test_crayon_tokenizer_from_model_file(name, ours, model_dir, tmp_path, capsys):
    """(c): crayon_hf.Tokenizer.from_file(x.model), and `crayon convert x.model -o x.dat` then
    from_file(x.dat), give (a)'s ids (natively, or on the fallback path while the engine cannot)."""
    from crayon_hf import Tokenizer

    path = model_dir(name) / "tokenizer.model"
    texts = _sample_texts()[::7] + ["[INST] hi [/INST]", "  two  spaces ", ""]
    expected = [e.ids for e in ours(name).encode_batch(texts)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback path warns
        direct = Tokenizer.from_file(path)
    assert [direct.encode(t).ids for t in texts] == expected

    out = tmp_path / f"{name}.dat"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = cli.main(["convert", str(path), "-o", str(out), "--verify"])
    printed = capsys.readouterr()
    if status == cli.EXIT_ERROR and "does not run yet" in printed.err:  # not run natively yet
        assert "-o tokenizer.json" in printed.err
        assert direct.crayon_backend.startswith("fallback")
        return
    assert status == 0
    assert "documents identical" in printed.out
    compiled = Tokenizer.from_file(out)
    assert compiled.crayon_backend == direct.crayon_backend == "native"
    assert [compiled.encode(t).ids for t in texts] == expected
    assert [compiled.decode(ids) for ids in expected] == [ours(name).decode(ids) for ids in expected]


def test_cli_writes_tokenizer_json(model_dir, model_bytes, tmp_path, capsys):
    path = model_dir("mistral_v1") / "tokenizer.model"
    out = tmp_path / "tokenizer.json"
    assert cli.main(["convert", str(path), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == convert_model(model_bytes("mistral_v1"))
    assert "SentencePiece BPE, 32,000 pieces" in capsys.readouterr().out
    assert sniff_file(out) is FileKind.TOKENIZER_JSON


def test_cli_refuses_unknown_files_clearly(tmp_path, capsys):
    for content, why in ((b"", "it is empty"), (b"\x0a\x05hello", "not like a SentencePiece model"),
                         (b"\x00\x01\xfe\xff" * 8, "binary"), (b"hello\nworld\n", "first line: 'hello'")):
        bad = tmp_path / "tokenizer.model"
        bad.write_bytes(content)
        assert cli.main(["convert", str(bad), "-o", str(tmp_path / "x.dat")]) == cli.EXIT_ERROR
        assert why in capsys.readouterr().err


def test_cli_reports_a_malformed_model(tmp_path, capsys, model_bytes):
    bad = tmp_path / "tokenizer.model"
    bad.write_bytes(model_bytes("mistral_v1")[:-3])
    assert cli.main(["convert", str(bad), "-o", str(tmp_path / "x.dat")]) == 2
    assert "normalizer_spec" in capsys.readouterr().err


# ---------------------------------------------------------------------------- sniffing


def test_sniff_by_content_not_name(tmp_path, model_bytes):
    rank = require_shared(VOCAB / "tiktoken" / "r50k_base.tiktoken").read_bytes()
    cases = {
        "tokenizer.model": (rank, FileKind.TIKTOKEN_RANKS),  # Meta's name for a rank file
        "spiece.json": (model_bytes("t5"), FileKind.SENTENCEPIECE),
        "tokenizer.model.v7": (model_bytes("mistral_v7"), FileKind.SENTENCEPIECE),
        "x.model": (b"\n" + require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json").read_bytes(), FileKind.TOKENIZER_JSON),
        "y.model": (b"\n" + rank, FileKind.TIKTOKEN_RANKS),
        "z.model": (b"CRAYONHF" + bytes(64), FileKind.CARTRIDGE),
        "empty.model": (b"", FileKind.UNKNOWN),
        "text.model": ("Привет, мир\n".encode(), FileKind.UNKNOWN),
    }
    for file_name, (content, kind) in cases.items():
        path = tmp_path / file_name
        path.write_bytes(content)
        assert sniff_file(path) is kind, file_name


def test_a_rank_file_named_tokenizer_model_still_converts_as_tiktoken(tmp_path):
    import crayon_hf.tiktoken as tk

    disguised = tmp_path / "tokenizer.model"
    disguised.write_bytes(require_shared(VOCAB / "tiktoken" / "r50k_base.tiktoken").read_bytes())
    assert cli.main(["convert", str(disguised), "--pattern", "r50k_base", "-o", str(tmp_path / "r.dat")]) == 0
    assert tk.Encoding.from_cartridge(tmp_path / "r.dat").encode("hi there") == [5303, 612]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_sniff_never_raises(head):
    assert isinstance(sniff_bytes(head), FileKind)
    assert isinstance(explain_unknown(head), str)


# ---------------------------------------------------------------------------- the reader


def _model_pb2():
    require_module("sentencepiece")
    from sentencepiece import sentencepiece_model_pb2

    return sentencepiece_model_pb2


def test_reads_what_protobuf_reads(model_bytes):
    """Every piece and every field we use, against the protobuf library's own parse."""
    pb2 = _model_pb2()
    for name in ("mistral_v1", "mistral_v7", "t5"):
        data = model_bytes(name)
        ref = pb2.ModelProto()
        ref.ParseFromString(data)
        model = parse_model(data)
        assert [(p.piece, p.score, int(p.type)) for p in model.pieces] == [(p.piece, p.score, p.type) for p in ref.pieces]
        for key in ("model_type", "vocab_size", "byte_fallback", "unk_id", "bos_id", "eos_id", "pad_id", "unk_piece",
                    "bos_piece", "eos_piece", "pad_piece", "unk_surface", "split_digits", "split_by_whitespace",
                    "treat_whitespace_as_suffix", "allow_whitespace_only_pieces", "max_sentencepiece_length"):
            assert getattr(model.trainer_spec, key) == getattr(ref.trainer_spec, key), (name, key)
        assert model.trainer_spec.control_symbols == list(ref.trainer_spec.control_symbols)
        assert model.trainer_spec.user_defined_symbols == list(ref.trainer_spec.user_defined_symbols)
        for key in ("name", "precompiled_charsmap", "add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces"):
            assert getattr(model.normalizer_spec, key) == getattr(ref.normalizer_spec, key), (name, key)


def test_mistral_v1_fields(model_bytes):
    model = parse_model(model_bytes("mistral_v1"))
    spec, norm = model.trainer_spec, model.normalizer_spec
    assert (spec.model_type, spec.vocab_size, spec.byte_fallback) == (ModelType.BPE, 32000, True)
    assert (spec.unk_id, spec.bos_id, spec.eos_id, spec.pad_id) == (0, 1, 2, -1)
    assert (spec.unk_piece, spec.bos_piece, spec.eos_piece) == ("<unk>", "<s>", "</s>")
    assert (norm.name, norm.precompiled_charsmap, norm.add_dummy_prefix, norm.remove_extra_whitespaces) == \
        ("identity", b"", True, False)
    types = [p.type for p in model.pieces]
    assert types[:3] == [PieceType.UNKNOWN, PieceType.CONTROL, PieceType.CONTROL]
    assert types.count(PieceType.BYTE) == 256 and model.pieces[3].piece == "<0x00>"
    assert model.pieces[261] == ("▁t", -2.0, PieceType.NORMAL)
    assert model.describe() == "SentencePiece BPE, 32,000 pieces"


def test_written_unigram_model_reads_back(model_bytes):
    model = parse_model(model_bytes("t5"))
    hf = _hf_json("t5_small")["model"]["vocab"]
    assert [(p.piece, p.score) for p in model.pieces] == [(p, _f32(s)) for p, s in hf[:32000]]
    assert model.normalizer_spec.precompiled_charsmap == _charsmap("t5_small")
    assert (model.trainer_spec.model_type, model.trainer_spec.unk_id, model.trainer_spec.bos_id) == (ModelType.UNIGRAM, 2, -1)


SMALL_PIECES = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3), ("[X]", 0.0, 4), ("▁", -1.5, 1), ("a", -2.0, 1),
                ("b", -2.5, 1), ("▁a", -3.0, 1), ("ab", -3.5, 1), ("▁ab", -4.0, 1), ("<0x41>", 0.0, 6), ("zz", 0.0, 5)]


def _small(model_type: int = 2, pieces=SMALL_PIECES, **normalizer) -> bytes:
    return write_model(pieces, {"model_type": model_type, "unk_id": 0, "byte_fallback": True},
                       dict(IDENTITY, **normalizer))


def test_small_model_conversion():
    data = json.loads(convert_model(_small()))
    assert [(t["content"], t["special"], t["normalized"]) for t in data["added_tokens"]] == \
        [("<unk>", True, False), ("<s>", True, False), ("</s>", True, False), ("[X]", False, False)]
    assert data["model"]["merges"] == [["▁", "a"], ["a", "b"], ["▁", "ab"], ["▁a", "b"]]
    assert data["model"]["unk_token"] == "<unk>" and data["model"]["byte_fallback"] is True
    unigram = json.loads(convert_model(_small(model_type=1)))
    assert unigram["model"]["vocab"][4] == ["▁", -1.5] and unigram["model"]["unk_id"] == 0


def test_every_truncation_is_a_value_error_or_a_model():
    data = _small()
    for n in range(len(data)):
        try:
            parse_model(data[:n])
        except ValueError:
            pass
    with pytest.raises(ValueError, match=r"field 3 \(normalizer_spec\) .* claims"):
        parse_model(data[:-1])


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_models_raise_value_error_or_parse(data):
    raw = bytearray(_small())
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        at = data.draw(st.integers(0, len(raw) - 1))
        if op == "flip":
            raw[at] = data.draw(st.integers(0, 255))
        elif op == "insert":
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=4))
        elif len(raw) > 1:
            del raw[at]
    try:
        model = parse_model(bytes(raw))
    except ValueError:
        return
    convert_model(bytes(raw))  # what parses also converts
    assert model.pieces


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_raise_value_error_or_parse(raw):
    try:
        parse_model(raw)
    except ValueError:
        pass


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"", "holds no pieces"),
        (b"\x0b\x00", "wire type 3"),
        (b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "longer than 10 bytes"),
        (b"\x0a\x80", "truncated varint"),
        (b"\x0a\x10\x0a", r"field 1 \(pieces\) at byte 0 claims 16 bytes"),
        (b"\x00\x00", "field number 0"),
        (b"\x0a\x05\x0a\x03\xff\xfe\x41", r"pieces\[0\].*not valid UTF-8"),
        (b"\x0a\x07\x0a\x01a\x18\x09\x00\x00", r"pieces\[0\].*9 is not a PieceType"),
        (b"\x0a\x06\x0a\x01a\x15\x00\x00", "truncated 32-bit"),
        (b"\x0a\x03\x0a\x01a\x12\x02\x1a\x00", r"trainer_spec.model_type .*wire type 2, expected a varint"),
        (b"\x0a\x03\x0a\x01a\x1a\x02\x10\x01", r"normalizer_spec.precompiled_charsmap .*wire type 0, expected 2"),
        (b"\x0a\x03\x0a\x01a\x10\x01", r"field 2 \(trainer_spec\) at byte 5 has wire type 0"),
        (b"\x0a\x03\x0a\x01a", "trainer_spec.unk_id is 0, but the unknown piece is missing"),
    ],
)
def test_malformed_models_say_what_is_wrong(raw, message):
    with pytest.raises(ValueError, match=message):
        parse_model(raw)


def test_inconsistent_models_are_refused():
    dup = SMALL_PIECES + [("a", -9.0, 1)]
    with pytest.raises(ValueError, match=r"pieces\[12\] 'a' is already pieces\[5\]"):
        parse_model(_small(pieces=dup))
    with pytest.raises(ValueError, match="WORD model"):
        parse_model(_small(model_type=3))
    with pytest.raises(ValueError, match="CHAR model"):
        parse_model(_small(model_type=4))
    with pytest.raises(ValueError, match="empty"):
        parse_model(_small(pieces=SMALL_PIECES + [("", 0.0, 1)]))
    with pytest.raises(ValueError, match="unknown piece is pieces"):
        parse_model(write_model(SMALL_PIECES, {"model_type": 2, "unk_id": 5}, IDENTITY))


def test_looks_like_model_is_strict(model_bytes):
    assert spm_import.looks_like_model(model_bytes("mistral_v1")[:4096])
    assert spm_import.looks_like_model(_small())
    assert not spm_import.looks_like_model(b"\x0a\x05hello")  # 'h' is no field of a piece
    assert not spm_import.looks_like_model(b"\x0a\x02\x0a\x00")  # an empty piece string
    assert not spm_import.looks_like_model(b"\n{\n  \"version\": \"1.0\"}")


# ---------------------------------------------------------------------------- flags no class follows


def _sentencepiece_variant(base: bytes, **normalizer) -> bytes:
    proto = _model_pb2().ModelProto()
    proto.ParseFromString(base)
    for key, value in normalizer.items():
        setattr(proto.normalizer_spec, key, value)
    return proto.SerializeToString()


VARIANTS = {
    "bpe_nfkc_remove_spaces": ("mistral_synth", {"name": "nmt_nfkc", "remove_extra_whitespaces": True}),
    "bpe_nfkc_remove_spaces_no_prefix": ("mistral_synth", {"name": "nmt_nfkc", "remove_extra_whitespaces": True,
                                                           "add_dummy_prefix": False}),
    "unigram_keep_spaces": ("t5", {"remove_extra_whitespaces": False}),
    "unigram_no_prefix": ("t5", {"add_dummy_prefix": False}),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_flag_variants_follow_sentencepiece(variant, model_bytes):
    """No transformers class reads these flags; the conversion follows SentencePiece. BPE ids are
    identical; Unigram segmentations may differ only where two have the same score (SentencePiece
    sums float32s)."""
    sentencepiece = require_module("sentencepiece")
    tokenizers = require_module("tokenizers")
    base, flags = VARIANTS[variant]
    if "name" in flags:
        flags = dict(flags, precompiled_charsmap=_charsmap("t5_small"))
    data = _sentencepiece_variant(model_bytes(base), **flags)
    ours_tok = tokenizers.Tokenizer.from_str(convert_model(data))
    sp = sentencepiece.SentencePieceProcessor(model_proto=data)
    scores = {p.piece: p.score for p in parse_model(data).pieces}
    lines = [line for path in corpus_files() for line in corpus_text(path, 24 * 1024).splitlines() if line.strip()]
    lines += ["   leading", "trailing   ", "  both  ", "in  between", " ", "\u3000ideographic\u3000space"]
    for line in lines:
        mine = ours_tok.encode(line, add_special_tokens=False).tokens
        theirs = sp.encode(line, out_type=str)
        if mine != theirs and base != "t5":
            assert mine == theirs, (variant, line[:60])
        if mine != theirs:
            assert "".join(mine) == "".join(theirs), (variant, line[:60], mine[:8], theirs[:8])
            assert sum(scores[t] for t in mine) == pytest.approx(sum(scores[t] for t in theirs), abs=1e-4), \
                (variant, line[:60], mine[:8], theirs[:8])



@pytest.mark.parametrize("name", ["t5"])
def test_encode_command_takes_a_model_file(name, model_dir, tmp_path, capsys):
    """`crayon encode --tokenizer x.model` converts (once, then from the cache) and encodes."""
    from crayon_hf import Tokenizer, cli

    model = model_dir(name) / "tokenizer.model"
    doc = tmp_path / "doc.txt"
    text = "Hello world, this is a test.\nSecond line with numbers 12345."
    doc.write_text(text, encoding="utf-8")
    assert cli.main(["encode", "--tokenizer", str(model), str(doc)]) == 0
    printed = capsys.readouterr().out.split()
    expected = Tokenizer.from_file(model).encode(text, add_special_tokens=False).ids
    assert [int(x) for x in printed[: len(expected)]] == expected
