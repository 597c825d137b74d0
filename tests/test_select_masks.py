"""MPE and hard routing on sums of every width against a plain numpy max-product
selection. The forward keeps each sum edge's rows that beat the edges before it as one
word; the top-down pass reads a row's arg-max edge as the last edge holding it. Both the
AVX-512 kernel and the generic loops must pick the first maximising child of every row, as
the reference does, ties included."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import _infer
from spnc.learn.routing import route
from spnc.nodes import Product, Sum

from test_routing import reference_route


def _model(rng: np.random.Generator) -> spnc.SPN:
    """Six binary variables: pair sums of 9 edges, a 64-edge sum over their products, a
    300-edge sum (always walked) and ties between equal leaves."""
    leaves = [[spnc.Bernoulli(v, float(p)) for p in (*rng.uniform(0.1, 0.9, 2), 0.5)] for v in range(6)]
    pairs = []
    for v in (0, 2, 4):
        prods = [Product([a, b]) for a in leaves[v] for b in leaves[v + 1]]
        pairs.append([Sum(prods, rng.dirichlet(np.ones(9))) for _ in range(4)])
    top = [Product([a, b, c]) for a in pairs[0] for b in pairs[1] for c in pairs[2]]
    wide = [Product([leaves[v][int(rng.integers(3))] for v in range(6)]) for _ in range(300)]
    flat = np.full(300, 1 / 300)          # equal weights: ties between equal products
    return spnc.compile(Sum([Sum(top, rng.dirichlet(np.ones(64))), Sum(wide, flat)], [0.5, 0.5]))


def _reference(spn: spnc.SPN, X: np.ndarray):
    """(filled rows, max-product root values, node-by-row activity, rows per sum edge) by
    numpy."""
    n, N = X.shape[0], spn.n_nodes
    V = np.zeros((n, N))
    state = np.stack([spn.node_log_values(np.full((1, spn.n_vars), float(s)))[0] for s in (0, 1)])
    t = spn.leaf_tables["bernoulli"]
    for node, var in zip(t.node, t.var):
        x = X[:, var]
        V[:, node] = np.where(np.isnan(x), state.max(0)[node], state[np.nan_to_num(x).astype(int), node])
    for node in range(N):
        ch = spn.child[spn.child_ptr[node]:spn.child_ptr[node + 1]]
        if spn.kind[node] == 1:
            V[:, node] = V[:, ch].sum(1)
        elif spn.kind[node] == 0:
            V[:, node] = (V[:, ch] + spn.logw[spn.child_ptr[node]:spn.child_ptr[node + 1]]).max(1)
    act, ec = reference_route(spn, X, V)
    filled = X.copy()
    best = np.argmax(state, axis=0)                                        # first maximum
    for node, var in zip(t.node, t.var):
        rows = act[:, node] & np.isnan(X[:, var])
        filled[rows, var] = best[node]
    return filled, V[:, spn.roots[0]], act, ec


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("missing", [0.1, 0.5, 0.9])
def test_mpe_and_routing_match_numpy_selection_on_sums_of_every_width(seed, missing):
    rng = np.random.default_rng(seed)
    spn = _model(rng)
    X = rng.integers(0, 2, size=(3000, 6)).astype(float)
    X[rng.random(X.shape) < missing] = np.nan
    want, value, _, _ = _reference(spn, X)
    for nt in (1, 2):
        filled, mp = spn.mpe(X, n_threads=nt)
        np.testing.assert_array_equal(filled, want)
        np.testing.assert_allclose(mp, value, rtol=1e-13, atol=0)
    if _infer.dq_paths():                               # the generic loops, same choices
        try:
            _infer.dq_paths(False)
            filled, mp2 = spn.mpe(X, n_threads=2)
        finally:
            _infer.dq_paths(True)
        np.testing.assert_array_equal(filled, want)
        np.testing.assert_array_equal(mp2, mp)
    _, _, act, want_ec = _reference(spn, want)          # routing: the completed rows
    ec = np.zeros(spn.n_edges)
    R = route(spn, want, edge_counts=ec)
    assert np.array_equal(R.toarray(), act)
    np.testing.assert_array_equal(ec, want_ec)


@pytest.mark.parametrize("step", [1, 7, 9, 64])
def test_mpe_fills_missing_rows_at_every_position_of_a_block(step):
    """The most probable states are written by row masks (eight masked stores where the CPU
    has AVX-512): missing entries at every step-th row, a partial last block included."""
    rng = np.random.default_rng(step)
    spn = _model(rng)
    X = rng.integers(0, 2, size=(200, 6)).astype(float)
    for v in range(6):
        X[(np.arange(200) + v) % step == 0, v] = np.nan
    want, value, _, _ = _reference(spn, X)
    filled, mp = spn.mpe(X, n_threads=1)
    np.testing.assert_array_equal(filled, want)
    np.testing.assert_allclose(mp, value, rtol=1e-13, atol=0)


def test_mpe_on_products_whose_first_children_are_sums_or_leaves():
    """Products starting with a sum then a sum, a sum then a leaf, a leaf then a sum (the
    max-product forward adds a first child in a slot to the second at once)."""
    rng = np.random.default_rng(5)
    B = lambda v: spnc.Bernoulli(v, float(rng.uniform(0.1, 0.9)))  # noqa: E731
    pair = lambda v: Sum([Product([B(v), B(v + 1)]) for _ in range(3)], rng.dirichlet(np.ones(3)))  # noqa: E731
    prods = [Product([pair(0), pair(2), B(4)]), Product([pair(0), B(2), B(3), B(4)]),
             Product([B(0), B(1), pair(2), B(4)]), Product([pair(0), B(4), pair(2)])]
    spn = spnc.compile(Sum(prods, rng.dirichlet(np.ones(4))))
    X = rng.integers(0, 2, size=(300, 5)).astype(float)
    X[rng.random(X.shape) < 0.4] = np.nan
    want, value, _, _ = _reference(spn, X)
    filled, mp = spn.mpe(X, n_threads=1)
    np.testing.assert_array_equal(filled, want)
    np.testing.assert_allclose(mp, value, rtol=1e-13, atol=0)


def _wide_model(rng: np.random.Generator, n_vars: int) -> spnc.SPN:
    """Binary variables in pairs, four 9-edge sums per pair, and a 3-edge root over
    products that take one sum of every pair."""
    leaves = [[spnc.Bernoulli(v, float(p)) for p in rng.uniform(0.1, 0.9, 3)] for v in range(n_vars)]
    sums = [[Sum([Product([a, b]) for a in leaves[v] for b in leaves[v + 1]], rng.dirichlet(np.ones(9)))
             for _ in range(4)] for v in range(0, n_vars, 2)]
    tops = [Product([s[int(rng.integers(4))] for s in sums]) for _ in range(3)]
    return spnc.compile(Sum(tops, rng.dirichlet(np.ones(3))))


@pytest.mark.parametrize("n_vars", [8, 16, 64])
def test_completed_rows_are_written_back_in_place_for_line_sized_rows(n_vars):
    # rows of 8k doubles go back through whole-line (streamed) stores where the CPU has them:
    # the filled rows, observed entries included, must be the reference's, for whole and
    # partial blocks of rows and any thread count
    rng = np.random.default_rng(n_vars)
    spn = _wide_model(rng, n_vars)
    X = rng.integers(0, 2, size=(64 * 5 + 17, n_vars)).astype(float)
    X[rng.random(X.shape) < 0.4] = np.nan
    want, value, _, _ = _reference(spn, X)
    for nt in (1, 2):
        filled, mp = spn.mpe(X, n_threads=nt)
        np.testing.assert_array_equal(filled, want)
        np.testing.assert_allclose(mp, value, rtol=1e-13, atol=0)
    Xs = np.asfortranarray(X)[::-1][::-1]          # a strided view: same rows, same answer
    np.testing.assert_array_equal(spn.mpe(Xs)[0], want)


@pytest.mark.parametrize("share", [0.0, 0.4])
def test_products_fill_for_the_leaves_that_share_their_slot(monkeypatch, share):
    """MPE and sampling sweep only the nodes of ``select_visit``: a leaf whose only parent is
    a product is skipped and that product fills its missing entries. The same bits as the
    sweep of every node, on trees and DAGs, 1 and 2 threads, staged and transposed chunks."""
    import spnc._selection
    from conftest import random_spn
    from spnc._sweep import graph_of
    from spnc._visit import select_visit

    rng = np.random.default_rng(30)
    skipped = 0
    for card in ([2, 3, 2, 4, 2, 2], [2] * 13, [3] * 9):
        spn = spnc.compile(random_spn(rng, card, depth=4, share=share), cardinality=card)
        skipped += spn.n_nodes - len(select_visit(graph_of(spn))[0])
        X = spn.sample(203, seed=1)
        X[rng.random(X.shape) < 0.3] = np.nan
        Xp = np.zeros(len(X), dtype=[("a", "i1"), ("b", "f8", (len(card),))])
        Xp["b"] = X                  # not staged: each chunk transposed whole
        runs = lambda: [q for nt in (1, 2) for A in (X, Xp["b"])     # noqa: E731
                        for q in (*spn.mpe(A, log_likelihood=True, n_threads=nt),
                                  spn.sample(evidence=A, seed=2, n_threads=nt), spn.sample(150, seed=3, n_threads=nt))]
        got = runs()
        monkeypatch.setattr(spnc._selection, "select_visit", lambda graph: (None, None))
        want = runs()
        monkeypatch.undo()
        assert not np.isnan(got[0]).all() and np.isnan(X).any()
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert skipped > 20          # leaves were left out of the sweep
