"""``Encoding``: tiktoken's public class, backed by a cartridge and the native engine.

Every public method keeps tiktoken 0.14's signature, defaults, results and errors. Policy (special
token checks, error texts, the lone-surrogate fix-up) lives here in Python, as in tiktoken; the
engine only encodes and decodes.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import warnings
from typing import TYPE_CHECKING, AbstractSet, Any, Collection, Iterable, Iterator, Literal, NoReturn, Sequence

from crayon_hf._native import native

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from crayon_hf.streaming import EncodeStream

_NATIVE = "native"


class Encoding:
    """A tiktoken encoding (``tiktoken.Encoding``'s API and results) on a cartridge.

    Get one with `get_encoding(name)` (bundled, offline), `Encoding.from_cartridge(path)`, or the
    constructor (a rank file's ``mergeable_ranks`` and a split pattern, as in tiktoken). Besides
    tiktoken's attributes (`name`, `max_token_value`, `n_vocab`, ...), ``crayon_backend`` is
    ``"native"``, or ``"fallback: ..."`` when the split pattern runs on the real tiktoken.

    ```
    >>> enc = get_encoding("cl100k_base")
    >>> enc.decode(enc.encode("hello world"))
    'hello world'
    ```
    """

    def __init__(
        self,
        name: str,
        *,
        pat_str: str,
        mergeable_ranks: dict[bytes, int],
        special_tokens: dict[str, int],
        explicit_n_vocab: int | None = None,
    ):
        """Creates an Encoding, exactly as ``tiktoken.Encoding`` does, compiling the ranks into an
        in-memory cartridge. ``save_cartridge`` writes it to disk; ``Encoding.from_cartridge`` maps
        it back in well under a millisecond."""
        from crayon_hf.conversion.tiktoken_rank import build_tiktoken_cartridge

        max_token_value = max(max(mergeable_ranks.values()), max(special_tokens.values(), default=0))
        if explicit_n_vocab:
            assert len(mergeable_ranks) + len(special_tokens) == explicit_n_vocab
            assert max_token_value == explicit_n_vocab - 1

        image = build_tiktoken_cartridge(
            name=name,
            pat_str=pat_str,
            mergeable_ranks=mergeable_ranks,
            special_tokens=special_tokens,
            explicit_n_vocab=explicit_n_vocab,
        )
        engine = native.TiktokenEngine.from_bytes(image, f"<in-memory {name!r}>")
        self._setup(engine, image=image, path=None)
        # The caller's own dicts, as tiktoken keeps them.
        self.__dict__["_mergeable_ranks"] = mergeable_ranks
        self.__dict__["_special_tokens"] = special_tokens

    @classmethod
    def from_cartridge(cls, path: str | os.PathLike[str], verify: bool = False) -> Encoding:
        """Maps a cartridge written by ``save_cartridge`` or ``crayon convert``.

        Loading reads the header, the section table and META only, whatever the vocabulary size;
        the checksum and the O(n_vocab) table checks run once, on first use (a damaged file
        raises ValueError there). ``verify=True`` runs them now instead."""
        path = os.fspath(path)
        engine = native.TiktokenEngine.from_file(path, verify)
        self = cls.__new__(cls)
        self._setup(engine, image=None, path=os.path.abspath(path))
        if verify:
            engine.ready()
        return self

    def _setup(self, engine: object, *, image: bytes | None, path: str | None) -> None:
        meta = json.loads(engine.meta_json or "{}")
        if meta.get("format") != "crayon-hf.tiktoken":
            raise ValueError(f"{path or 'cartridge'} is not a tiktoken-style cartridge")
        self._engine = engine
        self._image = image
        self._cartridge_path = path
        self.name = meta["name"]
        self._pat_str = meta["pat_str"]
        self._explicit_n_vocab = meta.get("explicit_n_vocab")
        self._empty_token = meta.get("empty_token")  # the rank of b"", when the ranks have one
        self.max_token_value = engine.n_ids - 1
        specials = engine.special_tokens()
        self._special_index = {text: i for i, (text, _) in enumerate(specials)}
        self._special_token_values = {token for _, token in specials}
        self._all_specials_mask = b"\x01" * len(specials)
        self._no_specials_mask = b"\x00" * len(specials)
        self._fallback = None
        if engine.pattern == "none":
            why = meta.get("native_refusal") or "this split pattern has no native scanner"
            self.crayon_backend = f"fallback: pat_str ({why}; encoding runs on tiktoken)"
            warnings.warn(f"crayon-hf: encoding {self.name!r}: {self.crayon_backend}", stacklevel=3)
            self._fallback = _tiktoken_twin(self)
        else:
            self.crayon_backend = _NATIVE

    def __repr__(self) -> str:
        return f"<Encoding {self.name!r}>"

    # ====================
    # Lazily built views
    # ====================

    @functools.cached_property
    def _mergeable_ranks(self) -> dict[bytes, int]:
        return self._engine.mergeable_ranks()

    @functools.cached_property
    def _special_tokens(self) -> dict[str, int]:
        return dict(self._engine.special_tokens())

    @functools.cached_property
    def special_tokens_set(self) -> set[str]:
        """The text of every special token."""
        return set(self._special_tokens.keys())

    # ====================
    # Encoding
    # ====================

    def encode_ordinary(self, text: str) -> list[int]:
        """Encodes a string into tokens, ignoring special tokens.

        This is equivalent to `encode(text, disallowed_special=())` (but slightly faster).

        ```
        >>> enc.encode_ordinary("hello world")
        [31373, 995]
        """
        if self._fallback is not None:
            return self._fallback.encode_ordinary(text)
        try:
            return self._engine.encode_ordinary(text)
        except UnicodeEncodeError:
            return self._engine.encode_ordinary(_fix_surrogates(text))

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[int]:
        """Encodes a string into tokens.

        Special tokens are encoded as such only when they are in ``allowed_special``; text that
        corresponds to a token in ``disallowed_special`` (by default every special token not
        allowed) raises ``ValueError``, exactly as in tiktoken.

        ```
        >>> enc.encode("hello world")
        [31373, 995]
        >>> enc.encode("<|endoftext|>", allowed_special="all")
        [50256]
        >>> enc.encode("<|endoftext|>", disallowed_special=())
        [27, 91, 437, 1659, 5239, 91, 29]
        ```
        """
        if self._fallback is not None:
            return self._fallback.encode(
                text, allowed_special=allowed_special, disallowed_special=disallowed_special
            )
        allowed_mask = self._check_special(text, allowed_special, disallowed_special)
        try:
            return self._engine.encode(text, allowed_mask)
        except UnicodeEncodeError:
            # tiktoken's fix-up for strings that are not valid UTF-8: surrogate pairs are joined,
            # lone surrogates become U+FFFD.
            return self._engine.encode(_fix_surrogates(text), allowed_mask)

    def encode_to_numpy(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> npt.NDArray[np.uint32]:
        """Encodes a string into tokens, returning a numpy array of uint32 (no Python list)."""
        if self._fallback is not None:
            return self._fallback.encode_to_numpy(
                text, allowed_special=allowed_special, disallowed_special=disallowed_special
            )
        allowed_mask = self._check_special(text, allowed_special, disallowed_special)
        return self._engine.encode_to_numpy(text, allowed_mask)

    def encode_ordinary_batch(self, text: list[str], *, num_threads: int = 8) -> list[list[int]]:
        """Encodes a list of strings into tokens, in parallel, ignoring special tokens.

        ```
        >>> enc.encode_ordinary_batch(["hello world", "goodbye world"])
        [[31373, 995], [11274, 16390, 995]]
        ```
        """
        if self._fallback is not None:
            return self._fallback.encode_ordinary_batch(text, num_threads=num_threads)
        return _surrogates_fixed(lambda texts: self._engine.encode_batch(texts, b"", b"", num_threads, True), text)

    def count(self, text: str) -> int:
        """``len(encode_ordinary(text))``, without building the list: the token count that context
        budgets and RAG chunkers need (special-token text counts as ordinary text).

        ```
        >>> enc.count("hello world")
        2
        ```
        """
        if self._fallback is not None:
            return len(self._fallback.encode_ordinary(text))
        try:
            return int(self._engine.count_ordinary(text))
        except UnicodeEncodeError:
            return int(self._engine.count_ordinary(_fix_surrogates(text)))

    def count_batch(self, text: Sequence[str], *, num_threads: int = 8) -> list[int]:
        """`count` of every text, in parallel (native threads, GIL released), without id lists.

        ```
        >>> enc.count_batch(["hello world", "goodbye world"])
        [2, 3]
        ```
        """
        if self._fallback is not None:
            return [len(ids) for ids in self._fallback.encode_ordinary_batch(list(text), num_threads=num_threads)]
        counts = _surrogates_fixed(lambda texts: self._engine.count_ordinary_batch(texts, num_threads), text)
        return counts.tolist()  # type: ignore[no-any-return]

    def encode_batch(
        self,
        text: list[str],
        *,
        num_threads: int = 8,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[list[int]]:
        """Encodes a list of strings into tokens, in parallel (native threads, GIL released).

        See `encode` for `allowed_special` and `disallowed_special`.
        """
        if self._fallback is not None:
            return self._fallback.encode_batch(
                text,
                num_threads=num_threads,
                allowed_special=allowed_special,
                disallowed_special=disallowed_special,
            )
        texts = list(text)
        allowed_mask, deny_mask = self._batch_masks(texts, allowed_special, disallowed_special)
        try:
            result = self._engine.encode_batch(texts, allowed_mask, deny_mask, num_threads, False)
        except UnicodeEncodeError:
            return [
                self.encode(t, allowed_special=allowed_special, disallowed_special=disallowed_special)
                for t in texts
            ]
        if isinstance(result, tuple):
            _, index = result
            raise_disallowed_special_token(self._special_text(index))
        return result

    def encode_ordinary_batch_to_numpy(
        self, text: list[str], *, num_threads: int = 8, device: str = "cpu"
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        """`encode_ordinary_batch` as two flat arrays, without a Python int per token.

        Returns ``(ids, offsets)``: ``ids`` uint32 holds every text's tokens one after another,
        ``offsets`` int64 has ``len(text) + 1`` entries, and text ``i`` is
        ``ids[offsets[i]:offsets[i + 1]]``.

        ```
        >>> ids, offsets = enc.encode_ordinary_batch_to_numpy(["hello world", "goodbye world"])
        >>> ids.tolist(), offsets.tolist()
        ([31373, 995, 11274, 16390, 995], [0, 2, 5])
        ```

        ``device="cuda"`` (or ``"cuda:N"``) encodes on a GPU, ``"auto"`` there when the batch is
        large enough to gain (`crayon_hf.cuda`); the result is identical either way.
        """
        if self._fallback is not None:
            return _flat_arrays(self._fallback.encode_ordinary_batch(text, num_threads=num_threads))
        if device != "cpu":
            on_gpu = self._on_device(text, set(), (), num_threads, device, ordinary=True)
            if on_gpu is not None:
                return on_gpu
        return _surrogates_fixed(
            lambda texts: self._engine.encode_batch_to_numpy(texts, b"", b"", num_threads, True), text)

    def encode_batch_to_numpy(
        self,
        text: list[str],
        *,
        num_threads: int = 8,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
        device: str = "cpu",
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
        """`encode_batch` as two flat arrays ``(ids, offsets)``, as `encode_ordinary_batch_to_numpy`
        returns them. Special tokens as in `encode`: a disallowed one raises ``ValueError``.
        `device` as in `encode_ordinary_batch_to_numpy`.

        Every face has this method (`crayon_hf.Tokenizer` and `CrayonTokenizer` return
        ``(ids, offsets, doc_offsets)``, with character offsets in the middle): the ids come first
        and the document offsets last, so ``ids, *_, doc_offsets = tok.encode_batch_to_numpy(texts)``
        works on each."""
        if self._fallback is not None:
            return _flat_arrays(
                self._fallback.encode_batch(
                    text,
                    num_threads=num_threads,
                    allowed_special=allowed_special,
                    disallowed_special=disallowed_special,
                )
            )
        if device != "cpu":
            on_gpu = self._on_device(text, allowed_special, disallowed_special, num_threads, device, ordinary=False)
            if on_gpu is not None:
                return on_gpu
        texts = list(text)
        allowed_mask, deny_mask = self._batch_masks(texts, allowed_special, disallowed_special)
        try:
            result = self._engine.encode_batch_to_numpy(texts, allowed_mask, deny_mask, num_threads, False)
        except UnicodeEncodeError:
            return _flat_arrays(
                [self.encode(t, allowed_special=allowed_special, disallowed_special=disallowed_special) for t in texts]
            )
        if isinstance(result[0], int):
            _, index = result
            raise_disallowed_special_token(self._special_text(index))
        return result

    def encode_with_unstable(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = set(),  # noqa: B006
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> tuple[list[int], list[list[int]]]:
        """Encodes a string into stable tokens and possible completion sequences.

        The completions are a list of lists in no particular order (tiktoken returns them from a
        hash set).

        ```
        >>> text = "..."
        >>> stable_tokens, completions = enc.encode_with_unstable(text)
        >>> assert text.encode().startswith(enc.decode_bytes(stable_tokens))
        >>> assert all(enc.decode_bytes(stable_tokens + seq).startswith(text.encode()) for seq in completions)
        ```
        """
        if self._fallback is not None:
            return self._fallback.encode_with_unstable(
                text, allowed_special=allowed_special, disallowed_special=disallowed_special
            )
        allowed_mask = self._check_special(text, allowed_special, disallowed_special)
        tokens, completions = self._engine.encode_with_unstable(text, allowed_mask)
        return tokens, completions

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """Encodes text corresponding to a single token to its token value.

        NOTE: this will encode all special tokens. Raises `KeyError` if the token is not in the
        vocabulary.

        ```
        >>> enc.encode_single_token("hello")
        31373
        ```
        """
        if isinstance(text_or_bytes, str):
            text_or_bytes = text_or_bytes.encode("utf-8")
        if not text_or_bytes and self._empty_token is not None:
            return self._empty_token
        token = self._engine.encode_single_token(text_or_bytes)
        if token < 0:
            raise KeyError(text_or_bytes)
        return token

    # ====================
    # Decoding
    # ====================

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """Decodes a list of tokens into bytes.

        ```
        >>> enc.decode_bytes([31373, 995])
        b'hello world'
        ```
        """
        return self._engine.decode_bytes(tokens)

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Decodes a list of tokens into a string.

        WARNING: lossy by default, since decoded bytes are not guaranteed to be valid UTF-8;
        pass `errors="strict"` to raise instead.

        ```
        >>> enc.decode([31373, 995])
        'hello world'
        ```
        """
        return self._engine.decode(tokens, errors)

    def decode_single_token_bytes(self, token: int) -> bytes:
        """Decodes a token into bytes (special tokens included). Raises `KeyError` if the token is
        not in the vocabulary.

        ```
        >>> enc.decode_single_token_bytes(31373)
        b'hello'
        ```
        """
        return self._engine.token_bytes(token)

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """Decodes a list of tokens into a list of bytes.

        >>> enc.decode_tokens_bytes([31373, 995])
        [b'hello', b' world']
        """
        return self._engine.tokens_bytes(tokens)

    def decode_with_offsets(self, tokens: Sequence[int]) -> tuple[str, list[int]]:
        """Decodes a list of tokens into a string and the character offset where each token starts.

        When a token begins inside a UTF-8 character, its offset is that character's index. Raises
        on tokens that decode to invalid UTF-8, as tiktoken does.

        >>> enc.decode_with_offsets([31373, 995])
        ('hello world', [0, 5])
        """
        token_bytes = self.decode_tokens_bytes(tokens)
        text_len = 0
        offsets = []
        for token in token_bytes:
            offsets.append(max(0, text_len - (0x80 <= token[0] < 0xC0)))
            text_len += sum(1 for c in token if not 0x80 <= c < 0xC0)
        text = b"".join(token_bytes).decode("utf-8", errors="strict")
        return text, offsets

    def decode_batch(
        self, batch: Sequence[Sequence[int]], *, errors: str = "replace", num_threads: int = 8
    ) -> list[str]:
        """Decodes a batch (list of lists of tokens) into a list of strings."""
        return [b.decode("utf-8", errors=errors) for b in self._engine.decode_bytes_batch(batch, num_threads)]

    def decode_bytes_batch(self, batch: Sequence[Sequence[int]], *, num_threads: int = 8) -> list[bytes]:
        """Decodes a batch (list of lists of tokens) into a list of bytes."""
        return self._engine.decode_bytes_batch(batch, num_threads)

    # ====================
    # Miscellaneous
    # ====================

    def token_byte_values(self) -> list[bytes]:
        """Returns the bytes of every mergeable token, sorted."""
        return self._engine.token_byte_values()

    @property
    def eot_token(self) -> int:
        """The id of ``<|endoftext|>`` (``KeyError`` when the encoding has none)."""
        return self._special_tokens["<|endoftext|>"]

    def is_special_token(self, token: int) -> bool:
        """Whether the id `token` is a special token."""
        assert isinstance(token, int)
        return token in self._special_token_values

    @property
    def n_vocab(self) -> int:
        """For backwards compatibility. Prefer to use `enc.max_token_value + 1`."""
        return self.max_token_value + 1

    # ====================
    # Cartridges
    # ====================

    def save_cartridge(self, path: str | os.PathLike[str]) -> None:
        """Writes this encoding as a cartridge (atomically: temp file + rename)."""
        from crayon_hf._cache import atomic_write

        if self._image is not None:
            image = self._image
        else:
            with open(self._cartridge_path, "rb") as f:
                image = f.read()
        atomic_write(path, image)

    def encode_stream(self) -> EncodeStream:
        """A stream: `feed(text)` / `feed_bytes(data)` return the ids final so far, `finish()` the
        rest; together they equal the one-shot encoding (crayon_hf.streaming.EncodeStream)."""
        from crayon_hf.streaming import EncodeStream

        return EncodeStream(self)

    def encode_iter(self, chunks: Iterable[Any]) -> Iterator[int]:
        """Yields the ids of the text that `chunks` (str or UTF-8 bytes) make up, as they become final."""
        from crayon_hf.streaming import encode_iter

        return encode_iter(self, chunks)

    @property
    def cartridge_path(self) -> str | None:
        """The file this encoding is mapped from, or None for an in-memory one."""
        return self._cartridge_path

    # ====================
    # Private
    # ====================

    def _encode_single_piece(self, text_or_bytes: str | bytes) -> list[int]:
        """Encodes bytes with BPE alone, without a regex split or special tokens."""
        if isinstance(text_or_bytes, str):
            text_or_bytes = text_or_bytes.encode("utf-8")
        if not text_or_bytes and self._empty_token is not None:
            return [self._empty_token]
        return self._engine.encode_single_piece(text_or_bytes)

    def _encode_bytes(self, text: bytes) -> list[int]:
        """Encodes bytes that need not be valid UTF-8, as tiktoken does: the valid prefix is encoded
        ordinarily; its last piece (with the whitespace-only tokens before it) and the rest of the
        bytes are then BPE-encoded together, so ``decode_bytes`` gives the bytes back."""
        if self._fallback is not None:
            return self._fallback._encode_bytes(text)
        try:
            return self.encode_ordinary(text.decode("utf-8"))
        except UnicodeDecodeError as e:
            valid, rest = text[: e.start], text[e.start :]
        tokens = self.encode_ordinary(valid.decode("utf-8"))
        unstable = len(self._engine.encode_single_piece(self._last_piece(valid))) if valid else 0
        if unstable > 0 and _all_space(self.decode_single_token_bytes(tokens[-unstable])):
            # A whitespace run before the last piece may merge with it once bytes follow.
            while unstable < len(tokens) and _all_space(self.decode_single_token_bytes(tokens[-unstable - 1])):
                unstable += 1
        if unstable > 0:
            rest = self.decode_bytes(tokens[-unstable:]) + rest
            del tokens[-unstable:]
        return tokens + self._engine.encode_single_piece(rest)

    def _last_piece(self, text: bytes) -> bytes:
        """The last pre-token of valid UTF-8 `text` under this encoding's split pattern."""
        s = text.decode("utf-8")
        if self._engine.pattern != "regex":
            start = native.split_pieces(self._engine.pattern, s)[-1][0]
            return text[start:]
        import regex  # a pattern outside the native scanners: its pieces from the regex module

        *_, last = regex.finditer(self._pat_str, s)
        return last.group().encode("utf-8")

    def _encode_only_native_bpe(self, text: str) -> list[int]:
        """Encodes a string with the regex split done in Python (needs the `regex` module)."""
        import regex

        ret: list[int] = []
        for piece in regex.findall(regex.compile(self._pat_str), text):
            ret.extend(self._engine.encode_single_piece(piece.encode("utf-8")))
        return ret

    def _resolve_special_sets(
        self, allowed_special: object, disallowed_special: object
    ) -> tuple[AbstractSet[str], frozenset[str]]:
        if allowed_special == "all":
            allowed_special = self.special_tokens_set
        if disallowed_special == "all":
            disallowed_special = self.special_tokens_set - allowed_special  # type: ignore[operator]
        if not isinstance(disallowed_special, frozenset):
            disallowed_special = frozenset(disallowed_special)  # type: ignore[arg-type]
        return allowed_special, disallowed_special  # type: ignore[return-value]

    def _on_device(self, text: list[str], allowed_special: object, disallowed_special: object, num_threads: int,
                   device: str, ordinary: bool) -> tuple[Any, Any] | None:
        """A batch-to-numpy call on the GPU `device` names, or None when it runs on the CPU
        (device "auto" on a small batch, or text the GPU path cannot take: lone surrogates)."""
        from crayon_hf import cuda

        texts = list(text)
        index = cuda.resolve_device(device, cuda.batch_bytes(texts))
        if index is None:
            return None
        if ordinary:
            allowed_special, disallowed_special = set(), ()
        try:
            return self._encode_batch_on_device(texts, allowed_special, disallowed_special, num_threads, index,
                                                to_host=True)
        except UnicodeEncodeError:
            return None

    def _encode_batch_on_device(self, texts: list[str], allowed_special: object, disallowed_special: object,
                                num_threads: int, index: int, to_host: bool) -> tuple[Any, Any]:
        """(ids, offsets) from GPU `index`: numpy arrays when to_host, else DeviceArrays."""
        from crayon_hf import cuda

        if self._fallback is not None:
            raise NotImplementedError(f"{self.name}: this encoding runs on tiktoken (no native engine), "
                                      "so it has no GPU path")
        allowed_mask, deny_mask = self._batch_masks(texts, allowed_special, disallowed_special)
        result = cuda.encode_pieces(self, self._engine, texts, allowed_mask, deny_mask, False, num_threads, index,
                                    to_host)
        if isinstance(result[0], int):
            raise_disallowed_special_token(self._special_text(result[1]))
        return result[0], result[1]

    def _batch_masks(
        self, texts: list[str], allowed_special: object, disallowed_special: object
    ) -> tuple[bytes, bytes]:
        """(allowed mask, disallowed mask) of a batch call. Disallowed strings that are not special
        tokens are checked here, in Python, like tiktoken; the engine checks the rest per text."""
        allowed, disallowed = self._resolve_special_sets(allowed_special, disallowed_special)
        if disallowed and not disallowed <= self._special_index.keys():
            for t in texts:
                _check_disallowed_regex(t, disallowed)
            disallowed = frozenset()
        return self._mask(allowed), self._mask(disallowed)

    def _mask(self, tokens: AbstractSet[str]) -> bytes:
        if not tokens:
            return self._no_specials_mask
        mask = bytearray(len(self._special_index))
        for t in tokens:
            i = self._special_index.get(t)
            if i is not None:
                mask[i] = 1
        return bytes(mask)

    def _special_text(self, index: int) -> str:
        return self._engine.special_tokens()[index][0]

    def _check_special(self, text: str, allowed_special: object, disallowed_special: object) -> bytes:
        """Raises for disallowed special tokens in text; returns the allowed-special mask."""
        if not allowed_special and disallowed_special == "all":
            # The default: every special token is disallowed.
            if self._special_index:
                try:
                    hit = self._engine.find_special(text, self._all_specials_mask)
                except UnicodeEncodeError:
                    _check_disallowed_regex(text, frozenset(self._special_index))
                    hit = None
                if hit is not None:
                    raise_disallowed_special_token(self._special_text(hit))
            return self._no_specials_mask
        allowed, disallowed = self._resolve_special_sets(allowed_special, disallowed_special)
        if disallowed:
            if disallowed <= self._special_index.keys():
                try:
                    hit = self._engine.find_special(text, self._mask(disallowed))
                except UnicodeEncodeError:
                    _check_disallowed_regex(text, disallowed)
                    hit = None
                if hit is not None:
                    raise_disallowed_special_token(self._special_text(hit))
            else:
                _check_disallowed_regex(text, disallowed)
        return self._mask(allowed)

    # ====================
    # Pickling
    # ====================

    def __getstate__(self) -> object:
        from crayon_hf.tiktoken import registry

        if self is registry.ENCODINGS.get(self.name):
            return self.name
        if self._cartridge_path is not None:
            return {"cartridge": self._cartridge_path}
        return {
            "name": self.name,
            "pat_str": self._pat_str,
            "mergeable_ranks": self._mergeable_ranks,
            "special_tokens": self._special_tokens,
        }

    def __setstate__(self, value: object) -> None:
        from crayon_hf.tiktoken import registry

        if isinstance(value, str):
            self.__dict__ = registry.get_encoding(value).__dict__
            return
        assert isinstance(value, dict)
        if "cartridge" in value:
            self.__dict__ = Encoding.from_cartridge(value["cartridge"]).__dict__
            return
        self.__init__(**value)


def _surrogates_fixed(call: Any, text: Sequence[str]) -> Any:
    """`call(texts)`, retried with lone surrogates replaced (as tiktoken does) if UTF-8 refuses one."""
    texts = list(text)
    try:
        return call(texts)
    except UnicodeEncodeError:
        return call([_fix_surrogates(t) for t in texts])


def _all_space(token: bytes) -> bool:
    return all(b in b" \n\t" for b in token)


def _fix_surrogates(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _flat_arrays(lists: list[list[int]]) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """Id lists as the engine's batch arrays: (ids uint32, offsets int64 of len(lists) + 1)."""
    import numpy as np

    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(np.array([len(ids) for ids in lists], dtype=np.int64), out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.uint32, count=int(offsets[-1]))
    return ids, offsets


def _tiktoken_twin(enc: Encoding) -> object:
    """The real tiktoken Encoding for a pattern the engine cannot run natively."""
    from crayon_hf import _references

    try:
        tiktoken = _references.tiktoken()
    except ImportError as e:
        raise ValueError(
            f"encoding {enc.name!r} uses a split pattern crayon-hf cannot run natively yet, and the "
            "fallback needs the `tiktoken` package: pip install tiktoken"
        ) from e
    return tiktoken.Encoding(
        enc.name,
        pat_str=enc._pat_str,
        mergeable_ranks=enc._mergeable_ranks,
        special_tokens=enc._special_tokens,
    )


@functools.lru_cache(maxsize=128)
def _special_token_regex(tokens: frozenset[str]) -> re.Pattern[str]:
    inner = "|".join(re.escape(token) for token in sorted(tokens, key=len, reverse=True))
    return re.compile(f"({inner})")


def _check_disallowed_regex(text: str, disallowed: frozenset[str]) -> None:
    if disallowed and (match := _special_token_regex(disallowed).search(text)):
        raise_disallowed_special_token(match.group())


def raise_disallowed_special_token(token: str) -> NoReturn:
    raise ValueError(
        f"Encountered text corresponding to disallowed special token {token!r}.\n"
        "If you want this text to be encoded as a special token, "
        f"pass it to `allowed_special`, e.g. `allowed_special={{{token!r}, ...}}`.\n"
        f"If you want this text to be encoded as normal text, disable the check for this token "
        f"by passing `disallowed_special=(enc.special_tokens_set - {{{token!r}}})`.\n"
        "To disable this check for all special tokens, pass `disallowed_special=()`.\n"
    )
