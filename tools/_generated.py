"""The command line every table generator in tools/ shares: write the header, or --check it.

A Unicode table generator is a pure function of its inputs: the generators' own sources, the
Python it runs on (its `unicodedata` version decides str.lower and casefold) and the versions of
the packages it probes (tokenizers' Oniguruma, unicodedata2, regex, ...). Regenerating a table
takes 10-45 s of probing, so each write also records, in tools/generated_inputs.json, a
fingerprint of those inputs and the sha256 of the header written. `--check` then has two ways:

    inputs and header as recorded   ->  up to date, without regenerating (nothing that decides
                                        the output has changed, and the header is the one written)
    anything else                   ->  regenerate and compare, as `--check --full` always does

So a hand-edited header, an edited generator or a new version of a probed package all take the
full way, and CI still fails on a stale table; an unchanged checkout answers in a fraction of a
second.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

TOOLS = Path(__file__).resolve().parent
ROOT = TOOLS.parent
RECORD = TOOLS / "generated_inputs.json"
# The packages the Unicode generators probe or read (one list for all: they import each other).
PROBED = ("numpy", "regex", "tiktoken", "tokenizers", "unicodedata2")


def inputs_fingerprint(packages: Sequence[str]) -> str:
    """sha256 of what decides a generator's output: every generator's source in tools/ (they
    import each other), the Python version and its Unicode database, and the versions of
    `packages` ("absent" for one not installed)."""
    import unicodedata
    from importlib import metadata

    h = hashlib.sha256()
    for path in sorted([*TOOLS.glob("gen_*.py"), Path(__file__).resolve()]):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(f"python {sys.version_info[0]}.{sys.version_info[1]} unicodedata {unicodedata.unidata_version}\0".encode())
    for name in sorted(packages):
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        h.update(f"{name} {version}\0".encode())
    return h.hexdigest()


def _record_key(header: Path) -> str:
    return header.resolve().relative_to(ROOT).as_posix()


def _read_record() -> dict:
    try:
        data = json.loads(RECORD.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def recorded_current(header: Path, packages: Sequence[str]) -> bool:
    """Whether `header` is the one written from the inputs this environment has (see above)."""
    entry = _read_record().get(_record_key(header))
    if not isinstance(entry, dict) or not header.exists():
        return False
    return (entry.get("inputs") == inputs_fingerprint(packages)
            and entry.get("sha256") == _sha256(header.read_text(encoding="utf-8")))


def _remember(header: Path, text: str, packages: Sequence[str]) -> None:
    record = _read_record()
    record[_record_key(header)] = {"inputs": inputs_fingerprint(packages), "sha256": _sha256(text)}
    RECORD.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def generator_main(build: Callable[[], str], header: Path, doc: str, script: str,
                   inputs: Sequence[str] | None = None) -> int:
    """Writes build() to the header, or with --check fails when the committed one differs (CI runs
    the check, so a generated table is never edited by hand or left stale). `inputs`: the packages
    whose versions decide the output, for a generator that is a pure function of them (module
    docstring); None for one that reads anything else (the API docs read crayon_hf itself), which
    always regenerates to check."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed header is stale")
    ap.add_argument("--full", action="store_true",
                    help="with --check: regenerate and compare even when the inputs are as recorded")
    ap.add_argument("--output", type=Path, default=header)
    args = ap.parse_args()
    recorded = inputs is not None and args.output.resolve() == header.resolve()
    if args.check and recorded and not args.full and recorded_current(header, inputs):
        print(f"{args.output} is up to date (generated from these inputs: {RECORD.name})")
        return 0
    text = build()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run python tools/{script}", file=sys.stderr)
            return 1
        hint = ""
        if recorded and not recorded_current(header, inputs):
            hint = f" (run python tools/{script} to record these inputs in {RECORD.name}: checks then skip the probing)"
        print(f"{args.output} is up to date{hint}")
        return 0
    args.output.write_text(text, encoding="utf-8")
    if recorded:
        _remember(header, text, inputs)
    print(f"wrote {args.output}")
    return 0
