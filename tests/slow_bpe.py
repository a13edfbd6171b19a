"""A slow, readable byte-level BPE: the oracle for inputs too large for the references.

    text --regex (the `regex` module, same pat_str)--> pre-tokens --UTF-8--> bytes
         --rank merge per pre-token--> ids

Merging: the lowest-ranked adjacent pair is merged first (ties: leftmost), which is tiktoken's rule.
Pieces live in a doubly linked list; candidate pairs sit in a heap keyed by (rank, position), and a
popped entry is ignored when either side has since changed (lazy deletion). Each merge pushes at
most two pairs, so a pre-token of n bytes costs O(n log n), even when it is a 10 MB run of 'a'
(where tiktoken's own loop is quadratic).
"""

from __future__ import annotations

import heapq
from typing import Any

import regex


class SlowBPE:
    def __init__(self, pat_str: str, mergeable_ranks: dict[bytes, int]) -> None:
        self.pattern = regex.compile(pat_str)
        self.ranks = mergeable_ranks

    @classmethod
    def from_encoding(cls, enc: Any) -> SlowBPE:
        """From a real tiktoken Encoding (its private fields are the inputs it was built from)."""
        return cls(enc._pat_str, enc._mergeable_ranks)

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for m in self.pattern.finditer(text):
            piece = m.group().encode("utf-8")
            rank = self.ranks.get(piece)
            out.extend([rank] if rank is not None else self._merge(piece))
        return out

    def _merge(self, piece: bytes) -> list[int]:
        n = len(piece)
        start = list(range(n))  # piece k covers piece[start[k]:end[k]], alive while alive[k]
        end = list(range(1, n + 1))
        nxt = list(range(1, n + 1))
        prv = list(range(-1, n - 1))
        alive = [True] * n
        heap: list[tuple[int, int, int, int]] = []  # (rank, left index, left end, right end)

        def push(left: int) -> None:
            right = nxt[left]
            if right < n:
                rank = self.ranks.get(piece[start[left] : end[right]])
                if rank is not None:
                    heapq.heappush(heap, (rank, start[left], end[left], end[right]))

        for k in range(n - 1):
            push(k)
        while heap:
            rank, left, left_end, right_end = heapq.heappop(heap)
            right = nxt[left] if alive[left] else n
            # Stale when either piece has changed since the pair was pushed.
            if right >= n or end[left] != left_end or end[right] != right_end:
                continue
            end[left] = end[right]
            alive[right] = False
            nxt[left] = nxt[right]
            if nxt[left] < n:
                prv[nxt[left]] = left
            if prv[left] >= 0:
                push(prv[left])
            push(left)
        ids = []
        k = 0
        while k < n:
            ids.append(self.ranks[piece[start[k] : end[k]]])
            k = nxt[k]
        return ids
