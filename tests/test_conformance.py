"""The references' own test suites against our faces (issue 21): a developer job, not part of the
default run (`pytest -m conformance` runs it). tools/conformance/run.py fetches tiktoken's and
tokenizers' source distributions from PyPI on first use (cached after), runs their tests with our
face swapped in, and fails when a test pinned in tests/conformance/<suite>.pass stops passing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tools" / "conformance" / "run.py"

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize("suite", ["tiktoken", "tokenizers"])
def test_reference_suite_passes_against_our_face(suite, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("crayon_conformance_run", RUN)
    conformance = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conformance)
    try:
        conformance.fetch(suite)
    except (OSError, RuntimeError) as e:
        pytest.skip(f"cannot fetch {suite}'s source distribution (offline?): {e}")
    done = subprocess.run([sys.executable, str(RUN), suite], capture_output=True, text=True, cwd=tmp_path)
    summary = [line for line in done.stdout.splitlines() if not line.startswith((".", "F", "E", "s"))]
    assert done.returncode == 0, "\n".join(summary[-40:])
    assert "REGRESSION" not in done.stdout
