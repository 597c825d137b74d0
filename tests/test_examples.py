"""Every example a user may copy runs: the ``>>>`` examples of spnc's docstrings, and the
Python blocks of README.md, docs/*.md and formats/**/*.md (in order, one namespace per
file; the command lines of the docs are parsed in test_cli_help.py). A block that
cannot run as it stands (a skeleton, a cluster, a tool that may be missing) says so in a
``<!-- not run: why -->`` line right above it. Blocks that read ../shared/data are slow
(they learn on benchmark sets) and skip when the data is absent; the blocks before them
also run on their own, fast."""
from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import spnc

from conftest import shared_data

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "formats").rglob("*.md"))]
BLOCK = re.compile(r"(<!-- not run[^>]*-->\n)?```python\n(.*?)```", re.S)
SHARED = "../shared/data"


def _source(info: pkgutil.ModuleInfo) -> str:
    """The text a module is built from: its .py file, or the .pyx beside an extension."""
    origin = Path(info.module_finder.find_spec(info.name).origin)
    if origin.suffix != ".py":
        origin = origin.with_name(info.name.rpartition(".")[2] + ".pyx")
    return origin.read_text(encoding="utf-8") if origin.exists() else ""


def modules_with_examples() -> list[str]:
    """Names of the spnc modules whose source holds a ``>>>`` example."""
    infos = pkgutil.walk_packages(spnc.__path__, "spnc.")
    return sorted(i.name for i in infos if ">>> " in _source(i))


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mod = importlib.import_module(name)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert res.attempted > 0 and res.failed == 0, res


def test_modules_with_examples_are_found():
    assert {"spnc.compose", "spnc.io", "spnc.io.importers", "spnc.learn.merge"} <= set(modules_with_examples())


def blocks(path: Path) -> list[tuple[bool, str]]:
    """(runs, code) of each Python block of ``path``."""
    return [(not mark, code) for mark, code in BLOCK.findall(path.read_text(encoding="utf-8"))]


def markdown_cases():
    """Per file with runnable blocks: the blocks before the first that reads shared data
    (fast), and all of them (slow) when some block reads it."""
    for path in DOCS:
        code = [c for run, c in blocks(path) if run]
        first = next((i for i, c in enumerate(code) if SHARED in c), len(code))
        if first:
            yield pytest.param(path, first, id=path.name)
        if first < len(code):
            yield pytest.param(path, len(code), id=f"{path.name}-all", marks=pytest.mark.slow)


@pytest.mark.parametrize("path, n_blocks", list(markdown_cases()))
def test_markdown_examples_run(path, n_blocks, tmp_path, monkeypatch):
    code = [c for run, c in blocks(path) if run][:n_blocks]
    if any(SHARED in c for c in code):     # "../shared/data" as from a checkout beside it
        (tmp_path / "shared").symlink_to(shared_data().parent, target_is_directory=True)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    ns: dict = {"__name__": "__main__"}
    for i, c in enumerate(code):
        exec(compile(c, f"{path.name}, python block {i + 1}", "exec"), ns)


def test_every_markdown_block_runs_or_says_why():
    n_run = 0
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        fences = re.findall(r"^```(\S+)", text, re.M)
        assert all(f == "python" for f in fences if f.startswith(("py", "ipy"))), (path.name, fences)
        assert text.count("```python") == len(blocks(path)), path.name
        n_run += sum(run for run, _ in blocks(path))
    assert n_run >= 6          # README.md's two, and one each in format, em, interop, scale
