"""Node values kept from model to model while merging (:mod:`spnc.learn._nodevalues`) and
the compiled pass over some nodes under them, against whole sweeps, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import _infer
from spnc._kinds import MARGINAL
from spnc._sweep import graph_of, leaf_states, transposed_chunk
from spnc.learn import Merge, _merge_round, _nodevalues
from spnc.learn._leafcache import LeafCache
from spnc.learn.routing import node_values

from conftest import learned_trees, merge_data, random_spn

B = _infer.BLOCK


def _same(a, b) -> bool:
    return a.shape == b.shape and np.array_equal(np.ascontiguousarray(a).view(np.int64),
                                                 np.ascontiguousarray(b).view(np.int64))


def _models():
    X, Xv = merge_data()
    rng = np.random.default_rng(3)
    card = [2, 3, 2, 4, 2]
    mixed = spnc.compile(random_spn(rng, card, depth=4))
    Xm = np.column_stack([rng.integers(0, k, size=150) for k in card]).astype(np.float64)
    Xm[rng.random(Xm.shape) < 0.2] = np.nan          # missing values: leaves sum them out
    trees = learned_trees(X)
    return [(trees["latent", "chowliu"], Xv), (trees["observed", "univariate"], Xv), (mixed, Xm)]


@pytest.mark.parametrize("seed", range(3))
def test_some_nodes_from_given_children_are_a_sweeps_values(seed):
    """forward_some: random nodes given (their values placed in their slots), every other
    one computed from its children in scattered slots: a whole sweep's values."""
    rng = np.random.default_rng(seed)
    for spn, X in _models():
        n, N = X.shape[0], spn.n_nodes
        nb = -(-n // B)
        want = node_values(spn, X, np.arange(N), by_node=True)
        states, matrix, _ = leaf_states(spn, MARGINAL)
        given = rng.random(N) < 0.4
        for t in matrix:
            given[t.node] = True                      # matrix leaves are always given
        slot = rng.permutation(N + 7)[:N]
        P = np.full((nb, N + 7, B), np.nan)
        pad = np.zeros((N, nb * B))
        pad[:, :n] = want
        P[:, slot[given], :] = pad[given].reshape(-1, nb, B).transpose(1, 0, 2)
        XT = transposed_chunk(X, 0, n)
        _infer.forward_some(graph_of(spn), states, XT, np.zeros((1, 1)), P, slot[spn.child].astype(np.int32),
                            slot.astype(np.int32), np.flatnonzero(~given).astype(np.int64), MARGINAL, 1)
        got = P[:, slot, :].transpose(1, 0, 2).reshape(N, -1)[:, :n]
        assert _same(got, want)


def test_a_store_of_a_model_is_a_sweeps_values():
    """Every node's values and single entries of them from a fresh store, a full one
    (dropped and recomputed) and one too small for the model (None)."""
    for spn, X in _models():
        want = node_values(spn, X, np.arange(spn.n_nodes), by_node=True)
        nodes = np.random.default_rng(0).permutation(spn.n_nodes)
        cache = LeafCache(X, MARGINAL, checked_by=spn)
        store = _nodevalues.NodeValues(cache)
        assert _same(store.values(spn, nodes), want[nodes])
        cols = np.arange(len(nodes)) % X.shape[0]
        assert _same(store.column_values(spn, nodes, cols), want[nodes, cols])
        row = 8 * B * -(-X.shape[0] // B)
        tight = _nodevalues.NodeValues(cache, max_bytes=3 * spn.n_nodes * row, keep=8)
        other = spnc.SPN.from_arrays(spn.kind, spn.child_ptr, spn.child, spn.weight, spn.leaf_tables,
                                     spn.cardinality, var_type=spn.var_type)
        for m in (spn, other, spn, other):            # no slot left: the kept ones dropped
            assert _same(tight.values(m, nodes), want[nodes])
        assert tight.used <= 3 * spn.n_nodes
        assert _nodevalues.NodeValues(cache, max_bytes=row).values(spn, nodes) is None


@pytest.mark.parametrize("split, leaves", [("latent", "chowliu"), ("latent", "univariate"),
                                           ("observed", "chowliu")])
def test_merging_reads_a_sweeps_marginals_from_the_store(split, leaves, monkeypatch):
    """Through a whole threshold path (models made from models: redirects, refits, Chow-Liu
    replacements, identical merges), every value of the indicator evidence the store hands
    out is a sweep's of the model asked about, models take values from the one they were
    made from, and the fit is the one without the store."""
    X, Xv = merge_data()
    tree = learned_trees(X)[split, leaves]
    seen = {"columns": 0, "kept": 0, "computed": 0}
    real_columns, real_compute = _nodevalues.NodeValues.column_values, _nodevalues.NodeValues._compute

    def column_values(self, spn, nodes, cols):
        got = real_columns(self, spn, nodes, cols)
        all_ = node_values(spn, self.cache.X, np.arange(spn.n_nodes), cache=self.cache, by_node=True)
        assert got is not None and _same(got, all_[nodes, cols])
        seen["columns"] += 1
        return got

    def compute(self, spn, at):
        seen["kept"] += int(np.count_nonzero(at >= 0))
        seen["computed"] += int(np.count_nonzero(at < 0))
        return real_compute(self, spn, at)
    monkeypatch.setattr(_nodevalues.NodeValues, "column_values", column_values)
    monkeypatch.setattr(_nodevalues.NodeValues, "_compute", compute)
    m = Merge(init=tree, epsilon=(1e-3, 0.01, 0.1, 0.3)).fit(X, X_valid=Xv)
    assert seen["columns"] >= 2 and (seen["kept"] > 0 or split == "observed")
    monkeypatch.setattr(_merge_round, "NodeValues", _NoStore)
    plain = Merge(init=tree, epsilon=(1e-3, 0.01, 0.1, 0.3)).fit(X, X_valid=Xv)
    assert [h["valid_ll"] for h in m.history_] == [h["valid_ll"] for h in plain.history_]
    assert _same(m.spn_.weight, plain.spn_.weight) and np.array_equal(m.spn_.child, plain.spn_.child)


class _NoStore:
    """A store that keeps nothing: every caller sweeps."""

    def __init__(self, *a, **k):
        pass

    def link(self, *a):
        pass

    def values(self, *a):
        return None

    column_values = slots_of = values


def test_changed_nodes_keeps_its_answer_per_model_and_mapping():
    """The kept answer is the computed one, only for the same old model and mapping
    objects, and a reparameterised copy of the model does not take it over."""
    from spnc.learn._hashcons import changed_nodes
    X, _ = merge_data()
    old = learned_trees(X)["latent", "univariate"]
    w = old.weight.copy()
    s = int(np.flatnonzero(old.kind == 0)[0])
    a, b = old.child_ptr[s], old.child_ptr[s + 1]
    w[a:b] = w[a:b][::-1]
    new = old._reparameterised(w, old.leaf_tables)
    target = np.arange(old.n_nodes)
    first = changed_nodes(old, new, target)
    assert first[s] and first.sum() < old.n_nodes
    first[:] = True                                   # the caller's copy, not the kept one
    assert np.array_equal(changed_nodes(old, new, target), changed_nodes(old, new, target.copy()))
    assert not changed_nodes(old, new, target)[0]
    assert "_changed_from" not in new._reparameterised(new.weight, new.leaf_tables).__dict__
