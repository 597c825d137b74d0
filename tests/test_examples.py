"""Every example a user may copy runs: the ``>>>`` examples of spnc's docstrings, and the
Python blocks of README.md and docs/*.md (in order, one namespace per file). A block that
cannot run as it stands (it names the reader's own model or files) says so in a
``<!-- not run: why -->`` line above it."""
from __future__ import annotations

import doctest
import importlib
import os
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "spnc"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- not run[^>]*-->\n)?```python\n(.*?)```", re.S)


def modules_with_examples() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>> " in path.read_text(encoding="utf-8"):
            rel = path.relative_to(ROOT).with_suffix("")
            found.append(".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts))
    return found


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mod = importlib.import_module(name)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert res.attempted > 0 and res.failed == 0


def test_modules_with_examples_are_found():
    assert {"spnc.compose", "spnc.io", "spnc.learn.merge"} <= set(modules_with_examples())


def blocks(path: Path) -> list[tuple[bool, str]]:
    """(runs, code) of each Python block of ``path``."""
    return [(not mark, code) for mark, code in BLOCK.findall(path.read_text(encoding="utf-8"))]


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in DOCS if any(run for run, _ in blocks(p))],
                         ids=lambda p: p.name)
def test_markdown_examples_run(path, tmp_path, monkeypatch):
    code = [c for run, c in blocks(path) if run]
    if any("../shared/data" in c for c in code):
        if not SHARED_DATA.exists():
            pytest.skip(f"shared benchmark data not found at {SHARED_DATA}")
        (tmp_path / "shared").symlink_to(SHARED_DATA.parent, target_is_directory=True)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)             # "../shared/data" as from a checkout beside it
    ns: dict = {"__name__": "__main__"}
    for i, c in enumerate(code):
        exec(compile(c, f"{path.name}, python block {i + 1}", "exec"), ns)


def test_every_markdown_block_runs_or_says_why():
    n_run = 0
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        assert text.count("```python") == len(blocks(path)), path.name
        n_run += sum(run for run, _ in blocks(path))
    assert n_run >= 2          # README.md's two blocks
