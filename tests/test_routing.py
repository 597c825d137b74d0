"""Hard routing of rows to nodes (spnc.learn.routing.route): the compiled sweep against a
plain numpy implementation and against brute force over induced trees."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

import spnc
from spnc._kinds import MAX
from spnc.learn import LearnSPN
from spnc.learn.routing import route
from spnc.nodes import Product, Sum

from conftest import all_states, random_spn, reference_route


def _check(spn, X, n_threads=None):
    ec = np.zeros(spn.n_edges)
    R = route(spn, X, n_threads=n_threads, edge_counts=ec)
    want, want_ec = reference_route(spn, X)
    assert isinstance(R, sp.csc_matrix) and R.shape == want.shape
    assert R.has_sorted_indices
    assert np.array_equal(R.toarray(), want)
    assert np.array_equal(ec, want_ec)
    return R


@pytest.mark.parametrize("seed", range(6))
def test_route_matches_numpy_reference_on_random_dags(seed):
    rng = np.random.default_rng(seed)
    card = [2, 3, 2, 2, 4]
    spn = spnc.compile(random_spn(rng, card, depth=3, share=0.5))
    X = spn.sample(700, seed=seed)
    _check(spn, X)
    _check(spn, X, n_threads=2)


def test_route_matches_reference_across_chunks_and_on_odd_row_counts():
    rng = np.random.default_rng(7)
    spn = spnc.compile(random_spn(rng, [2] * 4, depth=2, share=0.3, leaf="bernoulli"))
    for n in (0, 1, 63, 64, 65, 40_001):      # 40 001 rows: several chunks of the sweep
        X = spn.sample(n, seed=n) if n else np.zeros((0, 4))
        _check(spn, X)


@pytest.mark.parametrize("split", ["observed", "latent"])
@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
def test_route_matches_reference_on_learned_trees(split, leaves):
    gen = spnc.compile(random_spn(np.random.default_rng(3), [2] * 8, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(1500, seed=3)
    tree = LearnSPN(splitter="mi_components", sum_split=split, leaves=leaves, min_instances=15, mi_threshold=0.001,
                    alpha=1.0, random_state=0).fit(X).spn_
    _check(tree, X)


def test_route_matches_reference_on_mixtures_and_zero_probability_rows():
    rng = np.random.default_rng(4)
    card = [2, 2, 3]
    a, b = (spnc.compile(random_spn(rng, card, depth=2, share=0.3)) for _ in range(2))
    X = np.vstack([a.sample(300, seed=1), b.sample(300, seed=2)])
    mix = spnc.compile([a.to_nodes(), b.to_nodes()], root_weights=[.3, .7], cardinality=card)
    assert mix.combine == "mixture"
    _check(mix, X)
    # a row of probability zero still follows the first root and first children
    zero = spnc.compile(Sum([Product([spnc.Categorical(0, [0.0, 1.0]), spnc.Bernoulli(1, .5)]),
                             Product([spnc.Categorical(0, [0.0, 1.0]), spnc.Bernoulli(1, .2)])], [.5, .5]))
    _check(zero, np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]]))


def _induced_trees(spn, node, x):
    """Every induced tree below ``node`` for the complete row ``x``: (log value, node set)."""
    a, b = spn.child_ptr[node], spn.child_ptr[node + 1]
    if spn.kind[node] >= 2:
        return [(float(spn.node_log_values(x[None], mode=MAX)[0, node]), frozenset([node]))]
    parts = [_induced_trees(spn, int(c), x) for c in spn.child[a:b]]
    if spn.kind[node] == 0:
        return [(v + spn.logw[a + e], s | {node}) for e, p in enumerate(parts) for v, s in p]
    return [(sum(v for v, _ in combo), frozenset({node}).union(*(s for _, s in combo)))
            for combo in itertools.product(*parts)]


@pytest.mark.parametrize("seed", range(4))
def test_route_is_the_best_induced_tree_by_brute_force(seed):
    rng = np.random.default_rng(10 + seed)
    card = [2, 3, 2]
    spn = spnc.compile(random_spn(rng, card, depth=2, share=0.4))
    S = all_states(card)
    R = route(spn, S).toarray()
    for r, x in enumerate(S):
        trees = _induced_trees(spn, int(spn.roots[0]), x)
        best = max(v for v, _ in trees)
        winners = [s for v, s in trees if v >= best - 1e-12]
        assert frozenset(np.flatnonzero(R[r]).tolist()) in winners


@pytest.mark.parametrize("mode", [0, MAX])
def test_node_values_are_columns_of_node_log_values(mode):
    from spnc.learn.routing import node_values
    rng = np.random.default_rng(5)
    spn = spnc.compile(random_spn(rng, [2, 3, 2, 2], depth=3, share=0.5))
    X = spn.sample(300, seed=5)
    X[::7, 1] = np.nan
    nodes = np.array([spn.n_nodes - 1, 0, 3, 3, spn.n_nodes // 2])
    want = spn.node_log_values(X, mode=mode)[:, nodes]
    assert np.array_equal(node_values(spn, X, nodes, mode=mode), want)
    assert node_values(spn, X[:0], nodes).shape == (0, len(nodes))


def _fingerprint(spn):
    parts = [spn.kind, spn.child_ptr, spn.child, spn.weight]
    for name in sorted(spn.leaf_tables):
        t = spn.leaf_tables[name]
        parts += [t.node] + [np.asarray(v) for _, v in sorted(t.to_arrays().items())]
    return [np.ascontiguousarray(p).tobytes() for p in parts]


def test_leaf_cache_gives_the_values_of_a_fresh_evaluation_and_evaluates_only_new_leaves():
    from spnc.learn._graphedit import descendants
    from spnc.learn._leafcache import LeafCache
    from spnc.learn._refit import hard_refit
    from spnc.learn.routing import node_values
    gen = spnc.compile(random_spn(np.random.default_rng(8), [2] * 8, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(3000, seed=8).astype(np.float64)
    tree = LearnSPN(splitter="mi_components", sum_split="latent", leaves="chowliu", min_instances=15,
                    mi_threshold=0.001, alpha=1.0, random_state=0).fit(X).spn_
    n_cl = len(tree.leaf_tables["cltree"])
    cmax, c0 = LeafCache(X, MAX), LeafCache(X, 0)
    ec, ec2 = np.zeros(tree.n_edges), np.zeros(tree.n_edges)
    R = route(tree, X, edge_counts=ec, cache=cmax)
    assert cmax.evaluated == n_cl
    R2 = route(tree, X, edge_counts=ec2)
    assert (R != R2).nnz == 0 and np.array_equal(ec, ec2)
    nodes = np.arange(tree.n_nodes)
    assert np.array_equal(node_values(tree, X, nodes, cache=c0), node_values(tree, X, nodes))
    # refit one sub-network: only its leaves are new, every value stays exact
    sub = int(tree.child[tree.child_ptr[tree.roots[0]]])
    free = descendants(tree, [sub])
    new, _ = hard_refit(tree, X, free, alpha=0.3, max_iter=1)   # new pseudo-counts: new CPTs
    changed = sum(1 for n in new.leaf_tables["cltree"].node if free[n])
    before = cmax.evaluated
    assert (route(new, X, cache=cmax) != route(new, X)).nnz == 0
    assert 0 < cmax.evaluated - before <= changed
    assert np.array_equal(node_values(new, X, nodes, mode=MAX, cache=cmax), node_values(new, X, nodes, mode=MAX))
    # data that is not the cache's is evaluated as usual; a cache too small for every leaf
    # keeps what fits and evaluates the others on each pass, with the same values
    assert not cmax.usable(new, X.copy())
    assert not LeafCache(X, MAX, max_bytes=8 * X.shape[0] - 1).usable(new, X)
    n_new = len(new.leaf_tables["cltree"])
    for cap in (1, n_new // 2, n_new - 1):
        small = LeafCache(X, MAX, max_bytes=8 * X.shape[0] * cap)
        for spn in (tree, new, tree):
            assert (route(spn, X, cache=small) != route(spn, X)).nnz == 0
            assert np.array_equal(node_values(spn, X, nodes, mode=MAX, cache=small),
                                  node_values(spn, X, nodes, mode=MAX))
            assert len(small.row) <= cap and small.V.shape[0] <= cap


def test_observed_sums_route_without_evaluating_leaves():
    """Through products and observed sums no decision reads a leaf: an O-SPN's Chow-Liu
    leaves are not evaluated (the cache stays empty) and the routing is the reference's;
    leaves under a latent sum, or rows with a missing value, are evaluated as before."""
    from spnc.learn._leafcache import LeafCache
    from spnc.learn.routing import decisive_leaves
    gen = spnc.compile(random_spn(np.random.default_rng(5), [2] * 8, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(1200, seed=5)
    kw = dict(splitter="mi_components", leaves="chowliu", min_instances=15, mi_threshold=0.001, alpha=1.0,
              random_state=0)
    ospn = LearnSPN(sum_split="observed", **kw).fit(X).spn_
    lspn = LearnSPN(sum_split="latent", **kw).fit(X).spn_
    cl = ospn.leaf_tables["cltree"].node
    assert len(cl) and not decisive_leaves(ospn).any()
    cache = LeafCache(X, MAX)
    _check(ospn, X)
    route(ospn, X, cache=cache)
    assert cache.evaluated == 0
    assert decisive_leaves(lspn)[lspn.leaf_tables["cltree"].node].all()
    route(lspn, X, cache=cache)
    assert cache.evaluated == len(lspn.leaf_tables["cltree"])
    Xm = X.copy()
    Xm[::7, 2] = np.nan
    _check(ospn, Xm)
    # a mixture picks its root by value: every leaf below a root counts
    other = LearnSPN(sum_split="observed", **dict(kw, random_state=1, min_instances=40)).fit(X).spn_
    mix = spnc.compile([ospn.to_nodes(), other.to_nodes()], root_weights=[.5, .5], cardinality=ospn.cardinality)
    assert mix.combine == "mixture" and decisive_leaves(mix)[mix.leaf_tables["cltree"].node].all()
    _check(mix, X)


def test_leaf_cache_serves_both_modes_on_complete_rows_and_evidence_from_marginals():
    """On complete rows a max-product leaf value is the log-likelihood, so one cache serves
    both modes (bit for bit); on indicator evidence Chow-Liu leaves give their marginals
    directly, equal to evaluating the evidence rows."""
    from spnc.learn._leafcache import LeafCache
    from spnc.learn._similarity import indicator_evidence, node_marginals
    from spnc.learn.routing import node_values
    gen = spnc.compile(random_spn(np.random.default_rng(9), [2, 3, 2, 2, 4, 2], depth=3, share=0.0))
    X = gen.sample(800, seed=9).astype(np.float64)
    tree = LearnSPN(splitter="mi_components", sum_split="latent", leaves="chowliu", min_instances=15,
                    mi_threshold=0.001, alpha=1.0, random_state=0).fit(X).spn_
    assert len(tree.leaf_tables["cltree"])
    nodes = np.arange(tree.n_nodes)
    c0 = LeafCache(X, 0)
    assert c0.complete and c0.serves(MAX)
    assert np.array_equal(node_values(tree, X, nodes, mode=MAX, cache=c0), node_values(tree, X, nodes, mode=MAX))
    Xm = X.copy()
    Xm[0, 0] = np.nan
    assert not LeafCache(Xm, 0).serves(MAX)
    E, off = indicator_evidence(tree)
    ec = LeafCache(E, 0, evidence_off=off)
    P, _ = node_marginals(tree, evidence=(E, off), cache=ec)
    want, _ = node_marginals(tree)
    assert ec.evaluated == len(tree.leaf_tables["cltree"])
    np.testing.assert_allclose(P, want, rtol=1e-12, atol=1e-15)


def test_leaf_cache_does_not_keep_old_tables_alive():
    """Merging makes new leaf tables every round; the cache must not hold the old ones."""
    import gc
    import weakref
    from spnc.learn._leafcache import LeafCache
    gen = spnc.compile(random_spn(np.random.default_rng(11), [2] * 6, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(500, seed=11).astype(np.float64)
    cache = LeafCache(X, 0)
    refs = []
    for seed in range(3):
        tree = LearnSPN(splitter="mi_components", sum_split="latent", leaves="chowliu", min_instances=15,
                        mi_threshold=0.001, alpha=1.0, random_state=seed).fit(X).spn_
        assert cache.usable(tree, X)
        refs.append(weakref.ref(tree.leaf_tables["cltree"]))
        del tree
    gc.collect()
    assert all(r() is None for r in refs)


def test_leaf_keys_are_kept_on_the_table_and_follow_edits():
    """One key list per table, shared by every cache (so they die with the table), rebuilt
    when a parameter array is edited in place."""
    from spnc.learn._graphedit import leaf_keys
    gen = spnc.compile(random_spn(np.random.default_rng(12), [2] * 6, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(400, seed=12).astype(np.float64)
    tree = LearnSPN(splitter="mi_components", sum_split="latent", leaves="chowliu", min_instances=15,
                    mi_threshold=0.001, alpha=1.0, random_state=0).fit(X).spn_
    t = tree.leaf_tables["cltree"]
    keys = leaf_keys(t)
    assert leaf_keys(t) is keys and len(set(keys)) == len(t)
    cpt = t.params["cpt"]
    cpt[:2] = cpt[1::-1].copy()
    new = leaf_keys(t)
    assert new is not keys and new[0] != keys[0] and new[1:] == keys[1:]


def _observed_sums_loop(spn):
    """Plain reference of observed_sums: a sum whose children are all products, each with
    an indicator on the smallest indicator variable of the first child, values distinct."""
    out = np.full(spn.n_nodes, -1, dtype=np.int64)
    ind = spn.leaf_tables.get("indicator")
    if ind is None:
        return out
    var_of = dict(zip(ind.node.tolist(), ind.var.tolist()))
    val_of = dict(zip(ind.node.tolist(), ind.params["value"].tolist()))
    for s in np.flatnonzero(spn.kind == 0):
        ch = spn.children(s)
        if len(ch) < 2 or np.any(spn.kind[ch] != 1):
            continue
        first = [var_of[g] for g in spn.children(ch[0]) if g in var_of]
        if not first:
            continue
        v, vals = min(first), []
        for c in ch:
            hits = [val_of[g] for g in spn.children(c) if var_of.get(g) == v]
            vals.append(hits[0] if hits else None)
        if None not in vals and len(set(vals)) == len(vals):
            out[s] = v
    return out


@pytest.mark.parametrize("seed", range(6))
def test_observed_sums_match_a_plain_loop(seed):
    """Sums over products with indicators on one variable, and every way of missing it:
    repeated values, a child without the indicator, a child that is not a product, a first
    child with indicators on two variables; and learned O-SPNs and L-SPNs."""
    from spnc.leaves import Categorical, Indicator
    from spnc.learn.routing import observed_sums
    rng = np.random.default_rng(seed)

    def cat(v):
        return Categorical(v, rng.dirichlet(np.ones(3)))

    def child(v, w):
        pick = rng.choice(5, p=[0.6, 0.1, 0.1, 0.1, 0.1])
        if pick == 0:
            return Product([Indicator(v, int(rng.integers(3))), cat(w)])
        if pick == 1:
            return Product([Indicator(w, int(rng.integers(3))), Indicator(v, int(rng.integers(3)))])
        if pick == 2:
            return Product([cat(v), cat(w)])
        if pick == 3:
            return Sum([Product([Indicator(v, 0), cat(w)])], [1.0])
        return Product([cat(w), Indicator(v, 0)])       # indicator second, value often repeated

    parts = []
    for j in range(5):
        v, w = 2 * j, 2 * j + 1
        k = int(rng.integers(1, 4))
        parts.append(Sum([child(v, w) for _ in range(k)], rng.dirichlet(np.ones(k))))
    spn = spnc.compile(Product(parts), n_vars=10, cardinality=[3] * 10)
    got = observed_sums(spn)
    assert np.array_equal(got, _observed_sums_loop(spn))
    gen = spnc.compile(random_spn(rng, [2] * 8, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(600, seed=seed)
    tree = LearnSPN(sum_split="observed" if seed % 2 else "latent", splitter="mi_components", leaves="chowliu",
                    mi_threshold=0.001, min_instances=15, random_state=seed).fit(X).spn_
    assert np.array_equal(observed_sums(tree), _observed_sums_loop(tree))


def test_leaf_cache_transposes_its_rows_once_and_checks_them(monkeypatch):
    """Passes given a cache read its rows' transposed chunks, made once and never written:
    the routing and node values equal those of passes without it, and a cache over rows
    the model refuses raises the model's own data error."""
    from spnc.errors import DataError
    from spnc.learn._leafcache import LeafCache
    from spnc.learn.routing import node_values
    gen = spnc.compile(random_spn(np.random.default_rng(7), [2] * 8, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(3000, seed=7)
    spn = LearnSPN(sum_split="latent", splitter="mi_components", leaves="chowliu", min_instances=30,
                   mi_threshold=0.001, random_state=0).fit(X).spn_
    monkeypatch.setattr("spnc._sweep.MAX_CHUNK_ROWS", 448)     # several chunks
    cache = LeafCache(X, MAX)
    nodes = np.arange(spn.n_nodes)

    def chunks():
        return [XT for by_row in cache.rows._kept.values() for XT in by_row.values()]
    first = None
    for _ in range(2):
        assert (route(spn, X, cache=cache) != route(spn, X)).nnz == 0
        assert np.array_equal(node_values(spn, X, nodes, mode=MAX, cache=cache),
                              node_values(spn, X, nodes, mode=MAX))
        if first is None:
            first = [(XT, XT.copy()) for XT in chunks()]
    assert len(first) > 2 and [id(XT) for XT, _ in first] == [id(XT) for XT in chunks()]     # made once
    assert all(np.array_equal(XT, copy) for XT, copy in first)                       # never written
    bad = X.copy()
    bad[5, 3] = 2.0
    with pytest.raises(DataError, match=r"\[5, 3\]"):
        route(spn, bad, cache=LeafCache(bad, MAX))


def test_transposed_rows_keep_chunks_only_within_their_budget():
    """Rows over the byte budget are transposed on every request (nothing kept); within it
    a chunk is made once. Both give the chunk a sweep would make."""
    from spnc._sweep import TransposedRows, transposed_chunk
    X = np.random.default_rng(0).random((300, 5))
    want = transposed_chunk(X, 64, 128)
    small, big = TransposedRows(X, max_bytes=16 * X.size - 1), TransposedRows(X, max_bytes=16 * X.size)
    for rows in (small, big):
        a, b = rows.chunk(64, 128, 64), rows.chunk(64, 128, 64)
        assert np.array_equal(a, want) and np.array_equal(b, want)
        assert (a is b) == (rows is big)
    assert not small._kept and big._kept


def test_a_route_in_small_chunks_is_the_route_in_one():
    """The leaf matrix's budget per chunk (merging routes its training rows in chunks
    whose matrix stays in the caches) changes no row's path and no edge count."""
    from conftest import learned_trees, merge_data
    X, _ = merge_data(n=3000)
    tree = learned_trees(X[:600])["latent", "chowliu"]
    ea, eb = np.zeros(tree.n_edges), np.zeros(tree.n_edges)
    a = route(tree, X, edge_counts=ea)
    b = route(tree, X, edge_counts=eb, chunk_values=2000)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert np.array_equal(ea, eb)
