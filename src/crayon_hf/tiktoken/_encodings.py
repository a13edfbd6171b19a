"""What crayon-hf knows about named encodings: split patterns, special tokens, bundled rank files.

The pattern strings and special tokens are those of tiktoken 0.14's ``tiktoken_ext.openai_public``
and of Meta's Llama 3 loader. A pattern string maps to a native scanner only when it is exactly one
of the strings below; any other pattern runs on the native regex engine in tiktoken's fancy-regex
dialect (``conversion.tiktoken_rank.split_mode``), or on the real ``tiktoken`` when that engine
refuses it (see ``Encoding``).
"""

from __future__ import annotations

from typing import NamedTuple

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
    r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# Pattern string -> native scanner name (see native/text/pretokenize.h).
NATIVE_PATTERNS: dict[str, str] = {
    R50K_PATTERN: "r50k",
    CL100K_PATTERN: "cl100k",
    O200K_PATTERN: "o200k",
    LLAMA3_PATTERN: "llama3",
}

# Names accepted by `crayon convert --pattern NAME`.
PATTERN_NAMES: dict[str, str] = {
    "r50k_base": R50K_PATTERN,
    "gpt2": R50K_PATTERN,
    "p50k_base": R50K_PATTERN,
    "cl100k_base": CL100K_PATTERN,
    "o200k_base": O200K_PATTERN,
    "o200k_harmony": O200K_PATTERN,
    "llama3": LLAMA3_PATTERN,
}


def native_pattern(pat_str: str) -> str | None:
    return NATIVE_PATTERNS.get(pat_str)


def _llama3_specials() -> dict[str, int]:
    names = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>",
        "<|finetune_right_pad_id|>",
        "<|step_id|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eom_id|>",
        "<|eot_id|>",
        "<|python_tag|>",
        "<|image|>",
    ]
    names += [f"<|reserved_special_token_{i}|>" for i in range(2, 2 + 256 - len(names))]
    return {name: 128000 + i for i, name in enumerate(names)}


def _harmony_specials() -> dict[str, int]:
    specials = {
        ENDOFTEXT: 199999,
        ENDOFPROMPT: 200018,
        "<|startoftext|>": 199998,
        "<|reserved_200000|>": 200000,
        "<|reserved_200001|>": 200001,
        "<|return|>": 200002,
        "<|constrain|>": 200003,
        "<|reserved_200004|>": 200004,
        "<|channel|>": 200005,
        "<|start|>": 200006,
        "<|end|>": 200007,
        "<|message|>": 200008,
        "<|reserved_200009|>": 200009,
        "<|reserved_200010|>": 200010,
        "<|reserved_200011|>": 200011,
        "<|call|>": 200012,
    }
    specials.update({f"<|reserved_{i}|>": i for i in range(200013, 201088)})
    return specials


class KnownEncoding(NamedTuple):
    name: str
    pat_str: str
    special_tokens: dict[str, int]
    rank_file: str  # stem of the rank file (bundled ones live in crayon_hf/data/<stem>.tiktoken.xz)
    rank_sha256: str
    explicit_n_vocab: int | None = None
    bundled: bool = True
    aliases: tuple[str, ...] = ()


RANK_SHA256 = {
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "llama3": "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
}

KNOWN_ENCODINGS: dict[str, KnownEncoding] = {
    "gpt2": KnownEncoding("gpt2", R50K_PATTERN, {ENDOFTEXT: 50256}, "r50k_base", RANK_SHA256["r50k_base"], 50257),
    "r50k_base": KnownEncoding(
        "r50k_base", R50K_PATTERN, {ENDOFTEXT: 50256}, "r50k_base", RANK_SHA256["r50k_base"], 50257
    ),
    "p50k_base": KnownEncoding(
        "p50k_base", R50K_PATTERN, {ENDOFTEXT: 50256}, "p50k_base", RANK_SHA256["p50k_base"], 50281, bundled=False
    ),
    "p50k_edit": KnownEncoding(
        "p50k_edit",
        R50K_PATTERN,
        {ENDOFTEXT: 50256, FIM_PREFIX: 50281, FIM_MIDDLE: 50282, FIM_SUFFIX: 50283},
        "p50k_base",
        RANK_SHA256["p50k_base"],
        bundled=False,
    ),
    "cl100k_base": KnownEncoding(
        "cl100k_base",
        CL100K_PATTERN,
        {ENDOFTEXT: 100257, FIM_PREFIX: 100258, FIM_MIDDLE: 100259, FIM_SUFFIX: 100260, ENDOFPROMPT: 100276},
        "cl100k_base",
        RANK_SHA256["cl100k_base"],
    ),
    "o200k_base": KnownEncoding(
        "o200k_base", O200K_PATTERN, {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}, "o200k_base", RANK_SHA256["o200k_base"]
    ),
    "o200k_harmony": KnownEncoding(
        "o200k_harmony", O200K_PATTERN, _harmony_specials(), "o200k_base", RANK_SHA256["o200k_base"]
    ),
    # Not an OpenAI encoding and not bundled (Meta's licence): known so that `crayon convert` and
    # `--tokenizer llama3.tiktoken` recognise the rank file by its hash.
    "llama3": KnownEncoding(
        "llama3", LLAMA3_PATTERN, _llama3_specials(), "llama3", RANK_SHA256["llama3"], bundled=False
    ),
}

BUNDLED = [name for name, k in KNOWN_ENCODINGS.items() if k.bundled]


def known_by_rank_hash(sha256: str) -> list[KnownEncoding]:
    """Encodings whose rank file has this sha256 (first one is the canonical name)."""
    return [k for k in KNOWN_ENCODINGS.values() if k.rank_sha256 == sha256]
