"""tools/_datadir.py: the benchmark tools (and the tests' shared data) find the data via
$SPNC_DATA, next to the checkout, or next to the main checkout of a git worktree, and a
tool run without it names where it looked."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _datadir():
    spec = importlib.util.spec_from_file_location("_datadir_t", ROOT / "tools" / "_datadir.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_spnc_data_first_then_the_worktree_s_main_checkout(tmp_path, monkeypatch):
    mod = _datadir()
    monkeypatch.setenv("SPNC_DATA", str(tmp_path / "d"))
    assert mod.data_candidates() == [tmp_path / "d"] and mod.default_data() == tmp_path / "d"
    monkeypatch.delenv("SPNC_DATA")
    main, wt = tmp_path / "x" / "main", tmp_path / "y" / "wt"
    (main / ".git" / "worktrees" / "wt").mkdir(parents=True)
    wt.mkdir(parents=True)
    (wt / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'wt'}\n")
    assert mod.data_candidates(wt) == [tmp_path / "y" / "shared" / "data", tmp_path / "x" / "shared" / "data"]
    assert mod.data_candidates(main) == [tmp_path / "x" / "shared" / "data"]


def test_a_tool_without_data_names_the_path_it_tried(tmp_path):
    env = dict(os.environ, SPNC_DATA=str(tmp_path / "none"))
    r = subprocess.run([sys.executable, "-c", "import _bench; _bench.load(_bench.DEFAULT_DATA, 'nltcs')"],
                       cwd=ROOT / "tools", env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert f"benchmark data not found: {tmp_path / 'none' / 'binary' / 'nltcs.train.data'}" in r.stderr
    assert "$SPNC_DATA" in r.stderr, r.stderr
