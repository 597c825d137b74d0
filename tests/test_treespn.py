"""TreeSPN (Chow-Liu trees under every sum node of a LearnSPN structure, then EM): its
structure, thresholds, initialisations and the EM step that never loses on validation."""
from __future__ import annotations

import numpy as np
import pytest

from test_learnspn import check_normalised, check_valid, planted


def test_treespn_adds_trees_under_every_sum_and_em_never_loses_on_validation():
    from spnc.learn.treespn import TreeSPN
    rng = np.random.default_rng(21)
    X = planted(rng, n=1500, blocks=((0, 1, 2, 3), (4, 5, 6, 7)))
    X[:, 1] ^= X[:, 5] & (rng.random(1500) < 0.3)            # some cross-block dependence
    tr, va = X[:1000], X[1000:]
    m = TreeSPN(n_trees=3, max_depth=2, min_instances=20, random_state=0).fit(tr, X_valid=va)
    check_normalised(m, [2] * 8)
    check_valid(m.spn_)
    s = m.structure_
    tree_code = s.leaf_tables["cltree"].code
    for n in np.flatnonzero(s.kind == 0):                    # every sum has >= 3 tree children
        kids = s.child[s.child_ptr[n]:s.child_ptr[n + 1]]
        assert np.count_nonzero(s.kind[kids] == tree_code) >= 3
    assert m.score(va) >= float(s.log_likelihood(va).mean()) - 1e-12
    assert m.spn_.learner["name"] == "treespn"


def test_treespn_thresholds_and_initialisations():
    from spnc.learn.treespn import TreeSPN, g_factor_for
    # the paper's p-values as G-test factors: 2 * g_factor is the chi-square(1) critical value
    assert [round(g_factor_for(p), 3) for p in (0.1, 0.01, 0.001)] == [1.353, 3.317, 5.414]
    rng = np.random.default_rng(5)
    X = planted(rng, n=900, blocks=((0, 1, 2), (3, 4, 5)))
    tr, va = X[:600], X[600:]
    for init in ("clusters", "random"):
        m = TreeSPN(n_trees=3, max_depth=2, min_instances=20, tree_init=init, random_state=0).fit(tr, X_valid=va)
        check_normalised(m, [2] * 6)
        assert m.score(va) >= float(m.structure_.log_likelihood(va).mean()) - 1e-12
    # the smoothed start is under-fitted: EM raises its training log-likelihood
    m = TreeSPN(n_trees=3, max_depth=2, min_instances=20, tree_alpha=10.0, random_state=0).fit(tr)
    assert m.score(tr) > float(m.structure_.log_likelihood(tr).mean())


def test_treespn_refuses_validation_rows_as_y():
    from spnc.errors import DataError
    from spnc.learn.treespn import TreeSPN
    X = planted(np.random.default_rng(0), n=200, blocks=((0, 1), (2, 3)))
    with pytest.raises(DataError, match="X_valid"):
        TreeSPN(n_trees=2, max_depth=1).fit(X[:100], X[100:])
