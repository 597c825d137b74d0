"""Merging's carried-over training routing (spnc.learn._carry): rows routed below chosen
nodes only, and routings carried across a rebuilt model."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import spnc
from spnc._kinds import MAX
from spnc.learn._carry import Routing, _union, route_from
from spnc.learn.routing import route, rows_of

from conftest import random_spn


def _data(seed=0, n=900, d=7):
    rng = np.random.default_rng(seed)
    gen = spnc.compile(random_spn(rng, [2] * d, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(n, seed=seed)
    return X[: 2 * n // 3], X[2 * n // 3:]


def _reference(spn, X, heads, entry):
    """Plain numpy: rows ``entry[i]`` enter ``heads[i]``; a sum sends a row to its first
    child maximising log w + max-product value, a product to every child."""
    V = spn.node_log_values(X, mode=MAX)
    act = np.zeros((X.shape[0], spn.n_nodes), dtype=bool)
    for h, rows in zip(heads, entry):
        act[rows, h] = True
    ec = np.zeros(spn.n_edges)
    for node in range(spn.n_nodes - 1, -1, -1):
        a, b = spn.child_ptr[node], spn.child_ptr[node + 1]
        ch = spn.child[a:b]
        if spn.kind[node] == 1:
            act[:, ch] |= act[:, [node]]
        elif spn.kind[node] == 0:
            best = np.argmax(V[:, ch] + spn.logw[a:b], axis=1)
            for r in np.flatnonzero(act[:, node]):
                act[r, ch[best[r]]] = True
                ec[a + best[r]] += 1
    return act, ec


@pytest.mark.parametrize("seed", range(6))
def test_route_from_matches_the_reference_and_route_from_the_root(seed):
    rng = np.random.default_rng(seed)
    spn = spnc.compile(random_spn(rng, [2, 3, 2, 2, 4], depth=3, share=0.4))
    X = spn.sample(300, seed=seed)
    R, ec = route_from(spn, X, [int(spn.roots[0])], [np.arange(len(X))])
    ec0 = np.zeros(spn.n_edges)
    assert (R != route(spn, X, edge_counts=ec0)).nnz == 0 and np.array_equal(ec, ec0)
    inner = np.flatnonzero(spn.kind < 2)[:-1]
    heads = rng.choice(inner, size=min(3, len(inner)), replace=False) if len(inner) else spn.roots
    entry = [np.sort(rng.choice(len(X), size=int(rng.integers(0, 200)), replace=False)) for _ in heads]
    R, ec = route_from(spn, X, heads, entry)
    want, want_ec = _reference(spn, X, heads, entry)
    assert np.array_equal(R.toarray(), want) and np.array_equal(ec, want_ec)


def test_routing_carry_takes_the_union_of_the_rows_of_the_old_nodes():
    rng = np.random.default_rng(1)
    n, N, M = 150, 40, 25
    dense = rng.random((n, N)) < 0.3
    R = Routing.of(sp.csc_matrix(dense))
    target = rng.integers(-1, M, size=N)
    got = R.carry(target, M)
    want = np.zeros((n, M), dtype=bool)
    for j in range(N):
        if target[j] >= 0:
            want[:, target[j]] |= dense[:, j]
    assert np.array_equal(got.tocsc().toarray(), want)
    assert np.array_equal(got.counts(), want.sum(0))
    assert all(np.array_equal(rows_of(got, j), np.flatnonzero(want[:, j])) for j in range(M))
    S = sp.csc_matrix(rng.random((n, M)) < 0.5)
    cols = rng.random(M) < 0.4
    spl = got.splice(S, cols).tocsc().toarray()
    assert np.array_equal(spl[:, cols], S.toarray()[:, cols]) and np.array_equal(spl[:, ~cols], want[:, ~cols])
    col, idx = rng.integers(0, 9, 500) * 7, rng.integers(0, n, 500)
    c, i = _union(col, idx, n, max_bytes=3 * 8 * (-(-n // 64) + 1) * 8)     # a few columns per block
    key = np.unique(col * n + idx)
    assert np.array_equal(c, key // n) and np.array_equal(i, key % n)

