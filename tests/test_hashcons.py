"""Hash-consing after a small edit (spnc.learn._hashcons) against hash-consing every node."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc.learn import Merge, _hashcons, merge as merge_mod
from spnc.learn._graphedit import hash_cons
from spnc.learn._hashcons import changed_nodes, hash_cons_changed
from spnc.learn._merge_round import redirect_target
from spnc.learn._redirect import redirect
from spnc.learn.merge import identical_merge

from conftest import learned_trees, random_spn


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("seed", range(30))
def test_after_redirecting_random_nodes_it_equals_hash_consing_every_node(seed, fast, monkeypatch):
    """(``fast``: the check that no changed node has another's key tried at once.)"""
    monkeypatch.setattr(_hashcons, "_DISTINCT_MIN", 0 if fast else 1 << 40)
    rng = np.random.default_rng(seed)
    card = [2, 2, 3, 2]
    old = identical_merge(spnc.compile(random_spn(rng, card, depth=3, share=0.3, leaf="bernoulli"),
                                       cardinality=card))
    # redirect some nodes to others of the same scope and kind (children before parents)
    rep = np.arange(old.n_nodes)
    for n in rng.permutation(old.n_nodes)[: max(1, old.n_nodes // 6)].tolist():
        same = [m for m in range(n) if old.kind[m] == old.kind[n] and rep[m] == m
                and np.array_equal(old.node_scope(m), old.node_scope(n))]
        if same and rep[n] == n and not np.isin(n, rep[rep != np.arange(old.n_nodes)]):
            rep[n] = same[int(rng.integers(len(same)))]
    moved = np.flatnonzero(rep != np.arange(old.n_nodes))
    new, keep = redirect(old, rep)
    target = redirect_target(keep, rep, moved, old.n_nodes)
    changed = changed_nodes(old, new, target)
    assert np.array_equal(hash_cons_changed(new, changed), hash_cons(new))
    # nothing changed: nothing to key, nothing merged
    same = changed_nodes(old, old, np.arange(old.n_nodes))
    assert not same.any() and np.array_equal(hash_cons_changed(old, same), np.arange(old.n_nodes))


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("split", ["latent", "observed"])
@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
def test_every_identical_merge_of_a_fit_equals_hash_consing_every_node(split, leaves, fast, monkeypatch):
    monkeypatch.setattr(_hashcons, "_DISTINCT_MIN", 0 if fast else 1 << 40)
    rng = np.random.default_rng(0)
    gen = spnc.compile(random_spn(rng, [2] * 7, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(900, seed=0)
    tree = learned_trees(X[:600])[(split, leaves)]
    calls = []
    real = merge_mod.hash_cons_changed

    def check(spn, changed):
        got = real(spn, changed)
        calls.append(np.array_equal(got, hash_cons(spn)))
        return got
    monkeypatch.setattr(merge_mod, "hash_cons_changed", check)
    Merge(init=tree, epsilon=(1e-3, 0.01, 0.1, 0.4)).fit(X[:600], X_valid=X[600:])
    assert calls and all(calls)


@pytest.mark.parametrize("leaf", ["bernoulli", "mixed"])
def test_equal_leaves_are_shared_as_hash_consing_every_node_shares_them(leaf):
    """Leaves of equal variable and parameters (compared as columns of numbers where
    the table allows, else by key) take the first of them, as in hash_cons."""
    card = [2, 2, 3]
    for seed in range(10):
        spn = spnc.compile(random_spn(np.random.default_rng(seed), card, depth=3, share=0.0, leaf=leaf),
                           cardinality=card)
        changed = np.ones(spn.n_nodes, dtype=bool)
        assert np.array_equal(hash_cons_changed(spn, changed), hash_cons(spn))
    b = [spnc.Bernoulli(0, 0.25), spnc.Bernoulli(0, 0.25), spnc.Bernoulli(1, 0.5), spnc.Bernoulli(1, 0.5)]
    spn = spnc.compile(spnc.Sum([spnc.Product([b[0], b[2]]), spnc.Product([b[1], b[3]])], [0.5, 0.5]))
    rep = hash_cons_changed(spn, np.ones(spn.n_nodes, dtype=bool))
    assert np.array_equal(rep, hash_cons(spn)) and (rep != np.arange(spn.n_nodes)).sum() >= 3


@pytest.mark.parametrize("split", ["latent", "observed"])
@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
def test_identical_merge_keys_every_node_as_hash_consing_does(split, leaves, monkeypatch):
    """identical_merge of a model with no earlier one keys every node as changed
    (columns of numbers for Bernoulli and indicator leaves): the model hash_cons gives,
    array for array, on learned trees and random DAGs with shared equal leaves."""
    rng = np.random.default_rng(3)
    gen = spnc.compile(random_spn(rng, [2] * 7, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(600, seed=1)
    card = [2, 2, 3]
    models = [learned_trees(X)[(split, leaves)]] + [
        spnc.compile(random_spn(np.random.default_rng(s), card, depth=3, share=0.3, leaf="mixed"), cardinality=card)
        for s in range(5)]
    got = [identical_merge(m) for m in models]
    monkeypatch.setattr(merge_mod, "hash_cons_changed", lambda spn, changed: hash_cons(spn))
    for a, m in zip(got, models):
        b = identical_merge(m)
        assert a.n_nodes == b.n_nodes and np.array_equal(a.kind, b.kind) and np.array_equal(a.child, b.child)
        assert np.array_equal(a.weight, b.weight)
        assert all(np.array_equal(a.leaf_tables[k].node, b.leaf_tables[k].node) for k in a.leaf_tables)
        assert all(a.leaf_tables[k].content_key() == b.leaf_tables[k].content_key() for k in a.leaf_tables)


def test_a_changed_node_with_an_unchanged_nodes_key_is_not_called_distinct(monkeypatch):
    """Two sums of one key (one changed) share a hash: the check decides nothing and the
    nodes are keyed one by one (the changed one merged into the other); with other
    weights the check proves the keys distinct."""
    from spnc.graph import SPN
    monkeypatch.setattr(_hashcons, "_DISTINCT_MIN", 0)
    leaves = spnc.compile(spnc.Sum([spnc.Bernoulli(0, 0.3), spnc.Bernoulli(0, 0.6)], [0.5, 0.5]))
    for w, merged in (([0.4, 0.6], True), ([0.6, 0.4], False)):
        spn = SPN.from_arrays(np.array([2, 2, 0, 0, 0], dtype=np.uint8), np.array([0, 0, 0, 2, 4, 6]),
                              np.array([0, 1, 0, 1, 2, 3]), np.array([0.4, 0.6] + w + [0.5, 0.5]),
                              {"bernoulli": leaves.leaf_tables["bernoulli"]}, leaves.cardinality)
        changed = np.array([False, False, False, True, True])
        assert _hashcons._distinct(spn, np.arange(5), changed & (spn.kind < 2)) is not merged
        rep = hash_cons_changed(spn, changed)
        assert np.array_equal(rep, hash_cons(spn)) and bool(rep[3] == 2) is merged
