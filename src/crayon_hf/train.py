"""Byte-level BPE training with the merges and vocabulary of ``tokenizers``' BpeTrainer.

``train_bpe(files_or_iterator, vocab_size, special_tokens=[...])`` with its defaults reproduces::

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=V, special_tokens=S, min_frequency=0,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train(files, trainer)          # or tok.train_from_iterator(iterator, trainer)

and returns a :class:`crayon_hf.Tokenizer` built from the same tokenizer.json ``tokenizers``
would save. Files are read line by line (each line, with its ``\\n``, is one sequence, as in
``train_from_files``); an iterator's strings are one sequence each (``train_from_iterator``).
Counting runs natively on all cores over 4 MiB blocks, so memory follows the number of distinct
words, not the corpus size. The merge loop is native too (``native/train/bpe_trainer.h``);
:func:`reference_merges` below is its slow, readable twin used by the tests.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from crayon_hf._progress import Progress

if TYPE_CHECKING:
    from crayon_hf.tokenizer import Tokenizer

__all__ = ["train_bpe", "byte_level_alphabet", "reference_merges", "GPT2_PATTERN"]

# The pattern ByteLevel(use_regex=True) splits with (tokenizers' pre_tokenizers/byte_level.rs).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

_BLOCK = 4 << 20  # bytes read per file block
_BATCH_CHARS = 4 << 20  # characters of iterator input per native call


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> character table (printable Latin-1 bytes stay, the rest go to U+0100..)."""
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def byte_level_alphabet() -> list[str]:
    """The 256 characters of the byte-level alphabet (``pre_tokenizers.ByteLevel.alphabet()``)."""
    return sorted(_bytes_to_unicode().values())


def _count_files(counter: Any, paths: Sequence[str], threads: int, progress: bool) -> None:
    total = sum(os.path.getsize(p) for p in paths)
    bar = Progress("Pre-processing files", total, progress, unit="B")
    done = 0
    for path in paths:
        with open(path, "rb") as f:
            tail = b""
            while True:
                block = f.read(_BLOCK)
                if not block:
                    break
                done += len(block)
                block = tail + block
                cut = block.rfind(b"\n") + 1  # sequences are whole lines
                tail = block[cut:]
                _add_lines(counter, block[:cut], path, threads)
                bar.update_to(done)
            _add_lines(counter, tail, path, threads)  # a last line without '\n'
    bar.close()


def _add_lines(counter: Any, text: bytes, path: str, threads: int) -> None:
    if not text:
        return
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not valid UTF-8 ({e.reason} at a byte of a block); tokenizers refuses "
                         "such files too -- re-encode the file as UTF-8") from None
    counter.add_lines(text, threads)


def _count_iterator(counter: Any, items: Iterable[Any], threads: int, progress: bool) -> None:
    bar = Progress("Pre-processing sequences", None, progress)
    batch: list[str] = []
    chars = seen = 0
    for item in items:
        if isinstance(item, str):
            batch.append(item)
            chars += len(item)
            seen += 1
        elif isinstance(item, (list, tuple)):
            batch.extend(item)
            chars += sum(len(s) if isinstance(s, str) else 0 for s in item)
            seen += len(item)
        else:
            raise TypeError(f"train_bpe: the iterator must yield str or lists of str, got {type(item).__name__}")
        if chars >= _BATCH_CHARS:
            counter.add_sequences(batch, threads)
            bar.update_to(seen)
            batch, chars = [], 0
    if batch:
        counter.add_sequences(batch, threads)
    bar.update_to(seen)
    bar.close()


def _tokenizer_json(vocab: list[str], merges: list[tuple[int, int]], special_tokens: Sequence[str],
                    prefix: str | None, suffix: str | None) -> str:
    """The document ``tokenizers`` saves for this setup (same keys, same order); compact, since
    json's C encoder only runs without indent (Tokenizer.save pretty-prints it like tokenizers)."""
    added, seen = [], set()
    for s in special_tokens:
        if s in seen:
            continue
        seen.add(s)
        added.append({"id": vocab.index(s),
                      "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True})
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": prefix,
            "end_of_word_suffix": suffix, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": {s: i for i, s in enumerate(vocab)},
            "merges": [[vocab[a], vocab[b]] for a, b in merges],
        },
    }
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def train_bpe(
    files_or_iterator: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Iterable[Any],
    vocab_size: int = 30000,
    special_tokens: Sequence[str] = (),
    *,
    min_frequency: int = 0,
    show_progress: bool = True,
    limit_alphabet: int | None = None,
    initial_alphabet: Sequence[str] | None = None,
    continuing_subword_prefix: str | None = None,
    end_of_word_suffix: str | None = None,
    max_token_length: int | None = None,
    byte_level: bool = True,
    pattern: str | None = None,
    threads: int = 0,
) -> Tokenizer:
    """Train a byte-level BPE tokenizer; returns a :class:`crayon_hf.Tokenizer`.

    Args:
        files_or_iterator: a path, a list of paths (read line by line, like ``tokenizer.train``),
            or an iterable of strings or of lists of strings (each string one sequence, like
            ``tokenizer.train_from_iterator``). A list of str is taken as paths.
        vocab_size: the size of the final vocabulary, special tokens and alphabet included
            (BpeTrainer's ``vocab_size``). Training stops earlier when no pair is left.
        special_tokens: added first, ids 0.. in this order, saved as special added tokens.
        min_frequency: stop when the most frequent pair occurs fewer times.
        show_progress: progress bars on stderr (tqdm when installed).
        limit_alphabet, initial_alphabet, continuing_subword_prefix, end_of_word_suffix,
        max_token_length: BpeTrainer's options of the same names. ``initial_alphabet`` defaults
            to the 256 byte-level characters, as in the setup above.
        byte_level: must be True (the ByteLevel pre-tokenizer and decoder; other pipelines are
            not implemented).
        pattern: must be None (the GPT-2 split of ByteLevel(use_regex=True)).
        threads: counting threads; 0 means all cores.
    """
    from ._native import native as core
    from .tokenizer import Tokenizer

    if not byte_level:
        raise ValueError("train_bpe: only byte_level=True is implemented (ByteLevel pre-tokenizer and decoder)")
    if pattern is not None and pattern != GPT2_PATTERN:
        raise ValueError("train_bpe: only the GPT-2 split pattern of ByteLevel(use_regex=True) is implemented; "
                         "leave pattern=None")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 0:
        raise ValueError(f"train_bpe: vocab_size must be a non-negative int, got {vocab_size!r}")
    if isinstance(min_frequency, bool) or not isinstance(min_frequency, int) or min_frequency < 0:
        raise ValueError(f"train_bpe: min_frequency must be a non-negative int, got {min_frequency!r}")
    for name, value in (("limit_alphabet", limit_alphabet), ("max_token_length", max_token_length)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(f"train_bpe: {name} must be None or a non-negative int, got {value!r}")
    if isinstance(special_tokens, str):
        raise TypeError("train_bpe: special_tokens must be a list of strings, not one string")
    specials = [str(s) for s in special_tokens]
    if any(not s for s in specials):
        raise ValueError("train_bpe: a special token is empty")
    alphabet = byte_level_alphabet() if initial_alphabet is None else list(initial_alphabet)
    # tokenizers keeps the first character of each initial_alphabet string and ignores empty ones.
    alphabet_cps = sorted({ord(s[0]) for s in alphabet if s})
    if any(0xD800 <= c <= 0xDFFF for c in alphabet_cps):
        raise ValueError("train_bpe: initial_alphabet holds a lone surrogate, which is not a character")

    counter = core.WordCounter(GPT2_PATTERN)
    source = files_or_iterator
    if isinstance(source, (str, os.PathLike)):
        source = [source]
    if isinstance(source, (list, tuple)) and source and all(isinstance(p, (str, os.PathLike)) for p in source):
        paths = [os.fspath(p) for p in source]
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(f"train_bpe: no such file: {missing[0]!r} (pass paths of text files, or an "
                                    "iterator of strings)")
        _count_files(counter, paths, threads, show_progress)
    else:
        _count_iterator(counter, source, threads, show_progress)

    bar = Progress("Compute merges", max(0, vocab_size), show_progress)
    vocab, merges, _steps = core.train_bpe_words(
        counter, True, vocab_size, min_frequency, specials, limit_alphabet, alphabet_cps,
        continuing_subword_prefix, end_of_word_suffix, max_token_length,
        (lambda done: bar.update_to(done)) if show_progress else None)
    bar.close()
    text = _tokenizer_json(vocab, merges, specials, continuing_subword_prefix, end_of_word_suffix)
    return Tokenizer.from_str(text)


def reference_merges(word_counts: dict[str, int], vocab_size: int, special_tokens: Sequence[str] = (),
                     min_frequency: int = 0, initial_alphabet: Sequence[str] = ()) -> tuple[list[str], list[tuple[str, str]]]:
    """Slow, readable BpeTrainer (no prefix/suffix/limits): the oracle the native loop is tested against.

    Words are strings of byte-level characters with their counts. Returns (vocab by id, merges in
    saved order). It mirrors tokenizers' loop: heap entries (count, pair, words), stale entries
    re-queued with the current count, the merged pair's own count left as it was, one entry per pair
    that gained occurrences in a merge, a pair merged twice saved once at its last rank.
    """
    import heapq

    vocab: list[str] = []
    ids: dict[str, int] = {}

    def add(s: str) -> int:
        if s not in ids:
            ids[s] = len(vocab)
            vocab.append(s)
        return ids[s]

    for s in special_tokens:
        add(s)
    for c in sorted({c for w in word_counts for c in w} | {a[0] for a in initial_alphabet if a}):
        add(c)
    items = sorted(word_counts.items())
    words = [[ids[c] for c in w] for w, _ in items]
    counts = [n for _, n in items]
    pair_counts: dict[tuple[int, int], int] = {}
    where: dict[tuple[int, int], set[int]] = {}
    for i, w in enumerate(words):
        for p in zip(w, w[1:]):
            pair_counts[p] = pair_counts.get(p, 0) + counts[i]
            where.setdefault(p, set()).add(i)
    heap: list[tuple[int, tuple[int, int], int, set[int]]] = []
    serial = 0  # keeps heapq from comparing sets

    def flush() -> None:
        nonlocal serial
        for p, pos in where.items():
            if pair_counts[p] > 0:
                heapq.heappush(heap, (-pair_counts[p], p, serial, pos))
                serial += 1
        where.clear()

    flush()
    merges: list[tuple[int, int]] = []
    while len(ids) < vocab_size and heap:
        neg, pair, _, pos = heapq.heappop(heap)
        if -neg != pair_counts[pair]:
            heapq.heappush(heap, (-pair_counts[pair], pair, serial, pos))
            serial += 1
            continue
        if -neg < 1 or min_frequency > -neg:
            break
        new = add(vocab[pair[0]] + vocab[pair[1]])
        merges.append(pair)
        for i in pos:
            w, out, k = words[i], [], 0
            while k < len(w):
                if k + 1 < len(w) and (w[k], w[k + 1]) == pair:
                    if out:
                        _bump(pair_counts, where, (out[-1], pair[0]), -counts[i], i)
                        _bump(pair_counts, where, (out[-1], new), counts[i], i)
                    if k + 2 < len(w):
                        _bump(pair_counts, where, (pair[1], w[k + 2]), -counts[i], i)
                        _bump(pair_counts, where, (new, w[k + 2]), counts[i], i)
                    out.append(new)
                    k += 2
                else:
                    out.append(w[k])
                    k += 1
            words[i] = out
        flush()
    last = {p: r for r, p in enumerate(merges)}
    saved = [p for r, p in enumerate(merges) if last[p] == r]
    return vocab, [(vocab[a], vocab[b]) for a, b in saved]


def _bump(pair_counts: dict[tuple[int, int], int], where: dict[tuple[int, int], set[int]],
          pair: tuple[int, int], delta: int, word: int) -> None:
    pair_counts[pair] = pair_counts.get(pair, 0) + delta
    if delta > 0:
        where.setdefault(pair, set()).add(word)


def _iter_lines(paths: Iterable[str]) -> Iterator[str]:
    """Lines with their endings, as train_from_files reads them (for tests)."""
    for p in paths:
        with open(p, "rb") as f:
            for line in f:  # binary lines end at b"\n" only, keeping it
                yield line.decode("utf-8")
