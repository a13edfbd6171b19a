"""The benchmark harness (crayon_hf.bench, `crayon bench`): it must report 100% parity when the
outputs are equal, catch an injected mismatch and show where, run on without an optional library,
sample corpora as documented, and write its markdown, JSON and plots. Small inputs only: the
harness's numbers are not checked here (timing assertions do not belong in the test suite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crayon_hf import cli
from crayon_hf.bench import Config, load_samples, run
from crayon_hf.bench.corpus import sample, split_passes
from crayon_hf.bench.measure import BenchError, run_target
from crayon_hf.bench.report import markdown, write
from crayon_hf.bench.subjects import TIKTOKEN, Subject, resolve, shared_targets
from crayon_hf.bench.suite import README_END, README_START, readme_block, update_readme
from support import CORPORA, SHARED, VOCAB, corpus_text, require_shared

pytest.importorskip("tiktoken")


def quiet(**kw) -> Config:
    """A config for tiny inputs: two passes, no fresh interpreters unless asked, nothing printed."""
    base = dict(reps=2, batch_reps=2, sample_bytes=24 << 10, batch_bytes=16 << 10, cold_reps=0,
                transformers=False, log=lambda line: None)
    base.update(kw)
    return Config(**base)


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    require_shared(CORPORA / "en_botchan.txt")
    path = tmp_path_factory.mktemp("corpus") / "botchan_head.txt"
    text = corpus_text(CORPORA / "en_botchan.txt", 60 << 10) + "\n" + corpus_text(CORPORA / "zh_hongloumeng.txt", 8 << 10)
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------- sampling


def test_sample_is_disjoint_spread_and_bounded(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {i:06d} " + "x" * 90 + "\n" for i in range(40_000)))  # ~4 MB
    s = sample(path, 64 << 10, 32 << 10)
    single, batch = "".join(s.single), "".join(s.batch)
    assert 60 << 10 <= len(single) <= 100 << 10 and 28 << 10 <= len(batch) <= 70 << 10
    assert not set(single.splitlines()) & set(batch.splitlines()) and not s.repeated
    numbers = sorted(int(line.split()[1]) for line in single.splitlines())
    assert numbers[0] < 2_000 and numbers[-1] > 38_000  # windows reach both ends of the file
    assert all(line.startswith("line ") and len(line) == 102 for line in (single + batch).splitlines())


def test_sample_jsonl_field_small_file_and_errors(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"body": f"document {i}", "n": i}) + "\n" for i in range(50)))
    s = sample(path, 1 << 20, 1 << 20, jsonl_field="body")
    assert s.single == [f"document {i}" for i in range(50)] and s.batch == s.single and s.repeated
    with pytest.raises(ValueError, match="field 'text'"):
        sample(path, 1 << 20, 0)
    with pytest.raises(ValueError, match="no such file"):
        sample(tmp_path / "missing.txt", 1 << 20, 0)
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ValueError, match="no text"):
        sample(tmp_path / "empty.txt", 1 << 20, 0)
    assert [len(p) for p in split_passes(list("abcdefg"), 3)] == [2, 3, 2]
    assert split_passes(["a"], 5) == [["a"]]


def test_utf8_never_split(tmp_path):
    path = tmp_path / "zh.txt"
    path.write_text("红楼梦" * 200_000)  # 1.8 MB, no line breaks at all
    s = sample(path, 100 << 10, 50 << 10)
    assert s.single and s.batch and set("".join(s.single + s.batch)) == set("红楼梦")


# ------------------------------------------------------------------------------- harness


def test_reports_full_parity_and_writes_every_output(tmp_path, small_corpus):
    report = run("r50k_base", [small_corpus], out=tmp_path, config=quiet(cold_reps=1))
    (result,) = report["results"]
    row = result["corpora"][small_corpus.name]
    ours = row["libraries"]["crayon-hf"]
    assert ours["parity"] == 1.0 and ours["mismatch"] is None and ours["decode_parity"] == 1.0
    assert row["tokens"] > 0 and ours["encode_mib_s"]["n"] == 2 and ours["tokens_s"] > 0
    assert result["batch"]["libraries"]["crayon-hf"]["parity"] == 1.0
    cold = result["cold"]["crayon-hf"]
    assert cold["cold_load_ms"]["median"] > 0 and cold["rss_peak_mib"] >= cold["rss_load_mib"] > 0
    assert result["cartridge_bytes"] > 1e6
    saved = json.loads((tmp_path / "bench.json").read_text())
    assert saved["machine"]["versions"]["tiktoken"] and saved["machine"]["cores"] >= 1
    assert saved["config"]["reps"] == 2 and saved["results"][0]["target"] == "r50k_base"
    md = (tmp_path / "bench.md").read_text()
    assert "| r50k_base | tiktoken | 100.0% |" in md and small_corpus.name in md
    if pytest.importorskip("matplotlib"):
        assert (tmp_path / "bench.png").stat().st_size > 10_000


def _needle_target(tmp_path: Path):
    """r50k_base, with a crayon-hf that gets one token wrong in documents holding NEEDLE."""
    target = resolve("r50k_base", tmp_path)
    setup = (
        "import crayon_hf.tiktoken as tk\n"
        "class Broken:\n"
        "    def __init__(self, enc): self.enc = enc\n"
        "    def encode_ordinary(self, d):\n"
        "        ids = self.enc.encode_ordinary(d)\n"
        "        if 'NEEDLE' in d:\n"
        "            k = self.enc.decode_with_offsets(ids)[1].index(d.index(' NEEDLE'))\n"
        "            ids[k] += 1\n"
        "        return ids\n"
        "    def encode_ordinary_batch(self, texts, num_threads=1): return [self.encode_ordinary(t) for t in texts]\n"
        "    def decode(self, ids): return self.enc.decode(ids)\n"
        "tok = Broken(tk.get_encoding('r50k_base'))\n"
    )
    target.subjects[0] = Subject("crayon-hf", "crayon", "crayon_hf", setup, TIKTOKEN)
    return target


def test_catches_an_injected_mismatch_and_shows_it(tmp_path, small_corpus):
    cfg = quiet()
    (s,) = load_samples([small_corpus], cfg)
    victim = 1
    s.single[victim] = s.single[victim][:500] + " NEEDLE " + s.single[victim][500:]
    result = run_target(_needle_target(tmp_path), [s], cfg)
    ours = result["corpora"][small_corpus.name]["libraries"]["crayon-hf"]
    assert ours["parity"] == pytest.approx(1 - 1 / len(s.single))
    m = ours["mismatch"]
    assert m["doc"] == victim and "NEEDLE" in m["context"] and m["differs_in"] == "ids"
    assert m["got"][m["token"] - max(0, m["token"] - 2)][0] == m["reference"][m["token"] - max(0, m["token"] - 2)][0] + 1
    assert "NEEDLE" in "".join(piece for _, piece in m["reference"])
    md = markdown([result], {"date": "d", "cpu": "c", "cores": 1, "python": "3", "versions": {}})
    assert "First mismatches" in md and f"document {victim}" in md and "NEEDLE" in md


def test_optional_libraries_missing_or_failing_are_skipped(tmp_path, small_corpus):
    target = resolve("r50k_base", tmp_path)
    target.subjects = [s for s in target.subjects if s.role != "optional"] + [
        Subject("absent", "optional", "crayon_no_such_module_xyz", "import crayon_no_such_module_xyz", TIKTOKEN),
        Subject("broken", "optional", "json", "raise RuntimeError('cannot read this vocabulary')", TIKTOKEN),
        Subject("flaky", "optional", "json",
                "class Flaky:\n    def encode_ordinary(self, d): raise MemoryError('too long')\n"
                "    def decode(self, ids): return ''\ntok = Flaky()\n", TIKTOKEN),
        # A Rust panic reaches Python as pyo3's PanicException, a BaseException.
        Subject("panics", "optional", "tiktoken",
                "import crayon_hf.tiktoken as tiktoken\nclass PanicException(BaseException): pass\n"
                "class Panics:\n    def __init__(self): self.enc = tiktoken.get_encoding('gpt2')\n"
                "    def encode_ordinary(self, d): return self.enc.encode_ordinary(d)\n"
                "    def encode_ordinary_batch(self, texts, num_threads=1): raise PanicException('index out of bounds')\n"
                "    def decode(self, ids): raise PanicException('index out of bounds')\ntok = Panics()\n", TIKTOKEN),
    ]
    cfg = quiet()
    result = run_target(target, load_samples([small_corpus], cfg), cfg)
    status = {k: v["status"] for k, v in result["libraries"].items()}
    assert status["crayon-hf"] == status["tiktoken"] == "ok" and status["absent"] == "not installed"
    assert status["broken"] == "cannot load: RuntimeError: cannot read this vocabulary"
    assert status["flaky"].startswith("failed on botchan_head.txt: MemoryError")
    assert result["corpora"][small_corpus.name]["libraries"]["crayon-hf"]["parity"] == 1.0
    assert "flaky" not in result["batch"]["libraries"] and "panics" not in result["batch"]["libraries"]
    panics = result["corpora"][small_corpus.name]["libraries"]["panics"]
    assert panics["parity"] == 1.0 and panics["decode_error"] == "PanicException: index out of bounds"
    md = markdown([result], {"date": "d", "cpu": "c", "cores": 1, "python": "3", "versions": {}})
    assert "absent: not installed" in md and "broken: cannot load" in md


def test_reference_missing_is_an_error(tmp_path, small_corpus):
    target = resolve("r50k_base", tmp_path)
    target.subjects[1] = Subject("tiktoken", "reference", "crayon_no_such_module_xyz", "", TIKTOKEN)
    cfg = quiet()
    with pytest.raises(BenchError, match="not installed"):
        run_target(target, load_samples([small_corpus], cfg), cfg)


def test_cartridges_are_benchmarked_against_their_source(tmp_path, small_corpus):
    import crayon_hf.tiktoken as tk
    from crayon_hf import Tokenizer

    require_shared(VOCAB / "hf" / "gpt2")
    tk.get_encoding("r50k_base").save_cartridge(tmp_path / "r50k.dat")
    Tokenizer.from_file(VOCAB / "hf" / "gpt2" / "tokenizer.json").save_cartridge(tmp_path / "gpt2.dat")
    cfg = quiet()
    samples = load_samples([small_corpus], cfg)
    for name, reference in (("r50k.dat", "tiktoken"), ("gpt2.dat", "tokenizers")):
        target = resolve(str(tmp_path / name), tmp_path)
        assert [s.label for s in target.subjects if s.role == "reference"] == [reference]
        result = run_target(target, samples, cfg)
        assert result["corpora"][small_corpus.name]["libraries"]["crayon-hf"]["parity"] == 1.0, name


def test_cli_hf_folder_with_transformers_face(tmp_path, small_corpus):
    pytest.importorskip("tokenizers")
    pytest.importorskip("transformers")
    folder = require_shared(VOCAB / "hf" / "gpt2")
    code = cli.main(["bench", "--tokenizer", str(folder), "--corpus", str(small_corpus), "--reps", "2",
                     "--batch-reps", "2", "--sample-mib", "0.03", "--batch-mib", "0.02", "--cold-reps", "1",
                     "--no-memory", "--out", str(tmp_path)])
    assert code == 0
    result = json.loads((tmp_path / "bench.json").read_text())["results"][0]
    ours = result["corpora"][small_corpus.name]["libraries"]["crayon-hf"]
    assert ours["parity"] == 1.0 and ours["checks"] == "ids and offsets"
    tf = result["transformers"]["libraries"]
    assert tf["CrayonTokenizer"]["parity"] == 1.0 and tf["transformers"]["ms"]["median"] > 0
    assert "CrayonTokenizer (transformers)" in result["cold"]
    assert "transformers face (GPT2Tokenizer)" in (tmp_path / "bench.md").read_text()


def test_cli_errors(tmp_path, capsys):
    assert cli.main(["bench"]) == 2
    assert cli.main(["bench", "--tokenizer", "no_such_encoding"]) == 2
    assert "not a bundled encoding" in capsys.readouterr().err
    assert cli.main(["bench", "--tokenizer", "r50k_base", "--corpus", str(tmp_path / "none.txt")]) == 2
    assert "no such file" in capsys.readouterr().err


# ------------------------------------------------------------------------------- suite


def test_suite_lists_every_shared_vocabulary():
    require_shared(VOCAB)
    names = [name for name, _ in shared_targets(SHARED)]
    assert {"r50k_base", "cl100k_base", "o200k_base", "llama3", "gpt2", "bert_base_uncased", "t5_small"} <= set(names)
    assert len(names) == len(list((VOCAB / "tiktoken").glob("*.tiktoken"))) + len(list((VOCAB / "hf").iterdir()))


def test_readme_summary_block(tmp_path, small_corpus):
    cfg = quiet()
    result = run_target(resolve("r50k_base", tmp_path), load_samples([small_corpus], cfg), cfg)
    info = {"date": "2026-11-21", "cpu": "cpu", "cores": 2, "python": "3.11", "versions": {}}
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{README_START}\nOLD-CONTENT\n{README_END}\nafter\n")
    update_readme(readme, readme_block([result], info, tmp_path / "benchmarks" / "results", readme, 11))
    text = readme.read_text()
    assert "OLD-CONTENT" not in text and text.startswith("# x\n\nbefore\n") and text.endswith("after\n")
    assert "| r50k_base | tiktoken | 100.0% |" in text and "(benchmarks/results/suite_summary.png)" in text
    written = write(tmp_path / "out", [result, result], info, {}, stem="suite")
    assert {p.name for p in written} >= {"suite.json", "suite.md"}
    readme.write_text("# no block\n")
    with pytest.raises(ValueError, match="no <!-- crayon-bench-summary:start -->"):
        update_readme(readme, "x")


def test_batch_threads_follow_the_environment(monkeypatch):
    """The harness sizes every library's pool with RAYON_NUM_THREADS; crayon-hf's batch calls read
    it as tokenizers does (and TOKENIZERS_PARALLELISM=false means one thread)."""
    from crayon_hf import Tokenizer
    from crayon_hf._threads import default_threads

    for name in ("CRAYON_NUM_THREADS", "RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM"):
        monkeypatch.delenv(name, raising=False)
    assert default_threads() == 0
    monkeypatch.setenv("RAYON_NUM_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.setenv("CRAYON_NUM_THREADS", "2")
    assert default_threads() == 2
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    assert default_threads() == 1
    monkeypatch.setenv("CRAYON_NUM_THREADS", "x")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    assert default_threads() == 3
    tok = Tokenizer.from_file(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json"))
    docs = corpus_text(CORPORA / "en_botchan.txt", 20_000).splitlines()
    serial = [e.ids for e in tok.encode_batch(docs)]
    monkeypatch.setenv("RAYON_NUM_THREADS", "1")
    assert [e.ids for e in tok.encode_batch(docs)] == serial


# ------------------------------------------------------------------------------ the picture


def _png_size(path: Path) -> tuple[int, int]:
    import struct

    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def _result_with_peer(tmp_path: Path, small_corpus: Path) -> dict:
    cfg = quiet()
    result = run_target(resolve("r50k_base", tmp_path), load_samples([small_corpus], cfg), cfg)
    # A peer, as tokie or fastokens would appear: half crayon-hf's speed on every pass.
    row = result["corpora"][small_corpus.name]["libraries"]
    ours = row["crayon-hf"]
    row["peer"] = {"encode_mib_s": {k: (v / 2 if k != "n" else v) for k, v in ours["encode_mib_s"].items()},
                   "encode_mib_s_passes": [x / 2 for x in ours["encode_mib_s_passes"]], "parity": 1.0}
    result["libraries"]["peer"] = {"role": "optional", "status": "ok"}
    return result


def test_plot_is_a_readable_speed_up_picture(tmp_path, small_corpus):
    """bench.png: speed-up over the reference and each peer, a size worth sharing; the ratios and
    whiskers are the per-pass ones the JSON holds."""
    pytest.importorskip("matplotlib")
    from crayon_hf.bench.report import machine, pass_ratio, plot

    result = _result_with_peer(tmp_path, small_corpus)
    libs = result["corpora"][small_corpus.name]["libraries"]
    mid, lo, hi = pass_ratio(libs["crayon-hf"], libs["peer"])
    assert mid == pytest.approx(2.0) and lo == pytest.approx(2.0) and hi == pytest.approx(2.0)
    ours, ref = libs["crayon-hf"], libs["tiktoken"]
    per_pass = [a / b for a, b in zip(ours["encode_mib_s_passes"], ref["encode_mib_s_passes"])]
    mid, lo, hi = pass_ratio(ours, ref)
    assert mid == ours["encode_mib_s"]["median"] / ref["encode_mib_s"]["median"]
    assert lo == min(per_pass + [mid]) and hi == max(per_pass + [mid])
    (path,) = plot(tmp_path, [result], machine((0.0, 0.0, 0.0)), "bench")
    width, height = _png_size(path)
    assert width >= 1000 and height >= 300


def test_a_loaded_machine_is_warned_about(tmp_path, small_corpus, monkeypatch):
    from crayon_hf.bench import report

    info = report.machine((64.0, 64.0, 64.0))
    assert info["load"]["before"] == [64.0, 64.0, 64.0]
    warning = report.load_warning(info)
    assert warning and "loaded" in warning and "64.0" in warning
    assert report.load_warning(report.machine((0.0, 0.0, 0.0))) is None
    result = _result_with_peer(tmp_path, small_corpus)
    report.write(tmp_path / "out", [result], info, {})
    md = (tmp_path / "out" / "bench.md").read_text()
    assert "**Warning**: the machine was loaded" in md
    # crayon bench says it on stderr before measuring.
    lines: list[str] = []
    monkeypatch.setattr(report, "load_average", lambda: (64.0, 64.0, 64.0))
    run("r50k_base", [small_corpus], config=quiet(log=lines.append))
    assert any(line.startswith("warning: the machine was loaded") for line in lines)


def test_missing_matplotlib_is_said(tmp_path, small_corpus, monkeypatch, capsys):
    import sys

    from crayon_hf.bench import report

    result = _result_with_peer(tmp_path, small_corpus)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    written = report.write(tmp_path / "out", [result], report.machine(None), {})
    assert {p.name for p in written} == {"bench.json", "bench.md"}
    assert "matplotlib is not installed, so bench.png was not drawn" in capsys.readouterr().err
    assert "No plot: matplotlib is not installed" in (tmp_path / "out" / "bench.md").read_text()


def test_peer_benchmark_never_runs_our_two_instances_back_to_back():
    # benchmarks/peers.py rotates a ring of libraries; a library runs faster right after one that
    # shares its code, so crayon-hf's list and numpy instances must never be neighbours on it.
    import importlib.util

    spec = importlib.util.spec_from_file_location("peers", Path(__file__).resolve().parents[1] / "benchmarks" / "peers.py")
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    for names in (["crayon", "crayon (numpy)", "tiktoken", "fastokens"],
                  ["crayon", "crayon (numpy)", "tokenizers", "fastokens", "tokie"]):
        ring = peers.turn_order(names)
        assert sorted(ring) == sorted(names)
        for a, b in zip(ring, ring[1:] + ring[:1]):
            assert not (a.startswith("crayon") and b.startswith("crayon")), ring


def _short_texts_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "short_texts", Path(__file__).resolve().parents[1] / "benchmarks" / "short_texts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_short_text_benchmark_writes_its_results_and_checks_ids(tmp_path, monkeypatch):
    """benchmarks/short_texts.py on a few documents: every file written, one row per cell, every
    library's ids checked (a crayon-hf mismatch stops the run)."""
    require_shared(CORPORA / "short_docs.jsonl")
    short_texts = _short_texts_module()
    argv = ["--vocab", "gpt2", "o200k_base", "--transformers", "gpt2", "--size", "<= 64 B", "--passes", "2",
            "--per-pass", "5", "--out", str(tmp_path)]
    assert short_texts.main(argv) == 0
    rows = json.loads((tmp_path / "short_texts.json").read_text())["rows"]
    assert [(r["vocab"], r["size"]) for r in rows] == [("gpt2", "<= 64 B"), ("o200k_base", "<= 64 B"),
                                                      ("gpt2 (transformers)", "<= 64 B")]
    for r in rows:
        assert r["mismatches"]["crayon"] == 0 and r["ns_per_call"]["crayon"] > 0
        assert r["reference"] in r["ns_per_call"]
    assert "| gpt2 | <= 64 B |" in (tmp_path / "short_texts.md").read_text()

    real = short_texts.subjects

    def off_by_one(vocab):
        subs, reference = real(vocab)
        crayon = subs["crayon"]
        subs["crayon"] = lambda d: [i + 1 for i in crayon(d)]
        return subs, reference

    monkeypatch.setattr(short_texts, "subjects", off_by_one)
    with pytest.raises(SystemExit, match="crayon-hf ids differ"):
        short_texts.main(argv)
