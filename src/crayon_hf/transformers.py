"""CrayonTokenizer: the transformers face of crayon-hf.

A `CrayonTokenizer` *is* the tokenizer transformers would have given you (the same class, the
same `tokenizers.Tokenizer` in ``_tokenizer``, the same conventions: `model_input_names`,
`padding_side`, bos/eos handling, chat templates), with the hot calls answered by the native
engine:

- ``tok(...)`` / `encode` / `batch_encode`-style calls build the `BatchEncoding` from arrays the
  engine produces for the whole batch (truncation, special tokens, padding, masks and offsets
  included), not from per-encoding Python lists. Per-encoding objects (`tokens()`, `word_ids()`,
  `char_to_token()`, ...) are built lazily when asked for.
- `decode` / `batch_decode` run natively.
- Calls are stateless: padding and truncation are arguments of each call, never settings left on a
  shared backend, so threads calling one tokenizer with different lengths cannot interfere.

Everything else (vocabulary, added tokens, special-token bookkeeping, chat templates) is
transformers' own code on the real backend, so it cannot drift. Whatever the engine cannot
reproduce exactly for a folder runs on that backend; `tok.crayon_backend` says which.

How an instance comes to be: transformers loads the folder as usual (the original class, e.g.
`Qwen2Tokenizer`), then the instance moves to a subclass of that class and `CrayonTokenizer`
(`CrayonQwen2Tokenizer`), which compiles the backend's exact state (`_tokenizer.to_str()`, after
everything the class's `__init__` did to it) into a cartridge, cached by content hash. A folder
written by `save_pretrained` carries that cartridge as ``crayon.dat`` and maps it directly.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import numpy as np

try:
    from transformers.tokenization_utils_base import BatchEncoding, PaddingStrategy, TensorType, TruncationStrategy
    from transformers.tokenization_utils_tokenizers import TokenizersBackend
except ImportError as e:  # not installed, or transformers 4 (no TokenizersBackend)
    raise ImportError(
        f"CrayonTokenizer needs transformers 5 (pip install 'transformers>=5'): {e}"
    ) from e

from crayon_hf import _transformers_hook as hook
from crayon_hf._cache import atomic_write
from crayon_hf._hf.batch import encode_singles, id_plan
from crayon_hf._threads import default_threads
from crayon_hf._hf.encoding import ATTN, ID, SPECIAL, TYPE, Encoding
from crayon_hf._hf.postprocess import PaddingParams, TruncationParams

if TYPE_CHECKING:
    from crayon_hf.streaming import EncodeStream
    from crayon_hf.tokenizer import BatchArrays

__all__ = ["CrayonTokenizer", "patch_transformers", "unpatch_transformers"]

CARTRIDGE_FILE = "crayon.dat"
REMOTE_CODE_FILE = "crayon_tokenizer.py"
CONFIG_FORMAT = 1

# Methods an original class may override; where it does, its version runs (on the backend).
_ACCELERATED = ("_encode_plus", "_decode", "encode", "tokenize")
# The backend call each accelerated method replaces: a class may also wrap that call on its
# backend instance (CLIPTokenizer wraps `decode`), and then the backend runs it too.
_BACKEND_CALL = {"_encode_plus": "encode_batch", "_decode": "decode"}

_REMOTE_CODE = '''"""The tokenizer of this folder, for `AutoTokenizer.from_pretrained(folder, trust_remote_code=True)`.

Where the crayon-hf package is installed, it runs on crayon-hf's native engine (the same ids,
offsets and decoded text as the stock tokenizer, faster). Where it is not, this is the stock
transformers class the tokenizer was saved from ({original}), loaded from tokenizer.json as usual.
Written by `save_pretrained(..., crayon_remote_code=True)`."""

try:
    from crayon_hf.transformers import CrayonTokenizer as _Base
except ImportError:  # crayon-hf is not installed (or cannot run here): the stock class
    import transformers

    _Base = (getattr(transformers, "{original}", None) or getattr(transformers, "TokenizersBackend", None)
             or transformers.PreTrainedTokenizerFast)


class CrayonTokenizer(_Base):
    pass
'''



def _remote_code(original: str) -> str:
    """crayon_tokenizer.py for a folder whose stock class is `original` (a name transformers
    exports; anything else falls back to its generic fast tokenizer)."""
    safe = original if original.isidentifier() else "TokenizersBackend"
    return _REMOTE_CODE.replace("{original}", safe)


class CrayonTokenizer(TokenizersBackend):
    """A transformers tokenizer with the native engine behind its hot calls (module docstring).

    Get one with `CrayonTokenizer.from_pretrained(folder_or_hub_id)`, or with
    `AutoTokenizer.from_pretrained` for folders saved by crayon-hf (and for every folder after
    `crayon_hf.patch_transformers()`). Instances are also instances of the original class."""

    _crayon_original: type | None = None
    _crayon_deferred: frozenset[str] = frozenset()

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: Any, *inputs: Any, **kwargs: Any) -> CrayonTokenizer:
        """The tokenizer `AutoTokenizer.from_pretrained` would load (same arguments), accelerated.

        A folder saved by crayon-hf names its original class and carries its cartridge; any other
        folder or hub id is loaded by transformers' own resolution first."""
        entry = hook.crayon_entry(pretrained_model_name_or_path, kwargs)
        original = cls._crayon_original
        if original is None and entry is not None and entry.get("tokenizer_class"):
            original = _class_named(entry["tokenizer_class"])
        if original is not None and entry is not None and not inputs:
            fast = _restore(pretrained_model_name_or_path, original, entry, kwargs)
            if fast is not None:
                return fast
        if original is None:
            from transformers import AutoTokenizer

            auto = getattr(AutoTokenizer, "_crayon_original_from_pretrained", None)
            load = auto.__func__.__get__(AutoTokenizer) if auto is not None else AutoTokenizer.from_pretrained
        else:
            load = original.from_pretrained
        if entry is None and not inputs:
            return _load_plain(pretrained_model_name_or_path, original, kwargs, lambda: load(
                pretrained_model_name_or_path, **kwargs), explicit=True)
        stock = load(pretrained_model_name_or_path, *inputs, **kwargs)
        return _accelerate(stock, pretrained_model_name_or_path, entry, kwargs, explicit=True)

    # The stock backend. An instance restored from crayon_state.json (see _pretrained_state) has
    # none until something reads it: then it is built, once, from the cartridge's exact copy of
    # tokenizer.json. Instances loaded the stock way keep theirs in __dict__ as usual.
    @property
    def _tokenizer(self) -> Any:
        backend = self.__dict__.get("_tokenizer")
        if backend is None and "_crayon_lazy" in self.__dict__:
            backend = self._crayon_build_backend()
        return backend

    @_tokenizer.setter
    def _tokenizer(self, value: Any) -> None:
        self.__dict__["_tokenizer"] = value

    def _crayon_build_backend(self) -> Any:
        with self._crayon_lock:
            backend = self.__dict__.get("_tokenizer")
            if backend is None:
                from tokenizers import Tokenizer as Backend

                backend = Backend.from_str(self._crayon._cartridge.section("TJSN").decode("utf-8"))
                backend.encode_special_tokens = self.split_special_tokens  # as TokenizersBackend.__init__
                self._crayon_size = backend.get_vocab_size(True)
                self.__dict__["_tokenizer"] = backend
            return backend

    def _crayon_derive(self, name: str) -> Any:
        """A vocabulary copy restored lazily (`_vocab`, `_merges`, ...), from the cartridge's
        tokenizer.json."""
        from crayon_hf._pretrained_state import derive

        with self._crayon_lock:
            if name not in self.__dict__:
                source = json.loads(self._crayon._cartridge.section("TJSN"))
                self.__dict__[name] = derive(self.__dict__["_crayon_lazy"][name], source)
            return self.__dict__[name]

    def _crayon_setup(self, cartridge: str | None = None, source: Any = None) -> None:
        self._crayon_lock = threading.RLock()
        self._crayon_sync(cartridge, source)

    def _crayon_sync(self, cartridge: str | None = None, source: Any = None) -> None:
        """Compile (or find in the cache, or map `cartridge` when it was built from exactly this
        state) the backend's current state. `source`: that state already serialized (a
        _pretrained_state.BackendJson of this backend, unchanged since)."""
        from crayon_hf.tokenizer import Tokenizer

        text = (source.text if source is not None else self._tokenizer.to_str()).encode("utf-8")
        digest = hashlib.sha256(text).hexdigest()
        engine = None
        if cartridge is not None and os.path.isfile(cartridge):
            try:
                candidate = Tokenizer.from_cartridge(cartridge)
            except ValueError:
                candidate = None  # a damaged or foreign file: compile instead
            if candidate is not None and candidate._meta.get("source_sha256") == digest and candidate._ref is None:
                engine = candidate
        if engine is None:
            # The stock backend is the fallback: no second reference tokenizer is built.
            engine, path, reason = Tokenizer._native(text, source=f"{type(self).__name__} backend", exact_floats=True,
                                                     parsed=source.parsed if source is not None else None)
            if engine is None:
                warnings.warn(f"crayon-hf: {reason}; {type(self).__name__} runs on its tokenizers backend",
                              stacklevel=4)
                self.crayon_backend = f"fallback: {path}"
        if engine is not None and engine._ref is not None:  # refused when the engine was built
            self.crayon_backend = engine.crayon_backend
            engine = None
        if engine is None:
            self._crayon = None
            self._crayon_skip = frozenset(_ACCELERATED)
        else:
            self._crayon = engine
            wrapped = getattr(self._tokenizer, "__dict__", {})
            self._crayon_skip = self._crayon_deferred | {m for m, call in _BACKEND_CALL.items() if call in wrapped}
            deferred = sorted(self._crayon_skip)
            self.crayon_backend = "native" if not deferred else f"native (except {', '.join(deferred)})"
        self._crayon_digest = digest
        self._crayon_size = self._tokenizer.get_vocab_size(True)
        self._crayon_bpe = type(self._tokenizer.model).__name__ == "BPE"

    def _engine(self, method: str) -> Any:
        """The native tokenizer for `method`, or None where the backend must run it."""
        if method in self._crayon_skip:
            return None
        backend = self.__dict__.get("_tokenizer")  # not built yet: nothing was added to it
        if backend is not None and self._crayon_size != backend.get_vocab_size(True):
            with self._crayon_lock:  # tokens added on the backend directly
                self._crayon_sync()
        return self._crayon

    def encode_stream(self) -> EncodeStream:
        """A stream: `feed(text)` / `feed_bytes(data)` return the ids final so far, `finish()` the
        rest; together they equal the one-shot encoding (crayon_hf.streaming.EncodeStream)."""
        from crayon_hf.streaming import EncodeStream

        return EncodeStream(self)

    def encode_iter(self, chunks: Iterable[Any]) -> Iterator[int]:
        """Yields the ids of the text that `chunks` (str or UTF-8 bytes) make up, as they become final."""
        from crayon_hf.streaming import encode_iter

        return encode_iter(self, chunks)

    def crayon_sync(self) -> None:
        """Recompile after changing `backend_tokenizer` directly (its normalizer, pre-tokenizer,
        ...); changes made through this tokenizer's own methods are followed automatically."""
        with self._crayon_lock:
            self._crayon_sync()

    def encode_batch_to_numpy(self, texts: Sequence[str], add_special_tokens: bool = True, *,
                              offsets: bool = True) -> BatchArrays:
        """``tok(texts, add_special_tokens=...)`` as three flat numpy arrays, without a
        `BatchEncoding` or a Python int per token: ``ids`` (uint32), character ``offsets`` (int64,
        ``(n_tokens, 2)``) and ``doc_offsets`` (int64, ``len(texts) + 1``); document i is
        ``ids[doc_offsets[i]:doc_offsets[i + 1]]`` (see `crayon_hf.BatchArrays`). No truncation
        or padding; special tokens in the text are matched unless `split_special_tokens` is set.
        `offsets=False` leaves the character offsets out (``offsets`` is None), which the engine
        then does not compute. The same method exists on every face (`crayon_hf.Tokenizer`, the
        tiktoken `Encoding`).

        ```
        >>> ids, offsets, doc_offsets = tok.encode_batch_to_numpy(["Hello world", "hi"])
        >>> ids[doc_offsets[0]:doc_offsets[1]].tolist() == tok("Hello world")["input_ids"]
        True
        ```
        """
        from crayon_hf.tokenizer import BatchArrays

        texts = list(texts)
        engine = self._engine("_encode_plus")
        if engine is not None:
            return engine._encode_batch_to_numpy_with(texts, add_special_tokens, None, None,
                                                      bool(self.split_special_tokens), offsets=offsets)
        # On the stock backend: transformers' own call, flattened.
        rows: list[list[int]] = []
        spans: list[list[tuple[int, int]]] = []
        if texts:
            out = self(texts, add_special_tokens=add_special_tokens, return_offsets_mapping=True,
                       return_attention_mask=False, return_token_type_ids=False)
            rows, spans = out["input_ids"], out["offset_mapping"]
        doc_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in rows], out=doc_offsets[1:])
        ids = np.array([i for r in rows for i in r], dtype=np.uint32)
        char_offsets = np.array([o for s in spans for o in s], dtype=np.int64).reshape(-1, 2)
        return BatchArrays(ids, char_offsets if offsets else None, doc_offsets)

    # ------------------------------------------------------------------ state changes

    def count(self, text: str, add_special_tokens: bool = True) -> int:
        """``len(tok(text, add_special_tokens=...)["input_ids"])`` without building the lists (no
        truncation or padding): the full token count, to compare with a context budget.

        ```
        >>> tok.count("Hello world") == len(tok("Hello world")["input_ids"])
        True
        ```
        """
        return self.count_batch([text], add_special_tokens)[0]

    def count_batch(self, texts: Sequence[str], add_special_tokens: bool = True) -> list[int]:
        """`count` of every text; natively in parallel (GIL released) where the engine runs."""
        texts = list(texts)
        engine = self._engine("_encode_plus")
        if engine is not None:
            return engine._count_batch_with(texts, add_special_tokens, bool(self.split_special_tokens))
        if not texts:
            return []
        out = self(texts, add_special_tokens=add_special_tokens, return_attention_mask=False,
                   return_token_type_ids=False)
        return [len(ids) for ids in out["input_ids"]]

    def _add_tokens(self, new_tokens: list[Any], special_tokens: bool = False) -> int:
        added = super()._add_tokens(new_tokens, special_tokens)
        engine = getattr(self, "_crayon", None)
        if engine is not None:
            with self._crayon_lock:
                # The same call on the overlay of the mapped cartridge; recompile if they disagree.
                (engine.add_special_tokens if special_tokens else engine.add_tokens)(new_tokens)
                self._crayon_size = self._tokenizer.get_vocab_size(True)
                if engine.get_added_tokens_decoder() != self._tokenizer.get_added_tokens_decoder():
                    self._crayon_sync()
        return added

    def update_post_processor(self) -> None:
        """transformers' `update_post_processor` (bos/eos settings), then a recompile of the
        engine so that it follows."""
        super().update_post_processor()
        if getattr(self, "_crayon_lock", None) is not None:
            with self._crayon_lock:
                self._crayon_sync()

    # ------------------------------------------------------------------ encoding

    def encode(self, text: Any, text_pair: Any = None, add_special_tokens: bool = True, padding: Any = False,
               truncation: Any = None, max_length: int | None = None, stride: int = 0, padding_side: str | None = None,
               return_tensors: Any = None, **kwargs: Any) -> list[int]:
        """transformers' `encode`. One str with the defaults (no pair, padding, truncation, length
        or tensors) is one native call for its ids (`_single_ids`): transformers' argument
        handling and `BatchEncoding` were ~27 of the ~29 us a short text took through
        `_encode_plus`; anything else goes there."""
        if type(text) is str and text_pair is None and padding is False and truncation is None and \
                max_length is None and return_tensors is None and not kwargs:
            single = self._single_ids("encode", text, add_special_tokens, bool(self.split_special_tokens))
            if single is not None:
                return single[1]
        return super().encode(text, text_pair, add_special_tokens, padding, truncation, max_length, stride,
                              padding_side, return_tensors, **kwargs)

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False, **kwargs: Any) -> list[str]:
        """transformers' `tokenize` (the tokens of `_encode_plus`'s encoding); one str without
        keyword arguments reads them from one native call (`_single_tokens`)."""
        if type(text) is str and pair is None and not kwargs:
            tokens = self._single_tokens(text, add_special_tokens)
            if tokens is not None:
                return tokens
        return super().tokenize(text, pair, add_special_tokens, **kwargs)

    def _single_tokens(self, text: str, add_special_tokens: bool) -> list[str] | None:
        """The tokens `_encode_plus` gives one str with no padding or truncation where the
        processor adds nothing around it (tokenize's default): the engine's own tokens, with
        transformers' warning past `model_max_length`; None otherwise (as `_single_ids`)."""
        engine = self._single_engine("tokenize")
        if engine is None or id_plan(engine._processor, add_special_tokens) != ([], []):
            return None
        try:
            tokens = _raw_tokens(engine, text, bool(self.split_special_tokens))
        except UnicodeEncodeError:
            return None
        if len(tokens) > self.model_max_length:
            self._eventual_warn_about_too_long_sequence(tokens, None, True)
        return tokens

    def _single_engine(self, method: str) -> Any:
        """The native tokenizer for `method` (`encode` or `tokenize`), a shortcut past
        `_encode_plus` for one str; None where either runs elsewhere: a class of the model's own
        that defines one of them (CodeLlama's `tokenize` fills in the middle), a wrapped backend
        call, the reference fallback."""
        if method in self._crayon_skip:
            return None
        engine = self._engine("_encode_plus")
        return engine if engine is not None and engine._ref is None else None

    def _single_batch_encoding(self, text: str, add_special_tokens: bool, split_special_tokens: bool,
                               attention_mask: bool, max_length: int | None, verbose: bool) -> BatchEncoding | None:
        """`_encode_plus`'s result for one str with no padding, truncation, tensors or fields
        past the ids and the attention mask (`tok(text)`): the ids from one native call and a lazy
        `Encoding` (built in full when first read); the batch arrays and two `BatchEncoding`s were
        most of a short text's call. None where the general path must run (as `_single_ids`)."""
        single = self._single_ids("_encode_plus", text, add_special_tokens, split_special_tokens, max_length, verbose)
        if single is None:
            return None
        engine, ids = single
        build = engine._lazy_build(add_special_tokens, None, padding=None, special=split_special_tokens)
        data: dict[str, Any] = {"input_ids": ids}
        if attention_mask:
            data["attention_mask"] = [1] * len(ids)
        return BatchEncoding(data, [Encoding._lazy(list(ids), build, text)], n_sequences=1)

    def _single_ids(self, method: str, text: str, add_special_tokens: bool, split_special_tokens: bool,
                    max_length: int | None = None, verbose: bool = True) -> tuple[Any, list[int]] | None:
        """(the native tokenizer, the ids `_encode_plus` gives one str with no padding or
        truncation) from one native call, with transformers' warning past `model_max_length`;
        None where the engine cannot (`_single_engine(method)` says no, a processor without a
        fixed prefix and suffix, a str that is not valid UTF-8)."""
        engine = self._single_engine(method)
        if engine is None:
            return None
        plan = id_plan(engine._processor, add_special_tokens)
        if plan is None:
            return None
        try:
            ids = engine._engine.encode_id_list(text, split_special_tokens, *plan)
        except UnicodeEncodeError:
            return None
        if len(ids) > self.model_max_length:
            self._eventual_warn_about_too_long_sequence(ids, max_length, verbose)
        return engine, ids

    def _encode_plus(
        self,
        text: Any,
        text_pair: Any = None,
        add_special_tokens: bool = True,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
        max_length: int | None = None,
        stride: int = 0,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors: str | TensorType | None = None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        return_length: bool = False,
        verbose: bool = True,
        split_special_tokens: bool | None = None,
        **kwargs: Any,
    ) -> BatchEncoding:
        engine = self._engine("_encode_plus")
        if engine is None or kwargs.get("sanitize_control_tokens"):
            with self._crayon_lock:  # the backend's padding and truncation are shared state
                return super()._encode_plus(
                    text, text_pair, add_special_tokens, padding_strategy, truncation_strategy, max_length, stride,
                    is_split_into_words, pad_to_multiple_of, padding_side, return_tensors, return_token_type_ids,
                    return_attention_mask, return_overflowing_tokens, return_special_tokens_mask,
                    return_offsets_mapping, return_length, verbose, split_special_tokens, **kwargs,
                )
        items, is_batched = _batch_items(text, text_pair, is_split_into_words)
        truncation = None
        if truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE:
            truncation = TruncationParams.from_kwargs(
                max_length, stride=stride, strategy=truncation_strategy.value, direction=self.truncation_side
            )
            truncation.validate(engine.num_special_tokens_to_add(False))
        padding = None
        if padding_strategy != PaddingStrategy.DO_NOT_PAD:
            padding = PaddingParams.from_kwargs(
                length=max_length if padding_strategy == PaddingStrategy.MAX_LENGTH else None,
                direction=padding_side if padding_side is not None else self.padding_side,
                pad_id=self.pad_token_id,
                pad_token=self.pad_token,
                pad_type_id=self.pad_token_type_id,
                pad_to_multiple_of=pad_to_multiple_of,
            )
        if split_special_tokens is None:
            split_special_tokens = self.split_special_tokens
        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        tensors = None if return_tensors is None else TensorType(return_tensors).value
        wanted = (return_token_type_ids, return_attention_mask, return_special_tokens_mask,
                  return_offsets_mapping, return_length)

        if not is_batched and type(text) is str and text_pair is None and not is_split_into_words and \
                truncation is None and padding is None and tensors is None and not return_overflowing_tokens and \
                not (return_token_type_ids or return_special_tokens_mask or return_offsets_mapping or return_length):
            single = self._single_batch_encoding(text, add_special_tokens, bool(split_special_tokens),
                                                 return_attention_mask, max_length, verbose)
            if single is not None:
                return single
        batch = None
        if not is_split_into_words and not return_overflowing_tokens and all(type(x) is str for x in items):
            batch = encode_singles(engine, items, add_special_tokens, truncation, padding, split_special_tokens,
                                   default_threads() if len(items) > 1 else 1, offsets=return_offsets_mapping)
        if batch is not None:
            data = _arrays_to_data(batch, wanted, tensors)
            encodings: Any = batch.encodings
            for length in batch.lengths():  # transformers warns once, naming the first one too long
                if length > self.model_max_length:
                    self._eventual_warn_about_too_long_sequence(range(length), max_length, verbose)
                    break
            output = BatchEncoding(data, encodings, tensor_type=return_tensors, n_sequences=1)
        else:
            encodings = engine._encode_batch_with(items, is_split_into_words, add_special_tokens, truncation, padding,
                                                  split_special_tokens, default_threads())
            output = self._encodings_to_batch(encodings, wanted, return_overflowing_tokens, max_length, verbose,
                                              return_tensors)
        if not is_batched and return_tensors is None and not return_overflowing_tokens:
            output = BatchEncoding(
                {k: (v[0] if len(v) > 0 and isinstance(v[0], list) else v) for k, v in output.items()},
                output.encodings,
                n_sequences=output.n_sequences,  # as computed from encodings[0], without building it
            )
        return output

    def _encodings_to_batch(self, encodings: list[Any], wanted: tuple[bool, ...], overflowing: bool,
                            max_length: int | None, verbose: bool, return_tensors: Any) -> BatchEncoding:
        """Per-encoding assembly, as transformers does it (pairs, words, overflowing tokens)."""
        type_ids, attention, special, offsets, length = wanted
        per_input = [
            self._convert_encoding(e, type_ids, attention, overflowing, special, offsets, length, verbose)
            for e in encodings
        ]
        data: dict[str, list[Any]] = {}
        for key in per_input[0][0]:
            data[key] = [row for fields, _ in per_input for row in fields[key]]
        flat = [e for _, group in per_input for e in group]
        if overflowing:
            data["overflow_to_sample_mapping"] = [i for i, (fields, _) in enumerate(per_input)
                                                  for _ in fields["input_ids"]]
        for ids in data["input_ids"]:
            self._eventual_warn_about_too_long_sequence(ids, max_length, verbose)
        return BatchEncoding(data, flat, tensor_type=return_tensors)

    # ------------------------------------------------------------------ decoding

    def _decode(self, token_ids: Any, skip_special_tokens: bool = False,
                clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> str:
        engine = self._engine("_decode")
        if engine is None:
            return super()._decode(token_ids, skip_special_tokens, clean_up_tokenization_spaces, **kwargs)
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        if isinstance(token_ids, dict):
            token_ids = token_ids["input_ids"]
        text = engine.decode(token_ids, skip_special_tokens=skip_special_tokens)
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        if not clean_up_tokenization_spaces:
            return text
        if self._crayon_bpe and not self.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output:
            # transformers skips the WordPiece clean-up on BPE models; its own call warns once.
            super()._decode([], False, True)
            return text
        return self.clean_up_tokenization(text)

    # ------------------------------------------------------------------ saving

    def save_pretrained(self, save_directory: Any, *args: Any, crayon_remote_code: bool = False,
                        crayon_cartridge: bool = True, **kwargs: Any) -> tuple[str, ...]:
        """transformers' `save_pretrained`, plus ``crayon.dat`` (the cartridge) and a ``"crayon"``
        entry in tokenizer_config.json; the original `tokenizer_class` is kept, so transformers
        alone loads the folder as before.

        ``crayon_cartridge=False`` leaves the cartridge out (and the state file that goes with
        it): the folder is the stock one plus the ``"crayon"`` entry, and crayon-hf compiles
        tokenizer.json on first load instead of mapping the cartridge (once per machine, cached).
        ``crayon_remote_code=True`` also writes an `auto_map` and its module, so
        `AutoTokenizer.from_pretrained(dir, trust_remote_code=True)` gives a CrayonTokenizer
        without importing crayon-hf first, and the stock class where crayon-hf is not installed
        (opt-in: an `auto_map` makes transformers treat the folder as remote code, which wants
        trust_remote_code=True; transformers 5.23 falls back to the original class without).
        `push_to_hub` takes both options too. See docs/transformers.md, "Sharing"."""
        pushing = getattr(self, "_crayon_push_options", None)
        if pushing is not None:  # push_to_hub's own save_pretrained call, with push_to_hub's options
            crayon_remote_code = crayon_remote_code or pushing[0]
            crayon_cartridge = crayon_cartridge and pushing[1]
        self._crayon_remote_code = crayon_remote_code
        self._crayon_write_cartridge = crayon_cartridge
        try:
            return super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            self._crayon_remote_code = False
            self._crayon_write_cartridge = True

    def push_to_hub(self, repo_id: str, *args: Any, crayon_cartridge: bool = True, crayon_remote_code: bool = False,
                    **kwargs: Any) -> Any:
        """transformers' `push_to_hub`: uploads what `save_pretrained` writes with the same
        ``crayon_cartridge`` and ``crayon_remote_code`` options. ``crayon_cartridge=False`` keeps
        the upload to the stock files (the cartridge is 2-4x the size of tokenizer.json: 28 MB
        for Qwen2.5's 7 MB); users of crayon-hf then compile tokenizer.json once on first load."""
        self._crayon_push_options = (crayon_remote_code, crayon_cartridge)
        try:
            return super().push_to_hub(repo_id, *args, **kwargs)
        finally:
            self._crayon_push_options = None

    def _save_pretrained(self, save_directory: Any, file_names: tuple[str, ...], legacy_format: bool | None = None,
                         filename_prefix: str | None = None) -> tuple[str, ...]:
        files = super()._save_pretrained(save_directory, file_names, legacy_format, filename_prefix)
        prefix = filename_prefix + "-" if filename_prefix else ""
        with self._crayon_lock:
            if self._crayon is not None and self._crayon_digest != _digest(self._tokenizer):
                self._crayon_sync()
            entry: dict[str, Any] = {
                "format": CONFIG_FORMAT,
                "tokenizer_class": _saved_class_name(self),
                "cartridge": None,
                "source_sha256": self._crayon_digest,
            }
            if self._crayon is not None and getattr(self, "_crayon_write_cartridge", True):
                cartridge = Path(save_directory) / f"{prefix}{CARTRIDGE_FILE}"
                self._crayon_cartridge_to(cartridge)
                entry["cartridge"] = cartridge.name
                files = files + (str(cartridge),)
        config_file = next(f for f in file_names if f.endswith("tokenizer_config.json"))
        with open(config_file, encoding="utf-8") as f:
            config = json.load(f)
        config["tokenizer_class"] = entry["tokenizer_class"]
        config[hook.CONFIG_KEY] = entry
        ours = {"AutoTokenizer": [None, f"{Path(REMOTE_CODE_FILE).stem}.CrayonTokenizer"]}
        # Our auto_map comes back through init_kwargs when a remote-code folder is saved again:
        # then the module goes with it, or the folder would name a file it lacks.
        if getattr(self, "_crayon_remote_code", False) or config.get("auto_map") == ours:
            module = Path(save_directory) / REMOTE_CODE_FILE
            module.write_text(_remote_code(entry["tokenizer_class"]), encoding="utf-8")
            config["auto_map"] = ours
            files = files + (str(module),)
        with open(config_file, "w", encoding="utf-8") as f:
            f.write(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        if entry["cartridge"] is not None and not prefix:
            from crayon_hf._pretrained_state import STATE_FILE, write_state

            # The state the stock load of this folder gives, for from_pretrained to restore
            # without building the backend (see _pretrained_state).
            if write_state(save_directory, self._crayon_original or TokenizersBackend, self._crayon_digest):
                files = files + (str(Path(save_directory) / STATE_FILE),)
        return files

    def _crayon_cartridge_to(self, target: Path) -> None:
        """The cartridge of the backend's current state (tokens added since load compiled in)."""
        from crayon_hf.tokenizer import Tokenizer

        engine = self._crayon
        if engine._overlay:
            engine = Tokenizer.from_buffer(self._tokenizer.to_str().encode("utf-8"))
        atomic_write(target, engine._cartridge_bytes())

    # ------------------------------------------------------------------ pickling

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        """Pickled as the original class's state plus a reference to the cartridge (path and
        checksum); the child maps the same file, or recompiles the backend's state where the file
        is not there (another host) -- never a copy of the cartridge in the pickle."""
        if "_crayon_lazy" in self.__dict__:  # restored without a backend: complete the state first
            self._tokenizer
            for name in self.__dict__["_crayon_lazy"]:
                getattr(self, name)
        state = {k: v for k, v in self.__dict__.items() if not k.startswith("_crayon")}
        ref = None
        if self._crayon is not None:
            from crayon_hf._native import native

            path = self._crayon._cartridge_path
            if path is not None:  # None: compiled in memory (the cache could not be written)
                ref = (path, native.Cartridge.open(path).checksum, self._crayon_digest)
        return (_unpickle, (self._crayon_original or TokenizersBackend, state, ref))


def _unpickle(original: type, state: dict[str, Any], ref: tuple[str, int, str] | None) -> CrayonTokenizer:
    tok = original.__new__(original)
    tok.__dict__.update(state)
    tok.__class__ = _crayon_class(original)
    cartridge = None
    if ref is not None and os.path.isfile(ref[0]):
        from crayon_hf._native import native

        try:
            if native.Cartridge.open(ref[0]).checksum == ref[1]:
                cartridge = ref[0]
        except ValueError:
            pass
    tok._crayon_setup(cartridge)
    return tok


# ---------------------------------------------------------------------------- classes


_CLASSES: dict[type, type] = {}
_CLASSES_LOCK = threading.Lock()


def _crayon_class(original: type) -> type:
    """The CrayonTokenizer subclass of `original` (one per class, created on first use)."""
    if original is TokenizersBackend:
        return CrayonTokenizer
    if issubclass(original, CrayonTokenizer):
        return original
    with _CLASSES_LOCK:
        cls = _CLASSES.get(original)
        if cls is None:
            mro = original.__mro__
            own = mro[: mro.index(TokenizersBackend)]
            deferred = frozenset(m for m in _ACCELERATED if any(m in c.__dict__ for c in own))
            namespace = {
                "__module__": __name__,
                "__doc__": f"{original.__name__} with the crayon-hf engine (see CrayonTokenizer).",
                "_crayon_original": original,
                "_crayon_deferred": deferred,
            }
            name = f"Crayon{original.__name__}"
            if getattr(original, "_auto_class", None) is not None:
                # A remote-code class: save_pretrained copies the module of the instance's class
                # and names the class in auto_map, so both must be the original's.
                namespace["__module__"] = original.__module__
                name = original.__name__
            cls = type(name, (CrayonTokenizer, original), namespace)
            _CLASSES[original] = cls
        return cls


def _class_named(name: str) -> type | None:
    from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

    for candidate in (name, name.removesuffix("Fast"), name + "Fast"):
        cls = tokenizer_class_from_name(candidate)
        if cls is not None:
            return TokenizersBackend if cls.__name__ == "PythonBackend" else cls
    return None


def _class_exactly(name: str) -> type | None:
    """The transformers tokenizer class called exactly `name`, or None."""
    if name == "TokenizersBackend":
        return TokenizersBackend
    cls = _class_named(name)
    return cls if cls is not None and cls.__name__ == name else None


def _saved_class_name(tok: CrayonTokenizer) -> str:
    """What transformers writes as `tokenizer_class` for the original class."""
    name = (tok._crayon_original or TokenizersBackend).__name__
    if name.endswith("Fast") and getattr(tok, "can_save_slow_tokenizer", False):
        name = name[:-4]
    return name


def _digest(backend: Any) -> str:
    return hashlib.sha256(backend.to_str().encode("utf-8")).hexdigest()


def _cartridge_of(path: Any, entry: dict[str, Any] | None, kwargs: dict[str, Any]) -> str | None:
    """The folder's (or hub repository's) saved cartridge, if its entry names one."""
    name = entry.get("cartridge") if entry else None
    if not isinstance(name, str) or "/" in name or "\\" in name:
        return None
    subfolder = kwargs.get("subfolder") or ""
    if os.path.isdir(str(path)):
        local = os.path.join(str(path), subfolder, name)
        return local if os.path.isfile(local) else None
    try:
        from transformers.utils import cached_file

        hub = {k: kwargs[k] for k in hook._HUB_KWARGS if k in kwargs}
        return cached_file(path, name, _raise_exceptions_for_missing_entries=False, **hub)
    except (OSError, ValueError):
        return None


class _Lazy:
    """A class-level stand-in for an instance attribute that a restored instance derives on first
    read (`_crayon_derive`); instances loaded the stock way hold the value in __dict__ as usual."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None:
            return self
        d = obj.__dict__
        if self.name in d:
            return d[self.name]
        if self.name in d.get("_crayon_lazy", ()):
            return obj._crayon_derive(self.name)
        raise AttributeError(self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value

    def __delete__(self, obj: Any) -> None:
        del obj.__dict__[self.name]


def _install_lazy_attributes() -> None:
    from crayon_hf._pretrained_state import LAZY_NAMES

    for name in LAZY_NAMES:
        setattr(CrayonTokenizer, name, _Lazy(name))


_install_lazy_attributes()


def _restore(path: Any, original: type, entry: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """The tokenizer of a folder saved by crayon-hf, restored from its crayon_state.json without
    building the stock backend; None when the state file is missing or does not match exactly."""
    from crayon_hf._pretrained_state import read_state

    if not isinstance(path, (str, os.PathLike)) or not os.path.isdir(path):
        return None
    cartridge = _cartridge_of(path, entry, kwargs)
    if cartridge is None or not isinstance(original, type) or not issubclass(original, TokenizersBackend):
        return None
    found = read_state(str(path), original, kwargs)
    if found is None:
        return None
    return _restored(original, cartridge, *found)


def _restored(original: type, cartridge: str, state: dict[str, Any], lazy: dict[str, str], digest: str) -> Any:
    """An instance of `original`'s CrayonTokenizer class with a stock load's `state`, the
    cartridge mapped and the backend built on first read; None when the cartridge is not the
    one the state was taken with."""
    from crayon_hf.tokenizer import Tokenizer

    try:
        engine = Tokenizer.from_cartridge(cartridge)
    except (ValueError, OSError):
        return None
    if engine._ref is not None or engine._meta.get("source_sha256") != digest:
        return None
    cls = _crayon_class(original)
    tok = object.__new__(cls)
    tok.__dict__.update(state)
    tok._crayon_lazy = lazy
    tok._crayon_lock = threading.RLock()
    tok._crayon = engine
    tok._crayon_skip = cls._crayon_deferred
    deferred = sorted(tok._crayon_skip)
    tok.crayon_backend = "native" if not deferred else f"native (except {', '.join(deferred)})"
    tok._crayon_digest = digest
    tok._crayon_size = None  # set when the backend is built (_engine compares only then)
    tok._crayon_bpe = engine._meta.get("model", "bpe_bytes") in ("bpe_bytes", "bpe_chars")
    return tok


def _load_plain(path: Any, requested: type | None, kwargs: dict[str, Any], load: Any, explicit: bool) -> Any:
    """The load of a folder not saved by crayon-hf (or a hub id): the stock way the first time,
    restored from the cache after that (local folders; see _pretrained_state.FolderMemo)."""
    from crayon_hf._pretrained_state import BackendJson, FolderMemo, capture, restore

    memo = FolderMemo.of(path, requested, kwargs)
    if memo is not None and isinstance(memo.record, dict):
        record = memo.record
        original = _class_exactly(str(record.get("class")))
        cartridge = record.get("cartridge")
        if original is not None and isinstance(cartridge, str):
            tok = _restored(original, cartridge, *restore(record, memo.folder))
            if tok is not None:
                return tok
        memo.record = None  # stale (a cartridge trimmed from the cache, ...): taken again below
    stock = load()
    record = source = None
    # (a class loaded from the folder's own code cannot be found by name: not remembered)
    if (memo is not None and memo.record is None and isinstance(stock, TokenizersBackend)
            and _class_exactly(type(stock).__name__) is type(stock)):
        try:
            backend = stock.__dict__.get("_tokenizer")
            # The state serialized (and parsed) once, for the record and the compile alike.
            source = BackendJson(backend) if backend is not None else None
            record = capture(stock, memo.folder, source=source)
        except Exception:  # noqa: BLE001 -- remembering is an optimization; the load stands
            record = None
    tok = _accelerate(stock, path, None, kwargs, explicit, source)
    if memo is None or memo.record is not None:
        return tok
    engine = getattr(tok, "_crayon", None)
    cartridge = getattr(engine, "_cartridge_path", None)
    if engine is not None and cartridge is None:
        return tok  # compiled in memory: the cache cannot be written
    if record is not None and cartridge is not None and tok._crayon_digest == record["source_sha256"]:
        memo.remember({**record, "cartridge": str(cartridge)})
    else:
        memo.remember(None)  # no native engine, or a state that does not round-trip
    return tok


def _accelerate(stock: Any, path: Any, entry: dict[str, Any] | None, kwargs: dict[str, Any],
                explicit: bool, source: Any = None) -> Any:
    """Move a freshly loaded stock tokenizer to its CrayonTokenizer class and compile it.
    `source`: its backend's state, serialized already (_pretrained_state.BackendJson)."""
    if isinstance(stock, CrayonTokenizer):
        return stock
    if not isinstance(stock, TokenizersBackend):
        if explicit:
            raise ValueError(
                f"{path} loads as {type(stock).__name__}, which has no tokenizers backend (tokenizer.json); "
                "CrayonTokenizer accelerates TokenizersBackend tokenizers only"
            )
        return stock
    stock.__class__ = _crayon_class(type(stock))
    stock._crayon_setup(_cartridge_of(path, entry, kwargs), source)
    return stock


def _auto_from_pretrained(original: Any, cls: type, path: Any, entry: dict[str, Any] | None,
                          inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """`AutoTokenizer.from_pretrained` for a folder saved by crayon-hf, or any folder after
    `patch_transformers()`."""
    if entry is not None:
        return CrayonTokenizer.from_pretrained(path, *inputs, **kwargs)
    if not inputs:
        return _load_plain(path, None, kwargs, lambda: original(cls, path, **kwargs), explicit=False)
    return _accelerate(original(cls, path, *inputs, **kwargs), path, None, kwargs, explicit=False)


def patch_transformers() -> None:
    """From now on, `AutoTokenizer.from_pretrained` returns CrayonTokenizers wherever it would
    return a tokenizers-backed tokenizer (the stock backend stays as the fallback)."""
    hook.set_patch_all(True)


def unpatch_transformers() -> None:
    """Undo `patch_transformers` (folders saved by crayon-hf still load as CrayonTokenizer)."""
    hook.set_patch_all(False)


# ---------------------------------------------------------------------------- assembly

_INVALID_TEXT = (
    "text input must be of type `str` (single example), `list[str]` (batch or single pretokenized example) "
    "or `list[list[str]]` (batch of pretokenized examples) or `list[tuple[list[str], list[str]]]` (batch of "
    "pretokenized sequence pairs)."
)


def _valid_text(t: Any) -> bool:
    """transformers' accepted shapes: str, list of str, list of lists of str, one level deeper."""
    if isinstance(t, str):
        return True
    if not isinstance(t, (list, tuple)):
        return False
    if len(t) == 0 or isinstance(t[0], str):
        return True
    if not isinstance(t[0], (list, tuple)):
        return False
    if len(t[0]) == 0 or isinstance(t[0][0], str):
        return True
    return isinstance(t[0][0], (list, tuple)) and (len(t[0][0]) == 0 or isinstance(t[0][0][0], str))


def _batch_items(text: Any, text_pair: Any, is_split_into_words: bool) -> tuple[list[Any], bool]:
    """The batch transformers' `_encode_plus` builds, with its checks and messages."""
    if not _valid_text(text) or (text_pair is not None and not _valid_text(text_pair)):
        raise ValueError(_INVALID_TEXT)
    if is_split_into_words:
        is_batched = bool(isinstance(text, (list, tuple)) and text and isinstance(text[0], (list, tuple)))
    else:
        is_batched = isinstance(text, (list, tuple))
    if not is_batched:
        return ([(text, text_pair)] if text_pair else [text]), False
    if isinstance(text_pair, str):
        raise TypeError(
            "when tokenizing batches of text, `text_pair` must be a list or tuple with the same length as `text`."
        )
    if text_pair is not None and len(text) != len(text_pair):
        raise ValueError(
            f"batch length of `text`: {len(text)} does not match batch length of `text_pair`: {len(text_pair)}."
        )
    return (list(zip(text, text_pair)) if text_pair is not None else list(text)), True


def _raw_tokens(tok: Any, text: str, special: bool) -> list[Any]:
    """`crayon_hf.tokenizer.raw_tokens`, imported on the first call and then called directly:
    importing this module (patch_transformers does) does not load the tokenizers face."""
    global _raw_tokens
    from crayon_hf.tokenizer import raw_tokens

    _raw_tokens = raw_tokens
    return raw_tokens(tok, text, special)


def _arrays_to_data(batch: Any, wanted: tuple[bool, ...], tensors: str | None) -> dict[str, Any]:
    """The BatchEncoding fields from the batch arrays: arrays (or torch tensors) when padded and
    numpy or torch tensors are asked for, else the lists transformers would build (for other
    frameworks too: transformers converts those lists itself)."""
    type_ids, attention, special, offsets, length = wanted
    arrays = batch.padded is not None and tensors in ("np", "pt")
    rows = batch.rows if arrays else batch.lists
    data: dict[str, Any] = {"input_ids": rows(ID)}
    if type_ids:
        data["token_type_ids"] = rows(TYPE)
    if attention:
        data["attention_mask"] = rows(ATTN)
    if special:
        data["special_tokens_mask"] = rows(SPECIAL)
    if offsets:
        data["offset_mapping"] = batch.offsets() if arrays else batch.offset_lists()
    if length:
        data["length"] = batch.lengths()
    if arrays and tensors == "pt":
        import torch

        return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in data.items()}
    return data


def _ensure_hook() -> None:
    hook.install()


_ensure_hook()
