"""The types of data users pass in (pandas extension dtypes, odd numpy dtypes, lists,
weights) reach every query and learner as the same numbers or as the same clear error
(the bugs of an input-type hunt, session 23)."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import DataError
from spnc.learn import EM, OSLRAU, ChowLiuTree, LearnSPN

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def codes():
    X = np.random.default_rng(0).integers(0, 3, (150, 4))
    return X, ChowLiuTree().fit(X).spn_


def _queries(spn):
    return {"log_likelihood": spn.log_likelihood, "mpe": spn.mpe, "node_log_values": spn.node_log_values,
            "backward": spn.backward, "sample": lambda X: spn.sample(evidence=X, seed=0),
            "conditional": lambda X: spn.conditional(X, X)}


@pytest.mark.parametrize("rows, match", [
    ([["0", "1", "2", "0"]], "numeric"),                       # was: parsed as numbers by queries
    ([[0, None, 2, 0]], "Python objects"),                     # was: None read as NaN by queries
    (np.array([[0, 1, 2, 0]], dtype=object), "Python objects"),
])
def test_text_and_objects_are_refused_by_every_query_and_learner(codes, rows, match):
    X, spn = codes
    for q in _queries(spn).values():
        with pytest.raises(DataError, match=match):
            q(rows)
    many = np.repeat(np.asarray(rows), 20, axis=0)
    many = many if many.dtype == object else many.tolist()
    for est in (ChowLiuTree(), LearnSPN(), OSLRAU(), EM(init=spn, max_iter=1)):
        with pytest.raises(DataError, match=match):             # was: OSLRAU and EM parsed text
            est.fit(many)


def test_a_generator_is_not_a_query_s_rows(codes):
    with pytest.raises(DataError, match="generator, not an array of rows"):
        codes[1].log_likelihood(r for r in [[0, 1, 2, 0]])
    # was: "X holds a ArraySource, not an array of rows; pass numbers ..."
    with spnc.stream.open_source(np.array([[0, 1, 2, 0]])) as src:
        with pytest.raises(DataError, match=r"X is a block source \(ArraySource\); .* spnc.stream.load"):
            codes[1].log_likelihood(src)


@pytest.mark.parametrize("dtype", ["uint64", "UInt64"])
def test_a_uint64_column_above_int64_keeps_its_sign(codes, dtype):
    big = pd.DataFrame({"a": pd.array(np.array([2**63 + 7, 1, 2], dtype=np.uint64), dtype=dtype),
                        "b": [0.5, 1.5, 2.5]})
    # was: wrapped to -9.2e18 by the DataFrame's conversion to int64
    assert spnc.data.as_data(big)[0][0, 0] == float(2**63 + 7)
    assert OSLRAU().fit(big).spn_.stats["mean"].min() > 0
    X, spn = codes
    df = pd.DataFrame(X[:3]).astype({0: dtype})
    df.iloc[0, 0] = 2**63 + 7
    with pytest.raises(DataError, match=r"X\[0, 0\] = 9\.22"):
        spn.log_likelihood(df)


@pytest.mark.parametrize("w, match", [
    (["1"] * 150, "numeric, got dtype <U1"),                  # was: parsed by EM and backward
    (np.ones(150) + 1j, "numeric, got dtype complex"),         # was: the imaginary part dropped
    (np.ones(150, dtype=object), "numeric, got dtype object"),
    (np.r_[np.ones(149), -1.0], r"sample_weight\[149\] = -1.0"),   # was: no index named
    (np.ones(149), r"shape \(150,\)"),
])
def test_every_weighted_call_checks_weights_alike(codes, w, match):
    X = codes[0]
    spn = LearnSPN(random_state=0).fit(X).spn_      # leaves with streaming statistics
    fits = [lambda: ChowLiuTree().fit(X, sample_weight=w), lambda: spn.backward(X, sample_weight=w),
            lambda: EM(init=spn, max_iter=1).fit(X, sample_weight=w),
            lambda: EM(init=spn, max_iter=1).fit([X[:100], X[100:]], sample_weight=w)]   # streamed
    for fit in fits:
        with pytest.raises(DataError, match=match), np.errstate(all="ignore"):
            fit()


def test_masked_cells_are_missing_in_streamed_blocks_too(codes):
    X, spn = codes
    M = np.ma.MaskedArray(X.astype(float), mask=np.zeros(X.shape, bool))
    M[0, 1] = np.ma.masked                         # its hidden value stays X[0, 1]
    ref = spn.log_likelihood(np.where(M.mask, np.nan, X))
    assert np.array_equal(spn.log_likelihood(M), ref)
    # was: the blocks' mask dropped by np.asarray, the hidden values read as data
    assert np.allclose(spnc.stream.log_likelihood(spn, [M[:100], M[100:]]), ref)
    assert np.allclose(spnc.stream.log_likelihood(spn, spnc.stream.ArraySource(M, 64)), ref)
    for est in (ChowLiuTree(), LearnSPN()):
        with pytest.raises(DataError, match=r"X\[0, 1\] = nan is missing"):
            est.fit([M[:100], M[100:]])
    with pytest.raises(DataError, match=r"X\[0, 1\] = nan is missing"):
        spnc.chowliu.fit_chow_liu(M)


def test_a_delimiter_at_the_end_of_each_line_is_named(tmp_path, capsys):
    from spnc.cli import evaluate, learn
    X = np.random.default_rng(1).integers(0, 2, (60, 3))
    np.savetxt(tmp_path / "tr.csv", X, fmt="%d", delimiter=",")
    assert learn.main([str(tmp_path / "tr.csv"), "-o", str(tmp_path / "m.h5"), "-q"]) == 0
    (tmp_path / "trail.csv").write_text("".join(",".join(map(str, r)) + ",\n" for r in X))
    capsys.readouterr()
    # was: "data has 4 columns, the model has 3 variables" with no word of why
    assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "trail.csv")]) == 2
    assert "column 4 is empty or missing on every line: does each line end with a delimiter?" \
        in capsys.readouterr().err
    assert learn.main([str(tmp_path / "trail.csv"), "-o", str(tmp_path / "m2.h5"), "-q"]) == 2
    assert "does each line end with a delimiter?" in capsys.readouterr().err
    (tmp_path / "trailh.csv").write_text("a,b,c,\n" + "".join(",".join(map(str, r)) + ",\n" for r in X))
    for extra in ([], ["--header"]):
        # was: "'a' is not a number (... give --header ...)", then "header column 4 has no name"
        assert learn.main([str(tmp_path / "trailh.csv"), "-o", str(tmp_path / "m2.h5"), "-q", *extra]) == 2
        assert "does each line end with a delimiter? Remove the last one" in capsys.readouterr().err


def test_category_and_object_columns_say_how_to_convert(codes):
    X, spn = codes
    df = pd.DataFrame(X[:5], columns=list("abcd"))
    # was: "encode categories as integer codes" for both, whose codes are the category's?
    with pytest.raises(DataError, match=r"column 'b' has dtype category.*cat\.codes.*astype\(float\)"):
        spn.log_likelihood(df.astype({"b": "category"}))
    with pytest.raises(DataError, match=r"column 'c' has dtype object.*pd\.to_numeric"):
        ChowLiuTree().fit(df.astype({"c": object}))
    for text in (str, "string"):       # pandas' text dtypes (pandas 3 reads text columns as 'str')
        with pytest.raises(DataError, match=r"column 'c' has dtype \w+, not numeric \(text: .*pd\.to_numeric"):
            spn.log_likelihood(df.astype({"c": text}))
    with pytest.raises(DataError, match=r"X_valid must be 2-D .* use X_valid\[None, :\]"):
        LearnSPN(refine="em").fit(X, X_valid=X[0])      # a setting that reads X_valid


def test_ragged_rows_and_unobserved_masked_rows_are_named_before_learning(codes):
    X = codes[0]
    ragged = [[0, 1, 2, 0], [0, 1]]
    for est in (LearnSPN(refine="em"), spnc.learn.Prometheus(refine="em")):    # settings that read X_valid
        # was: numpy's ValueError "inhomogeneous shape" from the check of X_valid
        with pytest.raises(DataError, match="X_valid must be a numeric 2-D array: row 1 has 2 values, row 0 4"):
            est.fit(X, X_valid=ragged)
    with pytest.raises(DataError, match="got a 2-D y"):     # was: the same ValueError
        LearnSPN().fit(X, ragged)
    with pytest.raises(DataError, match="X must be a numeric 2-D array: row 1 has a single value"):
        codes[1].log_likelihood([[0, 1, 2, 0], 1])
    hidden = np.ma.MaskedArray(X[:5].astype(float), mask=True)
    # was: the mask dropped, validation on rows with no observed value went ahead
    with pytest.raises(DataError, match="X_valid has no observed value"):
        LearnSPN(refine="em").fit(X, X_valid=hidden)


def test_sparse_matrices_are_named_wherever_rows_are_read(codes):
    sparse = pytest.importorskip("scipy.sparse")
    X, spn = codes
    S = sparse.csr_matrix(X)
    # was: "X holds a ndarray" / numpy's float() error on the 0-d object array it became
    for f in (lambda: spnc.stream.log_likelihood(spn, S), lambda: spnc.chowliu.fit_chow_liu(S),
              lambda: ChowLiuTree().fit([S[:100], S[100:]]), lambda: spn.log_likelihood(S)):
        with pytest.raises(DataError, match=r"is a sparse matrix; spnc reads dense rows \(pass its \.toarray\(\)"):
            f()


def test_a_pandas_index_column_in_a_csv_is_named(tmp_path, capsys):
    from spnc.cli import evaluate, learn
    df = pd.DataFrame(np.random.default_rng(2).integers(0, 2, (40, 3)), columns=list("abc"))
    df.to_csv(tmp_path / "idx.csv")                 # header ",a,b,c", row labels in column 1
    capsys.readouterr()
    # was: "'a' is not a number (... give --header ...)", then "header column 1 has no name"
    for extra in ([], ["--header"]):
        assert learn.main([str(tmp_path / "idx.csv"), "-o", str(tmp_path / "m.h5"), "-q", *extra]) == 2
        assert "pandas' to_csv writes unless index=False? Drop that column" in capsys.readouterr().err
    df.to_csv(tmp_path / "ok.csv", index=False)
    assert learn.main([str(tmp_path / "ok.csv"), "-o", str(tmp_path / "m.h5"), "-q"]) == 0
    assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "idx.csv"), "-q"]) == 2


def test_stream_load_refuses_text_and_complex_blocks(codes):
    X, spn = codes
    S = X.astype(str)
    # was: parsed to numbers (text) or cut to the real part with a ComplexWarning
    with pytest.raises(DataError, match="X: the block at row 100 must be numeric"):
        spnc.stream.load([X[:100], S[100:]])
    with pytest.raises(DataError, match="complex"):
        spnc.stream.load([X[:100] + 1j, X[100:] + 1j])
    with pytest.raises(DataError, match="X_valid: the block at row 0 must be numeric"):
        EM(init=LearnSPN(random_state=0).fit(X).spn_, max_iter=1).fit(X, X_valid=[S[:10], S[10:20]])


def test_a_generator_of_single_rows_is_told_to_give_blocks(codes):
    X, spn = codes
    # was: only "every block must be 2-D (rows, n_vars), got shape (4,) at row 0"
    for f in (lambda: ChowLiuTree().fit(r for r in X), lambda: spnc.stream.log_likelihood(spn, iter(X))):
        with pytest.raises(DataError, match=r"got shape \(4,\) at row 0; an iterator or callable gives "
                                            r"blocks of rows, not single rows"):
            f()


class _Counted(str):
    """A name that counts the comparisons made with it (a str subclass: Python asks it first)."""
    calls = 0

    def __eq__(self, other):
        _Counted.calls += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_wide_frames_are_matched_to_names_in_linear_time():
    from spnc.cli._data import Table, match_columns
    d = 400
    names = [f"v{j}" for j in range(d)]
    model_names = [_Counted(n) for n in reversed(names)]
    df = pd.DataFrame(np.zeros((2, d)), columns=names)
    _Counted.calls = 0
    A, cols = spnc.data.as_data(df, model_names)
    assert cols == names[::-1] and A.shape == (2, d)
    # was: a list scan per name and a set built per column, d * d / 2 comparisons and more
    # (8000 columns: 10 s of every query of a DataFrame)
    assert _Counted.calls < 10 * d
    _Counted.calls = 0
    tab = match_columns(Table(np.zeros((2, d)), names, "f.csv"), model_names, d)
    assert tab.names == names[::-1] and _Counted.calls < 10 * d


def test_a_reversed_column_range_is_named():
    from spnc.cli._data import parse_columns
    assert parse_columns("0-2", None, 4) == [0, 1, 2]
    with pytest.raises(DataError, match=r"column range '2-0' is empty: give the lower index first \(0-2\)"):
        parse_columns("2-0", None, 4)          # was: no column, then only "no query columns"
    assert parse_columns("b,0", ["a", "b", "c"], 3) == [0, 1]


def test_a_masked_weight_is_missing_not_its_hidden_value(codes):
    X = codes[0]
    w = np.ma.MaskedArray(np.ones(len(X)), mask=np.arange(len(X)) == 7)
    # was: the mask dropped, the hidden 1.0 used as the weight
    for fit in (lambda: ChowLiuTree().fit(X, sample_weight=w), lambda: codes[1].backward(X, sample_weight=w)):
        with pytest.raises(DataError, match=r"sample_weight\[7\] = nan: weights must be finite"):
            fit()


def test_quoted_cells_are_read_with_a_blank_delimiter_too(tmp_path):
    from spnc.cli._table import read_text
    p = tmp_path / "q.txt"
    p.write_text('"a" "b c"  d\n"1" ""   2.5\n0 1 "?"\n')
    # was: '"1"' is not a number (docs/cli.md: quoted cells are read as CSV quoting)
    tab = read_text(str(p), delimiter="space")
    assert tab.names == ["a", "b c", "d"]
    assert np.array_equal(tab.X, [[1, np.nan, 2.5], [0, 1, np.nan]], equal_nan=True)
    p.write_text('1 "2\n')
    with pytest.raises(DataError, match="line 1: No closing quotation"):
        read_text(str(p), delimiter="space")


def test_a_blank_line_in_a_one_column_file_is_not_dropped_silently(tmp_path):
    from spnc.cli._table import read_text
    p = tmp_path / "one.csv"
    p.write_text("x\n1.5\n\n2.5\n\n")         # an empty cell is a missing value, a blank line nothing
    # was: 2 rows, the blank line (a missing value?) dropped and later rows shifted up
    with pytest.raises(DataError, match="line 3 is blank: in a one-column file that may be a missing value"):
        read_text(str(p))
    p.write_text("x\n1.5\nNaN\n2.5\n\n\n")     # trailing blank lines are nothing
    assert np.array_equal(read_text(str(p)).X, [[1.5], [np.nan], [2.5]], equal_nan=True)
    p.write_text("a,b\n1,2\n\n3,\n")             # with two columns a blank line is no row
    assert np.array_equal(read_text(str(p)).X, [[1, 2], [3, np.nan]], equal_nan=True)


def test_errors_name_the_file_s_column_when_columns_are_matched_by_name(tmp_path, capsys):
    import h5py
    from spnc.cli import evaluate, learn
    X = np.random.default_rng(3).integers(0, 2, (40, 3))
    np.savetxt(tmp_path / "tr.csv", X, fmt="%d", delimiter=",", header="a,b,c", comments="")
    assert learn.main([str(tmp_path / "tr.csv"), "-o", str(tmp_path / "m.h5"), "-q"]) == 0
    (tmp_path / "ro.csv").write_text("c,a,b\n1,0,1\n5,1,1\n")
    with h5py.File(tmp_path / "ro.h5", "w") as f:
        f.create_dataset("x", data=[[1.0, 0, 1], [5, 1, 1]]).attrs["columns"] = ["c", "a", "b"]
    capsys.readouterr()
    for data, where in ((tmp_path / "ro.csv", "line 3"), (f"{tmp_path / 'ro.h5'}:/x", "row 2")):
        assert evaluate.main([str(tmp_path / "m.h5"), str(data)]) == 2
        # was: "column 3 ('c')", the model's position of 'c', which is the file's column 1
        assert f"{where}, column 1 ('c'): 5.0 is not a state" in capsys.readouterr().err


def test_a_query_names_the_frame_s_cell_not_the_model_s():
    X = np.random.default_rng(4).integers(0, 2, (60, 3))
    df = pd.DataFrame(X, columns=list("abc"))
    spn = LearnSPN(random_state=0).fit(df).spn_
    bad = df[list("cab")].astype(float)
    bad.iloc[1, 0] = 5
    # was: X[1, 2], the model's place of 'c' (bad.iloc[1, 2] is column 'b')
    with pytest.raises(DataError, match=r"X\[1, 0\] = 5\.0 is not a state 0\.\.1 of discrete variable 2 \('c'\)"):
        spn.log_likelihood(bad)
    bad.iloc[1, 0] = np.inf
    with pytest.raises(DataError, match=r"X\[1, 0\] = inf: infinite"):
        spn.mpe(bad)


def test_em_and_merge_name_the_frame_s_cell_too():
    from spnc.learn import Merge
    X = np.random.default_rng(4).integers(0, 2, (60, 3))
    df = pd.DataFrame(X, columns=list("abc"))
    spn = LearnSPN(random_state=0).fit(df).spn_
    bad = df[list("cab")].copy()
    bad.iloc[1, 0] = 5
    for est in (EM(init=spn, max_iter=1), Merge(init=spn, epsilon=0.1)):
        with pytest.raises(DataError, match=r"X\[1, 0\] = 5\.0 is not a state .* \('c'\)"):    # was: X[1, 2]
            est.fit(bad)
    assert EM(init=spn, max_iter=2).fit(df[list("cab")]).score(df) == EM(init=spn, max_iter=2).fit(df).score(df)


def test_merge_names_the_frame_s_cell_of_a_missing_value():
    from spnc.learn import Merge
    X = np.random.default_rng(4).integers(0, 2, (60, 3))
    df = pd.DataFrame(X, columns=list("abc"))
    spn = LearnSPN(random_state=0).fit(df).spn_
    bad = df[list("cab")].astype(float)
    bad.iloc[1, 0] = np.nan
    with pytest.raises(DataError, match=r"X\[1, 0\] is missing \(NaN\), variable 2 \('c'\)"):    # was: X[1, 2]
        Merge(init=spn, epsilon=0.1).fit(bad)
