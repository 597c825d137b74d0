"""Data reaching the Python API: errors that name the caller's own cells and columns."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import spnc
from spnc.learn import EM, OSLRAU, BaggedSPN, ChowLiuTree, LearnSPN, Merge, Prometheus, TreeSPN
from spnc import Bernoulli, Product, Sum
from spnc.errors import DataError, ParameterError

NAMES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def named():
    """A model over the named binary variables a, b, c."""
    root = Sum([Product([Bernoulli(0, .2), Bernoulli(1, .7), Bernoulli(2, .4)]),
                Product([Bernoulli(0, .9), Bernoulli(1, .1), Bernoulli(2, .5)])], weights=[.3, .7])
    return spnc.compile(root, var_names=NAMES)


def test_conditional_mismatch_names_each_frames_own_cell(named):
    q = pd.DataFrame([[1.0, 0.0, 1.0]], columns=NAMES)[["c", "b", "a"]]
    e = pd.DataFrame([[np.nan, np.nan, 0.0]], columns=NAMES)          # c observed as 0, queried as 1
    with pytest.raises(DataError, match=r"X_query\[0, 0\] = 1\.0 must repeat the evidence value "
                                        r"X_evidence\[0, 2\] = 0\.0 \(variable 2 \('c'\)\)"):
        named.conditional(q, e)
    # arrays: the model's columns
    with pytest.raises(DataError, match=r"X_query\[0, 2\] = nan must repeat .* X_evidence\[0, 2\] = 0\.0"):
        named.conditional([[1.0, 0.0, np.nan]], [[np.nan, np.nan, 0.0]])
    # agreeing frames in different column orders give the array answer
    ok = pd.DataFrame([[1.0, 0.0, 0.0]], columns=NAMES)[["c", "b", "a"]]
    assert named.conditional(ok, e)[0] == named.conditional([[1.0, 0.0, 0.0]], [[np.nan, np.nan, 0.0]])[0]


@pytest.mark.parametrize("call", ["query", "fit"])
def test_structured_arrays_are_refused_with_how_to_convert(named, tmp_path, call):
    f = tmp_path / "t.csv"
    np.savetxt(f, np.random.default_rng(0).integers(0, 2, (20, 3)), fmt="%d", delimiter=",",
               header=",".join(NAMES), comments="")
    rec = np.genfromtxt(f, delimiter=",", names=True)          # one field per column, no 2-D shape
    run = (lambda: named.log_likelihood(rec)) if call == "query" else \
        (lambda: ChowLiuTree().fit(rec))
    with pytest.raises(DataError, match=r"X is a structured \(record\) array with 3 fields \('a', 'b', 'c'\); "
                                        r".*pd\.DataFrame\(X\).*structured_to_unstructured\(X\)"):
        run()
    # what the message suggests works, by name
    frame = pd.DataFrame(rec)[["c", "a", "b"]]
    plain = np.column_stack([rec[n] for n in NAMES])
    assert np.array_equal(named.log_likelihood(frame), named.log_likelihood(plain))


def test_real_data_for_discrete_learners_is_called_not_integer():
    """The first bad value of real-valued data, -1.45, is refused as not an integer code, not
    as a negative one (which reads as if shifting the column would do)."""
    X = np.random.default_rng(0).normal(size=(50, 3))
    X[0, 0] = -1.45
    with pytest.raises(DataError, match=r"X\[0, 0\] = -1\.45 is not an integer: discrete states are integer codes"):
        ChowLiuTree().fit(X)
    X[0, 0] = -2.0
    with pytest.raises(DataError, match=r"X\[0, 0\] = -2\.0 is negative: discrete states are integer codes"):
        ChowLiuTree().fit(X)


def test_a_model_given_as_its_estimator_or_file_says_how_to_pass_it(named, tmp_path):
    X = np.random.default_rng(0).integers(0, 2, (60, 3))
    est = ChowLiuTree().fit(X)
    spnc.save(est.spn_, tmp_path / "m.h5")
    path = str(tmp_path / "m.h5")
    with pytest.raises(ParameterError, match=r"init must be a compiled spnc\.SPN, got a ChowLiuTree estimator "
                                             r"\(pass the model it learned, init=est\.spn_\)$"):
        EM(init=est).fit(X)
    with pytest.raises(ParameterError, match=r"got a ChowLiuTree estimator \(pass the model it learned, "
                                             r"init=est\.spn_, after fitting it\)$"):
        Merge(init=ChowLiuTree()).fit(X)
    with pytest.raises(ParameterError, match=r"got '.*m\.h5' \(load the file first: init=spnc\.load\('.*m\.h5'\)\)$"):
        EM(init=path).fit(X)
    with pytest.raises(ParameterError, match=r"models\[1\] is a ChowLiuTree, not a compiled spnc\.SPN "
                                             r"\(pass the model it learned, est\.spn_\)$"):
        spnc.mixture([named, est])
    with pytest.raises(ParameterError, match=r"init must be a compiled spnc\.SPN, got 3$"):
        EM(init=3).fit(X)


def test_a_resumed_oslrau_keeps_its_feature_names(tmp_path):
    """A learner resumed from a model learned on a DataFrame says, as the original does,
    that an array is taken by position."""
    X = pd.DataFrame(np.random.default_rng(0).normal(size=(200, 3)), columns=NAMES)
    est = OSLRAU().fit(X)
    spnc.save(est.spn_, tmp_path / "o.h5")
    for back in (OSLRAU.resume(est.spn_), OSLRAU.resume(tmp_path / "o.h5")):
        assert list(back.feature_names_in_) == NAMES
        for e in (est, back):
            with pytest.warns(UserWarning, match="fitted with feature names: its columns are taken by position"):
                e.score_samples(X.to_numpy())
    assert not hasattr(OSLRAU.resume(OSLRAU().fit(X.to_numpy()).spn_), "feature_names_in_")


def test_queries_take_a_datasets_named_columns_by_name(named, tmp_path):
    """An HDF5 dataset whose ``columns`` attribute names its columns (as the console tools
    and stream functions read it) was taken by position by every in-memory query."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(1)
    X = rng.integers(0, 2, (40, 3)).astype(float)
    X[rng.random(X.shape) < .3] = np.nan
    order = [2, 0, 1]
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["X"] = X[:, order]
        f["X"].attrs["columns"] = [NAMES[i] for i in order]
        f["bad"] = np.where(np.isnan(X), 0.0, X)[:, order]
        f["bad"][3, 1] = 2.0                               # column 1 of the file: variable 'a'
        f["bad"].attrs["columns"] = [NAMES[i] for i in order]
        f["other"] = X
        f["other"].attrs["columns"] = ["a", "b", "z"]
    with h5py.File(tmp_path / "d.h5", "r") as f:
        ds = f["X"]
        assert np.array_equal(named.log_likelihood(ds), named.log_likelihood(X))
        filled, logp = named.mpe(ds)                       # in the dataset's own column order
        ref, ref_logp = named.mpe(X)
        assert np.array_equal(filled, ref[:, order]) and np.array_equal(logp, ref_logp)
        assert np.array_equal(named.sample(evidence=ds, seed=3), named.sample(evidence=X, seed=3)[:, order])
        with pytest.raises(DataError, match=r"X\[3, 1\] = 2\.0 is not a state 0\.\.1 of discrete variable 0 \('a'\)"):
            named.log_likelihood(f["bad"])
        with pytest.raises(DataError, match=r"the model's variable 'c' is not among its column names attribute "
                                            r"\(unmatched columns: 'z'\)"):
            named.log_likelihood(f["other"])
        est = ChowLiuTree().fit(pd.DataFrame(np.nan_to_num(X), columns=NAMES))
        with warnings.catch_warnings():
            warnings.simplefilter("error")                 # named columns: no warning about positions
            assert np.array_equal(est.score_samples(ds), est.score_samples(pd.DataFrame(X, columns=NAMES)))


def test_bagging_takes_a_named_validation_dataset_by_name(tmp_path):
    """BaggedSPN's bags learn unnamed models: it matched X_valid to the training frame's
    names only for a DataFrame, and took a dataset naming its columns by position."""
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(2)
    X = rng.integers(0, 2, (300, 3))
    X[:, 1] = np.where(rng.random(300) < .9, X[:, 0], X[:, 1])
    V = rng.integers(0, 2, (100, 3)).astype(float)
    with h5py.File(tmp_path / "v.h5", "w") as f:
        f["V"] = V[:, [1, 2, 0]]
        f["V"].attrs["columns"] = ["b", "c", "a"]
    frame = pd.DataFrame(X, columns=NAMES)
    bag = lambda: BaggedSPN(ChowLiuTree(), n_bags=3, weights="valid", random_state=0)   # noqa: E731
    ref = bag().fit(frame, X_valid=pd.DataFrame(V, columns=NAMES))
    with h5py.File(tmp_path / "v.h5", "r") as f:
        got = bag().fit(frame, X_valid=f["V"])
    assert np.array_equal(got.spn_.log_likelihood(V), ref.spn_.log_likelihood(V))


@pytest.mark.parametrize("ext", ["h5", "json"])
def test_model_files_named_by_bytes_paths(named, tmp_path, ext):
    """A bytes path (as open() takes) was refused as of an 'unknown extension b'.h5''."""
    path = bytes(tmp_path / f"m.{ext}")
    spnc.save(named, path)
    back = spnc.load(path)
    X = np.array([[1.0, 0.0, np.nan], [0.0, 1.0, 1.0]])
    assert back.var_names == NAMES and np.array_equal(back.log_likelihood(X), named.log_likelihood(X))


@pytest.mark.parametrize("weights", ["ab", ["0.5", "x"], [[0.5], [0.2, 0.3]], [0.5, -0.5], [1.0]])
def test_mixture_weights_that_are_not_numbers_are_parameter_errors(named, weights):
    with pytest.raises(ParameterError, match=r"weights must be 2 finite non-negative numbers with a positive "
                                             r"total, got ") as e:
        spnc.mixture([named, named], weights)
    assert e.value.param == "weights"


def test_oslrau_partial_fit_takes_a_named_dataset_by_name_without_warning(tmp_path):
    h5py = pytest.importorskip("h5py")
    X = np.random.default_rng(3).normal(size=(400, 3))
    with h5py.File(tmp_path / "b.h5", "w") as f:
        f["X"] = X[200:, [2, 0, 1]]
        f["X"].attrs["columns"] = ["c", "a", "b"]
    ref = OSLRAU().partial_fit(pd.DataFrame(X[:200], columns=NAMES)).partial_fit(pd.DataFrame(X[200:], columns=NAMES))
    est = OSLRAU().partial_fit(pd.DataFrame(X[:200], columns=NAMES))
    with h5py.File(tmp_path / "b.h5", "r") as f, warnings.catch_warnings():
        warnings.simplefilter("error")
        est.partial_fit(f["X"])
    assert np.array_equal(est.spn_.log_likelihood(X), ref.spn_.log_likelihood(X))


@pytest.mark.parametrize("make", [LearnSPN, Prometheus, OSLRAU, ChowLiuTree, TreeSPN,
                                  lambda: BaggedSPN(ChowLiuTree(), n_bags=2)])
def test_a_1d_x_in_fit_says_how_to_reshape_it(make):
    """Was "X must be 2-D (n_rows, n_vars), got shape (50,)", not saying which way round."""
    x = np.random.default_rng(0).integers(0, 2, 50)
    hint = r"X must be 2-D .*shape \(50,\): reshape it with {}\(-1, 1\) .*single feature.*{}\(1, -1\) .*single sample"
    with pytest.raises(DataError, match=hint.format(r"X\.reshape", r"X\.reshape")):
        make().fit(x)
    with pytest.raises(DataError, match=hint.format(r"np\.asarray\(X\)\.reshape", r"np\.asarray\(X\)\.reshape")):
        make().fit(x.tolist())


def test_a_1d_x_for_a_given_model_or_a_batch_says_how_to_reshape_it(named):
    x = np.array([0, 1, 1, 0, 1, 0])
    for run in (lambda: EM(init=named).fit(x), lambda: Merge(init=named).fit(x), lambda: OSLRAU().partial_fit(x * .5)):
        with pytest.raises(DataError, match=r"X\.reshape\(-1, 1\) if it holds a single feature"):
            run()


def test_named_streams_set_feature_names_as_a_frame_does(tmp_path):
    """A dataset naming its columns (also as a spec string) and DataFrame blocks named the
    learned model's variables, but only an in-memory DataFrame set feature_names_in_."""
    h5py = pytest.importorskip("h5py")
    X = np.random.default_rng(4).normal(size=(200, 3))
    cols = ["c", "a", "b"]
    frame = pd.DataFrame(X, columns=cols)
    with h5py.File(tmp_path / "n.h5", "w") as f:
        f["X"] = X
        f["X"].attrs["columns"] = cols
    init = LearnSPN("correlation", min_instances=50, random_state=0).fit(X).spn_       # no names
    makers = [lambda: LearnSPN("correlation", min_instances=50, random_state=0),
              lambda: OSLRAU(batch_size=20, random_state=0), lambda: EM(init=init, max_iter=2),
              lambda: ChowLiuTree()]
    for make in makers:
        data = (frame > 0).astype(int) if isinstance(make(), ChowLiuTree) else frame
        ref = make().fit(data).feature_names_in_
        assert ref.dtype == object and list(ref) == cols
        with h5py.File(tmp_path / "n.h5", "r") as f:
            sources = [f["X"], f"{tmp_path / 'n.h5'}:/X", [data.iloc[:100], data.iloc[100:]],
                       spnc.stream.open_source(f["X"])]
            if isinstance(make(), ChowLiuTree):
                sources = sources[2:3]
            for src in sources:
                got = make().fit(src).feature_names_in_
                assert got.dtype == object and list(got) == cols, (make(), src)
    # a model learned from arrays has none, streamed or not
    assert not hasattr(LearnSPN("correlation", min_instances=50).fit([X[:100], X[100:]]), "feature_names_in_")
