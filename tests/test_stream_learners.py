"""LearnSPN and Prometheus on streamed data: structure on rows in memory (all rows or a
``sample_rows`` sample), parameter passes streamed over all rows; the model equals the one
learned from the same rows as a numpy array (the structure exactly, parameters to the
order of additions)."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

from spnc import DataError, ParameterError
from spnc.learn import EM, ChowLiuTree, LearnSPN
from spnc.learn.prometheus import Prometheus

from test_learnspn import planted


def _h5(tmp_path, X, ds="/X"):
    p = tmp_path / "data.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset(ds, data=X, chunks=(min(len(X), 500), X.shape[1]))
    return f"{p}:{ds}"


def same_model(a, b, exact=False):
    assert np.array_equal(a.kind, b.kind) and np.array_equal(a.child, b.child)
    assert np.array_equal(a.child_ptr, b.child_ptr)
    tol = dict(rtol=0, atol=0) if exact else dict(rtol=1e-9, atol=1e-13)
    assert np.allclose(a.weight, b.weight, **tol)
    assert a.leaf_tables.keys() == b.leaf_tables.keys()
    for k, t in a.leaf_tables.items():
        for name, v in t.to_arrays().items():
            assert np.allclose(v, b.leaf_tables[k].to_arrays()[name], **tol), (k, name)


@pytest.fixture(scope="module")
def binary():
    return planted(np.random.default_rng(0), n=3000).astype(np.uint8)


@pytest.mark.parametrize("sample_rows", [None, 1200])
def test_learnspn_file_equals_memory(tmp_path, binary, sample_rows):
    kw = dict(min_instances=200, refine="em", refine_iter=2, sample_rows=sample_rows, random_state=0)
    ref = LearnSPN(**kw).fit(binary)
    got = LearnSPN(**kw).fit(_h5(tmp_path, binary))
    same_model(ref.spn_, got.spn_)
    assert got.n_structure_rows_ == ref.n_structure_rows_ == (sample_rows or len(binary))
    assert got.spn_.learner["n_train"] == len(binary)
    if sample_rows is None:   # the structure saw all rows: the refinement is EM from the learned model
        from spnc.learn.em import EM
        plain = LearnSPN(min_instances=200, random_state=0).fit(binary).spn_
        same_model(EM(init=plain, max_iter=2, alpha=0.1).fit(binary.astype(float)).spn_, got.spn_)


def test_learnspn_sample_and_refine_defaults(tmp_path, binary):
    spec = _h5(tmp_path, binary)
    whole = LearnSPN(min_instances=200, random_state=0)
    same_model(whole.fit(binary).spn_, LearnSPN(**whole.get_params()).fit(spec).spn_, exact=True)  # no refine
    s = LearnSPN(min_instances=200, sample_rows=1000, random_state=1, refine_iter=1)
    a, b = s.fit(spec).spn_, LearnSPN(**s.get_params()).fit([binary[i:i + 700] for i in range(0, 3000, 700)]).spn_
    same_model(a, b)                       # a list of blocks: the same sample and passes
    hard = LearnSPN(min_instances=200, sample_rows=1000, random_state=1, refine="hard", refine_iter=1)
    assert hard.fit(spec).score(binary) > LearnSPN(min_instances=200, sample_rows=1000, random_state=1,
                                                   refine="none").fit(spec).score(binary) - 0.05


def test_prometheus_file_equals_memory(tmp_path, binary):
    for sample_rows in (None, 1500):
        kw = dict(min_instances=300, refine="em", refine_iter=2, sample_rows=sample_rows, random_state=0)
        ref = Prometheus(**kw).fit(binary)
        got = Prometheus(**kw).fit(_h5(tmp_path, binary))
        same_model(ref.spn_, got.spn_)
        assert got.n_structure_rows_ == (sample_rows or len(binary))


def test_prometheus_continuous_streamed(tmp_path):
    rng = np.random.default_rng(2)
    z = rng.random(2000) < 0.5
    X = rng.normal(size=(2000, 4)) + 3.0 * z[:, None]
    spec = _h5(tmp_path, X)
    kw = dict(min_instances=300, refine_iter=3, random_state=0)
    got = Prometheus(**kw).fit(spec)           # refine="auto": the running average, streamed too
    mem = Prometheus(**kw).fit(X).spn_
    same_model(mem, got.spn_)
    same_model(mem, Prometheus(refine="running_average", **kw).fit(spec).spn_)
    assert not np.allclose(mem.log_likelihood(X), Prometheus(refine="em", **kw).fit(X).spn_.log_likelihood(X))


def test_streamed_online_em_is_full_batch_only(tmp_path):
    X = np.random.default_rng(3).normal(size=(500, 3))
    init = Prometheus(min_instances=200, refine="none", random_state=0).fit(X).spn_
    kw = dict(init=init, variant="online", step_decay=1.0, max_iter=3)
    same_model(EM(batch_size=500, **kw).fit(X).spn_, EM(batch_size=500, **kw).fit(_h5(tmp_path, X)).spn_)
    with pytest.raises(ParameterError, match="batch_size >= the 500 rows"):
        EM(batch_size=100, **kw).fit(_h5(tmp_path, X))


def test_streamed_learner_errors(tmp_path, binary):
    with pytest.raises(DataError, match="one-shot"):
        LearnSPN(sample_rows=10).fit(iter([binary[:100], binary[100:200]]))
    X = binary.copy()
    X[-1, 0] = 2                               # a state the sample does not contain
    with pytest.raises(DataError, match="sample of 500 rows"):
        LearnSPN(min_instances=200, sample_rows=500, random_state=0).fit(_h5(tmp_path, X))
    ok = LearnSPN(min_instances=200, sample_rows=500, random_state=0, cardinality=[3] + [2] * 7)
    assert ok.fit(_h5(tmp_path, X)).spn_.cardinality[0] == 3


def test_streamed_refinement_refuses_leaves_without_streaming_statistics(tmp_path, binary):
    # Chow-Liu leaves refit on all rows at once: the refusal says so, not that a state was missed
    for est in (Prometheus(leaf_vars=3, sample_rows=500, random_state=0),
                LearnSPN(leaves="chowliu", min_instances=1000, refine="hard", random_state=0)):
        with pytest.raises(DataError, match="leaf type 'cltree' has none: use refine='none'") as err:
            est.fit(_h5(tmp_path, binary))
        assert "cardinality" not in str(err.value)


def test_oslrau_reads_a_file_spec(tmp_path):
    from spnc.learn.oslrau import OSLRAU
    X = np.random.default_rng(3).normal(size=(3000, 3)) @ np.array([[1, .8, 0], [0, .6, 0], [0, 0, 1.]])
    a = OSLRAU(random_state=0).fit(X)
    b = OSLRAU(random_state=0).fit(_h5(tmp_path, X))
    assert np.array_equal(a.score_samples(X), b.score_samples(X))


def test_oslrau_reads_a_source_opened_by_the_caller(tmp_path):
    # was: "X holds a ArraySource, not an array of rows" (the other learners took it)
    from spnc import stream
    from spnc.learn.oslrau import OSLRAU
    pd = pytest.importorskip("pandas")
    X = np.random.default_rng(3).normal(size=(600, 3)) @ np.array([[1, .8, 0], [0, .6, 0], [0, 0, 1.]])
    spec = _h5(tmp_path, X)
    with h5py.File(tmp_path / "data.h5", "a") as f:
        f["X"].attrs["columns"] = ["a", "b", "c"]
    frames = [pd.DataFrame(X[:200], columns=list("abc")), pd.DataFrame(X[200:, ::-1], columns=list("cba"))]
    for data, opened in ((spec, stream.open_source(spec, 64)), (frames, stream.open_source(frames))):
        with opened:
            got = OSLRAU(random_state=0).fit(opened)
        want = OSLRAU(random_state=0).fit(data)
        assert got.spn_.var_names == want.spn_.var_names == ["a", "b", "c"]
        assert list(got.feature_names_in_) == list(want.feature_names_in_) == ["a", "b", "c"]
        named = pd.DataFrame(X, columns=list("abc"))     # fitted with feature names: queried by them
        assert np.array_equal(got.score_samples(named), want.score_samples(named))


def test_oslrau_partial_fit_of_a_file_says_how(tmp_path):
    # was: "X must be numeric (real numbers), got dtype <U..." for a file spec
    from spnc import stream
    from spnc.learn.oslrau import OSLRAU
    spec = _h5(tmp_path, np.random.default_rng(3).normal(size=(300, 3)))
    for X in (spec, stream.open_source(spec)):
        with pytest.raises(DataError, match=r"partial_fit takes one batch of rows in memory, .*open_source\(X\)"):
            OSLRAU().partial_fit(X)


def test_learnspn_auto_parameters_from_a_one_shot_generator():
    """The default g_factor="auto" fits twice (choice, then final fit); a one-shot generator
    is read once and both fits use its rows, as a list of the same blocks would."""
    X = (np.random.default_rng(4).random((600, 6)) < 0.4).astype(float)
    blocks = [X[i:i + 150] for i in range(0, 600, 150)]
    want = LearnSPN(random_state=0).fit(blocks)
    got = LearnSPN(random_state=0).fit(b for b in blocks)
    assert got.auto_params_ == want.auto_params_
    np.testing.assert_array_equal(got.spn_.log_likelihood(X), want.spn_.log_likelihood(X))


def test_em_reads_a_streamed_validation_set_whole(tmp_path):
    from spnc.learn import EM
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, size=(500, 6)).astype(float)
    with h5py.File(tmp_path / "v.h5", "w") as f:
        f["X"] = X[400:]
    spn = LearnSPN(min_instances=50, random_state=0).fit(X[:400]).spn_
    ref = EM(init=spn, max_iter=3).fit(X[:400], X_valid=X[400:])
    for Xv in (f"{tmp_path / 'v.h5'}:/X", [X[400:450], X[450:]]):
        m = EM(init=spn, max_iter=3).fit(X[:400], X_valid=Xv)
        assert np.array_equal(m.history_["valid"], ref.history_["valid"])
        assert np.array_equal(m.spn_.weight, ref.spn_.weight)


@pytest.mark.parametrize("learner", [LearnSPN(min_instances=50, random_state=0, sample_rows=1000, data_type="discrete"),
                                     Prometheus(sample_rows=1000, random_state=0, data_type="discrete")])
def test_errors_in_a_sample_name_rows_of_x(tmp_path, learner):
    X = np.random.default_rng(0).integers(0, 2, size=(5000, 6)).astype(float)
    X[4321, 3] = 0.5
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["X"] = X
    for src in (X, f"{tmp_path / 'x.h5'}:/X"):
        with pytest.raises(DataError, match=r"X\[4321, 3\] = 0.5"):
            learner.fit(src)


def _named_h5(tmp_path, X, names):
    p = tmp_path / "named.h5"
    with h5py.File(p, "w") as f:
        f["X"] = X
        f["X"].attrs["columns"] = names
    return p


@pytest.mark.parametrize("make", [
    lambda: LearnSPN(random_state=0), lambda: Prometheus(random_state=0), ChowLiuTree,
    lambda: EM(init=LearnSPN(random_state=0).fit(np.eye(4)[[0, 1, 2, 3] * 5]).spn_, max_iter=2),
], ids=["LearnSPN", "Prometheus", "ChowLiuTree", "EM"])
def test_a_dataset_s_columns_attribute_names_the_learned_model(make, tmp_path):
    """The console tools store an HDF5 dataset's ``columns`` attribute as the learned
    model's ``var_names``; the Python learners dropped it (a model without names, which
    then takes a DataFrame by position) for an h5py dataset and for a 'file.h5:/X' spec."""
    X = (np.random.default_rng(0).random((300, 4)) < 0.4).astype(float)
    p = _named_h5(tmp_path, X, ["a", "b", "c", "d"])
    with h5py.File(p, "r") as f:
        assert make().fit(f["X"]).spn_.var_names == ["a", "b", "c", "d"]
    assert make().fit(f"{p}:/X").spn_.var_names == ["a", "b", "c", "d"]
    assert make().fit(X).spn_.var_names is None


def test_a_malformed_columns_attribute_is_refused_by_learners(tmp_path):
    X = (np.random.default_rng(0).random((100, 3)) < 0.4).astype(float)
    p = _named_h5(tmp_path, X, ["a", "b"])
    with h5py.File(p, "r") as f, pytest.raises(DataError, match="2 names for 3 columns"):
        ChowLiuTree().fit(f["X"])
    with pytest.raises(DataError, match="2 names for 3 columns"):
        LearnSPN().fit(f"{p}:/X")
    p = _named_h5(tmp_path, X, ["a", "", "c"])
    with pytest.raises(DataError, match="cannot name a variable"):
        LearnSPN().fit(f"{p}:/X")


def test_oslrau_fits_a_source_opened_by_the_caller(tmp_path):
    """OSLRAU.fit refused an opened spnc.stream source ("X holds a ArraySource, not an
    array of rows"), which the other learners take."""
    from spnc.learn import OSLRAU
    from spnc.stream import IterableSource, open_source
    X = np.random.default_rng(0).normal(size=(600, 3))
    spec = _h5(tmp_path, X)
    want = OSLRAU().fit(X).spn_.log_likelihood(X)
    with open_source(spec) as src:
        np.testing.assert_array_equal(OSLRAU().fit(src).spn_.log_likelihood(X), want)
    pd = pytest.importorskip("pandas")
    blocks = [pd.DataFrame(X[:300], columns=list("abc")), pd.DataFrame(X[300:], columns=list("abc"))]
    got = OSLRAU().fit(IterableSource(blocks)).spn_
    assert got.var_names == ["a", "b", "c"]
    np.testing.assert_array_equal(got.log_likelihood(X), OSLRAU().fit([X[:300], X[300:]]).spn_.log_likelihood(X))


def test_oslrau_fits_a_callable_of_blocks():
    # was: "X holds a function, not an array of rows" (the other learners took it)
    from spnc.learn.oslrau import OSLRAU
    pd = pytest.importorskip("pandas")
    X = np.random.default_rng(3).normal(size=(600, 3)) @ np.array([[1, .8, 0], [0, .6, 0], [0, 0, 1.]])
    want = OSLRAU(random_state=0).fit(X)
    calls = []
    got = OSLRAU(random_state=0).fit(lambda: calls.append(1) or iter([X[:250], X[250:]]))
    assert calls == [1] and np.array_equal(got.score_samples(X), want.score_samples(X))
    named = OSLRAU(random_state=0).fit(lambda: (pd.DataFrame(X[i:i + 200], columns=list("abc")) for i in (0, 200, 400)))
    assert list(named.feature_names_in_) == ["a", "b", "c"] and named.spn_.var_names == ["a", "b", "c"]
    assert np.array_equal(named.score_samples(pd.DataFrame(X, columns=list("abc"))), want.score_samples(X))
