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


def _recipe_for(value: Any, tokenizer_json: dict[str, Any]) -> str | None:
    for recipe in ("vocab", "vocab_tuples", "merges_tuples"):
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
    stock = original.from_pretrained(folder)
    backend = stock.__dict__.get("_tokenizer")
    if backend is None or getattr(backend, "__dict__", None):
        return False  # no backend, or one with wrappers set on the instance (CLIP's decode)
    text = backend.to_str()
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
        return False  # the stock load would not map this cartridge
    from tokenizers import Tokenizer as Backend

    if Backend.from_str(text).to_str() != text:
        # The lazy backend is built from this text; tokenizers' JSON float parsing is not always
        # correctly rounded (Unigram scores come back an ulp off), so such folders load the stock way.
        return False
    state = {k: v for k, v in stock.__dict__.items() if k != "_tokenizer"}
    lazy: dict[str, str] = {}
    if any(name in state for name in LAZY_NAMES):
        tokenizer_json = json.loads(text)
        for name in LAZY_NAMES:
            if name in state:
                recipe = _recipe_for(state[name], tokenizer_json)
                if recipe is None:
                    return False
                lazy[name] = recipe
                del state[name]
    # The folder's path (name_or_path, ...) is stored as a placeholder, so the file does not depend
    # on where it was saved (push_to_hub saves in a temporary folder) and a moved folder still loads.
    state = _replace_str(state, folder, FOLDER_PLACEHOLDER)
    try:
        encoded = _encode(state)
        if _encode(_decode(encoded)) != encoded:
            return False
    except _NotRestorable:
        return False
    if folder in json.dumps(encoded, ensure_ascii=False):
        return False  # the path inside a longer string: not something a placeholder can restore
    record = {
        "format": STATE_FORMAT,
        **_versions(),
        "class": original.__name__,
        "source_sha256": digest,
        "files": _folder_files(folder),
        "state": encoded,
        "lazy": lazy,
    }
    target.write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
    return True


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
    state = _replace_str(_decode(record["state"]), FOLDER_PLACEHOLDER, str(folder))
    return state, dict(record.get("lazy") or {}), str(record.get("source_sha256"))


def _replace_str(value: Any, old: str, new: str) -> Any:
    """`value` with every string equal to `old` replaced by `new` (the folder's path and its
    placeholder), containers rebuilt with their exact types."""
    if type(value) is str:
        return new if value == old else value
    if type(value) is list:
        return [_replace_str(v, old, new) for v in value]
    if type(value) is tuple:
        return tuple(_replace_str(v, old, new) for v in value)
    if type(value) is dict:
        return {k: _replace_str(v, old, new) for k, v in value.items()}
    return value  # other types are left alone (and _encode refuses what it does not know)
