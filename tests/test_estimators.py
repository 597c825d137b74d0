"""Estimator conventions shared by every learner: parameters only in ``__init__``, one
constraint table raising ParameterError, and scikit-learn model selection."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import DataError, ParameterError
from spnc.learn import EM, OSLRAU, BaggedSPN, ChowLiuTree, LearnSPN, Merge, Prometheus, TreeSPN
from spnc.learn.base import DensityEstimator

from conftest import shared_data

ESTIMATORS = [ChowLiuTree, EM, LearnSPN, OSLRAU, Prometheus, TreeSPN]


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_init_stores_parameters_only(cls):
    est = cls()
    assert vars(est) == est.get_params()
    assert set(cls._parameter_constraints) == set(cls._param_names())


@pytest.mark.parametrize("cls, param, value", [
    (ChowLiuTree, "alpha", -1.0), (ChowLiuTree, "n_threads", 0),
    (LearnSPN, "min_instances", 0), (LearnSPN, "g_factor", float("nan")), (LearnSPN, "criterion", "gini"),
    (LearnSPN, "random_state", -3), (LearnSPN, "max_depth", 2.5),
    (OSLRAU, "correlation_threshold", 1.5), (OSLRAU, "batch_size", True),
    (TreeSPN, "n_trees", 0), (Prometheus, "max_products", 0), (Prometheus, "affinity", "rdc"), (EM, "variant", "bogus"), (EM, "step_decay", 0.5),
])
def test_bad_parameter_names_itself(cls, param, value):
    X = np.random.default_rng(0).integers(0, 2, size=(60, 4)).astype(float)
    est = cls(**{param: value})
    if cls is EM:
        est.set_params(init=spnc.compile(spnc.Product([spnc.Bernoulli(v, .5) for v in range(4)])))
    with pytest.raises(ParameterError, match=rf"{cls.__name__}: {param} must be") as err:
        est.fit(X)
    assert err.value.param == param


@pytest.mark.parametrize("cls", [*ESTIMATORS, Merge, BaggedSPN])
def test_validation_rows_passed_by_position_are_refused(cls):
    """fit(X, X_valid) would bind the rows to the unused target y and skip validation."""
    X = np.random.default_rng(0).integers(0, 2, size=(60, 4)).astype(float)
    est = cls()
    if "init" in est.get_params():
        est.set_params(init=spnc.compile(spnc.Product([spnc.Bernoulli(v, .5) for v in range(4)])))
    with pytest.raises(spnc.DataError, match="2-D y.*X_valid="):
        est.fit(X, X[:20])


def test_em_needs_a_starting_model():
    with pytest.raises(ParameterError, match="init must be a compiled spnc.SPN") as err:
        EM().fit(np.zeros((3, 2)))
    assert err.value.param == "init"


def test_unknown_parameter():
    with pytest.raises(ParameterError, match="invalid parameter 'bogus'"):
        LearnSPN().set_params(bogus=1)


def test_new_estimator_must_declare_constraints():
    with pytest.raises(TypeError, match=r"missing \['beta'\]"):
        class Incomplete(DensityEstimator):  # noqa: F841
            _parameter_constraints = {}

            def __init__(self, beta: float = 1.0):
                self.beta = beta


def test_parameter_names_cannot_look_fitted():
    with pytest.raises(TypeError, match=r"must not end in '_'.*\['beta_'\]"):
        class Trailing(DensityEstimator):  # noqa: F841
            _parameter_constraints = {"beta_": []}

            def __init__(self, beta_: float = 1.0):
                self.beta_ = beta_


def _blas_threads_now() -> list[int]:
    from threadpoolctl import threadpool_info
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_fit_holds_blas_to_n_threads():
    from spnc.learn._params import N_THREADS
    outside = _blas_threads_now()
    if not outside:
        pytest.skip("no BLAS library that threadpoolctl can see")
    seen = {}

    class Probe(DensityEstimator):
        _parameter_constraints = {"n_threads": [N_THREADS, None]}

        def __init__(self, n_threads=None):
            self.n_threads = n_threads

        def fit(self, X, y=None):
            seen[self.n_threads] = _blas_threads_now()
            return self

    Probe(n_threads=1).fit(None)
    Probe().fit(None)
    assert seen[1] == [1] * len(outside)
    assert seen[None] == outside == _blas_threads_now()
    # every shipped learner with n_threads gets the same treatment
    threaded = [c for c in ESTIMATORS + [Merge, BaggedSPN] if "n_threads" in c._param_names()]
    assert len(threaded) >= 5
    for cls in threaded:
        assert hasattr(cls.fit, "__wrapped__"), cls.__name__


def test_clone_and_em_in_a_pipeline_of_params():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone
    spn = spnc.compile(spnc.Product([spnc.Bernoulli(v, .5) for v in range(3)]))
    em = EM(init=spn, max_iter=3)
    c = clone(em)
    assert c.get_params()["max_iter"] == 3 and c.init.n_nodes == spn.n_nodes
    X = np.random.default_rng(1).integers(0, 2, size=(100, 3)).astype(float)
    assert sklearn.model_selection.cross_val_score(em, X, cv=3).shape == (3,)


def test_grid_search_and_cross_val_score_on_real_data():
    pytest.importorskip("sklearn")
    from sklearn.model_selection import GridSearchCV, cross_val_score
    X = np.loadtxt(shared_data("binary", "nltcs.train.data"), delimiter=",")[:3000]
    grid = GridSearchCV(LearnSPN(random_state=0), {"min_instances": [50, 200]}, cv=3).fit(X)
    assert grid.best_params_["min_instances"] in (50, 200)
    assert -7.5 < grid.best_score_ < -5.5          # mean log-likelihood per row, nltcs
    scores = cross_val_score(ChowLiuTree(alpha=0.1), X, cv=3)
    assert scores.shape == (3,) and np.all(scores < 0)


def test_auto_parameters_are_chosen_on_held_out_training_rows():
    rng = np.random.default_rng(3)
    z = rng.integers(0, 2, 600)
    X = (rng.random((600, 6)) < np.where(z[:, None] == 1, 0.8, 0.2)).astype(float)
    m = LearnSPN(min_instances="auto", alpha="auto", g_factor=5.0, random_state=0).fit(X)
    assert set(m.auto_params_) == {"min_instances", "alpha"} and len(m.auto_scores_) == 6
    best = max(m.auto_scores_, key=lambda cs: cs[1])[0]
    assert m.auto_params_ == best and m.get_params()["min_instances"] == "auto"
    ref = LearnSPN(random_state=0, g_factor=5.0, **best).fit(X)
    np.testing.assert_array_equal(m.score_samples(X), ref.score_samples(X))
    assert m.spn_.learner["params"]["auto"]["chosen"] == best
    # the default g_factor="auto": chosen for GVS, not searched where unused or with few rows
    d = LearnSPN(random_state=0).fit(X)
    assert set(d.auto_params_) == {"g_factor"} and len(d.auto_scores_) == 3
    e = LearnSPN(splitter="ebvs", random_state=0).fit(X)
    assert not hasattr(e, "auto_params_")
    few = LearnSPN(random_state=0).fit(X[:12])
    assert few.auto_params_ == {"g_factor": 5.0}
    with pytest.raises(ParameterError, match="min_instances"):
        LearnSPN(min_instances="best").fit(X)


def test_auto_candidates_know_a_state_seen_only_in_the_held_out_rows():
    rng = np.random.default_rng(3)
    z = rng.integers(0, 2, 400)
    X = (rng.random((400, 5)) < np.where(z[:, None] == 1, 0.8, 0.2)).astype(float)
    X[np.random.default_rng(0).permutation(400)[0], 2] = 2     # the held-out tenth's first row
    m = LearnSPN(min_instances="auto", g_factor=5.0, random_state=0).fit(X)
    assert all(np.isfinite(s) for _, s in m.auto_scores_)
    assert m.spn_.learner["params"]["cardinality"] is None


def test_bagging_train_weights_when_every_bag_misses_a_state():
    X = np.random.default_rng(0).integers(0, 2, size=(200, 20)).astype(float)
    X[np.arange(20), np.arange(20)] = 2                  # 20 states seen once: every bag misses one
    with pytest.raises(DataError, match="every bag gives some training row probability 0"):
        BaggedSPN(ChowLiuTree(alpha=0.0), n_bags=3, random_state=0).fit(X)
    m = BaggedSPN(ChowLiuTree(alpha=0.0), n_bags=3, weights="uniform", random_state=0).fit(X)
    assert np.allclose(m.bag_weights_, 1 / 3)


def test_parameter_errors_survive_worker_processes():
    import pickle
    from spnc.learn import BaggedSPN, Prometheus
    e = pickle.loads(pickle.dumps(ParameterError("affinity", "bad affinity")))
    assert isinstance(e, ParameterError) and e.param == "affinity" and str(e) == "bad affinity"
    X = np.random.default_rng(0).normal(size=(60, 3))          # 'mi' needs discrete data
    with pytest.raises(ParameterError, match="affinity='mi' needs discrete data"):
        BaggedSPN(Prometheus(affinity="mi", min_instances=20), n_bags=2, n_jobs=2, random_state=0).fit(X)


def test_bagging_models_that_are_mixtures_of_roots(tmp_path):
    """A bag's model may be a mixture of roots (EM keeps an input mixture one): it joins the
    ensemble as one sum over its roots; numpy seeds save as JSON numbers."""
    from spnc.learn import EM
    rng = np.random.default_rng(2)
    X = (rng.random((300, 4)) < 0.4).astype(float)
    a = LearnSPN(min_instances=50, random_state=0).fit(X[:150]).spn_
    b = LearnSPN(min_instances=50, random_state=0).fit(X[150:]).spn_
    mix = spnc.compile([a.to_nodes(), b.to_nodes()], root_weights=[0.3, 0.7], combine="mixture",
                       cardinality=a.cardinality)
    one = BaggedSPN(EM(init=mix, max_iter=1), n_bags=1, random_state=np.int64(0)).fit(X)
    assert one.spn_.combine == "single"
    bag = one.spn_
    np.testing.assert_allclose(np.exp(bag.log_likelihood(np.array(
        [[(i >> k) & 1 for k in range(4)] for i in range(16)], dtype=float))).sum(), 1.0)
    two = BaggedSPN(EM(init=mix, max_iter=1), n_bags=2, random_state=0).fit(X)
    assert two.spn_.combine == "single" and np.isfinite(two.spn_.log_likelihood(X)).all()
    spnc.save(one.spn_, tmp_path / "bag.json")


def test_bagged_treespn_keeps_a_state_a_bag_missed():
    # a state seen once: most bootstrap samples miss it, yet every row must score
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, size=(300, 5)).astype(float)
    X[0, 2] = 2
    m = BaggedSPN(TreeSPN(n_trees=2, max_depth=2, em_max_iter=3), n_bags=4, random_state=0).fit(X)
    assert m.spn_.cardinality.tolist() == [2, 2, 3, 2, 2]
    assert np.all(np.isfinite(m.spn_.log_likelihood(X)))
    t = TreeSPN(n_trees=2, max_depth=2, em_max_iter=3, cardinality=[2, 2, 3, 2, 2]).fit(X[1:])
    assert t.spn_.learner["params"]["cardinality"] == [2, 2, 3, 2, 2]
    assert np.isfinite(t.spn_.log_likelihood(X[:1])).all()



def test_bagging_integer_valued_data_as_continuous():
    # whole numbers declared continuous: the bags get no discrete cardinality
    X = np.random.default_rng(1).integers(0, 5, size=(120, 3)).astype(float)
    for base in (LearnSPN("correlation", data_type="continuous", min_instances=40),
                 Prometheus(data_type="continuous", min_instances=40)):
        m = BaggedSPN(base, n_bags=2, random_state=0).fit(X)
        assert not np.any(m.spn_.cardinality) and np.isfinite(m.score(X))


def test_bagging_real_data_stays_real_in_a_sample_of_whole_numbers():
    # one real value among whole numbers: about a third of the bootstrap samples miss it,
    # and data_type="auto" must not make those bags discrete (the bags' types then clash)
    X = np.random.default_rng(0).integers(0, 3, size=(200, 3)).astype(float)
    X[5, 1] = 1.5
    for base in (LearnSPN("correlation", min_instances=40), Prometheus(min_instances=40)):
        m = BaggedSPN(base, n_bags=5, random_state=0).fit(X)
        assert not np.any(m.spn_.cardinality) and np.isfinite(m.score(X))


def test_bagging_merge_over_a_grid_needs_x_valid_before_the_bags_are_fitted():
    # the bags would fail here on a missing value; they used to be fitted first
    X = np.random.default_rng(0).integers(0, 2, size=(100, 3)).astype(float)
    X[0, 0] = np.nan
    with pytest.raises(DataError, match="merge=Merge.* needs X_valid"):
        BaggedSPN(LearnSPN(), n_bags=2, merge=Merge()).fit(X)


def test_bagging_errors_in_x_valid_name_x_valid():
    rng = np.random.default_rng(0)
    X = (rng.random((200, 3)) < 0.5).astype(float)
    V = X[:20].copy()
    V[3, 1] = 2
    with pytest.raises(spnc.DataError, match=r"^X_valid\[3, 1\] = 2.0"):
        BaggedSPN(ChowLiuTree(), n_bags=2, weights="valid", random_state=0).fit(X, X_valid=V)
