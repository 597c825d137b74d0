"""Merging's candidate search (Alg. 2): same-scope groups and the mean-field distances of
their pairs, against plain loops, on every computing path; and the Chow-Liu check's rule."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc.learn._similarity import Pairs, same_scope_height
from spnc.learn.merge import node_marginals
from spnc.nodes import Product, Sum

from conftest import random_spn


def _groups_by_loop(spn):
    """Reference grouping: exact scope bytes and same-scope height by plain loops."""
    size = np.diff(spn.scope_ptr)
    h = np.zeros(spn.n_nodes, dtype=np.int64)
    for _ in range(spn.n_nodes):
        for n in range(spn.n_nodes):
            ch = spn.child[spn.child_ptr[n]:spn.child_ptr[n + 1]]
            same = [c for c in ch if size[c] == size[n]]
            if same:
                h[n] = max(h[n], 1 + max(h[c] for c in same))
    groups = {}
    for n in range(spn.n_nodes):
        if spn.kind[n] >= 2 and spn.leaf_tables.get("indicator") is not None \
                and n in spn.leaf_tables["indicator"].node:
            continue
        sc = tuple(spn.node_scope(n).tolist())
        if all(spn.cardinality[v] > 0 for v in sc):
            groups.setdefault((sc, int(h[n])), []).append(n)
    return h, sorted((m for m in groups.values() if len(m) > 1), key=lambda m: (len(spn.node_scope(m[0])), m[0]))


@pytest.mark.parametrize("distance", ["manhattan", "kl", "hellinger"])
@pytest.mark.parametrize("seed, small", [(1, None), (2, None), (1, 0), (2, 1 << 30)])
def test_candidate_pairs_against_loops(distance, seed, small, monkeypatch):
    """Groups (identical scope, equal same-scope height, discrete) and every pair's
    mean-field distance against plain loops over the node marginals, with groups computed
    one by one (small=0), all in one pass (small huge) or split by size (default)."""
    from spnc.learn import _similarity
    if small is not None:
        monkeypatch.setattr(_similarity, "_SMALL", small)
    rng = np.random.default_rng(seed)
    card = [2, 3, 2, 4, 2]
    spn = spnc.compile(random_spn(rng, card, depth=4, share=0.3), cardinality=card)
    P, off = node_marginals(spn)
    skip = np.zeros(spn.n_nodes, dtype=bool)
    if "indicator" in spn.leaf_tables:
        skip[spn.leaf_tables["indicator"].node] = True
    pairs = Pairs(spn, P, off, distance, skip)
    h, want = _groups_by_loop(spn)
    assert np.array_equal(same_scope_height(spn), h)
    assert [pairs.members[pairs.gptr[g]:pairs.gptr[g + 1]].tolist() for g in range(len(pairs))] == want
    assert len(want) >= 3
    for g, m in enumerate(want):
        sc = spn.node_scope(m[0])
        D = pairs.matrix(g)
        for i, a in enumerate(m):
            for j, b in enumerate(m):
                tot = 0.0
                for v in sc:
                    p, q = P[a, off[v]:off[v + 1]], P[b, off[v]:off[v + 1]]
                    if np.any((p <= 0) != (q <= 0)):
                        tot = np.inf
                        break
                    if distance == "manhattan":
                        tot += np.abs(p - q).sum()
                    elif distance == "hellinger":
                        tot += np.sqrt(0.5 * ((np.sqrt(p) - np.sqrt(q)) ** 2).sum())
                    else:
                        p, q = np.clip(p, 1e-12, 1), np.clip(q, 1e-12, 1)
                        tot += 0.5 * ((p * np.log(p / q)).sum() + (q * np.log(q / p)).sum())
                want_d = np.inf if i == j else tot / len(sc)
                assert D[i, j] == pytest.approx(want_d, abs=1e-12)
        assert pairs.gmin[g] == pytest.approx(D.min(), abs=0) or np.isinf(D.min())
    monkeypatch.setattr(_similarity, "_BLOCK", 5)     # pairs in many small blocks
    assert np.array_equal(Pairs(spn, P, off, distance, skip).dist, pairs.dist)


@pytest.mark.parametrize("seed", [0, 1])
def test_many_pairs_of_one_binary_variable_take_the_compiled_path_bit_for_bit(seed, monkeypatch):
    """Groups of many pairs over one binary variable (univariate leaves) get a compiled
    call each: the same distances, bit for bit, as the one vectorised pass."""
    from spnc.learn import _similarity
    rng = np.random.default_rng(seed)
    leaves = [spnc.Bernoulli(v, float(p)) for v in range(3) for p in rng.uniform(0.01, 0.99, 30)]
    card = [2, 2, 2]
    spn = spnc.compile(spnc.Sum([spnc.Product([leaves[i], leaves[30 + i], leaves[60 + i]]) for i in range(30)],
                                np.full(30, 1 / 30)), cardinality=card)
    P, off = node_marginals(spn)
    skip = np.zeros(spn.n_nodes, dtype=bool)
    monkeypatch.setattr(_similarity, "_MANY", 1)
    fast = Pairs(spn, P, off, "manhattan", skip)
    monkeypatch.setattr(_similarity, "_MANY", 1 << 62)
    slow = Pairs(spn, P, off, "manhattan", skip)
    assert len(fast) == 4 and np.array_equal(fast.dist, slow.dist) and np.array_equal(fast.gmin, slow.gmin)


@pytest.mark.parametrize("steps", [0, 1, 32])
def test_same_scope_height_of_deep_chains(steps, monkeypatch):
    """Single-child sums and products stacked 3000 deep over a random DAG: the heights
    (by an ordered loop here) whether the vectorised steps finish the job or the ordered
    pass does. (The steps alone cost depth x edges: a 10^5-deep chain took Merge minutes.)"""
    from spnc.learn import _similarity
    monkeypatch.setattr(_similarity, "_HEIGHT_STEPS", steps)
    rng = np.random.default_rng(4)
    node = random_spn(rng, [2, 3, 2, 2], depth=3, share=0.4)
    for i in range(3000):
        node = Sum([node]) if i % 2 else Product([node])
    spn = spnc.compile(node)
    size = np.diff(spn.scope_ptr)
    want = np.zeros(spn.n_nodes, dtype=np.int64)
    for n in range(spn.n_nodes):
        same = [c for c in spn.children(n) if size[c] == size[n]]
        want[n] = 1 + max(want[c] for c in same) if same else 0
    got = same_scope_height(spn)
    assert np.array_equal(got, want)
    assert got[spn.root] >= 3000


@pytest.mark.parametrize("small", [0, 1 << 30])
def test_candidate_pairs_with_other_supports_are_never_close(small, monkeypatch):
    """Two nodes whose marginals are zero in different places get an infinite distance, on
    both the one-group-at-a-time and the one-pass path."""
    from spnc.learn import _similarity
    monkeypatch.setattr(_similarity, "_SMALL", small)
    probs = [[0.5, 0.5, 0.0], [0.3, 0.7, 0.0], [0.0, 0.5, 0.5], [0.2, 0.3, 0.5]]
    spn = spnc.compile(Sum([Product([spnc.Categorical(0, p), spnc.Bernoulli(1, 0.2 + 0.1 * i)])
                            for i, p in enumerate(probs)], [0.25] * 4))
    P, off = node_marginals(spn)
    pairs = Pairs(spn, P, off, "manhattan", np.zeros(spn.n_nodes, dtype=bool))
    g = next(g for g in range(len(pairs)) if spn.kind[pairs.members[pairs.gptr[g]]] >= 2
             and spn.node_scope(pairs.members[pairs.gptr[g]]).tolist() == [0])
    D = pairs.matrix(g)
    zero = [tuple(np.array(p) == 0) for p in probs]
    for i in range(4):
        for j in range(4):
            if i != j:
                same = zero[i] == zero[j]
                assert np.isfinite(D[i, j]) == same
                if same:
                    assert D[i, j] == pytest.approx(np.abs(np.subtract(probs[i], probs[j])).sum())


@pytest.mark.parametrize("g", [1, 2, 7, 8, 9, 37])
def test_compiled_pair_distances_sum_in_column_order(g):
    """The tiled Manhattan kernel of large groups: every pair's |differences| added in
    column order (bit for bit a sequential sum), divided by the variable count, inf where
    the support labels differ, in the order of np.triu_indices; sizes around the tile."""
    from spnc.learn._pairs import l1_pairs
    rng = np.random.default_rng(g)
    Q = rng.random((g, 13))
    label = rng.integers(0, 2, size=g).astype(np.int64)
    out = np.full(g * (g - 1) // 2, -1.0)
    l1_pairs(Q, label, 6.0, out)
    i, j = np.triu_indices(g, 1)
    want = np.cumsum(np.abs(Q[i] - Q[j]), axis=1)[:, -1] / 6.0 if g > 1 else np.zeros(0)
    want[label[i] != label[j]] = np.inf
    assert np.array_equal(out, want)
    with pytest.raises(ValueError):
        l1_pairs(Q, label, 6.0, np.empty(len(out) + 1))


@pytest.mark.parametrize("p, replaced", [(1 / 52, True), (1 / 52 * (1 - 1e-12), True), (1 / 60, False)])
def test_chowliu_check_gives_a_tie_to_the_tree(p, replaced):
    """A kept node that a Chow-Liu tree matches on its validation rows up to rounding is
    replaced by the tree (one leaf), also when rounding puts the node a hair ahead; a node
    that fits them better is kept. Training rows
    all zero: the tree (pseudo-count 1) gives each variable P(0) = 51/52, as the product
    of Bernoulli(1/52) leaves does."""
    from spnc.learn import Merge
    from spnc.learn._merge_round import _Round
    spn = spnc.compile(Product([spnc.Bernoulli(0, p), spnc.Bernoulli(1, p)]))
    X, Xv = np.zeros((50, 2)), np.zeros((10, 2))
    rnd = _Round(Merge(init=spn), X, Xv, 1.0)
    got = rnd.chowliu_check(spn, [int(spn.roots[0])])
    assert (int(spn.roots[0]) in got) == replaced


@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
def test_chowliu_check_judges_each_node_on_its_own_rows(leaves):
    """Each candidate's tree is learned on the training rows reaching the node and judged
    against the node on the validation rows reaching it (a one-leaf SPN per tree as the
    reference); both outcomes occur."""
    from spnc.chowliu import fit_chow_liu, forest_to_tree
    from spnc.leaves.cltree import ChowLiuLeaf
    from spnc.learn import LearnSPN, Merge
    from spnc.learn._merge_round import _Round
    from spnc.learn.routing import route, rows_of
    rng = np.random.default_rng(3)
    gen = spnc.compile(random_spn(rng, [2] * 8, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(1500, seed=3)
    X, Xv = X[:1000], X[1000:]
    spn = LearnSPN(splitter="mi_components", sum_split="observed", leaves=leaves, min_instances=20,
                   mi_threshold=0.001, alpha=1.0, random_state=0).fit(X).spn_
    cand = [n for n in range(spn.n_nodes) if spn.kind[n] < 2 and len(spn.node_scope(n)) >= 2]
    got = _Round(Merge(init=spn), X, Xv, 1.0).chowliu_check(spn, cand)
    R, Rv = route(spn, X), route(spn, Xv)
    V = spn.node_log_values(Xv)
    want = set()
    for n in cand:
        rows, vrows = rows_of(R, n), rows_of(Rv, n)
        if rows.size < 2 or vrows.size == 0:
            continue
        s = spn.node_scope(n)
        fit = fit_chow_liu(X[np.ix_(rows, s)].astype(np.int64), spn.cardinality[s], alpha=1.0)
        one = spnc.compile(ChowLiuLeaf(s.astype(np.int64), *forest_to_tree(fit.parents, fit.cpts)),
                           n_vars=spn.n_vars, cardinality=spn.cardinality)
        tree, node = one.log_likelihood(Xv[vrows]).sum(), V[vrows, n].sum()
        if tree >= node - 1e-9 * abs(node):
            want.add(n)
    assert set(got) == want
    assert 0 < len(want) < len(cand)


def test_a_mixture_of_roots_comes_back_as_one():
    from spnc.learn import LearnSPN, Merge
    from spnc.learn.merge import identical_merge, single_root
    rng = np.random.default_rng(0)
    X = (rng.random((600, 5)) < rng.random((600, 1))).astype(float)
    a, b = (LearnSPN(min_instances=k, random_state=0).fit(X[:400]).spn_ for k in (40, 150))
    mix = spnc.mixture([a, b], weights=[.3, .7])
    N = mix.n_nodes - 1                       # its root sum as a mixture of roots
    m = spnc.SPN.from_arrays(mix.kind[:N], mix.child_ptr[:N + 1], mix.child[:mix.child_ptr[N]],
                             mix.weight[:mix.child_ptr[N]], mix.leaf_tables, mix.cardinality,
                             roots=mix.children(mix.root), root_weights=[.3, .7], combine="mixture")
    for eps in (0.0, 0.2):
        g = Merge(init=m, epsilon=eps).fit(X[:400], X_valid=X[400:]).spn_
        assert g.combine == "mixture" and len(g.roots) == 2
        if eps == 0.0:      # identical sub-networks only: the same distribution, no extra node
            assert g.n_nodes == identical_merge(single_root(m)).n_nodes - 1
            np.testing.assert_allclose(g.log_likelihood(X), m.log_likelihood(X), rtol=1e-12)


def test_pairs_reuse_the_distances_of_groups_whose_marginals_are_unchanged(monkeypatch):
    """Distances taken from an earlier model's memo (groups of equal marginals) equal
    those computed afresh; a group whose marginals changed is computed again."""
    from spnc.learn import _similarity
    monkeypatch.setattr(_similarity, "_MANY", 1)          # every leaf group its own call
    rng = np.random.default_rng(3)
    leaves = [spnc.Bernoulli(v, float(p)) for v in range(3) for p in rng.uniform(0.01, 0.99, 20)]
    spn = spnc.compile(spnc.Sum([spnc.Product([leaves[i], leaves[20 + i], leaves[40 + i]]) for i in range(20)],
                                np.full(20, 1 / 20)), cardinality=[2, 2, 2])
    skip = np.zeros(spn.n_nodes, dtype=bool)
    first = Pairs(spn, *node_marginals(spn), "manhattan", skip)
    leaves[25] = spnc.Bernoulli(1, 0.5)                    # one group changes
    edited = spnc.compile(spnc.Sum([spnc.Product([leaves[i], leaves[20 + i], leaves[40 + i]]) for i in range(20)],
                                   np.full(20, 1 / 20)), cardinality=[2, 2, 2])
    calls = []
    real = _similarity._group_distance
    monkeypatch.setattr(_similarity, "_group_distance", lambda *a: calls.append(1) or real(*a))
    again = Pairs(edited, *node_marginals(edited), "manhattan", skip, memo=first.memo)
    fresh = Pairs(edited, *node_marginals(edited), "manhattan", skip)
    assert np.array_equal(again.dist, fresh.dist) and len(calls) == 1 + len(first.memo)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scope_marginals_are_node_marginals_on_every_scope_column(seed):
    """The round's marginals (only each node's scope columns set) equal node_marginals
    there to the bit, and give the same candidate pairs and distances."""
    from spnc.learn._leafcache import LeafCache
    from spnc.learn._similarity import indicator_evidence, scope_marginals
    from spnc._kinds import MARGINAL
    rng = np.random.default_rng(seed)
    card = [2, 3, 2, 4, 2]
    spn = spnc.compile(random_spn(rng, card, depth=4, share=0.3), cardinality=card)
    ev = indicator_evidence(spn)
    cache = LeafCache(ev[0], MARGINAL, evidence_off=ev[1])
    P, off = node_marginals(spn, None, ev, cache)
    Q, off2 = scope_marginals(spn, None, ev, cache)
    assert np.array_equal(off, off2)
    for n in range(spn.n_nodes):
        cols = np.concatenate([np.arange(off[v], off[v + 1]) for v in spn.node_scope(n)])
        assert np.array_equal(Q[n, cols].view(np.int64), P[n, cols].view(np.int64))
    skip = np.zeros(spn.n_nodes, dtype=bool)
    a, b = Pairs(spn, P, off, "manhattan", skip), Pairs(spn, Q, off, "manhattan", skip)
    assert np.array_equal(a.dist.view(np.int64), b.dist.view(np.int64)) and np.array_equal(a.members, b.members)
