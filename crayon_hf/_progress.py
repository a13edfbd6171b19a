"""Progress on stderr for long jobs (encode-corpus, train): tqdm when installed, else one
rewritten line at most twice a second. Byte counts show as a share of the total and MiB/s."""

from __future__ import annotations

import sys
import time
from typing import Any


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
