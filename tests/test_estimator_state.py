"""Fitted state of every learner: absent before fit, complete after it, replaced by a refit,
named after DataFrame columns, kept by pickling; seeds and nested parameters."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import spnc
from spnc import DataError, NotFittedError, ParameterError
from spnc.learn import EM, OSLRAU, BaggedSPN, ChowLiuTree, LearnSPN, Merge, Prometheus, TreeSPN

_RNG = np.random.default_rng(0)
CODES = (_RNG.random((160, 4)) < [0.2, 0.4, 0.6, 0.8]).astype(float)
CODES[:, 1] = np.where(_RNG.random(160) < 0.7, CODES[:, 0], CODES[:, 1])
REAL = _RNG.normal(size=(160, 3))
REAL[:, 1] += REAL[:, 0]


def _bernoulli_init(d: int = 4) -> spnc.SPN:
    return spnc.compile(spnc.Sum([spnc.Product([spnc.Bernoulli(v, 0.3) for v in range(d)]),
                                  spnc.Product([spnc.Bernoulli(v, 0.6) for v in range(d)])], [0.4, 0.6]))


def _tree(X=CODES) -> spnc.SPN:
    return LearnSPN(sum_split="observed", min_instances=20, random_state=0).fit(X).spn_


#: name -> (a maker of the unfitted estimator, its training data)
CASES = {
    "ChowLiuTree": (lambda: ChowLiuTree(), CODES),
    "LearnSPN": (lambda: LearnSPN(min_instances=40, random_state=0), CODES),
    "EM": (lambda: EM(init=_bernoulli_init(), max_iter=3), CODES),
    "TreeSPN": (lambda: TreeSPN(n_trees=2, max_depth=2, em_max_iter=3, random_state=0), CODES),
    "OSLRAU": (lambda: OSLRAU(batch_size=10, random_state=0), REAL),
    "Prometheus": (lambda: Prometheus(min_instances=50, random_state=0), REAL),
    "Merge": (lambda: Merge(init=_tree(), epsilon=0.05), CODES),
    "BaggedSPN": (lambda: BaggedSPN(ChowLiuTree(), n_bags=2, random_state=0), CODES),
}
NAMES = sorted(CASES)


def _frame(X, cols=None):
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(X, columns=cols or [f"v{i}" for i in range(X.shape[1])])


def _wider(name: str, est):
    """Data of another width, and the estimator set up for it."""
    X = CASES[name][1]
    W = np.hstack([X, X[::-1, :1]])
    if name == "EM":
        est.set_params(init=_bernoulli_init(5))
    if name == "Merge":
        est.set_params(init=_tree(W))
    return W


@pytest.mark.parametrize("name", NAMES)
def test_init_stores_parameters_only(name):
    est = CASES[name][0]()
    assert vars(est) == est.get_params(deep=False)


@pytest.mark.parametrize("name", NAMES)
def test_queries_before_fit_raise_not_fitted(name):
    est, X = CASES[name][0](), CASES[name][1]
    queries = [lambda: est.score(X), lambda: est.score_samples(X), lambda: est.sample(2)]
    if name == "OSLRAU":        # its fitted attributes are properties over the learner's state
        queries += [lambda: est.n_features_in_, lambda: est.spn_]
    for query in queries:
        with pytest.raises(NotFittedError, match="not fitted yet"):
            query()
    # scikit-learn's NotFittedError is both, and callers catch either
    assert issubclass(NotFittedError, ValueError) and issubclass(NotFittedError, AttributeError)
    assert not hasattr(est, "spn_")


@pytest.mark.parametrize("name", NAMES)
def test_refit_replaces_the_fitted_state(name):
    est, X = CASES[name][0](), CASES[name][1]
    est.fit(_frame(X))
    assert list(est.feature_names_in_) == [f"v{i}" for i in range(X.shape[1])]
    assert est.feature_names_in_.dtype == object and est.n_features_in_ == X.shape[1]
    W = _wider(name, est)
    est.fit(W)
    fresh = CASES[name][0]()
    _wider(name, fresh)
    fresh.fit(W)
    assert sorted(k for k in vars(est) if k.endswith("_")) == sorted(k for k in vars(fresh) if k.endswith("_"))
    assert est.n_features_in_ == est.spn_.n_vars == W.shape[1]
    assert not hasattr(est, "feature_names_in_") and est.spn_.var_names is None
    np.testing.assert_allclose(est.score_samples(W), fresh.score_samples(W))


def test_refit_forgets_auto_choices_and_a_failed_refit_leaves_no_model():
    m = LearnSPN(min_instances=40, random_state=0).fit(CODES)
    assert m.auto_params_ == {"g_factor": 5.0}
    m.set_params(g_factor=5.0).fit(CODES)
    assert not hasattr(m, "auto_params_") and not hasattr(m, "auto_scores_")
    bad = CODES.copy()
    bad[3, 1] = np.nan
    with pytest.raises(DataError, match=r"X\[3, 1\]"):
        m.fit(bad)
    with pytest.raises(NotFittedError):         # not the model of the earlier data
        m.score(CODES)


@pytest.mark.parametrize("name", NAMES)
def test_dataframe_names_and_column_order(name):
    est, X = CASES[name][0](), CASES[name][1]
    df = _frame(X)
    est.fit(df)
    cols = np.array(df.columns, dtype=object)
    assert est.feature_names_in_.dtype == object and list(est.feature_names_in_) == list(cols)
    assert est.n_features_in_ == X.shape[1] and est.spn_.var_names == list(cols)
    # scored by name, whatever the order; other names are refused, never taken by position
    np.testing.assert_allclose(est.score_samples(df[cols[::-1]]), est.score_samples(df))
    with pytest.raises(DataError, match="not among the DataFrame's columns"):
        est.score(_frame(X, [f"w{i}" for i in range(X.shape[1])]))


def test_em_and_merge_keep_a_named_init_and_match_the_frame_to_it():
    init = spnc.compile(spnc.Product([spnc.Bernoulli(v, 0.5) for v in range(4)]), var_names=list("abcd"))
    df = _frame(CODES, list("abcd"))
    em = EM(init=init, max_iter=3).fit(df[list("dcba")])
    ref = EM(init=init, max_iter=3).fit(CODES)
    assert em.spn_.var_names == list("abcd")
    np.testing.assert_allclose(em.score_samples(df), ref.score_samples(CODES))
    assert list(em.feature_names_in_) == list("dcba")


def test_oslrau_partial_fit_on_a_frame_names_its_features():
    o = OSLRAU(batch_size=10, random_state=0).partial_fit(_frame(REAL))
    assert list(o.feature_names_in_) == ["v0", "v1", "v2"]
    o.partial_fit(_frame(REAL)[["v2", "v0", "v1"]])
    assert o.n_seen_ == 2 * len(REAL)


@pytest.mark.parametrize("name", NAMES)
def test_pickled_estimator_and_model_score_the_same(name):
    est, X = CASES[name][0](), CASES[name][1]
    est.fit(X)
    again = pickle.loads(pickle.dumps(est))
    assert np.array_equal(again.score_samples(X), est.score_samples(X))
    assert np.array_equal(pickle.loads(pickle.dumps(est.spn_)).log_likelihood(X), est.score_samples(X))


@pytest.mark.parametrize("name", [n for n in NAMES if "random_state" in CASES[n][0]().get_params()])
def test_random_state_int_repeats_and_generators_give_a_seed(name):
    make, X = CASES[name]
    a = make().set_params(random_state=7).fit(X).score_samples(X)
    b = make().set_params(random_state=np.int64(7)).fit(X).score_samples(X)
    np.testing.assert_array_equal(a, b)
    # a generator seeds the fit with a draw from it (were refused; see test_api_seeds.py)
    seed = int(np.random.default_rng(7).integers(2**63))
    c = make().set_params(random_state=np.random.default_rng(7)).fit(X).score_samples(X)
    np.testing.assert_array_equal(c, make().set_params(random_state=seed).fit(X).score_samples(X))
    with pytest.raises(ParameterError, match="random_state must be an integer") as err:
        make().set_params(random_state=0.5).fit(X)
    assert err.value.param == "random_state"


def test_nested_parameters_round_trip():
    b = BaggedSPN(LearnSPN(min_instances=50), n_bags=2, merge=Merge(epsilon=0.1), random_state=0)
    deep = b.get_params(deep=True)
    assert deep["base_learner__min_instances"] == 50 and deep["merge__epsilon"] == 0.1
    c = BaggedSPN(LearnSPN(), merge=Merge()).set_params(**{k: v for k, v in deep.items()
                                                           if k not in ("base_learner", "merge")})
    assert c.get_params(deep=True).keys() == deep.keys()
    assert c.base_learner.min_instances == 50 and c.merge.epsilon == 0.1
    with pytest.raises(ParameterError, match="merge is not an estimator"):
        BaggedSPN(LearnSPN()).set_params(merge__epsilon=0.2)


@pytest.mark.parametrize("cls", [ChowLiuTree, EM])
def test_sample_weights_count_rows(cls):
    w = np.random.default_rng(1).integers(0, 4, len(CODES))
    kw = {"init": _bernoulli_init(), "max_iter": 4} if cls is EM else {}
    a = cls(**kw).fit(CODES, sample_weight=w).score_samples(CODES)
    b = cls(**kw).fit(CODES.repeat(w, axis=0)).score_samples(CODES)
    np.testing.assert_allclose(a, b, atol=1e-12)


def test_em_on_dataframe_blocks_names_an_unnamed_init():
    df = _frame(CODES)
    em = EM(init=_bernoulli_init(), max_iter=3).fit([df.iloc[:80], df.iloc[80:][["v3", "v1", "v0", "v2"]]])
    assert em.spn_.var_names == ["v0", "v1", "v2", "v3"]
    ref = EM(init=_bernoulli_init(), max_iter=3).fit(CODES)
    np.testing.assert_allclose(em.score_samples(df[["v2", "v0", "v3", "v1"]]), ref.score_samples(CODES))


def test_merge_refuses_streamed_rows():
    df = _frame(CODES)
    with pytest.raises(DataError, match="Merge routes the rows of X several times.*spnc.stream.load"):
        Merge(init=_tree(), epsilon=0.1).fit([df.iloc[:80], df.iloc[80:]])
    with pytest.raises(DataError, match="rows of X_valid"):
        Merge(init=_tree(), epsilon=0.1).fit(CODES, X_valid=[CODES[:40], CODES[40:80]])


def test_oslrau_refused_refit_keeps_no_model():
    o = OSLRAU(batch_size=10, random_state=0).fit(_frame(REAL))
    with pytest.raises(ParameterError, match="batch_size"):
        o.set_params(batch_size=0).fit(_frame(REAL))
    with pytest.raises(NotFittedError):          # neither the old model nor half of its names
        o.score(REAL)
    assert not hasattr(o, "feature_names_in_") and not hasattr(o, "n_features_in_")


def test_subclass_fit_calling_super_keeps_what_it_set_before():
    # only the outermost fit forgets `*_` attributes: a subclass's own, set before
    # super().fit, survive; a refit still forgets them
    class Tagged(LearnSPN):
        def fit(self, X, y=None, X_valid=None):
            self.tag_ = int(getattr(self, "tag_", 0)) + 1
            return super().fit(X, X_valid=X_valid)

    est = Tagged(min_instances=40, random_state=0).fit(CODES)
    assert est.tag_ == 1 and hasattr(est, "spn_")
    assert est.fit(CODES).tag_ == 1
    # a class defined in a function goes to Dask workers pickled by value, wrapped fit included
    cloudpickle = pytest.importorskip("cloudpickle")
    again = cloudpickle.loads(cloudpickle.dumps(Tagged))(min_instances=40, random_state=0).fit(CODES)
    assert again.tag_ == 1 and again.score(CODES) == est.score(CODES)
