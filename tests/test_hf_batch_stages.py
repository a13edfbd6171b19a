"""The tokenizers face on the CUDA engine's batch stages, without a GPU.

`Tokenizer.encode_batch_to_numpy(..., device="cuda")` marks pieces and added tokens on the CPU
(HfEngine.mark_batch), has the GPU encode the pieces to ranks, and rebuilds the raw encodings
(ids, offsets) from the ranks (HfEngine.raw_from_pieces). Here the GPU is replaced by the same
stages run on CPU threads (the host loop the CUDA kernels share their functors with), and every
result is compared with the CPU engine's own `encode_batch_to_numpy` on real vocabularies and
text: ids, character offsets and document offsets, with truncation, padding, templates and added
tokens. benchmarks/gpu_check.sh runs the real GPU against the same reference.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from support import SHARED, VOCAB, corpus_text, require_shared

from crayon_hf import Tokenizer, cuda

# Byte-level BPE folders whose merges are rank-BPE and whose pre-tokenizer streams: the stages apply.
STAGED = ["gpt2", "phi2", "qwen2_5", "whisper_large_v3", "deepseek_v3"]
# Folders the stages do not take (Split steps other than one streaming scanner or DeepSeek-V3's
# sequence, merges that are not rank-BPE, other models).
NOT_STAGED = ["falcon", "llama3_1", "bert_base_uncased", "t5_small", "mistral_v0_1"]


def hf_tokenizer_json(folder: str) -> str:
    return str(require_shared(VOCAB / "hf" / folder / "tokenizer.json"))


def _documents(tok: Tokenizer) -> list[str]:
    rng = random.Random(7)
    docs = []
    for name in ("multi_udhr_scripts.txt", "code_python_stdlib.txt", "zh_hongloumeng.txt", "en_botchan.txt"):
        text = corpus_text(require_shared(SHARED / "corpora" / name))
        for _ in range(60):
            at = rng.randrange(0, len(text) - 2000)
            docs.append(text[at:at + rng.choice([1, 5, 40, 300, 1500])])
    added = [t.content for t in tok.get_added_tokens_decoder().values()]
    for a in rng.sample(added, min(40, len(added))):
        docs += [a, f"{a}x", f" {a} ", f"y{a}{a}z\n", f"\t{a}  é {a}"]
    docs += ["", " ", "\n\n\n", "   spaces   ", "é" * 9, "🙂" * 5 + "a", "1234567 89", "a" * 3000,
             "".join(chr(rng.randrange(32, 0x3000)) for _ in range(500))]
    return docs


def _staged(tok: Tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sends the tokenizer's device path through the host-loop stages (no GPU needed)."""
    engine = tok._engine

    def raw_batch(texts, encode_special, threads, offsets, limit):
        return engine.encode_batch_raw_staged(texts, encode_special, threads, offsets, limit)

    monkeypatch.setattr(tok, "_device_raw_batch", lambda device, texts: raw_batch)


def _same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("folder", STAGED)
def test_staged_batches_equal_the_cpu_engine(folder, monkeypatch):
    tok = Tokenizer.from_file(hf_tokenizer_json(folder))
    assert tok._engine.piece_engine() is not None
    docs = _documents(tok)
    cpu = tok.encode_batch_to_numpy(docs)
    assert len(cpu.ids) > 10_000
    _staged(tok, monkeypatch)
    assert _same(cpu, tok.encode_batch_to_numpy(docs, device="cuda"))
    # Without the template, splitting special tokens, truncated both ways, padded.
    monkeypatch.undo()
    settings = [
        dict(add_special_tokens=False),
        dict(encode_special_tokens=True),
        dict(truncation=dict(max_length=16)),
        dict(truncation=dict(max_length=7, direction="left")),
        dict(padding=dict(length=None)),
    ]
    for s in settings:
        tok = Tokenizer.from_file(hf_tokenizer_json(folder))
        tok.encode_special_tokens = s.get("encode_special_tokens", False)
        if "truncation" in s:
            tok.enable_truncation(**s["truncation"])
        if "padding" in s:
            tok.enable_padding(**s["padding"])
        kw = {"add_special_tokens": s.get("add_special_tokens", True)}
        cpu = tok.encode_batch_to_numpy(docs, **kw)
        _staged(tok, monkeypatch)
        assert _same(cpu, tok.encode_batch_to_numpy(docs, device="cuda", **kw)), s
        monkeypatch.undo()


@pytest.mark.parametrize("folder", NOT_STAGED)
def test_other_folders_have_no_staged_path(folder):
    tok = Tokenizer.from_file(hf_tokenizer_json(folder))
    assert tok._engine.piece_engine() is None
    with pytest.raises(ValueError, match="no path through the batch stages"):
        tok._engine.encode_batch_raw_staged(["x"], False, 1, True, -1)


class _FakeDeviceEngine:
    """The CUDA module's DeviceEngine, its stages run on CPU threads by the piece engine."""

    def __init__(self, core) -> None:
        self.core = core
        self.buffers = (np.zeros(0, np.uint8), np.zeros(0, np.uint8))

    def staging(self, n_bytes):
        self.buffers = (np.zeros(n_bytes, np.uint8), np.zeros(n_bytes, np.uint8))
        return self.buffers

    def encode(self, n_bytes, doc_bytes, specials, reference, to_host):
        ids, offsets = self.core.run_stages(self.buffers[0], self.buffers[1], doc_bytes, specials)
        return ids, offsets, {"kernel_ms": 0.0, "n_pieces": 0}


def test_the_gpu_glue_with_a_stand_in_device(monkeypatch):
    # crayon_hf.cuda.hf_raw_batch end to end: marking into the engine's staging buffers, the added
    # tokens' slots, the marked batch carried to raw_from_pieces.
    tok = Tokenizer.from_file(hf_tokenizer_json("qwen2_5"))
    core = tok._engine.piece_engine()

    class Module:
        @staticmethod
        def DeviceEngine(tables, index):  # noqa: N802 -- the module's class name
            assert index == 0 and tables["n_ids"] == core.piece_tables()["n_ids"]
            return _FakeDeviceEngine(core)

        @staticmethod
        def device_count():
            return 1, ""

    monkeypatch.setattr(cuda, "_probe", lambda: Module)
    monkeypatch.setattr(cuda, "_module", Module)
    docs = _documents(tok)
    assert _same(tok.encode_batch_to_numpy(docs), tok.encode_batch_to_numpy(docs, device="cuda"))
    tok.enable_truncation(9)
    assert _same(tok.encode_batch_to_numpy(docs), tok.encode_batch_to_numpy(docs, device="cuda:0"))
    # A tokenizer the stages do not take: an explicit GPU is an error, "auto" stays on the CPU.
    other = Tokenizer.from_file(hf_tokenizer_json("llama3_1"))
    with pytest.raises(NotImplementedError, match="no GPU path"):
        other.encode_batch_to_numpy(["hello"], device="cuda")
    assert _same(other.encode_batch_to_numpy(["hello"] * 3, device="auto"), other.encode_batch_to_numpy(["hello"] * 3))


def test_run_stages_checks_its_input():
    core = Tokenizer.from_file(hf_tokenizer_json("gpt2"))._engine.piece_engine()
    text = np.frombuffer(b"ab", np.uint8)
    no_specials = np.zeros((0, 2), np.uint32)
    with pytest.raises(ValueError, match="first byte"):
        core.run_stages(text, np.zeros(2, np.uint8), np.array([0, 2], np.uint64), no_specials)
    with pytest.raises(ValueError, match="rise from 0"):
        core.run_stages(text, np.ones(2, np.uint8), np.array([0, 3], np.uint64), no_specials)
    with pytest.raises(ValueError, match="special token where"):
        core.run_stages(text, np.ones(2, np.uint8), np.array([0, 2], np.uint64), np.array([[1, 5]], np.uint32))
