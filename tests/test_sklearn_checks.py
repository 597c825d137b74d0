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


# ---------------------------------------------------------------- model selection, pipelines
_RNG = np.random.default_rng(0)
_CODES = (_RNG.random((120, 4)) < [0.2, 0.4, 0.6, 0.8]).astype(float)
_REAL = _RNG.normal(size=(120, 3))
_TREE = LearnSPN(sum_split="observed", min_instances=20, random_state=0).fit(_CODES).spn_
_BERN = spnc.compile(spnc.Product([spnc.Bernoulli(v, 0.5) for v in range(4)]))

#: (estimator, a grid of two values, data)
SEARCHED = [
    (ChowLiuTree(), {"alpha": [0.1, 1.0]}, _CODES),
    (LearnSPN(min_instances=40, random_state=0), {"min_instances": [20, 40]}, _CODES),
    (EM(init=_BERN, max_iter=3), {"alpha": [0.0, 1.0]}, _CODES),
    (TreeSPN(n_trees=2, max_depth=2, em_max_iter=3, random_state=0), {"n_trees": [1, 2]}, _CODES),
    (OSLRAU(batch_size=10, random_state=0), {"correlation_threshold": [0.1, 0.3]}, _REAL),
    (Prometheus(min_instances=50, random_state=0), {"n_clusters": [1, 2]}, _REAL),
    (Merge(init=_TREE, epsilon=0.05), {"epsilon": [0.01, 0.1]}, _CODES),
    (BaggedSPN(LearnSPN(min_instances=40), n_bags=2, merge=Merge(epsilon=0.05), random_state=0),
     {"base_learner__min_instances": [20, 40], "merge__epsilon": [0.01, 0.1]}, _CODES),
]


def test_search_and_cross_validation_in_worker_processes():
    """n_jobs=2 runs in other processes: estimators, their parameters and models pickle."""
    for est, grid, X in SEARCHED:
        name = type(est).__name__
        g = GridSearchCV(est, grid, cv=2, n_jobs=2).fit(X)
        assert np.isfinite(g.best_score_) and g.best_estimator_.n_features_in_ == X.shape[1], name
        r = RandomizedSearchCV(est, grid, n_iter=2, cv=2, n_jobs=2, random_state=0).fit(X)
        assert np.isfinite(r.best_score_), name
        s = cross_val_score(est, X, cv=2, n_jobs=2)
        assert s.shape == (2,) and np.all(np.isfinite(s)) and np.all(s < 0), name
        # the same split and seed in this process give the same scores
        np.testing.assert_allclose(cross_val_score(clone(est), X, cv=2), s, err_msg=name)


def test_pipelines_with_preprocessing():
    bins = KBinsDiscretizer(n_bins=3, encode="ordinal", quantile_method="averaged_inverted_cdf")
    for pipe, X in ((make_pipeline(StandardScaler(), Prometheus(min_instances=50, random_state=0)), _REAL),
                    (make_pipeline(StandardScaler(), OSLRAU(batch_size=10, random_state=0)), _REAL),
                    # a test fold may lack a bin of the training folds: the states are given
                    (make_pipeline(bins, ChowLiuTree(cardinality=[3, 3, 3])), _REAL)):
        s = cross_val_score(pipe, X, cv=2)
        assert np.all(np.isfinite(s)), pipe
        fitted = pipe.fit(X)
        assert fitted.score_samples(X[:5]).shape == (5,)


@pytest.mark.parametrize("est", [ChowLiuTree(alpha=0.5), EM(init=_BERN, max_iter=3)])
def test_sample_weight_as_a_fit_parameter(est):
    w = np.random.default_rng(1).integers(1, 4, len(_CODES)).astype(float)
    step = type(est).__name__.lower()
    direct = clone(est).fit(_CODES, sample_weight=w).score(_CODES)
    piped = make_pipeline("passthrough", clone(est)).fit(_CODES, **{f"{step}__sample_weight": w})
    assert piped.score(_CODES) == pytest.approx(direct)
    with warnings.catch_warnings():       # scoring ignores the weights, and says so
        warnings.simplefilter("ignore", UserWarning)
        g = GridSearchCV(est, {"n_threads": [1]}, cv=2).fit(_CODES, sample_weight=w)
    assert g.best_estimator_.score(_CODES) == pytest.approx(direct)
    s = cross_val_score(est, _CODES, cv=2, params={"sample_weight": w})
    assert np.all(np.isfinite(s))


@pytest.mark.parametrize("est, X", [(e, X) for e, _, X in SEARCHED])
def test_clone_of_a_fitted_learner_is_unfitted_with_equal_parameters(est, X):
    from sklearn.exceptions import NotFittedError as SkNotFitted
    from sklearn.utils.validation import check_is_fitted
    fitted = clone(est).fit(X)
    check_is_fitted(fitted)
    c = clone(fitted)
    with pytest.raises(SkNotFitted):
        check_is_fitted(c)
    with pytest.raises(spnc.NotFittedError):
        c.score(X)
    assert repr(c) == repr(est)
    assert np.allclose(c.fit(X).score_samples(X), fitted.score_samples(X))
