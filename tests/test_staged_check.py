"""Bad values (inf, categories out of range) found while the sweep stages its blocks: the
queries raise the DataError the up-front check gives, wherever the cell is, on 1 and 2
threads, for staged sweeps (every leaf inline) and unstaged ones (a Gaussian leaf); good
rows give the same bits as with the up-front check."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import DataError, _data
from spnc.graph import SPN
from spnc.leaves.univariate import Bernoulli, Gaussian
from spnc.nodes import Product, Sum

NAMES = ["a", "b", "c", "d", "e", "f", "g"]
ROWS = 200          # blocks of 64: rows 0-63, 64-127, 128-191 and the partial 192-199


def _model(gaussian: bool, seed: int = 0) -> SPN:
    """A mixture of products over binary variables 0-3 and 5 and a 3-state variable 4 (and
    a real variable 6 with Gaussian leaves, which the sweep does not evaluate inline)."""
    rng = np.random.default_rng(seed)

    def leaves(v):
        if v == 4:
            return spnc.Categorical(4, list(rng.dirichlet(np.ones(3))))
        if v == 6:
            return Gaussian(6, float(rng.normal()), 1.0)
        return Bernoulli(v, float(rng.uniform(0.1, 0.9)))

    n = 7 if gaussian else 6
    inner = [Sum([Product([leaves(0), leaves(1)]), Product([leaves(0), leaves(1)])], [0.4, 0.6])
             for _ in range(3)]
    prods = [Product([inner[k]] + [leaves(v) for v in range(2, n)]) for k in range(3)]
    return spnc.compile(Sum(prods, [0.2, 0.3, 0.5]), var_names=NAMES[:n])


MODELS = {"staged": _model(False), "unstaged": _model(True)}


def _rows(spn: SPN, n: int = ROWS, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = (rng.random((n, spn.n_vars)) < 0.5).astype(float)
    X[:, 4] = rng.integers(0, 3, n)
    if spn.n_vars > 6:
        X[:, 6] = rng.normal(size=n)
    X[rng.random(X.shape) < 0.2] = np.nan
    return X


def _expected(spn: SPN, Y: np.ndarray, name: str = "X") -> str:
    """The message of the first bad cell, as first_bad_value locates it."""
    r, c, code = _data.first_bad_value(Y, spn.cardinality)
    assert code
    if code == 1:
        return f"{name}[{r}, {c}] = {Y[r, c]}: infinite values are not allowed (use NaN for missing), " \
               f"variable {c} ({NAMES[c]!r})"
    return f"{name}[{r}, {c}] = {float(Y[r, c])!r} is not a state 0..{spn.cardinality[c] - 1} of " \
           f"discrete variable {c} ({NAMES[c]!r})"


QUERIES = {
    "log_likelihood": lambda spn, Y, nt: spn.log_likelihood(Y, n_threads=nt),
    "backward": lambda spn, Y, nt: spn.backward(Y, n_threads=nt, leaf_responsibilities=True),
    "mpe": lambda spn, Y, nt: spn.mpe(Y, n_threads=nt),
    "mpe_ll": lambda spn, Y, nt: spn.mpe(Y, n_threads=nt, log_likelihood=True),
    "sample": lambda spn, Y, nt: spn.sample(evidence=Y, seed=3, n_threads=nt),
    "conditional_q": lambda spn, Y, nt: spn.conditional(Y, _evidence_of(spn, Y), n_threads=nt),
    "conditional_e": lambda spn, Y, nt: spn.conditional(_good(spn, Y), Y, n_threads=nt),
}
NAME = {"sample": "evidence", "conditional_q": "X_query", "conditional_e": "X_evidence"}


def _good(spn, Y):
    """Y with its bad cells made 0 (a good query row for evidence Y)."""
    k = np.asarray(spn.cardinality, dtype=float)
    with np.errstate(invalid="ignore"):
        bad = np.isinf(Y) | ((k > 0) & ~np.isnan(Y) & ((Y < 0) | (Y >= k) | (Y != np.floor(Y))))
    return np.where(bad, 0.0, Y)


def _evidence_of(spn, Xq):
    """Evidence for query rows Xq: its good values but those of variable 0."""
    Xe = np.where(_good(spn, Xq) == Xq, Xq, np.nan)
    Xe[:, 0] = np.nan
    return Xe


BAD = [(4, 3.0), (4, -1.0), (2, 0.5), (1, np.inf), (6, -np.inf)]


@pytest.mark.parametrize("row", [3, 100, 197])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_bad_cell_raises_as_before(query, model, n_threads, row):
    spn = MODELS[model]
    X = _rows(spn)
    for col, value in BAD:
        if col >= spn.n_vars:
            continue
        Y = X.copy()
        Y[row, col] = value
        expected = _expected(spn, Y, NAME.get(query, "X"))
        with pytest.raises(DataError) as err:
            QUERIES[query](spn, Y, n_threads)
        assert str(err.value) == expected
        # the up-front check (what every query ran before) gives the same message
        with pytest.raises(DataError) as old:
            spn._check_X(Y, NAME.get(query, "X"))
        assert str(old.value) == expected


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("query", ["log_likelihood", "backward", "mpe"])
def test_first_of_several_bad_cells(query, n_threads):
    """Bad cells in several blocks and chunks: the first is named, its row counted from the
    start of X (chunks hold at most 16 k rows)."""
    spn = MODELS["staged"]
    X = _rows(spn, 40_000)
    X[39_990, 4] = 7.0
    X[35_001, 2] = np.inf
    X[20_000, 3] = 2.0
    with pytest.raises(DataError, match=r"^X\[20000, 3\] = 2\.0 is not a state 0\.\.1 "):
        QUERIES[query](spn, X, n_threads)
    X[20_000, 3] = 1.0
    with pytest.raises(DataError, match=r"^X\[35001, 2\] = inf: infinite"):
        QUERIES[query](spn, X, n_threads)


def test_data_frame_cells_named_by_frame_column():
    pd = pytest.importorskip("pandas")
    spn = MODELS["staged"]
    X = _rows(spn)
    X[150, 4] = 5.0
    frame = pd.DataFrame(X, columns=NAMES[:6])[NAMES[:6][::-1]]     # columns in another order
    with pytest.raises(DataError) as old:
        spn._check_X(frame)
    assert str(old.value).startswith("X[150, 1] = 5.0 ")
    for q in ("log_likelihood", "backward", "mpe"):
        with pytest.raises(DataError) as err:
            QUERIES[q](spn, frame, 2)
        assert str(err.value) == str(old.value)


def test_stream_blocks_name_rows_of_the_input():
    from spnc.stream import block_log_likelihood
    spn = MODELS["staged"]
    X = _rows(spn)
    X[70, 5] = np.inf
    with pytest.raises(DataError, match=r"^X\[1070, 5\] = inf"):
        block_log_likelihood(spn, X, 1000)


def _upfront(monkeypatch):
    """Queries as before: every value checked by _check_X, none by the sweep."""
    orig = SPN._check_X

    def check_x(self, X, name="X", row0=0, *, defer=False):
        A = orig(self, X, name, row0)
        return (A, None) if defer else A
    monkeypatch.setattr(SPN, "_check_X", check_x)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_good_rows_keep_their_bits(model, n_threads, monkeypatch):
    spn = MODELS[model]
    X = _rows(spn, 1000)
    calls = {k: q(spn, X, n_threads) for k, q in QUERIES.items() if not k.startswith("conditional")}
    calls["conditional"] = spn.conditional(X, _evidence_of(spn, X), n_threads=n_threads)
    with monkeypatch.context() as mp:
        _upfront(mp)
        before = {k: q(spn, X, n_threads) for k, q in QUERIES.items() if not k.startswith("conditional")}
        before["conditional"] = spn.conditional(X, _evidence_of(spn, X), n_threads=n_threads)
    for k, v in before.items():
        for a, b in zip(v if isinstance(v, tuple) else [v], calls[k] if isinstance(v, tuple) else [calls[k]]):
            if isinstance(a, dict):
                assert a.keys() == b.keys()
                for key in a:
                    np.testing.assert_array_equal(a[key], b[key], err_msg=f"{k} {key}")
            else:
                np.testing.assert_array_equal(a, b, err_msg=k)


def test_staged_sweeps_skip_the_separate_pass(monkeypatch):
    """Good rows: a staged sweep never runs first_bad_value; an unstaged one runs it once."""
    calls = []
    orig = _data.first_bad_value
    monkeypatch.setattr(_data, "first_bad_value", lambda *a: calls.append(1) or orig(*a))
    for model, n in (("staged", 0), ("unstaged", 1)):
        spn = MODELS[model]
        X = _rows(spn)
        for q in ("log_likelihood", "backward", "mpe", "sample"):
            calls.clear()
            QUERIES[q](spn, X, 1)
            assert len(calls) == n, (model, q)


@pytest.mark.parametrize("layout", ["fortran", "strided", "float32", "records"])
def test_other_layouts(layout):
    """Column-major, strided and float32 rows (staged, float32 after conversion) and a view
    of packed records (rows not on whole doubles: not staged, the up-front scan) name the
    same cell."""
    from spnc._kinds import MARGINAL
    from spnc._sweep import Sweep
    spn = MODELS["staged"]
    X = _rows(spn)
    X[130, 4] = 9.0
    if layout == "fortran":
        Y = np.asfortranarray(X)
    elif layout == "strided":
        Y = np.repeat(np.repeat(X, 2, axis=0), 2, axis=1)[::2, ::2]
    elif layout == "float32":
        Y = X.astype(np.float32)
    else:
        rec = np.zeros(X.shape[0], dtype=[("pad", "u1")] + [(n, "<f8") for n in NAMES[:6]])
        for i, n in enumerate(NAMES[:6]):
            rec[n] = X[:, i]
        Y = np.lib.stride_tricks.as_strided(rec["a"], shape=X.shape, strides=(rec.dtype.itemsize, 8))
    assert np.array_equal(np.asarray(Y, dtype=float), X, equal_nan=True)
    A, _ = spn._check_X(Y, defer=True)
    assert Sweep(spn, A, MARGINAL, 1, stage=True).staged == (layout != "records")
    for q in ("log_likelihood", "backward", "mpe"):
        for nt in (1, 2):
            with pytest.raises(DataError) as err:
                QUERIES[q](spn, Y, nt)
            assert str(err.value) == "X[130, 4] = 9.0 is not a state 0..2 of discrete variable 4 ('e')"
