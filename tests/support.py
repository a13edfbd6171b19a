"""Shared helpers: the real references (built offline) and the shared vocabularies and corpora.

Tests that need ../shared skip with a reason when it is absent (a user's checkout), but
CRAYON_REQUIRE_SHARED=1 (set by .ci/run) turns that skip into a failure, so parity tests can never
skip silently in CI.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CRAYON_SHARED", ROOT.parent / "shared"))
VOCAB = SHARED / "vocab"
CORPORA = SHARED / "corpora"

# CI-sized by default; `pytest -m full` runs whole corpora.
SAMPLE_BYTES = 256 * 1024

TIKTOKEN_VOCABS = ["r50k_base", "cl100k_base", "o200k_base", "llama3"]
# The tokenizer.json folders of ../shared/vocab/hf, by model family; every one runs natively.
BYTE_LEVEL_FOLDERS = ["gpt2", "roberta_base", "gpt_neox_20b", "phi2", "falcon", "llama3_1", "qwen2_5", "deepseek_v3",
                      "clip", "whisper_large_v3"]
SENTENCEPIECE_BPE_FOLDERS = ["mistral_v0_1", "phi3_mini", "gemma"]
WORDPIECE_FOLDERS = ["bert_base_uncased"]
UNIGRAM_FOLDERS = ["t5_small", "xlm_roberta_paraphrase_mpnet"]
BPE_FOLDERS = BYTE_LEVEL_FOLDERS + SENTENCEPIECE_BPE_FOLDERS
NATIVE_FOLDERS = BPE_FOLDERS + WORDPIECE_FOLDERS + UNIGRAM_FOLDERS


def require_shared(path: Path) -> Path:
    if not path.exists():
        reason = f"shared test data not found at {path}"
        if os.environ.get("CRAYON_REQUIRE_SHARED") == "1":
            pytest.fail(f"{reason} (CRAYON_REQUIRE_SHARED=1)")
        pytest.skip(reason)
    return path


def scratch_dir(prefix: str) -> Path:
    """A temporary folder that outlives one test (a session's saved copy of a vocabulary, say) and is
    removed when the process exits: the suite runs again and again on the same disk."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def ray_temp_dir() -> str:
    """A folder for Ray's session folders (logs, sockets) and address file, for a cluster a test
    starts (as RAY_TMPDIR, which Ray reads); the caller removes it when Ray is down. By
    default every run would leave one more under /tmp/ray. Short and under /tmp: Ray's socket paths
    inside it must fit in 107 bytes."""
    import tempfile

    return tempfile.mkdtemp(prefix="crayon-ray-", dir="/tmp")


def require_module(name: str):
    try:
        return __import__(name)
    except ImportError:
        if os.environ.get("CRAYON_REQUIRE_SHARED") == "1":
            pytest.fail(f"reference library {name!r} is not installed (CRAYON_REQUIRE_SHARED=1)")
        pytest.skip(f"reference library {name!r} is not installed")


def require_torch():
    """torch, for the return_tensors="pt" tests: skipped when it is not installed, unless
    CRAYON_REQUIRE_TORCH=1, which makes a missing torch a failure."""
    if os.environ.get("CRAYON_REQUIRE_TORCH") == "1":
        try:
            import torch
        except ImportError as e:
            pytest.fail(f"torch is not installed (CRAYON_REQUIRE_TORCH=1): {e}")
        return torch
    return pytest.importorskip("torch")


_HF_PAIRS: dict[str, tuple[object, object]] = {}


def hf_pair(folder: str):
    """(crayon_hf.Tokenizer, tokenizers.Tokenizer) of a shared tokenizer.json folder, loaded once
    per process."""
    if folder not in _HF_PAIRS:
        tokenizers = require_module("tokenizers")
        from crayon_hf import Tokenizer

        path = require_shared(VOCAB / "hf" / folder / "tokenizer.json")
        _HF_PAIRS[folder] = (Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path)))
    return _HF_PAIRS[folder]


def corpus_files() -> list[Path]:
    require_shared(CORPORA)
    return sorted(p for p in CORPORA.glob("*.txt"))


def corpus_text(path: Path, limit: int | None = SAMPLE_BYTES) -> str:
    data = path.read_bytes()
    if limit is not None and len(data) > limit:
        data = data[:limit]
    return data.decode("utf-8", errors="ignore")


def short_docs(limit: int | None = 2000) -> list[str]:
    import json

    path = require_shared(CORPORA / "short_docs.jsonl")
    docs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            docs.append(json.loads(line)["text"])
            if limit is not None and len(docs) >= limit:
                break
    return docs


def random_slices(text: str, count: int, seed: int, max_len: int = 300) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        a = rng.randrange(len(text))
        out.append(text[a : a + rng.randint(1, max_len)])
    return out


_REFERENCES: dict[str, object] = {}
_OURS: dict[str, object] = {}


def reference_encoding(name: str):
    """The real tiktoken Encoding, built offline from ../shared/vocab/tiktoken."""
    if name in _REFERENCES:
        return _REFERENCES[name]
    tiktoken = require_module("tiktoken")
    import tiktoken.load

    from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS

    known = KNOWN_ENCODINGS[name]
    ranks = tiktoken.load.load_tiktoken_bpe(str(require_shared(VOCAB / "tiktoken" / f"{known.rank_file}.tiktoken")))
    enc = tiktoken.Encoding(name, pat_str=known.pat_str, mergeable_ranks=ranks, special_tokens=known.special_tokens)
    _REFERENCES[name] = enc
    return enc


def our_encoding(name: str):
    """Ours: bundled encodings through get_encoding, Llama 3 through its rank file."""
    if name in _OURS:
        return _OURS[name]
    import crayon_hf.tiktoken as tk
    from crayon_hf.tiktoken._encodings import BUNDLED, KNOWN_ENCODINGS

    if name in BUNDLED:
        enc = tk.get_encoding(name)
    else:
        known = KNOWN_ENCODINGS[name]
        ranks = tk.load.load_tiktoken_bpe(str(require_shared(VOCAB / "tiktoken" / f"{known.rank_file}.tiktoken")))
        enc = tk.Encoding(name, pat_str=known.pat_str, mergeable_ranks=ranks, special_tokens=known.special_tokens)
    _OURS[name] = enc
    return enc


def child_python(*args: str) -> dict:
    """subprocess.run/Popen keyword arguments for a child `python` that imports the crayon_hf under
    test (the installed package in CI, the built checkout in development), never the uncompiled
    source tree a child would find first when started in the checkout: a neutral working
    directory and PYTHONPATH pointing at the imported package's parent."""
    import tempfile

    import crayon_hf

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(crayon_hf.__file__).resolve().parents[1])] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return {"cwd": tempfile.gettempdir(), "env": env}


def cxx_compiler(what: str) -> list[str]:
    """The C++ compiler for a standalone native test ($CXX, else g++, c++ or clang++); skips
    `what` when there is none."""
    import shlex
    import shutil

    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        pytest.skip(f"no C++ compiler (g++, c++ or clang++) on PATH; set CXX to run {what}")
    return shlex.split(cxx)


def compile_cxx(cxx: list[str], sources: list[Path], out: Path, extra: list[str]):
    """Compiles `sources` (C++17, warnings on, native/ on the include path) into executable `out`."""
    import subprocess

    cmd = [*cxx, "-std=c++17", "-Wall", "-Wextra", "-I", str(ROOT / "native"), *extra, *map(str, sources),
           "-o", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def check_native(tmp_path: Path, source: str, what: str, flags: tuple[str, ...] = (),
                 sources: tuple[str, ...] = ()) -> None:
    """Builds tests/native/`source` (with `sources`, paths from the project root) under ASan/UBSan
    (plus `flags`) and runs it: fails on a build error or a non-zero exit; skips `what` without a
    C++ compiler."""
    exe = tmp_path / Path(source).stem
    built = compile_cxx(cxx_compiler(what), [*(ROOT / f for f in sources), ROOT / "tests" / "native" / source], exe,
                        ["-O1", "-g1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", *flags])
    assert built.returncode == 0, built.stderr
    run_native(exe, [])


def run_native(exe: Path, args: list[str]) -> None:
    """Runs a native test executable, printing its output; fails on a non-zero exit."""
    import subprocess

    proc = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)
    print(proc.stdout)
    assert proc.returncode == 0, f"{exe.name} exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"

