"""spnc-learn and spnc-eval on HDF5 datasets named ``file.h5:/path``; spnc-eval reads
HDF5/.npy data block by block and writes its outputs block by block."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

import spnc
import spnc.io as sio
from spnc.cli import _data, evaluate, learn

from test_cli_learn import NAMES, binary, write_csv


@pytest.fixture(scope="module")
def h5data(tmp_path_factory):
    d = tmp_path_factory.mktemp("clistream")
    X = binary(500)
    with h5py.File(d / "data.h5", "w") as f:
        f.create_dataset("grp/train", data=X[:400]).attrs["columns"] = NAMES
        f.create_dataset("grp/test", data=X[400:].astype(np.uint8))
    return d, X


def test_learn_reads_hdf5_specs(h5data, tmp_path, capsys):
    d, X = h5data
    csv = write_csv(tmp_path / "train.csv", X[:400], NAMES)
    common = ["--min-instances", "40", "--seed", "3", "--quiet"]
    assert learn.main([f"{d / 'data.h5'}:/grp/train", "-o", str(tmp_path / "a.h5"),
                       "--test", f"{d / 'data.h5'}:grp/test", *common]) == 0
    assert learn.main([str(csv), "-o", str(tmp_path / "b.h5"), *common]) == 0
    out = capsys.readouterr().out
    a, b = sio.load(tmp_path / "a.h5"), sio.load(tmp_path / "b.h5")
    assert a.var_names == NAMES
    assert a.log_likelihood(X).tobytes() == b.log_likelihood(X).tobytes()
    assert "test mean log-likelihood" in out


@pytest.fixture
def model_and_data(tmp_path):
    rng = np.random.default_rng(0)
    X = binary(1000, seed=2)
    model = spnc.learn.LearnSPN(min_instances=50, random_state=0).fit(X).spn_
    model = spnc.SPN.from_arrays(model.kind, model.child_ptr, model.child, model.weight, model.leaf_tables,
                                 model.cardinality, var_names=NAMES)
    sio.save(model, tmp_path / "m.h5")
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.1] = np.nan
    with h5py.File(tmp_path / "d.h5", "w") as f:
        # columns stored in another order: matched to the model's variables by name
        f.create_dataset("X", data=Xm[:, ::-1]).attrs["columns"] = NAMES[::-1]
    np.save(tmp_path / "d.npy", Xm)
    return model, Xm, tmp_path


@pytest.mark.parametrize("fmt", [".npy", ".csv", ".json"])
def test_eval_hdf5_block_by_block(model_and_data, monkeypatch, capsys, fmt):
    model, X, d = model_and_data
    monkeypatch.setattr(_data, "read_table", lambda *a, **k: pytest.fail("the data was loaded whole"))
    ll, mpe = model.log_likelihood(X), model.mpe(X)[0]
    args = ["--chunk-rows", "128", "--out-ll", str(d / f"ll{fmt}"), "--mpe", str(d / f"mpe{fmt}")]
    assert evaluate.main([str(d / "m.h5"), f"{d / 'd.h5'}:/X", *args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 1000 and summary["rows_with_missing"] == int(np.isnan(X).any(axis=1).sum())
    s = summary["log_likelihood"][0]
    assert s["mean"] == pytest.approx(ll.mean(), rel=1e-13)
    assert s["stderr"] == pytest.approx(ll.std(ddof=1) / np.sqrt(len(ll)), rel=1e-10)
    if fmt == ".npy":
        got_ll, got_mpe = np.load(d / "ll.npy"), np.load(d / "mpe.npy")
    elif fmt == ".csv":
        got_ll = np.loadtxt(d / "ll.csv")
        got_mpe = np.loadtxt(d / "mpe.csv", delimiter=",", skiprows=1)
        assert (d / "mpe.csv").read_text().splitlines()[0] == ",".join(NAMES)
    else:
        got_ll = np.array(json.loads((d / "ll.json").read_text()))
        got_mpe = np.array(json.loads((d / "mpe.json").read_text())["data"])
    assert np.array_equal(got_ll, ll) and np.array_equal(got_mpe, mpe)
    assert not list(d.glob(".*tmp"))


def test_eval_npy_blocks_summary_and_errors(model_and_data, capsys):
    model, X, d = model_and_data
    ll = model.log_likelihood(X)
    assert evaluate.main([str(d / "m.h5"), str(d / "d.npy"), "--chunk-rows", "300"]) == 0
    out = capsys.readouterr().out
    assert f"mean log-likelihood: {ll.mean():.6f} +- {ll.std(ddof=1) / np.sqrt(len(ll)):.6f}" in out
    bad = X.copy()
    bad[650, 3] = 7.0
    np.save(d / "bad.npy", bad)
    assert evaluate.main([str(d / "m.h5"), str(d / "bad.npy"), "--chunk-rows", "300",
                          "--out-ll", str(d / "never.npy")]) == 2
    err = capsys.readouterr().err
    assert "bad.npy: row 651, column 4" in err and not (d / "never.npy").exists()
    assert not list(d.glob(".*tmp"))
