"""`encode-corpus --ray`: the same job on a Ray cluster, with the same result.

    driver   inputs -> files (directories and globs expanded, as a single-machine run does)
             files -> tasks: a plain-text file (one document) / a run of Parquet row groups /
                     a byte range of a JSONL file (the lines that start in it)
             tokenizer -> its cartridge's bytes in the object store
    worker   (one CPU per task) task -> the documents -> `corpus.encode_documents` -> a shard:
             a complete single-machine output (ids, index, sidecar) in the staging folder
             `.OUTPUT.tmp-<random>/` beside the output, committed by the shard's own renames
    driver   shards in task order -> OUTPUT, OUTPUT.idx.npy, OUTPUT.json, committed as a
             single-machine run commits them (byte-identical to its output), or, with `shards=True`,
             the staging folder plus `manifest.json` renamed to OUTPUT (one rename)

Why it is identical: a document's ids depend only on the document (the loop is the one a
single-machine run uses, per task), tasks never cut a document, and the driver writes the shards
in input order. Why it survives a killed worker: a task's only effect is its shard, which appears
under its final name only when complete; Ray reruns a task whose worker died (`max_retries`), and
the rerun writes the same shard. A task that fails on its input (invalid UTF-8, a malformed JSONL
line) is not retried: the run stops, names the file and line, removes the staging folder and
leaves nothing under the output name.

Workers must see the staging folder: on a cluster, write the output to a filesystem every node
mounts (NFS, Lustre, a FUSE-mounted bucket). The inputs are read by the workers with plain file
reads, so they must be on such a filesystem too. The tokenizer need not be: a worker without the
path maps the cartridge the driver put into the object store.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from crayon_hf import corpus
from crayon_hf._progress import Progress

_DEFAULT_TASK_BYTES = 64 << 20
_MIN_TASK_BYTES = 1 << 20


@dataclass(frozen=True)
class Task:
    """One unit of work: `kind` "text" (the whole file), "jsonl" (lines starting in bytes
    [start, stop)) or "parquet" (row groups [start, stop))."""

    index: int
    path: str
    kind: str
    start: int
    stop: int
    nbytes: int

    @property
    def shard(self) -> str:
        return f"shard-{self.index:06d}"


def plan_tasks(paths: list[str], task_bytes: int) -> list[Task]:
    """Tasks of about `task_bytes` input bytes each, in input order."""
    tasks: list[Task] = []
    for path in paths:
        kind, size = corpus.input_kind(path), os.path.getsize(path)
        if kind == "jsonl":
            for lo in range(0, max(size, 1), task_bytes):
                tasks.append(Task(len(tasks), path, kind, lo, min(lo + task_bytes, size), min(task_bytes, size - lo)))
        elif kind == "parquet":
            try:
                import pyarrow.parquet as pq
            except ImportError:
                raise ValueError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
            meta = pq.ParquetFile(path).metadata
            lo, acc = 0, 0
            for g in range(meta.num_row_groups):
                acc += meta.row_group(g).total_byte_size
                if acc >= task_bytes or g == meta.num_row_groups - 1:
                    tasks.append(Task(len(tasks), path, kind, lo, g + 1, acc))
                    lo, acc = g + 1, 0
            if meta.num_row_groups == 0:
                tasks.append(Task(len(tasks), path, kind, 0, 0, 0))
        else:
            tasks.append(Task(len(tasks), path, "text", 0, size, size))
    return tasks


def _task_documents(task: Task, field: str, read_bytes: int) -> Iterable[tuple[Any, int]]:
    if task.kind == "jsonl":
        return corpus._read_jsonl(task.path, field, task.start, task.stop)
    if task.kind == "parquet":
        return corpus._read_parquet(task.path, field, range(task.start, task.stop))
    return corpus._read_text(task.path, read_bytes)


# ------------------------------------------------------------------------------ the tokenizer


def _cartridge_bytes(tok: Any) -> bytes:
    path = getattr(tok, "cartridge_path", None) or getattr(tok, "_cartridge_path", None)
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    with tempfile.TemporaryDirectory() as d:
        tok.save_cartridge(os.path.join(d, "t.dat"))
        with open(os.path.join(d, "t.dat"), "rb") as f:
            return f.read()


_WORKER_TOKENIZERS: dict[Any, Any] = {}


def _worker_tokenizer(payload: tuple) -> Any:
    """The tokenizer on a worker: from its path when the worker has it (and shipping is not
    forced), else from the cartridge bytes in the object store, kept in a local file named by
    its hash so each worker process maps one copy. Cached per process."""
    spec, pattern, digest, holder, force_ship, specials_as_text = payload
    key = (spec, digest, force_ship, specials_as_text)
    if key in _WORKER_TOKENIZERS:
        return _WORKER_TOKENIZERS[key]
    from crayon_hf._resolve import BUNDLED, load_tokenizer

    if spec is not None and not force_ship and (os.path.exists(spec) or spec in BUNDLED):
        tok = load_tokenizer(spec, pattern=pattern)
    else:
        import ray

        folder = os.path.join(tempfile.gettempdir(), "crayon-hf-cartridges")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{digest}.dat")
        if not os.path.exists(path):
            tmp = corpus.temp_name(path)
            with open(tmp, "wb") as f:
                f.write(ray.get(holder[0]))
            os.replace(tmp, path)
        tok = load_tokenizer(path)
    if specials_as_text:  # the driver's tokenizer encodes special tokens' text as text
        tok.encode_special_tokens = True
    _WORKER_TOKENIZERS[key] = tok
    return tok


# --------------------------------------------------------------------------------- the worker


def _encode_task(task: Task, payload: tuple, settings: dict, staging: str) -> dict:
    """Runs on a worker: encodes one task into its shard and returns what the driver needs."""
    tok = _worker_tokenizer(payload)
    face = corpus._Face(tok, settings["threads"])
    fmt = settings["format"]
    shard = os.path.join(staging, task.shard + (".npy" if fmt == "npy" else ""))
    writer = corpus._CorpusWriter(shard, np.dtype(settings["dtype"]), fmt == "npy", settings["eos"], fmt == "megatron")
    bar = Progress("", None, False)
    try:
        corpus.encode_documents(_task_documents(task, settings["field"], settings["read_bytes"]), tok, face, writer,
                                bar, read_bytes=settings["read_bytes"], block_chars=settings["block_chars"])
        kill = settings.get("_kill")
        if kill is not None and kill[0] == task.index and not os.path.exists(kill[1]):
            # Test hook: the worker dies mid-task (shard written, not committed), once.
            open(kill[1], "w").close()
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        summary = corpus.summary_of(settings["spec"], face, fmt, writer, settings["append_eos"], settings["eos"],
                                    settings["eos_name"], settings["field"], [task.path])
        summary["part"] = {"kind": task.kind, "start": task.start, "stop": task.stop}
        writer.commit(summary)
    except BaseException:
        writer.abort()
        raise
    return {"index": task.index, "name": os.path.basename(shard), "n_tokens": writer.tokens.n,
            "n_docs": writer.n_docs, "pid": os.getpid(), "module": corpus.__file__}


# --------------------------------------------------------------------------------- the driver


def _connect(address: str | None, num_cpus: int | None) -> bool:
    """Connects to Ray; True when this call started (or joined) it and must shut it down."""
    try:
        import ray
    except ImportError:
        raise ValueError("--ray needs Ray: pip install 'crayon-hf[ray]' (or 'ray[data]')") from None
    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=True)
    else:  # a local Ray for this run, on loopback; only the cartridge travels through the object store
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, object_store_memory=256 << 20,
                 _node_ip_address="127.0.0.1")
    return True


def _task_error(e: BaseException, task: Task, labels: dict[str, str]) -> BaseException:
    """The exception a task raised, as the single-machine run would raise it (the file named as
    the user gave it); a worker that died more often than max_retries is a RuntimeError."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, ValueError):
        message = str(cause)
        if message.startswith(task.path):
            message = labels.get(task.path, task.path) + message[len(task.path):]
        return ValueError(message)
    if isinstance(cause, (OSError, KeyboardInterrupt)):
        return cause
    return RuntimeError(f"encode-corpus --ray: task {task.index} ({task.path}) failed: {e}")


def encode_corpus_ray(
    inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    tokenizer: Any,
    *,
    address: str | None = None,
    shards: bool = False,
    format: str = "uint32",
    append_eos: bool = False,
    eos_token: str | None = None,
    jsonl_field: str = "text",
    progress: bool = True,
    pattern: str | None = None,
    task_bytes: int | None = None,
    cpus_per_task: int = 1,
    num_cpus: int | None = None,
    max_retries: int = 3,
    ship_tokenizer: str = "auto",
    _kill: tuple[int, str] | None = None,
) -> dict:
    """`encode_corpus` on a Ray cluster (see the module docstring). Same arguments and output
    (paths only: the documents must be files the workers can read), plus: `address` (Ray's; None:
    the Ray this process already joined, else a local Ray started for the run with `num_cpus`),
    `shards` (a folder of shards with a manifest instead of one array; `open_corpus` reads both),
    `task_bytes` (input bytes per task; default: the input split four ways per CPU, between 1 and
    64 MiB), `cpus_per_task` (CPUs a task reserves and encoding threads it runs),
    `max_retries` (reruns of a task whose worker died), `ship_tokenizer` ("auto": workers load the
    tokenizer's path when they have it, else the cartridge from the object store; "always": the
    object store only)."""
    start = time.perf_counter()
    if format not in corpus.FORMATS:
        raise ValueError(f"unknown format {format!r}: use uint16, uint32, npy or megatron")
    if eos_token is not None and not append_eos:
        raise ValueError("--eos-token is the token --append-eos appends; pass --append-eos too")
    if ship_tokenizer not in ("auto", "always"):
        raise ValueError(f"ship_tokenizer={ship_tokenizer!r}: use 'auto' or 'always'")
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    paths: list[str] = []  # as given: the sidecar's "inputs", as a single-machine run writes them
    for item in inputs:
        if not isinstance(item, (str, os.PathLike)):
            raise ValueError("--ray reads files: pass paths (for documents in memory, use ray.data and "
                             "crayon_hf.TokenizeBatch)")
        paths.extend(corpus.expand_paths(os.fspath(item)))
    if not paths:
        raise ValueError("no inputs")
    output = os.fspath(output)
    if shards and os.path.exists(output) and not os.path.exists(os.path.join(output, corpus.MANIFEST)):
        raise ValueError(f"{output}: exists and is not a sharded encode-corpus output; remove it or choose another name")
    spec = os.fspath(tokenizer) if isinstance(tokenizer, (str, os.PathLike)) else None
    if spec is not None:
        from crayon_hf._resolve import load_tokenizer

        tok = load_tokenizer(spec, pattern=pattern)
    else:
        tok = tokenizer
    face = corpus._Face(tok, cpus_per_task)
    eos, eos_name = face.eos(eos_token) if append_eos else (None, None)
    dtype = corpus.output_dtype(face, format)
    read_bytes = corpus._READ_BYTES

    total = sum(os.path.getsize(p) for p in paths)
    started = _connect(address, num_cpus)
    import ray

    try:
        cpus = max(int(ray.cluster_resources().get("CPU", 1)), 1)
        if task_bytes is None:
            task_bytes = min(_DEFAULT_TASK_BYTES, max(_MIN_TASK_BYTES, total // (4 * cpus) + 1))
        # Workers get absolute paths: their working directory is not the driver's.
        tasks = plan_tasks([os.path.abspath(p) for p in paths], task_bytes)
        labels = {os.path.abspath(p): p for p in paths}
        data = _cartridge_bytes(tok)
        local_spec = os.path.abspath(spec) if spec is not None and os.path.exists(spec) else spec
        payload = (local_spec if ship_tokenizer == "auto" else None, pattern, hashlib.sha256(data).hexdigest()[:32],
                   [ray.put(data)], ship_tokenizer == "always", bool(getattr(tok, "_encode_special_tokens", False)))
        settings = {"format": format, "dtype": dtype.str, "eos": eos, "eos_name": eos_name, "append_eos": append_eos,
                    "field": jsonl_field, "spec": spec, "threads": cpus_per_task, "read_bytes": read_bytes,
                    "block_chars": min(1 << 18, max(1 << 16, read_bytes // (2 * cpus_per_task))), "_kill": _kill}
        corpus.clean_stale_temps(output)
        staging = corpus.temp_name(os.path.abspath(output))
        os.makedirs(staging)
        lock = os.open(os.path.join(staging, ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        corpus._lock(lock)
        bar = Progress("encode-corpus --ray", total, progress, unit="B")
        try:
            results = _run(ray, tasks, payload, settings, staging, bar, cpus_per_task, max_retries, labels)
            if shards:
                summary = _commit_shards(output, staging, lock, results, spec, face, format, dtype, append_eos, eos,
                                         eos_name, jsonl_field, paths)
            else:
                summary = _concatenate(output, staging, results, spec, face, format, dtype, append_eos, eos, eos_name,
                                       jsonl_field, paths)
        finally:
            bar.close()
            os.close(lock)
            for _ in range(5):  # a worker being killed may still add a file while the tree goes
                shutil.rmtree(staging, ignore_errors=True)
                if not os.path.exists(staging):
                    break
                time.sleep(0.2)
    finally:
        if started:
            ray.shutdown()
    return {**summary, "output": output, "input_bytes": total, "seconds": time.perf_counter() - start,
            "tasks": len(tasks), "cluster_cpus": cpus, "worker_modules": sorted({r["module"] for r in results})}


def _run(ray: Any, tasks: list[Task], payload: tuple, settings: dict, staging: str, bar: Progress,
         cpus_per_task: int, max_retries: int, labels: dict[str, str]) -> list[dict]:
    remote = ray.remote(_encode_task).options(num_cpus=cpus_per_task, max_retries=max_retries, retry_exceptions=False)
    pending = {remote.remote(task, payload, settings, staging): task for task in tasks}
    results: list[dict | None] = [None] * len(tasks)
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in done:
                task = pending.pop(ref)
                try:
                    results[task.index] = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - re-raised as what it was, with the place named
                    raise _task_error(e, task, labels) from None
                bar.update(task.nbytes)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        # Cancelling is asynchronous: wait until those tasks have ended, so none writes into the
        # staging folder while the caller removes it.
        if pending:
            ray.wait(list(pending), num_returns=len(pending), timeout=60.0)
        raise
    return [r for r in results if r is not None]


def _concatenate(output: str, staging: str, results: list[dict], spec: Any, face: Any, format: str, dtype: np.dtype,
                 append_eos: bool, eos: int | None, eos_name: str | None, field: str, paths: list[str]) -> dict:
    """The shards, in order, into one output committed as a single-machine run commits it."""
    writer = corpus._CorpusWriter(output, dtype, format == "npy", None, format == "megatron")
    chunk = 16 << 20
    try:
        for r in results:
            shard = corpus.open_corpus(os.path.join(staging, r["name"]))
            base = writer.tokens.n
            for lo in range(0, shard.n_tokens, chunk):
                writer.tokens.append(np.asarray(shard.ids[lo:lo + chunk]))
            writer.index.append(np.asarray(shard.index[1:]) + base)
            del shard
        summary = corpus.summary_of(spec, face, format, writer, append_eos, eos, eos_name, field, paths)
        writer.commit(summary)
    except BaseException:
        writer.abort()
        raise
    return summary


def _commit_shards(output: str, staging: str, lock: int, results: list[dict], spec: Any, face: Any, format: str,
                   dtype: np.dtype, append_eos: bool, eos: int | None, eos_name: str | None, field: str,
                   paths: list[str]) -> dict:
    """The staging folder becomes OUTPUT: manifest written and fsynced, leftovers of killed
    attempts removed, then one rename (an earlier sharded output is moved aside first)."""
    import json

    for name in os.listdir(staging):
        if corpus._TMP_MARK in name:
            os.unlink(os.path.join(staging, name))
    summary = {
        "tokenizer": spec if spec is not None else face.name, "format": format, "dtype": dtype.str,
        "n_tokens": sum(r["n_tokens"] for r in results), "n_docs": sum(r["n_docs"] for r in results),
        "append_eos": append_eos, "eos_id": eos, "eos_token": eos_name, "jsonl_field": field, "inputs": paths,
        "layout": "shards", "shards": [{"name": r["name"], "n_tokens": r["n_tokens"], "n_docs": r["n_docs"]}
                                       for r in results],
        "crayon_hf_version": corpus.__version__,
    }
    with open(os.path.join(staging, corpus.MANIFEST), "wb") as f:
        f.write(json.dumps(summary, indent=2).encode("utf-8") + b"\n")
        f.flush()
        os.fsync(f.fileno())
    os.unlink(os.path.join(staging, ".lock"))
    aside = None
    if os.path.exists(output):
        aside = corpus.temp_name(output)
        os.rename(output, aside)
    os.rename(staging, output)
    corpus._fsync_dir(output)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
    return summary
