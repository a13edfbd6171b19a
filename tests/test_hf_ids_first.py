"""Ids first (issue 19): `Tokenizer.encode` / `encode_batch` take the ids from the engine's ids-only
path and build every other field when first read; the transformers face's batch call stops each
document at the truncation limit. These tests pin the lazy and early-stopped results to the eager,
whole-document ones (and to the reference libraries) on real vocabularies and corpora."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from crayon_hf._hf.errors import PanicException

from support import (NATIVE_FOLDERS, VOCAB, child_python, corpus_files, corpus_text, hf_pair, random_slices,
                     require_module, require_shared, short_docs)


FIELDS = ("ids", "type_ids", "tokens", "offsets", "attention_mask", "special_tokens_mask", "word_ids",
          "sequence_ids", "n_sequences")

load_pair = hf_pair


def texts() -> list[str]:
    out = ["", " ", "Hello world", "  leading and trailing  ", "a\n\nb\r\n", "日本語の文章です。", "x" * 500]
    for k, path in enumerate(corpus_files()):
        out += random_slices(corpus_text(path, 32 * 1024), 6, seed=300 + k, max_len=400)
    return out


def eager(tok, text: str, add_special_tokens: bool = True):
    """The eager path (what encode did before ids came first): engine encoding with offsets, then
    the post-processor."""
    from crayon_hf._hf.postprocess import post_process

    return post_process(tok._raw(text, False, 0), None, add_special_tokens, tok._truncation, tok._padding,
                        tok._processor)


def fields(enc) -> dict:
    return {f: getattr(enc, f) for f in FIELDS} | {"len": len(enc), "overflowing": len(enc.overflowing)}


def rows_equal(a, b) -> bool:
    """A BatchEncoding field: arrays, or ragged lists of ints / offset pairs."""
    if isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    if not b or not isinstance(b[0], list):  # "length": one int per document
        return list(a) == list(b)
    return [[tuple(x) if isinstance(x, (list, tuple)) else x for x in row] for row in a] == \
        [[tuple(x) if isinstance(x, (list, tuple)) else x for x in row] for row in b]


def is_lazy(enc) -> bool:
    try:
        object.__getattribute__(enc, "_build")
        return True
    except AttributeError:
        return False


@pytest.mark.parametrize("folder", NATIVE_FOLDERS)
def test_lazy_encode_equals_eager_and_reference(folder):
    ours, ref = load_pair(folder)
    if folder in ("gpt2", "llama3_1", "bert_base_uncased", "t5_small"):
        assert is_lazy(ours.encode("x"))
    for add in (True, False):
        for text in texts():
            lazy = ours.encode(text, add_special_tokens=add)
            built = not is_lazy(lazy)  # processors without a fixed layout encode eagerly
            assert len(lazy) == len(ref.encode(text, add_special_tokens=add).ids)
            assert built or is_lazy(lazy), "len() must not build the encoding"
            want = fields(eager(ours, text, add))
            assert fields(lazy) == want, f"{folder}: {text[:40]!r}"
            assert fields(ours.encode(text, add_special_tokens=add)) == fields(ref.encode(text, add_special_tokens=add))


@pytest.mark.parametrize("folder", ["gpt2", "llama3_1", "bert_base_uncased", "t5_small"])
def test_lazy_encoding_read_in_any_order(folder):
    """A field read first (offsets, tokens, a char lookup, a mutation, pickling) builds the whole
    encoding; the ids read afterwards are the same."""
    ours, ref = load_pair(folder)
    text = corpus_text(corpus_files()[0], 4096)
    r = ref.encode(text)
    assert ours.encode(text).offsets == r.offsets
    assert ours.encode(text).tokens == r.tokens
    assert ours.encode(text).char_to_token(10) == r.char_to_token(10)
    enc = ours.encode(text)
    enc.truncate(16)
    r.truncate(16)
    assert (enc.ids, enc.offsets, [o.ids for o in enc.overflowing]) == (r.ids, r.offsets, [o.ids for o in r.overflowing])
    back = pickle.loads(pickle.dumps(ours.encode(text)))
    assert (back.ids, back.offsets, back.word_ids) == (ref.encode(text).ids, ref.encode(text).offsets,
                                                       ref.encode(text).word_ids)


@pytest.mark.parametrize("folder", ["gpt2", "llama3_1", "bert_base_uncased"])
def test_lazy_ids_handed_over_once(folder):
    """The first `ids` read of a lazy encoding gives the engine's list itself; changing it changes
    nothing the encoding reports afterwards (ids again, length, every field, pickling), single or
    batched, and every read is a new list, as in tokenizers."""
    ours, ref = load_pair(folder)
    texts_ = [corpus_text(corpus_files()[0], 2048), "Hello world", ""]
    singles = [ours.encode(t) for t in texts_]
    batched = ours.encode_batch(texts_)
    for enc, text in zip(singles + batched, texts_ + texts_):
        r = ref.encode(text)
        first = enc.ids
        assert first == r.ids
        first.append(-1)
        first.insert(0, 12345)
        assert len(enc) == len(r)
        second = enc.ids
        assert second == r.ids and second is not first and enc.ids is not second
        assert fields(enc) == fields(r)
        back = pickle.loads(pickle.dumps(enc))
        assert fields(back) == fields(r)
    enc = ours.encode(texts_[0])
    assert fields(enc) == fields(ref.encode(texts_[0]))  # fields first, then the ids
    assert enc.ids == ref.encode(texts_[0]).ids


def test_lazy_encoding_keeps_the_state_of_its_call():
    """Settings changed after encode do not change what a lazy encoding builds later."""
    from crayon_hf import Tokenizer

    tok = Tokenizer.from_file(require_shared(VOCAB / "hf" / "llama3_1" / "tokenizer.json"))
    enc = tok.encode("Hello <|eot_id|> world")
    want = fields(eager(tok, "Hello <|eot_id|> world"))
    tok.add_tokens(["wor"])
    tok.enable_truncation(2)
    assert fields(enc) == want


@pytest.mark.parametrize("folder", ["gpt2", "llama3_1", "bert_base_uncased"])
def test_single_text_recipe_follows_every_state_change(folder):
    """`encode` of one str reads a recipe made from the tokenizer's state at its first call
    (`Tokenizer._single`); every way of changing that state afterwards drops it, so each encode
    equals the reference library put through the same changes."""
    import tokenizers
    from tokenizers import AddedToken
    from tokenizers.processors import TemplateProcessing

    from crayon_hf import Tokenizer

    path = require_shared(VOCAB / "hf" / folder / "tokenizer.json")
    ours, ref = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))  # changed below: not hf_pair's
    texts_ = ["Hello world, hello again", "", " a wor b ", corpus_text(corpus_files()[0], 600)]

    def same(step):
        for text in texts_:
            for add in (True, False):
                assert fields(ours.encode(text, add_special_tokens=add)) == \
                    fields(ref.encode(text, add_special_tokens=add)), f"{folder} after {step}: {text[:30]!r}"

    same("load")
    pad = ref.token_to_id("!") or 0
    sep = ref.id_to_token(pad)
    steps = [
        ("enable_truncation", lambda t: t.enable_truncation(3)),
        ("no_truncation", lambda t: t.no_truncation()),
        ("enable_padding(length)", lambda t: t.enable_padding(length=40, pad_id=pad)),
        ("enable_padding", lambda t: t.enable_padding(pad_id=pad)),
        ("no_padding", lambda t: t.no_padding()),
        ("add_tokens", lambda t: t.add_tokens(["wor", AddedToken("hello", single_word=True)])),
        ("add_special_tokens", lambda t: t.add_special_tokens(["again"])),
        ("encode_special_tokens", lambda t: setattr(t, "encode_special_tokens", True)),
        ("post_processor", lambda t: setattr(t, "post_processor", TemplateProcessing(
            single=f"{sep} $A {sep}", pair=f"$A {sep} $B:1", special_tokens=[(sep, pad)]))),
    ]
    for step, change in steps:
        change(ours)
        change(ref)
        same(step)
    back = pickle.loads(pickle.dumps(ours))
    for text in texts_:
        assert fields(back.encode(text)) == fields(ref.encode(text))


def test_lazy_batch_encodings_made_natively_keep_their_call(monkeypatch):
    """encode_batch's lazy encodings are made by the engine as the lists are (on two threads the
    calling thread makes them while the other encodes): each is lazy until read, builds from its
    own text with the settings of its call, and a malformed `lazy` spec is a TypeError."""
    from crayon_hf import Tokenizer

    tok = Tokenizer.from_file(require_shared(VOCAB / "hf" / "llama3_1" / "tokenizer.json"))
    docs = short_docs(200) + ["Hello <|eot_id|> world", ""]
    monkeypatch.setenv("CRAYON_NUM_THREADS", "2")
    got = tok.encode_batch(docs)
    assert all(is_lazy(e) for e in got)
    want = [fields(eager(tok, d)) for d in docs]
    tok.add_tokens(["wor"])
    tok.enable_truncation(2)
    assert [fields(e) for e in got] == want
    assert not any(is_lazy(e) for e in got)
    for spec in ((1, 2), (type(got[0]),), "x"):
        with pytest.raises(TypeError):
            tok._engine.encode_batch_id_lists(docs[:3], False, 1, [], [], lazy=spec)


class _Box:
    pass


def in_a_cycle(ids: list) -> "weakref.ref":
    """A weak reference to an object that, with `ids`, makes a cycle nothing else holds."""
    import weakref

    box = _Box()
    ids.append(box)
    box.ids = ids
    return weakref.ref(box)


def test_batch_calls_leave_the_gc_as_they_found_it(monkeypatch):
    """The batch calls (and the transformers face's list builders) hold the cyclic GC off while
    they build results (GcPause in native/python/bindings.cc): gc.isenabled() is what it was
    before the call, enabled or not, and the lists they return are tracked as any list is (a
    cycle through one is collected)."""
    import gc

    import crayon_hf.tiktoken as tk
    from crayon_hf import Tokenizer
    from crayon_hf._native import native

    tok = Tokenizer.from_file(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json"))
    enc = tk.get_encoding("cl100k_base")
    docs = short_docs(300)
    monkeypatch.setenv("CRAYON_NUM_THREADS", "2")
    was = gc.isenabled()
    try:
        for enabled in (True, False, True):
            gc.enable() if enabled else gc.disable()
            batch = tok.encode_batch(docs)
            lists = enc.encode_ordinary_batch(docs, num_threads=2)
            rows = native.int_lists(np.arange(12), np.array([0, 5, 12]))  # the transformers face's lists
            pairs = native.pair_lists(np.arange(12), np.arange(12) + 1, np.array([0, 12]))
            assert gc.isenabled() is enabled
            assert rows == [list(range(5)), list(range(5, 12))] and pairs == [[(i, i + 1) for i in range(12)]]
            assert [e.ids for e in batch] == [e.ids for e in tok.encode_batch(docs[:1] + docs[1:])]
            assert lists == [enc.encode_ordinary(d) for d in docs]

            for gone in (in_a_cycle(batch.pop().ids), in_a_cycle(lists.pop()), in_a_cycle(rows.pop())):
                gc.collect()
                assert gone() is None
    finally:
        gc.enable() if was else gc.disable()


@pytest.mark.parametrize("folder", ["gpt2", "llama3_1", "qwen2_5", "bert_base_uncased", "mistral_v0_1"])
def test_lazy_encode_batch_equals_reference(folder):
    ours, ref = load_pair(folder)
    docs = short_docs(300) + texts()[:20]
    got = ours.encode_batch(docs)
    want = ref.encode_batch(docs)
    assert [e.ids for e in got] == [e.ids for e in want]
    assert [fields(e) for e in got[:80]] == [fields(e) for e in want[:80]]


@pytest.mark.parametrize("folder", ["gpt2", "llama3_1", "qwen2_5", "bert_base_uncased", "mistral_v0_1", "t5_small"])
def test_ids_only_and_limited_engine_prefix_is_exact(folder):
    """The engine's ids-only output is its full output's ids; with a limit it stops at a piece
    boundary at or after `limit` tokens and what it gives is exactly the full encoding's prefix."""
    ours, _ = load_pair(folder)
    engine = ours._engine
    docs = short_docs(200) + texts()
    full = engine.encode_batch_raw(docs, False, 1)
    ids_only = engine.encode_batch_raw(docs, False, 1, False)
    assert full.complete and not ids_only.complete
    n = full.lengths()
    assert (ids_only.lengths() == n).all()
    empty = np.zeros((7, 0), np.int64)
    args = (False, empty, empty, -1, None, None, False, -1, False, 0, 0, 1)
    m_full, _ = full.assemble(n, *args)
    m_ids, _ = ids_only.assemble(n, *args)
    assert np.array_equal(m_full[0], m_ids[0])
    for limit in (0, 1, 5, 33, 129):
        part = engine.encode_batch_raw(docs, False, 1, True, limit)
        got = part.lengths()
        assert ((got >= np.minimum(n, limit)) & (got <= n)).all()
        keep = np.minimum(got, n)
        m_part, b_part = part.assemble(keep, *args)
        m_whole, _ = full.assemble(keep, *args)
        assert np.array_equal(m_part, m_whole), f"{folder}: limit {limit}"
    assert engine.encode_batch_id_lists(docs, False, 1) == [full.doc(i)[0].tolist() for i in range(len(docs))]
    # A post-processor's fixed prefix and suffix go around the ids in the same list, the ints shared.
    before, after = [7, 2**40, 0], [5]
    wrapped = engine.encode_batch_id_lists(docs, False, 1, before, after)
    assert wrapped == [before + full.doc(i)[0].tolist() + after for i in range(len(docs))]
    assert all(w[1] is before[1] for w in wrapped)
    assert engine.encode_id_list(docs[0], False, before, after) == wrapped[0]
    assert engine.encode_id_list(docs[0], False, [], []) == engine.encode_id_list(docs[0]) == full.doc(0)[0].tolist()
    with pytest.raises(TypeError):
        engine.encode_id_list(docs[0], False, (1,), [])


TRUNCATIONS = [
    dict(max_length=1), dict(max_length=2), dict(max_length=3), dict(max_length=16), dict(max_length=128),
    dict(max_length=40, stride=10), dict(max_length=16, strategy="only_first"),
    dict(max_length=16, strategy="only_second"), dict(max_length=4, stride=4), dict(max_length=20, stride=19),
    dict(max_length=24, direction="left"),
]


@pytest.mark.parametrize("folder", ["gpt2", "qwen2_5", "mistral_v0_1", "bert_base_uncased", "t5_small",
                                    "xlm_roberta_paraphrase_mpnet"])
def test_truncated_encode_stops_early_and_equals_eager_and_reference(folder):
    """`encode(text)` with right truncation takes the ids from an engine run that stops at the
    limit; they, and every field built when read (overflowing windows included), equal the eager
    path on the whole text and tokenizers. Where tokenizers raises (only_second on one sequence,
    a stride not below the room left), the same error; left truncation and padding are covered."""
    ours, ref = load_pair(folder)
    docs = [t for t in texts() if len(t) > 20][:20] + [corpus_text(p, 6000) for p in corpus_files()[:2]]
    for options in TRUNCATIONS:
        try:
            ref.enable_truncation(**options)
        except ValueError:  # a stride the folder's special tokens leave no room for: refused up front
            with pytest.raises(ValueError):
                ours.enable_truncation(**options)
            continue
        ours.enable_truncation(**options)
        for add in (True, False):
            for text in docs + ["", "a"]:
                try:
                    want = ref.encode(text, add_special_tokens=add)
                except BaseException as e:  # noqa: BLE001 - tokenizers refuses (an Exception, or a panic)
                    if isinstance(e, KeyboardInterrupt):
                        raise
                    # ...so must we: the same exception type, or our PanicException for its panic.
                    with pytest.raises(PanicException if type(e).__name__ == "PanicException" else type(e)):
                        ours.encode(text, add_special_tokens=add)
                    continue
                got = ours.encode(text, add_special_tokens=add)
                assert got.ids == want.ids, f"{folder} {options} {text[:40]!r}"
                assert fields(got) == fields(eager(ours, text, add)) == fields(want), f"{folder} {options}"
                assert [o.ids for o in got.overflowing] == [o.ids for o in want.overflowing]
    ours.enable_padding(pad_id=0, pad_token=ours.id_to_token(0) or "x")  # to the longest of one: no change
    ref.enable_padding(pad_id=0, pad_token=ours.id_to_token(0) or "x")
    ours.enable_truncation(8)
    ref.enable_truncation(8)
    for text in docs:
        assert fields(ours.encode(text)) == fields(ref.encode(text))
    ours.enable_padding(pad_id=0, pad_token=ours.id_to_token(0) or "x", length=12)  # fixed: the eager path
    ref.enable_padding(pad_id=0, pad_token=ours.id_to_token(0) or "x", length=12)
    for text in docs[:10]:
        assert fields(ours.encode(text)) == fields(ref.encode(text))
    ours.no_padding()
    ref.no_padding()
    ours.no_truncation()
    ref.no_truncation()


@pytest.mark.parametrize("folder", ["gpt2", "llama3_1", "qwen2_5", "bert_base_uncased", "t5_small"])
@pytest.mark.parametrize("max_length", [1, 3, 16, 128])
def test_truncation_aware_batch_equals_stock(folder, max_length):
    """`tok(texts, padding=True, truncation=True, max_length=...)` stops encoding each document at
    the limit; rows (and the per-document encodings, encoded again whole) equal stock's."""
    transformers = require_module("transformers")
    from crayon_hf.transformers import CrayonTokenizer

    path = str(require_shared(VOCAB / "hf" / folder / "tokenizer.json").parent)
    ours = CrayonTokenizer.from_pretrained(path)
    stock = transformers.AutoTokenizer.from_pretrained(path)
    for t in (ours, stock):
        if t.pad_token is None:
            t.pad_token = t.eos_token or t.unk_token or t.convert_ids_to_tokens(0)
    docs = short_docs(150) + [corpus_text(p, 3000) for p in corpus_files()]
    for kwargs in (dict(padding=True, return_tensors="np"), dict(padding=True, return_offsets_mapping=True),
                   dict(return_length=True), dict(padding="max_length", return_tensors="np", stride=0)):
        if max_length <= (ours.num_special_tokens_to_add(False)) and kwargs.get("padding") == "max_length":
            continue
        try:
            want = stock(docs, truncation=True, max_length=max_length, **kwargs)
        except Exception as e:  # noqa: BLE001 - stock refuses: so must we
            with pytest.raises(type(e)):
                ours(docs, truncation=True, max_length=max_length, **kwargs)
            continue
        got = ours(docs, truncation=True, max_length=max_length, **kwargs)
        assert set(got) == set(want)
        for key in want:
            assert rows_equal(got[key], want[key]), f"{folder} {kwargs} {key}"
        for i in (0, len(docs) - 1):
            assert got.encodings[i].ids == want.encodings[i].ids
            assert got.encodings[i].offsets == want.encodings[i].offsets
            assert [o.ids for o in got.encodings[i].overflowing] == [o.ids for o in want.encodings[i].overflowing]


@pytest.mark.parametrize("folder", ["qwen2_5", "llama3_1", "bert_base_uncased"])
def test_ids_only_encode_never_imports_numpy(folder, tmp_path):
    # Importing numpy costs more than importing crayon-hf and loading a cartridge together; a fresh
    # process that loads a cartridge and reads ids (and decodes) must not pay it. Reading offsets
    # may import it (the full encoding is a numpy matrix). Nor the standard modules only other
    # paths need (a compile, the cache's writes and CLI, logging a slow first compile): together
    # they were 40% of the instructions of `from crayon_hf import Tokenizer`.
    import json
    import subprocess
    import sys

    from crayon_hf import Tokenizer

    cartridge = tmp_path / "t.dat"
    Tokenizer.from_file(str(require_shared(VOCAB / "hf" / folder / "tokenizer.json"))).save_cartridge(str(cartridge))
    script = (
        "import json, sys\n"
        "from crayon_hf import Tokenizer\n"
        f"tok = Tokenizer.from_file({str(cartridge)!r})\n"
        "enc = tok.encode('Hello world, a first encode in a fresh process.')\n"
        "ids = enc.ids\n"
        "batch = [e.ids for e in tok.encode_batch(['one', 'two documents'])]\n"
        "text = tok.decode(ids)\n"
        "before = 'numpy' in sys.modules\n"
        "heavy = [m for m in ('logging', 'argparse', 'tempfile', 'dataclasses', 'inspect', 'hashlib', 'copy') "
        "if m in sys.modules]\n"
        "offsets = enc.offsets\n"
        "print(json.dumps({'numpy': before, 'heavy': heavy, 'ids': ids, 'batch': batch, 'text': text, "
        "'offsets': offsets}))\n"
    )
    out = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                                    **child_python()).stdout)
    assert out["numpy"] is False
    assert out["heavy"] == []
    tok = Tokenizer.from_file(str(cartridge))
    enc = tok.encode("Hello world, a first encode in a fresh process.")
    assert out["ids"] == enc.ids and out["text"] == tok.decode(enc.ids)
    assert [tuple(o) for o in out["offsets"]] == enc.offsets
    assert out["batch"] == [e.ids for e in tok.encode_batch(["one", "two documents"])]


def test_interned_id_ints_keep_their_reference_counts():
    """Id lists share one int object per id value (native/python/bindings.cc, interned_id): the
    same values as fresh ints, and a list's references go away with it (a missing or extra
    reference would free an int still in use, or leak)."""
    import sys

    ours, ref = load_pair("gpt2")
    text = corpus_text(corpus_files()[0], 4 * 1024)
    first = ours.encode(text).ids
    assert first == ref.encode(text).ids
    probe = max((i for i in set(first) if i > 256), key=first.count)  # past CPython's small ints
    held = first[first.index(probe)]
    before = sys.getrefcount(held)
    lists = [ours.encode(text).ids for _ in range(20)]
    assert all(x is held for ids in lists for x in ids if x == probe)
    assert sys.getrefcount(held) == before + 20 * first.count(probe)
    del lists
    assert sys.getrefcount(held) == before


@pytest.mark.parametrize("behavior", ["Removed", "Isolated", "MergedWithPrevious", "Contiguous"])
def test_ids_only_split_pieces_on_the_fast_path(behavior):
    """Pre-tokenizers that do not stream (several steps, or pieces that leave text out) hand the
    ids-only encode a list of pieces that go straight to the tiktoken engine
    (HfEngine::encode_pieces_fast); ids against tokenizers, and against the offsets path."""
    import json

    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    data = json.loads(require_shared(VOCAB / "hf" / "gpt2" / "tokenizer.json").read_text(encoding="utf-8"))
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"\s+|\d"}, "behavior": behavior, "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    text = json.dumps(data)
    ours, ref = Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    assert ours._engine.has_fast_path
    for t in texts():
        expected = ref.encode(t)
        got = ours.encode(t)
        assert got.ids == expected.ids, t[:60]
        assert got.offsets == expected.offsets, t[:60]  # the eager path, read after the ids
    assert [e.ids for e in ours.encode_batch(texts())] == [e.ids for e in ref.encode_batch(texts())]


@pytest.mark.parametrize("prepend_scheme", ["first", "always"])
def test_ids_only_text_a_bert_normalizer_changes(prepend_scheme):
    """Text a BertNormalizer changes (accents stripped, control chars dropped, spaces put around
    CJK chars, letters lowercased) is normalized without alignments for ids only, where no step
    reads them; a Metaspace that prepends only to the first piece of the original text reads them
    (a dropped leading control char, or a CJK char with its inserted space, changes which piece
    that is), and takes the aligned path. Ids against tokenizers, and against the offsets path."""
    import json

    tokenizers = require_module("tokenizers")
    from crayon_hf import Tokenizer

    data = json.loads(require_shared(VOCAB / "hf" / "bert_base_uncased" / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    for word in list(vocab):  # the same words with Metaspace's prefix, so both kinds of piece have tokens
        if not word.startswith("##"):
            vocab.setdefault("\u2581" + word, len(vocab))
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": prepend_scheme,
                             "split": True}
    data["decoder"] = None
    text = json.dumps(data)
    ours, ref = Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    samples = ["\x01Élan vital", "中文 text", "\x01\x02中 first", " Ça va? ÉCOLE", "ÀÉÎÕÜ naïve café",
               "\u3000Ünïcödé\u00a0spaces", *texts()[:40]]
    for t in samples:
        expected = ref.encode(t)
        got = ours.encode(t)
        assert got.ids == expected.ids, t[:60]
        assert got.offsets == expected.offsets, t[:60]
