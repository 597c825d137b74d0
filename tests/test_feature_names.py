"""Queries with and without column names (scikit-learn's convention): a DataFrame for a
model without variable names is taken by position with a warning; an estimator fitted on
a DataFrame warns when queried with a plain array; a named SPN takes arrays by position
silently (its names are part of the model file, and arrays are its ordinary input)."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import spnc
from spnc.cli import evaluate, learn
from spnc.learn import ChowLiuTree, LearnSPN

pd = pytest.importorskip("pandas")

X = np.random.default_rng(0).integers(0, 2, size=(120, 3)).astype(float)
FRAME = pd.DataFrame(X, columns=["a", "b", "c"])
UNNAMED = "has feature names, but this SPN has no variable names"


@pytest.fixture(scope="module")
def unnamed():
    return ChowLiuTree().fit(X)


@pytest.fixture(scope="module")
def named():
    return ChowLiuTree().fit(FRAME)


@pytest.mark.parametrize("query", [
    lambda s, f: s.log_likelihood(f),
    lambda s, f: s.mpe(f),
    lambda s, f: s.sample(evidence=f[:2], seed=0),
    lambda s, f: s.conditional(f, f * np.array([np.nan, 1, 1])),
    lambda s, f: s.node_log_values(f),
    lambda s, f: spnc.stream.log_likelihood(s, [f[:50], f[50:]]),
], ids=["log_likelihood", "mpe", "sample", "conditional", "node_log_values", "stream"])
def test_a_dataframe_for_a_model_without_names_warns(unnamed, query):
    with pytest.warns(UserWarning, match=UNNAMED) as got:
        out = query(unnamed.spn_, FRAME)
    assert len({str(w.message) for w in got}) <= 2       # conditional: one per argument
    if not isinstance(out, tuple):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_array_equal(out, query(unnamed.spn_, X))   # by position, as before


def test_estimators_follow_scikit_learn(unnamed, named):
    with pytest.warns(UserWarning) as got:
        a = unnamed.score_samples(FRAME)
    assert [str(w.message) for w in got] == [        # once, in the estimator's words
        "X has feature names, but ChowLiuTree was fitted without feature names: the DataFrame's columns "
        "are taken by position"]
    with pytest.warns(UserWarning, match="^X does not have valid feature names, but ChowLiuTree was fitted "
                                         "with feature names"):
        b = named.score(X)
    assert b == pytest.approx(a.mean(), abs=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        named.score(FRAME[["c", "a", "b"]])          # matched by name
        named.spn_.log_likelihood(X)                 # a named SPN: arrays by position, silently
        unnamed.score(X)
        unnamed.spn_.sample(3, seed=0)


def test_cli_tools_do_not_warn_about_names(tmp_path):
    """The tools read files into arrays and match headers themselves."""
    with_header, without = tmp_path / "h.csv", tmp_path / "n.csv"
    FRAME.astype(int).to_csv(with_header, index=False)
    np.savetxt(without, X, fmt="%d", delimiter=",")
    np.save(tmp_path / "x.npy", X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for data in (with_header, without):
            m = tmp_path / f"{data.stem}.h5"
            assert learn.main([str(data), "-o", str(m), "-q"]) == 0
            for other in (with_header, without, tmp_path / "x.npy"):
                args = [str(m), str(other), "-q", "--out-ll", str(tmp_path / "ll.npy")]
                if data == with_header and other != with_header:
                    args.append("--by-position")
                assert evaluate.main(args) == 0, (data, other)
                assert evaluate.main([str(m), str(other), "-q", "--mpe", str(tmp_path / "m.csv")]
                                     + args[5:]) == 0


@pytest.mark.parametrize("make", [lambda: LearnSPN(refine="em", refine_iter=2, min_instances=40),
                                  lambda: __import__("spnc.learn", fromlist=["Prometheus"]).Prometheus(
                                      refine="em", refine_iter=2, min_instances=40)])
def test_frame_x_valid_after_array_x_warns_once(make):
    """Rows without names, validation rows as a DataFrame: one warning, not one per later
    check (EM's passes, the final check); the columns taken by position."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        est = make().fit(X, X_valid=FRAME.iloc[:30, ::-1])
    msgs = [str(m.message) for m in w]
    assert len(msgs) == 1 and "X_valid has feature names, but X has none" in msgs[0], msgs
    assert est.spn_.var_names is None


def test_a_frame_refused_outright_is_not_also_warned_about(unnamed):
    """A DataFrame the query refuses (a text column) gets the error alone, not first the
    warning that its columns would be taken by position."""
    bad = FRAME.astype({"b": object})
    bad.loc[0, "b"] = "x"
    for query in (unnamed.spn_.log_likelihood, lambda D: spnc.stream.log_likelihood(unnamed.spn_, [D])):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(spnc.DataError, match="column 'b' has dtype object"):
                query(bad)


def test_streamed_blocks_mixing_arrays_then_frames_are_refused():
    """A DataFrame block after array blocks would name, in its own column order, columns
    already read by position (was: the model took ['c', 'a', 'b'] for columns that were
    a, b, c in the first block). Frames first, then arrays, stay in the frames' order; a
    model's names make arrays before frames well-defined."""
    blocks = [X[:60], FRAME.iloc[60:][["c", "a", "b"]]]
    for fit in (lambda B: ChowLiuTree().fit(B), lambda B: spnc.learn.EM(init=LearnSPN().fit(X).spn_,
                                                                       max_iter=1).fit(B)):
        with pytest.raises(spnc.DataError, match="the block at row 60 is a DataFrame, but the blocks before it"):
            fit(blocks)
    assert ChowLiuTree().fit([FRAME.iloc[:60], X[60:]]).spn_.var_names == ["a", "b", "c"]
    named = ChowLiuTree().fit(FRAME)
    want = named.score_samples(FRAME)
    np.testing.assert_allclose(spnc.stream.log_likelihood(named.spn_, blocks), want, rtol=1e-12)


def test_a_series_is_refused_with_a_hint_that_keeps_its_labels(named):
    """A row as a Series (df.iloc[0]) was refused as a 1-D array with the hint X[None, :],
    which drops its labels and takes it by position: wrong when its order is not the model's."""
    s = FRAME[["c", "a", "b"]].iloc[0]
    for query in (named.spn_.log_likelihood, named.spn_.mpe, lambda v: named.spn_.sample(evidence=v)):
        with pytest.raises(spnc.DataError, match=r"X is a pandas Series.*df.iloc\[\[i\]\]|evidence is a pandas"):
            query(s)
    np.testing.assert_allclose(named.spn_.log_likelihood(s.to_frame().T), named.score_samples(FRAME.iloc[[0]]))


def test_multiindex_columns_are_names_matched_in_any_order():
    """MultiIndex labels become the names "('g', 'a')", ...: a reordered frame with the same
    labels is matched by name, other labels are an error, never a positional guess."""
    mi = pd.MultiIndex.from_tuples([("g", "a"), ("g", "b"), ("h", 1)])
    F = pd.DataFrame(X, columns=mi)
    for est in (ChowLiuTree(), LearnSPN(random_state=0)):
        est.fit(F)
        assert est.spn_.var_names == ["('g', 'a')", "('g', 'b')", "('h', 1)"]
        back = F[[("h", 1), ("g", "a"), ("g", "b")]]
        np.testing.assert_array_equal(est.score_samples(back), est.score_samples(F))
        np.testing.assert_array_equal(est.spn_.log_likelihood(back), est.spn_.log_likelihood(X))
        flat = F.set_axis(["g_a", "g_b", "h_1"], axis=1)
        with pytest.raises(spnc.DataError, match="not among the DataFrame's columns"):
            est.spn_.log_likelihood(flat)


def test_a_dataframe_or_an_opened_source_streams_by_name(named, tmp_path):
    """spnc.stream took a whole DataFrame as an array (columns by position), and a source
    opened without the model (stream.open_source(blocks)) in its first block's column
    order: both silently wrong for a named model given columns in another order."""
    spn, back = named.spn_, FRAME[["c", "a", "b"]]
    want = spn.log_likelihood(FRAME)
    assert not np.allclose(spn.log_likelihood(back.to_numpy()), want)        # the order matters here
    np.testing.assert_allclose(spnc.stream.log_likelihood(spn, back), want, rtol=1e-12)
    spnc.stream.log_likelihood_to_file(spn, back, str(tmp_path / "ll.npy"), block_rows=7)
    np.testing.assert_allclose(np.load(tmp_path / "ll.npy"), want, rtol=1e-12)
    np.testing.assert_array_equal(spnc.stream.load(back, var_names=spn.var_names), X)
    np.testing.assert_allclose(spnc.stream.log_likelihood(spn, spnc.stream.open_source([back[:50], back[50:]])),
                               want, rtol=1e-12)
    em = lambda D: spnc.learn.EM(init=LearnSPN(random_state=0).fit(FRAME).spn_, max_iter=2).fit(D)  # noqa: E731
    np.testing.assert_allclose(em(spnc.stream.open_source([back[:50], back[50:]])).score_samples(FRAME),
                               em(FRAME).score_samples(FRAME), rtol=1e-9)


def test_oslrau_batches_and_partial_fits_follow_the_names_rule():
    """oSLRAU named its variables after a DataFrame batch that followed array batches, in
    that frame's order (the arrays' columns silently relabelled), and partial_fit took a
    frame after arrays, or an array after frames, by position without a word."""
    from spnc.learn import OSLRAU
    R = np.random.default_rng(1).normal(size=(600, 3))
    F = pd.DataFrame(R, columns=["x", "y", "z"])
    with pytest.raises(spnc.DataError, match="the batch at row 300 is a DataFrame, but the batches before it"):
        OSLRAU(random_state=0).fit([R[:300], F.iloc[300:][["z", "x", "y"]]])
    for first, then, says in ((R[:300], F.iloc[300:], "X has feature names, but OSLRAU was fitted without"),
                              (F.iloc[:300], R[300:], "X does not have valid feature names, but OSLRAU")):
        est = OSLRAU(random_state=0).partial_fit(first)
        with pytest.warns(UserWarning, match=says):
            est.partial_fit(then)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert OSLRAU(random_state=0).fit([F.iloc[:300], R[300:]]).spn_.var_names == ["x", "y", "z"]
        big = pd.DataFrame(np.random.default_rng(2).normal(size=(66_000, 2)), columns=["u", "v"])
        OSLRAU(random_state=0, batch_size=4096).fit(big)    # fit's own slabs (two here): no warning


def test_a_named_hdf5_dataset_streams_by_name(named, tmp_path):
    """The console tools read an HDF5 dataset's ``columns`` attribute and match it to the
    model's variables; the Python API (spnc.stream, EM on 'file.h5:/X') took the same
    dataset by position, silently wrong when stored in another order."""
    import h5py
    spn = named.spn_
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["X"] = X[:, [2, 0, 1]]
        f["X"].attrs["columns"] = ["c", "a", "b"]
        f["Q"] = X
        f["Q"].attrs["columns"] = ["a", "b", "q"]
    spec = f"{tmp_path / 'd.h5'}:/X"
    np.testing.assert_allclose(spnc.stream.log_likelihood(spn, spec), spn.log_likelihood(X), rtol=1e-12)
    np.testing.assert_array_equal(spnc.stream.load(spec, var_names=spn.var_names), X)
    init = LearnSPN(random_state=0).fit(FRAME).spn_
    em = lambda D: spnc.learn.EM(init=init, max_iter=2).fit(D).spn_.log_likelihood(X)  # noqa: E731
    np.testing.assert_allclose(em(spec), em(X), rtol=1e-9)
    with pytest.raises(spnc.DataError, match="variable 'c' is not among its column names attribute"):
        spnc.stream.log_likelihood(spn, f"{tmp_path / 'd.h5'}:/Q")


def test_names_alike_but_for_their_unicode_form_say_so(tmp_path, capsys):
    # was: "missing 'café'; unknown 'café'", one name seemingly both missing and unknown
    import unicodedata
    nfc, nfd = (unicodedata.normalize(f, "café") for f in ("NFC", "NFD"))
    model = spnc.compile(spnc.Product([spnc.Bernoulli(0, .3), spnc.Bernoulli(1, .6)]), var_names=[nfc, "x"])
    hint = r"'café' is spelled with other Unicode characters in the data, 'cafe\\u0301', than in the model"
    with pytest.raises(spnc.DataError, match=hint):
        model.log_likelihood(pd.DataFrame([[0, 1]], columns=[nfd, "x"]))
    m, data = tmp_path / "m.h5", tmp_path / "d.csv"
    spnc.save(model, m)
    data.write_text(f"{nfd},x\n0,1\n", encoding="utf-8")
    assert evaluate.main([str(m), str(data)]) == 2
    assert re.search(hint, capsys.readouterr().err)


def test_an_array_x_valid_after_a_dataframe_x_warns_as_a_query_does():
    """An array X_valid after a DataFrame X was taken by position without a word (the
    reverse, a DataFrame X_valid after an array X, warned): now both warn, once per fit."""
    from spnc.learn import EM, Merge, Prometheus, TreeSPN
    rows = np.random.default_rng(1).integers(0, 2, size=(200, 3)).astype(float)
    df = pd.DataFrame(rows, columns=["a", "b", "c"])
    init = LearnSPN(random_state=0).fit(rows).spn_
    fits = {"LearnSPN": lambda v: LearnSPN(refine="em", random_state=0).fit(df, X_valid=v),
            "Prometheus": lambda v: Prometheus(random_state=0).fit(df, X_valid=v),
            "EM": lambda v: EM(init=init, max_iter=2).fit(df, X_valid=v),
            "Merge": lambda v: Merge(init=init).fit(df, X_valid=v),
            "TreeSPN": lambda v: TreeSPN(n_trees=2, max_depth=2).fit(df, X_valid=v)}
    for name, fit in fits.items():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            fit(rows[:50])
        said = [str(x.message) for x in w if "X_valid does not have valid feature names" in str(x.message)]
        assert said == [f"X_valid does not have valid feature names, but X has: {name}.fit takes its columns "
                        "by position"], name
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fit(df[:50])


def test_blocks_from_a_callable_name_the_fit_even_with_a_named_init():
    """With a named init, EM over a callable of DataFrame blocks left feature_names_in_
    unset (the blocks are read once, inside the fit); it is now the first block's columns
    in its own order, as a DataFrame fit gives them, and a block lacking one is refused."""
    from spnc.learn import EM
    init = LearnSPN(min_instances=50).fit(FRAME).spn_      # Bernoulli leaves: EM streams them
    cba = FRAME[["c", "b", "a"]]
    blocks = lambda: (cba.iloc[i:i + 40] for i in (0, 40, 80))      # noqa: E731
    got = EM(init=init, max_iter=2).fit(blocks)
    want = EM(init=init, max_iter=2).fit(cba)
    assert list(got.feature_names_in_) == list(want.feature_names_in_) == ["c", "b", "a"]
    assert np.allclose(got.spn_.weight, want.spn_.weight)
    short = lambda: iter([cba.iloc[:40], cba.iloc[40:, :2]])     # noqa: E731
    with pytest.raises(spnc.DataError, match="'a'"):
        EM(init=init, max_iter=2).fit(short)
