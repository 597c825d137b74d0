"""Console tools: data and outputs a user can get wrong by accident end in a clear error
or in exactly the data asked for (the bugs of a bad-input hunt, session 20)."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

import spnc
from spnc import Bernoulli, Gaussian, Product, Sum
from spnc.cli import evaluate


@pytest.fixture()
def named(tmp_path):
    m = spnc.compile(Product([Bernoulli(0, .1), Bernoulli(1, .8), Gaussian(2, 0., 1.)]), var_names=["a", "b", "c"])
    spnc.save(m, tmp_path / "m.h5")
    return m, tmp_path


def test_hdf5_column_names_of_the_wrong_length_or_repeated_are_errors(named, capsys):
    m, d = named
    X = np.array([[1, 0, 0.], [0, 1, 1.]])
    for names, why in ((["c", "b", "a", "d"], "4 names for 3 columns"), (["c", "b", "b"], "'b' appears twice")):
        with h5py.File(d / "d.h5", "w") as f:
            f["X"] = X[:, [2, 1, 0]]
            f["X"].attrs["columns"] = names
        for data in ([f"{d / 'd.h5'}:/X"], [str(d / "d.h5"), "--dataset", "X"]):
            assert evaluate.main([str(d / "m.h5"), *data, "-q"]) == 2
            assert why in capsys.readouterr().err
    with h5py.File(d / "d.h5", "w") as f:
        f["X"] = X[:, [2, 1, 0]]
        f["X"].attrs["columns"] = ["c", "b", "a"]
    assert evaluate.main([str(d / "m.h5"), f"{d / 'd.h5'}:/X", "--out-ll", str(d / "ll.txt"), "-q"]) == 0
    np.testing.assert_allclose(np.loadtxt(d / "ll.txt"), m.log_likelihood(X), rtol=1e-12)
