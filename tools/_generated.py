"""The command line every table generator in tools/ shares: write the header, or --check it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable


def generator_main(build: Callable[[], str], header: Path, doc: str, script: str) -> int:
    """Writes build() to the header, or with --check fails when the committed one differs (CI runs
    the check, so a generated table is never edited by hand or left stale)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed header is stale")
    ap.add_argument("--output", type=Path, default=header)
    args = ap.parse_args()
    text = build()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run python tools/{script}", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0
