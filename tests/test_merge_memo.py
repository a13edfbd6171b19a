"""The merge loop's per-thread memo of merge-table lookups (native/models/hf_bpe.cc, MergeMemo)
never changes a result.

The memo is keyed by the model's tag and the pair of ids, so models whose ids overlap must never
see each other's entries. Here several tokenizers that run the merge loop encode the same texts in
turn on one thread, so every model meets a memo full of the others' pairs, and each result is
compared with `tokenizers`. The SentencePiece-style folders would take the backtracking encoder;
one merge moved to the end of their lists keeps them on the merge loop (and tokenizers reads the
same moved list).
"""

from __future__ import annotations

import json
import random

import pytest

from support import VOCAB, corpus_files, corpus_text, random_slices, require_module, require_shared

MERGE_LOOP_FOLDERS = ["mistral_v0_1", "phi3_mini", "gemma", "clip"]


def _on_the_merge_loop(path) -> str:
    """The folder's tokenizer.json, with the first merge of the first token made by several merges
    moved to the end of the list: that list is no longer in blocks, so no fast path."""
    data = json.loads(path.read_text(encoding="utf-8"))
    merges = data["model"]["merges"]
    made = [("".join(m.split(" ", 1)) if isinstance(m, str) else "".join(m)) for m in merges]
    first = next((i for i in range(len(made) - 1) if made[i] == made[i + 1]), None)
    if first is None:  # one merge per token (CLIP: its suffix keeps it on the merge loop anyway)
        return json.dumps(data)
    data["model"]["merges"] = merges[:first] + merges[first + 1:] + [merges[first]]
    return json.dumps(data)


def _texts() -> list[str]:
    texts = []
    for i, path in enumerate(corpus_files()):
        texts += random_slices(corpus_text(path, 32 * 1024), 25, seed=300 + i, max_len=1500)
    rng = random.Random(11)
    # Long pieces (the heap), pieces around the rescan limit, and many distinct pairs that evict
    # each other from the memo.
    texts.append("".join(rng.choice("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年") for _ in range(3000)))
    texts.append(" ".join("".join(rng.choice("qxzjkvwyé") for _ in range(rng.randint(10, 40))) for _ in range(400)))
    return texts


def test_models_sharing_a_thread_agree_with_tokenizers():
    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    pairs = []
    for folder in MERGE_LOOP_FOLDERS:
        text = _on_the_merge_loop(require_shared(VOCAB / "hf" / folder / "tokenizer.json"))
        ours = Tokenizer.from_str(text)
        assert ours._engine.has_fast_path is False  # the merge loop, not the backtracking encoder
        pairs.append((folder, tokenizers.Tokenizer.from_str(text), ours))
    texts = _texts()
    for text in texts:
        for folder, ref, ours in pairs:  # interleaved: each model right after the others
            assert ours.encode(text).ids == ref.encode(text).ids, (folder, text[:80])
    # And again, now that every memo slot has been written by some model.
    for folder, ref, ours in reversed(pairs):
        for text in texts[::7]:
            assert ours.encode(text).ids == ref.encode(text).ids, (folder, text[:80])
