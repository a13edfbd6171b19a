"""Hot cartridge chunks moved onto huge pages (native/core/huge_pages.h) change nothing but speed.

Once a cartridge's engines have encoded enough text, the 2 MiB chunks of the file that hold the
sections read for every piece are copied onto anonymous huge pages and moved over the file's pages
at the same addresses; an image built in memory is copied onto them whole. Each test runs in a child process, because the policy (CRAYON_HUGE_PAGES) is
read once per process: 1 moves the chunks at the first encode, while two threads are encoding a
batch; 0 never moves anything; unset moves them after an eighth of the hot bytes in text, where
the kernel offers transparent huge pages and the hot bytes add up to 2 MiB or more. Ids are compared with tiktoken and tokenizers.
"""
from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from support import CORPORA, child_python, corpus_text, hf_pair, random_slices, reference_encoding, require_shared

pytestmark = pytest.mark.skipif(platform.system() != "Linux", reason="huge pages are used on Linux only")

FOLDERS = ["llama3_1", "mistral_v0_1", "bert_base_uncased", "t5_small"]

CHILD = r"""
import json, sys
import crayon_hf, crayon_hf.tiktoken as tk
folders, texts = json.loads(sys.stdin.read())
def state(engine):
    info = engine.info()
    return info["hot_bytes"], info["huge_page_bytes"]
out = {}
enc = tk.get_encoding("o200k_base")
before = state(enc._engine)
batch = enc.encode_ordinary_batch(texts, num_threads=2)
out["o200k_base"] = {"before": before, "after": state(enc._engine), "batch": batch,
                     "single": [enc.encode_ordinary(t) for t in texts]}
# An image built in memory (Encoding from ranks) is copied onto huge pages whole, at once.
base = tk.get_encoding("cl100k_base")
mem = tk.Encoding("cl100k_in_memory", pat_str=base._pat_str, mergeable_ranks=base._mergeable_ranks,
                  special_tokens=base._special_tokens)
out["cl100k_in_memory"] = {"at_load": state(mem._engine), "single": [mem.encode_ordinary(t) for t in texts]}
for folder in folders:
    tok = crayon_hf.Tokenizer.from_file(f"{sys.argv[1]}/{folder}/tokenizer.json")
    tok.no_truncation()
    before = state(tok._engine)
    batch = [e.ids for e in tok.encode_batch(texts)]
    out[folder] = {"before": before, "after": state(tok._engine), "batch": batch,
                   "single": [tok.encode(t).ids for t in texts]}
print(json.dumps(out))
"""


def _texts() -> list[str]:
    texts = []
    for name in ("en_gutenberg_big.txt", "zh_hongloumeng.txt", "code_python_stdlib.txt", "multi_udhr_scripts.txt"):
        text = corpus_text(require_shared(CORPORA / name), 60_000)
        texts += [text[i : i + 6000] for i in range(0, len(text), 6000)]
        texts += random_slices(text, 20, seed=len(name))
    texts += ["", " ", "\n\n", "a" * 5000, "\u00e9\u0301" * 300, "\U0001f600 x" * 200]
    return texts


def _run_child(policy: str | None, code: str, stdin: str) -> str:
    kw = child_python()
    kw["env"].pop("CRAYON_HUGE_PAGES", None)
    if policy is not None:
        kw["env"]["CRAYON_HUGE_PAGES"] = policy
    proc = subprocess.run([sys.executable, "-c", code, str(require_shared(CORPORA.parent / "vocab" / "hf"))],
                          input=stdin, capture_output=True, text=True, timeout=600, **kw)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def _thp_offered() -> bool:
    try:
        line = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False
    return "[always]" in line or "[madvise]" in line


def test_chunks_moved_at_the_first_encode_keep_every_id():
    texts = _texts()
    out = json.loads(_run_child("1", CHILD, json.dumps([FOLDERS, texts])))
    ref = reference_encoding("o200k_base")
    expected = {"o200k_base": [ref.encode_ordinary(t) for t in texts],
                "cl100k_in_memory": [reference_encoding("cl100k_base").encode_ordinary(t) for t in texts]}
    for folder in FOLDERS:
        theirs = hf_pair(folder)[1]
        theirs.no_truncation()
        expected[folder] = [e.ids for e in theirs.encode_batch(texts)]
    in_memory = out.pop("cl100k_in_memory")
    hot, moved = in_memory["at_load"]
    assert hot == 0 and moved > 0 and moved % (2 << 20) == 0, in_memory["at_load"]  # whole, nothing left to move
    assert in_memory["single"] == expected["cl100k_in_memory"]
    for name, got in out.items():
        hot, moved = got["before"]
        assert hot > 0 and moved == 0, (name, got["before"])  # marked at load, nothing moved before encoding
        hot, moved = got["after"]
        assert moved >= hot > 0 and moved % (2 << 20) == 0, (name, got["after"])
        assert got["batch"] == expected[name], name
        assert got["single"] == expected[name], name


def test_policy_off_marks_and_moves_nothing():
    texts = _texts()[:8]
    out = json.loads(_run_child("0", CHILD, json.dumps([FOLDERS[:1], texts])))
    assert out.pop("cl100k_in_memory")["at_load"] == [0, 0]
    for name, got in out.items():
        assert got["before"] == [0, 0] and got["after"] == [0, 0], name


AUTO = r"""
import json, sys
import crayon_hf, crayon_hf.tiktoken as tk
text = sys.stdin.read()
enc = tk.get_encoding("o200k_base")
hot = enc._engine.info()["hot_bytes"]
seen = []
encoded = 0
while encoded < hot // 4:
    enc.encode_ordinary(text)
    encoded += len(text.encode())
    seen.append((encoded, enc._engine.info()["huge_page_bytes"]))
small = crayon_hf.Tokenizer.from_file(f"{sys.argv[1]}/bert_base_uncased/tokenizer.json")
small_hot = small._engine.info()["hot_bytes"]
for _ in range(8):
    small.encode(text)
print(json.dumps({"hot": hot, "seen": seen, "small": [small_hot, small._engine.info()["huge_page_bytes"]]}))
"""


def test_default_policy_moves_after_an_eighth_of_the_hot_bytes_and_leaves_small_tables():
    text = corpus_text(require_shared(CORPORA / "en_gutenberg_big.txt"), 64_000)
    got = json.loads(_run_child(None, AUTO, text))
    hot, seen = got["hot"], got["seen"]
    small_hot, small_moved = got["small"]
    assert small_moved == 0, got["small"]  # under 2 MiB of hot tables: never moved by default
    if not _thp_offered():
        assert hot == 0 and small_hot == 0 and all(moved == 0 for _, moved in seen), got
        return
    assert hot > 0 and 0 < small_hot < 2 << 20, (hot, small_hot)
    for encoded, moved in seen:
        # note_encoded counts a call's text before encoding it: the call that crosses the line moves
        assert (moved > 0) == (encoded >= hot // 8), (encoded, moved, hot)


CYCLES = r"""
import sys
import crayon_hf.tiktoken as tk
path = sys.argv[2]
def mappings():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)
enc = tk.Encoding.from_cartridge(path)
enc.encode_ordinary("warm up " * 100)
del enc
start = mappings()
for _ in range(30):
    enc = tk.Encoding.from_cartridge(path)
    enc.encode_ordinary("hello world " * 100)
    assert enc._engine.info()["huge_page_bytes"] > 0
    del enc
print(start, mappings())
"""


def test_moved_chunks_are_unmapped_with_their_cartridge(tmp_path):
    import crayon_hf.tiktoken as tk

    path = tmp_path / "cl100k.dat"
    tk.get_encoding("cl100k_base").save_cartridge(path)
    kw = child_python()
    kw["env"]["CRAYON_HUGE_PAGES"] = "1"
    proc = subprocess.run([sys.executable, "-c", CYCLES, "-", str(path)], capture_output=True, text=True,
                          timeout=300, **kw)
    assert proc.returncode == 0, proc.stderr[-3000:]
    start, end = map(int, proc.stdout.split())
    assert end <= start + 4, (start, end)  # 30 loads, each with moved chunks, leave no mapping behind
