"""Named encodings, offline: the OpenAI rank files ship inside the package (MIT-licensed), compiled
to a cartridge in the cache on first use and mapped from there afterwards."""

from __future__ import annotations

import functools
import importlib
import os
import threading
import warnings
from typing import Any, Callable, Sequence

from crayon_hf import __version__
from crayon_hf._cache import cache_dir, store
from crayon_hf._native import CartridgeError
from crayon_hf.tiktoken._encodings import BUNDLED, KNOWN_ENCODINGS, KnownEncoding
from crayon_hf.tiktoken.core import Encoding

_lock = threading.RLock()
ENCODINGS: dict[str, Encoding] = {}

# Bump when the cartridge layout or the build changes, so stale cache entries are not reused.
_CACHE_GENERATION = 7


def list_encoding_names() -> list[str]:
    """The encodings `get_encoding` can build offline: those bundled with crayon-hf, then those of
    any third-party `tiktoken_ext` plugin."""
    _find_constructors()
    assert ENCODING_CONSTRUCTORS is not None
    return [name for name in ENCODING_CONSTRUCTORS if name in BUNDLED or name not in KNOWN_ENCODINGS]


def bundled_rank_bytes(stem: str) -> bytes:
    """The bundled rank file for `stem`, decompressed and checked against its known sha256."""
    # lzma, importlib.resources (15 ms with what it imports), hashlib and pkgutil are imported
    # where they are used: a cartridge found in the cache needs none of them.
    import lzma
    from importlib import resources

    data = lzma.decompress(resources.files("crayon_hf.data").joinpath(f"{stem}.tiktoken.xz").read_bytes())
    return data


def _cartridge_file(known: KnownEncoding) -> str:
    return str(cache_dir() / f"{known.name}-{known.rank_sha256[:16]}-g{_CACHE_GENERATION}.dat")


def _build(known: KnownEncoding) -> bytes:
    from crayon_hf.conversion.tiktoken_rank import build_tiktoken_cartridge, parse_rank_file

    import hashlib

    data = bundled_rank_bytes(known.rank_file)
    sha = hashlib.sha256(data).hexdigest()
    if sha != known.rank_sha256:
        raise ValueError(
            f"the bundled rank file for {known.name} is damaged (sha256 {sha}, expected "
            f"{known.rank_sha256}); reinstall crayon-hf"
        )
    return build_tiktoken_cartridge(
        name=known.name,
        pat_str=known.pat_str,
        mergeable_ranks=parse_rank_file(data, f"bundled {known.rank_file}"),
        special_tokens=known.special_tokens,
        explicit_n_vocab=known.explicit_n_vocab,
        source={"type": "tiktoken_rank_file", "sha256": sha, "file": f"{known.rank_file}.tiktoken"},
    )


def _load_known(known: KnownEncoding) -> Encoding:
    path = _cartridge_file(known)
    if os.path.exists(path):
        try:
            enc = Encoding.from_cartridge(path)
            # The deferred checks now (once per file and process): a damaged cache entry is rebuilt
            # here rather than failing the first encode.
            enc._engine.ready()
            return enc
        except (CartridgeError, ValueError) as e:
            warnings.warn(f"crayon-hf: rebuilding damaged cached cartridge {path}: {e}", stacklevel=3)
    image = _build(known)
    if not store(path, image):
        enc = Encoding.__new__(Encoding)
        from crayon_hf._native import native

        enc._setup(native.TiktokenEngine.from_bytes(image, f"<bundled {known.name}>"), image=image, path=None)
        return enc
    return Encoding.from_cartridge(path)


# tiktoken's plugin registry: encoding name -> constructor returning Encoding's keyword arguments.
# Filled on first use with crayon-hf's own constructors (the OpenAI encodings; the bundled ones
# are built from the cartridge cache instead) and those of every `tiktoken_ext.*` plugin module
# except tiktoken's own `openai_public`, which crayon-hf replaces.
ENCODING_CONSTRUCTORS: dict[str, Callable[[], dict[str, Any]]] | None = None

_OPENAI_PLUGIN = "tiktoken_ext.openai_public"
_RANK_FILE_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"  # tiktoken's source


@functools.lru_cache
def _available_plugin_modules() -> Sequence[str]:
    """The `tiktoken_ext.*` plugin modules installed (a namespace package; none without it)."""
    import pkgutil

    try:
        import tiktoken_ext
    except ImportError:
        return []
    found = pkgutil.iter_modules(tiktoken_ext.__path__, tiktoken_ext.__name__ + ".")
    return [name for _, name, _ in found if name != _OPENAI_PLUGIN]


def _known_constructor(known: KnownEncoding) -> Callable[[], dict[str, Any]]:
    def construct() -> dict[str, Any]:
        from crayon_hf.conversion.tiktoken_rank import parse_rank_file

        if known.bundled:
            ranks = parse_rank_file(bundled_rank_bytes(known.rank_file), f"bundled {known.rank_file}")
        else:
            from crayon_hf.tiktoken.load import load_tiktoken_bpe

            ranks = load_tiktoken_bpe(_RANK_FILE_URL.format(known.rank_file), expected_hash=known.rank_sha256)
        kwargs: dict[str, Any] = {
            "name": known.name,
            "pat_str": known.pat_str,
            "mergeable_ranks": ranks,
            "special_tokens": dict(known.special_tokens),
        }
        if known.explicit_n_vocab is not None:
            kwargs["explicit_n_vocab"] = known.explicit_n_vocab
        return kwargs

    return construct


def _find_constructors() -> None:
    global ENCODING_CONSTRUCTORS
    with _lock:
        if ENCODING_CONSTRUCTORS is not None:
            return
        constructors = {
            name: _known_constructor(known) for name, known in KNOWN_ENCODINGS.items() if name != "llama3"
        }
        for mod_name in _available_plugin_modules():
            mod = importlib.import_module(mod_name)
            try:
                plugin = mod.ENCODING_CONSTRUCTORS
            except AttributeError as e:
                raise ValueError(f"tiktoken plugin {mod_name} does not define ENCODING_CONSTRUCTORS") from e
            for enc_name, constructor in plugin.items():
                if enc_name in constructors:
                    raise ValueError(f"Duplicate encoding name {enc_name} in tiktoken plugin {mod_name}")
                constructors[enc_name] = constructor
        ENCODING_CONSTRUCTORS = constructors


def get_encoding(encoding_name: str) -> Encoding:
    """The encoding named `encoding_name`, built once per process (as tiktoken's is).

    The bundled OpenAI encodings are mapped from the cartridge cache; p50k_base and p50k_edit are
    downloaded like tiktoken does; names from `tiktoken_ext` plugins are built from the plugin's
    constructor.

    ```
    >>> enc = get_encoding("cl100k_base")
    >>> enc.encode("hello world")
    [15339, 1917]
    ```
    """
    if not isinstance(encoding_name, str):
        raise ValueError(f"Expected a string in get_encoding, got {type(encoding_name)}")
    if encoding_name in ENCODINGS:
        return ENCODINGS[encoding_name]
    with _lock:
        if encoding_name in ENCODINGS:
            return ENCODINGS[encoding_name]
        _find_constructors()
        assert ENCODING_CONSTRUCTORS is not None
        known = KNOWN_ENCODINGS.get(encoding_name)
        if encoding_name not in ENCODING_CONSTRUCTORS:
            raise ValueError(
                f"Unknown encoding {encoding_name}.\n"
                f"Plugins found: {list(_available_plugin_modules())}\n"
                f"Encodings bundled with crayon-hf: {BUNDLED}\n"
                "Other vocabularies: build a cartridge from a rank file with `crayon convert` and "
                "load it with `Encoding.from_cartridge(path)`.\n"
                f"crayon-hf version: {__version__}"
            )
        if known is not None and known.bundled:
            enc = _load_known(known)
        elif known is not None:
            try:
                enc = Encoding(**ENCODING_CONSTRUCTORS[encoding_name]())
            except OSError as e:
                raise ValueError(_not_bundled_message(known) + f"\n(downloading it failed: {e})") from e
        else:
            enc = Encoding(**ENCODING_CONSTRUCTORS[encoding_name]())
        ENCODINGS[encoding_name] = enc
        return enc


def _not_bundled_message(known: KnownEncoding) -> str:
    return (
        f"Encoding {known.name} is not bundled with crayon-hf (only {', '.join(BUNDLED)} "
        "are). Build it from its rank file (p50k_base.tiktoken, sha256 "
        f"{known.rank_sha256[:16]}...):\n"
        f"    crayon convert p50k_base.tiktoken --pattern {known.name} -o {known.name}.dat\n"
        f"then load it with crayon_hf.tiktoken.Encoding.from_cartridge('{known.name}.dat')"
        + (
            " (add --special for its FIM tokens: "
            + " ".join(f"--special '{t}={i}'" for t, i in known.special_tokens.items())
            + ")"
            if len(known.special_tokens) > 1
            else ""
        )
    )
