"""Sweeps of root values on plain doubles, row by row: on a model whose leaf values are all at
most 1, an underflow that a row's root absorbed keeps that row's plain value; only rows whose
own root underflowed are redone scaled. Each row's log-likelihood then depends on that row
alone (not on its block, the batch or the thread count) and stays within 1e-14 of the scaled
sweep's and of a log-domain reference."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import _graph
from spnc._sweep import graph_of
from spnc.nodes import Product, Sum


def _absorbing(d: int = 12):
    """A mixture whose first component gives rows with x_0 = x_1 = 1 about 1e-400 (below
    2^-1022) while the second keeps their root near 2^-d; ``x_2..`` of 1200 variables in the
    third make the root itself underflow where they are all 1 and the others miss."""
    tiny = Product([spnc.Bernoulli(0, 1e-200), spnc.Bernoulli(1, 1e-200)] +
                   [spnc.Bernoulli(v, 0.5) for v in range(2, d)])
    fair = Product([spnc.Bernoulli(v, 0.5) for v in range(d)])
    return spnc.compile(Sum([tiny, fair], [0.5, 0.5]))


def _log_reference(spn, X):
    """log p(x) by plain log-sum-exp over node values (scipy), missing entries summed out."""
    from scipy.special import logsumexp
    V = np.zeros((X.shape[0], spn.n_nodes))
    p = spn.leaf_tables["bernoulli"].params["p"]
    with np.errstate(divide="ignore"):
        for i, n in enumerate(spn.leaf_tables["bernoulli"].node):
            x = X[:, spn.leaf_tables["bernoulli"].var[i]]
            V[:, n] = np.where(np.isnan(x), 0.0, np.where(x == 1, np.log(p[i]), np.log1p(-p[i])))
        for n in range(spn.n_nodes):
            ch = spn.child[spn.child_ptr[n]:spn.child_ptr[n + 1]]
            if spn.kind[n] == 1:
                V[:, n] = V[:, ch].sum(1)
            elif spn.kind[n] == 0:
                V[:, n] = logsumexp(V[:, ch] + spn.logw[spn.child_ptr[n]:spn.child_ptr[n + 1]], axis=1)
    return V[:, spn.roots[0]]


def _rows(rng, n, d=12):
    X = (rng.random((n, d)) < 0.5).astype(float)
    X[rng.random(n) < 0.4, :2] = 1.0           # these rows' first component underflows
    return X


def test_absorbed_underflow_keeps_each_rows_plain_value():
    rng = np.random.default_rng(0)
    spn = _absorbing()
    X = _rows(rng, 700)
    g = graph_of(spn)
    assert g.bounded and g.linear
    batch = spn.log_likelihood(X)
    assert (X[:, :2].sum(1) == 2).sum() > 200 and np.isfinite(batch).all()
    for _ in range(10):         # no block is redone, so plain doubles stay on
        spn.log_likelihood(X)
    assert g.plain_roots and g.roots_falls == 0
    alone = np.array([spn.log_likelihood(X[i:i + 1])[0] for i in range(0, 700, 7)])
    np.testing.assert_array_equal(alone, batch[::7])
    np.testing.assert_array_equal(spn.log_likelihood(X, n_threads=2), batch)
    np.testing.assert_array_equal(spn.log_likelihood(X[::-1])[::-1], batch)
    np.testing.assert_allclose(batch, _log_reference(spn, X), rtol=1e-14)
    # marginals (missing entries) take the same path
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.2] = np.nan
    np.testing.assert_allclose(spn.log_likelihood(Xm), _log_reference(spn, Xm), rtol=1e-14)
    spn._compiled = _graph.Graph(spn.kind, spn.child_ptr, spn.child, spn.logw, spn.leaf_slot, spn.roots,
                                 spn.n_leaves, spn.weight, plain=False)
    np.testing.assert_allclose(batch, spn.log_likelihood(X), rtol=1e-15)


def test_rows_whose_root_underflows_are_redone_alone():
    """A block with a row whose root is below 2^-960 is redone scaled for that row only: its
    neighbours keep their plain values, so they equal their values computed alone."""
    d = 1200
    wide = spnc.compile(Sum([Product([spnc.Bernoulli(0, 1e-200), spnc.Bernoulli(1, 1e-200)] +
                                     [spnc.Bernoulli(v, 0.3) for v in range(2, d)]),
                             Product([spnc.Bernoulli(v, 0.5) for v in range(2)] +
                                     [spnc.Bernoulli(v, 0.5) for v in range(2, d)])], [0.5, 0.5]))
    X = np.full((130, d), np.nan)
    X[:, :2] = 1.0                                          # absorbed: root ~ 2^-2
    X[::13, 2:] = 1.0                                       # root ~ 2^-1200: redone scaled
    assert graph_of(wide).bounded
    ll = wide.log_likelihood(X)
    assert np.isfinite(ll).all() and (ll[::13] < -800).all()
    np.testing.assert_allclose(ll[::13], np.log(0.5) + d * np.log(0.5) + np.log1p(
        np.exp(2 * np.log(1e-200) + (d - 2) * np.log(0.3) - d * np.log(0.5))), rtol=1e-13)
    for i in (1, 2, 14, 64, 65, 129):
        assert wide.log_likelihood(X[i:i + 1])[0] == ll[i]
    np.testing.assert_allclose(ll[1], np.log(0.5) + np.log(0.25) + np.log1p(1e-400 / 0.25), rtol=1e-15)


def test_unbounded_leaves_redo_whole_blocks():
    """Densities above 1 can magnify an absorbed underflow: a Gaussian model is not bounded,
    and an underflowing block is redone scaled whole, the scaled sweep's bits for every row."""
    g = [Product([spnc.Gaussian(0, 0.0, 1e-160), spnc.Indicator(1, 0)]),
         Product([spnc.Gaussian(0, 5.0, 1.0), spnc.Indicator(1, 0)])]
    spn = spnc.compile(Sum(g, [0.5, 0.5]), cardinality=[0, 2])
    assert not graph_of(spn).bounded
    X = np.column_stack([np.r_[np.full(40, 5.0), np.full(40, 3e-160)], np.zeros(80)])
    ll = spn.log_likelihood(X)
    spn._compiled = _graph.Graph(spn.kind, spn.child_ptr, spn.child, spn.logw, spn.leaf_slot, spn.roots,
                                 spn.n_leaves, spn.weight, plain=False)
    np.testing.assert_array_equal(ll, spn.log_likelihood(X))


@pytest.mark.parametrize("ll_first", [True, False])
def test_mpe_log_likelihood_matches_the_log_likelihood_of_its_rows(ll_first):
    rng = np.random.default_rng(2)
    spn = _absorbing()
    X = _rows(rng, 300)
    X[rng.random(X.shape) < 0.3] = np.nan
    if ll_first:
        spn.log_likelihood(X)
    out, ll = spn.mpe(X, log_likelihood=True)
    np.testing.assert_array_equal(ll, spn.log_likelihood(out))


def test_em_counts_keep_plain_blocks_whose_roots_absorbed_an_underflow():
    """EM's E-step (sums over rows only) keeps plain blocks whose every root stayed above
    2^-960: its counts equal those of whole-block scaled redos to rounding."""
    from spnc.learn import EM
    rng = np.random.default_rng(3)
    spn = _absorbing()
    X = _rows(rng, 900)
    X[rng.random(X.shape) < 0.1] = np.nan
    w = rng.uniform(0.5, 2.0, len(X))
    out = {}
    for bounded in (True, False):
        spn.__dict__.pop("_leaf_states", None)
        spn._compiled = _graph.Graph(spn.kind, spn.child_ptr, spn.child, spn.logw, spn.leaf_slot, spn.roots,
                                     spn.n_leaves, spn.weight, bounded=bounded)
        em = EM(init=spn, check_leaves=False)
        em._setup(spn)
        em.n_threads, em.rejected_ = 1, 0
        out[bounded] = (em._estep(spn, X, w, hard=False), spn._compiled.plain_falls)
    (new, falls_new), (old, falls_old) = out[True], out[False]
    assert falls_new == 0 and falls_old > 0
    assert new["objective"] == pytest.approx(old["objective"], rel=1e-15)
    np.testing.assert_allclose(new["edge_counts"], old["edge_counts"], rtol=1e-13, atol=1e-250)
    np.testing.assert_allclose(new["node_counts"], old["node_counts"], rtol=1e-13, atol=1e-250)
    for k in new["leaf"]:
        for f in new["leaf"][k]:
            np.testing.assert_allclose(new["leaf"][k][f], old["leaf"][k][f], rtol=1e-13, atol=1e-250)


def test_kept_rows_match_the_scaled_sweep_on_random_models():
    """Random DAGs over discrete variables with extreme parameters (1e-300 weights and
    probabilities, zeros, subnormal states): every row's log-likelihood equals its value
    computed alone and on two threads bit for bit, and the scaled sweep's to 1e-14."""
    pytest.importorskip("hypothesis")
    from hypothesis import HealthCheck, given, settings, strategies as st
    from _property_models import random_model, random_rows

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(seed=st.integers(0, 2**32 - 1), card=st.lists(st.sampled_from([2, 3, 4]), min_size=1, max_size=5),
           multi=st.booleans())
    def check(seed, card, multi):
        rng = np.random.default_rng(seed)
        roots, kw = random_model(rng, card, extreme=True, multi=multi)
        spn = spnc.compile(roots if len(roots) > 1 else roots[0], cardinality=card, **kw)
        assert graph_of(spn).bounded
        X = random_rows(rng, card, 150, 0.3)
        ll = spn.log_likelihood(X)
        np.testing.assert_array_equal(spn.log_likelihood(X, n_threads=2), ll)
        for i in range(0, 150, 13):
            np.testing.assert_array_equal(spn.log_likelihood(X[i:i + 1]), ll[i:i + 1])
        spn._compiled = _graph.Graph(spn.kind, spn.child_ptr, spn.child, spn.logw, spn.leaf_slot, spn.roots,
                                     spn.n_leaves, spn.weight, plain=False)
        np.testing.assert_allclose(ll, spn.log_likelihood(X), rtol=1e-14)
    check()


def _estep(spn, X, w, n_threads=2):
    from spnc.learn import EM
    em = EM(init=spn, check_leaves=False)
    em._setup(spn)
    em.n_threads, em.rejected_ = n_threads, 0
    return em._estep(spn, X, w, hard=False)


def _nested():
    """The first pair's posterior is 1e-200 * 1e-120: below the normal range."""
    def pair():
        return Product([spnc.Bernoulli(0, 0.5), spnc.Bernoulli(1, 0.3)])
    return spnc.compile(Sum([Sum([pair(), pair()], [1e-120, 1 - 1e-120]), pair()], [1e-200, 1 - 1e-200]))


def test_em_counts_keep_posteriors_below_the_normal_range():
    """EM's counting pass scales every posterior by 2^600 (a subnormal operand costs a
    microcode assist) and scales the counts back: posteriors below 2^-1022 still count, and
    the counts equal those from the node posteriors."""
    spn = _nested()
    rng = np.random.default_rng(4)
    X = (rng.random((4000, 2)) < 0.5).astype(float)
    post = spn.backward(X, node_posteriors=True)["node_posteriors"]
    assert ((post > 0) & (post < 2.2250738585072014e-308)).any()
    est = _estep(spn, X, np.ones(len(X)))
    table = spn.leaf_tables["bernoulli"]
    c1 = (post[:, table.node] * X[:, table.var]).sum(0)       # rows with x = 1 under each leaf
    got = est["leaf"]["bernoulli"]["count"][1::2]
    tiny = c1 < 1e-300
    assert tiny.sum() == 2
    np.testing.assert_allclose(got[~tiny], c1[~tiny], rtol=1e-12)
    # every pair explains a row alike, so the first pair's posterior is 1e-200 * 1e-120 in
    # every row: counted to the last bit of the (subnormal) result; c1 adds subnormals, which
    # keep a few digits only
    n1 = X[:, table.var[tiny]].sum(0)
    want = n1 * (1e-200 * 2.0 ** 600) * 1e-120 * 2.0 ** -600        # rounded once, to a subnormal
    np.testing.assert_allclose(got[tiny], want, rtol=0, atol=4 * 5e-324)
    np.testing.assert_allclose(got[tiny], c1[tiny], rtol=1e-2)
    edge = spn.backward(X)["edge_counts"]
    np.testing.assert_allclose(est["edge_counts"], edge, rtol=1e-2, atol=0)


def test_em_counts_with_huge_row_weights_do_not_overflow():
    """Row weights above 2^300 leave the posteriors unscaled: counts are the weights'
    multiples (to a few digits where unscaled posteriors were subnormal)."""
    spn = _nested()
    X = (np.random.default_rng(5).random((500, 2)) < 0.5).astype(float)
    one, big = _estep(spn, X, np.ones(len(X))), _estep(spn, X, np.full(len(X), 1e200))
    for a, b in ((one["edge_counts"], big["edge_counts"]), (one["node_counts"], big["node_counts"]),
                 (one["leaf"]["bernoulli"]["count"], big["leaf"]["bernoulli"]["count"])):
        assert np.isfinite(b).all()
        normal = a > 1e-300
        np.testing.assert_allclose(b[normal], a[normal] * 1e200, rtol=1e-12)
        np.testing.assert_allclose(b[~normal], a[~normal] * 1e200, rtol=1e-3)
