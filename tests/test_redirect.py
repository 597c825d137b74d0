"""Redirecting nodes by arrays (spnc.learn._redirect.redirect) gives rebuild's model."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc.learn._graphedit import hash_cons, rebuild
from spnc.learn._redirect import _normalise, redirect
from spnc.learn._similarity import _scope_groups
from spnc.learn.routing import observed_sums
from spnc.leaves.univariate import Bernoulli, Categorical, Indicator
from spnc.nodes import Product, Sum

from conftest import learned_trees, random_spn


@pytest.fixture(scope="module")
def models():
    rng = np.random.default_rng(0)
    gen = spnc.compile(random_spn(rng, [2] * 7, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(600, seed=0)
    return X, learned_trees(X)


def _same(got, want, X):
    (g, gk), (w, wk) = got, want
    for a in ("kind", "child_ptr", "child", "weight", "roots"):
        assert np.array_equal(getattr(g, a), getattr(w, a)), a     # weights to the bit
    assert list(g.leaf_tables) == list(w.leaf_tables)
    for name, t in w.leaf_tables.items():
        u = g.leaf_tables[name]
        assert np.array_equal(u.node, t.node) and sorted(u.params) == sorted(t.params), name
        for p in t.params:
            assert u.params[p].dtype == t.params[p].dtype and np.array_equal(u.params[p], t.params[p]), (name, p)
        assert all(np.array_equal(a, b) for a, b in zip(u.scopes, t.scopes))
    assert gk == wk
    np.testing.assert_array_equal(g.log_likelihood(X[:64]), w.log_likelihood(X[:64]))


def _random_rep(spn, rng, frac):
    """Redirect a random part of every group of nodes with equal scope and height (the
    merge's candidate groups) to one random member: a valid redirection."""
    members, gptr = _scope_groups(spn, np.zeros(spn.n_nodes, dtype=bool))
    rep = np.arange(spn.n_nodes, dtype=np.int64)
    for g in range(len(gptr) - 1):
        m = members[gptr[g]:gptr[g + 1]]
        pick = m[rng.random(len(m)) < frac]
        if len(pick) > 1:
            rep[pick] = rng.choice(pick)
    return rep


def _jitter(spn, rng):
    """The model with weights off by up to 1e-3, normalised once: normalising them again
    changes some bits, so the test sees how often the weights are normalised."""
    w = spn.weight.copy()
    sums = np.flatnonzero(spn.kind == 0)
    for n in sums.tolist():
        a, b = spn.child_ptr[n], spn.child_ptr[n + 1]
        w[a:b] *= 1 + 1e-3 * rng.random(b - a)
        w[a:b] = w[a:b] / w[a:b].sum()
    return spnc.SPN.from_arrays(spn.kind, spn.child_ptr, spn.child, w, spn.leaf_tables, spn.cardinality,
                                var_type=spn.var_type, roots=spn.roots)


@pytest.mark.parametrize("split", ["observed", "latent"])
@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
def test_redirect_equals_rebuild(models, split, leaves):
    """Identical merging and random merges of candidate groups (Fig. 3 (a) and (b) both
    occur): the same arrays, numbering, weights, leaf tables, kept-node map and new nodes."""
    X, out = models
    spn = _jitter(out[split, leaves], np.random.default_rng(2))
    obs = observed_sums(spn)
    rep = hash_cons(spn)
    _same(redirect(spn, rep, obs_var=obs), rebuild(spn, rep, obs_var=obs), X)
    rng = np.random.default_rng(1)
    fig3a = 0
    for trial in range(12):
        rep = _random_rep(spn, rng, frac=(0.2, 0.5, 1.0)[trial % 3])
        c1, c2 = [], []
        got = redirect(spn, rep, obs_var=obs, created=c1)
        want = rebuild(spn, rep, obs_var=obs, created=c2)
        _same(got, want, X)
        assert c1 == c2
        fig3a += len(c1)
    if split == "observed":
        assert fig3a > 0            # the test reached Fig. 3(a)


def test_redirect_latent_mixture_equals_rebuild(models):
    """Latent models take the compiled walks (:mod:`spnc.learn._redirect_graph`): the same
    model as rebuild for a mixture of roots too (each root redirected, shared nodes kept)."""
    from spnc.learn.merge import as_mixture
    X, out = models
    rng = np.random.default_rng(3)
    a, b = (_jitter(out["latent", k], rng) for k in ("univariate", "chowliu"))
    mix = as_mixture(spnc.compile(Sum([a.to_nodes(), b.to_nodes(), a.to_nodes()], [0.2, 0.5, 0.3])))
    assert mix.combine == "mixture" and not (observed_sums(mix) >= 0).any()
    _same(redirect(mix, hash_cons(mix)), rebuild(mix, hash_cons(mix)), X)
    for frac in (0.2, 0.5, 1.0):
        rep = _random_rep(mix, rng, frac)
        _same(redirect(mix, rep, obs_var=observed_sums(mix)), rebuild(mix, rep), X)


def test_redirect_fig3_by_hand():
    """An observed sum whose two children share their rest becomes P(V) x rest (Fig. 3a);
    a latent sum over one node is that node (Fig. 3b); a shared node stays shared."""
    a, b = Bernoulli(1, 0.3), Bernoulli(1, 0.3)
    root = Sum([Product([Indicator(0, 0), a]), Product([Indicator(0, 1), b])], [0.25, 0.75])
    spn = spnc.compile(root)
    rep = hash_cons(spn)
    obs = observed_sums(spn)
    made = []
    new, keep = redirect(spn, rep, obs_var=obs, created=made)
    assert new.n_nodes == 3 and new.kind[new.roots[0]] == 1 and made == [int(new.roots[0])]
    X = np.array([[0, 0], [1, 1], [0, 1]], dtype=float)
    np.testing.assert_allclose(new.log_likelihood(X), spn.log_likelihood(X))
    _same((new, keep), rebuild(spn, rep, obs_var=obs), X)
    lat = spnc.compile(Sum([Product([Bernoulli(0, 0.2), Bernoulli(1, 0.6)]),
                            Product([Bernoulli(0, 0.2), Bernoulli(1, 0.6)])], [0.4, 0.6]))
    rep = hash_cons(lat)
    new, _ = redirect(lat, rep)
    assert new.n_nodes == 3
    _same((new, _), rebuild(lat, rep), X)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 40, 200])
def test_normalise_is_numpys(n):
    """Per-segment normalisation equals ``w / w.sum()`` of each segment to the bit."""
    rng = np.random.default_rng(n)
    deg = rng.integers(1, n + 1, size=30)
    ptr = np.concatenate([[0], np.cumsum(deg)])
    w = rng.random(ptr[-1]) * rng.choice([1e-3, 1.0, 1e5], size=ptr[-1])
    want = np.concatenate([w[a:b] / w[a:b].sum() for a, b in zip(ptr[:-1], ptr[1:])])
    assert np.array_equal(_normalise(w, ptr), want)



@pytest.mark.parametrize("card", [2, 3])
def test_fig3a_adds_the_weights_of_children_with_one_value(card):
    """A child of an observed sum redirected to a node [V=v] x R next to another child
    [V=v] x R (same value, same rest): Fig. 3(a) adds their weights for state v (it kept
    only the last one's, so P(V) put mass on a state no child has or lost it)."""
    def rest(eps=0.0):
        return Bernoulli(1, 0.3 + eps) if card == 2 else Categorical(1, [0.2, 0.3 + eps, 0.5 - eps])
    one = Indicator(0, 1)
    keep, gone, twin = Product([one, rest()]), Product([Indicator(0, 0), rest()]), Product([one, rest(1e-7)])
    spn = spnc.compile(Sum([Sum([keep, gone], [0.25, 0.75]), twin], [0.5, 0.5]), cardinality=[card, card])
    obs_sum, twin_id = spn.children(spn.roots[0]).tolist()
    keep_id, gone_id = spn.children(obs_sum).tolist()
    rest_of = {n: next(c for c in spn.children(n).tolist() if spn.node_scope(c).tolist() == [1])
               for n in (keep_id, twin_id)}
    rep = np.arange(spn.n_nodes)
    rep[gone_id] = twin_id                       # twin = [V=1] x rest, as keep once
    rep[rest_of[twin_id]] = rest_of[keep_id]     # their rests are redirected to one node
    obs = observed_sums(spn)
    assert obs[obs_sum] == 0
    X = np.array([[a, b] for a in range(card) for b in range(card)], dtype=float)
    want = spnc.compile(Product([Indicator(0, 1), rest()]), cardinality=[card, card]).log_likelihood(X)
    for f in (redirect, rebuild):
        new, _ = f(spn, rep, obs_var=obs)
        np.testing.assert_allclose(new.log_likelihood(X), want)
