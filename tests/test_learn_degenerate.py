"""Every learner on degenerate but valid data (one row, one variable, constant or duplicated
columns, many states, narrow dtypes, DataFrames, extreme scales): the model is a valid SPN,
finite on its training rows, the same for any thread count, and survives save/load."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import spnc
import spnc.stream
from spnc.learn import EM, OSLRAU, BaggedSPN, ChowLiuTree, LearnSPN, Merge, Prometheus, TreeSPN

_rng = np.random.default_rng(0)
_B = _rng.integers(0, 2, size=(40, 4))
_C = _rng.integers(0, 3, size=(40, 4))
_R = _rng.normal(size=(40, 4))

DISCRETE = {
    "one_row": _B[:1], "two_rows": _B[:2], "one_var": _B[:, :1], "constant_column": np.c_[_B[:, :3], np.ones(40, int)],
    "identical_rows": np.tile(_C[:1], (40, 1)), "duplicated_columns": np.c_[_C[:, :2], _C[:, :2]],
    "fifty_states": np.c_[_rng.integers(0, 50, 40), _B[:, :3]], "int8": _C.astype(np.int8),
    "bool": _B.astype(bool), "float32": _C.astype(np.float32), "frame": pd.DataFrame(_C, columns=list("abcd")),
}
REAL = {
    "one_row": _R[:1], "two_rows": _R[:2], "one_var": _R[:, :1], "constant_column": np.c_[_R[:, :3], np.full(40, 3.5)],
    "identical_rows": np.tile(_R[:1], (40, 1)), "duplicated_columns": np.c_[_R[:, :2], _R[:, :2]],
    "tiny": _R * 1e-300, "huge": _R * 1e149, "mixed_scales": np.c_[_R[:, :2] * 1e100, _R[:, 2:] * 1e-100],
    "integer_valued": np.round(_R * 3), "float32": _R.astype(np.float32),
    "frame": pd.DataFrame(_R, columns=list("abcd")),
}

LEARNERS = {
    "gvs_latent": lambda t: LearnSPN("gvs", "latent", "univariate", g_factor=5.0, min_instances=3, n_threads=t),
    "gvs_observed_cl": lambda t: LearnSPN("gvs", "observed", "chowliu", g_factor=5.0, min_instances=3, n_threads=t),
    "rgvs_latent_cl": lambda t: LearnSPN("rgvs", "latent", "chowliu", g_factor=5.0, min_instances=3, n_threads=t),
    "rgvs_observed": lambda t: LearnSPN("rgvs", "observed", min_instances=3, n_threads=t),
    "ebvs_latent": lambda t: LearnSPN("ebvs", "latent", min_instances=3, n_clusters=3, n_threads=t),
    "ebvs_observed_cl": lambda t: LearnSPN("ebvs", "observed", "chowliu", min_instances=3, n_threads=t),
    "ebvs_ae_latent_cl": lambda t: LearnSPN("ebvs_ae", "latent", "chowliu", min_instances=3, n_threads=t),
    "ebvs_ae_observed": lambda t: LearnSPN("ebvs_ae", "observed", min_instances=3, n_threads=t),
    "mi_latent_cl": lambda t: LearnSPN("mi_components", "latent", "chowliu", min_instances=3, n_threads=t),
    "mi_observed": lambda t: LearnSPN("mi_components", "observed", min_instances=3, refine="em", n_threads=t),
    "chowliu": lambda t: ChowLiuTree(n_threads=t),
    "treespn": lambda t: TreeSPN(n_trees=2, max_depth=2, min_instances=3, em_max_iter=3, n_threads=t),
    "prometheus": lambda t: Prometheus(min_instances=3, refine_iter=3, n_threads=t),
}
REAL_LEARNERS = {
    "correlation": lambda t: LearnSPN("correlation", min_instances=3, data_type="continuous", n_threads=t),
    "prometheus_mvn": lambda t: Prometheus(min_instances=3, leaf_vars=2, refine_iter=3, data_type="continuous",
                                           n_threads=t),
    "oslrau": lambda t: OSLRAU(batch_size=8),
}


def _same_json(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same_json, a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def assert_sound(spn: spnc.SPN, X, tmp_path) -> np.ndarray:
    """Valid arrays, finite training log-likelihoods, lossless HDF5 and JSON round trips."""
    spnc.SPN.from_arrays(leaf_tables=spn.leaf_tables, **spn._state())      # validates
    ll = spn.log_likelihood(X)
    assert np.all(np.isfinite(ll)), ll
    for ext in ("h5", "json"):
        path = tmp_path / f"model.{ext}"
        spnc.save(spn, path)
        back = spnc.load(path)
        np.testing.assert_array_equal(back.log_likelihood(X), ll)
        kept = {k: v for k, v in back.learner.items() if k != "arrays" or v}
        assert _same_json(kept, spn.learner), (ext, spn.learner, back.learner)
    return ll


def assert_same_model(a: spnc.SPN, b: spnc.SPN) -> None:
    """Equal structure; parameters equal up to the order of additions across threads."""
    for k in ("kind", "child_ptr", "child", "cardinality"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    np.testing.assert_allclose(a.weight, b.weight, rtol=1e-12, atol=0)
    assert a.leaf_tables.keys() == b.leaf_tables.keys()
    for k, t in a.leaf_tables.items():
        for name, arr in t.to_arrays().items():
            np.testing.assert_allclose(arr, b.leaf_tables[k].to_arrays()[name], rtol=1e-12, atol=0)


def _fit(make, n_threads, X) -> spnc.SPN:
    est = make(n_threads)
    if "random_state" in est.get_params():
        est.set_params(random_state=0)
    return est.fit(X).spn_


@pytest.mark.parametrize("data", list(DISCRETE))
@pytest.mark.parametrize("learner", list(LEARNERS))
def test_discrete_learners_on_degenerate_data(learner, data, tmp_path):
    X = DISCRETE[data]
    assert_sound(_fit(LEARNERS[learner], 1, X), np.asarray(X, dtype=np.float64), tmp_path)


@pytest.mark.parametrize("data", list(REAL))
@pytest.mark.parametrize("learner", list(REAL_LEARNERS))
def test_real_learners_on_degenerate_data(learner, data, tmp_path):
    X = REAL[data]
    if data in ("tiny", "mixed_scales"):        # columns below the std floor: said, then learned
        with pytest.warns(spnc.ScaleWarning, match="the std floor of Gaussian leaves"):
            spn = _fit(REAL_LEARNERS[learner], 1, X)
    else:
        spn = _fit(REAL_LEARNERS[learner], 1, X)
    assert_sound(spn, np.asarray(X, dtype=np.float64), tmp_path)


@pytest.mark.parametrize("learner", list(LEARNERS) + list(REAL_LEARNERS))
def test_same_model_for_any_thread_count(learner):
    make = LEARNERS.get(learner) or REAL_LEARNERS[learner]
    data = (DISCRETE if learner in LEARNERS else REAL)["duplicated_columns"]
    assert_same_model(_fit(make, 1, data), _fit(make, 2, data))


def test_em_keeps_valid_covariances_on_a_large_scale(tmp_path):
    """A covariance of few or collinear rows at scale 1e20: min_std**2 on the diagonal is
    lost to rounding, and EM's update used to fail the leaf's own Cholesky check."""
    x = _R[:, 0] * 1e20
    X = np.c_[x, x, 3 * x]
    init = spnc.compile(spnc.MultivariateGaussian([0, 1, 2], [0, 0, 0], np.eye(3) * 1e40))
    for variant in ("soft", "hard", "online"):
        em = EM(init=init, variant=variant, max_iter=2, check_leaves=False, batch_size=7).fit(X)
        assert_sound(em.spn_, X, tmp_path)


# ---------------------------------------------------------------------- clear refusals
def test_integer_valued_real_data_names_data_type():
    """data_type='auto' reads integer-valued reals as discrete codes: the refusal says how
    to have them read as reals."""
    X = np.round(_R * 3)
    with pytest.raises(spnc.DataError, match=r"X\[0, 1\] = -\d\.0 is negative.*data_type='continuous'"):
        Prometheus().fit(X)
    with pytest.raises(spnc.ParameterError, match=r"data_type='continuous'") as err:
        LearnSPN("correlation").fit(np.abs(X))
    assert err.value.param == "splitter"
    with pytest.raises(spnc.DataError, match=r"is negative: discrete states are integer codes 0, 1, 2, \.\.\.$"):
        LearnSPN(data_type="discrete").fit(X)


@pytest.mark.parametrize("make", [
    lambda: LearnSPN(min_instances=5, g_factor=5.0, refine="em"), lambda: Prometheus(min_instances=5),
    lambda: TreeSPN(min_instances=5), lambda: EM(init=ChowLiuTree().fit(_B).spn_)])
def test_state_unseen_in_training_but_in_validation(make):
    valid = _B[:5].copy()
    valid[2, 3] = 2
    with pytest.raises(spnc.DataError, match=r"X_valid\[2, 3\] = 2\.0 is not a state 0\.\.1 of discrete variable 3"):
        make().fit(_B, X_valid=valid)


def test_given_cardinality_covers_a_state_unseen_in_training(tmp_path):
    test = np.array([[0, 0, 2, 0], [2, 2, 2, 2]], dtype=np.float64)
    for est in (LearnSPN("ebvs", "observed", "chowliu", min_instances=5, cardinality=[3] * 4, random_state=0),
                ChowLiuTree(cardinality=[3] * 4), Prometheus(min_instances=5, cardinality=[3] * 4, random_state=0),
                TreeSPN(min_instances=5, cardinality=[3] * 4, random_state=0)):
        spn = est.fit(_B, X_valid=test[:1]).spn_ if not isinstance(est, ChowLiuTree) else est.fit(_B).spn_
        assert_sound(spn, test, tmp_path)


@pytest.mark.parametrize("make", [ChowLiuTree, lambda: EM(init=ChowLiuTree().fit(_B).spn_)])
def test_sample_weights_of_zeros_or_one_nonzero(make, tmp_path):
    with pytest.raises(spnc.DataError, match="sample_weight is zero for every row"):
        make().fit(_B, sample_weight=np.zeros(len(_B)))
    w = np.zeros(len(_B))
    w[3] = 2.0
    spn = make().fit(_B, sample_weight=w).spn_
    assert np.isfinite(assert_sound(spn, _B[3:4].astype(float), tmp_path)).all()


def test_online_em_with_uniformly_tiny_weights_equals_unweighted():
    """Uniform weights leave EM (alpha=0) unchanged; a batch's weight under 1e-300 was
    floored there, which under-weighted the shorter last batch."""
    X = _rng.integers(0, 2, size=(250, 3)).astype(float)
    init = spnc.compile(spnc.Sum([spnc.Product([spnc.Categorical(v, [.3, .7]) for v in range(3)]),
                                  spnc.Product([spnc.Categorical(v, [.6, .4]) for v in range(3)])], [.4, .6]))
    em = EM(init=init, variant="online", max_iter=2, batch_size=100, random_state=0)
    ref = em.fit(X).spn_.log_likelihood(X)
    got = em.fit(X, sample_weight=np.full(len(X), 1e-303)).spn_.log_likelihood(X)
    np.testing.assert_allclose(got, ref, rtol=1e-12)


@pytest.mark.parametrize("make", [
    lambda c: LearnSPN(min_instances=5, cardinality=c), lambda c: LearnSPN("gvs", "observed", "chowliu", cardinality=c),
    lambda c: ChowLiuTree(cardinality=c), lambda c: Prometheus(cardinality=c), lambda c: TreeSPN(cardinality=c)])
@pytest.mark.parametrize("streamed", [False, True])
def test_cardinality_of_one_state_is_refused_up_front(make, streamed):
    """A constant column given one state used to be learned, then refused by the model
    (StructureError: cardinality 1); discrete variables have at least two states."""
    X = np.c_[np.zeros(40, int), _B[:, :2]]
    with pytest.raises(spnc.DataError, match=r"cardinality must be (3 )?integers >= 2 .*got \[1, 2, 2\]"):
        make([1, 2, 2]).fit([X[:20], X[20:]] if streamed else X)


@pytest.mark.parametrize("bad", ["", "b" * 1025, "b\x00"])
@pytest.mark.parametrize("make", [lambda: LearnSPN(g_factor=5.0), ChowLiuTree, Prometheus, OSLRAU, TreeSPN])
def test_unstorable_column_names_are_refused_before_learning(make, bad):
    """A DataFrame column name no model file can store was learned from, then refused by
    the model as a StructureError about var_names; now a DataError names the column."""
    frame = pd.DataFrame(_C[:, :3], columns=["a", bad, "c"])
    with pytest.raises(spnc.DataError, match=r"X: column name .* cannot name a variable"):
        make().fit(frame)
    with pytest.raises(spnc.DataError, match=r"column name .* cannot name a variable"):
        make().fit([frame[:20], frame[20:]])
    model = ChowLiuTree().fit(_C[:, :3]).spn_              # no names: queries take columns in order
    with pytest.warns(UserWarning, match="taken by position"):
        np.testing.assert_array_equal(model.log_likelihood(frame), model.log_likelihood(_C[:, :3]))
        np.testing.assert_array_equal(spnc.stream.log_likelihood(model, [frame[:20], frame[20:]]),
                                      model.log_likelihood(_C[:, :3]))


@pytest.mark.parametrize("variant", ["soft", "hard", "online"])
def test_em_freezing_every_root_of_a_mixture_keeps_its_root_weights(variant):
    """freeze listing every node used to leave a mixture's root weights free, so the
    'frozen' model still changed (max |dLL| up to 1.1)."""
    members = [spnc.Product([spnc.Categorical(v, p) for v in range(4)]) for p in ([.2, .3, .5], [.5, .3, .2])]
    init = spnc.compile(members, combine="mixture", root_weights=[0.5, 0.5])
    X = _rng.choice(3, size=(60, 4), p=[.6, .3, .1])
    everything = EM(init=init, variant=variant, max_iter=2, freeze=np.arange(init.n_nodes)).fit(X).spn_
    np.testing.assert_array_equal(everything.log_likelihood(X), init.log_likelihood(X))
    roots = EM(init=init, variant=variant, max_iter=2, freeze=init.roots).fit(X).spn_
    np.testing.assert_array_equal(roots.root_weights, init.root_weights)
    free = EM(init=init, variant=variant, max_iter=2, freeze=init.roots[:1]).fit(X).spn_
    assert not np.array_equal(free.root_weights, init.root_weights)


@pytest.mark.parametrize("scale", [3.0, 1e50])
def test_bagging_refuses_bad_codes_naming_the_row_of_x(scale):
    """BaggedSPN gives every bag the states of all rows; for integer-valued reals it cast
    1e50 to int64 (a warning and garbage) and let a bag refuse a row of its own sample."""
    X = np.round(_R * scale)
    r, c = np.argwhere((X < 0) | (X > 2**40))[0]
    with pytest.raises(spnc.DataError, match=rf"X\[{r}, {c}\] = .* is negative.*data_type='continuous'"):
        BaggedSPN(LearnSPN(min_instances=5), n_bags=2, random_state=0).fit(X)
    with pytest.raises(spnc.DataError, match=rf"X\[{r}, {c}\] = .* is negative: discrete states are integer codes 0, 1, 2, \.\.\.$"):
        BaggedSPN(ChowLiuTree(), n_bags=2, random_state=0).fit(X)


def test_em_refuses_validation_rows_no_model_can_score():
    """A validation row of probability 0 under the start and every pass (alpha=0, a state
    unseen in training) made every score -inf: EM returned the start untrained."""
    init = spnc.compile(spnc.Sum([spnc.Product([spnc.Categorical(v, [.5, .5, 0.0]) for v in range(3)]),
                                  spnc.Product([spnc.Categorical(v, [.2, .8, 0.0]) for v in range(3)])], [.5, .5]))
    X = _B[:, :3]
    valid = X[:10].astype(float)
    valid[4, 0] = 2
    with pytest.raises(spnc.DataError, match=r"X_valid row 4 has probability zero .*every EM pass"):
        EM(init=init, max_iter=5).fit(X, X_valid=valid)
    em = EM(init=init, max_iter=5, alpha=0.1).fit(X, X_valid=valid)      # mass on state 2 from pass 1
    assert np.isfinite(em.history_["valid"][1:]).all()


def test_merge_refuses_validation_rows_no_candidate_can_score():
    """Every candidate's validation score -inf: Merge returned the unmerged model."""
    X = _rng.integers(0, 2, size=(200, 4))
    X[:, 1] = X[:, 0] ^ (_rng.random(200) < .1)
    init = LearnSPN(sum_split="observed", min_instances=5, g_factor=5.0, alpha=0.0, cardinality=[3, 2, 2, 2],
                    random_state=0).fit(X).spn_
    valid = X[:10].astype(float)
    valid[3, 0] = 2                      # the observed split has no branch for state 2
    with pytest.raises(spnc.DataError, match=r"X_valid row 3 has probability zero .*every merged candidate"):
        Merge(init=init).fit(X, X_valid=valid)


@pytest.mark.parametrize("make", [
    lambda: EM(init=ChowLiuTree().fit(_C).spn_), lambda: LearnSPN(min_instances=5, refine="em"),
    lambda: Prometheus(min_instances=5), lambda: TreeSPN(min_instances=5),
    lambda: Merge(init=LearnSPN("gvs", "observed").fit(_C).spn_),
    lambda: BaggedSPN(ChowLiuTree(), n_bags=2, weights="valid")])
def test_validation_rows_without_an_observed_value_are_refused(make):
    """All-NaN validation rows score log p = 0 under every model: EM returned its start
    untrained, Merge merged nothing, BaggedSPN kept uniform weights, without a word."""
    with pytest.raises(spnc.DataError, match="X_valid has no observed value"):
        make().fit(_C, X_valid=np.full((5, 4), np.nan))
    partly = np.r_[np.full((2, 4), np.nan), _C[:1]]
    make().fit(_C, X_valid=partly)


@pytest.mark.parametrize("variant", ["soft", "online"])
def test_em_sum_weights_learn_from_subnormal_sample_weights(variant):
    """Uniform weights of 1e-320 gave edge counts whose inverse total overflowed: every
    sum kept its starting weights (with RuntimeWarnings). Subnormal weights keep only a
    few digits, so the model is close to, not equal to, the unweighted one."""
    X = _rng.integers(0, 3, size=(100, 4))
    X[:, 1] = (X[:, 0] + (_rng.random(100) < .1)) % 3
    init = LearnSPN(min_instances=10, g_factor=5.0, random_state=0).fit(X).spn_
    assert (init.kind == 0).any()                              # a sum node
    em = EM(init=init, variant=variant, max_iter=3, tol=-np.inf, random_state=0)
    ref = em.fit(X).spn_
    with np.errstate(over="raise", invalid="raise"):
        tiny = em.fit(X, sample_weight=np.full(len(X), 1e-320)).spn_
    np.testing.assert_allclose(tiny.log_likelihood(X), ref.log_likelihood(X), rtol=1e-3)


def test_em_remedy_names_alpha_as_the_console_option():
    """Inside a console tool (options_named) the remedy names --alpha, as typed."""
    from spnc.learn._params import options_named
    init = spnc.compile(spnc.Sum([spnc.Product([spnc.Categorical(v, [.5, .5, 0.0]) for v in range(3)]),
                                  spnc.Product([spnc.Categorical(v, [.2, .8, 0.0]) for v in range(3)])], [.5, .5]))
    valid = _B[:10, :3].astype(float)
    valid[4, 0] = 2
    with options_named({"alpha": "--alpha"}), pytest.raises(spnc.DataError, match=r"\(--alpha > 0\)$"):
        EM(init=init, max_iter=5).fit(_B[:, :3], X_valid=valid)
    X = _B[:, :3].astype(float)
    X[7, 0] = 2
    with options_named({"alpha": "--alpha"}), pytest.raises(spnc.DataError, match=r"set --alpha > 0\)$"):
        EM(init=init, max_iter=2, variant="online", batch_size=4).fit(X)


def test_auto_reading_data_as_real_names_the_value_that_made_it_so():
    """LearnSPN's default splitter refused 'continuous' data without saying which value was
    not a whole number; inside the auto candidates a row would be one of their part."""
    X = np.random.default_rng(0).integers(0, 2, (300, 3)).astype(float)
    X[57, 2] = 0.5
    with pytest.raises(spnc.ParameterError, match=r"reads X as real-valued: X\[57, 2\] = 0.5 is not a whole"):
        LearnSPN().fit(X)
    X = np.random.default_rng(0).integers(0, 2, (3000, 3)).astype(float)
    X[2345, 1] = 0.25
    with pytest.raises(spnc.ParameterError, match=r"X\[2345, 1\] = 0.25"):
        LearnSPN(sample_rows=2900, random_state=1).fit(X)
