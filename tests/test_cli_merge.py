"""spnc-merge on generated data, as a subprocess and in-process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import spnc
from spnc.cli import merge as cli_merge
from spnc.learn import LearnSPN

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _files(tmp_path):
    rng = np.random.default_rng(0)
    z = rng.random(900) < 0.5
    X = np.column_stack([np.where(z, rng.random(900) < .8, rng.random(900) < .2) for _ in range(5)]).astype(int)
    tree = LearnSPN(sum_split="observed", min_instances=10, alpha=1.0, random_state=0).fit(X[:600]).spn_
    spnc.save(tree, tmp_path / "tree.h5")
    np.savetxt(tmp_path / "train.csv", X[:600], fmt="%d", delimiter=",")
    np.savetxt(tmp_path / "valid.csv", X[600:], fmt="%d", delimiter=",")
    return tree, X


def test_merge_tool_subprocess(tmp_path):
    tree, X = _files(tmp_path)
    out = tmp_path / "graph.json"
    r = subprocess.run([sys.executable, "-m", "spnc.cli.merge", str(tmp_path / "tree.h5"), str(tmp_path / "train.csv"),
                        "--valid", str(tmp_path / "valid.csv"), "-o", str(out), "--quiet"],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "merged" in r.stdout and "valid LL" in r.stdout and "compression" in r.stdout
    g = spnc.load(out)
    assert g.learner["name"] == "merge"
    assert g.log_likelihood(X[600:]).mean() >= tree.log_likelihood(X[600:]).mean() - 1e-9
    assert g.n_nodes <= tree.n_nodes


def test_merge_tool_errors(tmp_path, capsys):
    _files(tmp_path)
    args = [str(tmp_path / "tree.h5"), str(tmp_path / "train.csv"), "-o", str(tmp_path / "g.h5"), "--quiet"]
    assert cli_merge.main(args + ["--epsilon", "-1"]) == 2
    assert "Merge: --epsilon must be a number >= 0" in capsys.readouterr().err
    assert cli_merge.main(args + ["--epsilon", "0.1", "0.2"]) == 2     # a grid is chosen on --valid
    assert "--valid" in capsys.readouterr().err
    np.savetxt(tmp_path / "bad.csv", np.zeros((5, 3)), delimiter=",")
    assert cli_merge.main([str(tmp_path / "tree.h5"), str(tmp_path / "bad.csv"), "-o", str(tmp_path / "g.h5")]) == 2
    assert "columns" in capsys.readouterr().err
    assert not (tmp_path / "g.h5").exists()
    for out in ("g.spflow", "g.dot"):       # one message for every extension that is no model file
        assert cli_merge.main(args[:2] + ["-o", str(tmp_path / out), "--epsilon", "0.1"]) == 2
        assert "a model is saved as .h5, .hdf5 or .json" in capsys.readouterr().err
    assert cli_merge.main(args + ["--epsilon", "0.1", "--n-threads", "1"]) == 0
    assert cli_merge.main(args + ["--epsilon", "0.1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["merged"]["nodes"] > 0
    assert (tmp_path / "g.h5").exists()


def test_bad_values_are_named_by_file_line_and_column(tmp_path, capsys):
    from spnc.cli import compose
    _, X = _files(tmp_path)
    Y = X[:50].astype(float)
    Y[3, 2] = np.nan
    np.savetxt(tmp_path / "miss.csv", Y, fmt="%g", delimiter=",")
    Y[3, 2] = 2
    np.savetxt(tmp_path / "two.csv", Y, fmt="%g", delimiter=",")
    model, out = str(tmp_path / "tree.h5"), str(tmp_path / "g.h5")
    for run, data, want in ((cli_merge.main, "miss.csv", "line 4, column 3: missing value; merging"),
                            (cli_merge.main, "two.csv", "line 4, column 3: 2.0 is not a state"),
                            (lambda a: compose.main(["mix", a[0], a[0], "--data"] + a[1:]), "two.csv",
                             "line 4, column 3: 2.0 is not a state")):
        assert run([model, str(tmp_path / data), "-o", out]) == 2
        assert f"{data}: {want}" in capsys.readouterr().err


def test_merge_tool_progress_on_stderr_and_bad_output_refused_first(tmp_path, capsys):
    _files(tmp_path)
    base = [str(tmp_path / "tree.h5"), str(tmp_path / "train.csv"), "--valid", str(tmp_path / "valid.csv")]
    for name, msg in (("g.txt", "saved as .h5, .hdf5 or .json"), ("g.dot", "saved as .h5, .hdf5 or .json")):
        assert cli_merge.main(base + ["-o", str(tmp_path / name), "--json"]) == 2
        got = capsys.readouterr()
        assert got.out == "" and msg in got.err
    assert cli_merge.main(base + ["-o", str(tmp_path / "g.h5"), "--epsilon", "0.1", "0.2"]) == 0
    got = capsys.readouterr()
    assert "[merge] epsilon=" in got.err and "[merge]" not in got.out and "compression" in got.out


def test_merge_tool_gives_no_ratio_without_sum_weights(tmp_path, capsys):
    from spnc import Bernoulli, Categorical, Gaussian, Product
    spnc.save(spnc.compile(Product([Bernoulli(0, .3), Gaussian(1, 0, 1), Categorical(2, [.2, .3, .5])])),
              tmp_path / "p.h5")
    rng = np.random.default_rng(0)
    np.savetxt(tmp_path / "t.csv", np.c_[rng.integers(0, 2, 50), rng.normal(size=50), rng.integers(0, 3, 50)],
               delimiter=",")
    argv = [str(tmp_path / "p.h5"), str(tmp_path / "t.csv"), "-o", str(tmp_path / "o.h5"), "-q"]
    assert cli_merge.main(argv) == 0
    out = capsys.readouterr().out
    assert "0.00x" not in out and "no compression ratio (the model has no sum weights)" in out
    assert "epsilon None" not in out and "no similar merge kept (identical sub-networks merged only)" in out
    assert cli_merge.main(argv + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["compression"] is None
