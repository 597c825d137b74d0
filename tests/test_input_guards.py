"""Inputs a new user may give by mistake end in a clear error, an exact answer, or an
untouched file (the bugs of a bad-input hunt, session 18)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import spnc
from spnc import DataError, ParameterError
from spnc._threads import MAX_THREADS, effective_n_threads
from spnc.cli import compose, convert, evaluate, learn, merge
from spnc.learn import EM, BaggedSPN, LearnSPN
from spnc.leaves.univariate import Bernoulli, Gaussian
from spnc.nodes import Product, Sum

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("guards")
    X = (np.random.default_rng(0).random((200, 6)) < 0.4).astype(float)
    np.savetxt(d / "tr.csv", X, fmt="%d", delimiter=",")
    assert learn.main([str(d / "tr.csv"), "-o", str(d / "m.h5"), "-q"]) == 0
    return d, X


def _same_bytes(path: Path, before: bytes) -> bool:
    return path.read_bytes() == before


def test_thread_counts_are_capped():
    assert effective_n_threads(10 ** 5) == MAX_THREADS and effective_n_threads(3) == 3
    code = ("import numpy as np, spnc; from spnc.nodes import Product; from spnc.leaves.univariate import "
            "Bernoulli; m = spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)])); "
            "X = np.zeros((4096, 2)); print(m.log_likelihood(X, n_threads=100000)[0], "
            "m.sample(3, seed=1, n_threads=100000).shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == repr(float(np.log(0.7) + np.log(0.4)))[:len(out.stdout.split()[0])]


def test_outputs_that_are_inputs_are_refused_before_any_work(files, tmp_path, capsys):
    d, X = files
    before = (d / "m.h5").read_bytes()
    x = tmp_path / "x.h5"
    x.write_bytes(before)
    assert convert.main([str(x), str(x), "--to", "json"]) == 2
    assert _same_bytes(x, before)
    assert compose.main(["mix", str(x), str(d / "m.h5"), "-o", str(x), "--weights", "1,1"]) == 2
    assert _same_bytes(x, before)
    assert "is also an input" in capsys.readouterr().err
    # a bad output is refused before EM runs
    assert compose.main(["em", str(x), "-o", str(tmp_path / "out.csv"), "--data", str(d / "tr.csv")]) == 2
    assert "unknown extension" in capsys.readouterr().err
    # 'data.h5:/X' names data.h5
    h = tmp_path / "d.h5"
    with h5py.File(h, "w") as f:
        f["X"] = X
    data = h.read_bytes()
    assert learn.main([f"{h}:/X", "-o", str(h), "-q"]) == 2
    assert merge.main([str(d / "m.h5"), f"{h}:/X", "-o", str(h)]) == 2
    assert _same_bytes(h, data) and "is also an input" in capsys.readouterr().err


def test_empty_streamed_data_leaves_an_existing_output(files, tmp_path, capsys):
    d, _ = files
    e = tmp_path / "e.npy"
    np.save(e, np.zeros((0, 6)))
    out = tmp_path / "ll.csv"
    out.write_text("precious\n")
    assert evaluate.main([str(d / "m.h5"), str(e), "--out-ll", str(out)]) == 2
    assert out.read_text() == "precious\n" and "no data rows" in capsys.readouterr().err


def test_a_non_numeric_dataset_is_one_line(files, tmp_path, capsys):
    d, _ = files
    s = tmp_path / "s.h5"
    with h5py.File(s, "w") as f:
        f["S"] = np.array([b"a", b"b"])
    assert evaluate.main([str(d / "m.h5"), f"{s}:/S"]) == 2
    err = capsys.readouterr().err
    assert "need a 2-D numeric dataset" in err and len(err.strip().splitlines()) == 1


def test_bernoulli_leaves_and_declared_types(files, tmp_path, capsys):
    d, _ = files
    assert learn.main([str(d / "tr.csv"), "-o", str(tmp_path / "c.h5"), "--leaves", "bernoulli",
                       "--types", "c", "-q"]) == 0
    assert learn.main([str(d / "tr.csv"), "-o", str(tmp_path / "r.h5"), "--leaves", "bernoulli",
                       "--types", "r", "-q"]) == 2
    assert "declared real" in capsys.readouterr().err


def test_argument_errors_are_one_line(files, capsys):
    d, _ = files
    for tool, argv in ((evaluate, [str(d / "m.h5"), str(d / "tr.csv"), "--n-threads", "abc"]),
                       (convert, [str(d / "m.h5"), "o.dot", "--max-nodes", "-5"]),
                       (compose, ["bogus", str(d / "m.h5"), "-o", "x.h5"])):
        with pytest.raises(SystemExit) as e:
            tool.main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and len(err.strip().splitlines()) == 1 and ": error: " in err, err


def test_a_missing_model_file_is_not_called_damaged(tmp_path):
    with pytest.raises(FileNotFoundError):
        spnc.load(tmp_path / "nothing.h5")


_MIX = Sum([Product([Bernoulli(0, .3), Gaussian(1, 0., 1.)]), Product([Bernoulli(0, .9), Gaussian(1, 2., .5)])],
           [.4, .6])


def test_conditionals_refuse_what_rounding_would_decide():
    spn = spnc.compile(_MIX)
    got = spn.conditional([[1, 0.5]], [[np.nan, 0.5]])
    p = np.array([.4 * np.exp(-0.125), .6 / 0.5 * np.exp(-0.5 * 9)])          # N(0.5) of each part
    want = np.log((p * [.3, .9]).sum() / p.sum())
    np.testing.assert_allclose(got, [want], rtol=1e-12)
    for v in (1e6, 1e9):                     # log-likelihoods near -5e11 and -5e17
        with pytest.raises(DataError, match="too large"):
            spn.conditional([[1, v]], [[np.nan, v]])
    with pytest.raises(DataError, match="rows"):
        spn.conditional([[1, .5]] * 2, [[np.nan, .5]])
    zero = spnc.compile(Product([Bernoulli(0, 1.0), Bernoulli(1, .5)]))
    with pytest.raises(DataError, match="probability zero"):
        zero.conditional([[0, 1]], [[0, np.nan]])
    assert zero.conditional([[1, 0]], [[1, np.nan]])[0] == pytest.approx(np.log(.5))


def test_mpe_and_sample_refuse_the_evidence_conditional_refuses():
    spn = spnc.compile(_MIX)
    named = spnc.compile(_MIX, var_names=["b", "g"])
    ok = [[np.nan, 0.5], [1.0, np.nan]]
    for v in (1e6, 1e10):                    # log p(evidence) near -5e11 and -5e19
        with pytest.raises(DataError, match="too large"):
            spn.conditional([[1, v]], [[np.nan, v]])
        E = np.array(ok + [[np.nan, v]])
        with pytest.raises(DataError, match=r"X row 2: log p\(evidence\).*too large.*variable 1 = "):
            spn.mpe(E)
        with pytest.raises(DataError, match=r"evidence row 2: .*too large.*variable 'g' = "):
            named.sample(evidence=E, seed=0)
    # evidence inside the range: the same answers as without the check's rows
    filled, lp = spn.mpe(np.array(ok))
    assert filled[0, 0] == 0.0 and filled[1, 1] == 2.0 and np.isfinite(lp).all()
    assert np.isfinite(spn.sample(evidence=np.array(ok), seed=0)).all()
    near = np.array([[np.nan, 1e3]])         # log p near -5e5: still exact enough
    assert spn.mpe(near)[0][0, 0] == 0.0
    assert np.isfinite(spn.sample(evidence=near, seed=0)).all()


def test_a_subnormal_std_is_evaluated_exactly():
    spn = spnc.compile(Gaussian(0, 0.0, 1e-310))
    want = -np.log(1e-310) - 0.5 * np.log(2 * np.pi)
    assert spn.log_likelihood([[0.0]])[0] == pytest.approx(want, rel=1e-14)
    assert spn.log_likelihood([[1e-310]])[0] == pytest.approx(want - 0.5, rel=1e-14)
    assert spn.log_likelihood([[1.0]])[0] == -np.inf


def test_learners_check_weights_candidates_and_validation_rows(files):
    _, X = files
    m = LearnSPN(min_instances=50).fit(X).spn_
    with pytest.raises(DataError, match="zero for every row"):
        EM(init=m, max_iter=2).fit(X, sample_weight=np.zeros(len(X)))
    with pytest.raises(DataError, match="no rows"):
        EM(init=m, max_iter=2).fit(X, X_valid=X[:0])
    with pytest.raises(ParameterError, match="param_distributions"):
        BaggedSPN(LearnSPN(min_instances=50), n_bags=2, param_distributions={"max_depth": []}).fit(X)
    for bad, msg in ((X[:, :3], "3 columns"), (np.full((3, 6), 2.0), "state"), (X[:0], "no rows")):
        with pytest.raises(DataError, match=msg):
            LearnSPN(min_instances=50, refine="em").fit(X, X_valid=bad)
    with pytest.raises(DataError, match="3 columns"):
        BaggedSPN(LearnSPN(min_instances=50), n_bags=2, weights="valid").fit(X, X_valid=X[:, :3])


def test_save_and_sample_name_what_is_wrong(tmp_path):
    spn = spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)]))
    with pytest.raises(TypeError, match="compiled spnc.SPN"):
        spnc.save("hello", tmp_path / "x.h5")
    with pytest.raises(TypeError, match="spn_"):
        spnc.save(type("Fitted", (), {"spn_": spn})(), tmp_path / "x.h5")
    for kw in (dict(n=True), dict(n=2.5), dict(n=3, seed=1.7)):
        with pytest.raises(ValueError):
            spn.sample(**kw)
    with pytest.raises(ValueError):
        spn.sample(2.5, evidence=[[np.nan, 1], [0, np.nan]])


def test_dataframe_columns_follow_the_cli_rule():
    pd = pytest.importorskip("pandas")
    spn = spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)]), var_names=["a", "b"])
    ok = pd.DataFrame({"b": [1, 0], "a": [0, 0]})
    np.testing.assert_allclose(spn.log_likelihood(ok), spn.log_likelihood([[0, 1], [0, 0]]))
    with pytest.raises(DataError, match="'c' is not among the model's variables"):
        spn.log_likelihood(pd.DataFrame({"a": [0], "b": [1], "c": [5]}))
    # a bad value names the frame's cell and its variable: the frame's column 0 is variable 1
    with pytest.raises(DataError, match=r"X\[1, 0\] = 2.0 is not a state 0..1 of discrete variable 1 \('b'\)"):
        spn.log_likelihood(pd.DataFrame({"b": [1, 2], "a": [0, 0]}))
    with pytest.raises(DataError, match=r"evidence\[0, 1\] = inf: infinite .*, variable 0 \('a'\)"):
        spn.sample(evidence=pd.DataFrame({"b": [1.0], "a": [np.inf]}))


def test_oslrau_refuses_data_without_columns():
    from spnc.learn import OSLRAU
    with pytest.raises(DataError, match="no columns"):
        OSLRAU().fit(np.zeros((10, 0)))


def test_learners_name_real_values_too_large_for_gaussian_statistics():
    from spnc.learn import OSLRAU, Prometheus
    X = np.random.default_rng(0).normal(size=(60, 3))
    X[5, 1] = 1e200
    for est in (LearnSPN(), OSLRAU(), Prometheus(), *(LearnSPN(random_state=s) for s in range(20))):
        with pytest.raises(DataError, match=r"X\[5, 1\] = 1e\+200"):      # whichever rows "auto" holds out
            est.fit(X)


def test_streamed_outputs_keep_the_rest_of_their_file(tmp_path):
    from spnc import stream
    spn = spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)]))
    X = (np.random.default_rng(1).random((50, 2)) < 0.5).astype(float)
    h = tmp_path / "clicks.h5"
    with h5py.File(h, "w") as f:
        f["train"], f["test"] = X, X[:20]
    assert stream.log_likelihood_to_file(spn, f"{h}:/test", f"{h}:/ll") == 20
    assert stream.log_likelihood_to_file(spn, f"{h}:/train", f"{h}:/ll") == 50      # replaced
    with h5py.File(h, "r") as f:
        assert sorted(f) == ["ll", "test", "train"] and np.array_equal(f["train"][()], X)
        np.testing.assert_array_equal(f["ll"][()], spn.log_likelihood(X))
    with pytest.raises(DataError, match="also the input"):
        stream.log_likelihood_to_file(spn, f"{h}:/test", f"{h}:/test")
    n = tmp_path / "x.npy"
    np.save(n, X)
    with pytest.raises(DataError, match="also the input"):
        stream.log_likelihood_to_file(spn, str(n), str(n))
    assert np.array_equal(np.load(n), X)
    t = tmp_path / "notes.h5"
    t.write_text("not hdf5")
    with pytest.raises(DataError, match="not an HDF5 file"):
        stream.log_likelihood_to_file(spn, f"{h}:/test", f"{t}:/ll")
    assert t.read_text() == "not hdf5" and not list(tmp_path.glob(".*.tmp"))


def test_dataframe_names_reach_every_learner_and_x_valid():
    pd = pytest.importorskip("pandas")
    from spnc.learn import Prometheus
    X = (np.random.default_rng(2).random((300, 5)) < 0.4).astype(float)
    df = pd.DataFrame(X, columns=list("abcde"))
    rev = df[list("edcba")]
    for est in (Prometheus(random_state=0), BaggedSPN(LearnSPN(min_instances=30), n_bags=2, random_state=0)):
        est.fit(df)
        assert est.spn_.var_names == list("abcde")
        np.testing.assert_array_equal(est.score_samples(rev), est.score_samples(df))
    # validation rows are matched by name, whatever their column order
    for make in (lambda: LearnSPN(sample_rows=150, refine_iter=3, random_state=0), lambda: Prometheus(random_state=0)):
        a = make().fit(df, X_valid=df.iloc[:80]).spn_
        b = make().fit(df, X_valid=rev.iloc[:80]).spn_
        np.testing.assert_array_equal(a.weight, b.weight)
        with pytest.raises(DataError, match="not among"):
            make().fit(df, X_valid=pd.DataFrame(X[:20], columns=list("uvwxy")))


def test_streamed_inputs_where_rows_must_be_in_memory(tmp_path):
    X = (np.random.default_rng(3).random((200, 4)) < 0.5).astype(float)
    h = tmp_path / "d.h5"
    with h5py.File(h, "w") as f:
        f["X"], f["V"] = X, X[:50]
    spn = LearnSPN(sample_rows=100, random_state=0).fit(f"{h}:/X", X_valid=f"{h}:/V").spn_   # validation read whole
    with pytest.raises(DataError, match="in memory"):
        BaggedSPN(LearnSPN(min_instances=30), n_bags=2).fit(f"{h}:/X")
    with pytest.raises(DataError, match="file name"):
        spn.log_likelihood(f"{h}:/X")
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(DataError, match="sparse"):
        LearnSPN().fit(sparse.csr_matrix(X))


def test_nested_parameters_and_fitted_checks():
    from spnc.learn import OSLRAU, Merge
    b = BaggedSPN(LearnSPN(min_instances=50), n_bags=2, merge=Merge(epsilon=0.1))
    deep = b.get_params(deep=True)
    assert deep["base_learner__min_instances"] == 50 and deep["merge__epsilon"] == 0.1
    assert "base_learner__min_instances" not in b.get_params(deep=False)
    b.set_params(base_learner__min_instances=30, n_bags=3)
    assert b.base_learner.min_instances == 30 and b.n_bags == 3
    with pytest.raises(ParameterError):
        b.set_params(n_bags__x=1)
    o = OSLRAU()
    assert not o.__sklearn_is_fitted__()
    o.fit(np.random.default_rng(0).normal(size=(50, 3)))
    assert o.__sklearn_is_fitted__()
    sk = pytest.importorskip("sklearn.model_selection")
    from sklearn.utils.validation import check_is_fitted
    check_is_fitted(o)
    X = (np.random.default_rng(4).random((240, 5)) < 0.4).astype(float)
    grid = sk.GridSearchCV(BaggedSPN(LearnSPN(min_instances=50), n_bags=2, random_state=0),
                           {"base_learner__min_instances": [30, 100]}, cv=2).fit(X)
    assert grid.best_params_["base_learner__min_instances"] in (30, 100)


def test_far_out_real_values():
    """log densities of -1e19 stay finite (not -inf); the backward pass and EM refuse rows
    beyond the range where their posteriors are exact, instead of losing their counts."""
    g = spnc.compile(Gaussian(0, 0.0, 1.0))
    x = np.array([[1e9], [1e10], [1e15]])
    want = -0.5 * x[:, 0] ** 2 - 0.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(g.log_likelihood(x), want, rtol=1e-12)
    m = spnc.compile(Sum([Gaussian(0, 0.0, 1.0), Gaussian(0, 5.0, 2.0)], [.5, .5]))
    np.testing.assert_allclose(m.log_likelihood([[1e10]]), [np.log(.5) - 0.5 * np.log(2 * np.pi * 4)
                                                           - (1e10 - 5) ** 2 / 8], rtol=1e-12)
    with pytest.raises(DataError, match="row 0: log p"):
        m.backward(np.array([[1e10], [0.0]]))
    with pytest.raises(DataError, match="row 50: log p"):
        EM(init=m, max_iter=2).fit(np.r_[np.random.default_rng(0).normal(size=(50, 1)), [[1e10]]])
    b = m.backward(np.array([[1e7], [0.0]]))          # -1.25e13: still exact
    np.testing.assert_allclose(b["edge_counts"].sum(), 2.0, rtol=1e-12)


def test_nul_in_variable_names_is_refused_everywhere(tmp_path):
    import json
    leaf = Product([Bernoulli(0, .3), Bernoulli(1, .6)])
    with pytest.raises(spnc.StructureError, match="NUL"):
        spnc.compile(leaf, var_names=["a\x00b", "c"])
    spn = spnc.compile(leaf, var_names=["ab", "c"])
    spnc.save(spn, tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    text = json.dumps(doc).replace('"ab"', '"a\\u0000b"')
    (tmp_path / "nul.json").write_text(text)
    with pytest.raises(spnc.FormatError, match="NUL"):
        spnc.load(tmp_path / "nul.json")


def test_oslrau_on_discrete_columns_needs_types_r(files, tmp_path, capsys):
    d, _ = files
    assert learn.main([str(d / "tr.csv"), "-o", str(tmp_path / "o.h5"), "--learner", "oslrau"]) == 2
    assert "give --types r" in capsys.readouterr().err
    assert learn.main([str(d / "tr.csv"), "-o", str(tmp_path / "o.h5"), "--learner", "oslrau", "--types", "r",
                       "-q"]) == 0


def test_fourth_hunt_inputs(monkeypatch, tmp_path):
    """Integer-named nullable frames, masked arrays, huge or overflowing parameters, Merge's
    epsilon and routing, bag and sample sizes beyond the memory budget, weight overflow."""
    from spnc.learn import OSLRAU, ChowLiuTree, Merge
    pd = pytest.importorskip("pandas")
    spn = spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)]))
    df = pd.DataFrame({0: pd.array([1, 0], dtype="Int64"), 1: pd.array([0, pd.NA], dtype="Int64")})
    with pytest.warns(UserWarning, match="taken by position"):       # spn has no var_names
        np.testing.assert_array_equal(spn.log_likelihood(df), spn.log_likelihood([[1, 0], [0, np.nan]]))
    masked = np.ma.array([[1.0, 0.0]], mask=[[False, True]])
    np.testing.assert_array_equal(spn.log_likelihood(masked), spn.log_likelihood([[1, np.nan]]))
    X = (np.random.default_rng(5).random((80, 2)) < 0.5).astype(float)
    for est in (ChowLiuTree(alpha=10 ** 400), LearnSPN(n_iter=2 ** 31), OSLRAU(batch_size=2 ** 70)):
        with pytest.raises(ParameterError):
            est.fit(X)
    ChowLiuTree(alpha=2 ** 70).fit(X)                     # a huge but representable pseudo-count
    tree = LearnSPN(min_instances=20, sum_split="observed").fit(X).spn_
    with pytest.raises(ParameterError, match="epsilon"):
        Merge(init=tree, epsilon=[[0.1]]).fit(X[:60], X_valid=X[60:])
    Merge(init=tree, epsilon=0.1, alpha=np.uint8(1)).fit(X[:60], X_valid=X[60:])
    for bad in (np.full((60, tree.n_nodes), 0.5), -np.ones((60, tree.n_nodes)), np.zeros((60, tree.n_nodes, 1))):
        with pytest.raises(DataError, match="routing"):
            Merge(init=tree, epsilon=0.1, routing=bad).fit(X[:60], X_valid=X[60:])
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "1M")
    with pytest.raises(DataError, match="memory budget"):
        spn.sample(10 ** 6)
    with pytest.raises(DataError, match="memory budget"):
        BaggedSPN(LearnSPN(), n_bags=10 ** 6).fit(X)
    with pytest.raises(DataError, match="memory budget"):
        OSLRAU().fit(np.random.default_rng(0).normal(size=(5, 400)))
    monkeypatch.delenv("SPNC_MEMORY_BUDGET")
    for est in (EM(init=tree, max_iter=2), ChowLiuTree()):
        with pytest.raises(DataError, match="rescale the weights"):
            est.fit(X, sample_weight=np.full(len(X), 1e300))


class _PosGauss(spnc.Gaussian):
    __slots__ = ()


def test_a_leaf_types_own_support_check_runs_on_every_query():
    """LeafType.check_data is the plug-in hook for a type's support: a vendor type that
    refuses negative values is asked on log_likelihood, mpe and conditional alike."""
    from spnc.leaves.base import register_leaf
    from spnc.leaves.univariate import GaussianLeaves

    @register_leaf
    class XTestPositive(GaussianLeaves):
        name, code, node_class = "x_test_positive", 141, _PosGauss

        def check_data(self, X, cardinality):
            cols = np.unique(np.concatenate(self.scopes))
            bad = np.argwhere(X[:, cols] < 0)
            if bad.size:
                r, c = bad[0]
                raise DataError(f"X[{r}, {cols[c]}] = {X[r, cols[c]]} is negative: outside the support")

    spn = spnc.compile(spnc.Product([_PosGauss(0, 1.0, 1.0), spnc.Bernoulli(1, 0.3)]))
    ok = np.array([[0.5, 1.0], [np.nan, 0.0]])
    assert np.isfinite(spn.log_likelihood(ok)).all()
    bad = np.array([[0.5, 1.0], [-2.0, 0.0]])
    for query in (spn.log_likelihood, lambda X: spn.mpe(X), lambda X: spn.conditional(X, X)):
        with pytest.raises(DataError, match=r"X\[1, 0\] = -2.0 is negative"):
            query(bad)


def test_mpe_and_sample_give_a_dataframe_s_rows_in_its_column_order():
    """A DataFrame's columns are matched to the model's variables by name, in any order;
    the completed rows come back in the DataFrame's order, so its labels still fit."""
    pd = pytest.importorskip("pandas")
    spn = spnc.compile(spnc.Sum([spnc.Product([spnc.Bernoulli(0, 0.9), spnc.Categorical(1, [0.1, 0.2, 0.7])]),
                                 spnc.Product([spnc.Bernoulli(0, 0.2), spnc.Categorical(1, [0.8, 0.1, 0.1])])],
                                [0.5, 0.5]), var_names=["a", "b"])
    model_order = np.array([[np.nan, 2.0], [1.0, np.nan], [np.nan, np.nan]])
    df = pd.DataFrame({"b": model_order[:, 1], "a": model_order[:, 0]})
    filled, lp = spn.mpe(df)
    want, want_lp = spn.mpe(model_order)
    np.testing.assert_array_equal(filled, want[:, [1, 0]])
    np.testing.assert_array_equal(lp, want_lp)
    np.testing.assert_array_equal(spn.sample(evidence=df, seed=3), spn.sample(evidence=model_order, seed=3)[:, [1, 0]])
    same = pd.DataFrame({"a": model_order[:, 0], "b": model_order[:, 1]})
    np.testing.assert_array_equal(spn.mpe(same)[0], want)
