"""EM for SPNs with arbitrary leaves (spnc.learn.em)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import spnc
from spnc.learn import em as em_mod
from spnc.learn.em import EM, constrained_weights
from spnc.nodes import Product, Sum

from conftest import random_spn, shared_data


# ---------------------------------------------------------------------- model builders
def random_structure(rng, n_vars, make_leaf, depth=2, share=0.3):
    """Random complete, decomposable DAG; ``make_leaf(scope)`` returns a leaf over a tuple of
    variables (None to split further)."""
    return spnc.compile(random_spn(rng, [0] * n_vars, depth=depth, share=share, leaf_factory=make_leaf))


def gaussian_model(seed, n_vars=4):
    rng = np.random.default_rng(seed)

    def leaf(scope):
        if len(scope) == 1:
            return spnc.Gaussian(scope[0], float(rng.normal()), float(rng.uniform(0.5, 2)))
        return None
    return random_structure(rng, n_vars, leaf)


def mvn_model(seed, n_vars=4):
    rng = np.random.default_rng(seed)

    def leaf(scope):
        if len(scope) > 2:
            return None
        A = rng.normal(size=(len(scope), len(scope)))
        return spnc.MultivariateGaussian(scope, rng.normal(size=len(scope)), A @ A.T + np.eye(len(scope)))
    return random_structure(rng, n_vars, leaf)


def cltree_model(seed, n_vars=6):
    rng = np.random.default_rng(seed)

    def leaf(scope):
        if len(scope) < 2 or len(scope) > 3:
            return None if len(scope) > 3 else spnc.Bernoulli(scope[0], float(rng.uniform(.1, .9)))
        parents = [-1] + [int(rng.integers(0, j)) for j in range(1, len(scope))]
        cpts = [rng.dirichlet(np.ones(2), size=1 if p < 0 else 2) for p in parents]
        return spnc.ChowLiuLeaf(list(scope), parents, cpts)
    return random_structure(rng, n_vars, leaf)


def discrete_model(seed):
    return spnc.compile(random_spn(np.random.default_rng(seed), [2, 3, 2, 4, 2], depth=3, share=0.3))


MODELS = {"discrete": discrete_model, "gaussian": gaussian_model, "mvgaussian": mvn_model, "cltree": cltree_model}


def data_for(kind, n=600, seed=0):
    truth = MODELS[kind](seed + 100)
    return truth.sample(n, seed=seed)


# ---------------------------------------------------------------------- monotonicity
@pytest.mark.parametrize("variant", ["soft", "hard"])
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_objective_never_decreases(kind, variant):
    X = data_for(kind)
    init = MODELS[kind](7)
    em = EM(init=init, max_iter=8, tol=-np.inf, variant=variant, weight_floor=0.0).fit(X)
    h = em.history_["train"]
    assert len(h) == 9
    assert np.all(np.diff(h) >= -1e-9 * np.abs(h[:-1])), h
    assert h[-1] > h[0]
    if variant == "soft":  # the recorded objective is the log-likelihood of each iterate
        assert h[-1] == pytest.approx(em.spn_.log_likelihood(X).mean(), rel=1e-10)
    else:  # hard EM is monotone in the max-product (Viterbi) objective
        viterbi = em.spn_.node_log_values(X, mode=1)[:, em.spn_.root]
        assert h[-1] == pytest.approx(viterbi.mean(), rel=1e-10)


def test_input_model_untouched_and_recorded():
    X = data_for("discrete")
    init = discrete_model(3)
    before = init.weight.copy(), {k: t.to_arrays() for k, t in init.leaf_tables.items()}
    em = EM(init=init, max_iter=3, alpha=0.5).fit(X)
    assert np.array_equal(init.weight, before[0])
    for k, t in init.leaf_tables.items():
        for a, v in t.to_arrays().items():
            assert np.array_equal(v, before[1][k][a])
    spn = em.spn_
    assert spn is not init and spn.stats["count"].shape == (spn.n_nodes,)
    assert spn.stats["count"][spn.root] == pytest.approx(len(X))
    assert spn.learner["name"] == "em" and spn.learner["params"]["alpha"] == 0.5
    assert np.array_equal(spn.learner["arrays"]["history_train"], em.history_["train"])
    assert em.score(X) == pytest.approx(spn.log_likelihood(X).mean())
    assert em.sample(5, seed=1).shape == (5, 5)


def test_save_load_round_trip(tmp_path):
    X = data_for("discrete")
    spn = EM(init=discrete_model(3), max_iter=2, tol=-np.inf).fit(X).spn_  # -inf is stored as a string
    spnc.save(spn, tmp_path / "m.h5")
    back = spnc.load(tmp_path / "m.h5")
    assert np.array_equal(back.stats["count"], spn.stats["count"])
    assert back.learner["params"]["variant"] == "soft"
    assert np.array_equal(back.log_likelihood(X), spn.log_likelihood(X))


# ---------------------------------------------------------------------- Gaussian mixtures
def test_matches_sklearn_gaussian_mixture():
    mixture = pytest.importorskip("sklearn.mixture")
    rng = np.random.default_rng(0)
    d, K, it = 3, 3, 12
    X = np.concatenate([rng.normal(size=(200, d)) @ rng.normal(size=(d, d)) + 4 * rng.normal(size=d)
                        for _ in range(K)])
    means = X[rng.choice(len(X), K, replace=False)]
    covs = [np.cov(X.T)] * K
    w0 = np.array([0.2, 0.3, 0.5])
    spn = spnc.compile(Sum([spnc.MultivariateGaussian(range(d), m, c) for m, c in zip(means, covs)], w0))
    em = EM(init=spn, max_iter=it, tol=-np.inf, min_std=1e-3).fit(X)  # ridge 1e-6 = sklearn's reg_covar
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gm = mixture.GaussianMixture(K, covariance_type="full", max_iter=it, tol=0, reg_covar=1e-6,
                                     weights_init=w0, means_init=means,
                                     precisions_init=np.array([np.linalg.inv(c) for c in covs])).fit(X)
    t = em.spn_.leaf_tables["mvgaussian"]
    np.testing.assert_allclose(t.params["mean"].reshape(K, d), gm.means_, atol=1e-6)
    np.testing.assert_allclose(t.params["cov"].reshape(K, d, d), gm.covariances_, atol=1e-6)
    np.testing.assert_allclose(em.spn_.weight, gm.weights_, atol=1e-6)
    assert em.history_["train"][-1] == pytest.approx(gm.score(X), abs=1e-6)


def test_diagonal_mixture_of_products_equals_closed_form():
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(-2, 1, size=(150, 2)), rng.normal(3, 0.5, size=(150, 2))])
    comps = [Product([spnc.Gaussian(0, m, 1.0), spnc.Gaussian(1, m, 1.0)]) for m in (-1.0, 1.0)]
    spn = spnc.compile(Sum(comps, [0.5, 0.5]))
    em = EM(init=spn, max_iter=1, tol=-np.inf).fit(X)
    # one EM step of a diagonal Gaussian mixture, by hand
    from scipy.stats import norm
    lp = np.stack([norm.logpdf(X, m, 1.0).sum(1) + np.log(0.5) for m in (-1.0, 1.0)], 1)
    r = np.exp(lp - np.logaddexp.reduce(lp, 1)[:, None])
    mu = r.T @ X / r.sum(0)[:, None]
    var = np.stack([(r[:, k:k + 1] * (X - mu[k]) ** 2).sum(0) / r[:, k].sum() for k in range(2)])
    g = em.spn_.leaf_tables["gaussian"]
    order = np.argsort(g.node)  # leaves in node order: comp 0 (vars 0, 1), comp 1 (vars 0, 1)
    np.testing.assert_allclose(g.params["mean"][order], mu.ravel(), rtol=1e-10)
    np.testing.assert_allclose(g.params["std"][order], np.sqrt(var).ravel(), rtol=1e-10)
    np.testing.assert_allclose(np.sort(em.spn_.weight[em.spn_.kind[np.repeat(np.arange(em.spn_.n_nodes),
                               np.diff(em.spn_.child_ptr))] == 0]), np.sort(r.mean(0)), rtol=1e-10)


# ---------------------------------------------------------------------- sharing, floor, freeze, Eq. 12
def test_shared_nodes_pool_their_statistics():
    rng = np.random.default_rng(2)
    S = Sum([spnc.Bernoulli(1, 0.2), spnc.Bernoulli(1, 0.7)], [0.5, 0.5])  # on every induced tree
    shared = spnc.Bernoulli(2, 0.5)
    root = Sum([Product([spnc.Bernoulli(0, 0.3), S, shared]), Product([spnc.Bernoulli(0, 0.8), S, shared])],
               [0.4, 0.6])
    spn = spnc.compile(root)
    assert spn.n_nodes == 9  # S, its leaves and `shared` appear once
    X = (rng.random((400, 3)) < [0.5, 0.4, 0.65]).astype(float)
    out = EM(init=spn, max_iter=1, tol=-np.inf, weight_floor=0.0).fit(X).spn_
    b = out.leaf_tables["bernoulli"]
    i_shared = [i for i in range(len(b)) if b.var[i] == 2]
    assert len(i_shared) == 1 and b.params["p"][i_shared[0]] == pytest.approx(X[:, 2].mean())
    # S's weights: one EM step of a two-component mixture on x1 over all rows
    lik = np.stack([np.where(X[:, 1] == 1, p, 1 - p) * 0.5 for p in (0.2, 0.7)], 1)
    r = lik / lik.sum(1, keepdims=True)
    s_node = int(np.flatnonzero((out.kind == 0) & (np.arange(out.n_nodes) != out.root))[0])
    np.testing.assert_allclose(out.weight[out.child_ptr[s_node]:out.child_ptr[s_node + 1]], r.mean(0), rtol=1e-10)


def test_constrained_weights_floor_is_the_constrained_maximum():
    c = np.array([10.0, 0.0, 1e-9, 5.0, 3.0, 0.0])
    seg = np.array([0, 0, 0, 1, 1, 2])
    w = constrained_weights(c, seg, 3, 1e-3)
    assert np.all(w[:5] >= 1e-3) and np.isnan(w[5])
    np.testing.assert_allclose(np.bincount(seg[:5], w[:5]), 1.0, atol=1e-12)
    np.testing.assert_allclose(w[:3], [1 - 2e-3, 1e-3, 1e-3])
    np.testing.assert_allclose(w[3:5], [5 / 8, 3 / 8])
    # no feasible point does better on the objective
    rng = np.random.default_rng(0)
    for _ in range(200):
        v = rng.dirichlet(np.ones(3)) * (1 - 3e-3) + 1e-3
        assert np.dot(c[:3], np.log(v)) <= np.dot(c[:3], np.log(w[:3])) + 1e-12


def test_weights_stay_normalised_and_positive_with_floor():
    X = data_for("discrete")
    out = EM(init=discrete_model(3), max_iter=5, weight_floor=1e-4, alpha=0.0).fit(X).spn_
    sums = np.flatnonzero(out.kind == 0)
    for n in sums:
        w = out.weight[out.child_ptr[n]:out.child_ptr[n + 1]]
        assert w.min() >= 1e-4 * (1 - 1e-9) and abs(w.sum() - 1) <= 1e-12


def test_freeze_keeps_parameters():
    X = data_for("discrete")
    init = discrete_model(3)
    sums = np.flatnonzero(init.kind == 0)
    leaves = init.leaf_tables["categorical"].node[:3]
    out = EM(init=init, max_iter=3, freeze=np.concatenate([sums[:2], leaves])).fit(X).spn_
    for n in sums[:2]:
        a, b = init.child_ptr[n], init.child_ptr[n + 1]
        assert np.array_equal(out.weight[a:b], init.weight[a:b])
    a, b = out.child_ptr[sums[2]], out.child_ptr[sums[2] + 1]
    assert not np.array_equal(out.weight[a:b], init.weight[a:b])
    t0, t1 = init.leaf_tables["categorical"], out.leaf_tables["categorical"]
    for i in range(3):
        assert np.array_equal(t0.to_node(i).probs, t1.to_node(i).probs)
    assert not np.array_equal(t0.params["prob"], t1.params["prob"])


def test_eq12_rejects_updates_that_lower_the_leaf_bound(monkeypatch):
    X = data_for("discrete")
    init = discrete_model(3)
    from spnc.leaves.univariate import _BernoulliStats
    good = _BernoulliStats.fit

    def bad_fit(self, s):
        p = good(self, s)["p"]
        p[::2] = 1.0 - p[::2]  # every other leaf moves away from its weighted MLE
        return {"p": p}

    monkeypatch.setattr(_BernoulliStats, "fit", bad_fit)
    em = EM(init=init, max_iter=1, tol=-np.inf).fit(X)
    p0, p1 = init.leaf_tables["bernoulli"].params["p"], em.spn_.leaf_tables["bernoulli"].params["p"]
    assert em.rejected_ >= 1
    assert em.rejected_ == np.sum(p0 == p1)  # a rejected leaf keeps its old value exactly
    ok = EM(init=init, max_iter=1, tol=-np.inf, check_leaves=False).fit(X)
    assert not np.any(ok.spn_.leaf_tables["bernoulli"].params["p"] == p0)


def test_cltree_structure_is_refit():
    X = data_for("cltree", n=800)
    init = cltree_model(11)
    out = EM(init=init, max_iter=3).fit(X).spn_
    t0, t1 = init.leaf_tables["cltree"], out.leaf_tables["cltree"]
    assert not np.array_equal(t0.params["cpt"], t1.params["cpt"])
    assert out.log_likelihood(X).mean() > init.log_likelihood(X).mean()


# ---------------------------------------------------------------------- shared data
def test_em_improves_test_ll_on_binary_benchmark():
    base = shared_data("binary")
    name = "nltcs"
    if not (base / f"{name}.train.data").exists():
        pytest.skip(f"{name} not in shared data")
    tr = np.loadtxt(base / f"{name}.train.data", delimiter=",")[:4000]
    te = np.loadtxt(base / f"{name}.test.data", delimiter=",")
    va = np.loadtxt(base / f"{name}.valid.data", delimiter=",")
    init = spnc.compile(random_spn(np.random.default_rng(0), [2] * tr.shape[1], depth=3, share=0.2,
                                   leaf="bernoulli"))
    em = EM(init=init, max_iter=15, alpha=0.1, patience=3).fit(tr, X_valid=va)
    before, after = init.log_likelihood(te).mean(), em.score(te)
    assert after > before + 0.5, (before, after)


def _hard_pass_kernel(spn, X, w):
    acc = {"edge": np.zeros(spn.n_edges), "node": np.zeros(spn.n_nodes)}
    parts = list(em_mod._chunk_passes(spn, X, w, True, 1, acc))
    val = np.concatenate([p[4] for p in parts])
    resp = np.concatenate([p[2][: spn.n_leaves, : len(p[4])].T for p in parts])
    return val, acc["edge"], acc["node"], resp


def _hard_pass_numpy(spn, X, w):
    """Reference hard E-step: every row follows its max-product induced tree (first maximum
    at ties), in plain numpy over node values."""
    V = spn.node_log_values(X, mode=1).T  # (N, m)
    N, m = V.shape
    ptr, child, logw, kind = spn.child_ptr, spn.child, spn.logw, spn.kind
    active = np.zeros((N, m), dtype=bool)
    if spn.combine == "mixture":
        rv = V[spn.roots] + spn._root_logw()[:, None]
        pick = np.argmax(rv, axis=0)
        val = rv[pick, np.arange(m)]
        for i, r in enumerate(spn.roots):
            active[r] |= pick == i
    else:
        val = V[spn.root]
        active[spn.root] = True
    edge = np.zeros(spn.n_edges)
    for n in range(N - 1, -1, -1):
        if kind[n] >= 2 or not active[n].any():
            continue
        a, b = ptr[n], ptr[n + 1]
        ch = child[a:b]
        if kind[n] == 1:
            active[ch] |= active[n]
            continue
        sel = np.argmax(V[ch] + logw[a:b, None], axis=0)
        for j, c in enumerate(ch):
            on = active[n] & (sel == j)
            active[c] |= on
            edge[a + j] = float(np.dot(on, w))
    node = active.astype(np.float64) @ w
    leaf_nodes = np.empty(spn.n_leaves, dtype=np.int64)
    for t in spn.leaf_tables.values():
        leaf_nodes[t.slot] = t.node
    return val, edge, node, active[leaf_nodes].T.astype(np.float64)


@pytest.mark.parametrize("kind", ["discrete", "cltree", "gaussian"])
def test_hard_kernel_matches_numpy_reference(kind):
    spn = MODELS[kind](4)
    X = data_for(kind, n=300)
    X[::7, 1] = np.nan  # max-product leaves with a missing value
    w = np.random.default_rng(0).random(len(X))
    got = _hard_pass_kernel(spn, X, w)
    ref = _hard_pass_numpy(spn, X, w)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12)


def test_eq12_on_tables_refit_through_weighted_fit(monkeypatch):
    from spnc.leaves.cltree import CLTreeLeafType
    orig = CLTreeLeafType.weighted_fit

    def oversmoothed(self, X, resp, **kw):  # near-uniform CPTs: a worse weighted fit
        return orig(self, X, resp, **{**kw, "alpha": 1e6})

    monkeypatch.setattr(CLTreeLeafType, "weighted_fit", oversmoothed)
    init = cltree_model(11)
    X = data_for("cltree", n=800)
    em = EM(init=init, max_iter=1, tol=-np.inf).fit(X)
    t0, t1 = init.leaf_tables["cltree"], em.spn_.leaf_tables["cltree"]
    same = [all(np.array_equal(a, b) for a, b in zip(t0.to_node(i).cpts, t1.to_node(i).cpts))
            for i in range(len(t0))]
    assert em.rejected_ >= 1 and em.rejected_ == sum(same)


@pytest.mark.parametrize("variant", ["soft", "hard"])
def test_eq12_keeps_the_smoothing_of_tables_refit_through_weighted_fit(variant):
    """With alpha > 0 a Chow-Liu leaf's refit is its MAP fit, whose plain likelihood is
    below the maximum-likelihood start's: Eq. 12 compares them with the prior included
    (as for the leaves with streaming statistics), so the smoothed tables are kept."""
    from spnc.chowliu import fit_chow_liu, forest_to_tree
    from spnc.learn import ChowLiuTree
    X = data_for("cltree", n=800)[:, :3]
    start = ChowLiuTree(alpha=0.0).fit(X).spn_
    assert np.all(start.leaf_tables["cltree"].params["cpt"] > 0)     # no -inf in the old score
    em = EM(init=start, max_iter=1, tol=-np.inf, alpha=1.0, variant=variant).fit(X)
    assert em.rejected_ == 0
    fit = fit_chow_liu(X, start.cardinality, alpha=1.0)
    want = spnc.compile(spnc.ChowLiuLeaf([0, 1, 2], *forest_to_tree(fit.parents, fit.cpts)),
                        cardinality=start.cardinality)
    allx = np.array(np.meshgrid(*[range(k) for k in start.cardinality], indexing="ij"), dtype=float).reshape(3, -1).T
    np.testing.assert_allclose(em.spn_.log_likelihood(allx), want.log_likelihood(allx), rtol=1e-12)


@pytest.mark.parametrize("variant", ["soft", "hard", "online"])
def test_a_start_below_the_std_floor_is_lifted_to_it(variant):
    """A Gaussian leaf whose starting std is below ``min_std`` (a model from a file or
    another learner) is outside the floored M-step's range: Eq. 12 must not keep it there
    because the spike fits its rows better."""
    spn = spnc.compile(Sum([spnc.Gaussian(0, 0.0, 1e-4), spnc.Gaussian(0, 5.0, 1.0)], [0.5, 0.5]))
    X = np.r_[np.zeros(20), np.random.default_rng(0).normal(5, 1, 20)][:, None]
    em = EM(init=spn, max_iter=2, min_std=1e-3, variant=variant, random_state=0).fit(X)
    assert em.rejected_ == 0
    assert np.all(em.spn_.leaf_tables["gaussian"].params["std"] >= 1e-3)


@pytest.mark.parametrize("kind", ["gaussian", "mvgaussian"])
def test_recentred_moments_equal_moments_at_the_new_centre(kind):
    spn = MODELS[kind](4)
    table = spn.leaf_tables[kind]
    X = data_for(kind, n=200)
    XT = np.ascontiguousarray(X.T)
    R = np.random.default_rng(0).random((spn.n_leaves, len(X)))
    rw = np.ones(len(X))
    h = em_mod._stats_for(table, 0.0, 1e-3)
    a = h.zero()
    h.accumulate(a, XT, R, rw)
    new_c = a["center"] + np.random.default_rng(1).normal(size=a["center"].shape)
    h.recentre(a, new_c)
    b = h.zero()
    b["center"] = new_c.copy()
    h.accumulate(b, XT, R, rw)
    for key in ("w", "sd", "sdd"):
        np.testing.assert_allclose(a[key], b[key], rtol=1e-9, atol=1e-9)
