"""Swap `import tiktoken` for crayon-hf and nothing else changes: same ids, same API.

    python examples/tiktoken_drop_in.py
"""

import crayon_hf.tiktoken as tiktoken

enc = tiktoken.get_encoding("cl100k_base")  # offline: the rank file ships with crayon-hf
text = "Tokenization should never be the bottleneck. It's 2026!"

ids = enc.encode(text)
print(ids)
print(enc.decode(ids))
print([enc.decode_single_token_bytes(i) for i in ids[:5]])

# Special tokens are refused unless allowed, exactly as in tiktoken.
print(enc.encode("<|endoftext|>", allowed_special="all"))
try:
    enc.encode("<|endoftext|>")
except ValueError as e:
    print("ValueError:", str(e).splitlines()[0])

# Batches run on native threads with the GIL released.
print(enc.encode_batch(["first document", "second document"], num_threads=2))

# The model table is tiktoken's.
print(tiktoken.encoding_for_model("gpt-4o").name)
print(enc.crayon_backend)  # "native"
