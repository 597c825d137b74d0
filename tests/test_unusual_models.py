"""Valid but unusual models through the life cycle: very wide or deep graphs, variables
no leaf uses, odd variable names, in the learners, the file formats and the console tools."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import Bernoulli, DataError, Product, Sum
from spnc.learn import Merge


# ---------------------------------------------------------------- Merge and the memory budget
def test_merge_refuses_pairwise_distances_above_the_budget(monkeypatch):
    """A sum of 400 products of two leaves: three groups (products, leaves of each
    variable) of 79 800 candidate pairs. Above the budget Merge says so before allocating
    (a sum of 10^5 children asked numpy for 37 GiB and died with MemoryError)."""
    rng = np.random.default_rng(0)
    spn = spnc.compile(Sum([Product([Bernoulli(0, float(p)), Bernoulli(1, float(q))])
                            for p, q in rng.uniform(0.1, 0.9, (400, 2))], np.full(400, 1 / 400)))
    X = spn.sample(50, seed=0)
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "1M")        # the distances: 1.8 MiB
    with pytest.raises(DataError, match=r"pairwise distances \(400 nodes of one scope, 2.39e\+05 pairs"):
        Merge(init=spn, epsilon=0.1).fit(X)
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "2M")        # the matrix of a close group: 2.6 MiB
    with pytest.raises(DataError, match=r"pairwise distances \(400 nodes of one scope, a matrix"):
        Merge(init=spn, epsilon=0.1).fit(X)
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "64M")
    assert Merge(init=spn, epsilon=0.1).fit(X).spn_.n_nodes < spn.n_nodes


def test_merge_refuses_node_marginals_above_the_budget(monkeypatch):
    """Node marginals take (states x variables) indicator rows and every node's value on
    them: 600 rows x (300 variables + 302 nodes) is above 1 MiB."""
    spn = spnc.compile(Sum([Product([Bernoulli(v, 0.3) for v in range(300)]),
                            Product([Bernoulli(v, 0.6) for v in range(300)])], [0.5, 0.5]))
    X = spn.sample(20, seed=0)
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "1M")
    with pytest.raises(DataError, match="single-variable marginals of 603 nodes"):
        Merge(init=spn, epsilon=0.1).fit(X)


# ---------------------------------------------------------------- wide tables in the console tools
def test_eval_matches_a_wide_shuffled_header(tmp_path, capsys):
    """3000 named columns in another order than the model's are matched by name, and a
    repeated name is reported with both its columns. (Matching took time quadratic in the
    columns: 46 s for 3 * 10^4 of them.)"""
    from spnc.cli import evaluate
    V = 3000
    names = [f"v{i}" for i in range(V)]
    spn = spnc.compile(Product([Bernoulli(v, 0.1 + 0.8 * (v % 7) / 7) for v in range(V)]), var_names=names)
    m = tmp_path / "m.h5"
    spnc.save(spn, m)
    X = spn.sample(3, seed=0)
    perm = np.random.default_rng(0).permutation(V)
    rows = "".join(",".join(str(int(x)) for x in r[perm]) + "\n" for r in X)
    (tmp_path / "d.csv").write_text(",".join(names[j] for j in perm) + "\n" + rows)
    capsys.readouterr()
    assert evaluate.main([str(m), str(tmp_path / "d.csv"), "--out-ll", str(tmp_path / "ll.txt")]) == 0
    np.testing.assert_allclose(np.loadtxt(tmp_path / "ll.txt"), spn.log_likelihood(X), rtol=1e-12)
    dup = [names[j] for j in perm]
    dup[2500] = dup[10]
    (tmp_path / "e.csv").write_text(",".join(dup) + "\n" + rows)
    capsys.readouterr()
    assert evaluate.main([str(m), str(tmp_path / "e.csv")]) == 2
    assert f"column name {dup[10]!r} appears twice (columns 11 and 2501)" in capsys.readouterr().err



def test_merge_takes_no_marginals_of_variables_in_no_leaf(monkeypatch):
    """2000 declared binary variables, two in leaves: the indicator rows cover those two
    (4 rows, not 4000 rows x 2000 columns, which a 16 MiB budget refused), and the merge
    is the one of the same model over its two variables."""
    import warnings
    from spnc.learn._similarity import indicator_evidence
    V = 2000
    kids = [Product([Bernoulli(0, p), Bernoulli(V - 1, q)]) for p, q in ((.3, .2), (.31, .2), (.8, .6))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the variables in no leaf, on purpose
        spn = spnc.compile(Sum(kids, [.3, .3, .4]), cardinality=[2] * V)
    E, off = indicator_evidence(spn)
    assert E.shape == (4, V) and off[V] == 4 and off[1] == 2 and off[V - 1] == 2
    small = spnc.compile(Sum([Product([Bernoulli(0, p), Bernoulli(1, q)]) for p, q in ((.3, .2), (.31, .2), (.8, .6))],
                             [.3, .3, .4]))
    Xs = small.sample(60, seed=2)
    X = np.zeros((60, V))
    X[:, [0, V - 1]] = Xs
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "16M")
    got = Merge(init=spn, epsilon=0.05).fit(X).spn_
    want = Merge(init=small, epsilon=0.05).fit(Xs).spn_
    assert got.n_nodes == want.n_nodes < spn.n_nodes
    np.testing.assert_allclose(got.log_likelihood(X), want.log_likelihood(Xs), rtol=1e-12)


def test_merge_takes_the_models_own_samples_with_variables_in_no_leaf():
    """Samples leave a variable in no leaf missing (NaN), and every query ignores it:
    Merge takes them as they are (it refused any NaN), and names the cell when a variable
    of a leaf is missing."""
    kids = [Product([Bernoulli(0, p), Bernoulli(2, q)]) for p, q in ((.3, .2), (.32, .2), (.8, .6))]
    spn = spnc.compile(Sum(kids, [.3, .3, .4]))          # variable 1: in no leaf
    X = spn.sample(80, seed=1)
    assert np.isnan(X[:, 1]).all() and not np.isnan(X[:, [0, 2]]).any()
    got = Merge(init=spn, epsilon=0.05).fit(X).spn_
    want = Merge(init=spn, epsilon=0.05).fit(np.nan_to_num(X)).spn_
    assert got.n_nodes == want.n_nodes < spn.n_nodes
    np.testing.assert_array_equal(got.log_likelihood(X), want.log_likelihood(X))
    X[5, 2] = np.nan
    with pytest.raises(DataError, match=r"X\[5, 2\] is missing"):
        Merge(init=spn, epsilon=0.05).fit(X)

# ---------------------------------------------------------------- names through the console tools
def _eval(capsys, *args) -> tuple[int, str]:
    from spnc.cli import evaluate
    capsys.readouterr()
    rc = evaluate.main([str(a) for a in args])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("names", [[" spaced ", "b", "c "], ["a,b", 'q"uote', "new\nline"],
                                   ["μ — kg", "tab\there", "#x"]])
def test_eval_reads_back_the_samples_it_writes(names, tmp_path, capsys):
    """spnc-eval's CSV of samples, header included, is read back by spnc-eval: names with
    spaces around them (written as they are, read stripped) match their model names."""
    spn = spnc.compile(Product([Bernoulli(0, 0.3), spnc.Gaussian(1, 0.0, 1.0), spnc.Categorical(2, [.2, .3, .5])]),
                       var_names=names)
    m = tmp_path / "m.h5"
    spnc.save(spn, m)
    assert _eval(capsys, m, "--sample", 6, "--seed", 3, "--out", tmp_path / "s.csv")[0] == 0
    assert _eval(capsys, m, "--sample", 6, "--seed", 3, "--out", tmp_path / "s.npy")[0] == 0
    rc, err = _eval(capsys, m, tmp_path / "s.csv", "--out-ll", tmp_path / "ll.txt")
    assert rc == 0, err
    want = spn.log_likelihood(np.load(tmp_path / "s.npy"))
    np.testing.assert_allclose(np.loadtxt(tmp_path / "ll.txt"), want, rtol=1e-12)


def test_eval_does_not_read_a_header_of_numeric_names_as_data(tmp_path, capsys):
    """Variables named "1" and "0" (a DataFrame's integer labels): the header spnc-eval
    writes also reads as a data row. It was taken as one, silently adding a row; now the
    tool asks for --header or --no-header, and --header reads it back exactly."""
    spn = spnc.compile(Product([Bernoulli(0, 0.3), Bernoulli(1, 0.8)]), var_names=["1", "0"])
    m, s = tmp_path / "m.h5", tmp_path / "s.csv"
    spnc.save(spn, m)
    assert _eval(capsys, m, "--sample", 5, "--seed", 1, "--out", s)[0] == 0
    assert s.read_text().splitlines()[0] == "1,0"
    rc, err = _eval(capsys, m, s)
    assert rc == 2 and "give --header" in err and "--no-header" in err
    rc, err = _eval(capsys, m, s, "--header", "--out-ll", tmp_path / "ll.txt")
    assert rc == 0, err
    assert np.loadtxt(tmp_path / "ll.txt").shape == (5,)
    rc, err = _eval(capsys, m, s, "--no-header")      # as data, the header is a row of 0/1 values
    assert rc == 0, err


def test_bad_variable_names_are_named_by_position():
    """Among 10^4 names, the repeated one and the one holding a NUL are pointed at."""
    names = [f"v{i}" for i in range(10_000)]
    leaf = Product([Bernoulli(v, 0.5) for v in range(10_000)])
    with pytest.raises(spnc.StructureError, match=r"var_names\[7001\] = 'v17' repeats var_names\[17\]"):
        spnc.compile(leaf, var_names=names[:7001] + ["v17"] + names[7002:])
    with pytest.raises(spnc.StructureError, match=r"var_names\[9000\] = 'a\\x00b' holds a NUL"):
        spnc.compile(leaf, var_names=names[:9000] + ["a\x00b"] + names[9001:])


# ---------------------------------------------------------------- deep models in other formats
def test_spflow_text_is_written_only_as_deep_as_it_is_read(monkeypatch):
    """A chain of one-child sums (two parentheses each) and products (one): nested exactly
    as deep as the reader takes, it round-trips; one level more is refused when writing
    (it was written, and the reader then refused the file)."""
    from spnc.io.importers import format_for, spflow_text
    monkeypatch.setattr(spflow_text, "MAX_DEPTH", 40)
    fmt = format_for("x", spflow_text.TEXT)
    node = Product([Bernoulli(0, 0.3), Bernoulli(1, 0.6)])      # 1
    for i in range(13):                                        # + 13 * 3 = 40
        node = Product([Sum([node], [1.0])])
    spn = spnc.compile(node)
    back = fmt.loads(fmt.dumps(spn), "x")
    X = np.array([[0, 1], [1, 1], [np.nan, 0]])
    np.testing.assert_allclose(back.log_likelihood(X), spn.log_likelihood(X), rtol=1e-12)
    with pytest.raises(spnc.FormatError, match="nest parentheses 41 deep, more than the 40"):
        fmt.dumps(spnc.compile(Product([node])))


def test_variable_names_given_as_bytes_are_decoded(tmp_path):
    """Names as bytes (h5py attributes, numpy S arrays) were stored as their repr "b'a'";
    they are UTF-8 text now, through the files too. One string is not split into letters."""
    P = Product([Bernoulli(0, 0.3), Bernoulli(1, 0.6)])
    spn = spnc.compile(P, var_names=np.array(["a".encode(), "μ".encode()]))
    assert spn.var_names == ["a", "μ"]
    spnc.save(spn, tmp_path / "m.h5")
    assert spnc.load(tmp_path / "m.h5").var_names == ["a", "μ"]
    with pytest.raises(spnc.StructureError, match="not one string"):
        spnc.compile(P, var_names="ab")
    with pytest.raises(spnc.StructureError, match=r"var_names\[1\] .* not UTF-8"):
        spnc.compile(P, var_names=[b"a", b"\xff"])


def test_a_wide_dataframe_is_matched_by_name():
    """A DataFrame with 3000 columns in another order than the model's variables (matching
    took time quadratic in the columns: 30 s per query for 2 * 10^4 of them), and one with a
    repeated column name."""
    pd = pytest.importorskip("pandas")
    V = 3000
    names = [f"v{i}" for i in range(V)]
    spn = spnc.compile(Product([Bernoulli(v, 0.1 + 0.8 * (v % 5) / 5) for v in range(V)]), var_names=names)
    X = spn.sample(4, seed=1)
    perm = np.random.default_rng(1).permutation(V)
    df = pd.DataFrame(X[:, perm], columns=[names[j] for j in perm])
    np.testing.assert_allclose(spn.log_likelihood(df), spn.log_likelihood(X), rtol=1e-12)
    df.columns = [names[j] for j in perm[:-1]] + [names[perm[0]]]
    with pytest.raises(DataError, match=f"column name {names[perm[0]]!r} appears twice"):
        spn.log_likelihood(df)


def test_console_tools_show_warnings_as_one_line(tmp_path, capsys):
    """A warning (here: names an export cannot keep) reads ``spnc-convert: warning: ...``,
    not Python's ``path/to/module.py:172: UserWarning`` with a line of spnc's source;
    ``-q`` silences it."""
    from spnc.cli import convert
    spn = spnc.compile(Product([Bernoulli(0, 0.3), Bernoulli(1, 0.6)]), var_names=["a", "b"])
    spnc.save(spn, tmp_path / "m.h5")
    capsys.readouterr()
    assert convert.main([str(tmp_path / "m.h5"), str(tmp_path / "m.spflow")]) == 0
    err = capsys.readouterr().err
    assert err.startswith("spnc-convert: warning: ") and "cannot keep variable names" in err
    assert "UserWarning" not in err and ".py:" not in err and len(err.strip().splitlines()) == 1
    assert convert.main([str(tmp_path / "m.h5"), str(tmp_path / "n.spflow"), "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_query_columns_by_name_among_many():
    """--query/--evidence names among 10^4 variables (a dict, not list.index per token),
    a name with spaces around it by its stripped spelling."""
    from spnc.cli._data import parse_columns
    names = [f"v{i}" for i in range(10_000)] + [" padded "]
    spec = ",".join(names[j] for j in range(0, 10_000, 7)) + ",padded,3-4"
    assert parse_columns(spec, names, len(names)) == sorted(set(range(0, 10_000, 7)) | {10_000, 3, 4})


def test_every_name_list_names_its_first_repeat_at_both_places(tmp_path, capsys):
    """One rule for a DataFrame's columns, a text header, an HDF5 names attribute, a
    model's var_names and a model file's variable names: the first name that repeats an
    earlier one ('y' here, not 'x'), at both places where the message has them."""
    import h5py
    import pandas as pd
    from spnc.cli import evaluate
    names = ["x", "y", "z", "y", "x"]
    m = spnc.compile(Product([Bernoulli(v, 0.5) for v in range(5)]), var_names=list("abcde"))
    with pytest.raises(DataError, match=r"X: column name 'y' appears twice"):
        m.log_likelihood(pd.DataFrame(np.zeros((1, 5)), columns=names))
    with pytest.raises(spnc.StructureError, match=r"var_names\[3\] = 'y' repeats var_names\[1\]"):
        spnc.compile(Product([Bernoulli(v, 0.5) for v in range(5)]), var_names=names)
    spnc.save(m, tmp_path / "m.h5")
    (tmp_path / "d.csv").write_text(",".join(names) + "\n0,1,0,1,0\n")
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["X"] = np.zeros((1, 5))
        f["X"].attrs["columns"] = names
    for data, why in (("d.csv", "column name 'y' appears twice (columns 2 and 4)"),
                      ("d.h5:/X", "column name 'y' appears twice in its column names attribute")):
        assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / data), "-q"]) == 2
        assert why in capsys.readouterr().err
    with h5py.File(tmp_path / "m.h5", "r+") as f:
        del f["variables/name"]
        f["variables/name"] = np.array([n.encode() for n in names], dtype="S1")
    with pytest.raises(spnc.FormatError, match=r"/variables/name\[3\] = 'y' repeats /variables/name\[1\]"):
        spnc.load(tmp_path / "m.h5")


def test_indicators_of_a_variable_with_2_31_states():
    # an indicator's state table spans its variable's states: for 2^31 - 1 states the sweep
    # asked numpy for 16 GiB (MemoryError, or the process killed). Such tables now go to
    # the leaf matrix, with the same answers.
    from spnc import Indicator
    from spnc._kinds import MARGINAL
    from spnc._sweep import leaf_states
    wide = spnc.compile(Sum([Indicator(0, 0), Indicator(0, 2**23 - 1)], [0.25, 0.75]), cardinality=[2**23])
    assert [t.name for t in leaf_states(wide, MARGINAL)[1]] == ["indicator"]
    narrow = spnc.compile(Sum([Indicator(0, 0), Indicator(0, 9)], [0.25, 0.75]), cardinality=[10])
    assert leaf_states(narrow, MARGINAL)[1] == []
    top = 2**31 - 2
    spn = spnc.compile(Sum([Indicator(0, 0), Indicator(0, top)], [0.25, 0.75]), cardinality=[top + 1])
    X = np.array([[0.0], [float(top)], [5.0], [np.nan]])
    np.testing.assert_allclose(spn.log_likelihood(X), [np.log(0.25), np.log(0.75), -np.inf, 0.0], rtol=1e-15)
    assert spn.mpe(X[3:])[0].tolist() == [[float(top)]]
    assert set(spn.sample(200, seed=0)[:, 0]) == {0.0, float(top)}
