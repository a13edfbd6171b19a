"""crayon_hf.Tokenizer against tokenizers.Tokenizer through the public API, for every normalizer the
engine runs natively: ids, tokens and offsets (and a panic where tokenizers panics).

The configurations, the string generator and the comparison live in fuzz/normalizer_hunt.py (the
long differential hunt, see docs/normalizers.md). Here they run three ways:

  REGRESSIONS       every counterexample the hunt or a property test ever found, replayed on each
                    run (append new ones here: configuration name, model, text)
  smoke             a few hundred generated strings per configuration, fixed seed: deterministic
  pytest -m fuzz    the long hunt (CRAYON_FUZZ_STRINGS strings per configuration, default 200000;
                    CRAYON_FUZZ_SEED, default a fresh one, printed); not part of the default run
"""
from __future__ import annotations

import importlib.util
import os
import random

import pytest

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is the reference for the normalizers")

import crayon_hf  # noqa: E402
from support import ROOT, VOCAB, require_shared  # noqa: E402

os.environ["RUST_BACKTRACE"] = "0"  # tokenizers panics on purpose in some configurations


def _load_hunt():
    spec = importlib.util.spec_from_file_location("normalizer_hunt", ROOT / "fuzz" / "normalizer_hunt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hunt = _load_hunt()
CONFIGS = hunt.configurations()
PAIRS = [(name, model) for name, (_, models) in CONFIGS.items() for model in models]

# (configuration, model, text): every counterexample found so far. The first is issue 25's, found
# by test_bert_components.py's hypothesis test; the others are what fuzz/normalizer_hunt.py found
# on the code before that fix (a control removed by clean_text, inside an ASCII run, between a
# starter and the marks NFD reorders ended the NFD run early), shrunk.
REGRESSIONS = [
    ("bert[clean+chinese+strip+lower]", "bert", "0\U0001d15e\x01\u093c"),
    ("bert[clean+chinese+strip+lower]", "bytes", "0\U0001d15e\x01\u093c"),
    ("bert[clean+strip]", "bytes", "\u2c05\U0002f8ef\u0302\x1e\U0001d171"),
    ("bert[clean+strip]", "bytes", "\U00011233\u10cd\U0001d16e\x08\u0327"),
    ("bert[clean+strip]", "bytes", "#\u20e3\U0001d16e\x0f\u0338"),
    # tokenizers panics (Prepend("") poisons the text, see native/text/normalize.h): so must we,
    # with a PanicException (a BaseException), not a RuntimeError.
    ("prepend('')+bert[all]", "chars", "a"),
    ("prepend('')+bert[clean+strip]", "chars", "\x00a\u0301"),
]


def _pair(name: str, model: str):
    if model == "bert":
        require_shared(hunt.BERT_JSON)
    if "Precompiled" in name:
        require_shared(hunt.T5_JSON)
    make, _ = CONFIGS[name]
    return hunt.load_pair(make(), model)


def test_issue_25_reproducer():
    """The issue's own lines, on the published bert_base_uncased tokenizer.json."""
    path = require_shared(VOCAB / "hf" / "bert_base_uncased" / "tokenizer.json")
    s = "0\U0001d15e\x01\u093c"
    ref = tokenizers.Tokenizer.from_file(str(path)).encode(s)
    ours_tok = crayon_hf.Tokenizer.from_file(path)
    assert ours_tok.crayon_backend == "native"
    ours = ours_tok.encode(s)
    assert (ours.ids, ours.tokens, ours.offsets) == (ref.ids, ref.tokens, ref.offsets)


@pytest.mark.parametrize("name,model,text", REGRESSIONS, ids=[f"{n}-{m}-{i}" for i, (n, m, _) in enumerate(REGRESSIONS)])
def test_regressions(name, model, text):
    ref, ours = _pair(name, model)
    assert hunt._result(ours, text) == hunt._result(ref, text)


def test_panic_is_panic_exception():
    ref, ours = _pair("prepend('')+bert[all]", "chars")
    with pytest.raises(BaseException) as ref_exc:
        ref.encode("a")
    with pytest.raises(BaseException) as our_exc:
        ours.encode("a")
    assert type(ref_exc.value).__name__ == type(our_exc.value).__name__ == "PanicException"
    assert not isinstance(our_exc.value, Exception)


@pytest.fixture(scope="module")
def pools():
    return hunt.Pools()


@pytest.mark.parametrize("name,model", PAIRS, ids=[f"{n}-{m}" for n, m in PAIRS])
def test_smoke(pools, name, model):
    """300 generated strings per configuration, the same ones on every run."""
    ref, ours = _pair(name, model)
    gen = hunt.texts(pools, seed=25)
    batch = [next(gen) for _ in range(300)]
    bad = hunt.compare_batch(ref, ours, batch)
    assert not bad, f"{name} / {model}: {len(bad)} mismatches, shrunk: {hunt.shrink(ref, ours, bad[0])!r}"


@pytest.mark.fuzz
@pytest.mark.parametrize("name,model", PAIRS, ids=[f"{n}-{m}" for n, m in PAIRS])
def test_hunt(pools, name, model):
    """The long hunt; see the module docstring for its environment variables."""
    n = int(os.environ.get("CRAYON_FUZZ_STRINGS", "200000"))
    seed = int(os.environ.get("CRAYON_FUZZ_SEED", str(random.randrange(1 << 30))))
    print(f"{name} / {model}: {n} strings, CRAYON_FUZZ_SEED={seed}")
    ref, ours = _pair(name, model)
    gen = hunt.texts(pools, seed)
    found = []
    done = 0
    while done < n:
        batch = [next(gen) for _ in range(min(2000, n - done))]
        done += len(batch)
        found += hunt.compare_batch(ref, ours, batch)
        if len(found) >= 5:
            break
    shrunk = sorted({hunt.shrink(ref, ours, t) for t in found[:5]}, key=len)
    assert not found, (f"{name} / {model} (CRAYON_FUZZ_SEED={seed}): {len(found)} mismatches in {done} strings;"
                       f" shrunk: {shrunk!r} - add them to REGRESSIONS")
