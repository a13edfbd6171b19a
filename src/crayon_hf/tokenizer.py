"""`crayon_hf.Tokenizer`: the `tokenizers.Tokenizer` API over a native cartridge.

    Tokenizer.from_file("tokenizer.json")  --plan + compile (cached by content hash)--> cartridge
                                            --HfEngine--> native encode up to the model
    encode(text, pair) --native--> raw encodings --crayon_hf._hf: truncation, post-processor,
                                                   padding--> Encoding

The native engine runs normalizers, added tokens, pre-tokenizers and the BPE model; what comes
after the model is policy and lives in `crayon_hf._hf`, mirroring `tokenizers` step by step.

Encodings from the native path are `crayon_hf.Encoding` look-alikes of `tokenizers.Encoding`
(same properties and methods, numpy inside, lists built on access). A tokenizer.json with a
component the engine does not reproduce exactly is run by the real `tokenizers` library instead
(`crayon_backend == "fallback: <json path>"`, with a one-line warning); its encodings are then
real `tokenizers.Encoding` objects.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple, Sequence


from crayon_hf import _cache as cache
from crayon_hf._cache import atomic_write, cache_dir, store
from crayon_hf._progress import compile_progress
from crayon_hf._hf.decoders import ByteLevelDecoder, build_decoder, decode_ids, skip_ids
from crayon_hf._hf.encoding import Encoding
from crayon_hf._hf.errors import UnsupportedComponent
from crayon_hf._hf.postprocess import PaddingParams, TruncationParams, pad_encodings, post_process
from crayon_hf._hf.processors import build_post_processor
from crayon_hf._lazy_numpy import is_ndarray, lazy_numpy
from crayon_hf._threads import default_threads

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

if TYPE_CHECKING:
    from crayon_hf.streaming import EncodeStream

__all__ = ["Tokenizer", "AddedToken", "Encoding", "BatchArrays"]

# Bump when the tokenizer.json cartridge layout or its META changes, so stale caches are rebuilt.
_CACHE_GENERATION = 17  # 17: byte ranks numbered by id where the byte tokens' ids are contiguous
_MAGIC = b"CRAYONHF"


class BatchArrays(NamedTuple):
    """A batch's encodings as flat arrays (`Tokenizer.encode_batch_to_numpy`,
    `CrayonTokenizer.encode_batch_to_numpy`).

    Document i is ``ids[doc_offsets[i]:doc_offsets[i + 1]]`` and ``offsets`` of the same rows:
    the concatenation of ``encode_batch(...)[i].ids`` and ``.offsets``, templates and padding
    included. As on every face's ``encode_batch_to_numpy``, the ids come first and the document
    offsets last: ``ids, *_, doc_offsets = tok.encode_batch_to_numpy(texts)``."""

    ids: np.ndarray  # uint32 (n_tokens,)
    offsets: np.ndarray | None  # int64 (n_tokens, 2): character offsets (start, end) into each document; None with offsets=False
    doc_offsets: np.ndarray  # int64 (n_documents + 1,)


class AddedToken:
    """`tokenizers.AddedToken`: a token added to a tokenizer with `Tokenizer.add_tokens` /
    `add_special_tokens` (that class is accepted too).

    `single_word`: match only where the token is a whole word. `lstrip` / `rstrip`: the match
    takes the whitespace to its left / right. `normalized`: match in normalized text (the token's
    content is normalized too) instead of the raw input; as in tokenizers, it defaults to
    `not special` until it is set explicitly, so a token made special (here or by
    `add_special_tokens`) is matched in the raw text. `special`: skipped by
    ``decode(..., skip_special_tokens=True)``."""

    __slots__ = ("content", "single_word", "lstrip", "rstrip", "_normalized", "special")

    def __init__(
        self,
        content: str | None = None,
        single_word: bool = False,
        lstrip: bool = False,
        rstrip: bool = False,
        normalized: bool | None = None,
        special: bool = False,
    ) -> None:
        """A token with the text `content` and the matching flags described on the class."""
        self.content = "" if content is None else content
        self.single_word = single_word
        self.lstrip = lstrip
        self.rstrip = rstrip
        self._normalized = normalized
        self.special = special

    @property
    def normalized(self) -> bool:
        """Whether the token is matched in normalized text: `not special` until set explicitly."""
        return (not self.special) if self._normalized is None else bool(self._normalized)

    @normalized.setter
    def normalized(self, value: bool) -> None:
        self._normalized = bool(value)

    def _fields(self) -> tuple[Any, ...]:
        return (self.content, self.single_word, self.lstrip, self.rstrip, self.normalized, self.special)

    def __getstate__(self) -> dict[str, Any]:
        return dict(zip(("content", "single_word", "lstrip", "rstrip", "normalized", "special"), self._fields()))

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)

    def __eq__(self, other: object) -> bool:
        # Equal to a `tokenizers.AddedToken` with the same fields too (that class defers to this
        # method when compared with one of these).
        try:
            theirs = tuple(getattr(other, k) for k in ("content", "single_word", "lstrip", "rstrip", "normalized",
                                                         "special"))
        except AttributeError:
            return NotImplemented
        return self._fields() == theirs

    def __hash__(self) -> int:
        return hash(self._fields())

    def __str__(self) -> str:
        return self.content

    def __repr__(self) -> str:
        return (
            f'AddedToken("{self.content}", rstrip={self.rstrip}, lstrip={self.lstrip}, '
            f"single_word={self.single_word}, normalized={self.normalized}, special={self.special})"
        )


def _added_dict(token: Any, special: bool) -> dict[str, Any]:
    if isinstance(token, str):
        # tokenizers: plain strings added as special tokens are not normalized.
        return {"content": token, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": not special, "special": special}
    d = {k: getattr(token, k) for k in ("content", "single_word", "lstrip", "rstrip", "normalized", "special")}
    if special and not d["special"]:
        # As in tokenizers, add_special_tokens marks the caller's token special; a `normalized`
        # that was never set explicitly then follows it (False).
        token.special = True
        d["special"] = True
        d["normalized"] = bool(token.normalized)
    d["special"] = bool(d["special"])
    d["normalized"] = bool(d["normalized"])
    return d


def _reference_tokens(tokens: Any) -> Any:
    """`tokens` for the tokenizers library: this module's AddedTokens become tokenizers' own."""
    if not isinstance(tokens, (list, tuple)) or not any(isinstance(t, AddedToken) for t in tokens):
        return tokens
    real = _reference().AddedToken

    def convert(t: AddedToken) -> Any:
        kwargs = t.__getstate__()
        if t._normalized is None:
            del kwargs["normalized"]  # left to follow `special`, as on the original
        return real(**kwargs)

    return [convert(t) if isinstance(t, AddedToken) else t for t in tokens]


def _reference():
    from crayon_hf import _references

    return _references.tokenizers()


_OWN = object()  # a setting's default: the tokenizer's own


class Tokenizer:
    """A drop-in for `tokenizers.Tokenizer` backed by a cartridge (see the module docstring)."""

    # {add_special_tokens: what `encode` of one str needs (`_single_recipe`), or False where it
    # takes the general path}, made from the attributes in _SINGLE_STATE and dropped whenever one
    # of them is set (`__setattr__`), so that a short text's call reads one dict instead of the
    # tokenizer's state (a ~1 us call spent half its time there).
    _single: dict[Any, Any] | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _SINGLE_STATE:
            object.__setattr__(self, "_single", None)

    # ------------------------------------------------------------------ construction

    def __init__(self, model: Any) -> None:
        """`Tokenizer(model)`, as in tokenizers: a pipeline around a `tokenizers.models` object. It
        runs natively once the pipeline is one the engine reproduces (components can be set
        afterwards, as in tokenizers); until then on the tokenizers library, with a warning."""
        self._adopt(_reference().Tokenizer(model))

    @classmethod
    def _blank(cls) -> Tokenizer:
        self = object.__new__(cls)
        self._engine = None
        self._ref = None
        self._backend = "native"
        self._json_cache = None
        self._cartridge_path = None
        self._cartridge = None
        self._image = None
        self._vocab_cache = None
        self._shadowed_cache = {}
        self._added_list = None
        self._file_added_cache = None
        self._skip_cache = None
        self._encode_special_tokens = False
        self._truncation = None
        self._padding = None
        return self

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """Loads a tokenizer.json (compiled to a cartridge in the cache on first use), a cartridge,
        or a SentencePiece model (converted to the tokenizer.json transformers builds from it).

        The kind of file is read from its content, not its extension. A tokenizer.json with a
        component the engine does not reproduce exactly loads on the `tokenizers` library, with a
        warning (see `crayon_backend`).

        ```
        >>> tok = Tokenizer.from_file("llama3_1/tokenizer.json")
        >>> tok.encode("Hello world").ids
        [128000, 9906, 1917]
        ```
        """
        p = Path(path)
        with open(p, "rb") as f:
            head = f.read(len(_MAGIC))
        if head == _MAGIC:
            return cls.from_cartridge(p)
        import hashlib

        data = p.read_bytes()
        from crayon_hf.conversion.sentencepiece import convert_model, looks_like_model

        if looks_like_model(data[:4096]):
            # The converted tokenizer.json is kept by the model's hash: converting a large model
            # (XLM-R's 250k pieces) takes seconds, loading its cartridge milliseconds.
            key = f"{hashlib.sha256(data).hexdigest()[:32]}-g{_CACHE_GENERATION}.json"
            converted = cache.find(cache_dir(), f"sentencepiece-{cache.label(str(p))}-{key}", key)
            try:
                text = converted.read_bytes()
            except OSError:
                text = convert_model(data, str(p)).encode("utf-8")
                store(converted, text)
            return cls.from_buffer(text, source=str(p))
        return cls.from_buffer(data, source=str(p))

    @classmethod
    def from_str(cls, json_str: str) -> Tokenizer:
        """Loads a tokenizer from the text of a tokenizer.json (as `from_file`, compiled and
        cached by content hash)."""
        return cls.from_buffer(json_str.encode("utf-8"))

    @classmethod
    def from_buffer(cls, buffer: bytes, source: str = "tokenizer.json") -> Tokenizer:
        """Loads a tokenizer from the bytes of a tokenizer.json. `source` names it in error
        messages."""
        tok, path, reason = cls._native(buffer, source)
        return tok if tok is not None else cls._fallback(buffer, path, reason)

    @classmethod
    def _native(cls, buffer: bytes, source: str, exact_floats: bool = False,
                parsed: Callable[[], dict[str, Any]] | None = None) -> tuple[Tokenizer | None, str, str]:
        """The tokenizer for a tokenizer.json, compiled into the cache on first use; or (None,
        JSON path of the component, reason) when the engine does not reproduce it. A refusal is
        remembered in the cache too, so the next load need not parse the file again.
        `exact_floats`: the JSON is a live tokenizer's to_str() (see parse_tokenizer_json).
        `parsed`: gives `buffer` parsed as parse_tokenizer_json would, when the caller has (or
        will need) it anyway; called only if the tokenizer is compiled."""
        import hashlib

        from crayon_hf.conversion.hf_json import (SUPPORT_GENERATION, Unsupported, build_hf_cartridge,
                                                  checked_tokenizer_json, parse_tokenizer_json, plan_native)

        digest = hashlib.sha256(buffer).hexdigest()
        floats = "x" if exact_floats else ""
        key = f"{digest[:32]}{floats}-g{_CACHE_GENERATION}.dat"
        target = cache.find(cache_dir(), f"tokenizer.json-{cache.label(source)}-{key}", key)
        if target.exists():
            try:
                tok = cls.from_cartridge(target)
                if tok._engine is not None:
                    # The deferred checks now (once per file and process): a damaged cache entry
                    # is rebuilt here rather than failing the first encode.
                    tok._engine.ready()
                return tok, "", ""
            except ValueError as e:
                warnings.warn(f"crayon-hf: rebuilding damaged cached cartridge {target}: {e}", stacklevel=3)
        refusal = target.with_name(f"{target.stem}-s{SUPPORT_GENERATION}.unsupported")
        try:
            path, reason = json.loads(refusal.read_text(encoding="utf-8"))
            return None, str(path), str(reason)
        except (OSError, ValueError, TypeError):
            pass
        data = parse_tokenizer_json(buffer, source, exact_floats) if parsed is None else \
            checked_tokenizer_json(parsed(), source)
        try:
            # Post-processor and decoder are Python; check them before compiling anything.
            build_post_processor(data.get("post_processor"))
            build_decoder(data.get("decoder"))
            plan = plan_native(data)
        except (Unsupported, UnsupportedComponent) as e:
            path, reason = getattr(e, "path", "?"), str(e)
            store(refusal, json.dumps([path, reason]).encode("utf-8"))
            return None, path, reason
        with compile_progress(f"compiling {source}"):
            image = build_hf_cartridge(buffer, plan, {"source_sha256": digest}, data)
        if store(target, image):
            return cls.from_cartridge(target), "", ""
        return cls._from_image(image, f"<in-memory {source}>"), "", ""

    @classmethod
    def from_cartridge(cls, path: str | os.PathLike[str], verify: bool = False) -> Tokenizer:
        """Maps a tokenizer.json cartridge. Loading reads its header, section table and META only
        (O(1) in the vocabulary); the checksum and the table checks run once, on first use, and a
        damaged file raises ValueError there. ``verify=True`` runs them now instead."""
        from crayon_hf._native import native

        self = cls._blank()
        self._cartridge_path = os.path.abspath(path)
        return self._open(native.Cartridge.open(self._cartridge_path, verify), path, verify)

    @classmethod
    def _from_image(cls, image: bytes, label: str) -> Tokenizer:
        """A cartridge image held in memory (the cache could not be written)."""
        from crayon_hf._native import native

        self = cls._blank()
        self._image = image
        return self._open(native.Cartridge.from_bytes(image, label, False), label, False)

    def _open(self, cartridge: Any, path: Any, verify: bool) -> Tokenizer:
        from crayon_hf._native import native

        self._cartridge = cartridge
        if "HFHD" not in cartridge.section_ids:
            raise ValueError(
                f"{path} is not a tokenizer.json cartridge (it has no HFHD section); "
                "load tiktoken cartridges with crayon_hf.tiktoken.Encoding.from_cartridge"
            )
        meta = json.loads((cartridge.section("META") or b"{}").decode("utf-8"))
        if (meta.get("engine"), meta.get("format")) not in (("hf", 3), ("hf", 2), ("hf_bpe", 1)):
            raise ValueError(
                f"{path}: unsupported tokenizer.json cartridge layout (engine {meta.get('engine')!r}, "
                f"format {meta.get('format')!r}); rebuild it with `crayon convert tokenizer.json -o {path}`"
            )
        self._meta = meta
        # Read from the file when first needed (HADJ or, before META format 3, META itself): the
        # engine matches added tokens from the cartridge's compiled sets without them.
        self._added_list = None
        self._file_added_cache = None
        self._processor = build_post_processor(meta["post_processor"])
        self._decoder = build_decoder(meta["decoder"])
        self._truncation = TruncationParams.from_json(meta["truncation"])
        self._padding = PaddingParams.from_json(meta["padding"])
        self._model_vocab_size = meta["model_vocab_size"]
        try:
            self._build_engine()
        except native.UnsupportedComponent as e:
            source = self._cartridge.section("TJSN")
            return type(self)._fallback(source, self._component_path(str(e)), str(e))
        if verify:
            self._engine.ready()
        return self

    # ------------------------------------------------------------------ pipeline components

    def _twin(self) -> Any:
        """A `tokenizers.Tokenizer` in this tokenizer's exact state (the fallback's own, or one
        built from `to_str()`)."""
        if self._ref is not None:
            return self._ref
        twin = _reference().Tokenizer.from_str(self.to_str())
        twin.encode_special_tokens = self._encode_special_tokens
        return twin

    def _adopt(self, ref: Any) -> None:
        """Becomes the pipeline of `ref` (a `tokenizers.Tokenizer`): natively when the engine
        reproduces it, else on `ref` itself with the fallback warning."""
        buffer = ref.to_str().encode("utf-8")
        tok, path, reason = Tokenizer._native(buffer, "tokenizer.json", exact_floats=True)
        if tok is None:
            tok = Tokenizer._blank()
            tok._ref = ref
            tok._backend = f"fallback: {path}"
            warnings.warn(f"crayon-hf: {reason}; this tokenizer runs on the tokenizers library", stacklevel=4)
        else:
            tok._encode_special_tokens = ref.encode_special_tokens
        # One assignment, so a thread encoding meanwhile sees the old state or the new, never a mix.
        self.__dict__ = tok.__dict__

    def _set_component(self, name: str, value: Any) -> None:
        # Set on a tokenizers twin (which validates the value and raises tokenizers' errors), then
        # rebuilt: natively if the new pipeline allows, else on the twin. Never ignored.
        ref = self._twin()
        setattr(ref, name, value)
        if self._ref is not None:
            return
        self._adopt(ref)

    @property
    def model(self) -> Any:
        """The model, as a `tokenizers.models` object (a copy for a natively run tokenizer:
        changing its fields does not change this tokenizer; assign `tokenizer.model` instead)."""
        return self._twin().model

    @model.setter
    def model(self, value: Any) -> None:
        self._set_component("model", value)

    @property
    def normalizer(self) -> Any:
        """The normalizer, as a `tokenizers.normalizers` object or None (see `model` on copies)."""
        return self._twin().normalizer

    @normalizer.setter
    def normalizer(self, value: Any) -> None:
        self._set_component("normalizer", value)

    @property
    def pre_tokenizer(self) -> Any:
        """The pre-tokenizer, as a `tokenizers.pre_tokenizers` object or None (see `model`)."""
        return self._twin().pre_tokenizer

    @pre_tokenizer.setter
    def pre_tokenizer(self, value: Any) -> None:
        self._set_component("pre_tokenizer", value)

    @property
    def post_processor(self) -> Any:
        """The post-processor, as a `tokenizers.processors` object or None (see `model`)."""
        return self._twin().post_processor

    @post_processor.setter
    def post_processor(self, value: Any) -> None:
        self._set_component("post_processor", value)

    @property
    def decoder(self) -> Any:
        """The decoder, as a `tokenizers.decoders` object or None (see `model`)."""
        return self._twin().decoder

    @decoder.setter
    def decoder(self, value: Any) -> None:
        self._set_component("decoder", value)

    def train(self, files: list[str], trainer: Any = None) -> None:
        """Trains the model on `files` with a `tokenizers.trainers` trainer (on the tokenizers
        library), then runs natively if the trained pipeline allows."""
        ref = self._twin()
        ref.train(files, trainer)
        self._adopt(ref)

    def train_from_iterator(self, iterator: Any, trainer: Any = None, length: int | None = None) -> None:
        """Trains the model on an iterator of texts (or of batches of texts), as tokenizers does."""
        ref = self._twin()
        ref.train_from_iterator(iterator, trainer, length)
        self._adopt(ref)

    async def async_encode(self, sequence: Any, pair: Any = None, is_pretokenized: bool = False,
                           add_special_tokens: bool = True) -> Any:
        """`encode` in a worker thread (the native engine releases the GIL)."""
        import asyncio

        return await asyncio.to_thread(self.encode, sequence, pair, is_pretokenized, add_special_tokens)

    async def async_encode_batch(self, input: Sequence[Any], is_pretokenized: bool = False,
                                 add_special_tokens: bool = True) -> list[Any]:
        """`encode_batch` in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.encode_batch, input, is_pretokenized, add_special_tokens)

    async def async_encode_batch_fast(self, input: Sequence[Any], is_pretokenized: bool = False,
                                      add_special_tokens: bool = True) -> list[Any]:
        """`encode_batch_fast` in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.encode_batch_fast, input, is_pretokenized, add_special_tokens)

    async def async_decode_batch(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True) -> list[str]:
        """`decode_batch` in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.decode_batch, sequences, skip_special_tokens)

    @classmethod
    def _fallback(cls, buffer: bytes, path: str, reason: str) -> Tokenizer:
        tokenizers = _reference()
        self = cls._blank()
        self._ref = tokenizers.Tokenizer.from_str(buffer.decode("utf-8"))
        self._backend = f"fallback: {path}"
        warnings.warn(f"crayon-hf: {reason}; this tokenizer runs on the tokenizers library", stacklevel=3)
        return self

    def _component_path(self, message: str) -> str:
        for kind, key in (("normalizers", "normalizer_paths"), ("pre_tokenizers", "pre_tokenizer_paths")):
            prefix = f"{kind}["
            if message.startswith(prefix):
                index = int(message[len(prefix):message.index("]")])
                return self._meta[key][index]
        return "pipeline"

    def _normalize_for_match(self, content: str) -> str:
        """An added token's content as the normalizer leaves it: normalized tokens are matched in
        normalized text, so their contents are normalized with the same chain (when the cartridge
        was compiled, and again here only for tokens added since)."""
        if not self._meta["normalizers"]:
            return content
        from crayon_hf._native import native

        return native.hf_normalize(self._components("normalizers"), content)

    def _components(self, kind: str, in_place: bool = False) -> list[dict[str, Any]]:
        """META's components as the native side takes them. `in_place`: for HfEngine, which reads a
        compiled Precompiled section from the cartridge itself; else its charsmap is read here."""
        from crayon_hf._hf.pipeline import engine_components

        return engine_components(self._meta[kind], None if in_place else self._cartridge.section)

    @property
    def _added(self) -> list[dict[str, Any]]:
        """The added tokens as tokenizer.json lists them, with any added or changed since load."""
        if self._added_list is None:
            self._added_list = [dict(t) for t in self._file_added_tokens()]
        return self._added_list

    @_added.setter
    def _added(self, value: list[dict[str, Any]]) -> None:
        self._added_list = value

    def _file_added_tokens(self) -> list[dict[str, Any]]:
        """The added tokens the cartridge was compiled with (never modified)."""
        if self._file_added_cache is None:
            if "added_tokens" in self._meta:  # META format 2 and older
                self._file_added_cache = self._meta["added_tokens"]
            else:
                text = self._cartridge.section("HADJ")
                if text is None:
                    raise ValueError(f"{self._cartridge.label}: section HADJ (the added tokens) is missing; "
                                     "rebuild the cartridge with `crayon convert`")
                self._file_added_cache = json.loads(text)
        return self._file_added_cache

    @property
    def _shadowed(self) -> dict[int, str]:
        """{id: the model's string} for added tokens whose id the model gives another string; read
        from the vocabulary (VSTR) when first needed, never at load."""
        if self._shadowed_cache is None:
            from crayon_hf._hf.pipeline import added_token_rows

            _, _, self._shadowed_cache = added_token_rows(self._added, self._normalize_for_match,
                                                          self._model_strings())
        return self._shadowed_cache

    def _build_engine(self) -> None:
        from crayon_hf._native import native
        from crayon_hf._hf.pipeline import added_token_rows, sentencepiece_shortcut

        # Whether tokens were added (or their flags changed) since load: an overlay over the file.
        self._overlay = self._added_list is not None and self._added_list != self._file_added_tokens()
        if not self._overlay and "HADR" in self._cartridge.section_ids:
            # The matchers compiled into the cartridge: nothing here depends on their size.
            raw = normed = None
            count = self._meta.get("n_added_normalized")
            if not isinstance(count, int):
                raise ValueError(f"{self._cartridge.label}: META does not say how many added tokens are normalized; "
                                 "rebuild the cartridge with `crayon convert`")
            any_normalized = count > 0
            self._shadowed_cache = None
        else:
            raw, normed, self._shadowed_cache = added_token_rows(self._added, self._normalize_for_match,
                                                                 self._model_strings())
            any_normalized = bool(normed)
        normalizers, pre_tokenizers = self._components("normalizers", in_place=True), self._meta["pre_tokenizers"]
        shortcut = None if any_normalized else sentencepiece_shortcut(normalizers, pre_tokenizers)
        if shortcut is not None:
            normalizers, pre_tokenizers = shortcut
        self._engine = native.HfEngine(self._cartridge, normalizers, pre_tokenizers, raw, normed)
        self._vocab_cache = None
        self._token_strings_cache = None
        self._skip_cache = None
        self._skip_mask_cache = None
        self._lazy = None

    # ------------------------------------------------------------------ identity

    @property
    def crayon_backend(self) -> str:
        """"native", or "fallback: <json path of the component>" when `tokenizers` runs it."""
        return self._backend

    @property
    def _source(self) -> dict[str, Any]:
        """The source tokenizer.json, parsed on first use (save, to_str, vocabulary views)."""
        if self._json_cache is None:
            from crayon_hf._native import native

            self._json_cache = json.loads(self._cartridge.section("TJSN"))
        return self._json_cache

    def _data(self) -> dict[str, Any]:
        if self._ref is not None:
            return json.loads(self._ref.to_str())
        import copy

        data = copy.deepcopy(self._source)
        data["added_tokens"] = [dict(t) for t in self._added]
        data["truncation"] = self._truncation.to_json() if self._truncation else None
        data["padding"] = self._padding.to_json() if self._padding else None
        return data

    def to_str(self, pretty: bool = False) -> str:
        """This tokenizer as tokenizer.json text (added tokens, truncation and padding included),
        as `save` writes it."""
        if self._ref is not None:
            return self._ref.to_str(pretty)
        return json.dumps(self._data(), ensure_ascii=False, indent=2 if pretty else None)

    def save(self, path: str | os.PathLike[str], pretty: bool = True) -> None:
        """Writes a tokenizer.json that `tokenizers` loads and tokenizes identically."""
        if self._ref is not None:
            self._ref.save(str(path), pretty)
            return
        atomic_write(path, self.to_str(pretty).encode("utf-8"))

    def save_cartridge(self, path: str | os.PathLike[str]) -> None:
        """Writes the cartridge (.dat). Tokens added after load are compiled into the new file."""
        if self._ref is not None:
            raise ValueError(f"this tokenizer runs on the tokenizers library ({self._backend}); it has no cartridge")
        if not self._overlay and (self._cartridge_path or self._image is not None):
            atomic_write(path, self._cartridge_bytes())
            return
        from crayon_hf.conversion.hf_json import build_hf_cartridge, plan_native

        text = json.dumps(self._data(), ensure_ascii=False).encode("utf-8")
        data = json.loads(text)
        atomic_write(path, build_hf_cartridge(text, plan_native(data), {}))

    def _cartridge_bytes(self) -> bytes:
        """The bytes of the cartridge this tokenizer maps (a file, or an image held in memory)."""
        if self._image is not None:
            return self._image
        return Path(self._cartridge_path).read_bytes()

    def encode_stream(self) -> EncodeStream:
        """A stream: `feed(text)` / `feed_bytes(data)` return the ids final so far, `finish()` the
        rest; together they equal the one-shot encoding (crayon_hf.streaming.EncodeStream)."""
        from crayon_hf.streaming import EncodeStream

        return EncodeStream(self)

    def encode_iter(self, chunks: Iterable[Any]) -> Iterator[int]:
        """Yields the ids of the text that `chunks` (str or UTF-8 bytes) make up, as they become final."""
        from crayon_hf.streaming import encode_iter

        return encode_iter(self, chunks)

    def __getstate__(self) -> dict[str, Any]:
        if self._ref is not None:
            return {"json": self._ref.to_str()}
        if not self._overlay and self._cartridge_path:
            return {"cartridge": self._cartridge_path, "truncation": self._truncation, "padding": self._padding,
                    "encode_special_tokens": self._encode_special_tokens}
        return {"json": self.to_str()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "cartridge" in state:
            other = Tokenizer.from_cartridge(state["cartridge"])
            other._truncation, other._padding = state["truncation"], state["padding"]
            other._encode_special_tokens = state["encode_special_tokens"]
        else:
            other = Tokenizer.from_str(state["json"])
        self.__dict__.update(other.__dict__)
        self._single = None

    # ------------------------------------------------------------------ vocabulary

    def _model_strings(self) -> list[str | None]:
        """The model's token strings by id (None where the model has no token), from VSTR."""
        if getattr(self, "_model_strings_cache", None) is None:
            from crayon_hf._native import native

            self._model_strings_cache = json.loads(self._cartridge.section("VSTR"))
        return self._model_strings_cache

    def _model_vocab(self) -> dict[str, int]:
        if getattr(self, "_model_vocab_cache", None) is None:
            self._model_vocab_cache = {t: i for i, t in enumerate(self._model_strings()) if t is not None}
        return self._model_vocab_cache

    def _vocab(self) -> list[str | None]:
        """Token string by id, added tokens included (None for ids without a token)."""
        if self._vocab_cache is None:
            strings = list(self._model_strings())
            for t in self._added:
                if t["id"] >= len(strings):
                    strings.extend([None] * (t["id"] + 1 - len(strings)))
                # As in tokenizers: a normalized token's string is its normalized content.
                strings[t["id"]] = self._normalize_for_match(t["content"]) if t.get("normalized", True) else t["content"]
            self._vocab_cache = strings
        return self._vocab_cache

    def _token_strings(self) -> list[str | None]:
        """Token strings by id as encodings show them: `_vocab()`, except that an id which is both a
        model token and an added token with another string keeps the model's string (the added
        token's matches carry their own text from the engine)."""
        if not self._shadowed:
            return self._vocab()
        if getattr(self, "_token_strings_cache", None) is None:
            strings = list(self._vocab())
            for i, s in self._shadowed.items():
                strings[i] = s
            self._token_strings_cache = strings
        return self._token_strings_cache

    def token_to_id(self, token: str) -> int | None:
        """The id of `token` (an added token or one of the model's), or None if it has none."""
        if self._ref is not None:
            return self._ref.token_to_id(token)
        for t in self._added:
            if t["content"] == token:
                return t["id"]
        return self._model_vocab().get(token)

    def id_to_token(self, id: int) -> str | None:
        """The token string of `id`, or None for an id outside the vocabulary."""
        if self._ref is not None:
            return self._ref.id_to_token(id)
        v = self._vocab()
        return v[id] if 0 <= id < len(v) else None

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        """The vocabulary as ``{token: id}``, added tokens included unless `with_added_tokens` is
        False."""
        if self._ref is not None:
            return self._ref.get_vocab(with_added_tokens)
        vocab = dict(self._model_vocab())
        if with_added_tokens:
            for t in self._added:
                vocab[t["content"]] = t["id"]
        return vocab

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        """The number of tokens in the vocabulary, added tokens included unless
        `with_added_tokens` is False (then: the model's size)."""
        if self._ref is not None:
            return self._ref.get_vocab_size(with_added_tokens)
        if not with_added_tokens:
            return self._model_vocab_size
        return len(self.get_vocab(True))

    def get_added_tokens_decoder(self) -> dict[int, Any]:
        """The added tokens as ``{id: tokenizers.AddedToken}``, sorted by id (needs the
        `tokenizers` library, whose AddedToken it returns)."""
        if self._ref is not None:
            return self._ref.get_added_tokens_decoder()
        tokenizers = _reference()
        return {
            t["id"]: tokenizers.AddedToken(
                t["content"], single_word=t["single_word"], lstrip=t["lstrip"], rstrip=t["rstrip"],
                normalized=t["normalized"], special=t["special"],
            )
            for t in sorted(self._added, key=lambda t: t["id"])
        }

    def _add(self, tokens: Iterable[Any], special: bool) -> int:
        added = 0
        model = self._model_vocab()
        for token in tokens:
            d = _added_dict(token, special)
            if not d["content"]:
                continue
            existing = next((t for t in self._added if t["content"] == d["content"]), None)
            if existing is not None:
                existing.update({k: v for k, v in d.items() if k != "content"})
                continue
            if d["content"] in model:
                new_id = model[d["content"]]
            else:
                ids = [t["id"] for t in self._added]
                size = self._model_vocab_size
                new_id = size if not ids or max(ids) < size else max(ids) + 1
            self._added.append({"id": new_id, **d})
            added += 1
        self._build_engine()
        return added

    def add_tokens(self, tokens: Sequence[Any]) -> int:
        """Adds tokens (str or `AddedToken`) matched before the model runs; returns how many
        were new. They live in an overlay: the mapped cartridge is never modified, and
        `save_cartridge` writes a new file with them compiled in."""
        if self._ref is not None:
            return self._ref.add_tokens(_reference_tokens(tokens))
        return self._add(tokens, special=False)

    def add_special_tokens(self, tokens: Sequence[Any]) -> int:
        """As `add_tokens`, marking the tokens special (skipped by ``decode`` with
        ``skip_special_tokens=True``; plain strings are then not normalized)."""
        if self._ref is not None:
            added = self._ref.add_special_tokens(_reference_tokens(tokens))
            for t in tokens:
                if isinstance(t, AddedToken):
                    t.special = True  # as tokenizers marks the caller's tokens
            return added
        return self._add(tokens, special=True)

    @property
    def encode_special_tokens(self) -> bool:
        """Whether special tokens in the input are encoded as ordinary text (split by the model)
        instead of matched as tokens. Settable, as in `tokenizers`."""
        if self._ref is not None:
            return self._ref.encode_special_tokens
        return self._encode_special_tokens

    @encode_special_tokens.setter
    def encode_special_tokens(self, value: bool) -> None:
        if self._ref is not None:
            self._ref.encode_special_tokens = value
        else:
            self._encode_special_tokens = bool(value)

    # ------------------------------------------------------------------ truncation and padding

    def enable_truncation(self, max_length: int, stride: int = 0, strategy: str = "longest_first",
                          direction: str = "right") -> None:
        """Truncates every later encoding to `max_length` ids (special tokens included), keeping
        the rest as `Encoding.overflowing` windows that overlap by `stride` ids. `strategy`:
        "longest_first", "only_first" or "only_second" (for pairs); `direction`: "right" or
        "left". Raises ``ValueError`` where `tokenizers` does (a length too small for the
        post-processor's special tokens, for instance)."""
        if self._ref is not None:
            self._ref.enable_truncation(max_length, stride=stride, strategy=strategy, direction=direction)
            return
        params = TruncationParams.from_kwargs(max_length, stride=stride, strategy=strategy, direction=direction)
        params.validate(self._processor.added_tokens(False) if self._processor else 0)
        self._truncation = params

    def no_truncation(self) -> None:
        """Turns truncation off."""
        if self._ref is not None:
            self._ref.no_truncation()
        self._truncation = None

    @property
    def truncation(self) -> dict[str, Any] | None:
        """The truncation settings as `tokenizers` reports them, or None when off."""
        if self._ref is not None:
            return self._ref.truncation
        return self._truncation.as_dict() if self._truncation else None

    def enable_padding(self, direction: str = "right", pad_id: int = 0, pad_type_id: int = 0,
                       pad_token: str = "[PAD]", length: int | None = None,
                       pad_to_multiple_of: int | None = None) -> None:
        """Pads every later batch (`encode_batch`) to its longest encoding, or every encoding to
        `length` when given, rounded up to `pad_to_multiple_of`; padding uses `pad_id`,
        `pad_token` and `pad_type_id`, on the `direction` side ("right" or "left")."""
        if self._ref is not None:
            self._ref.enable_padding(direction=direction, pad_id=pad_id, pad_type_id=pad_type_id,
                                     pad_token=pad_token, length=length, pad_to_multiple_of=pad_to_multiple_of)
            return
        self._padding = PaddingParams.from_kwargs(direction=direction, pad_id=pad_id, pad_type_id=pad_type_id,
                                                  pad_token=pad_token, length=length,
                                                  pad_to_multiple_of=pad_to_multiple_of)

    def no_padding(self) -> None:
        """Turns padding off."""
        if self._ref is not None:
            self._ref.no_padding()
        self._padding = None

    @property
    def padding(self) -> dict[str, Any] | None:
        """The padding settings as `tokenizers` reports them, or None when off."""
        if self._ref is not None:
            return self._ref.padding
        return self._padding.as_dict() if self._padding else None

    def num_special_tokens_to_add(self, is_pair: bool) -> int:
        """How many ids the post-processor adds to one sequence, or to a pair when `is_pair`."""
        if self._ref is not None:
            return self._ref.num_special_tokens_to_add(is_pair)
        return self._processor.added_tokens(is_pair) if self._processor else 0

    # ------------------------------------------------------------------ encoding

    def _raw(self, sequence: Any, is_pretokenized: bool, type_id: int, encode_special: bool | None = None) -> Encoding:
        vocab = self._vocab_lazy
        special = self._encode_special_tokens if encode_special is None else encode_special
        if not is_pretokenized:
            if not isinstance(sequence, str):
                raise TypeError(f"TextInputSequence must be str, not {type(sequence).__name__}")
            return _raw_text(self._engine, vocab, sequence, special, type_id)
        if isinstance(sequence, str) or not isinstance(sequence, (list, tuple)):
            raise TypeError("PreTokenizedInputSequence must be a list or tuple of str")
        parts = [self._engine.encode(w, special) for w in sequence]
        ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.uint32)
        offsets = np.concatenate([p[1] for p in parts]) if parts else np.zeros((0, 2), np.int64)
        words = np.concatenate([np.full(len(p[0]), i, np.int64) for i, p in enumerate(parts)]) if parts else np.zeros(0, np.int64)
        tokens = None
        if any(p[3] for p in parts):
            tokens = [vocab[i] for i in ids.tolist()]
            base = 0
            for p in parts:
                for i, s in p[3]:
                    tokens[base + i] = s
                base += len(p[0])
        return Encoding.from_arrays(ids, offsets, words, None, vocab, type_id, tokens)

    @property
    def _vocab_lazy(self) -> Sequence[str | None]:
        # One object per tokenizer state: post-processors cache per-vocabulary tables by identity.
        if self._vocab_cache is not None and not self._shadowed:
            return self._vocab_cache
        lazy = getattr(self, "_lazy", None)
        if lazy is None:
            lazy = self._lazy = _LazyVocab(self)
        return lazy

    def encode(self, sequence: Any, pair: Any = None, is_pretokenized: bool = False,
               add_special_tokens: bool = True) -> Encoding:
        """Encodes a sequence, or a pair of sequences, into an `Encoding`.

        `sequence` and `pair` are str, or lists of words when `is_pretokenized`. The
        post-processor adds its special tokens unless `add_special_tokens` is False; truncation
        and padding apply as set by `enable_truncation` / `enable_padding`. Ids, tokens, offsets
        (in characters) and masks are those of `tokenizers`.

        ```
        >>> enc = tok.encode("Hello world")
        >>> enc.ids, enc.tokens, enc.offsets
        ([128000, 9906, 1917], ['<|begin_of_text|>', 'Hello', 'Ġworld'], [(0, 0), (0, 5), (5, 11)])
        ```
        """
        if type(sequence) is str and pair is None and not is_pretokenized:
            recipes = self._single
            recipe = recipes.get(add_special_tokens) if recipes is not None else None
            if recipe is None:
                recipe = self._single_recipe(add_special_tokens)
            if recipe:
                try:
                    return recipe[0].encode_lazy(sequence, recipe[1])
                except UnicodeEncodeError:  # a lone surrogate: tokenizers cannot extract the str
                    raise TypeError(_SEQUENCE_ERROR[False]) from None
        if self._ref is not None:
            return self._ref.encode(sequence, pair, is_pretokenized, add_special_tokens)
        if type(sequence) is str and pair is None and not is_pretokenized and self._padding_is_none_for_one():
            lazy = self._encode_lazy(sequence, add_special_tokens, self._truncation)
            if lazy is not None:
                return lazy
        try:
            first = self._raw(sequence, is_pretokenized, 0)
            second = self._raw(pair, is_pretokenized, 1) if pair is not None else None
        except UnicodeEncodeError:  # a lone surrogate: tokenizers cannot extract the str
            raise TypeError(_SEQUENCE_ERROR[is_pretokenized]) from None
        return post_process(first, second, add_special_tokens, self._truncation, self._padding, self._processor)

    def _encode_batch_lazy(self, items: list[str], add_special_tokens: bool, encode_special: bool,
                           threads: int) -> list[Encoding] | None:
        """`_encode_lazy` for a batch of single texts (no truncation or padding): the ids of every
        text on native threads, each `Encoding` built in full when first read."""
        processor = self._processor
        plan = _id_plan(processor, add_special_tokens)
        if plan is None:
            return None
        engine, vocab = self._engine, self._vocab_lazy

        def build(sequence: str) -> Encoding:
            raw = _raw_text(engine, vocab, sequence, encode_special, 0)
            return post_process(raw, None, add_special_tokens, None, None, processor)

        try:
            return engine.encode_batch_id_lists(items, encode_special, threads, *plan, lazy=(Encoding, build))
        except UnicodeEncodeError:
            raise TypeError(_INPUT_ERROR[False]) from None

    def _padding_is_none_for_one(self) -> bool:
        """Whether padding leaves a single sequence as it is: none, or to the longest of a batch
        (of one)."""
        padding = self._padding
        return padding is None or (padding.length is None and not padding.pad_to_multiple_of)

    def _lazy_build(self, add_special_tokens: bool, truncation: TruncationParams | None, *,
                    padding: Any = _OWN, special: Any = _OWN) -> Any:
        """`build(text)` of a lazy `Encoding` (`Encoding._lazy`): the eager path with the
        tokenizer's state of now, or the `padding` and `special` (encode_special_tokens) given."""
        engine, vocab, processor = self._engine, self._vocab_lazy, self._processor
        if padding is _OWN:
            padding = self._padding
        if special is _OWN:
            special = self._encode_special_tokens

        def build(sequence: str) -> Encoding:
            raw = _raw_text(engine, vocab, sequence, special, 0)
            return post_process(raw, None, add_special_tokens, truncation, padding, processor)

        return build

    def _single_recipe(self, add_special_tokens: Any) -> Any:
        """(engine, (encode_special_tokens, ids before, ids after, Encoding, build)): how `encode`
        makes a lazy `Encoding` of one str in one native call (`HfEngine.encode_lazy`), or False
        where the state needs the general path (the reference library, truncation, padding to a
        length, a processor without a fixed prefix and suffix). Kept in `_single` until the state
        changes."""
        recipes = self._single
        if recipes is None:  # taken before the state is read: a change meanwhile orphans this dict
            recipes = self._single = {}
        recipe: Any = False
        if self._ref is None and self._truncation is None and self._padding_is_none_for_one():
            plan = _id_plan(self._processor, add_special_tokens)
            if plan is not None:
                build = self._lazy_build(add_special_tokens, None)
                recipe = (self._engine, (bool(self._encode_special_tokens), *plan, Encoding, build))
        recipes[add_special_tokens] = recipe
        return recipe

    def _encode_lazy(self, sequence: str, add_special_tokens: bool,
                     truncation: TruncationParams | None = None) -> Encoding | None:
        """`encode(sequence)` with ids first: the engine gives the ids alone (no offsets, words or
        token strings), the processor's fixed prefix and suffix go around them, and everything
        else is built when first read, by the eager path on the same text with the tokenizer's
        state of this call (`Encoding._lazy`). None where the processor has no fixed layout.

        With right truncation the engine stops once it has one id more than the sequence keeps
        (exact: RawEncoding::limit in native/engines/hf_engine.h), so a long text truncated to a
        few hundred tokens costs those tokens, not the text; `overflowing` and the other fields
        are built from the whole text when read. None where truncation would raise (the eager
        path raises tokenizers' error) or cuts from the left."""
        processor = self._processor
        plan = _id_plan(processor, add_special_tokens)
        if plan is None:
            return None
        before, after = plan
        keep = limit = -1
        if truncation is not None:
            if truncation.direction != "right":
                return None
            keep = _sequence_room(truncation, processor, add_special_tokens)
            if keep is not None:
                limit = keep + 1
        engine, special = self._engine, self._encode_special_tokens
        build = self._lazy_build(add_special_tokens, truncation)
        try:
            if limit < 0:  # the ids and the Encoding in one native call
                return engine.encode_lazy(sequence, (bool(special), before, after, Encoding, build))
            ids = engine.encode_id_list(sequence, special, [], [], limit)
        except UnicodeEncodeError:  # a lone surrogate: tokenizers cannot extract the str
            raise TypeError(_SEQUENCE_ERROR[False]) from None
        if len(ids) > keep:
            if truncation.strategy == "only_second" or (keep > 0 and truncation.stride >= keep):
                return None
            del ids[keep:]
        return Encoding._lazy(before + ids + after, build, sequence)

    def encode_batch(self, input: Sequence[Any], is_pretokenized: bool = False,
                     add_special_tokens: bool = True) -> list[Encoding]:
        """Encodes a list of inputs (each a sequence or a ``(sequence, pair)`` tuple) on native
        threads with the GIL released; padding, when enabled, pads to the longest in the batch.
        For throughput, `encode_batch_to_numpy` skips the `Encoding` objects."""
        if self._ref is not None:
            return self._ref.encode_batch(input, is_pretokenized, add_special_tokens)
        return self._encode_batch_with(input, is_pretokenized, add_special_tokens, self._truncation, self._padding,
                                       self._encode_special_tokens)

    def encode_batch_fast(self, input: Sequence[Any], is_pretokenized: bool = False,
                          add_special_tokens: bool = True) -> list[Any]:
        """`encode_batch` without offsets, as tokenizers' `encode_batch_fast`: the tokens of the
        text have offsets (0, 0), an empty string and no word index; those the post-processor and
        padding add are as in `encode_batch`."""
        if self._ref is not None:
            return self._ref.encode_batch_fast(input, is_pretokenized, add_special_tokens)
        out = []
        for x in input:
            a, b = _batch_item(x, is_pretokenized)
            try:
                first = _without_offsets(self._raw(a, is_pretokenized, 0), 0)
                second = _without_offsets(self._raw(b, is_pretokenized, 1), 1) if b is not None else None
            except UnicodeEncodeError:
                raise TypeError(_SEQUENCE_ERROR[is_pretokenized] if b is not None
                                else _INPUT_ERROR[is_pretokenized]) from None
            out.append(post_process(first, second, add_special_tokens, self._truncation, None, self._processor))
        if self._padding is not None:
            pad_encodings(out, self._padding)
        return out

    def encode_batch_to_numpy(self, input: Sequence[str], add_special_tokens: bool = True,
                              device: str = "cpu", *, offsets: bool = True) -> BatchArrays:
        """`encode_batch(input, add_special_tokens=...)` as three flat arrays, without an `Encoding`
        or a Python int per token: ids, character offsets and each document's span (see
        `BatchArrays`). Truncation, the post-processor's template and padding apply as in
        `encode_batch`; overflowing tokens are not included.

        `offsets=False`: ids and document spans only (``offsets`` is None). The engine then finds
        no character offsets, which on byte-level BPE is 1.1x-1.5x faster (most on text outside
        ASCII):

        ```
        >>> ids, offsets, doc_offsets = tok.encode_batch_to_numpy(["Hello world", "hi"], offsets=False)
        >>> offsets is None, doc_offsets.tolist()
        (True, [0, 3, 5])
        ```

        Single sequences are encoded natively (GIL released, `CRAYON_NUM_THREADS` /
        `RAYON_NUM_THREADS` threads) and assembled in place; other inputs (pairs, a processor
        without a fixed layout, fixed padding shorter than a document) go through `encode_batch`.

        `device`: ``"cpu"``, ``"cuda"`` / ``"cuda:N"`` (the pieces are encoded on that GPU, the same
        arrays come back; byte-level BPE vocabularies whose merges are rank-BPE, see
        `crayon_hf.cuda`), or ``"auto"`` (the GPU for large batches where one is available).
        """
        if self._ref is not None:
            if device != "cpu":
                raise NotImplementedError("this tokenizer runs on `tokenizers` (no native engine), so it has no GPU path")
            flat = _flatten(self._ref.encode_batch(input, False, add_special_tokens))
            return flat if offsets else flat._replace(offsets=None)
        return self._encode_batch_to_numpy_with(input, add_special_tokens, self._truncation, self._padding,
                                                self._encode_special_tokens, device=device, offsets=offsets)

    def count(self, sequence: str, add_special_tokens: bool = True) -> int:
        """``len(encode(sequence, add_special_tokens=...).ids)`` without building the `Encoding`:
        the text's tokens plus those the post-processor adds (``[CLS]``/``[SEP]``, ``<s>``, ...)
        unless `add_special_tokens` is False. Truncation and padding are not applied: the count is
        the full length, the number a context budget compares with `max_length`.

        ```
        >>> tok.count("Hello world"), tok.count("Hello world", add_special_tokens=False)
        (3, 2)
        ```
        """
        return self.count_batch([sequence], add_special_tokens)[0]

    def count_batch(self, input: Sequence[str], add_special_tokens: bool = True) -> list[int]:
        """`count` of every text, encoded in parallel (native threads, GIL released) with only
        the lengths kept."""
        return self._count_batch_with(list(input), add_special_tokens, self._encode_special_tokens)

    def _count_batch_with(self, texts: list[str], add_special_tokens: bool, encode_special: bool) -> list[int]:
        """count_batch with an explicit `encode_special_tokens` (CrayonTokenizer's split_special_tokens)."""
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(_INPUT_ERROR[False])
        if self._ref is not None:
            # tokenizers has no count: its encodings' lengths, without truncation or padding.
            ref = self._ref
            if ref.truncation is not None or ref.padding is not None:
                ref = type(ref).from_str(ref.to_str())
                ref.no_truncation()
                ref.no_padding()
            return [len(e.ids) for e in ref.encode_batch(texts, add_special_tokens=add_special_tokens)]
        try:
            counts = self._engine.count_batch(texts, encode_special, default_threads()).tolist()
        except UnicodeEncodeError:
            raise TypeError(_INPUT_ERROR[False]) from None
        added = self.num_special_tokens_to_add(False) if add_special_tokens else 0
        return [n + added for n in counts]

    def _encode_batch_to_numpy_with(self, input: Sequence[Any], add_special_tokens: bool,
                                    truncation: TruncationParams | None, padding: PaddingParams | None,
                                    encode_special: bool, num_threads: int | None = None,
                                    device: str = "cpu", offsets: bool = True) -> BatchArrays:
        """encode_batch_to_numpy with explicit settings instead of this tokenizer's state, like
        `_encode_batch_with`."""
        texts = list(input)
        threads = default_threads() if num_threads is None else num_threads
        singles = bool(texts) and all(isinstance(t, str) for t in texts)
        raw_batch = self._device_raw_batch(device, texts if singles else [])
        flat = None
        if singles:
            from crayon_hf._hf.batch import encode_singles

            batch = encode_singles(self, texts, add_special_tokens, truncation, padding, encode_special, threads,
                                   offsets=offsets, flat=True, raw_batch=raw_batch)
            if batch is not None:
                flat = BatchArrays(*(batch if isinstance(batch, tuple) else batch.flat()))
        if flat is None:
            flat = _flatten(self._encode_batch_with(texts, False, add_special_tokens, truncation, padding,
                                                    encode_special, threads))
        return flat if offsets else flat._replace(offsets=None)

    def _device_raw_batch(self, device: str, texts: list[str]) -> Any:
        """The raw-batch maker of encode_singles for `device` (None: the CPU engine's). An explicit
        GPU on a tokenizer without the batch stages raises; "auto" falls back to the CPU."""
        if device == "cpu":
            return None
        from crayon_hf import cuda

        index = cuda.resolve_device(device, cuda.batch_bytes(texts))
        if index is None:
            return None
        if self._engine.piece_engine() is None:
            if device == "auto":
                return None
            raise NotImplementedError(
                "this tokenizer has no GPU path: it needs byte-level BPE whose merges are rank-BPE, a "
                "pre-tokenizer that streams (a Split regex or ByteLevel scanner), and no normalized added "
                "tokens; use device='cpu' (docs/cuda.md)")

        def raw_batch(texts: list[str], encode_special: bool, threads: int, offsets: bool, limit: int) -> Any:
            return cuda.hf_raw_batch(self, index, texts, encode_special, threads, offsets, limit)

        return raw_batch

    def _encode_batch_with(self, input: Sequence[Any], is_pretokenized: bool, add_special_tokens: bool,
                           truncation: TruncationParams | None, padding: PaddingParams | None,
                           encode_special: bool, num_threads: int | None = None) -> list[Encoding]:
        """encode_batch with explicit settings instead of this tokenizer's state (CrayonTokenizer
        calls it from several threads with per-call truncation and padding)."""
        items = list(input)
        singles = all(isinstance(x, str) for x in items)
        if singles and not is_pretokenized and truncation is None and padding is None and items:
            threads = default_threads() if num_threads is None else num_threads
            lazy = self._encode_batch_lazy(items, add_special_tokens, encode_special, threads)
            if lazy is not None:
                return lazy
        if singles and not is_pretokenized:
            from crayon_hf._hf.postprocess import post_process_batch

            # The whole batch at once: one raw matrix (views per document), one offset trim.
            try:
                threads = default_threads() if num_threads is None else num_threads
                results = self._engine.encode_batch(items, encode_special, threads)
            except UnicodeEncodeError:
                raise TypeError(_INPUT_ERROR[False]) from None
            raws = Encoding._from_native_batch(results, self._vocab_lazy)
            out = post_process_batch(raws, add_special_tokens, truncation, self._processor)
        else:
            out = []
            for x in items:
                a, b = _batch_item(x, is_pretokenized)
                try:
                    first = self._raw(a, is_pretokenized, 0, encode_special)
                    second = self._raw(b, is_pretokenized, 1, encode_special) if b is not None else None
                except UnicodeEncodeError:  # as tokenizers words it, by where extraction failed
                    raise TypeError(_SEQUENCE_ERROR[is_pretokenized] if b is not None
                                    else _INPUT_ERROR[is_pretokenized]) from None
                out.append(post_process(first, second, add_special_tokens, truncation, None, self._processor))
        if padding is not None:
            pad_encodings(out, padding)
        return out

    # ------------------------------------------------------------------ decoding

    def _skip(self) -> frozenset[int]:
        if self._skip_cache is None:
            self._skip_cache = skip_ids(self._vocab(), [t["content"] for t in self._added if t["special"]])
        return self._skip_cache

    def _skip_mask(self) -> bytes:
        if getattr(self, "_skip_mask_cache", None) is None:
            mask = bytearray(self._engine.n_ids)
            for i in self._skip():
                if i < len(mask):
                    mask[i] = 1
            self._skip_mask_cache = bytes(mask)
        return self._skip_mask_cache

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Decodes ids into text with the tokenizer's decoder, leaving out special tokens unless
        `skip_special_tokens` is False.

        ```
        >>> tok.decode([128000, 9906, 1917])
        'Hello world'
        ```
        """
        if self._ref is not None:
            return self._ref.decode(ids, skip_special_tokens)
        if type(self._decoder) is ByteLevelDecoder and not self._overlay and self._engine.byte_level:
            # The common case, natively: the cartridge holds each id's decoded bytes.
            try:
                raw = self._engine.decode_byte_level(ids, self._skip_mask() if skip_special_tokens else b"")
            except (OverflowError, TypeError):
                pass  # the Python path raises tokenizers' errors
            else:
                return raw.decode("utf-8", "replace")
        return decode_ids(ids, skip_special_tokens, self._vocab(), self._skip(), self._decoder)

    def decode_batch(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True) -> list[str]:
        """Decodes each list of ids, as `decode`."""
        if self._ref is not None:
            return self._ref.decode_batch(sequences, skip_special_tokens)
        return [self.decode(s, skip_special_tokens) for s in sequences]

    def post_process(self, encoding: Encoding, pair: Encoding | None = None,
                     add_special_tokens: bool = True) -> Encoding:
        """Applies truncation, the post-processor (its special tokens unless
        `add_special_tokens` is False) and padding to the model's encoding of a sequence, or of
        a pair, as `encode` does after the model."""
        if self._ref is not None:
            return self._ref.post_process(encoding, pair, add_special_tokens)
        return post_process(encoding, pair, add_special_tokens, self._truncation, self._padding, self._processor)

    def __str__(self) -> str:
        try:
            return str(self._twin())
        except Exception:  # noqa: BLE001 - str() must not fail where tokenizers cannot load the file
            return self._short_repr()

    def __repr__(self) -> str:
        # tokenizers' own repr (the whole pipeline), when the library is there to write it.
        try:
            return repr(self._twin())
        except Exception:  # noqa: BLE001 - repr() must not fail where tokenizers cannot load the file
            return self._short_repr()

    def _short_repr(self) -> str:
        return f"crayon_hf.Tokenizer(vocab_size={self.get_vocab_size()}, crayon_backend={self._backend!r})"


# tokenizers' messages when an input cannot be extracted, by is_pretokenized: one sequence, and
# one input of a batch (a sequence or a pair).
_SEQUENCE_ERROR = {False: "TextInputSequence must be str",
                   True: "PreTokenizedInputSequence must be Union[List[str], Tuple[str]]"}
_INPUT_ERROR = {
    False: "TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]",
    True: "PreTokenizedEncodeInput must be Union[PreTokenizedInputSequence, Tuple[PreTokenizedInputSequence, "
          "PreTokenizedInputSequence]]",
}


# What Tokenizer._single_recipe reads: setting one of these drops the recipes.
_SINGLE_STATE = frozenset(("_engine", "_ref", "_processor", "_truncation", "_padding", "_encode_special_tokens",
                           "_vocab_cache", "_shadowed_cache", "_lazy", "__dict__"))


def _id_plan(processor: Any, add_special_tokens: bool) -> tuple[list[int], list[int]] | None:
    """`crayon_hf._hf.batch.id_plan`, imported on the first call (not with this module, which loads
    without the native engine) and then called directly: an import statement per `encode` was a
    quarter of a short text's call."""
    global _id_plan
    from crayon_hf._hf.batch import id_plan

    _id_plan = id_plan
    return id_plan(processor, add_special_tokens)


def _sequence_room(truncation: TruncationParams, processor: Any, add_special_tokens: bool) -> int | None:
    """`crayon_hf._hf.batch.sequence_room`, imported on the first call and then called directly
    (as `_id_plan`)."""
    global _sequence_room
    from crayon_hf._hf.batch import sequence_room

    _sequence_room = sequence_room
    return sequence_room(truncation, processor, add_special_tokens)


def _raw_text(engine: Any, vocab: Sequence[str | None], sequence: str, special: bool, type_id: int) -> Encoding:
    """The engine's encoding of one text, before post-processing."""
    ids, offsets, words, texts = engine.encode(sequence, special)
    tokens = _token_strings(vocab, ids.tolist(), texts) if texts else None
    return Encoding.from_arrays(ids, offsets, words, None, vocab, type_id, tokens)


def raw_tokens(tok: Tokenizer, sequence: str, special: bool) -> list[str | None]:
    """The tokens of the engine's encoding of one text, before post-processing, for a native
    `tok` (the transformers face's `tokenize`)."""
    ids, _, _, texts = tok._engine.encode(sequence, special)
    return _token_strings(tok._vocab_lazy, ids.tolist(), texts)


def _token_strings(vocab: Sequence[str | None], ids: list[int], texts: list[tuple[int, str]]) -> list[str | None]:
    """The vocabulary's strings of `ids`, with the engine's own texts for the tokens it names
    ((index, string) pairs: added tokens whose string is not their content, Unigram's unknowns)."""
    lookup = getattr(vocab, "lookup", None)  # the tokenizer's vocabulary looks many ids up at once
    tokens = lookup(ids) if lookup is not None else [vocab[i] for i in ids]
    for i, s in texts:
        tokens[i] = s
    return tokens


def _flatten(encodings: Sequence[Any]) -> BatchArrays:
    """BatchArrays of a list of encodings: ours (numpy rows inside) or `tokenizers.Encoding`."""
    doc_offsets = np.zeros(len(encodings) + 1, dtype=np.int64)
    np.cumsum(np.array([len(e) for e in encodings], dtype=np.int64), out=doc_offsets[1:])
    total = int(doc_offsets[-1])
    ids = np.empty(total, dtype=np.uint32)
    offsets = np.empty((total, 2), dtype=np.int64)
    for e, a, b in zip(encodings, doc_offsets.tolist(), doc_offsets[1:].tolist()):
        if isinstance(e, Encoding):
            ids[a:b] = e.ids_array
            offsets[a:b] = e.offsets_array
        elif b > a:
            ids[a:b] = e.ids
            offsets[a:b] = e.offsets
    return BatchArrays(ids, offsets, doc_offsets)


def _without_offsets(raw: Encoding, type_id: int) -> Encoding:
    """A raw encoding as tokenizers' fast path leaves it: ids only (offsets 0, tokens '', no words)."""
    n = len(raw.ids_array)
    return Encoding.from_arrays(raw.ids_array, np.zeros((n, 2), np.int64), None, None, None, type_id, [""] * n)


def _batch_item(x: Any, is_pretokenized: bool) -> tuple[Any, Any]:
    """One input of `encode_batch` as (sequence, pair or None), with tokenizers' type errors."""
    if is_ndarray(x):
        # A row of a 2-D numpy array of str: (text, pair), or the words of a pre-tokenized input.
        x = x.tolist()
    if not is_pretokenized:
        if isinstance(x, str):
            return x, None
        if isinstance(x, (list, tuple)) and len(x) == 2:
            if not all(isinstance(s, str) for s in x):
                raise TypeError(_SEQUENCE_ERROR[False])
            return x[0], x[1]
        raise TypeError(_INPUT_ERROR[False])
    if isinstance(x, (list, tuple)):
        if all(isinstance(w, str) for w in x):
            return x, None
        if len(x) == 2:
            if not all(isinstance(s, (list, tuple)) and all(isinstance(w, str) for w in s) for s in x):
                raise TypeError(_SEQUENCE_ERROR[True])
            return x[0], x[1]
    raise TypeError(_INPUT_ERROR[True])


class _LazyVocab(Sequence):
    """Token strings by id, as encodings show them.

    Right after a load they are read one by one from the cartridge (VSTI), so the first encode
    parses no vocabulary; once the lookups add up to half the vocabulary the whole list is built
    (`Tokenizer._token_strings`, from VSTR) and indexed instead, the cheaper way for a long run.
    Both give the same strings. Tokens added after load (an overlay) always use the list."""

    __slots__ = ("_tok", "_native", "_budget")

    def __init__(self, tok: Tokenizer) -> None:
        self._tok = tok
        count = None if tok._overlay else tok._engine.token_string_count
        self._native = tok._engine if count is not None else None
        self._budget = (count or 0) // 2

    def __getitem__(self, i):  # type: ignore[override]
        if self._native is not None and type(i) is int and i >= 0:
            self._budget -= 1
            native = self._native
            if self._budget < 0:
                self._native = None
            return native.token_string(i)
        return self._tok._token_strings()[i]

    def lookup(self, ids: list[int]) -> list[str | None]:
        """The strings of `ids` (all >= 0), in one call."""
        native = self._native
        if native is not None:
            self._budget -= len(ids)
            if self._budget >= 0:
                return native.token_strings(ids)
            self._native = None
        strings = self._tok._token_strings()
        return [strings[i] for i in ids]

    def __iter__(self):  # type: ignore[override]
        # A pass over every id (whole-vocabulary tables) is what the full list is for.
        return iter(self._tok._token_strings())

    def __len__(self) -> int:
        if self._native is not None:
            return self._native.token_string_count
        return len(self._tok._token_strings())
