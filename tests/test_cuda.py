"""The CUDA module as far as a machine without a GPU can check it.

On a GPU machine benchmarks/gpu_check.sh compares the kernels with the CPU engine on >= 100 MB;
here (CI has the CUDA toolkit but no GPU): the module is built where a CUDA compiler exists, its
kernels compile for sm_80 and sm_90 without register spills, `import crayon_hf` never loads it,
and the `device` argument behaves on a machine without a GPU. The kernels' stages themselves run on
the CPU in tests/test_batch_stages.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import crayon_hf.cuda as cuda
import crayon_hf.tiktoken as tiktoken

ROOT = Path(__file__).resolve().parents[1]
NVCC = shutil.which("nvcc")


def test_availability_is_explained():
    available = cuda.is_available()
    assert isinstance(available, bool)
    if available:
        assert cuda.unavailable_reason() is None and cuda.device_count() >= 1
    else:
        reason = cuda.unavailable_reason()
        assert isinstance(reason, str) and reason
        assert cuda.device_count() == 0


def test_import_never_loads_the_cuda_module():
    code = ("import sys, crayon_hf, crayon_hf.tiktoken as t; t.get_encoding('gpt2').encode('x'); "
            "print('crayon_hf._crayon_cuda' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_device_argument():
    enc = tiktoken.get_encoding("cl100k_base")
    texts = ["hello world", "", "中文 text", "x" * 3000]
    want = enc.encode_ordinary_batch_to_numpy(texts)
    for device in ("cpu", "auto"):  # "auto" stays on the CPU for a batch this small
        got = enc.encode_ordinary_batch_to_numpy(texts, device=device)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        got = enc.encode_batch_to_numpy(texts, device=device)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    with pytest.raises(ValueError, match="device must be"):
        enc.encode_batch_to_numpy(texts, device="gpu")
    with pytest.raises(ValueError, match="cuda:N"):
        enc.encode_batch_to_numpy(texts, device="cuda:one")
    if not cuda.is_available():
        with pytest.raises(RuntimeError, match="not available"):
            enc.encode_ordinary_batch_to_numpy(texts, device="cuda")
        with pytest.raises(RuntimeError, match="not available"):
            cuda.encode_batch_to_device(enc, texts)


@pytest.mark.skipif(NVCC is None, reason="no CUDA compiler (nvcc) on this machine")
def test_cuda_module_is_built_where_a_compiler_exists():
    import crayon_hf

    built = list(Path(crayon_hf.__file__).parent.glob("_crayon_cuda*"))
    assert built, "nvcc is on PATH but crayon_hf._crayon_cuda was not built (CRAYON_CUDA=AUTO)"
    from crayon_hf import _crayon_cuda

    count, reason = _crayon_cuda.device_count()
    assert count >= 0 and (count > 0 or reason)


@pytest.mark.skipif(NVCC is None, reason="no CUDA compiler (nvcc) on this machine")
def test_kernels_do_not_spill(tmp_path):
    """ptxas's report for every kernel of the module, on the A100 and H100 architectures: spilled
    registers would go to local memory on every piece, so none may spill (the dead-end bitmap's
    136 bytes of stack are by design). Device code only (-fatbin), both architectures in one
    nvcc run: 14 s here, where an object file per architecture took 35."""
    archs = ["sm_80", "sm_90"]
    gencode = [f"-gencode=arch=compute_{a[3:]},code={a}" for a in archs]
    out = subprocess.run(
        [NVCC, "-std=c++17", "-O3", "-fatbin", *gencode, "-Xptxas=-v", "-I", str(ROOT / "native"),
         str(ROOT / "native" / "cuda" / "device_engine.cu"), "-o", str(tmp_path / "kernels.fatbin")],
        capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", out.stderr)
    assert spills, "ptxas printed no resource report"
    assert all(s == "0" and l == "0" for s, l in spills), out.stderr
    compiled = re.findall(r"Compiling entry function '(\S+)' for '(sm_\d+)'", out.stderr)
    for arch in archs:
        assert any("EncodeStage" in k for k, a in compiled if a == arch), f"no EncodeStage kernel for {arch}"
