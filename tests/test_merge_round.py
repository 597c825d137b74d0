"""A merge round's cluster search, kept-member choice and leaf values against their plain
definitions (the leader pass over each group's distance matrix; unions of routed rows as
sparse products; a sweep)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

import spnc
from spnc._kinds import MARGINAL, MAX
from spnc.learn._leafcache import LeafCache, leaf_values
from spnc.learn._merge_round import _Round
from spnc.learn._routing import sums_over_nodes
from spnc.learn._similarity import Pairs
from spnc.learn.routing import node_values

from conftest import learned_trees, merge_data, random_spn


def _pairs(rng, sizes) -> Pairs:
    """Pairs of groups of the given sizes over distinct node ids, distances drawn from a
    few values (ties), with some infinite and NaN ones."""
    p = object.__new__(Pairs)
    p.members = rng.permutation(int(sum(sizes)) + 5)[: int(sum(sizes))].astype(np.int64)
    p.gptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    npairs = np.array([s * (s - 1) // 2 for s in sizes])
    p.pptr = np.concatenate([[0], np.cumsum(npairs)]).astype(np.int64)
    d = rng.choice([0.0, 0.01, 0.02, 0.05, 0.1, 0.3, np.inf, np.nan], size=int(npairs.sum()))
    p.dist = d
    p.gmin = np.fmin.reduceat(d, p.pptr[:-1]) if len(sizes) else np.zeros(0)
    return p


def _clusters_by_matrix(pairs: Pairs, eps: float, count: np.ndarray) -> list:
    out = []
    for g in np.flatnonzero(pairs.gmin <= eps):
        m = pairs.members[pairs.gptr[g]:pairs.gptr[g + 1]]
        close = pairs.matrix(g) <= eps
        np.fill_diagonal(close, True)
        free = close.sum(axis=1) > 1
        for i in np.argsort(-count[m], kind="stable"):
            if free[i]:
                mem = np.flatnonzero(free & close[i])
                free[mem] = False
                if mem.size > 1:
                    out.append(m[mem])
    return out


@pytest.mark.parametrize("seed", range(4))
def test_clusters_are_the_leader_pass_over_each_distance_matrix(seed):
    """Groups of 2 to 300 members (a word per row up to 64, Python integers beyond), tied
    counts and distances, infinite and NaN ones: the clusters of the matrix loop, in its
    order."""
    rng = np.random.default_rng(seed)
    pairs = _pairs(rng, rng.choice([2, 3, 5, 17, 63, 64, 65, 100, 300], size=12))
    count = rng.integers(0, 4, size=int(pairs.members.max()) + 1)
    rnd = object.__new__(_Round)
    rnd.distances = lambda spn: pairs
    for eps in (0.0, 0.01, 0.05, 0.3, np.inf):
        for g in range(len(pairs.gptr) - 1):
            want = pairs.matrix(g) <= eps
            np.fill_diagonal(want, True)
            assert np.array_equal(pairs.close(g, eps), want)
        got = rnd.clusters(None, eps, lambda: count)
        want = _clusters_by_matrix(pairs, eps, count)
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
        assert len(want) or eps == 0.0


@pytest.mark.parametrize("seed", range(4))
def test_groups_of_one_close_pair_cluster_that_pair(seed):
    """Few close pairs (most groups with none, one or two; NaN and infinite distances):
    the pair found in one pass over the groups is the one of triu order, and the
    clusters are the matrix loop's, in its order."""
    rng = np.random.default_rng(seed)
    pairs = _pairs(rng, rng.choice([2, 3, 5, 17, 63, 64, 65, 100, 300], size=40))
    pairs.dist = rng.choice([np.inf, np.nan, 1.0], size=len(pairs.dist))
    for g in range(len(pairs.gptr) - 1):
        k = pairs.pptr[g + 1] - pairs.pptr[g]
        at = pairs.pptr[g] + rng.choice(k, size=min(k, rng.choice([0, 1, 1, 2])), replace=False)
        pairs.dist[at] = rng.choice([0.0, 0.01], size=len(at))
    pairs.gmin = np.fmin.reduceat(pairs.dist, pairs.pptr[:-1])
    count = rng.integers(0, 4, size=int(pairs.members.max()) + 1)
    rnd = object.__new__(_Round)
    rnd.distances = lambda spn: pairs
    groups = np.arange(len(pairs.gptr) - 1)
    for eps in (0.0, 0.01):
        i, j = pairs.single_pairs(groups, eps)
        for g in groups:
            o, s = pairs.pptr[g], pairs.gptr[g + 1] - pairs.gptr[g]
            c = np.flatnonzero(pairs.dist[o:o + s * (s - 1) // 2] <= eps)
            ti, tj = np.triu_indices(s, 1)
            assert (i[g], j[g]) == ((ti[c[0]], tj[c[0]]) if len(c) == 1 else (-1, -1))
        assert (i >= 0).sum() >= 3
        got = rnd.clusters(None, eps, lambda: count)
        want = _clusters_by_matrix(pairs, eps, count)
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))


def _keep_best_by_products(Rv, clusters, count, Lv) -> np.ndarray:
    M = np.concatenate(clusters)
    size = np.array([len(c) for c in clusters])
    g = np.repeat(np.arange(len(clusters)), size)
    cols = np.unique(M)
    j = np.searchsorted(cols, M)
    member = sp.csr_matrix((np.ones(len(M)), (np.arange(len(M)), g)), shape=(len(M), len(clusters)))
    union = (Rv[:, M].astype(np.float64) @ member).tocsc()
    union.sort_indices()
    uptr = union.indptr.astype(np.int64)
    tot = sums_over_nodes(Lv[cols], uptr[g], uptr[g + 1], union.indices.astype(np.int32), j)
    key = np.where((np.diff(union.indptr) > 0)[g], tot, count[M].astype(np.float64))
    rep = np.arange(Rv.shape[1])
    starts = np.concatenate([[0], np.cumsum(size)[:-1]])
    for c, s in zip(clusters, starts):
        k = key[s:s + len(c)]
        rep[c] = c[int(np.argmax(k))]
    return rep


@pytest.mark.parametrize("seed", range(4))
def test_keep_best_sums_each_member_over_the_union_of_its_clusters_rows(seed):
    """Random routings (members reached by no row, clusters reached by none), tied values:
    the member of the largest sum over its cluster's rows, in row order, is kept (the
    first at ties; by count when no row reached the cluster), as by sparse products."""
    rng = np.random.default_rng(seed)
    n, N = 300, 80
    D = rng.random((n, N)) < 0.05
    D[:, :10] = False
    Rv = sp.csc_matrix(D)
    Lv = np.round(rng.normal(size=(N, n)), 1)
    count = rng.integers(0, 5, size=N)
    nodes = rng.permutation(N)
    cut = np.sort(rng.choice(np.arange(2, N - 1), size=20, replace=False))
    clusters = [c for c in np.split(nodes, cut) if len(c) >= 2]
    rnd = object.__new__(_Round)
    rnd.est = SimpleNamespace(local_check=False)
    rnd.valid_values = lambda spn, cols: Lv[cols]
    got = rnd.keep_best(SimpleNamespace(n_nodes=N), clusters, count, Rv)
    assert np.array_equal(got, _keep_best_by_products(Rv, clusters, count, Lv))


@pytest.mark.parametrize("mode", [MARGINAL, MAX])
def test_leaf_values_are_a_sweeps_bit_for_bit(mode):
    """Leaves' values read from the kept rows and state tables: a sweep's values, for
    Chow-Liu, Bernoulli and categorical leaves in any order; None when a node is asked
    twice, a row is incomplete or a Chow-Liu leaf cannot be kept."""
    X, Xv = merge_data()
    tree = learned_trees(X)["latent", "chowliu"]
    rng = np.random.default_rng(1)
    mixed = spnc.compile(random_spn(rng, [2, 3, 2, 4], depth=3))
    Xm = np.column_stack([rng.integers(0, k, size=50) for k in (2, 3, 2, 4)]).astype(np.float64)
    for spn, rows in ((tree, Xv), (mixed, Xm)):
        cache = LeafCache(rows, mode, checked_by=spn)
        leaves = rng.permutation(np.flatnonzero(spn.kind >= 2))
        want = node_values(spn, rows, leaves, mode=mode, by_node=True)
        got = leaf_values(spn, leaves, cache)
        assert got.shape == want.shape and np.array_equal(got.view(np.int64), want.view(np.int64))
        assert leaf_values(spn, np.append(leaves, leaves[0]), cache) is None
    assert leaf_values(tree, leaves[:1], LeafCache(np.where(Xv == 0, np.nan, Xv), mode)) is None
    cl = tree.leaf_tables["cltree"].node
    assert leaf_values(tree, cl, LeafCache(Xv, mode, max_bytes=0)) is None


@pytest.mark.parametrize("k", [1, 5, 200])
def test_a_rounds_validation_values_of_leaves_are_a_sweeps(k, monkeypatch):
    """A round's validation values of k leaves (read directly up to LEAF_VALUES_MAX,
    swept beyond; the limit lowered here): the values of a sweep of the whole model."""
    from spnc.learn import Merge, _merge_round
    monkeypatch.setattr(_merge_round, "LEAF_VALUES_MAX", 8)
    X, Xv = merge_data()
    tree = learned_trees(X)["latent", "univariate"]
    rnd = _Round(Merge(init=tree, epsilon=0.1), X, Xv, 0.1)
    leaves = np.flatnonzero(tree.kind >= 2)[:k]
    want = node_values(tree, Xv, leaves, by_node=True)
    got = rnd.valid_values(tree, leaves)
    assert got.shape == want.shape and np.array_equal(got.view(np.int64), want.view(np.int64))
