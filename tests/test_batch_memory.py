"""`encode_batch_to_numpy([one large text])` keeps its memory near the result's own size.

The result is 4 bytes per token (tiktoken face: uint32 ids) or 20 (tokenizers face: ids and
(start, end) int64 character offsets). The check: the process's peak RSS during the call, above
what it held before, per token. Before the tokenizers face wrote its arrays straight from the raw
encodings it peaked at about 92 bytes per token (the raw encodings, a (7, n) int64 block, and its
copy); the bounds leave room for the raw encoding (16 bytes per token, up to twice that while its
vectors grow) and allocator noise, not for that block. A memory bound measured on 10 MB (100 MB
under ``-m full``), not a timing."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from support import CORPORA, VOCAB, child_python, require_shared

if not sys.platform.startswith("linux"):
    pytest.skip("reads /proc/self/status", allow_module_level=True)

MARK = "@@RESULT@@"

CHILD = """
import json, resource
{setup}

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)

base = open({corpus!r}, encoding="utf-8").read()
text = (base * ({mb} * 2**20 // len(base) + 1))[: {mb} * 2**20]
warm(text[:10000])
before = status("VmRSS")
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak (VmHWM) to the current RSS
except OSError:
    pass
out = call(text)
peak = status("VmHWM")
ids = out[0]
result = sum(a.nbytes for a in out)
print({mark!r} + json.dumps({{"tokens": len(ids), "result": result, "peak_above_start": peak - before}}))
"""

FACES = {
    # bytes per token the call may take at its peak, result included
    "tiktoken": ("import crayon_hf.tiktoken as tk\nenc = tk.get_encoding('cl100k_base')\nwarm = enc.encode\n"
                 "call = lambda t: enc.encode_batch_to_numpy([t])", 4, 20),
    "tokenizers": ("from crayon_hf import Tokenizer\ntok = Tokenizer.from_file({path!r})\nwarm = tok.encode\n"
                   "call = lambda t: tuple(tok.encode_batch_to_numpy([t]))", 20, 48),
}


def _measure(face: str, mb: int) -> dict:
    setup, per_token, bound = FACES[face]
    path = str(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json"))
    corpus = str(require_shared(CORPORA / "en_gutenberg_big.txt"))
    code = textwrap.dedent(CHILD).format(setup=setup.format(path=path), corpus=corpus,
                                         mb=mb, mark=MARK)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL, **child_python())
    assert proc.returncode == 0 and MARK in proc.stdout, proc.stderr[-3000:]
    got = json.loads(proc.stdout.rsplit(MARK, 1)[1])
    got["per_token"] = got["peak_above_start"] / got["tokens"]
    assert got["result"] == per_token * got["tokens"] + 8 * 2, got  # ids (+ offsets) and the 2 document bounds
    assert got["per_token"] <= bound, got
    return got


@pytest.mark.parametrize("face", list(FACES))
def test_one_large_text_peak_is_near_the_result(face):
    _measure(face, 10)


@pytest.mark.full
@pytest.mark.parametrize("face", list(FACES))
def test_one_100mb_text_peak_is_near_the_result(face):
    _measure(face, 100)
