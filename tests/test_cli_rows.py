"""Console tools: every message naming a row of a data file counts as the file does (text:
its line, header and comments included; .npy/HDF5: 1-based data rows), whichever check
finds it: a cell, a conditional, MPE, evidence for sampling, or a learner (docs/cli.md)."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import Bernoulli, Gaussian, Product, Sum
from spnc.cli import compose, evaluate, learn


@pytest.fixture()
def gauss(tmp_path):
    m = spnc.compile(Sum([Product([Gaussian(0, 0., 1.), Gaussian(1, 0., 1.)]),
                          Product([Gaussian(0, 1., 1.), Gaussian(1, 2., 1.)])], [.5, .5]), var_names=["a", "b"])
    spnc.save(m, tmp_path / "g.h5")
    return tmp_path


def _err(capsys, main, argv):
    assert main([str(a) for a in argv] + ["-q"]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("chunk", ["1", "100"])
def test_conditional_and_mpe_errors_name_the_file_line(gauss, capsys, chunk):
    d = gauss
    (d / "c.csv").write_text("a,b\n# note\n0,0\n1,1\n1e10,1\n")       # the far row is line 5, row 2 of X
    (d / "m.csv").write_text("a,b\n0,0\n\n1,\n1e10,\n")
    for data, extra, line in (("c.csv", ["--query", "b", "--evidence", "a"], 5), ("m.csv", ["--mpe", d / "o.csv"], 5)):
        err = _err(capsys, evaluate.main, [d / "g.h5", d / data, "--chunk-rows", chunk] + extra)
        assert f"{data}: line {line}: log p" in err, err
    np.save(d / "x.npy", np.array([[0, 0], [1, 1], [1e10, np.nan]]))
    for extra in (["--query", "b", "--evidence", "a"], ["--mpe", d / "o.csv"]):
        err = _err(capsys, evaluate.main, [d / "g.h5", d / "x.npy", "--chunk-rows", chunk] + extra)
        assert "x.npy: row 3: log p" in err, err


def test_sampling_evidence_errors_name_the_evidence_line(gauss, capsys):
    d = gauss
    (d / "ev.csv").write_text("a,b\n0,\n1e10,\n")
    err = _err(capsys, evaluate.main, [d / "g.h5", "--sample", "2", "--evidence", d / "ev.csv"])
    assert "ev.csv: line 3: log p(evidence)" in err, err
    spnc.save(spnc.compile(Product([Bernoulli(0, 1.0), Bernoulli(1, .5)]), var_names=["a", "b"]), d / "z.h5")
    (d / "zev.csv").write_text("a,b\n1,\n0,\n")
    err = _err(capsys, evaluate.main, [d / "z.h5", "--sample", "2", "--evidence", d / "zev.csv"])
    assert "zev.csv: line 3: the evidence has probability zero" in err, err


def test_mpe_of_an_impossible_row_names_its_line_not_a_block_row(tmp_path, capsys):
    spnc.save(spnc.compile(Product([Bernoulli(0, 1.0), Bernoulli(1, .5)]), var_names=["a", "b"]), tmp_path / "z.h5")
    (tmp_path / "z.csv").write_text("a,b\n1,\n1,1\n0,\n")
    np.save(tmp_path / "z.npy", np.array([[1, np.nan], [1, 1], [0, np.nan]]))
    for data, where in (("z.csv", "line 4"), ("z.npy", "row 3")):
        for chunk in ("1", "10"):        # was "row 0" (of the last block) and "row 2"
            err = _err(capsys, evaluate.main, [tmp_path / "z.h5", tmp_path / data, "--mpe", tmp_path / "o.csv",
                                               "--chunk-rows", chunk, "--by-position"])
            assert f"{data}: {where}: has probability zero" in err, err


def test_learner_errors_about_a_row_name_the_file_line(tmp_path, capsys):
    (tmp_path / "tr.csv").write_text("a,b,c\n0,0,0\n1,1,1\n0,0,0\n1,1,1\n")
    (tmp_path / "va.csv").write_text("a,b,c\n0,0,0\n0,1,0\n")
    err = _err(capsys, learn.main, [tmp_path / "tr.csv", "-o", tmp_path / "m.h5", "--learner", "chowliu",
                                    "--alpha", "0", "--valid", tmp_path / "va.csv", "--em", "3"])
    assert "va.csv: line 3 has probability zero" in err, err      # was "X_valid row 1"
    spnc.save(spnc.compile(Product([Bernoulli(0, 1.0), Bernoulli(1, .5)]), var_names=["a", "b"]), tmp_path / "z.h5")
    (tmp_path / "d.csv").write_text("a,b\n1,1\n0,1\n")
    for how in (["mix", tmp_path / "z.h5"], ["em"]):
        err = _err(capsys, compose.main, [*how[:1], tmp_path / "z.h5", *how[1:], "--data", tmp_path / "d.csv",
                                          "-o", tmp_path / "out.h5"])
        assert "d.csv: line 3 has " in err, err                  # was "row 1 of X" / "row 1"


def test_evidence_file_and_evidence_columns_mixed_up(gauss, capsys):
    """--evidence is columns with DATA and a file with --sample; the other way round said
    "[Errno 2] No such file or directory: '0,1'" or only that the file name is no column."""
    d = gauss
    (d / "ev.csv").write_text("a,b\n0,\n")
    err = _err(capsys, evaluate.main, [d / "g.h5", "--sample", "2", "--evidence", "a,b"])
    assert "--evidence a,b: no such file; with --sample, --evidence is a FILE of evidence rows" in err, err
    err = _err(capsys, evaluate.main, [d / "g.h5", d / "ev.csv", "--evidence", d / "ev.csv"])
    assert "is a file, but with DATA --evidence names the columns to condition on" in err, err


def test_outputs_keep_the_file_s_header_for_a_model_without_names(tmp_path, capsys):
    """MPE completions and conditional samples of a model without variable names were
    written without the input file's header: the column names were dropped."""
    m = spnc.compile(Product([Gaussian(0, 0., 1.), Gaussian(1, 2., 1.)]))
    spnc.save(m, tmp_path / "m.h5")
    (tmp_path / "d.csv").write_text("p,q\n0.1,\n1.0,2.0\n")
    np.save(tmp_path / "d.npy", np.array([[0.1, np.nan]]))
    assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "d.csv"), "--mpe", str(tmp_path / "f.csv"), "-q"]) == 0
    assert (tmp_path / "f.csv").read_text().splitlines()[0] == "p,q"
    assert evaluate.main([str(tmp_path / "m.h5"), "--sample", "2", "--evidence", str(tmp_path / "d.csv"), "--out",
                          str(tmp_path / "s.csv"), "-q"]) == 0
    assert (tmp_path / "s.csv").read_text().splitlines()[0] == "p,q"
    assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "d.npy"), "--mpe", str(tmp_path / "g.csv"), "-q"]) == 0
    assert (tmp_path / "g.csv").read_text().splitlines()[0] == "0.1,2"       # no names anywhere: none written
