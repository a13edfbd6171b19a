"""A cartridge truncated and rewritten in place while it is being loaded.

The loader reads a mapped file; a read past the new end of a file truncated under the mapping
raises SIGBUS, which by default kills the process. crayon-hf guards every read made while loading
(validation, checksum, building the engine, and the metadata the Python faces read right after),
so the load ends in a tokenizer or a ValueError. A child process loads in a loop while its forked
twin keeps truncating the file to a third and writing it back, in place; the child must never die
from a signal. (Truncating a file in place after it is loaded is outside the policy: see
docs/cartridge.md, "Files that change while mapped".)
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import crayon_hf
import crayon_hf.tiktoken as tk
from support import VOCAB, child_python, require_shared

CHURN = r"""
import collections, json, os, sys, time
import crayon_hf, crayon_hf.tiktoken as tk
source, seconds, face = sys.argv[1], float(sys.argv[2]), sys.argv[3]
data = open(source, "rb").read()
path = source + ".churn"
open(path, "wb").write(data)
load = tk.Encoding.from_cartridge if face == "tiktoken" else crayon_hf.Tokenizer.from_cartridge
pid = os.fork()
if pid == 0:  # rewrite in place: shrink to a third, write the rest back, stay whole for a moment
    fd = os.open(path, os.O_WRONLY)
    end = time.time() + seconds
    while time.time() < end:
        os.ftruncate(fd, len(data) // 3)
        os.pwrite(fd, data[len(data) // 3:], len(data) // 3)
        time.sleep(0.02)
    os._exit(0)
outcomes = collections.Counter()
end = time.time() + seconds
while time.time() < end:
    try:
        load(path)
        outcomes["loaded"] += 1
    except ValueError as e:
        outcomes["changed while loading" if "while it was being loaded" in str(e) else "refused"] += 1
os.waitpid(pid, 0)
print(json.dumps(outcomes))
"""


@pytest.mark.parametrize("face", ["tiktoken", "tokenizers"])
def test_load_racing_in_place_truncation_never_crashes(tmp_path, face):
    src = tmp_path / "model.dat"
    if face == "tiktoken":
        tk.get_encoding("cl100k_base").save_cartridge(src)
    else:
        crayon_hf.Tokenizer.from_file(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json")).save_cartridge(src)
    proc = subprocess.run([sys.executable, "-c", CHURN, str(src), "3", face], capture_output=True, text=True,
                          timeout=120, **child_python())
    assert proc.returncode == 0, f"the loading process died (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    outcomes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert outcomes.get("loaded", 0) > 0, outcomes
    print(outcomes)
