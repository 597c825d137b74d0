"""EM: online passes, validation stopping, the counts and root weights it saves, row
weights and argument checks (model builders in test_em.py)."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc.learn.em import EM
from spnc.nodes import Product, Sum

from conftest import random_spn
from test_em import data_for, discrete_model, gaussian_model

def test_online_improves_and_is_deterministic():
    X = data_for("discrete", n=1500)
    init = discrete_model(3)
    a = EM(init=init, variant="online", max_iter=3, batch_size=200, random_state=0).fit(X)
    b = EM(init=init, variant="online", max_iter=3, batch_size=200, random_state=0).fit(X)
    assert np.array_equal(a.spn_.weight, b.spn_.weight)
    assert a.history_["train"][-1] > a.history_["train"][0]
    assert len(a.history_["train"]) == 4


def test_validation_patience_returns_best_model():
    X = data_for("discrete", n=200)
    Xv = data_for("discrete", n=300, seed=5)
    em = EM(init=discrete_model(3), max_iter=40, tol=-np.inf, patience=2).fit(X, X_valid=Xv)
    hv = em.history_["valid"]
    assert em.score(Xv) == pytest.approx(hv.max())
    assert em.n_iter_ <= 40 and len(hv) == em.n_iter_ + 1      # the starting model first
    assert hv[0] == pytest.approx(discrete_model(3).log_likelihood(Xv).mean())


@pytest.mark.parametrize("valid", [False, True])
def test_saved_counts_are_those_of_the_returned_model(valid):
    X = data_for("discrete", n=200)
    Xv = data_for("discrete", n=300, seed=5) if valid else None
    for it in (1, 3, 40):
        em = EM(init=discrete_model(3), max_iter=it, tol=-np.inf, patience=2).fit(X, X_valid=Xv)
        np.testing.assert_allclose(em.spn_.stats["count"], em.spn_.backward(X)["node_counts"], rtol=1e-9)


def test_mixture_roots_get_weights():
    X = data_for("discrete")
    r1, r2 = random_spn(np.random.default_rng(8), [2, 3, 2, 4, 2]), random_spn(np.random.default_rng(9), [2, 3, 2, 4, 2])
    spn = spnc.compile([r1, r2], root_weights=[0.5, 0.5], combine="mixture")
    em = EM(init=spn, max_iter=4, tol=-np.inf, weight_floor=0.0).fit(X)
    assert not np.allclose(em.spn_.root_weights, 0.5)
    assert np.all(np.diff(em.history_["train"]) >= -1e-12)


def test_mixture_root_that_is_also_a_descendant_gets_its_own_share():
    """Roots [a, s] with s = Sum(a, b): a's node count also holds the rows s passes it, but
    its root weight is the M-step's sum over rows of w_a S_a / S only."""
    a = Product([spnc.Categorical(0, [0.2, 0.3, 0.5]), spnc.Bernoulli(1, 0.3)])
    b = Product([spnc.Categorical(0, [0.6, 0.3, 0.1]), spnc.Bernoulli(1, 0.8)])
    spn = spnc.compile([a, Sum([a, b], [0.4, 0.6])], root_weights=[0.5, 0.5], combine="mixture")
    X = spnc.compile(b).sample(2000, seed=1)
    share = np.exp(np.log(0.5) + spnc.compile(a, cardinality=[3, 2]).log_likelihood(X) - spn.log_likelihood(X))
    for variant in ("soft", "hard"):
        em = EM(init=spn, max_iter=1, tol=-np.inf, alpha=0.0, weight_floor=0.0, variant=variant).fit(X)
        if variant == "soft":
            np.testing.assert_allclose(em.spn_.root_weights, [share.mean(), 1 - share.mean()], rtol=1e-9)
        else:     # rows whose max-product tree starts at root a
            va = np.log(0.5) + spnc.compile(a, cardinality=[3, 2]).log_likelihood(X)
            vs = np.log(0.5) + spn.node_log_values(X, mode=spnc.graph.MAX)[:, spn.roots[1]]
            np.testing.assert_allclose(em.spn_.root_weights[0], np.mean(va >= vs), rtol=1e-9)


def test_bad_arguments():
    spn = discrete_model(3)
    X = data_for("discrete", n=20)
    with pytest.raises(ValueError, match="variant"):
        EM(init=spn, variant="bogus").fit(X)
    with pytest.raises(ValueError, match="freeze"):
        EM(init=spn, freeze=[10**6]).fit(X)
    with pytest.raises(spnc.DataError):
        EM(init=spn).fit(X[:, :3])
    with pytest.raises(AttributeError):
        EM().score(X)


def test_online_gaussian_improves():
    X = data_for("gaussian", n=1200)
    init = gaussian_model(7)
    em = EM(init=init, variant="online", max_iter=4, batch_size=300, random_state=0).fit(X)
    assert em.history_["train"][-1] > em.history_["train"][0]


def test_validation_stopping_keeps_the_start_when_no_pass_improves_it():
    """The starting model competes: EM on data unlike the validation rows returns the start."""
    rng = np.random.default_rng(5)
    spn = spnc.compile(random_spn(rng, [2] * 6, depth=2, share=0.0, leaf="bernoulli"))
    X = (rng.random((500, 6)) < 0.9).astype(float)
    Xv = spn.sample(300, seed=1)
    em = EM(init=spn, max_iter=10, patience=2).fit(X, X_valid=Xv)
    np.testing.assert_array_equal(em.spn_.log_likelihood(Xv), spn.log_likelihood(Xv))


def test_rows_of_weight_zero_play_no_part():
    """A row of weight 0 may have probability zero under the model (a bootstrap's
    out-of-bag row): EM fits as if it were absent, in memory and streamed, and a row of
    positive weight with probability zero is named by its row of X, also in mini-batches."""
    rng = np.random.default_rng(3)
    spn = spnc.compile(Sum([Product([spnc.Bernoulli(0, 1.0), spnc.Bernoulli(1, 0.3)]),
                            Product([spnc.Bernoulli(0, 1.0), spnc.Bernoulli(1, 0.8)])], [0.5, 0.5]))
    X = np.column_stack([np.ones(300), rng.random(300) < 0.5]).astype(float)
    X[[17, 250], 0] = 0.0                          # probability zero under the model
    w = rng.uniform(0.5, 2.0, 300)
    w[[17, 250]] = 0.0
    keep = w > 0
    want = EM(init=spn, max_iter=4).fit(X[keep], sample_weight=w[keep]).spn_
    for src in (X, [X[:100], X[100:]]):
        got = EM(init=spn, max_iter=4).fit(src, sample_weight=w).spn_
        np.testing.assert_allclose(got.weight, want.weight, rtol=1e-12)
    w[250] = 1.0
    with pytest.raises(spnc.DataError, match="row 250 has probability zero"):
        EM(init=spn, max_iter=2).fit(X, sample_weight=w)
    with pytest.raises(spnc.DataError, match="row 250 has probability zero.*alpha > 0"):
        EM(init=spn, variant="online", batch_size=32, max_iter=2, random_state=0).fit(X, sample_weight=w)


@pytest.mark.parametrize("variant", ["soft", "hard"])
def test_history_has_a_training_value_for_every_validation_value(variant):
    """Stopped by patience, the last pass's model has a validation value; its training
    value is there too, so both histories run over the same models."""
    rng = np.random.default_rng(5)
    spn = spnc.compile(random_spn(rng, [2] * 6, depth=2, share=0.0, leaf="bernoulli"))
    X = (rng.random((500, 6)) < 0.9).astype(float)
    em = EM(init=spn, max_iter=10, patience=2, variant=variant).fit(X, X_valid=spn.sample(300, seed=1))
    assert em.n_iter_ < 10 and len(em.history_["train"]) == len(em.history_["valid"]) == em.n_iter_ + 1


def _one_step_reference(root, X, w, alpha, hard):
    """One EM step of a mixture of products of (categorical, Bernoulli, Gaussian) leaves,
    by hand: responsibilities (hard: the max-product branch), weighted counts over the
    observed values of each variable, alpha on every sum edge and discrete state."""
    from scipy.stats import norm
    comps = [c.children for c in root.children]
    def logp(cat, ber, g, mode_missing):
        v = np.zeros(len(X))
        for col, lp in ((0, lambda x: np.log(cat.probs[x.astype(int)])),
                        (1, lambda x: np.log(np.where(x == 1, ber.p, 1 - ber.p))),
                        (2, lambda x: norm.logpdf(x, g.mean, g.std))):
            o = ~np.isnan(X[:, col])
            v[o] += lp(X[o, col])
            if mode_missing:     # max-product: a missing variable takes its leaf's mode
                v[~o] += (np.log(cat.probs.max()), np.log(max(ber.p, 1 - ber.p)),
                          norm.logpdf(0, 0, g.std))[col]
        return v
    L = np.column_stack([np.log(wk) + logp(*c, hard) for wk, c in zip(root.weights, comps)])
    R = np.eye(L.shape[1])[L.argmax(1)] if hard else np.exp(L - np.logaddexp.reduce(L, 1)[:, None])
    R = R * w[:, None]
    weights = (R.sum(0) + alpha) / (R.sum() + L.shape[1] * alpha)
    leaves = []
    for k in range(L.shape[1]):
        o = [~np.isnan(X[:, j]) for j in range(3)]
        c = np.bincount(X[o[0], 0].astype(int), weights=R[o[0], k], minlength=3) + alpha
        b = np.bincount(X[o[1], 1].astype(int), weights=R[o[1], k], minlength=2) + alpha
        r, x = R[o[2], k], X[o[2], 2]
        m = r @ x / r.sum()
        leaves.append((c / c.sum(), b[1] / b.sum(), m, np.sqrt(r @ (x - m) ** 2 / r.sum())))
    return weights, leaves


@pytest.mark.parametrize("variant", ["soft", "hard"])
@pytest.mark.parametrize("alpha", [0.0, 0.7])
def test_one_step_equals_the_m_step_by_hand(variant, alpha):
    """Weights with zeros, missing values in every column, mixed leaf types: one pass
    gives the hand-made M-step, and ``history_["train"][0]`` is the weighted mean of the
    objective (log-likelihood; hard EM: the max-product value)."""
    rng = np.random.default_rng(0)
    root = Sum([Product([spnc.Categorical(0, rng.dirichlet(np.ones(3))), spnc.Bernoulli(1, float(rng.uniform(.2, .8))),
                         spnc.Gaussian(2, float(rng.normal()), float(rng.uniform(.5, 2)))]) for _ in range(3)],
               rng.dirichlet(np.ones(3)))
    spn = spnc.compile(root)
    n = 40
    X = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 2, n), rng.normal(0, 1.5, n)]).astype(float)
    X[rng.random(X.shape) < 0.25] = np.nan
    w = rng.uniform(0, 3, n)
    w[:5] = 0.0
    em = EM(init=spn, max_iter=1, alpha=alpha, variant=variant, weight_floor=0.0, tol=-np.inf,
            check_leaves=False).fit(X, sample_weight=w)
    weights, leaves = _one_step_reference(root, X, w, alpha, variant == "hard")
    got = em.spn_.to_nodes()
    np.testing.assert_allclose(got.weights, weights, rtol=1e-12)
    for c, (cat, p, mean, std) in zip(got.children, leaves):
        np.testing.assert_allclose(c.children[0].probs, cat, rtol=1e-12)
        assert c.children[1].p == pytest.approx(p, rel=1e-12)
        assert (c.children[2].mean, c.children[2].std) == pytest.approx((mean, std), rel=1e-12, abs=1e-14)
    mode = spnc.graph.MAX if variant == "hard" else spnc.graph.MARGINAL
    start = w @ spn.node_log_values(X, mode=mode)[:, -1] / w.sum()
    assert em.history_["train"][0] == pytest.approx(start, rel=1e-12)
