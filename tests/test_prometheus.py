"""Prometheus: the severing chain, DAG sharing, validity, normalisation, the O(d^2) size of
a call, the sampled variant, determinism, persistence and parameter errors."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree

import spnc
from spnc import ParameterError
from spnc.learn import Prometheus
from spnc.learn.structure import ObservedSplit
from spnc.learn import _prometheus as PK
from spnc.learn._prometheus_build import chain_partitions, sampled_pairs


def _binary(n=1500, d=7, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.random(n) < 0.5
    X = np.empty((n, d), dtype=np.uint8)
    for j in range(d):
        p = np.where(z, 0.2 + 0.6 * (j % 2), 0.7 - 0.4 * (j % 3 == 0))
        X[:, j] = rng.random(n) < p
    X[:, 1] ^= X[:, 0] & (rng.random(n) < 0.9)
    return X


def _real(n=800, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] += 2 * X[:, 0]
    X[:, 3] -= X[:, 2]
    X[n // 2:] += 3.0
    return X


def _all_states(d):
    return np.array(list(itertools.product([0, 1], repeat=d)), dtype=np.float64)


def test_chain_is_figure_1():
    # A-B 0.9, C-D 0.8, B-C 0.2 (weakest), A-C 0.1, B-D 0.3: the MST is A-B, C-D, B-D,
    # severed weakest first: {A,B}{C,D} -> {A,B}{C}{D} -> {A}{B}{C}{D}
    w = {(0, 1): 0.9, (2, 3): 0.8, (1, 2): 0.2, (0, 2): 0.1, (1, 3): 0.3}
    edges = sorted(w, key=lambda e: -w[e])
    eu = np.array([e[0] for e in edges], dtype=np.int64)
    ev = np.array([e[1] for e in edges], dtype=np.int64)
    parts, members = chain_partitions(4, eu, ev, None)
    got = [sorted(sorted(members(b).tolist()) for b in p) for p in parts]
    assert got == [[[0, 1], [2, 3]], [[0, 1], [2], [3]], [[0], [1], [2], [3]]]


@pytest.mark.parametrize("seed", range(5))
def test_spanning_chain_is_a_maximum_spanning_tree(seed):
    rng = np.random.default_rng(seed)
    d = 12
    M = rng.random((d, d))
    M = (M + M.T) / 2
    u, v = np.triu_indices(d, 1)
    order = np.argsort(-M[u, v], kind="stable")
    tree, born, died, ordr, start, size = PK.spanning_chain(d, u[order].astype(np.int64), v[order].astype(np.int64))
    assert tree.size == d - 1 and sorted(ordr.tolist()) == list(range(d))
    ours = M[u[order][tree], v[order][tree]].sum()
    ref = -minimum_spanning_tree(np.triu(-M, 1)).sum()      # max spanning tree weight
    assert ours == pytest.approx(ref)
    assert size[-1] == d and born[-1] == d - 1                 # the last merge is the whole scope


def test_sampled_pairs_are_d_log_d():
    rng = np.random.default_rng(0)
    for d in (5, 64, 784):
        u, v = sampled_pairs(d, rng)
        assert np.all(u < v) and u.size <= d * int(np.ceil(np.log2(d)))
        assert len(set(zip(u.tolist(), v.tolist()))) == u.size


@pytest.mark.parametrize("kw", [{}, {"affinity": "correlation"}, {"sampled": True}, {"n_clusters": 3},
                                {"leaf_vars": 3, "base_leaves": "multivariate"}, {"whole_scope": True},
                                {"max_products": 2, "refine": "none"}])
def test_discrete_model_is_normalised(kw):
    X = _binary()
    m = Prometheus(min_instances=200, random_state=0, refine_iter=3, **kw).fit(X)
    p = np.exp(m.spn_.log_likelihood(_all_states(X.shape[1])))
    assert p.sum() == pytest.approx(1.0, abs=1e-9)


def test_real_dag_with_sharing_and_call_size():
    X = _real()
    k = 2
    m = Prometheus(n_clusters=k, min_instances=60, random_state=1, refine="none").fit(X)
    spn, d = m.spn_, X.shape[1]
    parents = np.bincount(spn.child, minlength=spn.n_nodes)
    assert m.n_shared_ == np.count_nonzero(parents > 1) > 0
    # compiled with full checks: completeness and decomposability hold
    spnc.SPN.from_arrays(spn.kind, spn.child_ptr, spn.child, spn.weight, spn.leaf_tables, spn.cardinality)
    # one call: k clusters x (d - 1) products with sum_{b=2}^{d} b edges, O(d^2)
    assert m.layer_edges_[0] <= k * (d * (d + 1) // 2 - 1) + k * (d - 1)
    assert m.max_call_ratio_ <= k
    assert m.layer_nodes_[0] <= 1 + k * (d - 1) + k * (2 * d - 1)
    assert m.layer_edges_.sum() == spn.n_edges
    assert m.layer_nodes_.sum() == spn.n_nodes


def test_every_call_is_within_c_d_squared():
    # each sum node's layer (its products and their edges) is O(s^2) in its s variables;
    # the first layer is O(d^2)
    X = _real(n=3000, d=8)
    for k in (2, 3):
        m = Prometheus(n_clusters=k, min_instances=100, max_depth=3, random_state=0, refine="none").fit(X)
        assert m.max_call_ratio_ <= k       # k chains of <= s - 1 products of <= s factors
        assert m.layer_edges_[0] <= k * X.shape[1] ** 2


def test_sampled_variant_valid_and_used():
    rng = np.random.default_rng(3)
    d = 40
    base = rng.random(d) < 0.5
    z = rng.random(2000) < 0.5
    X = np.where(z[:, None], base, ~base) ^ (rng.random((2000, d)) < 0.1)
    full = Prometheus(min_instances=300, max_products=6, sampled=False, random_state=0, refine="none").fit(X)
    samp = Prometheus(min_instances=300, max_products=6, sampled=True, random_state=0, refine="none").fit(X)
    assert samp.n_sampled_calls_ == samp.n_calls_ > 0 and full.n_sampled_calls_ == 0
    assert samp.score(X) > full.score(X) - 0.05 * abs(full.score(X))
    sub = Prometheus(min_instances=300, sampled=True, random_state=0, refine="none").fit(X[:, :10])
    assert np.exp(sub.spn_.log_likelihood(_all_states(10))).sum() == pytest.approx(1.0, abs=1e-9)


def test_continuous_refinements_and_leaves():
    X = _real(n=600, d=5)
    base = Prometheus(min_instances=80, random_state=0, refine="none").fit(X)
    for refine in ("running_average", "em", "hard"):
        m = Prometheus(min_instances=80, random_state=0, refine=refine, refine_iter=5).fit(X, X_valid=X[:100])
        assert np.isfinite(m.score(X))
        if refine == "em":
            assert m.score(X[:100]) >= base.score(X[:100]) - 1e-9     # validation keeps the best
    mv = Prometheus(min_instances=80, leaf_vars=2, base_leaves="multivariate", random_state=0).fit(X)
    assert "mvgaussian" in mv.spn_.leaf_tables


def test_whole_scope_auto_follows_the_data_type():
    X = _real(n=600, d=4)
    kw = dict(n_clusters=3, min_instances=80, random_state=0, refine="none")
    auto, on = Prometheus(**kw).fit(X).spn_, Prometheus(whole_scope=True, **kw).fit(X).spn_
    assert auto.n_edges == on.n_edges > Prometheus(whole_scope=False, **kw).fit(X).spn_.n_edges
    B = _binary(n=600, d=5)
    kw["min_instances"] = 100
    assert Prometheus(**kw).fit(B).spn_.n_edges == Prometheus(whole_scope=False, **kw).fit(B).spn_.n_edges


def test_deterministic_per_random_state():
    X = _binary(seed=4)
    a = Prometheus(random_state=7, min_instances=150).fit(X).spn_
    b = Prometheus(random_state=7, min_instances=150).fit(X).spn_
    assert a.n_nodes == b.n_nodes and np.array_equal(a.child, b.child) and np.array_equal(a.weight, b.weight)
    Xr = _real()
    a = Prometheus(random_state=7, sampled=True).fit(Xr).spn_
    b = Prometheus(random_state=7, sampled=True).fit(Xr).spn_
    assert np.array_equal(a.child, b.child) and np.allclose(a.log_likelihood(Xr), b.log_likelihood(Xr))


def test_save_load_keeps_parameters(tmp_path):
    X = _binary(n=400, d=5)
    m = Prometheus(n_clusters=3, max_products=2, min_instances=100, random_state=2).fit(X)
    spnc.save(m.spn_, tmp_path / "p.h5")
    back = spnc.load(tmp_path / "p.h5")
    assert back.learner["name"] == "prometheus"
    assert back.learner["params"]["n_clusters"] == 3 and back.learner["params"]["max_products"] == 2
    assert np.array_equal(back.learner["arrays"]["layer_edges"], m.layer_edges_)
    assert np.allclose(back.log_likelihood(X), m.score_samples(X))


def test_single_variable_and_small_data():
    m = Prometheus().fit(np.array([[0], [1], [1]]))
    assert m.spn_.n_vars == 1
    m = Prometheus(min_instances=1000).fit(_binary(n=50, d=4))
    assert np.exp(m.spn_.log_likelihood(_all_states(4))).sum() == pytest.approx(1.0)


@pytest.mark.parametrize("param, value", [("n_clusters", 0), ("affinity", "rdc"), ("max_products", 0),
                                          ("sampled", "sometimes"), ("leaf_vars", 0), ("base_leaves", "tree"),
                                          ("refine", "cccp"), ("min_std", 0.0), ("clustering", "observedx")])
def test_parameter_errors(param, value):
    with pytest.raises(ParameterError, match=f"Prometheus: {param} must be") as err:
        Prometheus(**{param: value}).fit(_binary(n=100, d=3))
    assert err.value.param == param


@pytest.mark.parametrize("clustering", ["observed", ObservedSplit()])
def test_clustering_must_split_rows_only(clustering):
    with pytest.raises(ParameterError, match="clustering must") as err:
        Prometheus(clustering=clustering).fit(_binary(n=100, d=3))
    assert err.value.param == "clustering"


def test_mi_needs_discrete_data():
    with pytest.raises(ParameterError, match="affinity='mi' needs discrete data") as err:
        Prometheus(affinity="mi").fit(_real(n=100, d=4))
    assert err.value.param == "affinity"


def test_cli_learner(tmp_path, capsys):
    from spnc.cli import learn
    np.savetxt(tmp_path / "t.csv", _binary(n=300, d=5), fmt="%d", delimiter=",")
    out = tmp_path / "m.h5"
    assert learn.main([str(tmp_path / "t.csv"), "-o", str(out), "--learner", "prometheus", "--clusters", "3",
                       "--min-instances", "50", "--seed", "1"]) == 0
    assert "learner: prometheus" in capsys.readouterr().out
    params = spnc.load(out).learner["params"]
    assert params["n_clusters"] == 3 and params["min_instances"] == 50 and params["random_state"] == 1
