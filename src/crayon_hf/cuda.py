"""GPU batch encoding: the same ids as the CPU engine, from an NVIDIA GPU.

```
import crayon_hf.cuda
import crayon_hf.tiktoken as tiktoken

enc = tiktoken.get_encoding("cl100k_base")
if crayon_hf.cuda.is_available():
    ids, offsets = enc.encode_ordinary_batch_to_numpy(texts, device="cuda")   # numpy, as on the CPU
    ids, offsets = crayon_hf.cuda.encode_batch_to_device(enc, texts)          # stays on the GPU
    tokens = torch.from_dlpack(ids)                                            # no copy
else:
    print(crayon_hf.cuda.unavailable_reason())
```

How it works (docs/cuda.md): the CPU pre-tokenizes the batch into pieces on its threads, the GPU
encodes one piece per thread with the very per-piece encoder the CPU engine runs
(native/models/piece_encoder.h), pieces longer than `crayon_hf._crayon.device_piece_max` bytes
and the rare ones the GPU cannot decide alone go to the CPU engine meanwhile, and a scan and a
gather on the GPU make the flat ids and the document offsets. The vocabulary's tables are copied
to each GPU once per encoding.

The module `crayon_hf._crayon_cuda` is built when a CUDA compiler is found at install time
(CMake option ``CRAYON_CUDA=AUTO|ON|OFF``); importing crayon_hf never needs it or a driver.
"""

from __future__ import annotations

import ctypes.util
import os
import threading
import weakref
from typing import TYPE_CHECKING, AbstractSet, Any, Collection, Literal, Protocol

if TYPE_CHECKING:
    import numpy.typing as npt

    from crayon_hf.tiktoken import Encoding

__all__ = ["is_available", "unavailable_reason", "device_count", "encode_batch_to_device", "DeviceArray",
           "AUTO_MIN_BYTES"]

# device="auto" takes the GPU for batches of at least this many characters (and the CPU below).
# Measured on an H200 host with 16 cores (docs/cuda.md): the GPU is already ahead at 256 KiB and
# 1.8x ahead at 1 MiB; a slower GPU or more cores move the crossover up, so the default keeps a
# margin. CRAYON_CUDA_AUTO_MIN_BYTES overrides it.
AUTO_MIN_BYTES = int(os.environ.get("CRAYON_CUDA_AUTO_MIN_BYTES", 1 << 20))


class DeviceArray(Protocol):
    """A 1-D array in GPU memory (what `encode_batch_to_device` returns): ``torch.from_dlpack``,
    ``cupy.from_dlpack`` and ``jax.dlpack.from_dlpack`` take it without a copy."""

    shape: tuple[int]
    device: str

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    def __len__(self) -> int: ...
    def numpy(self) -> npt.NDArray[Any]:
        """A host copy."""
        ...


_module: Any = None
_why: str | None = None
_probed = False
_lock = threading.Lock()


def _probe() -> Any:
    """The CUDA module when it is built and a device answers, else None (reason in _why)."""
    global _module, _why, _probed
    with _lock:
        if not _probed:
            _probed = True
            try:
                from crayon_hf import _crayon_cuda  # type: ignore[attr-defined]
            except ImportError as e:
                _why = (f"crayon-hf was built without its CUDA module ({e}); reinstall with a CUDA "
                        "toolkit on PATH (nvcc), or with CMAKE_ARGS=-DCRAYON_CUDA=ON to make that an error")
            else:
                count, reason = _crayon_cuda.device_count()
                if count > 0:
                    _module = _crayon_cuda
                elif ctypes.util.find_library("cuda") is None and not os.path.exists("/dev/nvidiactl"):
                    _why = f"no NVIDIA driver on this machine (no libcuda, no /dev/nvidiactl; the runtime says: {reason})"
                else:
                    _why = f"no usable CUDA device: {reason}"
    return _module


def is_available() -> bool:
    """True when the CUDA module is built and at least one GPU and driver answer."""
    return _probe() is not None


def unavailable_reason() -> str | None:
    """Why `is_available()` is False (the build, the driver, no device), or None when it is True."""
    _probe()
    return _why


def device_count() -> int:
    """How many CUDA devices the engine can use (0 when unavailable)."""
    module = _probe()
    return module.device_count()[0] if module is not None else 0


def resolve_device(device: str, batch_bytes: int) -> int | None:
    """The CUDA device index a batch call runs on, or None for the CPU.

    ``"cpu"``; ``"cuda"`` (device 0) or ``"cuda:N"``, which raise RuntimeError when no GPU is
    usable; ``"auto"``: the GPU when one is usable and the batch holds at least `AUTO_MIN_BYTES`."""
    if device == "cpu":
        return None
    if device == "auto":
        return 0 if batch_bytes >= AUTO_MIN_BYTES and is_available() else None
    if device == "cuda" or device.startswith("cuda:"):
        index = 0
        if device != "cuda":
            try:
                index = int(device[5:])
            except ValueError:
                raise ValueError(f"device {device!r}: expected 'cuda:N' with N a device number") from None
        if not is_available():
            raise RuntimeError(f"device {device!r} is not available: {unavailable_reason()}")
        count = device_count()
        if not 0 <= index < count:
            raise ValueError(f"device {device!r}: this machine has {count} CUDA device(s)")
        return index
    raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', not {device!r}")


# One DeviceEngine (the tables on one GPU, its pinned buffers) per (face object, device), freed
# with the face object; a lock per engine, since a batch is staged in the engine's buffers.
_ENGINES: weakref.WeakKeyDictionary[Any, dict[int, tuple[Any, threading.Lock]]] = weakref.WeakKeyDictionary()


def _device_engine(owner: Any, core: Any, index: int) -> tuple[Any, threading.Lock]:
    with _lock:
        per_device = _ENGINES.setdefault(owner, {})
        entry = per_device.get(index)
        if entry is None:
            entry = per_device[index] = (_module.DeviceEngine(core.piece_tables(), index), threading.Lock())
        return entry


# One GPU call takes less than 4 GiB of text (32-bit offsets); numpy-bound batches beyond are cut
# into calls of at most this many characters (a UTF-8 character is at most 4 bytes).
_CALL_CHARS = (1 << 30) - 1


def encode_pieces(owner: Any, core: Any, texts: list[str], allowed: bytes, disallowed: bytes, ordinary: bool,
                  num_threads: int, index: int, to_host: bool, mark: Any = None) -> tuple[Any, ...]:
    """One batch through the GPU: (ids, offsets, stats), or (text index, special index) when a
    text holds a disallowed special token (as the engine's encode_batch reports it). `owner` keys
    the tables' cache (the face object), `core` is its native TiktokenEngine. `mark(alloc)`, when
    given, marks the batch instead of ``core.mark_batch`` (the tokenizers face's pre-tokenizer)."""
    if mark is None:
        def mark(alloc: Any) -> Any:
            return core.mark_batch(texts, allowed, disallowed, num_threads, ordinary, alloc)
    elif batch_bytes(texts) > _CALL_CHARS:
        raise ValueError("a GPU call of the tokenizers face takes less than 1 Gi characters; split the batch")
    if batch_bytes(texts) > _CALL_CHARS:
        if not to_host:
            raise ValueError("encode_batch_to_device takes less than 1 Gi characters per call; split the batch")
        return _in_calls(owner, core, texts, allowed, disallowed, ordinary, num_threads, index)
    engine, lock = _device_engine(owner, core, index)
    with lock:
        # The CPU marks the pieces straight into the engine's pinned upload buffers. The views
        # serve the CPU's share of pieces during encode() and are dropped before it returns:
        # the engine reuses that memory for the copy back.
        staged: list[Any] = []

        def alloc(n_bytes: int) -> tuple[Any, Any]:
            staged[:] = engine.staging(n_bytes)
            return staged[0], staged[1]

        marked = mark(alloc)
        if len(marked) == 2:
            return marked
        n_bytes, doc_bytes, specials, timings = marked
        try:
            ids, offsets, stats = engine.encode(
                n_bytes, doc_bytes, specials, lambda starts, lens: core.encode_pieces(staged[0], starts, lens, num_threads),
                to_host)
        finally:
            staged.clear()
        stats.update(timings)
        return ids, offsets, stats


def _in_calls(owner: Any, core: Any, texts: list[str], allowed: bytes, disallowed: bytes, ordinary: bool,
              num_threads: int, index: int) -> tuple[Any, ...]:
    """A batch too large for one GPU call, in several: the arrays concatenated."""
    import numpy as np

    parts, start, size = [], 0, 0
    for i, t in enumerate(texts):
        if size + len(t) > _CALL_CHARS and i > start:
            parts.append((start, i))
            start, size = i, 0
        size += len(t)
    parts.append((start, len(texts)))
    ids, offsets, stats = [], [np.zeros(1, np.int64)], {}
    for a, b in parts:
        result = encode_pieces(owner, core, texts[a:b], allowed, disallowed, ordinary, num_threads, index, True)
        if len(result) == 2:
            return (result[0] + a, result[1])
        ids.append(result[0])
        offsets.append(result[1][1:] + offsets[-1][-1])
        stats = result[2]
    return np.concatenate(ids), np.concatenate(offsets), stats


def hf_raw_batch(tok: Any, index: int, texts: list[str], encode_special_tokens: bool, num_threads: int,
                 offsets: bool, limit: int) -> Any:
    """`tok._engine.encode_batch_raw(...)` (an HfBatch) with the ids from GPU `index`, for a
    `crayon_hf.Tokenizer` whose engine has a `piece_engine()`: the CPU marks the pieces and the
    added tokens, the GPU encodes the pieces to ranks, and the CPU maps ranks to ids and derives
    each token's offsets from its length (docs/cuda.md)."""
    engine = tok._engine
    core = engine.piece_engine()
    result = encode_pieces(engine, core, texts, b"", b"", True, num_threads, index, True,
                           mark=lambda alloc: engine.mark_batch(texts, encode_special_tokens, num_threads, alloc))
    ids, doc_offsets, stats = result
    return engine.raw_from_pieces(texts, stats.pop("marked"), ids, doc_offsets, num_threads, offsets, limit)


def encode_batch_to_device(
    encoding: Encoding,
    texts: list[str],
    *,
    device: str = "cuda",
    allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
    disallowed_special: Literal["all"] | Collection[str] = "all",
    num_threads: int = 0,
) -> tuple[DeviceArray, DeviceArray]:
    """Encodes a batch on a GPU and leaves the result there: ``(ids, offsets)`` as DLPack arrays
    (uint32 ids and int64 document offsets, text ``i`` being ``ids[offsets[i]:offsets[i + 1]]``),
    the same values `encode_batch_to_numpy` returns. For pipelines that feed a model on the same
    GPU: ``torch.from_dlpack(ids)`` makes a tensor without a copy. `encoding` is a
    `crayon_hf.tiktoken` Encoding; special tokens as in its `encode_batch`."""
    index = resolve_device(device, batch_bytes=1 << 62)
    if index is None:
        raise ValueError("encode_batch_to_device needs a CUDA device ('cuda' or 'cuda:N')")
    return encoding._encode_batch_on_device(texts, allowed_special, disallowed_special, num_threads, index,
                                            to_host=False)


def batch_bytes(texts: list[str]) -> int:
    """A batch's size as device="auto" weighs it (characters, a lower bound of its UTF-8 bytes)."""
    return sum(map(len, texts))

