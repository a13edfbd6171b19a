"""The lifecycle of the transformers face (crayon_hf.transformers.CrayonTokenizer).

Every step is compared with the stock transformers tokenizer of the same folder (input ids,
attention masks, offsets, decode): loading, save_pretrained (crayon.dat and the "crayon" entry in
tokenizer_config.json), reloading with and without crayon-hf (AutoTokenizer, remote code), added
tokens, push_to_hub (offline: the hub calls are recorded), pickling, datasets.map with worker
processes, threads calling one tokenizer with different lengths, patch_transformers, the lazy
import hook and chat templates.

Shared folders are loaded once per module; outputs go to tmp_path. Subprocesses (a few, ~3 s
each) check what a process that does not import crayon-hf sees.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from transformers import AddedToken, AutoTokenizer

from crayon_hf import Tokenizer
from crayon_hf.transformers import CrayonTokenizer, patch_transformers, unpatch_transformers
from support import VOCAB, require_module, require_shared, scratch_dir, short_docs

pytestmark = pytest.mark.filterwarnings(
    "ignore:crayon-hf.*not implemented natively:UserWarning",  # bert_nmt falls back, by design
)

NATIVE = ["qwen2_5", "gpt2", "bert_base_uncased", "t5_small"]
# bert_base_uncased's tokenizer.json behind an Nmt normalizer, which the engine does not run, loaded
# as a plain TokenizersBackend (BertTokenizer would rebuild its own normalizer): the fallback path.
FALLBACK = ["bert_nmt"]
CARTRIDGE = "crayon.dat"
STATE = "crayon_state.json"  # the stock-loaded state, for loading without the backend (_pretrained_state)
REMOTE_CODE = "crayon_tokenizer.py"

EDGE_TEXTS = [
    "",
    " ",
    "Hello world",
    "  leading and trailing spaces  ",
    "tabs\t\tand\nnew\r\nlines\n\n",
    "emoji 🤗🤗 and accents: café naïve",
    "special tokens inline: a<|endoftext|>b [CLS] [SEP] <|im_start|>user",
    "numbers 1234567890 3.14159 and punctuation?!... don't won't",
]

# ---------------------------------------------------------------------------- helpers


_FALLBACK_DIR: list[Path] = []


def folder(name: str) -> Path:
    if name != "bert_nmt":
        return require_shared(VOCAB / "hf" / name)
    if not _FALLBACK_DIR:
        source = require_shared(VOCAB / "hf" / "bert_base_uncased")
        target = scratch_dir("crayon-bert-nmt-")
        data = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
        data["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Nmt"}, data["normalizer"]]}
        (target / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
        config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
        (target / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        _FALLBACK_DIR.append(target)
    return _FALLBACK_DIR[0]


_STOCK: dict[str, object] = {}
_OURS: dict[str, object] = {}


def stock(name: str):
    """The stock transformers tokenizer of a shared folder (loaded once; never mutate it)."""
    if name not in _STOCK:
        tok = AutoTokenizer.from_pretrained(folder(name))
        assert not isinstance(tok, CrayonTokenizer), "AutoTokenizer is patched while loading the reference"
        _STOCK[name] = tok
    return _STOCK[name]


def ours(name: str):
    """CrayonTokenizer.from_pretrained of a shared folder (loaded once; never mutate it)."""
    if name not in _OURS:
        _OURS[name] = CrayonTokenizer.from_pretrained(folder(name))
    return _OURS[name]


_TEXTS: list[str] = []


def texts() -> list[str]:
    """Real short documents (every language in the corpus, spread out) plus edge cases."""
    if not _TEXTS:
        docs = short_docs(limit=None)
        _TEXTS.extend(docs[:: max(1, len(docs) // 40)][:40] + EDGE_TEXTS)
    return _TEXTS


def outputs(tok, sample: list[str]) -> dict[str, object]:
    """What the comparisons look at: ids, masks, offsets (batched, padded, tensors, single) and decode."""
    out: dict[str, object] = {}
    batch = tok(sample, return_offsets_mapping=True, return_special_tokens_mask=True, return_length=True)
    out["batch"] = dict(batch)
    if tok.pad_token is not None:
        padded = tok(sample, padding="longest", truncation=True, max_length=24, return_offsets_mapping=True)
        out["padded"] = dict(padded)
        np_out = tok(sample, padding="max_length", truncation=True, max_length=16, return_tensors="np")
        out["np"] = {k: (v.shape, v.dtype.kind, v.tolist()) for k, v in np_out.items()}
    out["single"] = [dict(tok(t, return_offsets_mapping=True)) for t in sample[:6] + sample[-len(EDGE_TEXTS):]]
    out["decode"] = [tok.decode(ids) for ids in batch["input_ids"]]
    out["batch_decode_skip"] = tok.batch_decode(batch["input_ids"], skip_special_tokens=True)
    return out


def assert_same(ours_out: dict, ref_out: dict, context: str) -> None:
    assert ours_out.keys() == ref_out.keys(), f"{context}: output kinds differ"
    for kind in ref_out:
        a, b = ours_out[kind], ref_out[kind]
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            assert a.keys() == b.keys(), f"{context} [{kind}]: fields {sorted(a)} vs stock {sorted(b)}"
            for field in b:
                if a[field] != b[field]:
                    rows = a[field] if isinstance(a[field], list) else [a[field]]
                    refs = b[field] if isinstance(b[field], list) else [b[field]]
                    i = next((i for i, (x, y) in enumerate(zip(rows, refs)) if x != y), min(len(rows), len(refs)))
                    pytest.fail(
                        f"{context} [{kind}] {field} differs at row {i}: ours "
                        f"{rows[i] if i < len(rows) else '<missing>'!r:.400} vs stock "
                        f"{refs[i] if i < len(refs) else '<missing>'!r:.400}"
                    )
        if isinstance(a, list) and isinstance(b, list):
            i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            pytest.fail(f"{context} [{kind}] differs at item {i}: ours {a[i] if i < len(a) else None!r:.400} "
                        f"vs stock {b[i] if i < len(b) else None!r:.400}")
        pytest.fail(f"{context} [{kind}] differs")


def assert_same_outputs(tok, ref, context: str) -> None:
    assert_same(outputs(tok, texts()), outputs(ref, texts()), context)


def jsonable(value):
    """Tuples to lists, recursively (how outputs look after a trip through JSON)."""
    return json.loads(json.dumps(value))


MARK = "@@crayon-test-result@@"


def run_python(code: str, cwd: Path, **env: str) -> dict:
    """Runs `code` in a fresh interpreter that sees the same packages (crayon_hf included) as this
    one; it prints its result as JSON after MARK (other output, such as transformers' prompts,
    may come before), returned parsed."""
    code = f"MARK = {MARK!r}\n" + textwrap.dedent(code)
    # The same sys.path: the source tree in development, the installed package in CI.
    python_path = os.pathsep.join(p or os.getcwd() for p in sys.path)
    full_env = dict(os.environ, PYTHONPATH=python_path, HF_HUB_OFFLINE="1", HF_HOME=str(cwd / "hf_home"), **env)
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert MARK in proc.stdout, f"no result from the subprocess:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.rsplit(MARK, 1)[1])


def config_of(path: Path) -> dict:
    with open(path / "tokenizer_config.json", encoding="utf-8") as f:
        return json.load(f)


def no_compiling(monkeypatch) -> None:
    """From now on, compiling a cartridge fails the test (loads must map a saved one)."""

    def refuse(cls, *args, **kwargs):
        raise AssertionError("compiled a cartridge where a saved crayon.dat should have been mapped")

    monkeypatch.setattr(Tokenizer, "from_buffer", classmethod(refuse))


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    """Each shared folder, loaded with CrayonTokenizer and saved once (tests only read these).
    qwen2_5's config.json (model_type qwen2, which makes transformers pick the class from the
    model type) is copied along, as a model folder would have it."""
    root = tmp_path_factory.mktemp("saved")
    out = {}
    for name in NATIVE + FALLBACK:
        target = root / name
        ours(name).save_pretrained(target)
        if (folder(name) / "config.json").is_file():
            shutil.copy(folder(name) / "config.json", target / "config.json")
        out[name] = target
    return out


@pytest.fixture(scope="module")
def stock_saved(tmp_path_factory) -> dict[str, Path]:
    """The same folders saved by the stock tokenizers (what transformers alone writes)."""
    root = tmp_path_factory.mktemp("stock_saved")
    out = {}
    for name in NATIVE + FALLBACK:
        stock(name).save_pretrained(root / name)
        out[name] = root / name
    return out


@pytest.fixture
def unpatched():
    """patch_transformers() is process-wide: always undone, whatever the test did."""
    unpatch_transformers()
    try:
        yield
    finally:
        unpatch_transformers()


# ---------------------------------------------------------------------------- 0. the loaded tokenizer


@pytest.mark.parametrize("name", NATIVE + FALLBACK)
def test_loaded_tokenizer_is_the_stock_class_accelerated(name):
    tok, ref = ours(name), stock(name)
    assert isinstance(tok, CrayonTokenizer) and isinstance(tok, type(ref))
    assert type(tok).__name__ == f"Crayon{type(ref).__name__}" or type(ref).__name__ == "TokenizersBackend"
    expected = "native" if name in NATIVE else "fallback: "
    assert tok.crayon_backend.startswith(expected), tok.crayon_backend
    assert_same_outputs(tok, ref, name)


# ---------------------------------------------------------------------------- 1. save_pretrained


@pytest.mark.parametrize("name", NATIVE)
def test_save_pretrained_writes_cartridge_and_entry(name, saved, stock_saved):
    path, ref_path = saved[name], stock_saved[name]
    ref_files = set(os.listdir(ref_path))
    assert {"tokenizer.json", "tokenizer_config.json"} <= ref_files
    # No restorable state where the saved tokenizer.json does not parse back to itself (t5's
    # Unigram scores come back an ulp off): that folder loads the stock way (_pretrained_state).
    state = set() if name == "t5_small" else {STATE}
    assert set(os.listdir(path)) - {"config.json"} == ref_files | {CARTRIDGE} | state
    assert (path / "tokenizer.json").read_bytes() == (ref_path / "tokenizer.json").read_bytes()

    config, ref_config = config_of(path), config_of(ref_path)
    entry = config.pop("crayon")
    assert config == ref_config  # everything transformers writes is kept, tokenizer_class included
    assert config["tokenizer_class"] == type(stock(name)).__name__
    assert entry["format"] == 1
    assert entry["tokenizer_class"] == ref_config["tokenizer_class"]
    assert entry["cartridge"] == CARTRIDGE
    assert isinstance(entry["source_sha256"], str) and len(entry["source_sha256"]) == 64
    cartridge = Tokenizer.from_cartridge(path / CARTRIDGE)
    assert cartridge._meta["source_sha256"] == entry["source_sha256"]
    # The saved cartridge is the one the tokenizer runs on.
    assert (path / CARTRIDGE).read_bytes() == Path(ours(name)._crayon._cartridge_path).read_bytes()


def test_save_pretrained_returns_what_it_wrote(tmp_path):
    files = ours("gpt2").save_pretrained(tmp_path / "out")
    ref_files = stock("gpt2").save_pretrained(tmp_path / "stock")
    assert sorted(Path(f).name for f in files) == sorted(os.listdir(tmp_path / "out"))
    assert {Path(f).name for f in files} == {Path(f).name for f in ref_files} | {CARTRIDGE, STATE}


@pytest.mark.parametrize("name", FALLBACK)
def test_save_pretrained_fallback_folder_has_no_cartridge(name, saved, stock_saved):
    path, ref_path = saved[name], stock_saved[name]
    assert ours(name).crayon_backend.startswith("fallback: ")
    assert CARTRIDGE not in os.listdir(path)
    assert set(os.listdir(path)) - {"config.json"} == set(os.listdir(ref_path))
    config, ref_config = config_of(path), config_of(ref_path)
    entry = config.pop("crayon")
    assert config == ref_config
    assert entry["format"] == 1
    assert entry["tokenizer_class"] == ref_config["tokenizer_class"] == type(stock(name)).__name__
    assert entry["cartridge"] is None


# ---------------------------------------------------------------------------- 2. reload with crayon-hf


@pytest.mark.parametrize("name", NATIVE + FALLBACK)
def test_autotokenizer_reloads_saved_folder_as_crayon(name, saved, monkeypatch, unpatched):
    if name in NATIVE:
        no_compiling(monkeypatch)
    tok = AutoTokenizer.from_pretrained(saved[name])
    ref = stock(name)
    assert isinstance(tok, CrayonTokenizer) and isinstance(tok, type(ref))
    assert type(tok).__name__ == type(ours(name)).__name__
    assert tok.crayon_backend == ours(name).crayon_backend
    if name in NATIVE:
        assert Path(tok._crayon._cartridge_path) == (saved[name] / CARTRIDGE).resolve()
    assert_same_outputs(tok, ref, f"{name} reloaded")


def test_crayon_from_pretrained_maps_saved_cartridge(saved, monkeypatch):
    no_compiling(monkeypatch)
    tok = CrayonTokenizer.from_pretrained(saved["gpt2"])
    assert type(tok).__name__ == "CrayonGPT2Tokenizer"
    assert Path(tok._crayon._cartridge_path) == (saved["gpt2"] / CARTRIDGE).resolve()
    assert_same_outputs(tok, stock("gpt2"), "gpt2 CrayonTokenizer.from_pretrained(saved)")


# ---------------------------------------------------------------------------- 3. without crayon-hf


def test_saved_folders_load_without_crayon(saved, tmp_path):
    """A process that imports only transformers loads every saved folder as the original class."""
    sample = texts()
    (tmp_path / "in.json").write_text(json.dumps({"dirs": {k: str(v) for k, v in saved.items()}, "texts": sample}))
    result = run_python(
        """
        import json, sys
        from transformers import AutoTokenizer

        job = json.load(open("in.json"))
        out = {}
        for name, path in job["dirs"].items():
            tok = AutoTokenizer.from_pretrained(path)
            enc = tok(job["texts"], return_offsets_mapping=True)
            out[name] = {
                "class": type(tok).__name__,
                "mro": [c.__name__ for c in type(tok).__mro__],
                "input_ids": enc["input_ids"],
                "attention_mask": enc["attention_mask"],
                "offsets": enc["offset_mapping"],
                "decode": [tok.decode(ids) for ids in enc["input_ids"]],
            }
        out["crayon_imported"] = sorted(m for m in sys.modules if m.startswith("crayon"))
        print()
        print(MARK + json.dumps(out))
        """,
        tmp_path,
    )
    assert result.pop("crayon_imported") == []
    for name, got in result.items():
        ref = stock(name)
        enc = ref(sample, return_offsets_mapping=True)
        assert got["class"] == type(ref).__name__, name
        assert "CrayonTokenizer" not in got["mro"], name
        assert got["input_ids"] == enc["input_ids"], name
        assert got["attention_mask"] == enc["attention_mask"], name
        assert got["offsets"] == jsonable(enc["offset_mapping"]), name
        assert got["decode"] == [ref.decode(ids) for ids in enc["input_ids"]], name


# ---------------------------------------------------------------------------- 4. remote code


@pytest.fixture(scope="module")
def remote_saved(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("remote") / "qwen2_5"
    files = ours("qwen2_5").save_pretrained(path, crayon_remote_code=True)
    assert REMOTE_CODE in {Path(f).name for f in files}
    return path


def test_remote_code_folder_layout(remote_saved, saved):
    assert (remote_saved / REMOTE_CODE).is_file()
    config = config_of(remote_saved)
    assert config["auto_map"] == {"AutoTokenizer": [None, "crayon_tokenizer.CrayonTokenizer"]}
    assert config["crayon"]["cartridge"] == CARTRIDGE
    assert config["tokenizer_class"] == "Qwen2Tokenizer"
    assert set(os.listdir(remote_saved)) == set(os.listdir(saved["qwen2_5"])) - {"config.json"} | {REMOTE_CODE}
    # Without the option there is no auto_map and no module.
    assert "auto_map" not in config_of(saved["qwen2_5"])
    assert REMOTE_CODE not in os.listdir(saved["qwen2_5"])


def test_remote_code_loads_without_importing_crayon(remote_saved, tmp_path):
    sample = texts()
    (tmp_path / "in.json").write_text(json.dumps({"dir": str(remote_saved), "texts": sample}))
    result = run_python(
        """
        import json, sys
        from transformers import AutoTokenizer

        job = json.load(open("in.json"))
        out = {}
        # First without trust_remote_code, while crayon_hf is not imported at all.
        try:
            tok = AutoTokenizer.from_pretrained(job["dir"])
        except Exception as e:
            out["untrusted"] = {"raised": type(e).__name__, "message": str(e)[:300]}
        else:
            out["untrusted"] = {"class": type(tok).__name__, "ids": tok(job["texts"])["input_ids"]}
        out["crayon_before"] = sorted(m for m in sys.modules if m.startswith("crayon"))

        tok = AutoTokenizer.from_pretrained(job["dir"], trust_remote_code=True)
        enc = tok(job["texts"], return_offsets_mapping=True)
        out["trusted"] = {
            "class": type(tok).__name__,
            "mro": [c.__name__ for c in type(tok).__mro__],
            "backend": getattr(tok, "crayon_backend", None),
            "cartridge": tok._crayon._cartridge_path if getattr(tok, "_crayon", None) is not None else None,
            "ids": enc["input_ids"],
            "offsets": enc["offset_mapping"],
            "decode": [tok.decode(ids) for ids in enc["input_ids"]],
        }
        print()
        print(MARK + json.dumps(out))
        """,
        tmp_path,
    )
    ref = stock("qwen2_5")
    enc = ref(sample, return_offsets_mapping=True)
    assert result["crayon_before"] == []

    trusted = result["trusted"]
    assert "CrayonTokenizer" in trusted["mro"], trusted["mro"]
    assert "Qwen2Tokenizer" in trusted["mro"], trusted["mro"]
    assert trusted["backend"] == "native"
    assert trusted["cartridge"] == str((remote_saved / CARTRIDGE).resolve())
    assert trusted["ids"] == enc["input_ids"]
    assert trusted["offsets"] == jsonable(enc["offset_mapping"])
    assert trusted["decode"] == [ref.decode(ids) for ids in enc["input_ids"]]

    # Without trust_remote_code: transformers 5.23 does not raise when the folder also names a
    # class it has (tokenizer_class), it loads that class instead (resolve_trust_remote_code with
    # has_local_code). Either behaviour is acceptable; a silent wrong tokenizer is not.
    untrusted = result["untrusted"]
    if "raised" not in untrusted:
        assert untrusted["class"] == "Qwen2Tokenizer"
        assert untrusted["ids"] == enc["input_ids"]


def test_resaving_remote_code_folder_keeps_it_loadable(remote_saved, tmp_path, unpatched):
    """Loading a crayon_remote_code folder and saving it again (default arguments) must not leave
    an auto_map pointing at a module that was not written."""
    tok = AutoTokenizer.from_pretrained(remote_saved)
    assert isinstance(tok, CrayonTokenizer)
    tok.save_pretrained(tmp_path / "again")
    config = config_of(tmp_path / "again")
    auto_map = config.get("auto_map") or {}
    refs = [r for v in auto_map.values() for r in (v if isinstance(v, list) else [v]) if r]
    for ref in refs:
        module = ref.split("--")[-1].rsplit(".", 1)[0]
        assert (tmp_path / "again" / f"{module}.py").is_file(), (
            f"tokenizer_config.json has auto_map {auto_map} but {module}.py was not written"
        )


CUSTOM_MODULE = '''from transformers import TokenizersBackend


class MyTok(TokenizersBackend):
    """A tokenizer class that exists only in its folder (trust_remote_code)."""
'''


@pytest.fixture(scope="module")
def custom_code_run(tmp_path_factory) -> dict:
    """A folder whose tokenizer class is remote code (gpt2's tokenizer.json, class MyTok in
    my_tok.py), loaded with trust_remote_code=True by CrayonTokenizer.from_pretrained and by a
    patched AutoTokenizer, then saved; one subprocess (the remote code goes to its HF_HOME)."""
    root = tmp_path_factory.mktemp("custom_code")
    custom = root / "custom"
    custom.mkdir()
    shutil.copy(folder("gpt2") / "tokenizer.json", custom / "tokenizer.json")
    (custom / "my_tok.py").write_text(CUSTOM_MODULE)
    (custom / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "MyTok", "auto_map": {"AutoTokenizer": [None, "my_tok.MyTok"]}, "model_max_length": 1024}
    ))
    (root / "in.json").write_text(json.dumps({"dir": str(custom), "out": str(root / "saved"), "texts": texts()}))
    return run_python(
        """
        import json, os
        from transformers import AutoTokenizer
        from crayon_hf.transformers import CrayonTokenizer, patch_transformers

        job = json.load(open("in.json"))
        out = {}
        ref = AutoTokenizer.from_pretrained(job["dir"], trust_remote_code=True)
        out["stock"] = {"class": type(ref).__name__, "ids": ref(job["texts"])["input_ids"]}

        def describe(tok):
            return {"class": type(tok).__name__, "mro": [c.__name__ for c in type(tok).__mro__],
                    "backend": getattr(tok, "crayon_backend", None), "ids": tok(job["texts"])["input_ids"]}

        try:
            out["explicit"] = describe(CrayonTokenizer.from_pretrained(job["dir"], trust_remote_code=True))
        except Exception as e:
            out["explicit"] = {"raised": f"{type(e).__name__}: {str(e)[:300]}"}

        patch_transformers()
        tok = AutoTokenizer.from_pretrained(job["dir"], trust_remote_code=True)
        out["patched"] = describe(tok)
        tok.save_pretrained(job["out"])
        out["saved_files"] = sorted(os.listdir(job["out"]))
        out["saved_config"] = json.load(open(os.path.join(job["out"], "tokenizer_config.json")))
        print()
        print(MARK + json.dumps(out))
        """,
        root,
    )


def test_crayon_from_pretrained_forwards_trust_remote_code(custom_code_run):
    """CrayonTokenizer.from_pretrained(folder, trust_remote_code=True) for a folder whose class is
    remote code loads that class (accelerated), as AutoTokenizer does."""
    stock_run, explicit = custom_code_run["stock"], custom_code_run["explicit"]
    assert stock_run["class"] == "MyTok"
    assert "raised" not in explicit, explicit["raised"]
    # A remote-code class keeps its own name (save_pretrained names the instance's class in auto_map).
    assert explicit["class"] == "MyTok" and "CrayonTokenizer" in explicit["mro"]
    assert explicit["backend"] == "native"
    assert explicit["ids"] == stock_run["ids"]


def test_patched_remote_code_class_saves_a_sound_folder(custom_code_run):
    """patch_transformers() + a remote-code class: loads accelerated; saving it must not copy
    crayon_hf's own module into the folder (as transformers.py) nor point auto_map at the
    dynamic Crayon subclass. (Reloading is not checked: transformers 5.23 itself writes an
    auto_map it cannot read back for remote-code tokenizers, "my_tok.MyTok" as a plain string.)"""
    patched = custom_code_run["patched"]
    assert patched["class"] == "MyTok" and patched["backend"] == "native"
    assert patched["ids"] == custom_code_run["stock"]["ids"]
    files, config = custom_code_run["saved_files"], custom_code_run["saved_config"]
    assert CARTRIDGE in files
    assert "transformers.py" not in files, files
    assert "Crayon" not in json.dumps(config.get("auto_map")), config.get("auto_map")


# ---------------------------------------------------------------------------- 5. added tokens


def test_added_tokens_survive_save_and_reload(tmp_path, monkeypatch, unpatched):
    tok = CrayonTokenizer.from_pretrained(folder("gpt2"))
    ref = AutoTokenizer.from_pretrained(folder("gpt2"))
    for t in (tok, ref):
        assert t.add_tokens(["crayonword", AddedToken(" zzqx", lstrip=True, rstrip=False)]) == 2
        assert t.add_tokens(["<|crayon_special|>"], special_tokens=True) == 1
        t.add_special_tokens({"pad_token": "<|crayon_pad|>"})
    sample = texts() + [
        "a crayonword b zzqx<|crayon_special|> end",
        "crayonwordcrayonword  zzqx<|crayon_pad|><|crayon_special|>",
    ]
    assert_same(outputs(tok, sample), outputs(ref, sample), "gpt2 with added tokens")

    path = tmp_path / "added"
    tok.save_pretrained(path)
    assert config_of(path)["crayon"]["cartridge"] == CARTRIDGE
    saved_engine = Tokenizer.from_cartridge(path / CARTRIDGE)
    assert saved_engine.get_added_tokens_decoder() == ref.backend_tokenizer.get_added_tokens_decoder()
    assert saved_engine._meta["source_sha256"] == config_of(path)["crayon"]["source_sha256"]
    for text in sample[-2:]:
        assert saved_engine.encode(text).ids == ref.backend_tokenizer.encode(text).ids

    no_compiling(monkeypatch)
    again = AutoTokenizer.from_pretrained(path)
    assert isinstance(again, CrayonTokenizer) and again.crayon_backend == "native"
    assert Path(again._crayon._cartridge_path) == (path / CARTRIDGE).resolve()
    assert again.pad_token == "<|crayon_pad|>"
    assert again.get_added_vocab() == ref.get_added_vocab()
    assert_same(outputs(again, sample), outputs(ref, sample), "gpt2 with added tokens, reloaded")
    monkeypatch.undo()

    # ... and a pickle of the tokenizer with added tokens (their cartridge is an overlay).
    unpickled = pickle.loads(pickle.dumps(tok))
    assert_same(outputs(unpickled, sample), outputs(ref, sample), "gpt2 with added tokens, unpickled")


# ---------------------------------------------------------------------------- 6. push_to_hub offline


@pytest.fixture
def fake_hub(monkeypatch):
    """Records create_repo/create_commit instead of calling the hub; anything else that tries the
    network is recorded too (and refused)."""
    import huggingface_hub
    from huggingface_hub import HfApi, ModelCard
    from transformers.utils import hub as transformers_hub

    calls: list[tuple] = []
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)

    def connect(self, address, *args, **kwargs):
        calls.append(("connect", address))
        raise OSError("no network in tests")

    monkeypatch.setattr(socket.socket, "connect", connect)

    def create_repo(self, repo_id, **kwargs):
        calls.append(("create_repo", repo_id))
        return SimpleNamespace(repo_id=repo_id, url=f"https://huggingface.co/{repo_id}")

    def create_commit(self, repo_id, operations, **kwargs):
        files = {}
        for op in operations:
            data = op.path_or_fileobj
            data = Path(data).read_bytes() if isinstance(data, (str, Path)) else bytes(data)
            files[op.path_in_repo] = data
        calls.append(("create_commit", repo_id, files))
        return SimpleNamespace(commit_url=f"https://huggingface.co/{repo_id}/commit/0", oid="0")

    def no_card(cls, *args, **kwargs):  # no card on the "hub" yet: transformers writes its template
        raise transformers_hub.EntryNotFoundError("offline test: no model card")

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "create_commit", create_commit)
    monkeypatch.setattr(HfApi, "create_branch", lambda self, *a, **k: calls.append(("create_branch",)))
    monkeypatch.setattr(ModelCard, "load", classmethod(no_card))
    return calls


def _commit(calls: list[tuple]) -> dict[str, bytes]:
    assert [c[0] for c in calls] == ["create_repo", "create_commit"], [c[:2] for c in calls]
    assert calls[0][1] == calls[1][1] == "user/repo"
    return calls[1][2]


def test_push_to_hub_uploads_what_save_pretrained_writes(fake_hub, tmp_path):
    tok = ours("qwen2_5")
    tok.push_to_hub("user/repo")
    uploaded = _commit(fake_hub)

    written = tok.save_pretrained(tmp_path / "local")
    names = {Path(f).name for f in written}
    assert names == set(os.listdir(tmp_path / "local"))
    assert CARTRIDGE in names
    # push_to_hub adds transformers' model card, nothing else.
    assert set(uploaded) == names | {"README.md"}
    for name in names:
        assert uploaded[name] == (tmp_path / "local" / name).read_bytes(), name
    assert json.loads(uploaded["tokenizer_config.json"])["crayon"]["cartridge"] == CARTRIDGE


def test_save_pretrained_push_to_hub(fake_hub, tmp_path):
    path = tmp_path / "pushed"
    written = ours("qwen2_5").save_pretrained(path, push_to_hub=True, repo_id="user/repo")
    uploaded = _commit(fake_hub)
    names = {Path(f).name for f in written}
    assert CARTRIDGE in names
    assert set(uploaded) == names == set(os.listdir(path))
    for name in names:
        assert uploaded[name] == (path / name).read_bytes(), name


# ---------------------------------------------------------------------------- 7. pickling


@pytest.mark.parametrize("name", NATIVE)
def test_pickle_roundtrip(name):
    tok, ref = ours(name), stock(name)
    data = pickle.dumps(tok)
    ref_data = pickle.dumps(ref)
    cartridge_size = os.path.getsize(tok._crayon._cartridge_path)
    # (2%: an instance restored without its backend derives `_vocab` and `_merges` after the rest
    # of its state, so pickle meets their shared strings later and refers back to them with 4-byte
    # memo indices where the stock pickle uses 1-byte ones: qwen2_5 +127 KB of 10.3 MB.)
    assert len(data) <= 1.02 * len(ref_data) + 64 * 1024, (len(data), len(ref_data))
    assert len(data) < cartridge_size, (len(data), cartridge_size)  # a reference, not the bytes
    back = pickle.loads(data)
    assert type(back).__name__ == type(tok).__name__
    assert isinstance(back, CrayonTokenizer) and isinstance(back, type(ref))
    assert back.crayon_backend == "native"
    ref_back = pickle.loads(ref_data)
    if ref_back.backend_tokenizer.to_str() == ref.backend_tokenizer.to_str():
        assert back._crayon._cartridge_path == tok._crayon._cartridge_path  # mapped, not recompiled
    else:
        # tokenizers itself does not keep float bits through a pickle (it re-reads the JSON of its
        # Unigram scores without correct rounding): the child follows its own backend, recompiled.
        assert back._crayon._cartridge_path != tok._crayon._cartridge_path
    assert_same_outputs(back, ref_back, f"{name} unpickled")


def test_unpickle_recompiles_when_cartridge_is_gone(tmp_path, monkeypatch):
    tok = ours("gpt2")
    source = Path(tok._crayon._cartridge_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copy(source, cache / source.name)
    monkeypatch.setenv("CRAYON_HF_CACHE", str(cache))
    moved = CrayonTokenizer.from_pretrained(folder("gpt2"))
    assert Path(moved._crayon._cartridge_path) == (cache / source.name).resolve()
    data = pickle.dumps(moved)
    (cache / source.name).unlink()

    back = pickle.loads(data)
    assert type(back).__name__ == "CrayonGPT2Tokenizer"
    assert back.crayon_backend == "native"
    assert Path(back._crayon._cartridge_path).is_file()
    assert (cache / source.name).is_file()  # rebuilt in the cache
    assert_same_outputs(back, stock("gpt2"), "gpt2 unpickled after its cartridge was deleted")


def test_deepcopy():
    tok, ref = ours("gpt2"), stock("gpt2")
    dup = copy.deepcopy(tok)
    assert type(dup) is type(tok) and dup.crayon_backend == "native"
    assert_same_outputs(dup, ref, "gpt2 deepcopy")
    # The copy is independent: tokens added to it do not reach the original.
    dup.add_tokens(["zzqxcopyonly"])
    assert len(dup) == len(ref) + 1 and len(tok) == len(ref)
    assert tok("a zzqxcopyonly")["input_ids"] == ref("a zzqxcopyonly")["input_ids"]
    assert dup("a zzqxcopyonly")["input_ids"][-1] == len(ref)


# ---------------------------------------------------------------------------- 8. datasets


def _tokenize_batch(batch, tok):
    return tok(batch["text"], padding="max_length", truncation=True, max_length=32, return_offsets_mapping=True)


def test_datasets_map_with_worker_processes():
    datasets = require_module("datasets")
    tok = CrayonTokenizer.from_pretrained(folder("gpt2"), pad_token="<|endoftext|>")
    ref = AutoTokenizer.from_pretrained(folder("gpt2"), pad_token="<|endoftext|>")
    ds = datasets.Dataset.from_dict({"text": texts() * 3})
    got = ds.map(_tokenize_batch, batched=True, batch_size=16, num_proc=2, fn_kwargs={"tok": tok})
    want = ds.map(_tokenize_batch, batched=True, batch_size=16, fn_kwargs={"tok": ref})
    assert got.column_names == want.column_names
    assert got.to_dict() == want.to_dict()


# ---------------------------------------------------------------------------- 9. threads


def test_threads_with_different_lengths_do_not_interfere():
    tok, ref = ours("qwen2_5"), stock("qwen2_5")
    sample = texts()[:12]
    lengths = (5, 37)
    expected = {
        n: ref(sample, padding="max_length", truncation=True, max_length=n, return_tensors="np") for n in lengths
    }
    barrier = threading.Barrier(len(lengths))
    failures: list[str] = []

    def work(n: int) -> None:
        try:
            for i in range(200):
                barrier.wait(timeout=60)
                out = tok(sample, padding="max_length", truncation=True, max_length=n, return_tensors="np")
                for key in ("input_ids", "attention_mask"):
                    if out[key].shape != (len(sample), n) or not np.array_equal(out[key], expected[n][key]):
                        failures.append(f"max_length={n} iteration {i}: {key} shape {out[key].shape}")
                        return
        except Exception as e:  # noqa: BLE001 -- reported below
            failures.append(f"max_length={n}: {type(e).__name__}: {e}")
            barrier.abort()

    threads = [threading.Thread(target=work, args=(n,)) for n in lengths]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


# ---------------------------------------------------------------------------- 10. patch_transformers


def test_patch_and_unpatch_transformers(saved, unpatched):
    refs = {name: stock(name) for name in ("qwen2_5", "gpt2", "bert_nmt")}  # loaded unpatched
    patch_transformers()
    for name in ("qwen2_5", "gpt2"):
        tok = AutoTokenizer.from_pretrained(folder(name))
        assert isinstance(tok, CrayonTokenizer) and isinstance(tok, type(refs[name]))
        assert type(tok).__name__ == f"Crayon{type(refs[name]).__name__}"
        assert tok.crayon_backend == "native"
        assert_same_outputs(tok, refs[name], f"{name} after patch_transformers()")
    fallback = AutoTokenizer.from_pretrained(folder("bert_nmt"))
    assert isinstance(fallback, CrayonTokenizer) and isinstance(fallback, type(refs["bert_nmt"]))
    assert fallback.crayon_backend.startswith("fallback: ")
    assert_same_outputs(fallback, refs["bert_nmt"], "bert_nmt after patch_transformers()")

    unpatch_transformers()
    plain = AutoTokenizer.from_pretrained(folder("gpt2"))
    assert type(plain) is type(refs["gpt2"]) and not isinstance(plain, CrayonTokenizer)
    # Folders saved by crayon-hf still load as CrayonTokenizer.
    assert isinstance(AutoTokenizer.from_pretrained(saved["gpt2"]), CrayonTokenizer)


# ---------------------------------------------------------------------------- 11. the import hook


def test_import_is_cheap_and_the_hook_is_lazy(saved, tmp_path):
    sample = texts()
    (tmp_path / "in.json").write_text(json.dumps({"dir": str(saved["gpt2"]), "texts": sample}))
    result = run_python(
        """
        import json, sys
        import crayon_hf

        out = {"after_import": {m: m in sys.modules for m in ("transformers", "numpy", "crayon_hf.transformers")}}
        from transformers import AutoTokenizer

        out["after_transformers"] = "crayon_hf.transformers" in sys.modules
        job = json.load(open("in.json"))
        tok = AutoTokenizer.from_pretrained(job["dir"])
        out["class"] = type(tok).__name__
        out["mro"] = [c.__name__ for c in type(tok).__mro__]
        out["backend"] = tok.crayon_backend
        out["ids"] = tok(job["texts"])["input_ids"]
        print()
        print(MARK + json.dumps(out))
        """,
        tmp_path,
    )
    assert result["after_import"] == {"transformers": False, "numpy": False, "crayon_hf.transformers": False}
    assert result["after_transformers"] is False  # the face loads only when a saved folder needs it
    assert result["class"] == "CrayonGPT2Tokenizer"
    assert "CrayonTokenizer" in result["mro"]
    assert result["backend"] == "native"
    assert result["ids"] == stock("gpt2")(sample)["input_ids"]


# ---------------------------------------------------------------------------- 12. chat templates

CONVERSATIONS = [
    [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hi there! 你好, ça va? <|im_end|> is a special token."},
        {"role": "assistant", "content": "Hello.\n\nHow can I help?"},
    ],
    [{"role": "user", "content": "  spaces\tand\ttabs  "}],
]


@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_apply_chat_template_tokenized(add_generation_prompt):
    tok, ref = ours("qwen2_5"), stock("qwen2_5")
    for conversation in CONVERSATIONS:
        got = tok.apply_chat_template(conversation, tokenize=True, add_generation_prompt=add_generation_prompt)
        want = ref.apply_chat_template(conversation, tokenize=True, add_generation_prompt=add_generation_prompt)
        assert type(got) is type(want)
        assert got == want
        ids = want["input_ids"] if isinstance(want, dict) or hasattr(want, "keys") else want
        assert tok.decode(ids) == ref.decode(ids)
    got = tok.apply_chat_template(CONVERSATIONS, tokenize=True, add_generation_prompt=add_generation_prompt)
    want = ref.apply_chat_template(CONVERSATIONS, tokenize=True, add_generation_prompt=add_generation_prompt)
    assert got == want
    got = tok.apply_chat_template(CONVERSATIONS, tokenize=True, return_dict=True, padding="max_length",
                                  truncation=True, max_length=48, return_tensors="np")
    want = ref.apply_chat_template(CONVERSATIONS, tokenize=True, return_dict=True, padding="max_length",
                                   truncation=True, max_length=48, return_tensors="np")
    assert got.keys() == want.keys()
    for key in want:
        assert np.array_equal(got[key], want[key]), key
