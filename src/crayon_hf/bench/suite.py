"""`crayon bench --suite`: every vocabulary in ../shared/vocab against every corpus in
../shared/corpora, written to benchmarks/results/suite.{md,json,png} and summarised in README.md.

Each corpus is sampled to ~1 MiB of documents spread over the file; the batch measures run on
short_docs.jsonl (3 MiB of short mixed-language documents, new ones every pass), which is also
where the transformers face is timed. About 15-20 minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from pathlib import Path

from crayon_hf.bench import config_dict, load_samples
from crayon_hf.bench.measure import BenchError, Config, run_target
from crayon_hf.bench.report import describe, machine, summary_table, write
from crayon_hf.bench.subjects import json_safe, resolve, shared_targets

BATCH_CORPUS = "short_docs.jsonl"
README_START = "<!-- crayon-bench-summary:start -->"
README_END = "<!-- crayon-bench-summary:end -->"


def corpus_files(shared: Path) -> list[Path]:
    return sorted(p for p in (shared / "corpora").iterdir() if p.is_file() and p.suffix in (".txt", ".jsonl"))


def _merged(previous: Path, results: list[dict]) -> list[dict]:
    """With --only, the new results replace those targets' rows of the last full run, in order."""
    if not previous.exists():
        return results
    old = json.loads(previous.read_text())["results"]
    fresh = {r["target"]: r for r in results}
    merged = [fresh.pop(r["target"], r) for r in old]
    return merged + list(fresh.values())


def readme_block(results: list[dict], info: dict, out: Path, readme: Path, corpora: int) -> str:
    rel = Path(os.path.relpath(out, readme.parent)).as_posix()
    lines = [
        README_START,
        f"Measured with `crayon bench --suite` ({describe(info)}): every vocabulary in `../shared/vocab` against "
        f"{corpora} corpora of `../shared/corpora`, ~1 MiB of new text each, side by side in one process. "
        "Ratios are crayon-hf's speed over the reference's (median over corpora, with the slowest and fastest "
        "corpus); parity is the worst corpus's share of documents with identical ids (and offsets on the "
        f"tokenizers face). Batch: short_docs.jsonl on {info['cores']} threads. Transformers call: "
        "`tok(1000 docs, padding=True, truncation=True, max_length=128, return_tensors=\"np\")`. "
        f"Every table, the optional libraries and the first mismatches: [{rel}/suite.md]({rel}/suite.md).",
        "",
        *summary_table(results),
        "",
        f"![crayon-hf speed over the reference, per vocabulary]({rel}/suite_summary.png)",
        README_END,
    ]
    return "\n".join(lines)


def update_readme(readme: Path, block: str) -> None:
    text = readme.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(README_START) + ".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{readme} has no {README_START} ... {README_END} block to replace")
    readme.write_text(pattern.sub(lambda _: block, text), encoding="utf-8")


def run_suite(shared: Path, out: Path, readme: Path | None, cfg: Config, only: list[str] | None = None) -> list[dict]:
    from crayon_hf.bench.report import load_average, load_warning

    start = time.perf_counter()
    load_before = load_average()
    if (warning := load_warning(machine(load_before))):
        cfg.log(f"warning: {warning}")
    files = corpus_files(shared)
    if not files:
        raise ValueError(f"no corpora in {shared / 'corpora'}")
    if cfg.batch_corpus is None:
        cfg.batch_corpus = BATCH_CORPUS
    samples = load_samples([str(f) for f in files], cfg)
    targets = shared_targets(shared)
    if only:
        unknown = set(only) - {name for name, _ in targets}
        if unknown:
            raise ValueError(f"--only {', '.join(sorted(unknown))}: not in {shared / 'vocab'}")
        targets = [t for t in targets if t[0] in only]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, spec) in enumerate(targets):
            cfg.log(f"[{i + 1}/{len(targets)}] {name} ({time.perf_counter() - start:.0f} s)")
            try:
                target = resolve(spec, Path(tmp))
                target.name = name
                results.append(run_target(target, samples, cfg))
            except (BenchError, ValueError) as e:  # one vocabulary failing does not lose the others
                cfg.log(f"  {name}: not benchmarked: {e}")
                results.append({"target": name, "error": str(e)})
            # Kept after every vocabulary, so a crash or Ctrl-C loses at most one.
            (out / "suite.partial.json").parent.mkdir(parents=True, exist_ok=True)
            (out / "suite.partial.json").write_text(json.dumps(json_safe(results)))
    if only:
        results = _merged(out / "suite.json", results)
    info = machine(load_before)
    config = config_dict(cfg) | {"corpora": [f.name for f in files], "shared": str(shared)}
    for path in write(out, results, info, config, stem="suite", title="crayon-hf benchmark suite"):
        cfg.log(f"wrote {path}")
    if readme is not None:
        update_readme(readme, readme_block(results, info, out, readme, len(files)))
        cfg.log(f"updated {readme}")
    (out / "suite.partial.json").unlink(missing_ok=True)
    cfg.log(f"suite finished in {time.perf_counter() - start:.0f} s")
    return results
