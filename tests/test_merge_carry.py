"""Merging's carried-over training routing (spnc.learn._carry) and its local refit: rows
routed below chosen nodes only, routings carried across a rebuilt model, and the refit from
them against the global one where no routing above the refit nodes can change."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc.learn import Merge
from spnc.learn._carry import Routing, route_from
from spnc.learn._routing import union_runs
from spnc.learn._graphedit import descendants
from spnc.learn._refit import hard_refit, local_refit
from spnc.learn.merge import identical_merge, single_root
from spnc.learn.routing import route, rows_of
from spnc.nodes import Product

from conftest import learned_trees, merge_data, random_spn, reference_route


@pytest.fixture(scope="module")
def trees():
    X, Xv = merge_data()
    return X, Xv, learned_trees(X)


def _reference(spn, X, heads, entry):
    """Plain numpy: rows ``entry[i]`` enter ``heads[i]``, then routed as ``route`` does."""
    act = np.zeros((X.shape[0], spn.n_nodes), dtype=bool)
    for h, rows in zip(heads, entry):
        act[rows, h] = True
    return reference_route(spn, X, act=act)


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


@pytest.mark.parametrize("seed", range(6))
def test_route_from_leaf_heads_alone_below_others_and_twice(seed):
    """Leaf heads keep their entering rows without a sweep unless another head reaches
    them or they are listed twice: the reference's routing in every case, either form of
    ``entry``."""
    rng = np.random.default_rng(seed)
    spn = spnc.compile(random_spn(rng, [2, 3, 2, 2, 4], depth=3, share=0.4))
    X = spn.sample(300, seed=seed)
    inner, leaves = np.flatnonzero(spn.kind < 2)[:-1], np.flatnonzero(spn.kind >= 2)
    top = rng.choice(inner, size=min(2, len(inner)), replace=False) if len(inner) else np.zeros(0, np.int64)
    under = np.flatnonzero(descendants(spn, top) & (spn.kind >= 2)) if top.size else leaves[:0]
    apart = np.setdiff1d(leaves, under)
    alone = rng.choice(apart, size=min(4, len(apart)), replace=False)
    heads = np.concatenate([top, alone, under[:2], alone[:1]])        # the last one twice
    entry = [np.sort(rng.choice(len(X), size=int(rng.integers(0, 200)), replace=False)) for _ in heads]
    want, want_ec = _reference(spn, X, heads, entry)
    R, ec = route_from(spn, X, heads, entry)
    assert np.array_equal(R.toarray(), want) and np.array_equal(ec, want_ec)
    assert all(np.array_equal(R.indices[R.indptr[j]:R.indptr[j + 1]], np.flatnonzero(want[:, j]))
               for j in range(spn.n_nodes))
    ptr = np.concatenate([[0], np.cumsum([len(e) for e in entry])])
    R2, ec2 = route_from(spn, X, heads, (ptr, np.concatenate(entry)))
    assert (R2 != R).nnz == 0 and np.array_equal(ec2, ec)
    k = len(top) + 1
    R3, _ = route_from(spn, X, heads[k:k + 3], entry[k:k + 3])     # leaves alone: no sweep
    assert np.array_equal(R3.toarray(), _reference(spn, X, heads[k:k + 3], entry[k:k + 3])[0])


def test_routing_carry_takes_the_union_of_the_rows_of_the_old_nodes():
    rng = np.random.default_rng(1)
    n, N, M = 150, 40, 25
    dense = rng.random((n, N)) < 0.3
    import scipy.sparse as sp
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
    nodes = rng.integers(0, M, size=30)
    ptr, idx = got.rows_of_many(nodes)
    assert all(np.array_equal(idx[ptr[i]:ptr[i + 1]], np.flatnonzero(want[:, j])) for i, j in enumerate(nodes))
    S = sp.csc_matrix(rng.random((n, M)) < 0.5)
    cols = rng.random(M) < 0.4
    spl = got.splice(S, cols).tocsc().toarray()
    assert np.array_equal(spl[:, cols], S.toarray()[:, cols]) and np.array_equal(spl[:, ~cols], want[:, ~cols])
    for size in (500, 3, 0):                # runs of unsorted rows, repeats, empty runs
        gptr = np.concatenate([[0], np.sort(rng.integers(0, size + 1, 6)), [size]])
        idx = rng.integers(0, n, size)
        lens, rows = union_runs(gptr, idx, n)
        want = [np.unique(idx[a:b]) for a, b in zip(gptr[:-1], gptr[1:])]
        assert np.array_equal(lens, [len(w) for w in want])
        assert np.array_equal(rows, np.concatenate(want)) and rows.dtype == np.int32
    with pytest.raises(ValueError, match="out of range"):
        union_runs(np.array([0, 1]), np.array([n]), n)


def _same(a, b):
    assert np.array_equal(a.weight, b.weight)
    for name, t in a.leaf_tables.items():
        for k, v in t.to_arrays().items():
            assert np.array_equal(np.asarray(v), np.asarray(b.leaf_tables[name].to_arrays()[k]))


@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
@pytest.mark.parametrize("max_iter", [1, 5])
def test_local_refit_equals_the_global_one_where_no_routing_above_can_change(trees, leaves, max_iter):
    X, _, tr = trees
    spn = identical_merge(single_root(tr[("latent", leaves)]))
    # the whole model from its root: nothing above it
    free = np.ones(spn.n_nodes, dtype=bool)
    D = Routing.of(route(spn, X))
    want, Rw = hard_refit(spn, X, free, alpha=1.0, max_iter=max_iter)
    got, Rg = local_refit(spn, X, D, free, spn.roots, alpha=1.0, max_iter=max_iter)
    _same(got, want)
    assert (Rg.tocsc() != Rw).nnz == 0
    # a product of two models over disjoint variables: refitting one, the other's routing
    # cannot move, nor can the rows that reach the refit one
    other = spnc.compile(spnc.Bernoulli(X.shape[1], 0.3))
    both = spnc.compile(Product([spn.to_nodes(), other.to_nodes()]))
    Xb = np.column_stack([X, np.arange(len(X)) % 2])
    head = int(both.child[both.child_ptr[both.roots[0]]])
    free = descendants(both, [head])
    want, Rw = hard_refit(both, Xb, free, alpha=1.0, max_iter=max_iter)
    got, Rg = local_refit(both, Xb, Routing.of(route(both, Xb)), free, [head], alpha=1.0, max_iter=max_iter)
    _same(got, want)
    assert (Rg.tocsc() != Rw).nnz == 0


@pytest.mark.parametrize("split", ["latent", "observed"])
@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
def test_merge_with_carried_routing_is_valid_and_close_to_the_global_refit(trees, split, leaves):
    X, Xv, tr = trees
    fits = {how: Merge(init=tr[(split, leaves)], epsilon=(1e-3, 0.01, 0.1), refit_rows=how).fit(X, X_valid=Xv)
            for how in ("local", "global")}
    for m in fits.values():
        assert m.history_[-1]["merged"] >= 0 and m.spn_.n_nodes <= tr[(split, leaves)].n_nodes
        assert m.spn_.learner["params"]["refit_rows"] in ("local", "global")
    v = {h: float(np.mean(m.spn_.log_likelihood(Xv))) for h, m in fits.items()}
    assert abs(v["local"] - v["global"]) < 0.05


def test_a_round_carries_its_routing_to_the_model_it_returns(trees):
    """After a round that merged, the round's training routing is the new model's and,
    below the kept sub-networks, the rows of each node are those routed from its head."""
    X, Xv, tr = trees
    est = Merge(init=tr[("latent", "univariate")], epsilon=0.2)
    est._validate_params()
    from spnc.learn._merge_round import _Round
    rnd = _Round(est, X, Xv, 1.0)
    base = identical_merge(single_root(est.init))
    new, k = rnd.run(base, 0.2, lambda: rnd.train_routing(base))
    assert k > 0 and rnd._troute[0] is new
    D = rnd._troute[1]
    assert D.n_nodes == new.n_nodes and D.n_rows == len(X)
    # every row reaches the root, and a product's rows reach each of its children
    assert len(D.rows(int(new.roots[0]))) == len(X)
    for p in np.flatnonzero(new.kind == 1):
        rp = D.rows(int(p))
        for c in new.child[new.child_ptr[p]:new.child_ptr[p + 1]]:
            assert np.isin(rp, D.rows(int(c))).all()


@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
def test_validation_values_of_a_few_nodes_are_those_of_the_whole_model(trees, leaves):
    """A few nodes are evaluated on the sub-network below them: the same bits."""
    from spnc.learn._merge_round import _Round
    from spnc.learn.routing import node_values
    X, Xv, tr = trees
    spn = identical_merge(single_root(tr[("latent", leaves)]))
    rnd = _Round(Merge(init=spn), X, Xv, 1.0)
    rng = np.random.default_rng(0)
    for nodes in ([0], rng.choice(spn.n_nodes - 1, size=3, replace=False), spn.roots, np.arange(spn.n_nodes)):
        assert np.array_equal(rnd.valid_values(spn, nodes), node_values(spn, Xv, nodes).T)


def test_bernoulli_refit_counts_each_leaf_on_its_rows(trees):
    """All Bernoulli leaves at once: each p is (ones + alpha) / (rows + 2 alpha) of the
    rows that reached it, bit for bit; a leaf no row reached keeps its p."""
    from spnc.learn._refit import refit_from_routing
    X, _, tr = trees
    spn = tr[("latent", "univariate")]
    R = route(spn, X)
    free = np.ones(spn.n_nodes, dtype=bool)
    t = spn.leaf_tables["bernoulli"]
    lost = int(t.node[0])
    R = R.tolil()
    R[:, lost] = False
    R = R.tocsc()
    got = refit_from_routing(spn, X, R, np.zeros(spn.n_edges), free, 0.5).leaf_tables["bernoulli"].params["p"]
    for i, n in enumerate(t.node.tolist()):
        r, v = rows_of(R, n), int(t.var[i])
        want = float(t.params["p"][i]) if r.size == 0 else float((X[r, v].sum() + 0.5) / (r.size + 1.0))
        assert got[i] == want


@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
def test_leaf_keys_that_follow_gathered_and_refitted_leaves_are_the_fresh_ones(trees, leaves, monkeypatch):
    """Tables made by gathering leaves, or by a refit editing some, carry the other
    leaves' keys over; at every identical merge of a fit they equal keys made afresh."""
    from spnc.learn import _graphedit, merge as merge_mod
    X, Xv, tr = trees
    seen = []
    real = merge_mod.hash_cons_changed

    def check(spn, changed):
        for t in spn.leaf_tables.values():
            memo = t.__dict__.get("_leaf_keys")
            if memo is not None and memo[0] == t.content_key():
                seen.append(t.name)
                assert memo[1] == _graphedit._leaf_keys(t)
        return real(spn, changed)
    monkeypatch.setattr(merge_mod, "hash_cons_changed", check)
    Merge(init=tr[("latent", leaves)], epsilon=(1e-3, 0.01, 0.1)).fit(X, X_valid=Xv)
    assert seen or leaves == "univariate"       # Bernoulli leaves are keyed as columns: no keys made


def test_scope_index_follows_gathered_leaves_and_equals_a_fresh_one(trees):
    """Scope lengths and concatenated scopes kept on a table pass to a table gathered
    from it, equal to those made from its own scopes."""
    from spnc._validation import scope_index
    _, _, tr = trees
    t = tr[("latent", "chowliu")].leaf_tables["cltree"]
    scope_index(t)
    idx = np.arange(len(t))[::-1][: max(1, len(t) - 1)]
    g = type(t).gather(t.node[idx], [(t, idx, np.arange(len(idx)))])
    assert "_scope_index" in g.__dict__
    kept = scope_index(g)
    del g.__dict__["_scope_index"]
    fresh = scope_index(g)
    assert all(np.array_equal(a, b) for a, b in zip(kept, fresh))


@pytest.mark.parametrize("seed", range(5))
def test_descendants_by_levels_equal_a_plain_loop(seed):
    rng = np.random.default_rng(seed)
    spn = spnc.compile(random_spn(rng, [2, 3, 2, 2, 4], depth=4, share=0.4))
    start = rng.choice(spn.n_nodes, size=3, replace=False)
    want = np.zeros(spn.n_nodes, dtype=bool)
    want[start] = True
    for n in range(spn.n_nodes - 1, -1, -1):
        if want[n] and spn.kind[n] < 2:
            want[spn.child[spn.child_ptr[n]:spn.child_ptr[n + 1]]] = True
    assert np.array_equal(descendants(spn, start), want)


def test_descendants_of_a_chain_deeper_than_the_level_steps():
    node = spnc.Bernoulli(0, 0.5)
    for k in range(100):
        node = spnc.Sum([node, spnc.Bernoulli(0, (k + 1) / 102)], [0.5, 0.5])
    spn = spnc.compile(node)
    top = int(spn.roots[0])
    assert descendants(spn, [top]).all()
    low = int(spn.child[spn.child_ptr[top]])       # one level down: all but the root
    assert descendants(spn, [low]).sum() == spn.n_nodes - 2


def test_bernoulli_refit_counts_each_leaf_rows(trees):
    """Bernoulli leaves refit from the routing (a matrix or a carried Routing, with or
    without the transposed codes): p = (ones + alpha) / (rows + 2 alpha) of each free
    leaf's own rows, to the bit; leaves no row reached and fixed leaves keep theirs."""
    from spnc.learn._refit import refit_from_routing
    X, _, tr = trees
    spn = identical_merge(single_root(tr[("latent", "univariate")]))
    R = route(spn, X)
    t = spn.leaf_tables["bernoulli"]
    free = np.zeros(spn.n_nodes, dtype=bool)
    free[t.node[::2]] = True
    R = R.tolil()
    R[:, int(t.node[0])] = False            # a free leaf no row reached
    R = R.tocsc()
    ec = np.zeros(spn.n_edges)
    codes = X.astype(np.uint8)
    want = t.params["p"].copy()
    for i, n in enumerate(t.node.tolist()):
        r = R.indices[R.indptr[n]:R.indptr[n + 1]]
        if free[n] and r.size:
            want[i] = (float(X[r, t.var[i]].sum()) + 0.5) / (r.size + 1.0)
    for Rx in (R, Routing.of(R)):
        for by_var in (None, np.ascontiguousarray(codes.T), np.ascontiguousarray(codes.T, dtype=np.int32)):
            got = refit_from_routing(spn, X, Rx, ec, free, 0.5, codes, by_var).leaf_tables["bernoulli"].params["p"]
            assert np.array_equal(got, want)


def test_compiled_run_copies_and_counts_check_their_ranges():
    from spnc.learn._routing import copy_runs, count_codes
    src = np.arange(10, dtype=np.int32)
    dst = np.zeros(6, dtype=np.int64)
    copy_runs(src, np.array([7, 0]), np.array([3, 3]), dst, np.array([0, 3]))
    assert dst.tolist() == [7, 8, 9, 0, 1, 2]
    with pytest.raises(ValueError, match="out of range"):
        copy_runs(src, np.array([8]), np.array([3]), dst, np.array([0]))
    codes = np.array([[1, 0, 1], [0, 1, 1]], dtype=np.uint8)
    assert count_codes(codes, np.array([1, 0]), np.array([0, 2, 3]), np.array([1, 2, 0])).tolist() == [2, 1]
    with pytest.raises(ValueError, match="out of range"):
        count_codes(codes, np.array([0]), np.array([0, 1]), np.array([3]))
