"""`encode-corpus --ray` on a real local Ray cluster: a head and a second node (one CPU each,
loopback only), started and stopped here; no mocks. The output must be byte-identical to the
single-machine run (the token array, the index and the sidecar), also when a worker is killed in the
middle of a task; a bad input fails the run naming the file and line, with nothing left behind.

Ray is part of the test extra, so CI always runs these; without it they skip, except under
CRAYON_REQUIRE_SHARED=1, where a missing Ray fails like any missing reference."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import crayon_hf
import crayon_hf.tiktoken
from crayon_hf import corpus
from crayon_hf.cli import main
from crayon_hf.corpus import encode_corpus, open_corpus
from support import (CORPORA, ROOT, VOCAB, corpus_files, corpus_text, ray_temp_dir, require_module, require_shared,
                     short_docs)

# Loopback only: Ray otherwise advertises the machine's routable address. This switch (Ray's own,
# read when ray is imported, and inherited by the nodes started here) keeps every Ray address on
# 127.0.0.1.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

FACES = {"cl100k_base": lambda: "cl100k_base", "gpt2": lambda: str(require_shared(VOCAB / "hf" / "gpt2"))}
OUTPUTS = ("t.bin", "t.bin.idx.npy", "t.bin.json")


@pytest.fixture(scope="module")
def cluster():
    require_module("ray")
    import ray
    from ray.cluster_utils import Cluster

    # Ray's default folder (its session folders and the cluster's address file), through the
    # variable Ray reads, which the nodes started here inherit.
    temp, before = ray_temp_dir(), os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = temp
    node = dict(num_cpus=1, object_store_memory=96 << 20, node_ip_address="127.0.0.1")
    c = None
    try:
        c = Cluster(initialize_head=True, head_node_args=dict(node, include_dashboard=False))
        c.add_node(**node)
        c.wait_for_nodes()
        ray.init(address=c.address, log_to_driver=False, _node_ip_address="127.0.0.1")
        assert ray.cluster_resources()["CPU"] == 2 and len(ray.nodes()) == 2
        yield c.address
    finally:
        ray.shutdown()
        if c is not None:
            c.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        if before is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before


def make_inputs(d: Path, full: bool = False) -> list[str]:
    """Every shared corpus (each .txt one document; CI-sized: 96 KiB of each), short documents as
    JSONL (with blank lines and one long line) and as Parquet in several row groups."""
    d.mkdir(exist_ok=True)
    paths = []
    for path in corpus_files():
        if full:
            paths.append(str(path))
            continue
        (d / path.name).write_text(corpus_text(path, 96 << 10), encoding="utf-8", newline="")
        paths.append(str(d / path.name))
    if full:
        paths.append(str(CORPORA / "short_docs.jsonl"))
        return paths
    records = short_docs(1200)
    with open(d / "short.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(records):
            f.write(json.dumps({"text": text * (40 if i == 500 else 1)}) + "\n")
            if i % 97 == 3:
                f.write("\n")
    paths.append(str(d / "short.jsonl"))
    pa, pq = require_module("pyarrow"), pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"text": short_docs(1500)[1200:]}), d / "rows.parquet", row_group_size=40)
    paths.append(str(d / "rows.parquet"))
    return paths


def outputs(d: Path, names=OUTPUTS) -> list[bytes]:
    return [(d / n).read_bytes() for n in names]


def single_and_ray(tmp_path, cluster, tokenizer, inputs, **kw):
    a, b = tmp_path / "single", tmp_path / "ray"
    a.mkdir(), b.mkdir()
    encode_corpus(inputs, a / "t.bin", tokenizer, progress=False, **kw)
    from crayon_hf.ray_corpus import encode_corpus_ray

    s = encode_corpus_ray(inputs, b / "t.bin", tokenizer, progress=False, task_bytes=32 << 10, **kw)
    return a, b, s


@pytest.mark.parametrize("face", list(FACES))
def test_identical_to_single_machine(tmp_path, cluster, face):
    inputs = make_inputs(tmp_path / "in")
    a, b, s = single_and_ray(tmp_path, cluster, FACES[face](), inputs, append_eos=True)
    assert s["tasks"] > 20 and s["cluster_cpus"] == 2
    assert outputs(a) == outputs(b)
    assert sorted(os.listdir(b)) == sorted(OUTPUTS)  # no staging folder or temporaries left
    # Workers import the installed package (the src/ layout), never a checkout's sources.
    assert all("site-packages" in m or "dist-packages" in m for m in s["worker_modules"]), s["worker_modules"]


@pytest.mark.full
@pytest.mark.parametrize("face", list(FACES))
def test_identical_to_single_machine_whole_corpora(tmp_path, cluster, face):
    inputs = make_inputs(tmp_path / "in", full=True)
    a, b, _ = single_and_ray(tmp_path, cluster, FACES[face](), inputs, append_eos=True)
    assert outputs(a) == outputs(b)


def test_shards_megatron_and_shipped_cartridge(tmp_path, cluster):
    from crayon_hf.ray_corpus import encode_corpus_ray

    inputs = make_inputs(tmp_path / "in")
    gpt2 = FACES["gpt2"]()
    one = tmp_path / "one.bin"
    encode_corpus(inputs, one, gpt2, progress=False, format="uint16")
    want = open_corpus(one)
    # The tokenizer from the object store only (as on a worker without the path): same output.
    s = encode_corpus_ray(inputs, tmp_path / "sharded", gpt2, shards=True, format="uint16", progress=False,
                          task_bytes=64 << 10, ship_tokenizer="always")
    got = open_corpus(tmp_path / "sharded")
    assert len(got.ids.parts) == s["tasks"] > 10
    assert np.array_equal(np.asarray(got.ids), np.asarray(want.ids)) and np.array_equal(got.index, want.index)
    assert got.ids[5:70000].tolist() == want.ids[5:70000].tolist() and got[17].tolist() == want[17].tolist()
    assert not any(".tmp-" in n for n in os.listdir(tmp_path / "sharded"))
    # Again over the existing sharded output: replaced as a whole.
    encode_corpus_ray(inputs[:2], tmp_path / "sharded", gpt2, shards=True, format="uint16", progress=False)
    assert open_corpus(tmp_path / "sharded").n_tokens < want.n_tokens
    # Megatron's layout from the cluster equals the single-machine one.
    encode_corpus(inputs, tmp_path / "m1", "cl100k_base", progress=False, format="megatron", append_eos=True)
    encode_corpus_ray(inputs, tmp_path / "m2", "cl100k_base", progress=False, format="megatron", append_eos=True,
                      task_bytes=64 << 10)
    for ext in (".bin", ".idx"):
        assert (tmp_path / f"m1{ext}").read_bytes() == (tmp_path / f"m2{ext}").read_bytes()


def test_killed_worker_is_retried_and_output_identical(tmp_path, cluster):
    inputs = make_inputs(tmp_path / "in")
    marker = tmp_path / "killed"
    from crayon_hf.ray_corpus import encode_corpus_ray

    a, b = tmp_path / "single", tmp_path / "ray"
    a.mkdir(), b.mkdir()
    encode_corpus(inputs, a / "t.bin", "cl100k_base", progress=False)
    # Task 3's worker SIGKILLs itself after encoding, before its shard is committed (once).
    encode_corpus_ray(inputs, b / "t.bin", "cl100k_base", progress=False, task_bytes=32 << 10,
                      _kill=(3, str(marker)))
    assert marker.exists()
    assert outputs(a) == outputs(b)
    assert sorted(os.listdir(b)) == sorted(OUTPUTS)


@pytest.mark.parametrize("bad, message", [
    ("jsonl", r"bad\.jsonl:1003: invalid JSON at column 10"),
    ("utf8", r"bad\.txt: invalid UTF-8 at byte 70000 \(invalid start byte\)"),
    ("utf8-jsonl", r"bad\.jsonl:777: invalid UTF-8 at byte \d+"),
])
def test_failing_input_names_file_and_line_and_leaves_nothing(tmp_path, cluster, bad, message):
    from crayon_hf.ray_corpus import encode_corpus_ray

    docs = short_docs(1200)
    lines = [json.dumps({"text": t}).encode() + b"\n" for t in docs]
    if bad == "jsonl":
        lines[1002] = b'{"text": oops}\n'
    elif bad == "utf8-jsonl":
        lines[776] = b'{"text": "\xff"}\n'
    (tmp_path / "bad.jsonl").write_bytes(b"".join(lines))
    text = corpus_text(require_shared(CORPORA / "en_botchan.txt"), 100_000).encode()
    (tmp_path / "bad.txt").write_bytes(text[:70000] + (b"\xff" if bad == "utf8" else b"") + text[70000:])
    out = tmp_path / "out" / "t.bin"
    out.parent.mkdir()
    inputs = [str(tmp_path / "bad.txt"), str(tmp_path / "bad.jsonl")]
    with pytest.raises(ValueError, match=message):
        encode_corpus_ray(inputs, out, "cl100k_base", progress=False, task_bytes=16 << 10)
    # The single-machine run says the same.
    with pytest.raises(ValueError, match=message):
        encode_corpus(inputs, out, "cl100k_base", progress=False)
    assert os.listdir(out.parent) == []


def test_cli(tmp_path, cluster, capsys):
    inputs = make_inputs(tmp_path / "in")[-3:]
    out = tmp_path / "t.bin"
    assert main(["encode-corpus", *inputs, "-o", str(out), "--tokenizer", "cl100k_base", "--ray", cluster,
                 "--task-mib", "0.05"]) == 0
    err = capsys.readouterr().err
    assert "Ray tasks on 2 CPUs" in err and "encode-corpus --ray" in err  # progress, then the summary
    encode_corpus(inputs, tmp_path / "s.bin", "cl100k_base", progress=False)
    assert out.read_bytes() == (tmp_path / "s.bin").read_bytes()
    assert main(["encode-corpus", *inputs, "-o", str(tmp_path / "x"), "--tokenizer", "cl100k_base", "--shards"]) == 2
    assert "pass --ray too" in capsys.readouterr().err


def test_batch_function_in_ray_data_on_every_face(tmp_path, cluster):
    import ray

    transformers = require_module("transformers")
    folder = require_shared(VOCAB / "hf" / "gpt2")
    texts = short_docs(300)
    ref = tmp_path / "ref.bin"
    ray.data.DataContext.get_current().execution_options.preserve_order = True  # rows back in input order
    for tok in [crayon_hf.tiktoken.get_encoding("cl100k_base"), crayon_hf.Tokenizer.from_file(str(folder / "tokenizer.json")),
                crayon_hf.CrayonTokenizer.from_pretrained(str(folder)), "cl100k_base"]:
        fn = crayon_hf.TokenizeBatch(tok, append_eos=True)
        spec = tok if isinstance(tok, str) else ("cl100k_base" if hasattr(tok, "encode_ordinary") else str(folder))
        encode_corpus([texts], ref, spec, append_eos=True, progress=False)
        want = open_corpus(ref)
        # In this process (numpy in, numpy out), after a pickle round trip ...
        out = pickle.loads(pickle.dumps(fn))({"text": np.array(texts[:50], dtype=object)})
        assert [x.tolist() for x in out["input_ids"]] == [want[i].tolist() for i in range(50)]
        assert all(x.dtype == np.uint32 for x in out["input_ids"])
        # ... and on the cluster's workers.
        ds = ray.data.from_items([{"text": t} for t in texts]).map_batches(fn, batch_format="numpy", batch_size=64)
        got = [row["input_ids"].tolist() for row in ds.take_all()]
        assert got == [want[i].tolist() for i in range(len(texts))]
    del transformers


def test_local_ray_started_for_the_run_from_the_checkout(tmp_path):
    """Without an address a local Ray is started and stopped for the run. Started in the checkout
    (as the issue's failing example was), the workers import the installed package."""
    require_module("ray")
    inputs = make_inputs(tmp_path / "in")[-2:]
    code = ("import json, sys; from crayon_hf.ray_corpus import encode_corpus_ray; "
            "s = encode_corpus_ray(sys.argv[1:3], sys.argv[3], 'cl100k_base', num_cpus=2, progress=False); "
            "print(json.dumps(s['worker_modules']))")
    temp = ray_temp_dir()
    env = dict(os.environ, RAY_TMPDIR=temp)
    env.pop("RAY_ADDRESS", None)
    try:
        run = subprocess.run([sys.executable, "-c", code, *inputs, str(tmp_path / "t.bin")], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=240)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert run.returncode == 0, run.stderr[-3000:]
    modules = json.loads(run.stdout.strip().splitlines()[-1])
    assert modules and all(not m.startswith(str(ROOT / "crayon_hf")) and "site-packages" in m for m in modules)
    encode_corpus(inputs, tmp_path / "s.bin", "cl100k_base", progress=False)
    assert (tmp_path / "t.bin").read_bytes() == (tmp_path / "s.bin").read_bytes()
