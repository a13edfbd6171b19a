"""Runs the references' own test suites against crayon-hf's faces (a developer job).

    python tools/conformance/run.py                 # both suites, checked against the pinned pass sets
    python tools/conformance/run.py tiktoken        # one suite
    python tools/conformance/run.py --reference     # also run each suite on the real library
    python tools/conformance/run.py --update        # re-pin the pass sets (after a deliberate change)

The test files are not in this repository and not in the references' wheels: they come from the
published source distributions (tiktoken 0.14.0, tokenizers 0.23.3), fetched once from PyPI
(``pip download``, or PyPI's simple index for an sdist pip cannot prepare), checked against the
sha256 pinned below and unpacked into the cache (CRAYON_CONFORMANCE_CACHE, default
~/.cache/crayon_hf/conformance). Each suite then runs in its own pytest process with
tools/conformance/crayon_swap.py swapping the face in.

The pinned pass sets live in tests/conformance/<suite>.pass: every test listed there must pass
(a regression fails the run); a test that passes but is not listed is reported, so the list can be
extended. docs/compatibility.md explains each test that does not pass.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PINNED = REPO / "tests" / "conformance"

SDISTS = {
    "tiktoken": {
        "project": "tiktoken",
        "version": "0.14.0",
        "root": "tiktoken-0.14.0",
        "rundir": "",
        # p50k_base is not bundled (crayon-hf works offline); its tests download the rank file.
        "args": ["tests"],
        # The sdist's own package sources would shadow the installed (compiled) package.
        "hide": ["tiktoken", "tiktoken_ext"],
    },
    "tokenizers": {
        "project": "tokenizers",
        "version": "0.23.3",
        "root": "tokenizers-0.23.3",
        "rundir": "bindings/python",
        # The files that build a Tokenizer or an AddedToken; the others test the components
        # (models, normalizers, ...), which crayon-hf takes from tokenizers unchanged.
        "args": [
            "tests/bindings/test_tokenizer.py",
            "tests/bindings/test_processors.py",
            "tests/test_serialization.py",
            "tests/test_freethreaded.py",
            "tests/documentation",
        ],
        "hide": [],
    },
}
SDIST_SHA256 = {
    "tiktoken-0.14.0.tar.gz": "231dec90efcdccf1b565a1416107736f1e09b1a08fe736ef9d6363e626d03874",
    "tokenizers-0.23.3.tar.gz": "cded33237c77caeef62944d32aa9a7ef42bdce2b3497e18d137e072a8c4be438",
}


def cache_root() -> Path:
    root = os.environ.get("CRAYON_CONFORMANCE_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "crayon_hf" / "conformance"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _from_simple_index(project: str, filename: str, dest: Path) -> None:
    """PyPI's simple index (PEP 691 JSON): the sdist's URL and sha256, for a project whose sdist
    pip cannot prepare here (tokenizers needs a Rust toolchain for its metadata)."""
    req = urllib.request.Request(
        f"https://pypi.org/simple/{project}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - fixed https URL
        index = json.load(resp)
    entry = next((f for f in index["files"] if f["filename"] == filename), None)
    if entry is None:
        raise RuntimeError(f"{filename} is not on PyPI's index for {project}")
    with urllib.request.urlopen(entry["url"], timeout=120) as resp:  # noqa: S310 - URL from PyPI
        data = resp.read()
    if hashlib.sha256(data).hexdigest() != entry["hashes"]["sha256"]:
        raise RuntimeError(f"{filename}: sha256 differs from PyPI's index")
    dest.write_bytes(data)


def fetch(suite: str) -> Path:
    """The unpacked sdist of `suite`'s reference (downloaded on first use)."""
    spec = SDISTS[suite]
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    unpacked = root / spec["root"]
    if (unpacked / ".complete").exists():
        return unpacked
    filename = f"{spec['project']}-{spec['version']}.tar.gz"
    archive = root / filename
    if not archive.exists():
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", spec["project"],
                   f"{spec['project']}=={spec['version']}", "-d", tmp]
            done = subprocess.run(cmd, capture_output=True, text=True)
            got = Path(tmp) / filename
            if done.returncode == 0 and got.exists():
                got.replace(archive)
            else:
                _from_simple_index(spec["project"], filename, archive)
    expected = SDIST_SHA256.get(filename)
    if expected and _sha256(archive) != expected:
        archive.unlink()
        raise RuntimeError(f"{filename}: sha256 {_sha256(archive)} is not the pinned {expected}")
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    for name in spec["hide"]:
        (unpacked / name).rename(unpacked / f"_sdist_{name}")
    (unpacked / ".complete").write_text("ok\n")
    return unpacked


def seeded_tiktoken_cache() -> Path:
    """A TIKTOKEN_CACHE_DIR holding the rank files crayon-hf bundles, under the names tiktoken
    gives its downloads (sha1 of the URL), so the real tiktoken runs its suite offline too (its
    gpt2 and p50k tests still download: those files are not bundled)."""
    import crayon_hf.tiktoken.registry as registry

    cache = cache_root() / "tiktoken_cache"
    cache.mkdir(parents=True, exist_ok=True)
    for stem in ("r50k_base", "cl100k_base", "o200k_base"):
        url = f"https://openaipublic.blob.core.windows.net/encodings/{stem}.tiktoken"
        target = cache / hashlib.sha1(url.encode()).hexdigest()
        if not target.exists():
            target.write_bytes(registry.bundled_rank_bytes(stem))
    return cache


def run_suite(suite: str, face: str, extra: list[str]) -> dict[str, str]:
    """Runs `suite` with `face` ("tiktoken", "tokenizers" or "reference"): {test id: outcome}."""
    spec = SDISTS[suite]
    rundir = fetch(suite) / spec["rundir"]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.jsonl"
        env = dict(os.environ)
        env["CRAYON_CONFORMANCE_FACE"] = face
        env["CRAYON_CONFORMANCE_REPORT"] = str(report)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        if suite == "tiktoken" and face == "reference" and "TIKTOKEN_CACHE_DIR" not in env:
            env["TIKTOKEN_CACHE_DIR"] = str(seeded_tiktoken_cache())
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "crayon_swap", "-p", "no:cacheprovider",
               "-o", "addopts=", "--rootdir", str(rundir), *spec["args"], *extra]
        subprocess.run(cmd, cwd=rundir, env=env, timeout=3600)
        if not report.exists():
            raise RuntimeError(f"{suite} ({face}): pytest wrote no report")
        return {r["test"]: r["outcome"] for r in map(json.loads, report.read_text().splitlines())}


def pinned(suite: str) -> set[str]:
    path = PINNED / f"{suite}.pass"
    if not path.exists():
        return set()
    return {line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suites", nargs="*", help=f"any of {', '.join(SDISTS)} (default: all)")
    ap.add_argument("--reference", action="store_true", help="also run each suite on the real library")
    ap.add_argument("--update", action="store_true", help="write the face's pass set as the new pin")
    ap.add_argument("--pytest-args", default="", help="extra pytest arguments (e.g. '-x -k encode')")
    ap.add_argument("--json", help="write the outcomes here")
    args = ap.parse_args(argv)
    suites = args.suites or list(SDISTS)
    for suite in suites:
        if suite not in SDISTS:
            ap.error(f"unknown suite {suite!r}; choose from {', '.join(SDISTS)}")
    extra = args.pytest_args.split()
    status = 0
    summary = {}
    for suite in suites:
        ours = run_suite(suite, suite, extra)
        passed = {t for t, o in ours.items() if o == "passed"}
        line = f"{suite}: crayon-hf passes {len(passed)} of {len(ours)}"
        entry = {"face": ours}
        if args.reference:
            ref = run_suite(suite, "reference", extra)
            ref_passed = {t for t, o in ref.items() if o == "passed"}
            line += f"; the real library passes {len(ref_passed)} of {len(ref)}"
            both = ref_passed & passed
            line += f"; {len(both)} pass on both, {len(ref_passed - passed)} pass only on the reference"
            for t in sorted(ref_passed - passed):
                line += f"\n    only the reference passes: {t} (ours: {ours.get(t, 'not run')})"
            entry["reference"] = ref
        expected = pinned(suite)
        lost = expected - passed
        new = passed - expected
        for t in sorted(lost):
            line += f"\n    REGRESSION (pinned as passing): {t} -> {ours.get(t, 'not run')}"
        if new and not args.update:
            line += f"\n    {len(new)} passing test(s) not in tests/conformance/{suite}.pass (run with --update)"
        if lost and not args.update:
            status = 1
        if args.update:
            PINNED.mkdir(parents=True, exist_ok=True)
            header = (f"# Tests of {suite}'s own suite that pass against crayon-hf's face "
                      "(tools/conformance/run.py --update writes this file).\n")
            (PINNED / f"{suite}.pass").write_text(header + "".join(f"{t}\n" for t in sorted(passed)))
        summary[suite] = entry
        print(line, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1, sort_keys=True))
    return status


if __name__ == "__main__":
    sys.exit(main())
