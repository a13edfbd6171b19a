"""The fast path of `post_process` (a processor's `Layout` applied in one concatenation) and
`post_process_batch` (one offset trim for a whole batch) against their slow twin, the
step-by-step `_post_process_general`, on every processor variant of test_hf_postprocess."""

from __future__ import annotations

import random

import pytest

from crayon_hf._hf.encoding import as_dict
from crayon_hf._hf.postprocess import TruncationParams, _post_process_general, post_process, post_process_batch
from crayon_hf._hf.processors import build_post_processor
from test_hf_postprocess import _GPT2_VARIANTS, load_case, sample_texts

_VARIANTS = [None, *_GPT2_VARIANTS, {"type": "Sequence", "processors": []},
             {"type": "Sequence", "processors": [{"type": "ByteLevel", "trim_offsets": True}, {"type": "RobertaProcessing", "sep": ["<|endoftext|>", 50256], "cls": ["!", 0]}]}]


@pytest.mark.parametrize("variant", range(len(_VARIANTS)))
def test_layout_equals_general_path(variant: int) -> None:
    case = load_case("gpt2")
    processor = build_post_processor(_VARIANTS[variant])
    rng = random.Random(7_000 + variant)
    texts = sample_texts(7_000 + variant, 24) + ["", " ", "  a  b  "]
    for trial in range(60):
        a = rng.choice(texts)
        b = rng.choice(texts) if rng.random() < 0.5 else None
        add = rng.random() < 0.7
        trunc = TruncationParams(rng.choice([0, 3, 40, 10_000]), 0, rng.choice(["longest_first", "only_first"])) if rng.random() < 0.3 else None
        ea, eb = case.ours_raw(a), case.ours_raw(b, 1) if b is not None else None

        def run(fn):
            try:
                return as_dict(fn(ea, eb, add, trunc, None, processor))
            except Exception as e:  # noqa: BLE001 - the same error either way
                return repr(e)

        assert run(post_process) == run(_post_process_general), (variant, a, b, add, trunc)

    docs = [case.ours_raw(t) for t in texts]
    for add in (True, False):
        ours = [as_dict(e) for e in post_process_batch(docs, add, None, processor)]
        assert ours == [as_dict(_post_process_general(e, None, add, None, None, processor)) for e in docs]
