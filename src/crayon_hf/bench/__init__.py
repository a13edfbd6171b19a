"""The benchmark harness: token parity and speed of crayon-hf side by side with the reference
libraries (`tokenizers`, `tiktoken`; `tokie` and `fastokens` when installed; the transformers
face against the stock transformers tokenizer), in one process, on any vocabulary.

    crayon bench --tokenizer cl100k_base --corpus my_corpus.txt
    crayon bench --tokenizer path/to/hf_folder --corpus a.txt --corpus b.jsonl --threads 8 --out results
    crayon bench --suite                        # every vocabulary in ../shared/vocab x every corpus

From Python: `crayon_hf.bench.run("gpt2_folder", ["corpus.txt"], out="results")`. See docs/benchmarks.md.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from importlib.resources import files
from pathlib import Path
from typing import Sequence

from crayon_hf.bench.corpus import Sample, sample
from crayon_hf.bench.measure import BenchError, Config, run_target
from crayon_hf.bench.report import machine, write
from crayon_hf.bench.subjects import resolve

__all__ = ["BenchError", "Config", "run", "load_samples", "set_threads"]


def set_threads(threads: int) -> None:
    """Sizes every library's batch pool to `threads` (tokenizers, tokie and fastokens read
    RAYON_NUM_THREADS when their pool starts, crayon-hf on every call); no second core inside a
    single fastokens encode (see ../shared/BASELINES.md)."""
    os.environ["RAYON_NUM_THREADS"] = str(threads)
    os.environ.setdefault("FASTOKENS_BPE_THREADS", "1")


def load_samples(corpora: Sequence[str | os.PathLike[str]] | None, cfg: Config, jsonl_field: str = "text") -> list[Sample]:
    """A sample of every corpus (the built-in multilingual sample when there is none); only the
    batch corpus (`cfg.batch_corpus`, else the first) also gets documents for the batch passes."""
    if not corpora:
        builtin = files("crayon_hf").joinpath("data/verify_sample.txt")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "builtin_multilingual_sample.txt"
            path.write_bytes(builtin.read_bytes())
            return [sample(path, cfg.sample_bytes, cfg.batch_bytes)]
    names = [Path(c).name for c in corpora]
    batch_name = cfg.batch_corpus if cfg.batch_corpus in names else names[0]
    cfg.batch_corpus = batch_name
    return [sample(c, cfg.sample_bytes, cfg.batch_bytes if n == batch_name else 0, jsonl_field=jsonl_field)
            for c, n in zip(corpora, names)]


def config_dict(cfg: Config) -> dict:
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k != "log"}


def run(tokenizer: str, corpora: Sequence[str | os.PathLike[str]] | None = None, *, pattern: str | None = None,
        out: str | os.PathLike[str] | None = None, config: Config | None = None, jsonl_field: str = "text") -> dict:
    """Benchmarks one tokenizer (a bundled encoding name, a tokenizer.json, an HF folder, a
    tiktoken rank file or a cartridge) on the given corpora; writes bench.md, bench.json and
    bench.png under `out` when given. Returns {"machine", "config", "results": [one result]}."""
    from crayon_hf.bench.report import load_average, load_warning

    cfg = config or Config()
    load_before = load_average()
    if (warning := load_warning(machine(load_before))):
        cfg.log(f"warning: {warning}")
    samples = load_samples(corpora, cfg, jsonl_field)
    with tempfile.TemporaryDirectory() as tmp:
        target = resolve(str(tokenizer), Path(tmp), pattern=pattern)
        result = run_target(target, samples, cfg)
    info = machine(load_before)
    report = {"machine": info, "config": config_dict(cfg), "results": [result]}
    if out is not None:
        for path in write(Path(out), [result], info, report["config"], title=f"crayon-hf benchmark: {target.name}"):
            cfg.log(f"wrote {path}")
    return report
