"""Generated tables are committed with their generator; regenerating must give the same bytes."""

from __future__ import annotations

import subprocess
import sys

from support import ROOT, require_module


def test_unicode_tables_are_current():
    require_module("tiktoken")
    require_module("unicodedata2")
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_unicode_tables.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT / "tools",
    )
    assert out.returncode == 0, out.stdout + out.stderr
