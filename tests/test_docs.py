"""Every Python block in the README and docs/ runs as written.

A block is run on its own, as a reader would paste it, in a fresh interpreter whose working
directory is an empty temporary folder (files it writes land there). Blocks name the shared test
data as ``../shared/...``, relative to the checkout, the way a reader beside `shared/` types it; the
test resolves that prefix to the shared folder and skips such blocks when it is absent (a failure
under CRAYON_REQUIRE_SHARED=1). A block preceded by ``<!-- illustrative -->`` shows a shape, not a
program (placeholders, a hub download, a GPU), and is not run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT, SHARED, child_python, ray_temp_dir, require_module, require_shared

ILLUSTRATIVE = "<!-- illustrative -->"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def python_blocks(path: Path) -> list[tuple[int, str, bool]]:
    """(line, code, illustrative) for each ```python block of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip().splitlines()
        illustrative = bool(before) and before[-1].strip() == ILLUSTRATIVE
        out.append((text.count("\n", 0, m.start()) + 1, m.group(1), illustrative))
    return out


BLOCKS = [(p, line, code) for p in DOCUMENTS for line, code, illustrative in python_blocks(p) if not illustrative]


def test_documents_have_runnable_blocks():
    assert any(p.name == "README.md" for p, _, _ in BLOCKS)
    # The front door: one runnable block per face at least.
    readme = "\n".join(code for p, _, code in BLOCKS if p.name == "README.md")
    for face in ("crayon_hf.tiktoken", "from crayon_hf import Tokenizer", "CrayonTokenizer"):
        assert face in readme


@pytest.mark.parametrize("path, line, code", BLOCKS,
                         ids=[f"{p.relative_to(ROOT)}:{line}" for p, line, _ in BLOCKS])
def test_block_runs(path, line, code, tmp_path):
    if "../shared/" in code:
        require_shared(SHARED)
        code = code.replace("../shared/", SHARED.resolve().as_posix() + "/")
    if "transformers" in code:
        require_module("transformers")
    kwargs = child_python()
    env = dict(kwargs["env"], HF_HUB_OFFLINE="1")
    ray_temp = ray_temp_dir() if "ray_corpus" in code else None  # a block that starts a local Ray
    if ray_temp is not None:
        env["RAY_TMPDIR"] = ray_temp
    script = tmp_path / "block.py"
    script.write_text(code, encoding="utf-8")
    try:
        out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=600)
    finally:
        if ray_temp is not None:
            shutil.rmtree(ray_temp, ignore_errors=True)
    assert out.returncode == 0, f"{path.relative_to(ROOT)}:{line} failed:\n{code}\n{out.stdout}\n{out.stderr}"


def test_relative_links_resolve():
    missing = []
    for path in DOCUMENTS:
        for m in re.finditer(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
            target = m.group(1)
            if "://" not in target and not (path.parent / target).exists():
                missing.append(f"{path.relative_to(ROOT)}: {target}")
    assert not missing, missing
