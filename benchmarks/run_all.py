#!/usr/bin/env python3
"""The whole benchmark matrix: every vocabulary in ../shared/vocab against every corpus in
../shared/corpora, side by side with tokenizers / tiktoken / transformers (and tokie, fastokens
when installed). Writes benchmarks/results/suite.{md,json,png}, suite_summary.png, and the summary
block of README.md. About 20 minutes on 2 cores; run it on a quiet machine.

    python benchmarks/run_all.py                     # the whole matrix
    python benchmarks/run_all.py --only gpt2 --only cl100k_base   # rerun some rows, merged into the rest

It is `crayon bench --suite` with this checkout's paths; any other `crayon bench` option passes through.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from crayon_hf import cli  # noqa: E402

if __name__ == "__main__":
    shared = os.environ.get("CRAYON_SHARED", str(ROOT.parent / "shared"))
    defaults = ["--suite", "--shared", shared, "--out", str(ROOT / "benchmarks" / "results"),
                "--readme", str(ROOT / "README.md"), "--cold-reps", "3"]
    sys.exit(cli.main(["bench", *defaults, *sys.argv[1:]]))
