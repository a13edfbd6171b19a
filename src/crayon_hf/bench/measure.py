"""The measurements, side by side in one process (the method of ../shared/BASELINES.md).

- Parity: the share of documents whose ids equal the reference's (and offsets, where both
  libraries report them); the first mismatch is kept with its context.
- Single-thread encode: the process pinned to one core, one long-lived instance per library,
  every pass over documents no library has seen (word caches make repeats meaningless), the
  libraries taking turns in a rotating order so a shared machine's drift hits them alike, the
  cyclic GC off inside timed regions (as `timeit` does). Medians over passes, min and max.
- Batch encode on N threads, over a second set of documents, again new text every pass.
- Decode of each library's own ids.
- The transformers call `tok(batch, padding=True, truncation=True, max_length=L, return_tensors="np")`.
- Cold load (import + load in a fresh interpreter), peak memory (max RSS of a fresh interpreter
  after loading, and after encoding the sample), cartridge size.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from crayon_hf.bench.corpus import Sample, split_passes, utf8_len
from crayon_hf.bench.subjects import Subject, Target, _load, installed

MIB = float(1 << 20)
SINGLE_THREAD = "crayon-hf, 1 thread"


class BenchError(ValueError):
    """A benchmark that cannot run (crayon-hf or the reference cannot load the target)."""


@dataclass
class Config:
    reps: int = 5  # single-thread passes (and transformers calls), each over new documents
    batch_reps: int = 3  # batch passes, each over new documents
    sample_bytes: int = 1 << 20  # documents per corpus for the single-thread passes
    batch_bytes: int = 3 << 20  # documents per corpus for the batch passes
    threads: int = os.cpu_count() or 1
    cold_reps: int = 5  # fresh interpreters per library for the cold load (0: skip)
    transformers_cold_reps: int = 1  # the same for the transformers face (importing transformers takes seconds)
    memory: bool = True  # the first fresh interpreter also encodes the sample: peak RSS
    transformers: bool = True
    max_length: int = 128
    transformers_batch: int = 1000
    pin: bool = True
    batch_corpus: str | None = None  # whose batch documents run the batch measures (default: the first corpus)
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))


@dataclass
class Runner:
    """A loaded subject."""

    subject: Subject
    tok: Any
    load_ms: float
    encode: Callable = field(init=False)
    ids: Callable = field(init=False)
    offsets: Callable | None = field(init=False)
    batch: Callable = field(init=False)
    decode: Callable = field(init=False)
    failure: str | None = None

    def __post_init__(self) -> None:
        api = self.subject.api
        self.encode = eval(f"lambda tok, d: {api.encode}")
        self.ids = eval(f"lambda r: {api.ids}")
        self.offsets = eval(f"lambda r: {api.offsets}") if api.offsets else None
        self.batch = eval(f"lambda tok, texts, threads: {api.batch}")
        self.decode = eval(f"lambda tok, ids: {api.decode}")

    @property
    def label(self) -> str:
        return self.subject.label


class _no_gc:
    """The cyclic GC off inside a timed region: a collection landing in one library's timing and
    not the other's is noise, not speed. Only the young generations are collected first: a full
    collection walks every object the process holds (with transformers and torch imported, about
    0.1 s each time; a third of a short run's time went there) and is not needed for the region to
    run without one."""

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.collect(1)
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()


class _pinned:
    """The block runs on one core (single-thread numbers); the affinity is restored after."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and hasattr(os, "sched_setaffinity")
        self.saved: set[int] | None = None

    def __enter__(self) -> None:
        if self.enabled:
            self.saved = os.sched_getaffinity(0)
            os.sched_setaffinity(0, {min(self.saved)})

    def __exit__(self, *exc: object) -> None:
        if self.saved:
            os.sched_setaffinity(0, self.saved)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    with _no_gc():
        start = time.perf_counter()
        out = fn()
        return time.perf_counter() - start, out


def _rotated(items: list, k: int) -> list:
    k %= max(1, len(items))
    return items[k:] + items[:k]


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def _interrupts_pass(e: BaseException) -> None:
    """A library's failure, including a Rust panic surfacing as pyo3's PanicException (not an
    Exception), is recorded; Ctrl-C and exit are not failures of the library."""
    if isinstance(e, (KeyboardInterrupt, SystemExit)):
        raise e


def _short_error(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}".rstrip(": ")


# ------------------------------------------------------------------------------------ loading


def load_subjects(target: Target, log: Callable[[str], None]) -> tuple[list[Runner], dict[str, dict]]:
    """Loads every subject that can run. A missing or failing optional library is recorded and
    skipped; crayon-hf or the reference failing is a BenchError."""
    runners, status = [], {}
    for s in target.subjects:
        if not installed(s.module):
            if s.role != "optional":
                raise BenchError(f"{s.label} is not installed (pip install 'crayon-hf[bench]')")
            status[s.label] = {"role": s.role, "status": "not installed"}
            continue
        try:
            start = time.perf_counter()
            tok = _load(s.setup)
            ms = 1e3 * (time.perf_counter() - start)
        except BaseException as e:  # noqa: BLE001 - a Rust panic (pyo3) is a BaseException
            _interrupts_pass(e)
            if s.role != "optional":
                raise BenchError(f"{s.label} cannot load {target.source}: {_short_error(e)}") from e
            status[s.label] = {"role": s.role, "status": f"cannot load: {_short_error(e)}"}
            log(f"  {s.label}: cannot load ({_short_error(e)})")
            continue
        runners.append(Runner(s, tok, ms))
        status[s.label] = {"role": s.role, "status": "ok", "load_ms_in_process": ms}
    return runners, status


# ------------------------------------------------------------------------------------ parity


def _piece(runner: Runner, token: int) -> str:
    try:
        return runner.decode(runner.tok, [token])
    except BaseException as e:  # noqa: BLE001 - a Rust panic (pyo3) is a BaseException
        _interrupts_pass(e)
        return "?"


def first_mismatch(doc_index: int, doc: str, ref: Runner, ref_ids: list[int], got_ids: list[int],
                   ref_offsets: list | None = None, got_offsets: list | None = None) -> dict:
    """Where two token lists for one document first differ, with the text around that place and
    the tokens on both sides (id and decoded text)."""
    i = 0
    while i < min(len(ref_ids), len(got_ids)) and ref_ids[i] == got_ids[i]:
        i += 1
    what = "ids"
    if i == len(ref_ids) == len(got_ids):  # same ids: the offsets differ
        what = "offsets"
        i = next(k for k, (a, b) in enumerate(zip(ref_offsets or [], got_offsets or [])) if tuple(a) != tuple(b))
    if ref_offsets is not None and i < len(ref_offsets):
        char = ref_offsets[i][0]
    else:
        try:
            char = len(ref.decode(ref.tok, ref_ids[:i]))
        except BaseException as e:  # noqa: BLE001 - a Rust panic (pyo3) is a BaseException
            _interrupts_pass(e)
            char = 0
    lo, hi = max(0, i - 2), i + 3
    out = {
        "doc": doc_index,
        "token": i,
        "char": char,
        "differs_in": what,
        "context": doc[max(0, char - 40): char + 60],
        "reference": [[t, _piece(ref, t)] for t in ref_ids[lo:hi]],
        "got": [[t, _piece(ref, t)] for t in got_ids[lo:hi]],
    }
    if what == "offsets":
        out["reference_offsets"] = [list(x) for x in (ref_offsets or [])[lo:hi]]
        out["got_offsets"] = [list(x) for x in (got_offsets or [])[lo:hi]]
    return out


def _parity(docs: list[str], ref: Runner, outputs: dict[str, list], offsets: dict[str, list]) -> dict[str, dict]:
    out = {}
    ref_ids, ref_offs = outputs[ref.label], offsets.get(ref.label)
    for label, ids in outputs.items():
        if label == ref.label:
            continue
        offs = offsets.get(label) if ref_offs is not None else None
        same, first = 0, None
        for i, (a, b) in enumerate(zip(ref_ids, ids)):
            equal = a == b and (offs is None or offs[i] == ref_offs[i])
            same += equal
            if not equal and first is None:
                first = first_mismatch(i, docs[i], ref, a, b, ref_offs[i] if ref_offs else None,
                                       offs[i] if offs else None)
        out[label] = {"parity": same / max(1, len(ids)), "checks": "ids and offsets" if offs is not None else "ids",
                      "mismatch": first}
    return out


# ------------------------------------------------------------------------------ measurements


def _reference(runners: list[Runner]) -> Runner:
    return next(r for r in runners if r.subject.role == "reference")


def measure_corpus(runners: list[Runner], sample: Sample, cfg: Config) -> dict:
    """Single-thread encode, parity and decode on one corpus sample."""
    passes = split_passes(sample.single, cfg.reps)
    nbytes = [utf8_len(p) for p in passes]
    live = [r for r in runners if r.failure is None]
    speeds: dict[str, list[float]] = {r.label: [] for r in live}
    outputs: dict[str, list] = {r.label: [] for r in live}
    offsets: dict[str, list] = {r.label: [] for r in live if r.offsets is not None}
    failed: dict[str, str] = {}
    with _pinned(cfg.pin):
        for k, p in enumerate(passes):
            for r in _rotated(live, k):
                if r.label in failed:
                    continue
                try:
                    seconds, (results, ids) = _timed(
                        lambda: (lambda rs: (rs, [r.ids(x) for x in rs]))([r.encode(r.tok, d) for d in p]))
                except BaseException as e:  # noqa: BLE001 - a Rust panic (pyo3) is a BaseException
                    _interrupts_pass(e)
                    if r.subject.role != "optional":
                        raise BenchError(f"{r.label} failed on {sample.name}: {_short_error(e)}") from e
                    failed[r.label] = f"failed on {sample.name}: {_short_error(e)}"
                    continue
                speeds[r.label].append(nbytes[k] / seconds / MIB)
                outputs[r.label] += [list(x) for x in ids]
                if r.label in offsets:
                    offsets[r.label] += [[tuple(o) for o in r.offsets(x)] for x in results]
    for label, why in failed.items():
        for table in (speeds, outputs, offsets):
            table.pop(label, None)
        next(r for r in runners if r.label == label).failure = why
    live = [r for r in live if r.label not in failed]
    ref = _reference(live)
    docs = [d for p in passes for d in p]
    parity = _parity(docs, ref, outputs, offsets)

    # Decode: each library its own ids, pass by pass, in rotating order.
    decode_speeds: dict[str, list[float]] = {r.label: [] for r in live}
    decoded: dict[str, list[str]] = {r.label: [] for r in live}
    decode_errors: dict[str, str] = {}
    start = 0
    with _pinned(cfg.pin):
        for k, p in enumerate(passes):
            for r in _rotated(live, k):
                if r.label not in decode_speeds:
                    continue
                mine = outputs[r.label][start: start + len(p)]
                try:
                    seconds, texts = _timed(lambda: [r.decode(r.tok, x) for x in mine])
                except BaseException as e:  # noqa: BLE001 - a Rust panic (pyo3) is a BaseException
                    _interrupts_pass(e)
                    decode_speeds.pop(r.label)
                    decoded.pop(r.label)
                    decode_errors[r.label] = _short_error(e)
                    continue
                decode_speeds[r.label].append(nbytes[k] / seconds / MIB)
                decoded[r.label] += texts
            start += len(p)
    ntokens = sum(map(len, outputs[ref.label]))
    total = sum(nbytes)
    row: dict = {"docs": len(docs), "bytes": total, "tokens": ntokens, "passes": len(passes), "libraries": {}}
    for r in live:
        entry: dict = {"encode_mib_s": _spread(speeds[r.label])}
        # Pass k is the same documents for every library, so per-pass ratios are fair (the plot's whiskers).
        entry["encode_mib_s_passes"] = speeds[r.label]
        entry["tokens_s"] = entry["encode_mib_s"]["median"] * MIB * ntokens / max(1, total)
        if r.label in decode_speeds:
            entry["decode_mib_s"] = _spread(decode_speeds[r.label])
        else:
            entry["decode_error"] = decode_errors[r.label]
        if r.label in parity:
            entry.update(parity[r.label])
            if r.label in decoded and ref.label in decoded:
                # The same ids must decode to the same text.
                pairs = [(a, b) for a, b, x, y in zip(decoded[ref.label], decoded[r.label], outputs[ref.label],
                                                      outputs[r.label]) if x == y]
                entry["decode_parity"] = sum(a == b for a, b in pairs) / max(1, len(pairs))
        row["libraries"][r.label] = entry
    for label, why in failed.items():
        row["libraries"][label] = {"status": why}
    return row


def measure_batch(runners: list[Runner], sample: Sample, cfg: Config) -> dict:
    """Batch encode on cfg.threads threads, a new group of documents every pass; crayon-hf also on
    one thread (a second instance, so that neither run warms the other's caches): its scaling."""
    live = [r for r in runners if r.failure is None]
    ours = next((r for r in live if r.subject.role == "crayon"), None)
    if ours is not None and cfg.threads > 1:
        single = Runner(dataclasses.replace(ours.subject, label=SINGLE_THREAD), _load(ours.subject.setup), 0.0)
        many = single.batch
        single.batch = lambda tok, texts, threads: many(tok, texts, 1)
        live.append(single)
    passes = split_passes(sample.batch, cfg.batch_reps)
    nbytes = [utf8_len(p) for p in passes]
    speeds: dict[str, list[float]] = {r.label: [] for r in live}
    outputs: dict[str, list] = {r.label: [] for r in live}
    for k, p in enumerate(passes):
        for r in _rotated(live, k):
            if r.label not in speeds:
                continue
            try:
                seconds, ids = _timed(lambda: r.batch(r.tok, p, cfg.threads))
            except BaseException as e:  # noqa: BLE001 - a Rust panic (pyo3) is a BaseException
                _interrupts_pass(e)
                if r.subject.role != "optional":
                    raise BenchError(f"{r.label} batch failed on {sample.name}: {_short_error(e)}") from e
                speeds.pop(r.label)
                outputs.pop(r.label)
                continue
            speeds[r.label].append(nbytes[k] / seconds / MIB)
            outputs[r.label] += [list(x) for x in ids]
    ref = _reference(live)
    docs = [d for p in passes for d in p]
    parity = _parity(docs, ref, outputs, {})
    out: dict = {"corpus": sample.name, "docs": len(docs), "bytes": sum(nbytes), "threads": cfg.threads,
                 "passes": len(passes), "repeated_text": sample.repeated, "libraries": {}}
    for label, values in speeds.items():
        out["libraries"][label] = {"encode_mib_s": _spread(values), **parity.get(label, {})}
    if SINGLE_THREAD in speeds and "crayon-hf" in speeds:
        out["crayon_scaling"] = statistics.median(speeds["crayon-hf"]) / statistics.median(speeds[SINGLE_THREAD])
    return out


def _same_row(a: dict, b: dict, i: int) -> bool:
    import numpy as np

    if list(a) != list(b):
        return False
    for key in a:
        x, y = a[key], b[key]
        if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype == y.dtype
                and np.array_equal(x[i], y[i])):
            return False
    return True


def _borrow_pad_token(tok) -> None:
    """Some folders name no pad token (GPT-2): padding needs one, so borrow one the vocabulary has."""
    if tok.pad_token is None:
        vocab = tok.get_vocab()
        tok.pad_token = next(t for t in (tok.eos_token, tok.unk_token, tok.bos_token, "<pad>", "<|endoftext|>", "</s>")
                             if t is not None and t in vocab)


def measure_transformers(target: Target, sample: Sample, cfg: Config) -> dict | None:
    """CrayonTokenizer against the stock transformers tokenizer from the same folder."""
    if not cfg.transformers or not target.transformers:
        return None
    if not installed("transformers"):
        return {"status": "not installed"}
    import warnings

    loaded: dict[str, Any] = {}
    load_ms: dict[str, float] = {}
    for s in target.transformers:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                loaded[s.label] = _load(s.setup)
                load_ms[s.label] = 1e3 * (time.perf_counter() - start)
            _borrow_pad_token(loaded[s.label])
        except BaseException as e:  # noqa: BLE001 - a Rust panic (pyo3) is a BaseException
            _interrupts_pass(e)
            return {"status": f"{s.label} cannot load: {_short_error(e)}"}
    size = max(1, min(cfg.transformers_batch, len(sample.batch) // (cfg.reps + 1)))
    slices = [sample.batch[i * size: (i + 1) * size] for i in range(cfg.reps + 1)]
    slices = [s for s in slices if s]
    kwargs = dict(padding=True, truncation=True, max_length=cfg.max_length, return_tensors="np")
    labels = list(loaded)
    ref_label = next(s.label for s in target.transformers if s.role == "reference")
    for label in labels:
        loaded[label](slices[0], **kwargs)  # warm-up, not timed
    times: dict[str, list[float]] = {label: [] for label in labels}
    same = rows = 0
    first = None
    for k, texts in enumerate(slices[1:] or slices):
        results = {}
        for label in _rotated(labels, k):
            seconds, results[label] = _timed(lambda: loaded[label](texts, **kwargs))
            times[label].append(seconds)
        ref = results[ref_label]
        for label in labels:
            if label == ref_label:
                continue
            for i in range(len(texts)):
                ok = _same_row(dict(ref), dict(results[label]), i)
                same += ok
                rows += 1
                if not ok and first is None:
                    first = {"row": i, "text": texts[i][:200]}
    out: dict = {"call": f"tok(texts, padding=True, truncation=True, max_length={cfg.max_length}, return_tensors='np')",
                 "batch_docs": size, "passes": len(times[ref_label]), "load_ms_in_process": load_ms,
                 "class": type(loaded[ref_label]).__name__, "libraries": {}}
    for label in labels:
        entry: dict = {"ms": _spread([1e3 * t for t in times[label]])}
        if label != ref_label:
            entry["parity"] = same / max(1, rows)
            entry["mismatch"] = first
        out["libraries"][label] = entry
    return out


# ------------------------------------------------------------------------ fresh interpreters

_CHILD_HEAD = """\
import json, sys, time
_t0 = time.perf_counter()
"""
_CHILD_TAIL = """
_out = {"load_ms": 1e3 * (time.perf_counter() - _t0)}
def _rss_mib():
    # Linux: VmHWM, the peak RSS of this program (ru_maxrss would also count the parent's pages
    # from before exec). Elsewhere ru_maxrss, in bytes on macOS.
    try:
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        pass
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024
_out["rss_load_mib"] = _rss_mib()
if len(sys.argv) > 2:
    _encode = eval("lambda tok, d: " + sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as _f:
        for _d in json.load(_f):
            _encode(tok, _d)
    _out["rss_peak_mib"] = _rss_mib()
print("CRAYON-BENCH " + json.dumps(_out))
"""


def fresh_process(setup: str, encode: str | None = None, docs_file: str | None = None, timeout: float = 600) -> dict:
    """Runs `setup` in a fresh interpreter: import + load time, max RSS after loading and (with
    `docs_file`) after encoding its documents."""
    argv = [sys.executable, "-c", _CHILD_HEAD + setup + "\n" + _CHILD_TAIL]
    if encode and docs_file:
        argv += [encode, docs_file]
    # The child imports the crayon_hf this process runs (a checkout, not another installed copy).
    here = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=tempfile.gettempdir(), env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("CRAYON-BENCH "):
            return json.loads(line[len("CRAYON-BENCH "):])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    raise BenchError(f"fresh interpreter failed (exit {proc.returncode}): {tail}")


def measure_cold(runners: list[Runner], target: Target, sample: Sample | None, cfg: Config) -> dict[str, dict]:
    """Cold load of every library (and of the transformers face), peak memory of every library."""
    out: dict[str, dict] = {}
    if cfg.cold_reps <= 0:
        return out
    with tempfile.TemporaryDirectory() as tmp:
        docs_file = None
        if cfg.memory and sample is not None:
            docs_file = str(Path(tmp) / "docs.json")
            Path(docs_file).write_text(json.dumps(sample.single), encoding="utf-8")
        jobs = [(r.label, r.subject.setup, r.subject.api.encode, cfg.cold_reps) for r in runners]
        if cfg.transformers and installed("transformers"):
            reps = min(cfg.cold_reps, cfg.transformers_cold_reps)
            jobs += [(f"{s.label} (transformers)", s.setup, None, reps) for s in target.transformers if reps > 0]
        for label, setup, encode, reps in jobs:
            runs, entry = [], {}
            try:
                for k in range(reps):
                    res = fresh_process(setup, encode if k == 0 else None, docs_file if k == 0 else None)
                    runs.append(res["load_ms"])
                    if k == 0:
                        entry["rss_load_mib"] = res.get("rss_load_mib")
                        if "rss_peak_mib" in res:
                            entry["rss_peak_mib"] = res["rss_peak_mib"]
            except (BenchError, subprocess.TimeoutExpired) as e:
                out[label] = {"status": f"cold load failed: {_short_error(e)}"}
                continue
            entry["cold_load_ms"] = _spread(runs)
            out[label] = entry
    return out


# ------------------------------------------------------------------------------------- target


def run_target(target: Target, samples: list[Sample], cfg: Config) -> dict:
    """Every measure of one target over the given corpus samples."""
    log = cfg.log
    runners, status = load_subjects(target, log)
    others = ", ".join(f"{k} ({v['status']})" for k, v in status.items() if v["status"] != "ok")
    log(f"{target.name}: {', '.join(r.label for r in runners)}" + (f"; skipped: {others}" if others else ""))
    result: dict = {"target": target.name, "family": target.family, "source": target.source,
                    "backend": target.backend, "libraries": status, "corpora": {}}
    source_file = Path(target.source)
    if source_file.is_dir():
        source_file = source_file / "tokenizer.json"
    result["source_bytes"] = source_file.stat().st_size if source_file.is_file() else None
    result["cartridge_bytes"] = os.path.getsize(target.cartridge) if target.cartridge else None
    ref_label = _reference(runners).label
    for sample in samples:
        row = measure_corpus(runners, sample, cfg)
        result["corpora"][sample.name] = row
        libs = row["libraries"]
        ref_speed = libs[ref_label]["encode_mib_s"]["median"]
        parts = []
        for label, e in libs.items():
            if "encode_mib_s" not in e:
                parts.append(f"{label} {e.get('status')}")
                continue
            p = f" {100 * e['parity']:.1f}%" if "parity" in e else ""
            parts.append(f"{label} {e['encode_mib_s']['median']:.1f}{p}")
        crayon = libs.get("crayon-hf", {}).get("encode_mib_s", {}).get("median", 0.0)
        log(f"  {sample.name:28s} MiB/s: {'  '.join(parts)}  -> {crayon / ref_speed:.1f}x {ref_label}")
    for r in runners:
        if r.failure:
            status[r.label]["status"] = r.failure
    batch_sample = next((s for s in samples if s.name == cfg.batch_corpus), samples[0])
    result["batch"] = measure_batch(runners, batch_sample, cfg)
    b = result["batch"]["libraries"]
    log(f"  batch ({result['batch']['docs']} docs of {batch_sample.name}, {cfg.threads} threads) MiB/s: "
        + "  ".join(f"{k} {v['encode_mib_s']['median']:.1f}" for k, v in b.items()))
    result["transformers"] = measure_transformers(target, batch_sample, cfg)
    tf = result["transformers"]
    if tf and "libraries" in tf:
        log("  transformers call, ms: " + "  ".join(f"{k} {v['ms']['median']:.1f}" for k, v in tf["libraries"].items()))
    result["cold"] = measure_cold(runners, target, samples[0], cfg)
    if result["cold"]:
        log("  cold load ms / peak RSS MiB: " + "  ".join(
            f"{k} {v['cold_load_ms']['median']:.0f}" + (f"/{v['rss_peak_mib']:.0f}" if v.get("rss_peak_mib") else "")
            if "cold_load_ms" in v
            else f"{k} {v['status']}" for k, v in result["cold"].items()))
    return result
