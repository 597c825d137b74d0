"""Inference kernels against brute-force enumeration and scipy references."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import stats

import spnc
from spnc._kinds import MARGINAL
from spnc._selection import select
from spnc.nodes import Product, Sum

from conftest import all_states, completions, eval_linear, random_spn

CARDS = [[2, 2, 2], [2, 3, 2, 4], [2, 2, 2, 2, 2, 2], [3, 2, 4, 2, 3]]


def _model(seed, card, **kw):
    rng = np.random.default_rng(seed)
    root = random_spn(rng, card, **kw)
    return root, spnc.compile(root, cardinality=card)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("card", CARDS)
def test_joint_matches_enumeration_and_normalises(seed, card):
    root, spn = _model(seed, card)
    X = all_states(card)
    ll = spn.log_likelihood(X)
    ref = np.log([eval_linear(root, x) for x in X])
    np.testing.assert_allclose(ll, ref, rtol=0, atol=1e-10)
    assert abs(np.exp(ll).sum() - 1.0) < 1e-10


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("card", CARDS)
def test_marginals_equal_sums_over_states(seed, card):
    root, spn = _model(seed, card)
    rng = np.random.default_rng(100 + seed)
    X = all_states(card)[rng.integers(0, np.prod(card), 12)]
    X[rng.random(X.shape) < 0.4] = np.nan
    X[0] = np.nan  # everything missing: probability 1
    ref = np.log([sum(eval_linear(root, c) for c in completions(x, card)) for x in X])
    np.testing.assert_allclose(spn.log_likelihood(X), ref, rtol=0, atol=1e-10)
    assert abs(spn.log_likelihood(X[:1])[0]) < 1e-12


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("card", CARDS)
def test_mpe_is_the_max_product_argmax(seed, card):
    root, spn = _model(seed, card)
    rng = np.random.default_rng(200 + seed)
    X = all_states(card)[rng.integers(0, np.prod(card), 10)]
    X[rng.random(X.shape) < 0.6] = np.nan
    filled, mp = spn.mpe(X)
    filled2, ll = spn.mpe(X, log_likelihood=True)
    assert filled2.tobytes() == filled.tobytes()
    for x, f, v, l in zip(X, filled, mp, ll):
        obs = ~np.isnan(x)
        assert np.array_equal(f[obs], x[obs])
        best = max(eval_linear(root, c, maxprod=True) for c in completions(x, card))
        assert eval_linear(root, f, maxprod=True) == pytest.approx(best, rel=1e-12)
        assert v == pytest.approx(np.log(best), abs=1e-10)           # the max-product value
        assert l == pytest.approx(np.log(eval_linear(root, f)), abs=1e-10)


def test_conditional_is_a_difference_of_marginals():
    root, spn = _model(3, [2, 3, 2, 4])
    Xq = np.array([[1, 2, np.nan, 0], [0, np.nan, 1, 3]], dtype=float)
    Xe = np.array([[1, np.nan, np.nan, 0], [np.nan, np.nan, 1, np.nan]], dtype=float)
    got = spn.conditional(Xq, Xe)
    ref = spn.log_likelihood(Xq) - spn.log_likelihood(Xe)
    np.testing.assert_array_equal(got, ref)
    with pytest.raises(spnc.DataError, match="repeat the evidence"):
        spn.conditional(Xe, Xq)


@pytest.mark.parametrize("card", [[2, 3, 2], [2, 2, 2, 2]])
def test_sample_frequencies_match_probabilities(card):
    root, spn = _model(7, card)
    n = 40000
    S = spn.sample(n, seed=123)
    assert S.shape == (n, len(card))
    states = all_states(card)
    p = np.exp(spn.log_likelihood(states))
    idx = np.ravel_multi_index(S.astype(int).T, card)
    counts = np.bincount(idx, minlength=len(states))
    keep = p * n >= 5
    chi2 = stats.chisquare(counts[keep], p[keep] / p[keep].sum() * counts[keep].sum())
    assert chi2.pvalue > 1e-3
    np.testing.assert_array_equal(S, spn.sample(n, seed=123, n_threads=2))
    assert not np.array_equal(S, spn.sample(n, seed=124))


def test_conditional_sampling_matches_conditional_probabilities():
    card = [2, 3, 2, 2]
    root, spn = _model(11, card)
    ev = np.array([1, np.nan, np.nan, 0], dtype=float)
    S = spn.sample(evidence=np.tile(ev, (30000, 1)), seed=5)
    assert np.all(S[:, 0] == 1) and np.all(S[:, 3] == 0)
    comp = completions(ev, card)
    p = np.exp(spn.conditional(comp, np.tile(ev, (len(comp), 1))))
    assert abs(p.sum() - 1) < 1e-10
    idx = [int(np.flatnonzero((comp == s).all(1))[0]) for s in S]
    counts = np.bincount(idx, minlength=len(comp))
    assert stats.chisquare(counts, p * len(S)).pvalue > 1e-3


def test_gaussian_models_match_scipy():
    rng = np.random.default_rng(0)
    cov = np.array([[1.0, 0.4, 0.2], [0.4, 2.0, -0.3], [0.2, -0.3, 0.5]])
    mv = spnc.MultivariateGaussian([0, 1, 2], [0.5, -1.0, 2.0], cov)
    fac = Product([spnc.Gaussian(0, 1.0, 0.5), spnc.Gaussian(1, 0.0, 2.0), spnc.Gaussian(2, -1.0, 1.5)])
    spn = spnc.compile(Sum([mv, fac], [0.3, 0.7]))
    X = rng.normal(size=(50, 3))
    dens = 0.3 * stats.multivariate_normal([0.5, -1.0, 2.0], cov).pdf(X) + \
        0.7 * stats.norm(1, 0.5).pdf(X[:, 0]) * stats.norm(0, 2).pdf(X[:, 1]) * stats.norm(-1, 1.5).pdf(X[:, 2])
    np.testing.assert_allclose(spn.log_likelihood(X), np.log(dens), rtol=1e-11)
    # marginal over x1 (missing): the MVN marginal on (x0, x2)
    Xm = X.copy()
    Xm[:, 1] = np.nan
    sub = cov[np.ix_([0, 2], [0, 2])]
    dens = 0.3 * stats.multivariate_normal([0.5, 2.0], sub).pdf(X[:, [0, 2]]) + \
        0.7 * stats.norm(1, 0.5).pdf(X[:, 0]) * stats.norm(-1, 1.5).pdf(X[:, 2])
    np.testing.assert_allclose(spn.log_likelihood(Xm), np.log(dens), rtol=1e-11)


def test_mpe_values_with_leaf_matrix_leaves():
    """Gaussian leaves go through the leaf matrix: the max-product value and the opt-in
    log-likelihood of the completion still agree with separate passes."""
    spn = spnc.compile(Sum([Product([spnc.Bernoulli(0, p=.3), spnc.Gaussian(1, mean=0., std=1.)]),
                            Product([spnc.Bernoulli(0, p=.9), spnc.Gaussian(1, mean=2., std=.5)])],
                           weights=[.4, .6]))
    X = np.array([[1, 0.5], [0, np.nan], [np.nan, np.nan], [np.nan, 1.0]])
    filled, mp = spn.mpe(X)
    _, ll = spn.mpe(X, log_likelihood=True)
    root = spn.root
    np.testing.assert_allclose(mp, spn.node_log_values(filled, mode=spnc.graph.MAX)[:, root], rtol=1e-12)
    np.testing.assert_allclose(ll, spn.log_likelihood(filled), rtol=1e-12)
    assert np.all(mp <= ll + 1e-12)


def test_mvn_mpe_and_conditional_sampling():
    cov = np.array([[1.0, 0.8], [0.8, 2.0]])
    spn = spnc.compile(spnc.MultivariateGaussian([0, 1], [1.0, -1.0], cov))
    X = np.array([[2.0, np.nan], [np.nan, np.nan]])
    filled, _ = spn.mpe(X)
    np.testing.assert_allclose(filled[0], [2.0, -1.0 + 0.8 * (2.0 - 1.0)])
    np.testing.assert_allclose(filled[1], [1.0, -1.0])
    S = spn.sample(evidence=np.tile([2.0, np.nan], (40000, 1)), seed=3)[:, 1]
    assert abs(S.mean() - (-0.2)) < 0.02
    assert abs(S.var() - (2.0 - 0.64)) < 0.04
    S = spn.sample(40000, seed=4)
    np.testing.assert_allclose(np.cov(S.T), cov, atol=0.05)


def test_gaussian_mixture_sampling_moments():
    spn = spnc.compile(Sum([spnc.Gaussian(0, -2.0, 0.5), spnc.Gaussian(0, 3.0, 1.0)], [0.25, 0.75]))
    S = spn.sample(50000, seed=9)[:, 0]
    assert abs(S.mean() - (0.25 * -2 + 0.75 * 3)) < 0.03
    assert stats.kstest(S, lambda x: 0.25 * stats.norm(-2, .5).cdf(x) + 0.75 * stats.norm(3, 1).cdf(x)).pvalue > 1e-3


def test_no_underflow_with_a_thousand_variables_and_deep_chain():
    d = 1000
    rng = np.random.default_rng(0)
    p = rng.uniform(0.01, 0.2, size=(2, d))
    comps = [Product([spnc.Bernoulli(v, p[k, v]) for v in range(d)]) for k in range(2)]
    spn = spnc.compile(Sum(comps, [0.5, 0.5]))
    X = (rng.random((20, d)) < 0.5).astype(float)  # very unlikely rows: log p ~ -1500
    ll = spn.log_likelihood(X)
    ref = np.logaddexp(*(np.log(0.5) + np.sum(np.where(X == 1, np.log(p[k]), np.log1p(-p[k])), axis=1) for k in range(2)))
    assert np.all(ll < -1000)
    np.testing.assert_allclose(ll, ref, rtol=1e-12)
    # depth: a chain of 20000 alternating sums (no recursion anywhere)
    node = spnc.Bernoulli(0, 0.3)
    for i in range(20000):
        node = Sum([node, spnc.Bernoulli(0, 0.6)], [0.5, 0.5]) if i % 2 else Sum([node], [1.0])
    deep = spnc.compile(node)
    assert deep.n_nodes > 20000
    assert np.isfinite(deep.log_likelihood(np.array([[1.0]]))).all()


def test_extreme_weights_and_zero_probabilities():
    # children whose values differ by hundreds of nats, zero weights and impossible states
    a = Product([spnc.Gaussian(0, 0.0, 1e-3), spnc.Indicator(1, 0)])
    b = Product([spnc.Gaussian(0, 40.0, 1.0), spnc.Indicator(1, 1)])
    spn = spnc.compile(Sum([a, b], [1e-300, 1.0]), cardinality=[0, 3])
    X = np.array([[0.0, 0.0], [40.0, 1.0], [0.0, np.nan], [40.0, 2.0]])
    ll = spn.log_likelihood(X)
    ref0 = np.log(1e-300) + stats.norm(0, 1e-3).logpdf(0.0)
    assert ll[0] == pytest.approx(ref0, rel=1e-12)
    assert ll[1] == pytest.approx(stats.norm(40, 1).logpdf(40.0), rel=1e-12)
    assert ll[2] == pytest.approx(np.logaddexp(ref0, stats.norm(40, 1).logpdf(0.0)), rel=1e-12)
    assert ll[3] == -np.inf
    with pytest.raises(spnc.DataError, match="probability zero"):
        spn.mpe(X[3:])


def _reference_posteriors(root, x, card):
    """rho_n = S_n dS/dS_n / S by plain reverse-mode differentiation (linear domain)."""
    order, seen = [], set()

    def visit(n):
        if id(n) in seen:
            return
        seen.add(id(n))
        for c in getattr(n, "children", []):
            visit(c)
        order.append(n)

    visit(root)
    val = {}
    for n in order:
        val[id(n)] = eval_linear(n, x)
    grad = {id(n): 0.0 for n in order}
    grad[id(root)] = 1.0
    for n in reversed(order):
        if isinstance(n, Sum):
            for w, c in zip(n.weights, n.children):
                grad[id(c)] += grad[id(n)] * w
        elif isinstance(n, Product):
            for c in n.children:
                others = np.prod([val[id(o)] for o in n.children if o is not c])
                grad[id(c)] += grad[id(n)] * others
    S = val[id(root)]
    return {k: val[k] * grad[k] / S for k in grad}, order


@pytest.mark.parametrize("sweep", ["shares", "push", "gather"])
@pytest.mark.parametrize("seed", range(4))
def test_backward_posteriors_and_edge_counts(seed, sweep):
    """Against reverse-mode differentiation, with each backward sweep: edge shares kept by the
    forward, node values pushed from sums to children, or gathered from sum parents."""
    from spnc._sweep import graph_of
    card = [2, 3, 2, 2]
    root, spn = _model(seed, card)
    graph_of(spn).shares = sweep == "shares"
    graph_of(spn).gather = sweep == "gather"
    rng = np.random.default_rng(seed)
    X = all_states(card)[rng.integers(0, np.prod(card), 9)]
    w = rng.uniform(0.5, 2, len(X))
    out = spn.backward(X, sample_weight=w, node_posteriors=True, leaf_responsibilities=True)
    back = spn.to_nodes()
    edge_ref = np.zeros(spn.n_edges)
    for r, x in enumerate(X):
        rho, order = _reference_posteriors(back, x, card)
        got = out["node_posteriors"][r]
        # node ids follow the compile order of to_nodes(); map through a recompile
        ids = {id(n): i for i, n in enumerate(order)}
        ref = np.array([rho[id(n)] for n in order])
        np.testing.assert_allclose(got, ref, atol=1e-12)
        for n in np.flatnonzero(spn.kind == 0):
            for e in range(spn.child_ptr[n], spn.child_ptr[n + 1]):
                c = spn.child[e]
                vals = np.exp(spn.node_log_values(x[None])[0])
                edge_ref[e] += w[r] * rho[id(order[n])] * spn.weight[e] * vals[c] / vals[n]
        assert ids  # order is the compiled order
    np.testing.assert_allclose(out["edge_counts"], edge_ref, atol=1e-10)
    np.testing.assert_allclose(out["node_counts"], (out["node_posteriors"] * w[:, None]).sum(0), atol=1e-10)
    np.testing.assert_allclose(out["log_likelihood"], spn.log_likelihood(X), atol=1e-12)
    leaves = np.flatnonzero(spn.kind >= 2)
    np.testing.assert_allclose(out["leaf_responsibilities"][:, spn.leaf_slot[leaves]],
                               out["node_posteriors"][:, leaves], atol=0)
    # counts are conserved: each sum's edges carry exactly its mass
    for n in np.flatnonzero(spn.kind == 0):
        assert out["edge_counts"][spn.child_ptr[n]:spn.child_ptr[n + 1]].sum() == pytest.approx(out["node_counts"][n])


def test_parallel_equals_serial_bit_for_bit():
    rng = np.random.default_rng(1)
    root = random_spn(rng, [2] * 12, depth=4)
    spn = spnc.compile(root)
    X = (rng.random((3000, 12)) < 0.5).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    for f in (spn.log_likelihood, lambda X, n_threads: spn.mpe(X, n_threads=n_threads)[0]):
        np.testing.assert_array_equal(f(X, n_threads=1), f(X, n_threads=2))
    a = spn.backward(X, n_threads=1)
    b = spn.backward(X, n_threads=2)
    np.testing.assert_array_equal(a["log_likelihood"], b["log_likelihood"])
    np.testing.assert_allclose(a["edge_counts"], b["edge_counts"], rtol=1e-12)


def test_walk_back_pickle_and_sharing():
    root, spn = _model(2, [2, 3, 2, 4], share=0.6)
    back = spnc.compile(spn.to_nodes(), cardinality=spn.cardinality)
    for a in ("kind", "child_ptr", "child", "weight", "scope_ptr", "scope"):
        np.testing.assert_array_equal(getattr(back, a), getattr(spn, a))
    p = pickle.loads(pickle.dumps(spn))
    X = all_states([2, 3, 2, 4])
    np.testing.assert_array_equal(p.log_likelihood(X), spn.log_likelihood(X))
    shared = spnc.Bernoulli(0, 0.5)
    m = spnc.compile(Sum([Product([shared, spnc.Bernoulli(1, .2)]), Product([shared, spnc.Bernoulli(1, .7)])]))
    assert m.n_nodes == 6  # the shared leaf is stored once
    assert m.n_edges == 6


def test_ensembles_mixture_and_independent():
    a = Product([spnc.Bernoulli(0, 0.2), spnc.Bernoulli(1, 0.7)])
    b = Product([spnc.Bernoulli(0, 0.9), spnc.Bernoulli(1, 0.4)])
    X = all_states([2, 2])
    mix = spnc.compile([a, b], root_weights=[0.25, 0.75])
    ref = spnc.compile(Sum([a, b], [0.25, 0.75]))
    np.testing.assert_allclose(mix.log_likelihood(X), ref.log_likelihood(X), atol=1e-14)
    bag = spnc.compile([a, b], combine="independent")
    ll = bag.log_likelihood(X)
    assert ll.shape == (4, 2)
    np.testing.assert_allclose(ll[:, 0], spnc.compile(a).log_likelihood(X), atol=0)
    bw = mix.backward(X)
    np.testing.assert_allclose(bw["log_likelihood"], ref.log_likelihood(X), atol=1e-14)


def _with_domain(spn, linear, shares=None):
    from spnc import _graph
    spn._compiled = _graph.Graph(spn.kind, spn.child_ptr, spn.child, spn.logw, spn.leaf_slot, spn.roots,
                                 spn.n_leaves, spn.weight, linear=linear)
    if shares is not None:
        spn._compiled.shares = shares
    return spn


@pytest.mark.parametrize("shares", [None, True])
@pytest.mark.parametrize("seed", range(4))
def test_linear_and_log_domain_sweeps_agree(seed, shares):
    """The linear-domain sweep (power-of-two exponents, no exp per edge) and the log-domain
    sweep give the same log-likelihoods and backward statistics to 1e-12 relative, on
    random models, extreme weights, 1000-variable products and Gaussian leaves; with the
    backward's default plan (small models: every node's value) and with edge shares."""
    rng = np.random.default_rng(seed)
    d = 1000
    p = rng.uniform(0.01, 0.2, size=(2, d))
    wide = spnc.compile(Sum([Product([spnc.Bernoulli(v, p[k, v]) for v in range(d)]) for k in range(2)],
                            [1e-300, 1.0 - 1e-300]))
    a = Product([spnc.Gaussian(0, 0.0, 1e-3), spnc.Indicator(1, 0)])
    b = Product([spnc.Gaussian(0, 40.0, 1.0), spnc.Indicator(1, 1)])
    extreme = spnc.compile(Sum([a, b], [1e-300, 1.0]), cardinality=[0, 3])
    cases = [(_model(seed, [2, 3, 2, 4], share=0.5)[1], None), (wide, d), (extreme, None)]
    for spn, nv in cases:
        n_vars = spn.n_vars
        if spn is extreme:
            X = np.array([[0.0, 0.0], [40.0, 1.0], [0.0, np.nan], [40.0, 2.0], [np.nan, np.nan]] * 40)
        else:
            X = spn.sample(300, seed=seed)
            X[rng.random(X.shape) < 0.3] = np.nan
        assert X.shape[1] == n_vars
        lin = _with_domain(spn, True, shares).log_likelihood(X)
        bl = spn.backward(X, leaf_responsibilities=True)
        log = _with_domain(spn, False, shares).log_likelihood(X)
        bg = spn.backward(X, leaf_responsibilities=True)
        np.testing.assert_allclose(lin, log, rtol=1e-12, atol=1e-14)  # atol: rows with p = 1
        np.testing.assert_allclose(bl["log_likelihood"], bg["log_likelihood"], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(bl["edge_counts"], bg["edge_counts"], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(bl["leaf_responsibilities"], bg["leaf_responsibilities"], rtol=1e-9, atol=1e-12)


def test_linear_sweep_keeps_values_far_below_its_zero_marker():
    """Leaf values of log p below -1e250 * log 2 (an outlier 1e125 standard deviations out)
    stay finite in the linear domain: its marker for zero (an exponent) must lie below the
    exponent of any value a double's log can hold, or a sum reads such children as zeros."""
    g = spnc.Gaussian
    spn = spnc.compile(Sum([Product([g(0, 0.0, 1.0), g(1, 0.0, 1.0)]),
                            Product([g(0, 1.0, 1.0), g(1, 1.0, 1.0)])], [0.5, 0.5]))
    X = np.array([[1e130, 0.0], [1e150, np.nan], [3e153, 1e153], [0.0, 1.0]])
    leaf = lambda m: np.where(np.isnan(X), 0.0, stats.norm(m, 1.0).logpdf(X)).sum(1)  # noqa: E731
    ref = np.logaddexp(np.log(0.5) + leaf(0.0), np.log(0.5) + leaf(1.0))
    assert np.all(np.isfinite(ref))
    for linear in (True, False):
        np.testing.assert_allclose(_with_domain(spn, linear, None).log_likelihood(X), ref, rtol=1e-12)
    E = np.array([[1e130, np.nan]])
    with pytest.raises(spnc.DataError, match="too large"):      # rounding would choose its branches
        spn.mpe(E)
    ll = np.empty(1)        # the max-product sweep itself keeps such values finite
    select(spn, E, spnc.graph.MAX, seed=0, n_threads=None, evidence=True, ll=ll, root_value=np.empty(1))
    assert np.isfinite(ll).all()


@pytest.mark.parametrize("kind", ["inline", "gaussian", "mvn"])
def test_unconditional_sampling_reads_no_filled_input(kind):
    """sample(n) reads an all-missing input through zero strides: the draws are those of
    a filled NaN matrix, on inline leaves (staged blocks) and leaf-matrix leaves alike."""
    if kind == "inline":
        spn = _model(3, [2, 3, 2, 4])[1]
    elif kind == "gaussian":
        spn = spnc.compile(Sum([spnc.Gaussian(0, -2.0, 0.5), spnc.Gaussian(0, 3.0, 1.0)], [0.25, 0.75]))
    else:
        spn = spnc.compile(spnc.MultivariateGaussian([0, 1], [1.0, -1.0], [[1.0, 0.8], [0.8, 2.0]]))
    for nt in (1, 2):
        want = select(spn, np.full((700, spn.n_vars), np.nan), MARGINAL, seed=11, n_threads=nt,
                      evidence=False)
        np.testing.assert_array_equal(spn.sample(700, seed=11, n_threads=nt), want)
