"""The scripts in examples/ run as documented."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from support import CORPORA, ROOT, VOCAB, require_shared


def run_example(name: str, *args: str, cwd) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_tiktoken_drop_in(tmp_path):
    out = run_example("tiktoken_drop_in.py", cwd=tmp_path)
    assert "Tokenization should never be the bottleneck" in out and "native" in out


@pytest.mark.parametrize("with_rank_file", [False, True])
def test_cartridge_roundtrip(tmp_path, with_rank_file):
    args = [str(require_shared(VOCAB / "tiktoken" / "cl100k_base.tiktoken"))] if with_rank_file else []
    assert "mapped" in run_example("cartridge_roundtrip.py", *args, cwd=tmp_path)


def test_swap_cartridges(tmp_path):
    out = run_example("swap_cartridges.py", cwd=tmp_path)
    assert out.count("mapped in") == 9 and "o200k_base.dat" in out


def test_encode_corpus_to_numpy(tmp_path):
    src = require_shared(CORPORA / "en_botchan.txt")
    run_example("encode_corpus_to_numpy.py", str(src), str(tmp_path / "o.npy"), "cl100k_base", cwd=tmp_path)
    import tiktoken
    import tiktoken.load

    from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS

    k = KNOWN_ENCODINGS["cl100k_base"]
    ref = tiktoken.Encoding("cl100k_base", pat_str=k.pat_str, mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(VOCAB / "tiktoken" / "cl100k_base.tiktoken")), special_tokens={})
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    expected = [i for line in lines for i in ref.encode_ordinary(line)]
    assert np.load(tmp_path / "o.npy").tolist() == expected


def test_tokenizers_drop_in(tmp_path):
    src = require_shared(VOCAB / "hf" / "llama3_1" / "tokenizer.json")
    out = run_example("tokenizers_drop_in.py", str(src), cwd=tmp_path)
    assert "backend: native" in out and "identical to tokenizers: True" in out


def test_datasets_map_example(tmp_path):
    pytest.importorskip("datasets")
    out = run_example("datasets_map.py", "cl100k_base", "2", cwd=tmp_path)
    assert "2000 documents" in out and "on 2 processes" in out
