"""Console tools: data and outputs a user can get wrong by accident end in a clear error
or in exactly the data asked for (the bugs of a bad-input hunt, session 20)."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

import spnc
from spnc import Bernoulli, Gaussian, Product, Sum
from spnc.cli import evaluate


@pytest.fixture()
def named(tmp_path):
    m = spnc.compile(Product([Bernoulli(0, .1), Bernoulli(1, .8), Gaussian(2, 0., 1.)]), var_names=["a", "b", "c"])
    spnc.save(m, tmp_path / "m.h5")
    return m, tmp_path


def test_hdf5_column_names_of_the_wrong_length_or_repeated_are_errors(named, capsys):
    m, d = named
    X = np.array([[1, 0, 0.], [0, 1, 1.]])
    for names, why in ((["c", "b", "a", "d"], "4 names for 3 columns"), (["c", "b", "b"], "'b' appears twice")):
        with h5py.File(d / "d.h5", "w") as f:
            f["X"] = X[:, [2, 1, 0]]
            f["X"].attrs["columns"] = names
        for data in ([f"{d / 'd.h5'}:/X"], [str(d / "d.h5"), "--dataset", "X"]):
            assert evaluate.main([str(d / "m.h5"), *data, "-q"]) == 2
            assert why in capsys.readouterr().err
    with h5py.File(d / "d.h5", "w") as f:
        f["X"] = X[:, [2, 1, 0]]
        f["X"].attrs["columns"] = ["c", "b", "a"]
    assert evaluate.main([str(d / "m.h5"), f"{d / 'd.h5'}:/X", "--out-ll", str(d / "ll.txt"), "-q"]) == 0
    np.testing.assert_allclose(np.loadtxt(d / "ll.txt"), m.log_likelihood(X), rtol=1e-12)


def test_a_failed_run_changes_no_output(tmp_path, capsys):
    # independent roots: log-likelihoods work, MPE refuses; the old output must survive
    m = spnc.SPN.from_arrays(np.array([2, 2], np.uint8), np.zeros(3, np.int64), np.zeros(0, np.int32),
                             np.zeros(0), spnc.compile(Sum([Bernoulli(0, .3), Bernoulli(0, .6)], [.5, .5])).leaf_tables,
                             [2], roots=[0, 1], combine="independent")
    spnc.save(m, tmp_path / "ind.h5")
    np.savetxt(tmp_path / "d.csv", [[0], [1]], fmt="%d")
    out = tmp_path / "ll.txt"
    out.write_text("OLD\n")
    assert evaluate.main([str(tmp_path / "ind.h5"), str(tmp_path / "d.csv"), "--out-ll", str(out),
                          "--mpe", str(tmp_path / "mpe.csv"), "-q"]) == 2
    assert "single-root" in capsys.readouterr().err and out.read_text() == "OLD\n"
    assert evaluate.main([str(tmp_path / "ind.h5"), str(tmp_path / "d.csv"), "--mpe", "-"]) == 2
    cap = capsys.readouterr()          # no summary of a run that failed: one error line only
    assert cap.out == "" and cap.err.count("\n") == 1 and "single-root" in cap.err


@pytest.mark.parametrize("flag", ["--out-ll", "--mpe"])
def test_data_on_stdout_is_only_data(named, flag, capsys):
    m, d = named
    X = np.array([[1, 0, 0.5], [0, 1, np.nan]])
    np.savetxt(d / "d.csv", X, delimiter=",", header="a,b,c", comments="")
    np.save(d / "d.npy", X)
    for data in ("d.csv", "d.npy"):
        for quiet in ([], ["-q"]):
            assert evaluate.main([str(d / "m.h5"), str(d / data), flag, "-", *quiet]) == 0
            cap = capsys.readouterr()
            rows = [ln for ln in cap.out.splitlines() if ln and ln != "a,b,c"]
            assert len(rows) == 2 and all(ch in "0123456789.,-einfa" for ln in rows for ch in ln), cap.out
            assert ("mean log-likelihood" in cap.err) != bool(quiet)      # -q: stderr only for errors


def test_names_holding_the_delimiter_are_quoted(tmp_path, capsys):
    m = spnc.compile(Product([Bernoulli(0, .4), Bernoulli(1, .7)]), var_names=["a,b", 'say "c"'])
    spnc.save(m, tmp_path / "m.h5")
    out = tmp_path / "s.csv"
    assert evaluate.main([str(tmp_path / "m.h5"), "--sample", "3", "--out", str(out), "-q"]) == 0
    assert out.read_text().splitlines()[0] == '"a,b","say ""c"""'
    assert evaluate.main([str(tmp_path / "m.h5"), str(out), "--out-ll", str(tmp_path / "ll.txt"), "-q"]) == 0


@pytest.mark.parametrize("ext", ["csv", "tsv"])
def test_names_holding_a_carriage_return_are_quoted(tmp_path, capsys, ext):
    # a lone CR (an old Mac line end in a spreadsheet cell) ended the header line unquoted
    m = spnc.compile(Product([Bernoulli(0, .4), Bernoulli(1, .7)]), var_names=["a\rb", "c"])
    spnc.save(m, tmp_path / "m.h5")
    out = tmp_path / f"s.{ext}"
    assert evaluate.main([str(tmp_path / "m.h5"), "--sample", "3", "--out", str(out), "-q"]) == 0
    assert out.read_bytes().startswith(b'"a\rb"' + (b"," if ext == "csv" else b"\t") + b"c\n")
    assert evaluate.main([str(tmp_path / "m.h5"), str(out), "--out-ll", str(tmp_path / "ll.txt"), "-q"]) == 0, \
        capsys.readouterr().err


def test_a_token_that_is_a_name_and_another_index_is_an_error(tmp_path, capsys):
    m = spnc.compile(Product([Bernoulli(0, .4), Bernoulli(1, .7)]), var_names=["1", "0"])
    spnc.save(m, tmp_path / "m.h5")
    np.savetxt(tmp_path / "d.csv", [[1, 0], [0, 1]], delimiter=",", header="1,0", comments="", fmt="%d")
    # the header's names read as numbers too: --header (without it the tool asks for it)
    args = [str(tmp_path / "m.h5"), str(tmp_path / "d.csv"), "--out-ll", str(tmp_path / "ll.txt"), "-q", "--header"]
    assert evaluate.main([*args, "--query", "0"]) == 2
    assert "name of variable 1 and the index of variable 0" in capsys.readouterr().err
    assert evaluate.main([*args, "--query", "0-0"]) == 0
    assert np.loadtxt(tmp_path / "ll.txt").shape == (2,)


def test_names_that_are_not_unicode_text_are_refused_at_compile_time():
    with pytest.raises(spnc.StructureError, match=r"var_names\[1\] .* lone surrogate"):
        spnc.compile(Product([Bernoulli(0, .5), Bernoulli(1, .5)]), var_names=["a\nb", "c\udc80"])
    # what a file cannot store is refused when the model is made, not when it is saved
    for names, i in ((["a", ""], 1), (["é" * 513, "b"], 0)):
        with pytest.raises(spnc.StructureError, match=rf"var_names\[{i}\] .* empty or longer than 1024 bytes"):
            spnc.compile(Product([Bernoulli(0, .5), Bernoulli(1, .5)]), var_names=names)
    spnc.compile(Product([Bernoulli(0, .5), Bernoulli(1, .5)]), var_names=["é" * 512, "b"])


def test_tools_read_other_libraries_files_and_refuse_negative_seeds(tmp_path, capsys):
    from spnc.cli import info
    from spnc.io import importers
    m = spnc.compile(Sum([Product([Bernoulli(0, .2), Bernoulli(1, .7)]),
                          Product([Bernoulli(0, .9), Bernoulli(1, .4)])], [.3, .7]))
    f = tmp_path / "m.deeprob.json"
    importers.save(m, f)
    np.savetxt(tmp_path / "d.csv", [[0, 1], [1, 1]], delimiter=",", fmt="%d")
    assert evaluate.main([str(f), str(tmp_path / "d.csv"), "--out-ll", str(tmp_path / "ll.txt"), "-q"]) == 0
    np.testing.assert_allclose(np.loadtxt(tmp_path / "ll.txt"), m.log_likelihood([[0, 1], [1, 1]]), rtol=1e-12)
    assert info.main([str(f)]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit, match="2"):          # an argument error, as argparse reports them
        evaluate.main([str(f), "--sample", "2", "--seed", "-1", "--out", str(tmp_path / "s.csv")])
    assert "--seed: needs a whole number in [0, 2**64)" in capsys.readouterr().err
    with pytest.raises(ValueError, match="seed"):
        m.sample(2, seed=2**64)


def test_convert_draws_with_to_dot_and_export_warns_of_lost_variables(tmp_path, capsys):
    from spnc.cli import convert
    from spnc.io import importers
    with pytest.warns(UserWarning, match="in no leaf"):
        m = spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)]), n_vars=4)
    spnc.save(m, tmp_path / "m.h5")
    assert convert.main([str(tmp_path / "m.h5"), str(tmp_path / "m.txt"), "--to", "dot"]) == 0
    assert (tmp_path / "m.txt").read_text().startswith("digraph spnc {")
    with pytest.warns(UserWarning, match=r"variables 2\.\.3 are in no leaf, so a reader sees 2 variables"):
        importers.save(m, tmp_path / "m.spflow")
    import warnings
    with warnings.catch_warnings():          # DeeProb-kit's file keeps spnc's variable count
        warnings.simplefilter("error")
        importers.save(m, tmp_path / "m.deeprob.json")
    assert importers.load(tmp_path / "m.deeprob.json").n_vars == 4


def test_demo_and_info_refuse_sizes_they_cannot_use(tmp_path, capsys):
    from spnc.cli import demo, info
    out = str(tmp_path / "d.h5")
    with pytest.raises(SystemExit, match="2"):                          # built the true model for ever
        demo.main(["--vars", "99999999999", "--out", out])
    assert "argument --vars: 99999999999 is too large (at most 2000)" in capsys.readouterr().err
    assert demo.main(["--vars", "4", "--rows", "10", "--out", out, "--seed", str(2**64 - 1), "-q"]) == 0
    capsys.readouterr()                                               # seed + 1 was refused by sample
    with pytest.raises(SystemExit, match="2"):
        info.main([out, "--max-nodes", "0"])
    assert "argument --max-nodes: needs a whole number >= 1, got 0" in capsys.readouterr().err


def test_counts_of_one_are_singular(tmp_path, capsys):
    from spnc.cli import info, learn
    m, one = tmp_path / "m.h5", tmp_path / "one.csv"
    spnc.save(spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)])), m)
    np.savetxt(one, [[0], [1]], fmt="%d", delimiter=",")
    assert evaluate.main([str(m), str(one)]) == 2
    assert "data has 1 column, the model has 2 variables" in capsys.readouterr().err
    assert learn.main([str(one), "-o", str(tmp_path / "o.h5"), "--types", "b,b"]) == 2
    assert "--types gives 2 types for 1 column" in capsys.readouterr().err
    with pytest.raises(spnc.DataError, match="^X has 1 column, the model has 2 variables$"):
        spnc.load(m).log_likelihood(np.zeros((1, 1)))
    assert info.main([str(m)]) == 0
    assert "(0 sums, 1 product, 2 leaves)" in capsys.readouterr().out
    assert learn.main([str(one), "-o", str(tmp_path / "o.h5")]) == 0
    out = capsys.readouterr().out
    assert "data: 2 rows x 1 variable" in out and "model: 1 node, 0 edges (0 sums, 0 products, 1 leaf)" in out



def test_one_row_or_a_zero_probability_row_prints_no_standard_error(tmp_path, capsys):
    # was: "+- nan (standard error, 1 row)"
    from spnc.cli import learn
    m, one, zero = tmp_path / "m.h5", tmp_path / "one.csv", tmp_path / "zero.csv"
    spnc.save(spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, 1.0)])), m)
    np.savetxt(one, [[0, 1]], fmt="%d", delimiter=",")
    np.savetxt(zero, [[0, 1], [1, 0]], fmt="%d", delimiter=",")
    assert evaluate.main([str(m), str(one)]) == 0
    out = capsys.readouterr().out
    assert "mean log-likelihood: -0.356675 (no standard error)" in out and "nan" not in out
    assert evaluate.main([str(m), str(zero)]) == 0
    assert "mean log-likelihood: -inf (no standard error); 1 row has probability 0" in capsys.readouterr().out
    assert learn.main([str(one), "-o", str(tmp_path / "o.h5"), "--test", str(one)]) == 0
    out = capsys.readouterr().out
    assert "test mean log-likelihood:" in out and "(1 row, no standard error)" in out and "nan" not in out

def test_dataset_option_for_data_without_datasets_is_an_error(tmp_path, capsys):
    """--dataset was ignored without a word for CSV (or .npy, Parquet) data."""
    from spnc.cli import learn, merge
    m, csv, h5 = tmp_path / "m.h5", tmp_path / "d.csv", tmp_path / "d.h5"
    X = np.array([[0, 1], [1, 1], [1, 0], [0, 0]])
    np.savetxt(csv, X, fmt="%d", delimiter=",")
    with h5py.File(h5, "w") as f:
        f["x"] = X.astype(float)
    spnc.save(spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)])), m)
    runs = [(evaluate, [str(m), str(csv), "--dataset", "/x"]),
            (learn, [str(csv), "-o", str(tmp_path / "o.h5"), "--dataset", "/x"]),
            (merge, [str(m), str(csv), "-o", str(tmp_path / "o.h5"), "--dataset", "/x"])]
    for tool, argv in runs:
        assert tool.main(argv) == 2
        assert (f"--dataset '/x' names a dataset inside an HDF5 (.h5, .hdf5) or Zarr data file, but {csv} is "
                "not one; drop --dataset") in capsys.readouterr().err
    assert merge.main([str(m), str(h5), "-o", str(tmp_path / "o.h5"), "--dataset", "/x", "--valid", str(csv),
                       "--valid-dataset", "x"]) == 2
    assert "--valid-dataset 'x' names a dataset" in capsys.readouterr().err
    # one HDF5 file among the inputs: --dataset is its dataset, the CSV file has none
    assert learn.main([str(h5), "-o", str(tmp_path / "o.h5"), "--dataset", "/x", "--valid", str(csv), "-q"]) == 0


def test_text_reading_options_for_data_that_is_not_text_are_an_error(tmp_path, capsys):
    """--header, --no-header, --delimiter and --encoding were ignored without a word for
    .npy, HDF5, Parquet or JSON data."""
    from spnc.cli import learn, merge
    m, npy, csv = tmp_path / "m.h5", tmp_path / "d.npy", tmp_path / "d.csv"
    X = np.array([[0, 1], [1, 1], [1, 0], [0, 0]])
    np.save(npy, X.astype(float))
    np.savetxt(csv, X, fmt="%d", delimiter=",")
    spnc.save(spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)])), m)
    runs = [(evaluate, [str(m), str(npy), "--header"]),
            (learn, [str(npy), "-o", str(tmp_path / "o.h5"), "--delimiter", ";", "--encoding", "latin-1"]),
            (merge, [str(m), str(npy), "-o", str(tmp_path / "o.h5"), "--no-header"])]
    for (tool, argv), flags in zip(runs, ("--header applies", "--delimiter and --encoding apply",
                                          "--no-header applies")):
        assert tool.main(argv) == 2
        assert f"{flags} to text data (CSV, TSV), but {npy} is not text" in capsys.readouterr().err
    # one text file among the inputs: the options are its own
    assert learn.main([str(npy), "-o", str(tmp_path / "o.h5"), "--valid", str(csv), "--no-header", "-q"]) == 0


def test_two_data_files_from_stdin_are_refused_by_every_tool(tmp_path, capsys, monkeypatch):
    """merge and compose em read the second '-' as an empty file ('<stdin>: no data rows')."""
    import io
    import sys
    from spnc.cli import compose, learn, merge
    m, out = tmp_path / "m.h5", str(tmp_path / "o.h5")
    spnc.save(spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)])), m)
    runs = [(learn, ["-", "-o", out, "--valid", "-"]), (merge, [str(m), "-", "--valid", "-", "-o", out]),
            (compose, ["em", str(m), "-o", out, "--data", "-", "--valid", "-"])]
    for tool, argv in runs:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"0,1\n1,1\n1,0\n")))
        assert tool.main(argv) == 2
        assert "only one data file can be read from standard input (-)" in capsys.readouterr().err
    assert not (tmp_path / "o.h5").exists()


@pytest.mark.parametrize("n, why", [("1e400", "1e400 is too large (at most 1000000000)"),
                                    ("2e9", "2e9 is too large (at most 1000000000)"),
                                    ("2.5", "2.5 is not a whole number"),
                                    ("-inf", "needs a whole number >= 1, got -inf"),
                                    ("nan", "'nan' is not a number")])
def test_sample_counts_say_what_is_wrong(n, why, tmp_path, capsys):
    """--sample 1e400 (infinity as a float) was "needs a whole number >= 1, got 1e400"."""
    spnc.save(spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)])), tmp_path / "m.h5")
    with pytest.raises(SystemExit, match="2"):
        evaluate.main([str(tmp_path / "m.h5"), f"--sample={n}", "--out", str(tmp_path / "s.csv")])
    assert f"argument --sample: {why} (see spnc-eval --help)" in capsys.readouterr().err


@pytest.mark.parametrize("ext", ["csv", "npy"])
def test_mpe_refuses_far_evidence_naming_the_data_row(tmp_path, capsys, ext):
    m = spnc.compile(Sum([Product([Gaussian(0, 0., 1.), Gaussian(1, 0., 1.)]),
                          Product([Gaussian(0, 1., 1.), Gaussian(1, 5., 1.)])], [.5, .5]), var_names=["a", "b"])
    spnc.save(m, tmp_path / "m.h5")
    far_a = np.array([[0.5, np.nan], [1, np.nan], [2, np.nan], [1e10, np.nan]])
    far_b = np.array([[0.5, 1], [1, np.nan], [2, 3], [1, 1e10]])   # a query value conditional accepts
    for X, var, extra in ((far_a, "a", []), (far_b, "b", ["--query", "b", "--evidence", "a"])):
        if ext == "csv":
            np.savetxt(tmp_path / "d.csv", X, delimiter=",", header="a,b", comments="")
        else:
            np.save(tmp_path / "d.npy", X)
        assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / f"d.{ext}"), "--mpe", str(tmp_path / "o.csv"),
                              "--chunk-rows", "2", "--by-position", "-q"] + extra) == 2
        err = capsys.readouterr().err
        where = "line 5" if ext == "csv" else "row 4"    # 1-based, as cell errors: the header is line 1
        assert f"d.{ext}: {where}: log p(evidence)" in err and f"variable {var!r}" in err, err


def test_streamed_conditionals_name_the_data_row(tmp_path, capsys):
    m = spnc.compile(Sum([Product([Gaussian(0, 0., 1.), Gaussian(1, 0., 1.)]),
                          Product([Gaussian(0, 1., 1.), Gaussian(1, 5., 1.)])], [.5, .5]))
    spnc.save(m, tmp_path / "m.h5")
    np.save(tmp_path / "d.npy", np.array([[0.5, 1], [1, 2], [2, 3], [1e10, 1]]))
    rc = evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "d.npy"), "--query", "1", "--evidence", "0",
                        "--chunk-rows", "2", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "d.npy: row 4: log p(query, evidence)" in err and "too large" in err, err  # not the block's


def test_query_and_evidence_names_holding_commas_are_quoted_as_in_csv(tmp_path, capsys):
    names = ["a,b", 'x"y', "c"]
    m = spnc.compile(Product([Gaussian(0, 0., 1.), Gaussian(1, 1., 1.), Gaussian(2, 2., 1.)]), var_names=names)
    spnc.save(m, tmp_path / "m.h5")
    X = np.array([[0.5, 1.5, 2.5], [1.0, 0.0, -1.0]])
    (tmp_path / "d.csv").write_text('"a,b","x""y",c\n' + "\n".join(",".join(map(str, r)) for r in X) + "\n")
    want = m.log_likelihood(np.where([True, False, True], X, np.nan)) - m.log_likelihood(
        np.where([False, False, True], X, np.nan))
    for query in ('"a,b"', "0"):
        out = tmp_path / f"ll{query.strip(chr(34))}.npy"
        assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "d.csv"), "--query", query,
                              "--evidence", "c", "--out-ll", str(out), "-q"]) == 0
        np.testing.assert_allclose(np.load(out), want, rtol=1e-12)
    from spnc.cli._data import parse_columns
    assert parse_columns('"a,b", x"y', names, 3) == [0, 1]      # a quote inside an unquoted name stays
    assert parse_columns('"x""y",2', names, 3) == [1, 2]
    assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "d.csv"), "--query", "a,b", "-q"]) == 2
    assert "quote it as in CSV (\"a,b\") or give its index" in capsys.readouterr().err
    assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "d.csv"), "--query", '"a,b', "-q"]) == 2
    assert "quote a name as in a CSV header" in capsys.readouterr().err


def test_blanks_around_a_quoted_column_name_are_dropped_as_in_a_header(tmp_path, capsys):
    names = ["a,b", "c", 'x" ,y']
    from spnc.cli._data import parse_columns
    # was: "',' expected after '\"'" for a blank after the closing quote
    assert parse_columns('"a,b" ,c', names, 3) == [0, 1]
    assert parse_columns(' c , "a,b"  ', names, 3) == [0, 1]
    assert parse_columns('"x"" ,y" , 0', names, 3) == [0, 2]      # a doubled quote, then a blank, inside
    m = spnc.compile(Product([Gaussian(0, 0., 1.), Gaussian(1, 1., 1.)]), var_names=["a,b", "c"])
    spnc.save(m, tmp_path / "m.h5")
    (tmp_path / "d.csv").write_text('"a,b" , c\n0.5,1\n')        # the header's own blanks are read alike
    assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "d.csv"), "--query", '"a,b" ', "--evidence",
                          ' "c"', "-q"]) == 0
    assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "d.csv"), "--query", '"a,b"c', "-q"]) == 2
    assert "',' expected after the quoted name 'a,b'" in capsys.readouterr().err


@pytest.mark.parametrize("first", ["#x", "# x", "#"])
def test_samples_of_a_model_whose_first_name_begins_with_a_hash_read_back(tmp_path, first):
    """spnc-eval writes the header '#x,y,z'; reading it back took it for a comment of the
    names x, y, z and refused the file ("missing '#x'; unknown 'x')."""
    m = spnc.compile(Product([Bernoulli(0, .3), Gaussian(1, 1., 2.), Bernoulli(2, .6)]), var_names=[first, "y", "z"])
    spnc.save(m, tmp_path / "m.h5")
    for ext in ("csv", "tsv"):
        s = tmp_path / f"s.{ext}"
        assert evaluate.main([str(tmp_path / "m.h5"), "--sample", "20", "--seed", "3", "--out", str(s), "-q"]) == 0
        assert s.read_text().startswith(first)
        assert evaluate.main([str(tmp_path / "m.h5"), str(s), "--out-ll", str(tmp_path / "ll.npy"), "-q"]) == 0
        np.testing.assert_allclose(np.load(tmp_path / "ll.npy"), m.log_likelihood(m.sample(20, seed=3)), rtol=1e-12)


def test_samples_of_a_model_with_names_differing_in_blanks_read_back(tmp_path):
    """Names 'a' and 'a ' (a DataFrame's header keeps blanks) were written as spnc-eval's
    header and read back stripped: "column name 'a' appears twice"."""
    m = spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .8), Gaussian(2, 1., 2.)]), var_names=["a", "a ", "b"])
    spnc.save(m, tmp_path / "m.h5")
    for ext in ("csv", "tsv"):
        s = tmp_path / f"s.{ext}"
        assert evaluate.main([str(tmp_path / "m.h5"), "--sample", "20", "--seed", "3", "--out", str(s), "-q"]) == 0
        lines = s.read_text().splitlines()
        d = "," if ext == "csv" else "\t"
        order = [2, 1, 0]      # the columns in another order are still matched by name
        s.write_text("\n".join(d.join(line.split(d)[i] for i in order) for line in lines) + "\n")
        assert evaluate.main([str(tmp_path / "m.h5"), str(s), "--out-ll", str(tmp_path / "ll.npy"), "-q"]) == 0
        np.testing.assert_allclose(np.load(tmp_path / "ll.npy"), m.log_likelihood(m.sample(20, seed=3)), rtol=1e-12)


def test_a_zarr_store_with_dataset_is_read_as_zarr(tmp_path, monkeypatch):
    """'spnc-learn store.zarr --dataset X' read the store directory as a text file
    ("Is a directory"); only 'store.zarr:X' reached the Zarr reader."""
    from spnc.cli import _table
    (tmp_path / "s.zarr").mkdir()
    seen = []
    monkeypatch.setattr(_table.stream, "load", lambda spec: seen.append(spec) or np.ones((3, 2)))
    for path, ds in ((str(tmp_path / "s.zarr"), "X"), (f"{tmp_path / 's.zarr'}:X", None)):
        assert _table.read_table(path, dataset=ds).X.shape == (3, 2)
    assert seen == [f"{tmp_path / 's.zarr'}:X"] * 2


def test_query_names_from_the_header_for_a_model_without_names(tmp_path, capsys):
    """A model without variable names takes a file's columns in order; its header names
    could not be used in --query/--evidence ("'q' is neither a variable name nor an index")."""
    m = spnc.compile(Sum([Product([Gaussian(0, 0., 1.), Gaussian(1, 0., 1.)]),
                          Product([Gaussian(0, 1., 1.), Gaussian(1, 2., 1.)])], [.5, .5]))
    spnc.save(m, tmp_path / "m.h5")
    X = np.array([[0.1, 0.2], [1.0, 2.0]])
    want = m.log_likelihood(X) - m.log_likelihood(np.where([True, False], X, np.nan))
    np.savetxt(tmp_path / "d.csv", X, delimiter=",", header="p,q", comments="")
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["X"] = X
        f["X"].attrs["columns"] = ["p", "q"]
    for data in (tmp_path / "d.csv", f"{tmp_path / 'd.h5'}:/X"):
        assert evaluate.main([str(tmp_path / "m.h5"), str(data), "--query", "q", "--evidence", "p", "--out-ll",
                              str(tmp_path / "ll.npy"), "-q"]) == 0
        np.testing.assert_allclose(np.load(tmp_path / "ll.npy"), want, rtol=1e-12)


def test_semicolon_files_with_decimal_commas_get_the_right_hint(tmp_path, capsys):
    """'0,5;1,25' (a European spreadsheet's CSV) with --delimiter ';' was told to use ','
    as delimiter; with the default, the header 'a;b' read as one name gave no hint."""
    from spnc.cli import learn
    (tmp_path / "eu.csv").write_text("a;b\n0,5;1,25\n1,0;2,5\n")
    for extra, hint in (([], "the header seems to use ';' as delimiter: give --delimiter ';'"),
                        (["--delimiter", ";"], "a decimal comma? numbers are read with a decimal point")):
        assert learn.main([str(tmp_path / "eu.csv"), "-o", str(tmp_path / "m.h5"), "-q"] + extra) == 2
        assert hint in capsys.readouterr().err


def test_a_model_from_stdin_is_refused_saying_so(tmp_path, capsys):
    """'-' as the model said "unknown extension ''" (standard input holds data only)."""
    from spnc.cli import convert, info, merge
    csv = tmp_path / "d.csv"
    csv.write_text("0,1\n1,0\n")
    for tool, argv in ((evaluate, ["-", str(csv)]), (convert, ["-", str(tmp_path / "m.json")]), (info, ["-"]),
                       (merge, ["-", str(csv), "-o", str(tmp_path / "o.h5")])):
        assert tool.main(argv) == 2
        assert "-: a model is read from its file, not from standard input" in capsys.readouterr().err
