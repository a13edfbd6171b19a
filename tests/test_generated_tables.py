"""Generated tables are committed with their generator; regenerating must give the same bytes.

Each generator's `--check` answers at once when the header and the inputs that decide it (the
generators' sources, Python's Unicode database, the probed packages' versions) are the ones
recorded when it was written (tools/_generated.py), and regenerates to compare otherwise. The
default run takes that way; `-m full` regenerates every table (10-45 s each), and the record's
own logic is tested here on a scratch header.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from support import ROOT, require_module

TOOLS = ROOT / "tools"
GENERATORS = ["gen_unicode_tables.py", "gen_grapheme_tables.py", "gen_normalize_tables.py", "gen_bert_tables.py",
              "gen_word_char_table.py", "gen_regex_tables.py"]


def _check(script: str, *extra: str) -> subprocess.CompletedProcess:
    for name in ("tiktoken", "tokenizers", "unicodedata2", "regex", "numpy"):
        require_module(name)  # the full way imports them
    return subprocess.run([sys.executable, str(TOOLS / script), "--check", *extra], capture_output=True, text=True,
                          cwd=TOOLS, timeout=900)


@pytest.mark.parametrize("script", GENERATORS)
def test_tables_are_current(script):
    out = _check(script)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.full
@pytest.mark.parametrize("script", GENERATORS)
def test_tables_are_current_regenerated(script):
    out = _check(script, "--full")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "is up to date" in out.stdout and "generated from these inputs" not in out.stdout


@pytest.fixture
def generated(monkeypatch, tmp_path):
    """tools/_generated.py with its checkout root and record moved into tmp_path."""
    monkeypatch.syspath_prepend(str(TOOLS))
    module = importlib.import_module("_generated")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    monkeypatch.setattr(module, "RECORD", tmp_path / "record.json")
    return module


def test_record_answers_only_for_the_header_and_inputs_it_saw(generated, tmp_path, monkeypatch):
    header = tmp_path / "native" / "table.h"
    header.parent.mkdir()
    calls = []

    def build():
        calls.append(1)
        return "// table\nconst int x = 1;\n"

    def main(*args):
        monkeypatch.setattr(sys, "argv", ["gen_table.py", *args])
        return generated.generator_main(build, header, "A table.\n", "gen_table.py", inputs=generated.PROBED)

    assert main() == 0 and len(calls) == 1  # written and recorded
    assert generated.recorded_current(header, generated.PROBED)
    assert main("--check") == 0 and len(calls) == 1  # answered from the record, nothing built
    assert main("--check", "--full") == 0 and len(calls) == 2

    # A header edited by hand is not the one recorded: the check regenerates and fails.
    header.write_text("// table\nconst int x = 2;\n", encoding="utf-8")
    assert not generated.recorded_current(header, generated.PROBED)
    assert main("--check") == 1 and len(calls) == 3

    # Restored, but another version of a probed package (here one more package, absent): the
    # inputs differ, so the check regenerates (and passes, the output being the same).
    header.write_text(build(), encoding="utf-8")
    assert generated.recorded_current(header, generated.PROBED)
    assert not generated.recorded_current(header, (*generated.PROBED, "no-such-package-crayon"))

    # An edited generator changes the fingerprint too (every tools/gen_*.py is hashed).
    before = generated.inputs_fingerprint(generated.PROBED)
    monkeypatch.setattr(generated, "TOOLS", tmp_path)
    (tmp_path / "gen_table.py").write_text("# another generator\n", encoding="utf-8")
    assert generated.inputs_fingerprint(generated.PROBED) != before

    # A missing or damaged record answers nothing.
    generated.RECORD.write_text("not json", encoding="utf-8")
    assert not generated.recorded_current(header, generated.PROBED)
