"""The tokenizer.json pipeline as META describes it, shared by loading a cartridge
(`crayon_hf.Tokenizer`) and compiling one (`crayon_hf.conversion.hf_json`): small, so that a load
imports nothing else."""

from __future__ import annotations

from typing import Any, Callable, Sequence

# What a cartridge's Precompiled section holds before the charsmap: the engine's two lookup
# bitmaps (PrecompiledNormalizer::section_image in native/text/precompiled.h).
PRECOMPILED_BITMAP_BYTES = 16384


def engine_components(descs: list[dict[str, Any]], section: Callable[[str], bytes] | None = None
                      ) -> list[dict[str, Any]]:
    """META component descriptions as the native engine takes them (charsmaps as bytes).

    A Precompiled normalizer compiled into its own section (META format 3: ``charsmap_section``)
    is left as it is when `section` is None, for HfEngine, which reads the section in place;
    otherwise its charsmap is read through ``section(id)``, for `hf_normalize`, which has no
    cartridge."""
    out = []
    for d in descs:
        if "charsmap" in d:
            import base64  # (a charsmap in META: cartridges before format 3, or one tokenizers rejects)

            d = dict(d, charsmap=base64.b64decode(d["charsmap"]))
        elif "charsmap_section" in d and section is not None:
            image = section(d["charsmap_section"])
            d = {k: v for k, v in d.items() if k != "charsmap_section"}
            d["charsmap"] = bytes(image[PRECOMPILED_BITMAP_BYTES:])
        out.append(d)
    return out


def token_strings(model_strings: Sequence[str | None], added: list[dict[str, Any]],
                  normalize: Callable[[str], str]) -> list[str | None]:
    """Token strings by id as encodings show them: the model's string where the model has one
    (an added token sharing the id shows its own text through the engine), else the text of the
    last added token with that id (normalized content for a normalized token), else None. The same
    list `Tokenizer._token_strings` builds from VSTR and the added tokens."""
    strings = list(model_strings)
    for t in added:
        tid = t["id"]
        if tid >= len(strings):
            strings.extend([None] * (tid + 1 - len(strings)))
        if tid >= len(model_strings) or model_strings[tid] is None:
            strings[tid] = normalize(t["content"]) if t.get("normalized", True) else t["content"]
    return strings


def added_token_rows(added: list[dict[str, Any]], normalize: Callable[[str], str],
                     model_strings: Sequence[str | None]) -> tuple[list[tuple], list[tuple], dict[int, str]]:
    """The added tokens as HfEngine matches them: (rows matched in the original text, rows matched
    in normalized text, {id: the model's string} for ids the model gives another string).

    A row is (id, text, special, lstrip, rstrip, single_word, shadow): a normalized token's text is
    its content normalized by `normalize` (it is looked for in normalized text, as tokenizers
    does), and `shadow` says that its id is also a model token with another string, so matches
    carry their own text. The same rows are compiled into a cartridge (HADR, HADN) and built at
    load for tokens added since."""
    raw, normed, shadowed = [], [], {}
    for t in added:
        is_normalized = t.get("normalized", True)
        text = normalize(t["content"]) if is_normalized else t["content"]
        tid = t["id"]
        shadow = tid < len(model_strings) and model_strings[tid] is not None and model_strings[tid] != text
        if shadow:
            shadowed[tid] = model_strings[tid]
        row = (tid, text, t["special"], t["lstrip"], t["rstrip"], t["single_word"], shadow)
        (normed if is_normalized else raw).append(row)
    return raw, normed, shadowed


def sentencepiece_shortcut(normalizers: list[dict[str, Any]], pre_tokenizers: list[dict[str, Any]]
                           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """The SentencePiece-style normalizer (Prepend(r) then Replace(' ', r), or the Replace alone)
    as an equivalent pre-tokenizer, so the engine reads the text without rewriting it.

    Both give the model each text split with spaces shown as r (each r aligned to its space) and,
    with Prepend, an r in front aligned to the first character: exactly Metaspace without split,
    with a prefix that does not look at the first character ("unconditional", an engine-only
    scheme) or none. Only valid when no added token is matched in normalized text (those would
    see r instead of spaces); the caller checks that. Returns (normalizers, pre_tokenizers) or None.
    """
    kinds = [d["type"] for d in normalizers]
    if kinds not in (["Prepend", "Replace"], ["Replace"]):
        return None
    replace = normalizers[-1]
    r = replace.get("content", "")
    if replace.get("regex") or replace.get("pattern") != " " or len(r) != 1:
        return None
    if kinds[0] == "Prepend" and normalizers[0].get("pattern") != r:
        return None
    if pre_tokenizers and not (len(pre_tokenizers) == 1 and pre_tokenizers[0]["type"] == "Split"
                               and not pre_tokenizers[0].get("regex") and pre_tokenizers[0].get("pattern") == " "
                               and not pre_tokenizers[0].get("invert")):
        return None  # a Split on " " finds nothing once spaces are r: the whole split is one piece
    scheme = "unconditional" if kinds[0] == "Prepend" else "never"
    return [], [{"type": "Metaspace", "replacement": r, "prepend_scheme": scheme, "split": False}]
