"""Data reaching the Python API: errors that name the caller's own cells and columns."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import spnc
from spnc.learn import ChowLiuTree
from spnc import Bernoulli, Product, Sum
from spnc.errors import DataError

NAMES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def named():
    """A model over the named binary variables a, b, c."""
    root = Sum([Product([Bernoulli(0, .2), Bernoulli(1, .7), Bernoulli(2, .4)]),
                Product([Bernoulli(0, .9), Bernoulli(1, .1), Bernoulli(2, .5)])], weights=[.3, .7])
    return spnc.compile(root, var_names=NAMES)


def test_conditional_mismatch_names_each_frames_own_cell(named):
    q = pd.DataFrame([[1.0, 0.0, 1.0]], columns=NAMES)[["c", "b", "a"]]
    e = pd.DataFrame([[np.nan, np.nan, 0.0]], columns=NAMES)          # c observed as 0, queried as 1
    with pytest.raises(DataError, match=r"X_query\[0, 0\] = 1\.0 must repeat the evidence value "
                                        r"X_evidence\[0, 2\] = 0\.0 \(variable 2 \('c'\)\)"):
        named.conditional(q, e)
    # arrays: the model's columns
    with pytest.raises(DataError, match=r"X_query\[0, 2\] = nan must repeat .* X_evidence\[0, 2\] = 0\.0"):
        named.conditional([[1.0, 0.0, np.nan]], [[np.nan, np.nan, 0.0]])
    # agreeing frames in different column orders give the array answer
    ok = pd.DataFrame([[1.0, 0.0, 0.0]], columns=NAMES)[["c", "b", "a"]]
    assert named.conditional(ok, e)[0] == named.conditional([[1.0, 0.0, 0.0]], [[np.nan, np.nan, 0.0]])[0]


@pytest.mark.parametrize("call", ["query", "fit"])
def test_structured_arrays_are_refused_with_how_to_convert(named, tmp_path, call):
    f = tmp_path / "t.csv"
    np.savetxt(f, np.random.default_rng(0).integers(0, 2, (20, 3)), fmt="%d", delimiter=",",
               header=",".join(NAMES), comments="")
    rec = np.genfromtxt(f, delimiter=",", names=True)          # one field per column, no 2-D shape
    run = (lambda: named.log_likelihood(rec)) if call == "query" else \
        (lambda: ChowLiuTree().fit(rec))
    with pytest.raises(DataError, match=r"X is a structured \(record\) array with 3 fields \('a', 'b', 'c'\); "
                                        r".*pd\.DataFrame\(X\).*structured_to_unstructured\(X\)"):
        run()
    # what the message suggests works, by name
    frame = pd.DataFrame(rec)[["c", "a", "b"]]
    plain = np.column_stack([rec[n] for n in NAMES])
    assert np.array_equal(named.log_likelihood(frame), named.log_likelihood(plain))


def test_real_data_for_discrete_learners_is_called_not_integer():
    """The first bad value of real-valued data, -1.45, is refused as not an integer code, not
    as a negative one (which reads as if shifting the column would do)."""
    X = np.random.default_rng(0).normal(size=(50, 3))
    X[0, 0] = -1.45
    with pytest.raises(DataError, match=r"X\[0, 0\] = -1\.45 is not an integer: discrete states are integer codes"):
        ChowLiuTree().fit(X)
    X[0, 0] = -2.0
    with pytest.raises(DataError, match=r"X\[0, 0\] = -2\.0 is negative: discrete states are integer codes"):
        ChowLiuTree().fit(X)
