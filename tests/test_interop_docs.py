"""The worked example of docs/interop.md: every command line runs, merging shrinks the
mixture without losing validation log-likelihood, the composed-then-merged-then-refined
model beats each of its parts there, and the exported file is read back (by DeeProb-kit
too when its venv exists)."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

import spnc
from spnc.cli import compose, convert, evaluate, learn, merge
from spnc.io import importers

from conftest import shared_data

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"spnc-learn": learn.main, "spnc-convert": convert.main, "spnc-eval": evaluate.main,
         "spnc-compose": compose.main, "spnc-merge": merge.main}


def commands() -> list[list[str]]:
    text = (ROOT / "docs" / "interop.md").read_text()
    block = re.search(r"## Worked example.*?```console\n(.*?)```", text, flags=re.S).group(1)
    return [shlex.split(line[2:]) for line in block.splitlines() if line.startswith("$ ")]


@pytest.mark.slow
def test_worked_example_runs_and_the_composed_model_wins(tmp_path, monkeypatch, capsys):
    data = shared_data("binary", "nltcs.train.data").parent
    monkeypatch.chdir(tmp_path)
    cmds = commands()
    assert [c[0] for c in cmds][:2] == ["spnc-learn", "spnc-learn"] and len(cmds) >= 6
    for argv in cmds:
        args = [a.replace("$DATA", str(data)) for a in argv[1:]]
        args = [str(ROOT / a) if a.startswith("tests/data/") else a for a in args]
        assert TOOLS[argv[0]](args) == 0, (argv, capsys.readouterr().err)
    Xv = np.loadtxt(data / "nltcs.valid.data", delimiter=",")
    parts = {p: spnc.load(p).log_likelihood(Xv).mean()
             for p in ("learnspn.h5", "clt.h5", "deeprob.h5", "spflow.h5", "mix.h5", "merged.h5")}
    final = spnc.load("refined.h5").log_likelihood(Xv).mean()
    assert final > max(parts.values()), (final, parts)
    assert parts["merged.h5"] >= parts["mix.h5"]
    assert spnc.load("merged.h5").n_nodes < spnc.load("mix.h5").n_nodes / 2
    # the numbers in the table of docs/interop.md are these (to the last printed digit:
    # thread counts change EM's reduction order, so a rounding boundary may move)
    doc = (ROOT / "docs" / "interop.md").read_text()
    bold = np.array([float(x) for x in re.findall(r"\*\*(-\d+\.\d{4})\*\*", doc)])
    shown = np.array([float(x) for x in re.findall(r"-\d+\.\d{4}", doc)])
    assert np.abs(bold - final).min() <= 2e-4, (final, bold)
    for v in parts.values():
        assert np.abs(shown - v).min() <= 2e-4, (v, shown)
    back = importers.load("refined.deeprob.json")
    np.testing.assert_allclose(back.log_likelihood(Xv[:200]), spnc.load("refined.h5").log_likelihood(Xv[:200]),
                               rtol=0, atol=1e-9)
    py = Path(os.environ.get("SPNC_PEERS", "/tmp/peers")) / "deeprob" / "bin" / "python"
    if py.exists():
        jobs = tmp_path / "jobs.json"
        jobs.write_text(json.dumps([{"model": str(tmp_path / "refined.deeprob.json"), "X": Xv[:50].tolist()}]))
        r = subprocess.run([str(py), str(ROOT / "tools" / "make_peer_fixtures.py"), "eval", "deeprob", str(jobs)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        got = np.array(json.loads(r.stdout.strip().splitlines()[-1])[0])
        want = back.log_likelihood(Xv[:50])
        assert np.all(np.abs(got - want) <= 5e-6 * np.maximum(1, np.abs(want)))


def test_quoted_refusal_is_what_spnc_convert_prints(tmp_path, monkeypatch, capsys):
    """The error line docs/interop.md shows is the tool's, word for word (it said
    "character 8" for a leaf that starts at character 1)."""
    text = (ROOT / "docs" / "interop.md").read_text()
    shown = re.search(r"```\n(spnc-convert: error: spflow_poisson\.spflow .*)\n```", text).group(1)
    monkeypatch.chdir(ROOT / "tests" / "data" / "peers")
    assert convert.main(["spflow_poisson.spflow", str(tmp_path / "m.h5")]) == 2
    assert capsys.readouterr().err.strip() == shown
