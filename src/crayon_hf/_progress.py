"""Progress on stderr for long jobs (encode-corpus, train): tqdm when installed, else one
rewritten line at most twice a second. Byte counts show as a share of the total and MiB/s.
First-ever compiles of a vocabulary that take over a second say so (compile_progress)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any, Iterator


def _log(message: str, *args: Any) -> None:
    """An INFO record on the package logger (logging is imported here, off the first load's path)."""
    import logging

    logging.getLogger("crayon_hf").info(message, *args)


class Progress:
    def __init__(self, desc: str, total: int | None, enabled: bool, unit: str = "it") -> None:
        self.desc, self.total, self.unit, self.enabled = desc, total or None, unit, enabled
        self.done = 0
        self._bar: Any = None
        self._start = time.perf_counter()
        self._shown = 0.0
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        scaled = {"unit_scale": True, "unit_divisor": 1024} if unit == "B" else {}
        self._bar = tqdm(total=self.total, desc=desc, unit=unit, file=sys.stderr, mininterval=0.5, **scaled)

    def update(self, n: int) -> None:
        """n more done."""
        if n > 0:
            self.update_to(self.done + n)

    def update_to(self, done: int) -> None:
        """done in all."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(done - self.done)
            self.done = done
            return
        self.done = done
        now = time.perf_counter()
        if now - self._shown >= 0.5:
            self._shown = now
            self._line(now, end="")

    def _line(self, now: float, end: str) -> None:
        if self.unit == "B":
            rate = self.done / max(now - self._start, 1e-9) / (1 << 20)
            share = f"{100 * self.done / self.total:5.1f}% " if self.total else f"{self.done / (1 << 20):,.0f} MiB "
            text = f"{share}{rate:7.1f} MiB/s"
        else:
            text = f"{self.done}/{self.total}" if self.total else f"{self.done}"
        print(f"\r{self.desc}: {text}", end=end, file=sys.stderr, flush=True)

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        else:
            self._line(time.perf_counter(), end="\n")


@contextlib.contextmanager
def compile_progress(what: str, after: float = 1.0) -> Iterator[None]:
    """Shows that a first-ever compile is running when it takes longer than `after` seconds: an
    INFO record on the package logger ("crayon_hf") and, when tqdm is installed and stderr is a
    terminal, a bar counting seconds until it ends. Quick compiles (and cached loads) show nothing."""
    done = threading.Event()
    start = time.perf_counter()
    shown: list[Any] = []

    def watch() -> None:
        if done.wait(after):
            return
        _log("crayon-hf: %s (first load; the cartridge is cached afterwards)", what)
        if not sys.stderr.isatty():
            return  # a log file gets the logger's records, not a bar redrawn twice a second
        try:
            from tqdm import tqdm
        except ImportError:
            return
        bar = tqdm(desc=f"crayon-hf: {what}", unit="s", file=sys.stderr, bar_format="{desc}: {elapsed}")
        shown.append(bar)
        while not done.wait(0.5):
            bar.refresh()

    watcher = threading.Thread(target=watch, name="crayon-hf compile progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        for bar in shown:
            bar.close()
        elapsed = time.perf_counter() - start
        if elapsed >= after:
            _log("crayon-hf: %s took %.1f s", what, elapsed)
