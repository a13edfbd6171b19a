"""crayon_hf.Tokenizer in place of tokenizers.Tokenizer, on any tokenizer.json.

    python examples/tokenizers_drop_in.py path/to/tokenizer.json ["some text"]

Loads the file (compiling it to a cached cartridge on first use), encodes a pair with truncation
and padding, decodes, and, when `tokenizers` is installed, checks every field against it.
"""

from __future__ import annotations

import sys

from crayon_hf import Tokenizer

path = sys.argv[1]
text = sys.argv[2] if len(sys.argv) > 2 else "Tokenization should never be the bottleneck. 日本語も大丈夫。"

tok = Tokenizer.from_file(path)
print("backend:", tok.crayon_backend)

enc = tok.encode(text, "and a second sequence")
print("ids:", enc.ids[:16], "..." if len(enc.ids) > 16 else "")
print("tokens:", enc.tokens[:8])
print("offsets:", enc.offsets[:8])
print("decoded:", tok.decode(enc.ids))

tok.enable_truncation(16, stride=4)
tok.enable_padding(pad_id=0, pad_token="<pad>", length=16)
short = tok.encode(text)
print("truncated to", len(short.ids), "ids, with", len(short.overflowing), "overflowing windows")

try:
    import tokenizers
except ImportError:
    sys.exit(0)
ref = tokenizers.Tokenizer.from_file(path)
ref.enable_truncation(16, stride=4)
ref.enable_padding(pad_id=0, pad_token="<pad>", length=16)
same = all(
    getattr(short, f) == getattr(ref.encode(text), f)
    for f in ("ids", "tokens", "offsets", "type_ids", "attention_mask", "special_tokens_mask", "word_ids")
)
print("identical to tokenizers:", same)
sys.exit(0 if same else 1)
