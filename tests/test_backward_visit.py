"""The pushing backward sweep visits only the nodes with work to do (spnc._visit): its
results must keep every bit of a sweep over all nodes, on trees and DAGs, single roots and
mixtures, inline and leaf-matrix leaves, with edge shares and with node values."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import _visit
from spnc.learn import _em_pass
from spnc.learn.em import EM
from spnc.nodes import Product, Sum

from conftest import random_spn


def _every_node(graph, var, want_leaf, want_all, want_states):
    return np.arange(graph.kind_.shape[0] - 1, -1, -1, dtype=np.int32)


def _no_runs(graph, states):
    # every node visited, every leaf counting its own states (no product counts for them)
    visit = _every_node(graph, None, False, False, True)
    empty = np.zeros(0, dtype=np.int32)
    return visit, np.zeros(len(visit) + 1, dtype=np.int64), empty, empty.astype(np.int64), empty


def _models(seed):
    rng = np.random.default_rng(seed)
    card = [2, 3, 2, 4, 2, 2]
    tree = spnc.compile(random_spn(rng, card, share=0.0), cardinality=card)
    dag = spnc.compile(random_spn(rng, card, share=0.6), cardinality=card)
    # Gaussian leaves (leaf matrix) beside Bernoulli ones, a leaf under a sum, two roots
    a = Product([spnc.Gaussian(0, 0.0, 1.0), Sum([spnc.Bernoulli(1, 0.3), spnc.Bernoulli(1, 0.8)], [0.4, 0.6])])
    b = Product([spnc.Gaussian(0, 1.0, 2.0), spnc.Bernoulli(1, 0.5)])
    mix = spnc.compile([Sum([a, b], [0.3, 0.7]), b], cardinality=[0, 2], combine="mixture", root_weights=[0.6, 0.4])
    return [tree, dag, mix]


def _data(spn, rng, n=300):
    if spn.combine == "single":
        X = spn.sample(n, seed=int(rng.integers(1 << 30)))
    else:
        X = np.column_stack([rng.normal(0.5, 1.5, n), rng.integers(0, 2, n)]).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    return X


def _backward(spn, X, shares, gather):
    spn.__dict__.pop("_compiled", None)
    g = spnc._sweep.graph_of(spn)
    if shares is not None:
        g.shares = shares
    g.gather = gather
    return spn.backward(X, node_posteriors=False, leaf_responsibilities=True), \
        spn.backward(X, node_posteriors=True)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("shares", [None, True, False])
def test_visited_nodes_give_the_bits_of_a_sweep_over_all(seed, shares, monkeypatch):
    rng = np.random.default_rng(seed)
    for spn in _models(seed):
        X = _data(spn, rng)
        got = _backward(spn, X, shares, False)
        with monkeypatch.context() as m:
            m.setattr(_visit, "backward_visit", _every_node)
            want = _backward(spn, X, shares, False)
        for g, w in zip(got, want):
            assert g.keys() == w.keys()
            for k in g:
                np.testing.assert_array_equal(g[k], w[k], err_msg=k)


@pytest.mark.parametrize("seed", range(2))
def test_em_state_counts_keep_their_bits(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    spn = _models(seed)[0]
    X = _data(spn, rng, 500)
    got = EM(init=spn, max_iter=2, tol=0.0).fit(X).spn_
    with monkeypatch.context() as m:      # products count their leaves' states: as the leaves do
        m.setattr(_visit, "state_runs", _no_runs)
        want = EM(init=spn, max_iter=2, tol=0.0).fit(X).spn_
    np.testing.assert_array_equal(got.weight, want.weight)
    for name, table in got.leaf_tables.items():
        for a, b in zip(table.content_key(), want.leaf_tables[name].content_key()):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_products_count_the_states_of_the_leaves_in_their_slot():
    leaves = [[spnc.Bernoulli(v, 0.2 + 0.1 * k) for v in range(4)] for k in range(3)]
    spn = spnc.compile(Sum([Product(ls[:3] + [Sum([ls[3], spnc.Bernoulli(3, 0.5)], [0.5, 0.5])]) for ls in leaves],
                           [0.2, 0.3, 0.5]))
    g = spnc._sweep.graph_of(spn)
    states = spnc._sweep.leaf_states(spn, 0)[0]
    visit, ptr, var, off, nst = _visit.state_runs(g, states)
    kind = np.asarray(spn.kind)
    # the root, the products (3 leaves each), the sums under them and their 2 leaves each
    assert sorted(kind[visit].tolist()) == [0] * 4 + [1] * 3 + [2] * 6
    assert np.diff(ptr).tolist() == [3 if k == 1 else 0 for k in kind[visit]]
    assert var.tolist() == [2, 1, 0] * 3 and nst.tolist() == [2] * 9
    assert _visit.state_runs(g, states)[0] is visit      # kept on the graph


def test_a_tree_visits_its_sums_only():
    # a sum of products of Bernoulli leaves: the products pass nothing to their leaves
    leaves = [[spnc.Bernoulli(v, 0.2 + 0.1 * k) for v in range(4)] for k in range(3)]
    spn = spnc.compile(Sum([Product(ls) for ls in leaves], [0.2, 0.3, 0.5]))
    g = spnc._sweep.graph_of(spn)
    var = np.full(spn.n_nodes, -1, dtype=np.int32)
    root = int(spn.roots[0])
    assert _visit.backward_visit(g, var, False, False, False).tolist() == [root]
    assert len(_visit.backward_visit(g, var, True, False, False)) == 1 + 12
    assert len(_visit.backward_visit(g, var, False, True, False)) == spn.n_nodes
    var[np.asarray(spn.kind) >= 2] = 0
    assert len(_visit.backward_visit(g, var, False, False, True)) == 1 + 12


def test_single_root_counts_every_row_of_positive_probability_once():
    # the single-root path takes each root log value as the row's log-likelihood and
    # starts its posterior at 1; a row of probability 0 adds nothing
    spn = spnc.compile(Sum([Product([spnc.Bernoulli(0, 1.0), spnc.Bernoulli(1, 0.3)]),
                            Product([spnc.Bernoulli(0, 1.0), spnc.Bernoulli(1, 0.6)])], [0.5, 0.5]))
    X = np.array([[1, 0], [0, 1], [1, 1], [np.nan, 1], [0, np.nan]] * 30, dtype=float)
    out = spn.backward(X, node_posteriors=True)
    ll = out["log_likelihood"]
    assert np.array_equal(np.isinf(ll), (X[:, 0] == 0))
    np.testing.assert_array_equal(ll[1::5], -np.inf)
    np.testing.assert_allclose(ll[0], np.log(0.5 * 0.7 + 0.5 * 0.4), rtol=1e-15)
    root = int(spn.roots[0])
    assert out["node_counts"][root] == np.isfinite(ll).sum()
    np.testing.assert_array_equal(out["node_posteriors"][:, root], np.isfinite(ll).astype(float))


def _reference_state_counts(spn, X, w):
    """Each inline discrete leaf's weighted posterior per observed state, from the node
    posteriors of a backward pass, in the layout the E-step adds (spnc.learn._em_pass)."""
    post = spn.backward(X, sample_weight=w, node_posteriors=True)["node_posteriors"]
    out = {}
    for name, table in spn.leaf_tables.items():
        if name == "bernoulli":
            ptr = np.arange(len(table) + 1) * 2
        elif name == "categorical":
            ptr = np.asarray(table.params["prob_ptr"])
        else:
            continue
        c = np.zeros(ptr[-1])
        for i, (n, v) in enumerate(zip(table.node, table.var)):
            for s in range(ptr[i + 1] - ptr[i]):
                c[ptr[i] + s] = np.sum(post[:, n] * w * (X[:, v] == s))
        out[name] = c
    return out


@pytest.mark.parametrize("missing", [0.0, 0.002, 0.2])
@pytest.mark.parametrize("need_R", [False, True])
def test_em_state_counts_equal_the_posteriors_sums(missing, need_R):
    # binary leaves of a run under one product count without masks where a 64-row block
    # has no missing value and with them where it has; categorical leaves always with masks;
    # with responsibilities asked for too (need_R), each leaf counts on its own
    rng = np.random.default_rng(7)
    card = [2, 3, 2, 4, 2, 2, 2, 2]
    spn = spnc.compile(random_spn(rng, card, share=0.0), cardinality=card)
    X = spn.sample(700, seed=3)
    X[rng.random(X.shape) < missing] = np.nan
    w = rng.uniform(0.5, 2.0, len(X))
    acc = {"edge": np.zeros(spn.n_edges), "node": np.zeros(spn.n_nodes)}
    for _ in _em_pass._chunk_passes(spn, X, w, False, 1, acc, need_R=need_R, count_states=True):
        pass
    want = _reference_state_counts(spn, X, w)
    assert want and set(want) <= set(acc["spans"])
    for name, c in want.items():
        a, b = acc["spans"][name]
        np.testing.assert_allclose(acc["states"][a:b], c, rtol=1e-12, atol=1e-12, err_msg=name)
