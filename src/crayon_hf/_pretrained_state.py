"""The loaded state of a transformers tokenizer, saved beside its cartridge so that
`from_pretrained` can restore it without building the stock backend.

Why: stock transformers spends its load time parsing tokenizer.json into a `tokenizers.Tokenizer`
and running the class's `__init__` over it (0.7 s for Qwen2.5, 2 s for Gemma). A CrayonTokenizer
answers its hot calls from the cartridge, which maps in under a millisecond, so everything else
can wait until something asks for the backend (`backend_tokenizer`, a vocabulary query, adding
tokens, saving).

How it stays exact:

    save_pretrained(dir)  --writes the folder as transformers does, plus crayon.dat-->
        stock `Original.from_pretrained(dir)`  (the state transformers itself would load)
        --__dict__ minus the backend, as tagged JSON; the big vocabulary copies (`_vocab`,
          `_merges`, `_vocab_scores`) as recipes over the tokenizer.json model, checked equal-->
        crayon_state.json  {versions, sha256 of every other file in dir, state, recipes}

    from_pretrained(dir)  --crayon_state.json matches (same transformers and crayon-hf versions,
        same class, no loading options, every file's sha256 equal; tokenizer.json may be absent:
        the cartridge carries it)--> instance with that state, the cartridge mapped, the backend
        built from the cartridge's copy of tokenizer.json on first access (thread-safe)

Anything that does not round-trip exactly (an attribute of a type not listed in `_encode`, a big
attribute no recipe reproduces, a backend with instance-level wrappers, a backend whose
tokenizer.json does not parse back to itself, as Unigram scores may not) writes no state file, and
the folder loads the stock way, as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

STATE_FILE = "crayon_state.json"
STATE_FORMAT = 1
# Attributes some classes keep as copies of the model's vocabulary: restored lazily (see
# CrayonTokenizer's descriptors), from the tokenizer.json the cartridge carries.
LAZY_NAMES = ("_vocab", "_merges", "_vocab_scores")
# from_pretrained options that do not change the loaded state.
NEUTRAL_KWARGS = frozenset({"local_files_only", "use_fast", "trust_remote_code", "_from_auto", "_commit_hash"})
# Stands for the folder's path in the saved state (replaced by the path given to from_pretrained).
FOLDER_PLACEHOLDER = "\u0000crayon-hf:folder\u0000"
# Files in the folder that are ours, not transformers' input.
OWN_FILES = frozenset({STATE_FILE, "crayon.dat", "crayon_tokenizer.py"})


class _NotRestorable(Exception):
    pass


def _encode(value: Any) -> Any:
    """Tagged JSON that `_decode` turns back into an equal value of the same types."""
    from tokenizers import AddedToken

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and type(value) is int:
        return value
    if isinstance(value, float) and type(value) is float:
        return {"f": repr(value)}
    if type(value) is list:
        return [_encode(v) for v in value]
    if type(value) is tuple:
        return {"t": [_encode(v) for v in value]}
    if type(value) is dict:
        if all(type(k) is str for k in value):
            return {"d": {k: _encode(v) for k, v in value.items()}}
        return {"kv": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if type(value) is set:
        return {"s": sorted((_encode(v) for v in value), key=json.dumps)}
    if isinstance(value, AddedToken):
        return {"a": [value.content, value.single_word, value.lstrip, value.rstrip, value.normalized, value.special]}
    if type(value) is re.Pattern and isinstance(value.pattern, str):
        return {"re": [value.pattern, value.flags]}  # WhisperTokenizer.timestamp_pat
    raise _NotRestorable(type(value).__name__)


def _decode(value: Any) -> Any:
    from tokenizers import AddedToken

    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    (tag, body), = value.items()
    if tag == "f":
        return float(body)
    if tag == "t":
        return tuple(_decode(v) for v in body)
    if tag == "d":
        return {k: _decode(v) for k, v in body.items()}
    if tag == "kv":
        return {_decode(k): _decode(v) for k, v in body}
    if tag == "s":
        return {_decode(v) for v in body}
    if tag == "re":
        return re.compile(body[0], body[1])
    if tag == "a":
        content, single_word, lstrip, rstrip, normalized, special = body
        return AddedToken(content, single_word=single_word, lstrip=lstrip, rstrip=rstrip, normalized=normalized,
                          special=special)
    raise ValueError(f"unknown tag {tag!r} in {STATE_FILE}")


def derive(recipe: str, tokenizer_json: dict[str, Any]) -> Any:
    """The value a recipe names, from a parsed tokenizer.json."""
    model = tokenizer_json.get("model") or {}
    if recipe == "vocab":
        return model["vocab"]
    if recipe == "vocab_tuples":
        return [tuple(v) for v in model["vocab"]]
    if recipe == "merges_tuples":
        return [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"]]
    raise ValueError(f"unknown recipe {recipe!r} in {STATE_FILE}")


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a.items()) == list(b.items())
    return a == b


def _may_be(recipe: str, value: Any, model: dict[str, Any]) -> bool:
    """False where `recipe` cannot give `value` (checked without deriving it: a derived copy of a
    256k vocabulary or merge list costs a quarter of a second)."""
    tuples = isinstance(value, list) and (not value or isinstance(value[0], tuple))
    if recipe == "vocab":
        return type(value) is type(model.get("vocab"))
    if recipe == "vocab_tuples":
        return tuples and isinstance(model.get("vocab"), list)
    return tuples and "merges" in model


def _recipe_for(value: Any, tokenizer_json: dict[str, Any]) -> str | None:
    model = tokenizer_json.get("model")
    for recipe in ("vocab", "vocab_tuples", "merges_tuples"):
        if isinstance(model, dict) and not _may_be(recipe, value, model):
            continue
        try:
            if _same(derive(recipe, tokenizer_json), value):
                return recipe
        except (KeyError, TypeError, AttributeError, ValueError):
            continue
    return None


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest() if hasattr(hashlib, "file_digest") else \
            hashlib.sha256(f.read()).hexdigest()


def _folder_files(folder: str) -> dict[str, str]:
    return {
        name: _sha256(os.path.join(folder, name))
        for name in sorted(os.listdir(folder))
        if name not in OWN_FILES and os.path.isfile(os.path.join(folder, name))
    }


def _versions() -> dict[str, str]:
    import transformers

    from crayon_hf import __version__

    return {"transformers": transformers.__version__, "crayon_hf": __version__}


def write_state(directory: Any, original: type, digest: str) -> bool:
    """Loads `directory` (just written by save_pretrained) the stock way and saves its state as
    crayon_state.json; False (and no file) when the state would not round-trip exactly."""
    folder = str(directory)
    target = Path(folder) / STATE_FILE
    try:
        target.unlink()  # a stale state must never outlive the files it describes
    except FileNotFoundError:
        pass
    record = capture(original.from_pretrained(folder), folder, digest)
    if record is None:
        return False
    record["class"] = original.__name__
    record["files"] = _folder_files(folder)
    target.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
    return True


class BackendJson:
    """A stock backend's state as tokenizer.json (its to_str()), serialized once and parsed at
    most once for everything a first load does with it: the state record (capture), the
    cartridge's digest and its compile (CrayonTokenizer._crayon_sync). For a 256k vocabulary each
    of those steps cost about a second when every one serialized or parsed the state again."""

    def __init__(self, backend: Any) -> None:
        self.text: str = backend.to_str()
        self._parsed: dict[str, Any] | None = None
        self._floats = False

    def parsed(self) -> dict[str, Any]:
        """The text parsed (floats correctly rounded, as parse_tokenizer_json's exact_floats);
        the caller must not change it."""
        if self._parsed is None:
            floats: list[str] = []

            def read_float(literal: str) -> float:
                floats.append(literal)
                return float(literal)  # what json reads a float with by default

            self._parsed = json.loads(self.text, parse_float=read_float)
            self._floats = bool(floats)
        return self._parsed

    def has_floats(self) -> bool:
        """Whether the JSON holds any number with a fraction or an exponent."""
        self.parsed()
        return self._floats


def capture(stock: Any, folder: str, digest: str | None = None,
            source: BackendJson | None = None) -> dict[str, Any] | None:
    """The state record of `stock`, a tokenizer just loaded the stock way from `folder` (before
    anything changed it), or None when it would not round-trip exactly. `digest`: the sha256 its
    backend's tokenizer.json must have (the cartridge's source); None takes the backend's.
    `source`: the backend's state, when the caller has it already."""
    backend = stock.__dict__.get("_tokenizer")
    if backend is None or getattr(backend, "__dict__", None):
        return None  # no backend, or one with wrappers set on the instance (CLIP's decode)
    if source is None:
        source = BackendJson(backend)
    text = source.text
    source_sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if digest is not None and source_sha256 != digest:
        return None  # the stock load would not map this cartridge
    # The lazy backend is built from this text. tokenizers reads back what its to_str() wrote,
    # except floats: its JSON float parsing is not always correctly rounded (Unigram scores come
    # back an ulp off), so a state with floats must prove the round trip, and such folders load
    # the stock way when it fails. (That proof, a second backend built and serialized, was 2.5 s
    # of a 256k vocabulary's first load.)
    if source.has_floats():
        from tokenizers import Tokenizer as Backend

        if Backend.from_str(text).to_str() != text:
            return None
    state = {k: v for k, v in stock.__dict__.items() if k != "_tokenizer" and not k.startswith("_crayon")}
    lazy: dict[str, str] = {}
    if any(name in state for name in LAZY_NAMES):
        tokenizer_json = source.parsed()
        for name in LAZY_NAMES:
            if name in state:
                recipe = _recipe_for(state[name], tokenizer_json)
                if recipe is None:
                    return None
                lazy[name] = recipe
                del state[name]
    # The folder's path (name_or_path, ...) is stored as a placeholder, so the file does not depend
    # on where it was saved (push_to_hub saves in a temporary folder) and a moved folder still loads.
    state = _replace_str(state, folder, FOLDER_PLACEHOLDER)
    try:
        encoded = _encode(state)
        if _encode(_decode(encoded)) != encoded:
            return None
    except _NotRestorable:
        return None
    if folder in json.dumps(encoded, ensure_ascii=False):
        return None  # the path inside a longer string: not something a placeholder can restore
    return {
        "format": STATE_FORMAT,
        **_versions(),
        "class": type(stock).__name__,
        "source_sha256": source_sha256,
        "state": encoded,
        "lazy": lazy,
    }


def restore(record: dict[str, Any], folder: str) -> tuple[dict[str, Any], dict[str, str], str]:
    """(state, recipes, source_sha256) of a record `capture` made, for a load of `folder`."""
    state = _replace_str(_decode(record["state"]), FOLDER_PLACEHOLDER, str(folder))
    return state, dict(record.get("lazy") or {}), str(record.get("source_sha256"))


def read_state(folder: str, original: type, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str], str] | None:
    """(state, recipes, source_sha256) when crayon_state.json in `folder` describes exactly what
    the stock load of `folder` with `kwargs` would give; None otherwise."""
    if set(kwargs) - NEUTRAL_KWARGS:
        return None
    try:
        with open(os.path.join(folder, STATE_FILE), encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != STATE_FORMAT or record.get("class") != original.__name__:
        return None
    if any(record.get(k) != v for k, v in _versions().items()):
        return None
    files = record.get("files")
    if not isinstance(files, dict):
        return None
    current = _folder_files(folder)
    # tokenizer.json may be left out: the cartridge carries the backend's exact copy.
    if "tokenizer.json" not in current:
        files = {k: v for k, v in files.items() if k != "tokenizer.json"}
    if current != files:
        return None
    return restore(record, folder)


def _replace_str(value: Any, old: str, new: str) -> Any:
    """`value` with every string equal to `old` replaced by `new` (the folder's path and its
    placeholder), and `old`'s prefix of every path under it (`vocab_file` and the like),
    containers rebuilt with their exact types."""
    if type(value) is str:
        if value == old:
            return new
        if value.startswith(old) and value[len(old):len(old) + 1] in ("/", os.sep):
            return new + value[len(old):]
        return value
    if type(value) is list:
        return [_replace_str(v, old, new) for v in value]
    if type(value) is tuple:
        return tuple(_replace_str(v, old, new) for v in value)
    if type(value) is dict:
        return {k: _replace_str(v, old, new) for k, v in value.items()}
    return value  # other types are left alone (and _encode refuses what it does not know)


# ---------------------------------------------------------------------------- plain folders
#
# A folder not saved by crayon-hf has no crayon_state.json; its first CrayonTokenizer load goes
# the stock way, and the state it gave is remembered in the cache, keyed by the folder's files,
# the versions and the class asked for. Later loads restore it, as for a saved folder.

STATE_SUFFIX = ".state"
# Files that never change a tokenizer's load, keyed by size and modification time instead of
# their content, so that a model folder's weights are not read on every load; so are files past
# _HASHED_UP_TO and files in subfolders (two levels down at most: chat templates live there, and
# a training run's checkpoint folders should not cost a load much).
_WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".gguf", ".npz")
_HASHED_UP_TO = 256 << 20


def folder_key(folder: str, requested: str) -> str:
    """What the stock load of `folder` depends on, hashed: its files (hidden ones aside; see
    _WEIGHTS), the versions, the class asked for."""
    parts: list[list[Any]] = []
    top = os.path.abspath(folder)
    for root, dirs, files in os.walk(top):
        depth = 0 if root == top else os.path.relpath(root, top).count(os.sep) + 1
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < 2 else []
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, top)
            st = os.stat(path)
            if depth or name.endswith(_WEIGHTS) or st.st_size > _HASHED_UP_TO:
                parts.append([rel, st.st_size, st.st_mtime_ns])
            else:
                parts.append([rel, _sha256(path)])
    text = json.dumps([STATE_FORMAT, _versions(), requested, parts], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class FolderMemo:
    """The cached state of one plain folder's stock load: `record` is the state (a dict), False
    when the folder's state does not round-trip (so it is not captured again), None when not
    cached yet."""

    def __init__(self, folder: str, path: Path, record: dict[str, Any] | bool | None) -> None:
        self.folder, self.path, self.record = folder, path, record

    @classmethod
    def of(cls, folder: Any, requested: type | None, kwargs: dict[str, Any]) -> FolderMemo | None:
        """The memo for a load of local `folder` with these options; None where none applies
        (a hub id, a subfolder or other loading options, a folder that cannot be read)."""
        from crayon_hf import _cache

        if not isinstance(folder, (str, os.PathLike)) or set(kwargs) - NEUTRAL_KWARGS or not os.path.isdir(folder):
            return None
        folder = str(folder)
        try:
            key = folder_key(folder, requested.__name__ if requested is not None else "AutoTokenizer")
        except OSError:
            return None
        # Found by key under any label: a folder moved or renamed has the same state.
        label = _cache.label(os.path.basename(os.path.abspath(folder)))
        path = _cache.find(_cache.cache_dir(), f"transformers-{label}-{key}{STATE_SUFFIX}", f"{key}{STATE_SUFFIX}")
        record: dict[str, Any] | bool | None = None
        try:
            with open(path, encoding="utf-8") as f:
                loaded = json.load(f)
            if isinstance(loaded, dict) and loaded.get("format") == STATE_FORMAT:
                record = loaded if loaded.get("state") is not None else False
        except (OSError, ValueError):
            pass
        return cls(folder, path, record)

    def remember(self, record: dict[str, Any] | None) -> None:
        """Caches `record` (None: the folder's state does not round-trip)."""
        from crayon_hf import _cache

        if record is None:
            record = {"format": STATE_FORMAT, "state": None}
        _cache.store(self.path, json.dumps(record, ensure_ascii=False).encode("utf-8"))
