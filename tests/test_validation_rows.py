"""Validation rows (X_valid) of the learners: refused when a configuration reads them
and they cannot be scored, accepted with a warning when it does not read them."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from spnc import DataError
from spnc.learn import EM, BaggedSPN, ChowLiuTree, LearnSPN, Merge, Prometheus, TreeSPN


@pytest.fixture(scope="module")
def X():
    return (np.random.default_rng(0).random((200, 6)) < 0.4).astype(float)


def _all_nan(X):
    return np.full((4, X.shape[1]), np.nan)


@pytest.mark.parametrize("make, why", [
    (lambda: LearnSPN(min_instances=50), "refine='auto' refines only"),
    (lambda: LearnSPN(min_instances=50, refine="none"), "refine='none'"),
    (lambda: Prometheus(min_instances=50, refine="none"), "refine='none'"),
    (lambda: BaggedSPN(ChowLiuTree(), n_bags=2), "weights='train' and no merge"),
], ids=["LearnSPN", "LearnSPN-none", "Prometheus-none", "BaggedSPN"])
def test_unused_validation_rows_are_ignored_with_a_warning(X, make, why):
    """X_valid that the configuration never reads is accepted unexamined (scikit-learn's
    convention), with a warning; it was refused when it was all NaN."""
    for bad in (_all_nan(X), X[:, :3]):
        with pytest.warns(UserWarning, match=rf"\.fit: X_valid is not used \({re.escape(why)}"):
            make().fit(X, X_valid=bad)


@pytest.mark.parametrize("make", [
    lambda X: LearnSPN(min_instances=50, refine="em"),
    lambda X: LearnSPN(min_instances=50, sample_rows=len(X) // 2),
    lambda X: Prometheus(min_instances=50),
    lambda X: TreeSPN(min_instances=50),
    lambda X: EM(init=ChowLiuTree().fit(X).spn_),
    lambda X: Merge(init=ChowLiuTree().fit(X).spn_),
    lambda X: BaggedSPN(ChowLiuTree(), n_bags=2, weights="valid"),
], ids=["LearnSPN-em", "LearnSPN-sampled", "Prometheus", "TreeSPN", "EM", "Merge", "BaggedSPN-valid"])
def test_used_validation_rows_without_an_observed_value_are_refused(X, make):
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # used: no "not used" warning either
        with pytest.raises(DataError, match="X_valid has no observed value"):
            make(X).fit(X, X_valid=_all_nan(X))



def test_out_of_bag_rows_only_for_learners_that_read_them(X):
    """oob_valid=True with a base learner that reads no X_valid: one warning from the
    ensemble, none from the bags; the bags are those fitted without validation rows."""
    with pytest.warns(UserWarning) as got:
        bag = BaggedSPN(LearnSPN(min_instances=50), n_bags=2, oob_valid=True, random_state=1).fit(X)
    assert [str(w.message) for w in got] == [
        "BaggedSPN: oob_valid=True, but LearnSPN does not use X_valid with these parameters (see its fit); "
        "the bags get no out-of-bag rows"]
    plain = BaggedSPN(LearnSPN(min_instances=50), n_bags=2, random_state=1).fit(X)
    np.testing.assert_array_equal(bag.spn_.log_likelihood(X), plain.spn_.log_likelihood(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BaggedSPN(LearnSPN(min_instances=50, refine="em"), n_bags=2, oob_valid=True, random_state=1).fit(X)
