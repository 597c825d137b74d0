"""An M-step's model (SPN._reparameterised) keeps the compiled structure of the model it
came from (Graph.reweighted) and checks only what changed: every query must give the bits
of the same model compiled from scratch, and bad new parameters must still be refused."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc._sweep import graph_of
from spnc.errors import SpncError
from spnc.learn.em import EM
from spnc.nodes import Product

from test_backward_visit import _models    # a tree, a DAG, a mixture of roots


def _data(spn, n=500):
    rng = np.random.default_rng(5)
    if spn.combine == "single":
        X = spn.sample(n, seed=3)
    else:
        X = np.column_stack([rng.normal(0.5, 1.5, n), rng.integers(0, 2, n)]).astype(float)
    Xm = X.copy()
    Xm[rng.random(X.shape) < 0.2] = np.nan
    return X, Xm


def _one_m_step(spn, X, floor=1e-10):
    em = EM(init=spn, weight_floor=floor, check_leaves=False, n_threads=1)
    em._setup(spn)
    em.rejected_ = 0
    w = np.ones(len(X))
    spn.log_likelihood(X[:5])                 # compiled, so the M-step has a graph to carry over
    return em._mstep(spn, em._estep(spn, X, w, hard=False), X, w)


def _answers(spn, X, Xm):
    out = [spn.log_likelihood(X, n_threads=1), spn.log_likelihood(Xm, n_threads=2)]
    b = spn.backward(Xm, n_threads=2)
    out += [b["log_likelihood"], b["edge_counts"], b["node_counts"]]
    if spn.combine == "single":
        out += list(spn.mpe(Xm, n_threads=1)) + [spn.sample(50, seed=4)]
    return out


@pytest.mark.parametrize("which", range(3))
def test_an_m_steps_model_answers_as_if_compiled_afresh(which):
    spn = _models(11)[which]
    X, Xm = _data(spn)
    new = _one_m_step(spn, X)
    old_g, new_g = graph_of(spn), new.__dict__["_compiled"]
    assert new_g is not old_g and new_g.child_ is old_g.child_ and new_g.pslot_ is old_g.pslot_
    assert new_g.visit_cache is old_g.visit_cache is not None
    np.testing.assert_array_equal(new_g.w_, new.weight)
    fresh = new.copy()                        # built from its arrays: a new compile
    assert graph_of(fresh).pslot_ is not old_g.pslot_
    for got, want in zip(_answers(new, X, Xm), _answers(fresh, X, Xm)):
        np.testing.assert_array_equal(got, want)


def test_sweeps_try_plain_doubles_again_after_an_m_step():
    spn = _models(11)[0]
    X, _ = _data(spn)
    g = graph_of(spn)
    g_plain = g.plain
    spn.__dict__["_compiled"] = spnc._graph.Graph(spn.kind, spn.child_ptr, spn.child, spn.logw, spn.leaf_slot,
                                                  spn.roots, spn.n_leaves, spn.weight, plain=False)
    new = _one_m_step(spn, X)
    assert new.__dict__["_compiled"].plain == g_plain


def test_reweighted_refuses_weights_of_another_length():
    g = graph_of(_models(11)[1])
    with pytest.raises(ValueError, match="edge weights"):
        g.reweighted(np.zeros(3), np.ones(3))


def test_bad_new_parameters_are_still_refused():
    spn = _models(11)[0]
    bern = spn.leaf_tables["bernoulli"]
    p = bern.params["p"].copy()
    p[0] = 1.5
    with pytest.raises(SpncError, match="outside"):
        spn._reparameterised(spn.weight, {**spn.leaf_tables, "bernoulli": bern.with_params({"p": p})})
    w = spn.weight.copy()
    w[np.flatnonzero(spn.kind[np.repeat(np.arange(spn.n_nodes), np.diff(spn.child_ptr))] == 0)[0]] += 0.5
    with pytest.raises(SpncError, match="add up to"):
        spn._reparameterised(w, spn.leaf_tables)


def test_a_table_over_other_variables_is_checked_again():
    # the variable-type check is skipped only for tables whose scopes are the old ones
    spn = spnc.compile(Product([spnc.Bernoulli(0, 0.3), spnc.Gaussian(1, 0.0, 1.0)]), cardinality=[2, 0])
    bern = spn.leaf_tables["bernoulli"]
    moved = type(bern).from_arrays(bern.node, [np.array([1], dtype=np.int32)], bern.to_arrays())
    with pytest.raises(SpncError, match="real-valued variable 1"):
        spn._reparameterised(spn.weight, {**spn.leaf_tables, "bernoulli": moved})


def test_scopes_checked_once_are_not_rechecked_by_params_only_copies():
    """EM's M-step refits parameters on copies that share the leaves' scopes; the scope
    check passed once is not repeated for them, and a table with other scopes is checked."""
    from spnc.errors import StructureError
    from spnc.leaves.univariate import BernoulliLeaves

    card = np.array([2, 2, 2])
    t = BernoulliLeaves(np.array([3, 4]), [np.array([0]), np.array([2])], {"p": np.array([0.2, 0.7])})
    t.validate(card)
    new = t.with_params({"p": np.array([0.4, 0.1])})
    assert new.__dict__.get("_scopes_checked") is t.scopes
    new.validate(card)
    with pytest.raises(StructureError, match="outside"):
        t.with_params({"p": np.array([0.4, 1.5])}).validate(card)     # parameters still checked
    bad = BernoulliLeaves(t.node, [np.array([0, 1]), np.array([2])], {"p": np.array([0.4, 0.1])})
    with pytest.raises(StructureError, match="exactly one variable"):
        bad.validate(card)
