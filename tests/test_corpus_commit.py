"""encode-corpus's commit as a whole (issue 22): a run killed at any point of its commit never
leaves arrays that read as one output while coming from two runs; killed runs' temporaries have
unique names and are removed by a later run only when provably dead (unlocked) and old."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from crayon_hf import corpus
from crayon_hf.corpus import encode_corpus, open_corpus
from support import CORPORA, child_python, corpus_text, require_shared

TMP = re.compile(r"^\.t\.bin(\.idx\.npy|\.json)?\.tmp-[0-9a-f]{32}$")


def write(d, name, text):
    (d / name).write_text(text, encoding="utf-8", newline="")
    return str(d / name)


def run_child(tmp_path, body: str, out) -> subprocess.CompletedProcess:
    """encode_corpus of doc.txt into `out` in a child process, with `body` run first (the hook)."""
    code = textwrap.dedent(f"""
        import os, signal, sys
        from crayon_hf import corpus
        {textwrap.indent(textwrap.dedent(body), '        ').strip()}
        corpus.encode_corpus([{str(tmp_path / 'doc.txt')!r}], {str(out)!r}, "cl100k_base", progress=False)
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          **child_python())


@pytest.mark.parametrize("renames", [0, 1, 2, 3])
def test_a_kill_inside_the_commit_never_reads_as_a_mixed_output(tmp_path, renames):
    text = corpus_text(require_shared(CORPORA / "en_botchan.txt"), 60_000)
    out = tmp_path / "t.bin"
    old = encode_corpus([write(tmp_path, "old.txt", text[:20_000])], out, "cl100k_base", progress=False)
    write(tmp_path, "doc.txt", text)
    # The child dies (os._exit: no cleanup, like SIGKILL) after `renames` of its three renames.
    hook = f"""
        real, done = os.replace, [0]
        def replace(a, b):
            if done[0] == {renames}:
                os._exit(9)
            real(a, b)
            done[0] += 1
        os.replace = replace
    """
    child = run_child(tmp_path, hook, out)
    assert child.returncode == (9 if renames < 3 else 0), child.stderr
    if renames < 3:
        # The old sidecar went first: whatever arrays are in place, nothing verifies.
        with pytest.raises(ValueError, match="no sidecar t.bin.json: not a committed encode-corpus output"):
            open_corpus(out)
    else:
        got = open_corpus(out)
        assert got.n_tokens > old["n_tokens"]
    # The next run commits a complete output again (and its stale-temp sweep leaves young temps).
    encode_corpus([str(tmp_path / "doc.txt")], out, "cl100k_base", progress=False)
    assert open_corpus(out).n_tokens > old["n_tokens"]


def test_a_kill_before_the_commit_keeps_the_old_output(tmp_path):
    text = corpus_text(require_shared(CORPORA / "en_botchan.txt"), 60_000)
    out = tmp_path / "t.bin"
    old = encode_corpus([write(tmp_path, "old.txt", text[:20_000])], out, "cl100k_base", progress=False)
    write(tmp_path, "doc.txt", text)
    child = run_child(tmp_path, """
        real = corpus._CorpusWriter.commit
        corpus._CorpusWriter.commit = lambda self, meta: os.kill(os.getpid(), signal.SIGKILL)
    """, out)
    assert child.returncode == -signal.SIGKILL
    assert open_corpus(out).n_tokens == old["n_tokens"]
    temps = [n for n in os.listdir(tmp_path) if ".tmp-" in n]
    assert len(temps) == 2 and all(TMP.match(n) for n in temps), temps  # unique names, no pid


def test_arrays_from_another_run_are_refused(tmp_path):
    text = corpus_text(require_shared(CORPORA / "en_botchan.txt"), 60_000)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    encode_corpus([write(tmp_path, "x.txt", text)], a / "t.bin", "cl100k_base", progress=False)
    encode_corpus([write(tmp_path, "y.txt", text[::-1])], b / "t.bin", "cl100k_base", progress=False)
    assert open_corpus(a / "t.bin").n_tokens == open_corpus(a / "t.bin").index[-1]
    shutil.copy(b / "t.bin.idx.npy", a / "t.bin.idx.npy")  # a new index beside an old array
    with pytest.raises(ValueError, match=r"t\.bin\.idx\.npy: not the file t\.bin\.json committed"):
        open_corpus(a / "t.bin")
    shutil.copy(b / "t.bin", a / "t.bin")
    shutil.copy(a / "t.bin.json", tmp_path / "old.json")
    with pytest.raises(ValueError, match=r"t\.bin: not the file t\.bin\.json committed"):
        open_corpus(a / "t.bin")


def test_stale_temporaries_are_removed_only_when_dead_and_old(tmp_path):
    text = corpus_text(require_shared(CORPORA / "en_botchan.txt"), 60_000)
    write(tmp_path, "doc.txt", text)
    out = tmp_path / "t.bin"
    # Two SIGKILLed runs: their temporaries stay, under different names.
    for _ in range(2):
        child = run_child(tmp_path, """
            corpus._CorpusWriter.commit = lambda self, meta: os.kill(os.getpid(), signal.SIGKILL)
        """, out)
        assert child.returncode == -signal.SIGKILL
    dead = sorted(n for n in os.listdir(tmp_path) if ".tmp-" in n)
    assert len(dead) == 4 and len(set(dead)) == 4
    # A temporary a live writer holds (locked), however old, and a legacy pid-named one.
    live = tmp_path / ".t.bin.tmp-0123456789abcdef0123456789abcdef"
    live.write_bytes(b"being written")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys
        fd = os.open({str(live)!r}, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        (tmp_path / ".t.bin.tmp-4242").write_bytes(b"legacy")
        other = tmp_path / ".t.bin2.tmp-0123456789abcdef0123456789abcdef"  # another output's: not ours
        other.write_bytes(b"t.bin2's")
        # Young: a new run leaves every temporary alone (their writers may just have started).
        encode_corpus([str(tmp_path / "doc.txt")], out, "cl100k_base", progress=False)
        assert sorted(n for n in os.listdir(tmp_path) if ".tmp-" in n) == sorted(
            [*dead, live.name, ".t.bin.tmp-4242", other.name])
        old = time.time() - 2 * corpus.STALE_AFTER_S
        for name in [*dead, live.name, ".t.bin.tmp-4242", other.name]:
            os.utime(tmp_path / name, (old, old))
        # Old: the dead ones go, the live one stays (and t.bin2's is not t.bin's to remove).
        encode_corpus([str(tmp_path / "doc.txt")], out, "cl100k_base", progress=False)
        assert sorted(n for n in os.listdir(tmp_path) if ".tmp-" in n) == sorted([live.name, other.name])
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert corpus.clean_stale_temps(out) == [str(live)]  # its writer is gone now
    assert open_corpus(out).n_tokens > 0


def test_temporary_names_are_unique_and_locked(tmp_path):
    a, b = corpus._PendingFile(str(tmp_path / "x")), corpus._PendingFile(str(tmp_path / "x"))
    try:
        assert a.tmp != b.tmp and str(os.getpid()) not in os.path.basename(a.tmp)
        fd = os.open(a.tmp, os.O_RDONLY)
        try:
            # flock conflicts between open file descriptions, even in one process.
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        a.abort(), b.abort()
    assert os.listdir(tmp_path) == []


def test_megatron_format_reads_back(tmp_path):
    """--format megatron: our reader (written from the specification) and megatron-core's own
    IndexedDataset, where it installs (it needs torch), give every document."""
    from crayon_hf import megatron

    docs = [corpus_text(require_shared(CORPORA / "en_botchan.txt"), 30_000), "", "short one", "x" * 10]
    inputs = [write(tmp_path, f"d{i}.txt", t) for i, t in enumerate(docs)]
    for spec, dtype in [("cl100k_base", np.int32), ("r50k_base", np.uint16)]:
        out = tmp_path / spec
        encode_corpus(inputs, out, spec, format="megatron", append_eos=True, progress=False)
        assert sorted(p.name for p in tmp_path.glob(f"{spec}*")) == [f"{spec}{e}" for e in (".bin", ".idx", ".json")]
        flat = tmp_path / f"{spec}.flat"
        encode_corpus(inputs, flat, spec, append_eos=True, progress=False)
        want = open_corpus(flat)
        ds = megatron.read_indexed(out)
        assert ds.tokens.dtype == dtype and len(ds) == len(docs)
        assert [ds[i].tolist() for i in range(len(ds))] == [want[i].tolist() for i in range(len(docs))]
        assert ds.document_index.tolist() == list(range(len(docs) + 1))
        assert json.load(open(f"{out}.json"))["index"] == f"{spec}.idx"
        got = open_corpus(out)
        assert [got[i].tolist() for i in range(len(docs))] == [want[i].tolist() for i in range(len(docs))]
        reader = megatron_core_reader()
        if reader is not None:
            theirs = reader(str(out), mmap=True)
            assert len(theirs) == len(docs) and theirs.index.dtype == dtype
            assert [theirs[i].tolist() for i in range(len(docs))] == [want[i].tolist() for i in range(len(docs))]
    (tmp_path / "bad.idx").write_bytes(b"MMIDIDX\x00\x00" + b"\x02" + b"\x00" * 30)
    (tmp_path / "bad.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="index version 2"):
        megatron.read_indexed(tmp_path / "bad")


def megatron_core_reader():
    """megatron-core's IndexedDataset: required where torch is (CRAYON_REQUIRE_TORCH=1, as CI sets
    it when the CPU wheel is there), else used when it imports."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return None
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from megatron.core.datasets.indexed_dataset import IndexedDataset
    except ImportError as e:
        if os.environ.get("CRAYON_REQUIRE_TORCH") == "1":
            pytest.fail(f"megatron-core does not import with torch installed (CRAYON_REQUIRE_TORCH=1): {e}")
        return None
    return IndexedDataset
