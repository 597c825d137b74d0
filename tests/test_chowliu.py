"""Chow-Liu trees: counting kernels, the fit and the estimator (the tree as an SPN leaf:
test_cltree_leaf.py)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree

import spnc
from spnc import DataError
from spnc.chowliu import MI_EPS, fit_chow_liu, forest_to_tree, tree_log_likelihood
from spnc.learn.chowliu import ChowLiuTree

from conftest import SHARED_DATA, chain_data

DATA = SHARED_DATA / "binary"


# ---------------------------------------------------------------- independent reference
def ref_fit(X, card, w, alpha, thr=0.0):
    """Plain numpy MI + scipy MST (strictly positive costs), CPTs from the counts."""
    X = np.asarray(X, dtype=np.int64)
    n, d = X.shape
    w = np.ones(n) if w is None else np.asarray(w, float)
    W = w.sum()
    mi = np.zeros((d, d))
    for i in range(d):
        for j in range(i + 1, d):
            t = np.zeros((card[i], card[j]))
            np.add.at(t, (X[:, i], X[:, j]), w)
            p = (t + alpha) / (W + alpha * card[i] * card[j])
            pa, pb = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
            with np.errstate(divide="ignore", invalid="ignore"):
                mi[i, j] = mi[j, i] = np.nansum(np.where(p > 0, p * np.log(p / (pa * pb)), 0.0))
    keep = np.triu(mi > max(thr, MI_EPS), 1)
    cost = np.where(keep, mi.max() - mi + 1.0, 0.0)
    T = minimum_spanning_tree(cost).toarray()
    edges = {tuple(sorted(e)) for e in zip(*np.nonzero(T))}
    return edges, mi


def edges_of(parents):
    return {tuple(sorted((int(j), int(p)))) for j, p in enumerate(parents) if p >= 0}


def ref_cpts(X, card, w, parents, alpha):
    X = np.asarray(X, dtype=np.int64)
    w = np.ones(len(X)) if w is None else np.asarray(w, float)
    out = []
    for j, p in enumerate(parents):
        t = np.zeros((1 if p < 0 else card[p], card[j]))
        np.add.at(t, (np.zeros(len(X), int) if p < 0 else X[:, p], X[:, j]), w)
        out.append((t + alpha) / (t + alpha).sum(1, keepdims=True))
    return out


# ---------------------------------------------------------------- the fit
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("card", [[2] * 9, [2, 3, 4, 2, 3, 2, 5]])
def test_tree_matches_reference(weighted, card):
    rng = np.random.default_rng(1)
    X = chain_data(rng, 1003, card)
    w = rng.random(len(X)) * 3 if weighted else None
    fit = fit_chow_liu(X, card, w, alpha=0.5)
    edges, mi = ref_fit(X, card, w, 0.5)
    assert edges_of(fit.parents) == edges
    np.testing.assert_allclose(fit.mi, mi, atol=1e-12)
    for a, b in zip(fit.cpts, ref_cpts(X, card, w, fit.parents, 0.5)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_tree_matches_exhaustive_search():
    rng = np.random.default_rng(2)
    X = chain_data(rng, 400, [2] * 5, flip=0.4)
    fit = fit_chow_liu(X, alpha=1.0)
    pairs = list(itertools.combinations(range(5), 2))
    best = -1.0
    for es in itertools.combinations(pairs, 4):  # all spanning trees of K5
        parent = list(range(5))

        def find(a):
            while parent[a] != a:
                a = parent[a]
            return a
        ok = True
        for a, b in es:
            ra, rb = find(a), find(b)
            if ra == rb:
                ok = False
                break
            parent[ra] = rb
        if ok:
            best = max(best, sum(fit.mi[a, b] for a, b in es))
    assert sum(fit.mi[a, b] for a, b in edges_of(fit.parents)) == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize("card", [[2] * 12, [2, 3, 2, 4, 2, 2]])
def test_integer_weights_equal_replicated_rows(card):
    rng = np.random.default_rng(3)
    X = chain_data(rng, 1500, card)  # > 1024 rows: several 8-row table chunks
    w = rng.integers(0, 4, len(X))
    a = fit_chow_liu(X, card, w.astype(float), alpha=0.2)
    b = fit_chow_liu(np.repeat(X, w, axis=0), card, alpha=0.2)
    np.testing.assert_array_equal(a.parents, b.parents)
    np.testing.assert_allclose(a.mi, b.mi, atol=1e-12)
    for x, y in zip(a.cpts, b.cpts):
        np.testing.assert_allclose(x, y, rtol=1e-10)


def test_zero_weight_rows_are_ignored_and_constant_weights_match_unweighted():
    rng = np.random.default_rng(4)
    X = chain_data(rng, 777, [2] * 10)
    w = np.where(rng.random(777) < 0.3, 0.0, 1.0)
    a = fit_chow_liu(X, sample_weight=w)
    b = fit_chow_liu(X[w > 0])
    np.testing.assert_array_equal(a.parents, b.parents)
    # weights are counts: scaling them all changes nothing only without smoothing
    for card in ([2] * 10, [3] * 10):  # binary and one-hot popcount paths
        c = fit_chow_liu(X, card, sample_weight=np.full(777, 2.5), alpha=0.0)
        d = fit_chow_liu(X, card, alpha=0.0)
        np.testing.assert_array_equal(c.parents, d.parents)
        np.testing.assert_allclose(c.mi, d.mi, atol=1e-12)
        for x, y in zip(c.cpts, d.cpts):
            np.testing.assert_allclose(x, y, rtol=1e-12)
        e = fit_chow_liu(X, card, sample_weight=np.full(777, 2.5), alpha=0.7)  # = weighted reference
        edges, mi = ref_fit(X, card, np.full(777, 2.5), 0.7)
        np.testing.assert_allclose(e.mi, mi, atol=1e-12)


def test_forest_independent_variable_and_threshold():
    rng = np.random.default_rng(5)
    X = chain_data(rng, 2000, [2] * 4, flip=0.1)
    X = np.column_stack([X, np.zeros(2000, int)])  # constant: MI exactly zero with alpha=0
    fit = fit_chow_liu(X, alpha=0.0)
    assert fit.parents[4] == -1 and (fit.parents == -1).sum() == 2
    strong = fit_chow_liu(X, alpha=0.0, mi_threshold=10.0)
    assert np.all(strong.parents == -1)
    # hanging the extra roots under the first keeps the distribution
    par, cpts = forest_to_tree(fit.parents, fit.cpts)
    assert (par == -1).sum() == 1
    np.testing.assert_allclose(tree_log_likelihood(X, par, cpts), tree_log_likelihood(X, fit.parents, fit.cpts))


@pytest.mark.parametrize("n", [1, 7, 1100])
def test_weighted_binary_count_kernels(n):
    from spnc import _counts as K
    from spnc.chowliu import _weighted_cooc
    rng = np.random.default_rng(10)
    dens = np.r_[np.full(20, 0.05), np.full(5, 0.95), np.full(5, 0.5)]  # mostly-1 columns get complemented
    X = (rng.random((n, 30)) < dens).astype(np.uint8)
    w = rng.random(n)
    ref = np.triu(X.T.astype(float) @ (w[:, None] * X))
    np.testing.assert_allclose(_weighted_cooc(X, w, 2), ref, atol=1e-9)
    np.testing.assert_allclose(K.cooc_weighted(X, w, 2), ref, atol=1e-9)
    flip = (K.column_counts(X) * 2 > n).astype(np.uint8)
    ptr, _ = K.row_lengths(X, flip)
    Y = X ^ flip
    refy = np.triu(Y.T.astype(float) @ (w[:, None] * Y))
    np.testing.assert_allclose(K.cooc_sparse(ptr, K.active_lists(X, flip, ptr), w, 30, 2), refy, atol=1e-9)


def test_threads_give_identical_results():
    rng = np.random.default_rng(6)
    X = chain_data(rng, 3000, [2] * 40)
    X[:, :20] &= (rng.random((3000, 20)) < 0.2)  # sparse columns: the list kernel runs
    w = rng.random(3000)
    for ww in (None, w):
        a = fit_chow_liu(X, sample_weight=ww, n_threads=1)
        b = fit_chow_liu(X, sample_weight=ww, n_threads=2)
        np.testing.assert_array_equal(a.mi, b.mi)
        np.testing.assert_array_equal(a.parents, b.parents)


def test_single_variable_and_cardinality_inference():
    fit = fit_chow_liu([[0], [1], [1]], alpha=0.0)
    assert fit.parents.tolist() == [-1]
    np.testing.assert_allclose(fit.cpts[0], [[1 / 3, 2 / 3]])
    fit = fit_chow_liu([[0, 2], [1, 0]])
    assert fit.cardinality.tolist() == [2, 3]


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("X, match", [
    ([[0, 1], [1, 0.5]], r"X\[1, 1\]"),
    ([[0, 1], [1, np.nan]], r"X\[1, 1\]"),
    ([[0, 1], [-1, 0]], r"X\[1, 0\]"),
    ([[0, 1], [1, 2]], r"X\[1, 1\] = 2 is not a state 0..1"),
    ([0, 1, 1], r"2-D"),
    (np.zeros((0, 3)), r"at least one row"),
    ([["a", "b"]], r"numeric"),
])
def test_bad_data_raises(X, match):
    with pytest.raises(DataError, match=match):
        fit_chow_liu(X, cardinality=None if "state" not in match else [2, 2])


@pytest.mark.parametrize("v, why", [
    (5e18, r"too large a state for discrete column 1 .*recode"),
    (1e300, r"too large a state for discrete column 1"),
    (np.inf, r"is infinite"),
    (-2.0, r"is negative"),
    (0.5, r"is not an integer"),
])
def test_bad_state_says_what_is_wrong(v, why):
    X = [[0, 1], [1, 0], [0, v]]
    with pytest.raises(DataError, match=r"X\[2, 1\] = .* " + why):
        ChowLiuTree().fit(X)
    with pytest.raises(DataError, match=why):
        spnc.learn.LearnSPN(leaves="chowliu", data_type="discrete").fit(np.array(X, dtype=float))


def test_wide_column_named_by_the_budget():
    with pytest.raises(DataError, match="column 1 has 1000001 states"):
        fit_chow_liu([[0, 1], [1, 1e6]])


@pytest.mark.parametrize("w, match", [
    ([1.0, -1.0, 1.0], r"sample_weight\[1\]"),
    ([1.0, 1.0, np.nan], r"sample_weight\[2\]"),
    ([1.0, 1.0, np.inf], r"sample_weight\[2\] = inf: weights must be finite"),
    ([0.0, 0.0, 0.0], r"zero for every row"),
    ([1.0, 1.0], r"shape \(3,\)"),
])
def test_bad_weights_raise(w, match):
    with pytest.raises(DataError, match=match):
        fit_chow_liu([[0, 1], [1, 0], [1, 1]], sample_weight=w)


def test_bad_cardinality_and_options():
    with pytest.raises(DataError, match="cardinality"):
        fit_chow_liu([[0, 1]], cardinality=[2])
    with pytest.raises(ValueError, match="alpha"):
        fit_chow_liu([[0, 1]], alpha=-1)
    with pytest.raises(ValueError, match="n_threads"):
        fit_chow_liu([[0, 1]], n_threads=0)


# ---------------------------------------------------------------- the estimator
def test_estimator():
    rng = np.random.default_rng(9)
    X = chain_data(rng, 900, [2] * 8)
    m = ChowLiuTree(alpha=0.5)
    assert m.get_params() == {"alpha": 0.5, "mi_threshold": 0.0, "cardinality": None, "n_threads": None}
    m.set_params(alpha=1.0).fit(X)
    assert isinstance(m.spn_, spnc.SPN) and list(m.spn_.leaf_tables) == ["cltree"]
    ll = m.score_samples(X)
    np.testing.assert_allclose(ll, tree_log_likelihood(X, m.parents_, m.cpts_), rtol=1e-12)
    assert m.score(X) == pytest.approx(ll.mean())
    Xm = X[:5].astype(float)
    Xm[:, 3] = np.nan
    full = [m.score_samples(np.where(np.isnan(Xm), v, Xm)) for v in (0, 1)]
    np.testing.assert_allclose(np.exp(m.score_samples(Xm)), np.exp(full[0]) + np.exp(full[1]), rtol=1e-12)
    S = m.sample(100, seed=1)
    assert S.shape == (100, 8)
    np.testing.assert_array_equal(S, m.sample(100, seed=1))
    with pytest.raises(ValueError, match="invalid parameter"):
        m.set_params(beta=1)
    with pytest.raises(AttributeError, match="not fitted"):
        ChowLiuTree().score(X)


@pytest.mark.skipif(not (DATA / "nltcs.train.data").exists(), reason="shared data sets are absent")
def test_nltcs_test_log_likelihood():
    load = lambda s: np.loadtxt(DATA / f"nltcs.{s}.data", delimiter=",", dtype=np.uint8)  # noqa: E731
    m = ChowLiuTree(alpha=0.1).fit(load("train"))
    assert m.score(load("test")) >= -6.76
