"""Sharing a CrayonTokenizer: `push_to_hub(..., crayon_cartridge=False)` (the stock files only), and
`save_pretrained(..., crayon_remote_code=True)` folders loading where crayon-hf is not installed.
Hub calls are recorded, never sent (no network in tests)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from support import VOCAB, require_module, require_shared, short_docs

require_module("transformers")

from transformers import AutoTokenizer  # noqa: E402

from crayon_hf.transformers import CrayonTokenizer  # noqa: E402

CARTRIDGE = "crayon.dat"
STATE = "crayon_state.json"
REMOTE_CODE = "crayon_tokenizer.py"
MARK = "@@RESULT@@"


@pytest.fixture(scope="module")
def qwen():
    return CrayonTokenizer.from_pretrained(require_shared(VOCAB / "hf" / "qwen2_5"))


@pytest.fixture(scope="module")
def stock_qwen():
    tok = AutoTokenizer.from_pretrained(require_shared(VOCAB / "hf" / "qwen2_5"))
    assert not isinstance(tok, CrayonTokenizer)
    return tok


@pytest.fixture
def hub(monkeypatch):
    """Records the repository and the files of each commit instead of calling the hub."""
    import huggingface_hub
    from huggingface_hub import HfApi, ModelCard
    from transformers.utils import hub as transformers_hub

    calls: list[tuple] = []
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)

    def connect(self, address, *args, **kwargs):
        raise OSError(f"no network in tests ({address})")

    def create_commit(self, repo_id, operations, **kwargs):
        files = {}
        for op in operations:
            data = op.path_or_fileobj
            files[op.path_in_repo] = Path(data).read_bytes() if isinstance(data, (str, Path)) else bytes(data)
        calls.append((repo_id, files))
        return SimpleNamespace(commit_url=f"https://huggingface.co/{repo_id}/commit/0", oid="0")

    def no_card(cls, *args, **kwargs):
        raise transformers_hub.EntryNotFoundError("offline test: no model card")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **k: SimpleNamespace(repo_id=repo_id))
    monkeypatch.setattr(HfApi, "create_commit", create_commit)
    monkeypatch.setattr(ModelCard, "load", classmethod(no_card))
    return calls


def _materialize(files: dict[str, bytes], path: Path) -> Path:
    path.mkdir(parents=True)
    for name, data in files.items():
        (path / name).write_bytes(data)
    return path


def test_push_without_cartridge(hub, qwen, stock_qwen, tmp_path):
    qwen.push_to_hub("user/slim", crayon_cartridge=False)
    qwen.push_to_hub("user/full")
    (slim_repo, slim), (full_repo, full) = hub
    assert (slim_repo, full_repo) == ("user/slim", "user/full")
    assert CARTRIDGE in full and STATE in full
    assert set(slim) == set(full) - {CARTRIDGE, STATE}
    entry = json.loads(slim["tokenizer_config.json"])["crayon"]
    assert entry["cartridge"] is None and entry["tokenizer_class"] == "Qwen2Tokenizer"
    assert slim["tokenizer.json"] == full["tokenizer.json"]
    assert len(full[CARTRIDGE]) > len(full["tokenizer.json"])  # what the option saves
    # The option does not stick: the next save writes the cartridge again.
    assert CARTRIDGE in {Path(f).name for f in qwen.save_pretrained(tmp_path / "after")}

    # What was uploaded loads: natively (compiling tokenizer.json), and with transformers alone.
    folder = _materialize(slim, tmp_path / "slim")
    texts = short_docs(100)
    ours = CrayonTokenizer.from_pretrained(folder)
    assert ours.crayon_backend == "native"
    stock = AutoTokenizer.from_pretrained(folder)
    expected = stock_qwen(texts)["input_ids"]
    assert ours(texts)["input_ids"] == expected
    assert stock(texts)["input_ids"] == expected


def test_push_with_remote_code(hub, qwen, tmp_path):
    qwen.push_to_hub("user/remote", crayon_remote_code=True, crayon_cartridge=False)
    ((_, files),) = hub
    assert REMOTE_CODE in files and CARTRIDGE not in files
    assert json.loads(files["tokenizer_config.json"])["auto_map"]["AutoTokenizer"][1] == "crayon_tokenizer.CrayonTokenizer"


def test_save_without_cartridge(qwen, tmp_path):
    written = {Path(f).name for f in qwen.save_pretrained(tmp_path / "slim", crayon_cartridge=False)}
    assert CARTRIDGE not in written and STATE not in written
    assert set(os.listdir(tmp_path / "slim")) == written


BLOCK_CRAYON = """
import importlib.abc, sys

class _NoCrayon(importlib.abc.MetaPathFinder):
    # crayon-hf is not installed here: importing it fails as a missing package does.
    def find_spec(self, name, path=None, target=None):
        if name == "crayon_hf" or name.startswith("crayon_hf."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoCrayon())
"""


def test_remote_code_folder_loads_without_crayon(qwen, stock_qwen, tmp_path):
    folder = tmp_path / "remote"
    qwen.save_pretrained(folder, crayon_remote_code=True)
    module = (folder / REMOTE_CODE).read_text(encoding="utf-8")
    assert "pypi.org" not in module and "http" not in module
    texts = short_docs(60) + ["Hello world", "emoji 🤗 and <|im_start|>user"]
    (tmp_path / "job.json").write_text(json.dumps({"dir": str(folder), "texts": texts}))
    code = BLOCK_CRAYON + textwrap.dedent(f"""
        import json
        try:
            import crayon_hf
        except ModuleNotFoundError:
            blocked = True
        else:
            blocked = False
        from transformers import AutoTokenizer

        job = json.load(open("job.json"))
        tok = AutoTokenizer.from_pretrained(job["dir"], trust_remote_code=True)
        enc = tok(job["texts"], return_offsets_mapping=True)
        print({MARK!r} + json.dumps({{
            "blocked": blocked,
            "mro": [c.__name__ for c in type(tok).__mro__],
            "crayon_loaded": sorted(m for m in sys.modules if m.startswith("crayon_hf")),
            "ids": enc["input_ids"],
            "offsets": [[list(o) for o in row] for row in enc["offset_mapping"]],
            "decode": [tok.decode(ids) for ids in enc["input_ids"]],
        }}))
    """)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"),
               HF_MODULES_CACHE=str(tmp_path / "modules"))
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and MARK in proc.stdout, proc.stderr[-4000:]
    got = json.loads(proc.stdout.rsplit(MARK, 1)[1])
    assert got["blocked"] and got["crayon_loaded"] == []
    assert got["mro"][0] == "CrayonTokenizer" and "Qwen2Tokenizer" in got["mro"]
    enc = stock_qwen(texts, return_offsets_mapping=True)
    assert got["ids"] == enc["input_ids"]
    assert got["offsets"] == [[list(o) for o in row] for row in enc["offset_mapping"]]
    assert got["decode"] == [stock_qwen.decode(ids) for ids in enc["input_ids"]]
