"""The check of staged blocks in vector registers (whole blocks of rows with contiguous
columns, 8 variables at a time, the rest from the buffer): every kind of bad value, in
every position of an 8 x 8 tile and in the variables past the last whole tile, gives the
DataError of the exact scan; every good value (NaN, -0.0, each state) passes with the
log-likelihood a plain numpy evaluation gives."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import DataError, _data
from spnc.leaves.univariate import Bernoulli
from spnc.nodes import Product, Sum

# 19 variables: two whole tiles (0-7, 8-15) and three past them; binary ones and ones of
# 3 and 5 states in every part
STATES = [2, 3, 2, 2, 5, 2, 2, 3, 3, 2, 2, 2, 2, 5, 2, 2, 2, 3, 2]
ROWS = 200          # three whole blocks of 64 rows and a partial one (rows 192-199)


def _model(seed: int = 0):
    """A mixture of two products of independent leaves, and its tables for numpy."""
    rng = np.random.default_rng(seed)
    tables, prods = [], []
    for _ in range(2):
        tab = [rng.dirichlet(np.ones(k)) for k in STATES]
        tables.append(tab)
        prods.append(Product([Bernoulli(v, float(p[1])) if k == 2 else spnc.Categorical(v, list(p))
                              for v, (k, p) in enumerate(zip(STATES, tab))]))
    return spnc.compile(Sum(prods, [0.3, 0.7])), tables, np.array([0.3, 0.7])


SPN, TABLES, WEIGHTS = _model()


def _numpy_ll(X: np.ndarray) -> np.ndarray:
    """log sum_k w_k prod_v p_kv(x_v), missing variables marginalised (factor 1)."""
    comp = np.zeros((len(X), 2))
    for k in range(2):
        for v, p in enumerate(TABLES[k]):
            x = X[:, v]
            seen = ~np.isnan(x)
            comp[seen, k] += np.log(p[x[seen].astype(int)])
    return np.log(np.exp(comp) @ WEIGHTS)


def _rows(n: int = ROWS, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, k, n) for k in STATES]).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    return X


def test_good_values_pass():
    X = _rows()
    X[X == 0.0] = -0.0          # -0.0 is state 0
    assert np.signbit(X).any()
    for Y in (X, np.asfortranarray(X), np.hstack([X, np.zeros((ROWS, 5))])[:, :19]):
        for nt in (1, 2):
            np.testing.assert_allclose(SPN.log_likelihood(Y, n_threads=nt), _numpy_ll(X), rtol=1e-12)


BAD_BINARY = [0.5, 2.0, -1.0, 1.0 + 2.0 ** -52, 1.0 - 2.0 ** -53, 5e-324, -5e-324, 1e300, np.inf, -np.inf]
BAD_MULTI = [2.5, -1.0, -0.5, 1e300, np.inf, -np.inf]


@pytest.mark.parametrize("row", [0, 70, 127, 128, 197])
@pytest.mark.parametrize("col", [0, 1, 4, 7, 8, 13, 15, 16, 17, 18])
def test_each_bad_value_is_named(row, col):
    """Every position in a tile (first, last, binary or not), past the tiles, in whole and
    partial blocks; the message is that of the exact scan."""
    X = _rows()
    k = STATES[col]
    for value in (BAD_BINARY if k == 2 else BAD_MULTI + [float(k)]):
        Y = X.copy()
        Y[row, col] = value
        r, c, code = _data.first_bad_value(Y, SPN.cardinality)
        assert (r, c) == (row, col) and code
        with pytest.raises(DataError) as exact:
            SPN._check_X(Y)
        for layout in (Y, np.hstack([Y, np.zeros((ROWS, 3))])[:, :19]):     # rows strided wider
            with pytest.raises(DataError) as err:
                SPN.log_likelihood(layout, n_threads=1)
            assert str(err.value) == str(exact.value)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_first_of_bad_cells_in_one_tile(n_threads):
    """Several bad cells in one 8 x 8 tile and past the tiles: the first in row order."""
    X = _rows()
    X[69, 18] = 3.0
    X[70, 6] = 0.25
    X[70, 2] = -np.inf
    X[71, 1] = 9.0
    with pytest.raises(DataError, match=r"^X\[69, 18\] = 3\.0 is not a state 0\.\.1 "):
        SPN.mpe(X, n_threads=n_threads)
    X[69, 18] = 1.0
    with pytest.raises(DataError, match=r"^X\[70, 2\] = -inf: infinite"):
        SPN.backward(X, n_threads=n_threads)
