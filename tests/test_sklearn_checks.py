"""scikit-learn's own estimator checks on every learner, with each check that does not
apply to density estimators (or to one learner) skipped with its reason; and model
selection, pipelines and fit parameters in worker processes."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV, RandomizedSearchCV, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import KBinsDiscretizer, StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import spnc  # noqa: E402
from spnc.learn import EM, OSLRAU, BaggedSPN, ChowLiuTree, LearnSPN, Merge, Prometheus, TreeSPN  # noqa: E402

_GAUSS8 = spnc.compile(spnc.Product([spnc.Gaussian(v, 0.0, 1.0) for v in range(8)]))

CHECKED = [
    ChowLiuTree(),
    # continuous: the checks pass integer data too, which "auto" would make discrete
    LearnSPN("correlation", data_type="continuous", min_instances=20, random_state=0),
    TreeSPN(n_trees=2, max_depth=2, em_max_iter=3, random_state=0),
    OSLRAU(batch_size=10, random_state=0),
    Prometheus(min_instances=50, random_state=0),
    BaggedSPN(LearnSPN("correlation", data_type="continuous", min_instances=20), n_bags=2, random_state=0),
    EM(init=_GAUSS8, max_iter=3),
    Merge(init=_GAUSS8, epsilon=0.05),
]

#: checks that do not apply to any spnc learner
NOT_FOR_SPNC = {
    # spnc's errors name the problem in its own words (DataError "X has 1 columns, the model
    # has 4 variables", "X has complex values", "X must be a non-empty 2-D array, got shape
    # (12, 0)"); these checks match scikit-learn's exact wording
    "check_n_features_in_after_fitting": "message wording (n_features_in_ itself is checked)",
    "check_complex_data": "message wording (complex X is refused with a DataError)",
    "check_estimators_empty_data_messages": "message wording (empty X is refused with a DataError)",
    # spnc refuses object arrays (DataError "must be numeric"), as it refuses text columns
    "check_dtype_object": "object dtype is refused by design",
}
#: checks whose data discrete learners cannot take (they learn from integer codes)
NOT_FOR_CODES = {
    "check_positive_only_tag_during_fit": "fits negative codes; states are codes 0, 1, 2, ...",
    "check_sample_weight_equivalence_on_dense_data": "fits real values (the weights are "
                                                     "checked on codes in test_estimator_state)",
}
#: EM and Merge refine a given model: its variables fix the number of columns, and the
#: checks fit data of many widths. Only these checks (no fit on their data) apply; the rest
#: of the conventions are tested on matching data in test_estimator_state.
NO_FIT_CHECKS = {
    "check_estimator_cloneable", "check_estimator_tags_renamed", "check_valid_tag_types",
    "check_estimator_repr", "check_no_attributes_set_in_init", "check_estimators_unfitted",
    "check_do_not_raise_errors_in_init_or_set_params", "check_mixin_order",
    "check_estimator_sparse_tag", "check_estimator_sparse_array", "check_estimator_sparse_matrix",
    "check_parameters_default_constructible", "check_get_params_invariance", "check_set_params",
    "check_fit1d",
}
#: scikit-learn sets n_clusters=1 for these; LearnSPN needs 2 clusters or more and says so
#: (BaggedSPN(LearnSPN) above runs them)
LEARNSPN_ONE_CLUSTER = {"check_dont_overwrite_parameters", "check_methods_subset_invariance",
                        "check_fit2d_1sample", "check_fit2d_1feature", "check_fit2d_predict1d"}


def _skip_reason(est, check: str) -> str | None:
    if check in NOT_FOR_SPNC:
        return NOT_FOR_SPNC[check]
    if est._categorical_only and check in NOT_FOR_CODES:
        return NOT_FOR_CODES[check]
    if isinstance(est, (EM, Merge)) and check not in NO_FIT_CHECKS:
        return "init fixes the number of variables; the check fits data of other widths"
    if isinstance(est, LearnSPN) and check in LEARNSPN_ONE_CLUSTER:
        return "the check sets n_clusters=1, which LearnSPN refuses"
    return None


with warnings.catch_warnings():      # "does not inherit from BaseEstimator": by design
    warnings.simplefilter("ignore", UserWarning)
    _with_checks = parametrize_with_checks(CHECKED)


@_with_checks
def test_sklearn_estimator_checks(estimator, check):
    name = getattr(check, "func", check).__name__
    why = _skip_reason(estimator, name)
    if why:
        pytest.skip(why)
    check(estimator)



def test_tags_say_what_fit_takes():
    from sklearn.utils import get_tags
    for est, nan, codes in ((EM(init=_GAUSS8), True, False), (ChowLiuTree(), False, True),
                            (LearnSPN(), False, False), (BaggedSPN(EM(init=_GAUSS8)), True, False),
                            (BaggedSPN(TreeSPN()), False, True)):
        tags = get_tags(est).input_tags
        assert (tags.allow_nan, tags.categorical) == (nan, codes), est
