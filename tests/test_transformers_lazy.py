"""The transformers parity tests again, with `ours` restored from a folder saved by crayon-hf:
`CrayonTokenizer.from_pretrained(saved)` maps crayon.dat, restores the stock-loaded state from
crayon_state.json and builds the stock backend only when something reads it (crayon_hf/
_pretrained_state.py). Every test below starts with that backend not built; the results must
still equal stock transformers'. Plus the checks specific to restoring: load without building the
backend, a folder without tokenizer.json, thread-safe building, stale state files ignored."""

from __future__ import annotations

import os
import shutil
import threading

import pytest

import test_transformers_parity as parity
from support import BYTE_LEVEL_FOLDERS, VOCAB, require_module, require_shared
from test_transformers_parity import (  # noqa: F401  (collected here again, in LAZY mode)
    MATRIX_FOLDERS,
    pair,
    test_added_tokens,
    test_apply_chat_template,
    test_batch_encoding_helpers,
    test_batch_encoding_helpers_single,
    test_batch_encoding_helpers_words,
    test_call_batch_options,
    test_call_errors_and_odd_inputs,
    test_call_long_document,
    test_call_pairs,
    test_call_sample,
    test_call_single_string_and_pair,
    test_call_split_into_words,
    test_class_and_backend,
    test_decode,
    test_decode_input_types,
    test_encode_and_tokenize,
    test_other_attributes,
    test_pad_to_model_max_length,
    test_padding_without_pad_token,
    test_side_attributes,
    test_text_target_and_pad,
    test_vocabulary,
)


@pytest.fixture(scope="module", autouse=True)
def _lazy_mode():
    parity._LOADED.clear()
    parity.LAZY = True
    yield
    parity.LAZY = False
    parity._LOADED.clear()


# Folders whose state round-trips. The others load the stock way (checked below): CLIP wraps its
# backend's decode; the Unigram folders' scores do not survive tokenizers' JSON parsing; Mistral's
# class changes the backend when it loads a saved folder, so the saved cartridge is not the state
# the stock load gives (and is recompiled on load, as before).
RESTORED = [f for f in BYTE_LEVEL_FOLDERS if f != "clip"] + ["bert_base_uncased", "gemma"]
# The parity matrix runs again here on a sample of the restored folders, one of each kind of
# state (GPT-2's class, Llama 3's and Qwen2's templates and post-processors, Whisper's timestamps,
# WordPiece, SentencePiece-style BPE); the other restored folders under -m full. The folders that
# load the stock way would only repeat test_transformers_parity.py (that they do load the stock
# way is checked below). test_restored_without_backend covers every restored folder's state.
LAZY_SAMPLE = ["gpt2", "llama3_1", "qwen2_5", "whisper_large_v3", "bert_base_uncased", "gemma"]


def _sampled(folders: list[str]) -> list:
    return [f if f in LAZY_SAMPLE else pytest.param(f, marks=pytest.mark.full) for f in folders if f in RESTORED]


@pytest.fixture(params=_sampled(RESTORED))
def folder(request):
    return request.param


@pytest.fixture(params=_sampled(MATRIX_FOLDERS))
def matrix_pair(request):
    return parity.load_pair(request.param)


def _saved(folder: str) -> str:
    path = str(require_shared(VOCAB / "hf" / folder / "tokenizer.json").parent)
    return parity._saved_folder(folder, path)


@pytest.mark.parametrize("name", RESTORED)
def test_restored_without_backend(name):
    """Loading reads no tokenizer.json: the backend is built on first read, once, and equals the
    stock one; the vocabulary copies some classes keep are equal too."""
    transformers = require_module("transformers")
    from crayon_hf.transformers import CrayonTokenizer

    saved = _saved(name)
    assert os.path.isfile(os.path.join(saved, "crayon_state.json"))
    ours = CrayonTokenizer.from_pretrained(saved)
    assert "_crayon_lazy" in ours.__dict__ and "_tokenizer" not in ours.__dict__
    ref = transformers.AutoTokenizer.from_pretrained(str(VOCAB / "hf" / name))
    text = "Hello world! 123 don't <s> 中文"
    assert ours(text)["input_ids"] == ref(text)["input_ids"]
    assert ours.backend_tokenizer.to_str() == ref.backend_tokenizer.to_str()
    for attr in ("_vocab", "_merges", "_vocab_scores"):
        if attr in ref.__dict__:
            assert getattr(ours, attr) == ref.__dict__[attr], attr
    # AutoTokenizer takes the same path for a folder saved by crayon-hf.
    auto = transformers.AutoTokenizer.from_pretrained(saved)
    assert isinstance(auto, CrayonTokenizer) and "_tokenizer" not in auto.__dict__


def test_backend_state_read_once_and_its_floats_seen():
    """A first load serializes the stock backend once (BackendJson) and proves the state's round
    trip through tokenizers only where it holds floats, the values tokenizers may read back an ulp
    off; numbers inside strings are not floats."""
    from tokenizers import Tokenizer as Backend
    from tokenizers import models

    from crayon_hf._pretrained_state import BackendJson

    vocab = {"1": 0, ".": 1, "5": 2, "1.": 3, "1.5": 4, "1e5": 5}
    merges = [("1", "."), ("1.", "5")]
    plain = BackendJson(Backend(models.BPE(vocab=dict(vocab), merges=list(merges))))
    assert plain.parsed() is plain.parsed()
    assert plain.parsed()["model"]["vocab"] == vocab and not plain.has_floats()
    assert Backend.from_str(plain.text).to_str() == plain.text
    assert BackendJson(Backend(models.BPE(vocab=dict(vocab), merges=list(merges), dropout=0.1))).has_floats()
    assert BackendJson(Backend(models.Unigram([("a", -1.5), ("b", -2.0)], 0, False))).has_floats()


def test_folder_without_tokenizer_json(tmp_path):
    """crayon.dat + tokenizer_config.json (+ crayon_state.json) is a complete folder; saving it
    again writes tokenizer.json, so transformers alone can load the copy."""
    transformers = require_module("transformers")
    from crayon_hf.transformers import CrayonTokenizer

    folder = tmp_path / "only-cartridge"
    shutil.copytree(_saved("qwen2_5"), folder)
    (folder / "tokenizer.json").unlink()
    ours = CrayonTokenizer.from_pretrained(str(folder))
    ref = transformers.AutoTokenizer.from_pretrained(str(VOCAB / "hf" / "qwen2_5"))
    texts = ["Hello, world!", "<|im_start|>user\n中文<|im_end|>"]
    assert ours(texts)["input_ids"] == ref(texts)["input_ids"]
    assert ours.get_vocab() == ref.get_vocab()
    out = tmp_path / "again"
    ours.save_pretrained(str(out))
    assert (out / "tokenizer.json").is_file()
    stock = transformers.AutoTokenizer._crayon_original_from_pretrained.__func__(transformers.AutoTokenizer, str(out))
    assert stock(texts)["input_ids"] == ref(texts)["input_ids"]


def test_backend_built_once_across_threads():
    from crayon_hf.transformers import CrayonTokenizer

    ours = CrayonTokenizer.from_pretrained(_saved("gpt2"))
    barrier = threading.Barrier(8)
    seen = []

    def read():
        barrier.wait()
        seen.append(ours.backend_tokenizer)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 8 and all(b is seen[0] for b in seen)


def test_changed_folder_loads_the_stock_way(tmp_path):
    """A state file describes the exact files it was saved with: edit one and the folder loads
    the stock way (backend built at load), with the edit in effect."""
    from crayon_hf.transformers import CrayonTokenizer

    folder = tmp_path / "edited"
    shutil.copytree(_saved("gpt2"), folder)
    config = folder / "tokenizer_config.json"
    config.write_text(config.read_text(encoding="utf-8").replace('"model_max_length": 1024', '"model_max_length": 77'),
                      encoding="utf-8")
    ours = CrayonTokenizer.from_pretrained(str(folder))
    assert "_crayon_lazy" not in ours.__dict__ and ours.model_max_length == 77
    # Options that change the loaded state also take the stock way.
    opt = CrayonTokenizer.from_pretrained(_saved("gpt2"), padding_side="left")
    assert "_crayon_lazy" not in opt.__dict__ and opt.padding_side == "left"


@pytest.mark.parametrize("name", ["clip", "t5_small", "mistral_v0_1"])
def test_not_restorable_folders_load_the_stock_way(name):
    from crayon_hf.transformers import CrayonTokenizer

    saved = _saved(name)
    assert not os.path.exists(os.path.join(saved, "crayon_state.json"))
    ours = CrayonTokenizer.from_pretrained(saved)
    assert "_tokenizer" in ours.__dict__


# ---------------------------------------------------------------------------- plain folders
# A folder crayon-hf did not save: the first CrayonTokenizer load goes the stock way and leaves
# its state in the cache (keyed by the folder's files); later loads restore it the same way.

PLAIN_TEXTS = ["Hello world! 123 don't", "中文 <s> </s> 😀 é\u0301", "  leading and trailing  ", ""]


def _plain_load(folder, **kwargs):
    from crayon_hf.transformers import CrayonTokenizer

    CrayonTokenizer.from_pretrained(folder, **kwargs)  # the first load of the session remembers
    return CrayonTokenizer.from_pretrained(folder, **kwargs)


def _assert_same_tokenizer(ours, ref) -> None:
    for t in (ref, ours):
        parity.give_pad_token(t)
    assert isinstance(ours, type(ref))
    assert type(ours).__name__ == f"Crayon{type(ref).__name__}" or type(ref).__name__ == "TokenizersBackend"
    for k, v in ref.__dict__.items():
        if k != "_tokenizer":
            assert getattr(ours, k) == v, k
    assert ours(PLAIN_TEXTS)["input_ids"] == ref(PLAIN_TEXTS)["input_ids"]
    pair = (PLAIN_TEXTS[:2], PLAIN_TEXTS[1:3])
    options = dict(padding="max_length", truncation=True, max_length=9, return_offsets_mapping=True)
    assert ours(*pair, **options).data == ref(*pair, **options).data
    ids = ref(PLAIN_TEXTS[1])["input_ids"]
    assert ours.decode(ids) == ref.decode(ids) and ours.convert_ids_to_tokens(ids) == ref.convert_ids_to_tokens(ids)
    assert ours.get_vocab() == ref.get_vocab() and len(ours) == len(ref)
    assert ours.backend_tokenizer.to_str() == ref.backend_tokenizer.to_str()


@pytest.mark.parametrize("name", ["gpt2", "qwen2_5", "llama3_1", "whisper_large_v3", "bert_base_uncased", "gemma"])
def test_plain_folder_restored_from_the_cache(name):
    transformers = require_module("transformers")

    folder = str(require_shared(VOCAB / "hf" / name / "tokenizer.json").parent)
    ours = _plain_load(folder)
    assert "_crayon_lazy" in ours.__dict__ and "_tokenizer" not in ours.__dict__
    assert ours.name_or_path == folder
    ref = transformers.AutoTokenizer._crayon_original_from_pretrained.__func__(transformers.AutoTokenizer, folder)
    _assert_same_tokenizer(ours, ref)


@pytest.mark.parametrize("name", ["clip", "t5_small"])
def test_plain_folder_not_restorable_loads_the_stock_way_every_time(name):
    folder = str(require_shared(VOCAB / "hf" / name / "tokenizer.json").parent)
    ours = _plain_load(folder)
    assert "_crayon_lazy" not in ours.__dict__ and "_tokenizer" in ours.__dict__


def test_plain_folder_edited_moved_or_with_options(tmp_path):
    """The state is keyed by every file's content: an edit loads the stock way, with the edit in
    effect, and is remembered in turn; a copy elsewhere restores with its own path; loading
    options other than neutral ones always take the stock way."""
    transformers = require_module("transformers")

    folder = tmp_path / "copy"
    shutil.copytree(require_shared(VOCAB / "hf" / "gpt2"), folder)
    ours = _plain_load(str(folder))
    assert "_crayon_lazy" in ours.__dict__ and ours.name_or_path == str(folder)
    config = folder / "tokenizer_config.json"
    config.write_text(config.read_text(encoding="utf-8").replace('"model_max_length": 1024', '"model_max_length": 77'),
                      encoding="utf-8")
    from crayon_hf.transformers import CrayonTokenizer

    edited = CrayonTokenizer.from_pretrained(str(folder))
    assert "_crayon_lazy" not in edited.__dict__ and edited.model_max_length == 77
    again = CrayonTokenizer.from_pretrained(str(folder))
    assert "_crayon_lazy" in again.__dict__ and again.model_max_length == 77
    moved = tmp_path / "moved"
    folder.rename(moved)
    restored = CrayonTokenizer.from_pretrained(str(moved))
    assert "_crayon_lazy" in restored.__dict__ and restored.name_or_path == str(moved)
    ref = transformers.AutoTokenizer._crayon_original_from_pretrained.__func__(transformers.AutoTokenizer, str(moved))
    _assert_same_tokenizer(restored, ref)
    left = CrayonTokenizer.from_pretrained(str(moved), padding_side="left")
    assert "_crayon_lazy" not in left.__dict__ and left.padding_side == "left"


def test_plain_folder_stale_record_and_unwritable_cache(tmp_path, monkeypatch):
    """A record whose cartridge left the cache loads the stock way and is taken again; a cache
    that cannot be written loses nothing but the restore."""
    from crayon_hf import _cache
    from crayon_hf.transformers import CrayonTokenizer

    folder = str(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json").parent)
    monkeypatch.setenv("CRAYON_HF_CACHE", str(tmp_path / "cache"))
    CrayonTokenizer.from_pretrained(folder)
    cartridges = [p for p in (tmp_path / "cache").iterdir() if p.suffix == ".dat"]
    states = [p for p in (tmp_path / "cache").iterdir() if p.suffix == ".state"]
    assert len(cartridges) == 1 and len(states) == 1
    cartridges[0].unlink()
    stale = CrayonTokenizer.from_pretrained(folder)
    assert "_crayon_lazy" not in stale.__dict__ and stale("Hello")["input_ids"] == [15496]
    assert "_crayon_lazy" in CrayonTokenizer.from_pretrained(folder).__dict__
    assert {e.kind for e in _cache.entries(tmp_path / "cache")} >= {"cartridge", "transformers state"}

    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"")
    monkeypatch.setenv("CRAYON_HF_CACHE", str(blocker / "cache"))
    _cache._warned.clear()
    try:
        with pytest.warns(RuntimeWarning, match="cannot write to the cache directory"):
            ours = CrayonTokenizer.from_pretrained(folder)
            again = CrayonTokenizer.from_pretrained(folder)
    finally:
        _cache._warned.clear()
    for tok in (ours, again):
        assert "_crayon_lazy" not in tok.__dict__ and tok("Hello")["input_ids"] == [15496]


def test_patched_auto_tokenizer_restores_plain_folders():
    transformers = require_module("transformers")
    import crayon_hf
    from crayon_hf.transformers import CrayonTokenizer

    folder = str(require_shared(VOCAB / "hf" / "qwen2_5" / "tokenizer.json").parent)
    crayon_hf.patch_transformers()
    try:
        transformers.AutoTokenizer.from_pretrained(folder)
        tok = transformers.AutoTokenizer.from_pretrained(folder)
    finally:
        crayon_hf.unpatch_transformers()
    assert isinstance(tok, CrayonTokenizer) and "_crayon_lazy" in tok.__dict__
