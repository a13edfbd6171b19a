"""Ctrl-C during a long native batch call raises KeyboardInterrupt promptly, not when the batch ends.

Each case runs in a child process: it measures its single-thread speed on fresh random text, sizes
a batch that would take about 10 s on one thread, sends itself SIGINT 0.5 s into the call, and
reports how long the interrupt took to arrive. A behaviour check with wide margins (the engine
looks every 10 ms; the test allows 2 s), not a timing benchmark."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from support import VOCAB, child_python, require_shared

if sys.platform == "win32":
    pytest.skip("SIGINT to oneself is POSIX", allow_module_level=True)

MARK = "@@RESULT@@"

CHILD = """
import json, os, signal, sys, threading, time

# A process started with SIGINT ignored (a background job, nohup) passes that on, and Python then
# leaves it ignored: Ctrl-C is what is tested, so the child takes Python's own handler.
signal.signal(signal.SIGINT, signal.default_int_handler)

TABLE = bytes((97 + b % 26) if b % 6 else 32 for b in range(256))  # random 5-letter-ish words

def fresh(n_bytes, doc=20_000):
    raw = os.urandom(n_bytes).translate(TABLE).decode("ascii")
    return [raw[i:i + doc] for i in range(0, len(raw), doc)]

{setup}

probe = fresh(1_000_000)
t0 = time.perf_counter()
call(probe)
rate = 1_000_000 / (time.perf_counter() - t0)
expected = 10.0
batch = fresh(min(int(rate * expected), 200_000_000))
expected = len(batch) * 20_000 / rate

sent = []
def fire():
    time.sleep(0.5)
    sent.append(time.perf_counter())
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=fire, daemon=True).start()
start = time.perf_counter()
try:
    call(batch)
    outcome = "finished"
except KeyboardInterrupt:
    outcome = "interrupted"
end = time.perf_counter()
print({mark!r} + json.dumps({{"outcome": outcome, "delay": end - sent[0] if sent else None,
                              "elapsed": end - start, "expected": expected}}))
"""

TIKTOKEN = "import crayon_hf.tiktoken as tk\nenc = tk.get_encoding('cl100k_base')\n"
HF = "from crayon_hf import Tokenizer\ntok = Tokenizer.from_file({path!r})\n"

CASES = {
    "tiktoken encode_ordinary_batch": TIKTOKEN + "call = lambda b: enc.encode_ordinary_batch(b, num_threads=1)",
    "tiktoken encode_batch_to_numpy": TIKTOKEN + "call = lambda b: enc.encode_batch_to_numpy(b, num_threads=1)",
    "tiktoken count_batch": TIKTOKEN + "call = lambda b: enc.count_batch(b, num_threads=1)",
    "tokenizers encode_batch": HF + "call = tok.encode_batch",
    "tokenizers encode_batch_to_numpy": HF + "call = tok.encode_batch_to_numpy",
    "tokenizers count_batch": HF + "call = tok.count_batch",
}


@pytest.mark.parametrize("case", list(CASES))
def test_ctrl_c_interrupts_a_long_batch(case):
    handler = signal.getsignal(signal.SIGINT)
    path = str(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json"))
    code = textwrap.dedent(CHILD).format(setup=CASES[case].format(path=path), mark=MARK)
    kwargs = child_python()
    kwargs["env"] = dict(kwargs["env"], CRAYON_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, **kwargs)
    assert proc.returncode == 0 and MARK in proc.stdout, proc.stderr[-3000:]
    got = json.loads(proc.stdout.rsplit(MARK, 1)[1])
    assert got["outcome"] == "interrupted", got
    assert got["expected"] >= 5.0, got  # the premise: a call long enough to tell
    assert got["delay"] < 2.0, got
    assert got["elapsed"] < got["expected"] / 2, got
    assert signal.getsignal(signal.SIGINT) is handler  # this process is untouched
