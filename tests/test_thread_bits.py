"""Learners whose E-step adds expected counts over rows (soft EM and the learners that
refine with it) give the same bits on one and two threads: the backward pass adds its
per-row contributions in fixed groups of row blocks, in group order, and the chunks of rows
do not depend on the thread count."""
import numpy as np
import pytest

from spnc.learn import EM, LearnSPN, Prometheus, TreeSPN


def _binary(n=3000, d=16, seed=0):
    """Rows from a mixture of three random Bernoulli profiles (enough row blocks for several
    reduction groups)."""
    rng = np.random.default_rng(seed)
    profiles = rng.uniform(0.1, 0.9, size=(3, d))
    z = rng.integers(0, 3, size=n)
    return (rng.random((n, d)) < profiles[z]).astype(np.float64)


def _real(n=2000, d=4, seed=1):
    rng = np.random.default_rng(seed)
    means = rng.normal(0, 3, size=(3, d))
    z = rng.integers(0, 3, size=n)
    X = means[z] + rng.normal(size=(n, d))
    X[:, 1] += 0.8 * X[:, 0]
    return X


def _arrays(spn) -> dict:
    out = {k: v for k, v in spn._state().items() if isinstance(v, np.ndarray)}
    for name, table in spn.leaf_tables.items():
        out[f"{name}.node"] = table.node
        out.update({f"{name}.{a}": np.asarray(v) for a, v in table.to_arrays().items()})
    return out


def _same_bits(make, X):
    one, two = make(1).fit(X).spn_, make(2).fit(X).spn_
    a, b = _arrays(one), _arrays(two)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].shape == b[k].shape, k
        assert a[k].tobytes() == b[k].tobytes(), f"{k} differs between 1 and 2 threads"


def test_backward_counts_same_bits():
    spn = LearnSPN(min_instances=200, g_factor=5, random_state=0).fit(_binary()).spn_
    X = _binary(seed=3)
    w = np.random.default_rng(4).uniform(0.1, 2.0, size=X.shape[0])
    one = spn.backward(X, sample_weight=w, n_threads=1)
    two = spn.backward(X, sample_weight=w, n_threads=2)
    for k in ("log_likelihood", "edge_counts", "node_counts"):
        assert one[k].tobytes() == two[k].tobytes(), k


@pytest.mark.parametrize("data", ["binary", "real"])
def test_soft_em_same_bits(data):
    X = _binary() if data == "binary" else _real()
    splitter = "gvs" if data == "binary" else "correlation"
    init = LearnSPN(splitter=splitter, min_instances=200, g_factor=5, random_state=0).fit(X).spn_
    _same_bits(lambda n: EM(init=init, max_iter=5, random_state=0, n_threads=n), X)


def test_learnspn_em_refine_same_bits():
    _same_bits(lambda n: LearnSPN(min_instances=100, g_factor=5, sample_rows=1000, refine="em", refine_iter=3,
                                  random_state=0, n_threads=n), _binary())


@pytest.mark.parametrize("data", ["binary", "real"])
def test_prometheus_same_bits(data):
    X = _binary() if data == "binary" else _real()
    _same_bits(lambda n: Prometheus(refine="em", refine_iter=3, max_depth=2, n_restarts=1, random_state=0,
                                    n_threads=n), X)


def test_treespn_same_bits():
    _same_bits(lambda n: TreeSPN(n_trees=2, max_depth=2, em_max_iter=3, n_restarts=1, random_state=0,
                                 n_threads=n), _binary())


def test_small_chunks_same_bits(monkeypatch):
    """Chunks held small by the leaf-matrix budget (big models) are as long for one thread as
    for two: the totals' grouping follows the chunks."""
    import spnc.learn._em_pass as em_pass
    X = _real()
    init = LearnSPN(splitter="correlation", min_instances=200, random_state=0).fit(X).spn_
    monkeypatch.setattr(em_pass, "_CACHE_VALUES", init.n_leaves)     # one row's worth: the floor decides
    _same_bits(lambda n: EM(init=init, max_iter=3, random_state=0, n_threads=n), X)


def test_hard_em_weighted_same_bits():
    """Hard EM's counts of fractional row weights (the selection kernel's totals)."""
    X = _binary()
    w = np.random.default_rng(5).uniform(0.1, 2.0, size=X.shape[0])
    init = LearnSPN(min_instances=200, g_factor=5, random_state=0).fit(X).spn_
    one = EM(init=init, variant="hard", max_iter=3, n_threads=1).fit(X, sample_weight=w).spn_
    two = EM(init=init, variant="hard", max_iter=3, n_threads=2).fit(X, sample_weight=w).spn_
    assert one.weight.tobytes() == two.weight.tobytes()
