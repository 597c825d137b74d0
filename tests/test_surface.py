"""Issue 13: data in and out without silent mistakes. One test (or more) per finding; each
failed before the fix."""
from __future__ import annotations

import codecs
import io
import json
import logging
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import spnc
import spnc.io as sio
from spnc import Bernoulli, Gaussian, Product, Sum
from spnc.cli import convert, demo, evaluate, info, learn
from spnc.errors import DataError, StructureError

NAMES = ["a", "b", "c", "d"]


def csv(path: Path, X, names=None, fmt="%d", delimiter=",") -> Path:
    with open(path, "w") as f:
        if names:
            f.write(delimiter.join(names) + "\n")
        for row in np.atleast_2d(X):
            f.write(delimiter.join(fmt % v for v in row) + "\n")
    return path


def one_error(capsys, prog: str) -> str:
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), cap.err
    return lines[0]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A named binary model with dependent columns, its data and files."""
    d = tmp_path_factory.mktemp("surface")
    rng = np.random.default_rng(0)
    X = (rng.random((300, 4)) < [.2, .5, .7, .9]).astype(int)
    X[:, 1] = np.where(rng.random(300) < .8, X[:, 0], X[:, 1])
    train = csv(d / "train.csv", X, NAMES)
    m = d / "m.h5"
    assert learn.main([str(train), "-o", str(m), "--learner", "chowliu", "-q"]) == 0
    return {"dir": d, "X": X, "train": train, "model": m, "spn": sio.load(m)}


# ------------------------------------------------------------------ 1. CSV headers
def test_header_names_matched_not_positions(model, capsys):
    d, X, spn = model["dir"], model["X"], model["spn"]
    capsys.readouterr()
    perm = csv(d / "perm.csv", X[:, [1, 0, 3, 2]], ["b", "a", "d", "c"])
    assert evaluate.main([str(model["model"]), str(perm), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["log_likelihood"][0]["mean"]
    assert got == pytest.approx(spn.log_likelihood(X).mean(), abs=1e-12)
    renamed = csv(d / "renamed.csv", X, ["a", "bb", "c", "d"])
    assert evaluate.main([str(model["model"]), str(renamed)]) == 2
    line = one_error(capsys, "spnc-eval")
    assert "missing 'b'; unknown 'bb'" in line and "--by-position" in line
    assert evaluate.main([str(model["model"]), str(renamed), "--by-position", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 300


def test_typo_in_row_one_is_an_error_not_a_header(model, tmp_path, capsys):
    body = "\n".join(",".join(map(str, r)) for r in model["X"][1:])
    typo = tmp_path / "typo.csv"
    typo.write_text("0,1,x,0\n" + body + "\n")
    for tool, argv in ((evaluate, [str(model["model"]), str(typo)]),
                       (learn, [str(typo), "-o", str(tmp_path / "o.h5")])):
        assert tool.main(argv) == 2
        line = one_error(capsys, tool.PROG)
        assert "typo.csv: line 1, column 3: 'x' is not a number" in line and "--header" in line


def test_numeric_header_row_is_not_silently_data(model, tmp_path, capsys):
    f = csv(tmp_path / "num.csv", model["X"], ["0", "1", "2", "3"])
    assert learn.main([str(f), "-o", str(tmp_path / "o.h5")]) == 2
    assert "reads 0, 1, ..., 3 like a header" in one_error(capsys, "spnc-learn")
    assert learn.main([str(f), "-o", str(tmp_path / "o.h5"), "--header", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data"]["rows"] == 300
    assert sio.load(tmp_path / "o.h5").var_names == ["0", "1", "2", "3"]


def test_types_option_and_report(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X = np.c_[rng.integers(0, 2, 200), rng.integers(0, 5, 200), rng.integers(0, 3, 200)]
    f = csv(tmp_path / "t.csv", X, ["x", "y", "z"])
    assert learn.main([str(f), "-o", str(tmp_path / "m.h5")]) == 0
    assert "types: 1 binary (column 1 'x'), 2 categorical" in capsys.readouterr().out
    assert learn.main([str(f), "-o", str(tmp_path / "m.h5"), "--types", "b"]) == 2
    assert "line 2, column 2 ('y') has value" in one_error(capsys, "spnc-learn")
    assert learn.main([str(f), "-o", str(tmp_path / "m.h5"), "--types", "r", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["data"]["types"] == "rrr"
    assert sio.load(tmp_path / "m.h5").cardinality.tolist() == [0, 0, 0]


# ------------------------------------------------------------------ 2. outputs
def test_outputs_never_overwrite_inputs_and_are_atomic(model, tmp_path, capsys, monkeypatch):
    src = tmp_path / "in.csv"
    src.write_bytes(model["train"].read_bytes())
    before = src.read_bytes()
    for flag in ("--out-ll", "--mpe"):
        assert evaluate.main([str(model["model"]), str(src), flag, str(src)]) == 2
        assert "is also an input file" in one_error(capsys, "spnc-eval")
        assert src.read_bytes() == before
    out = tmp_path / "ll.txt"
    out.write_text("precious\n")
    import spnc._atomic as atomic

    def boom(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(atomic.os, "fsync", boom)      # interrupted in the middle of the write
    assert evaluate.main([str(model["model"]), str(src), "--out-ll", str(out)]) == 130
    assert out.read_text() == "precious\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".spnc-tmp")] == []


def test_output_checks_before_the_work(model, tmp_path, capsys, monkeypatch):
    called = []
    import spnc.learn as sl
    monkeypatch.setattr(sl.ChowLiuTree, "fit", lambda *a, **k: called.append(1))
    for out, pattern in ((tmp_path / "no" / "m.h5", "directory"), (tmp_path, "is a directory")):
        assert learn.main([str(model["train"]), "-o", str(out), "--learner", "chowliu"]) == 2
        assert pattern in one_error(capsys, "spnc-learn")
    assert learn.main([str(model["train"]), "-o", str(model["train"].with_suffix(".json")),
                       "--test", str(model["train"].with_suffix(".json"))]) == 2
    assert "is also an input file" in one_error(capsys, "spnc-learn")
    assert not called
    assert demo.main(["--out", str(tmp_path / "no" / "d.h5")]) == 2
    assert "does not exist" in one_error(capsys, "spnc-demo")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_directory_fails_early(model, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert learn.main([str(model["train"]), "-o", str(ro / "m.h5")]) == 2
        line = one_error(capsys, "spnc-learn")
        assert "cannot write to directory" in line and ".spnc-tmp" not in line
    finally:
        ro.chmod(0o700)


def test_out_json_writes_json_and_unknown_extension_refused(model, tmp_path, capsys):
    out = tmp_path / "s.json"
    assert evaluate.main([str(model["model"]), "--sample", "5", "--out", str(out), "--seed", "1"]) == 0
    obj = json.loads(out.read_text())
    assert obj["columns"] == NAMES and len(obj["data"]) == 5
    capsys.readouterr()
    assert evaluate.main([str(model["model"]), "--sample", "5", "--out", str(tmp_path / "s.xyz")]) == 2
    assert "unknown extension '.xyz'" in one_error(capsys, "spnc-eval")


# ------------------------------------------------------------------ 3. memory guards
def test_memory_guards():
    with pytest.raises(StructureError, match="above the memory budget"):
        spnc.compile(Bernoulli(10**9, p=.3))
    X = np.random.default_rng(0).integers(0, 10**5, size=(60, 16))
    from spnc.learn import ChowLiuTree, LearnSPN
    with pytest.raises(DataError, match="memory budget.*treat wide integer columns as real"):
        LearnSPN().fit(X)
    wide = np.random.default_rng(0).integers(0, 2, size=(50, 10_000))
    for est in (LearnSPN(), ChowLiuTree()):
        with pytest.raises(DataError, match="pairwise statistics over 10000 variables"):
            est.fit(wide)


def test_cli_wide_integer_column_is_real(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = np.c_[rng.normal(size=100), rng.integers(0, 10**5, 100)]
    f = csv(tmp_path / "w.csv", X, ["r", "count"], fmt="%.17g")
    assert learn.main([str(f), "-o", str(tmp_path / "m.h5")]) == 0
    assert "types: 2 real" in capsys.readouterr().out


# ------------------------------------------------------------------ 4./5. one-line errors
@pytest.mark.parametrize("case, pattern", [
    ("header_only", r"hdr\.csv: has a header but no data rows"),
    ("empty_npy", r"e\.npy: no data rows"),
    ("latin1", r"l1\.csv: line 1: byte 0xf6 is not valid utf-8 \(give --encoding"),
    ("delimiter_empty", r"--delimiter must not be empty"),
    ("wrong_delimiter", r"semi\.csv: line 2, column 1 \('a;b;c;d'\): '0;0;1;1' is not a number \(the file "
                        r"seems to use ';' as delimiter: give --delimiter ';'\)"),
    ("ragged", r"rag\.csv: line 4 has 3 cells, the header has 4"),
    ("sample0", r"argument --sample: needs a whole number >= 1, got 0"),
    ("sample_huge", r"argument --sample: 1e10 is too large \(at most"),
    ("eval_half", r"half\.csv: line 2, column 2 \('b'\): 0\.5 is not a state 0\.\.1"),
])
def test_one_line_errors(model, tmp_path, capsys, case, pattern):
    import re
    m = str(model["model"])
    if case == "header_only":
        (tmp_path / "hdr.csv").write_text("a,b,c,d\n")
        argv = [m, str(tmp_path / "hdr.csv")]
    elif case == "empty_npy":
        np.save(tmp_path / "e.npy", np.zeros((0, 4)))
        argv = [m, str(tmp_path / "e.npy")]
    elif case == "latin1":
        (tmp_path / "l1.csv").write_bytes("größe,b,c,d\n1,0,1,0\n".encode("latin-1"))
        argv = [m, str(tmp_path / "l1.csv")]
    elif case == "delimiter_empty":
        argv = [m, str(model["train"]), "--delimiter", ""]
    elif case == "wrong_delimiter":
        argv = [m, str(csv(tmp_path / "semi.csv", [[0, 0, 1, 1]], NAMES, delimiter=";"))]
    elif case == "ragged":
        (tmp_path / "rag.csv").write_text("a,b,c,d\n# comment\n0,1,1,1\n0,1,1\n")
        argv = [m, str(tmp_path / "rag.csv")]
    elif case == "sample0":
        argv = [m, "--sample", "0"]
    elif case == "sample_huge":
        argv = [m, "--sample", "1e10"]
    else:
        argv = [m, str(csv(tmp_path / "half.csv", [[0, .5, 1, 1]], NAMES, fmt="%g"))]
    if case.startswith("sample"):
        with pytest.raises(SystemExit) as e:
            evaluate.main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
    else:
        assert evaluate.main(argv) == 2
        err = one_error(capsys, "spnc-eval")
    assert re.search(pattern, err), err


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-32-be"])
def test_utf16_and_utf32_with_bom_are_read(model, tmp_path, capsys, encoding):
    # UTF-32 was read as UTF-16 (its BOM starts with UTF-16's): "'\x000\x00' is not a number"
    text = "a,b,c,d\n" + "\n".join(",".join(map(str, r)) for r in model["X"][:10]) + "\n"
    bom = {"utf-32-be": codecs.BOM_UTF32_BE}.get(encoding, b"")
    (tmp_path / "u.csv").write_bytes(bom + text.encode(encoding))
    assert evaluate.main([str(model["model"]), str(tmp_path / "u.csv"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["log_likelihood"][0]["mean"]
    assert got == pytest.approx(model["spn"].log_likelihood(model["X"][:10]).mean())


def test_nan_where_a_state_is_needed():
    from spnc.learn import ChowLiuTree
    with pytest.raises(DataError, match=r"X\[1, 0\] = nan is missing \(NaN\)") as e:
        ChowLiuTree().fit(np.array([[0, 1], [np.nan, 1]]))
    assert "4611686018427387902" not in str(e.value)


# ------------------------------------------------------------------ 6. silent acceptance
def test_silent_acceptance_refused(model, tmp_path, capsys):
    from spnc.learn import OSLRAU
    with pytest.raises(DataError, match="no rows"):
        OSLRAU().fit(np.zeros((0, 3)))
    with pytest.raises(DataError, match="no rows"):
        OSLRAU().fit(iter([]))
    with pytest.raises(StructureError, match=r"sum weights \[0.3, 0.3\] add up to 0.6, not 1"):
        spnc.compile(Sum([Bernoulli(0, p=.3), Bernoulli(0, p=.6)], [.3, .3]))
    ok = spnc.compile(Sum([Bernoulli(0, p=.3), Bernoulli(0, p=.6)], [.3, .3]), normalize=True)
    assert ok.weight.tolist() == [.5, .5]
    # a binary column next to a real one: Bernoulli leaves, and 0.5 refused there
    rng = np.random.default_rng(0)
    z = rng.integers(0, 2, 400)
    X = np.c_[z, rng.normal(2.0 * z, 1.0), rng.normal(size=400)]
    f = csv(tmp_path / "mix.csv", X, ["flag", "u", "v"], fmt="%.17g")
    out = tmp_path / "mix.h5"
    assert learn.main([str(f), "-o", str(out), "--min-instances", "50"]) == 0
    assert "types: 1 binary (column 1 'flag'), 2 real" in capsys.readouterr().out
    m = sio.load(out)
    assert m.cardinality.tolist() == [2, 0, 0] and "bernoulli" in m.leaf_tables
    grid = np.c_[[0, 1], [np.nan, np.nan], [np.nan, np.nan]]
    assert np.exp(m.log_likelihood(grid)).sum() == pytest.approx(1.0)
    half = csv(tmp_path / "half.csv", [[0.5, 0.0, 0.0]], ["flag", "u", "v"], fmt="%g")
    assert evaluate.main([str(out), str(half)]) == 2
    assert "half.csv: line 2, column 1 ('flag'): 0.5 is not a state 0..1" in one_error(capsys, "spnc-eval")


# ------------------------------------------------------------------ 7. what users expect
def test_progress_on_em_oslrau_chowliu(monkeypatch, caplog):
    from spnc.learn import EM, OSLRAU, ChowLiuTree
    monkeypatch.setenv("SPNC_PROGRESS_SECONDS", "0")
    X = np.random.default_rng(0).integers(0, 2, size=(200, 5))
    with caplog.at_level(logging.INFO, logger="spnc"):
        tree = ChowLiuTree().fit(X).spn_
        EM(init=tree, max_iter=3, tol=-1).fit(X)
        OSLRAU(batch_size=50).fit(np.random.default_rng(1).normal(size=(200, 3)))
    text = caplog.text
    assert "em: pass 1/3" in text and "em: pass 3/3" in text
    assert "oslrau: 200/200 rows (100%)" in text and "chowliu: tree over 5 variables" in text


def test_quiet_threads_alias_and_json(model, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPNC_PROGRESS_SECONDS", "0")
    argv = [str(model["train"]), "-o", str(tmp_path / "m.h5"), "--threads", "1", "--em", "2", "--json"]
    assert learn.main(argv + ["-q"]) == 0
    cap = capsys.readouterr()
    assert cap.err == ""
    s = json.loads(cap.out)
    assert s["em_passes"] == 2 and s["log_likelihood"]["train"]["rows"] == 300
    assert learn.main(argv[:3] + ["--n-threads", "1", "--em", "2"]) == 0
    assert "spnc-learn: em: pass 1/2" in capsys.readouterr().err
    for tool, args in ((evaluate, [str(model["model"]), str(model["train"])]),
                       (info, [str(model["model"])]),
                       (convert, [str(model["model"]), str(tmp_path / "m.json")])):
        assert tool.main(args + ["-q"]) == 0
        assert capsys.readouterr().err == ""


def test_samples_to_stdout_and_conditional_sampling(model, tmp_path, capsys):
    m = str(model["model"])
    assert evaluate.main([m, "--sample", "4", "--seed", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "a,b,c,d" and len(lines) == 5
    ev = csv(tmp_path / "ev.csv", [[1, np.nan, np.nan, 0]], NAMES, fmt="%g")
    out = tmp_path / "s.npy"
    assert evaluate.main([m, "--sample", "50", "--evidence", str(ev), "--out", str(out), "--seed", "1"]) == 0
    S = np.load(out)
    assert S.shape == (50, 4) and np.all(S[:, 0] == 1) and np.all(S[:, 3] == 0)
    ev2 = csv(tmp_path / "ev2.csv", [[1, np.nan, np.nan, 0]] * 3, NAMES, fmt="%g")
    capsys.readouterr()
    assert evaluate.main([m, "--sample", "50", "--evidence", str(ev2)]) == 2
    assert "3 evidence rows for --sample 50" in one_error(capsys, "spnc-eval")


def test_broken_pipe_is_quiet(model, capsys, monkeypatch):
    class Closed(io.StringIO):
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            raise io.UnsupportedOperation
    monkeypatch.setattr(sys, "stdout", Closed())
    assert evaluate.main([str(model["model"]), "--sample", "100"]) == 141
    assert capsys.readouterr().err == ""


def test_info_table_json_and_plot(model, tmp_path, capsys):
    spn = spnc.compile(Sum([Product([Bernoulli(0, p=.2), Gaussian(1, 0., 1.)]),
                            Product([Bernoulli(0, p=.7), Gaussian(1, 1., 2.)])], [.4, .6]),
                       var_names=["x", "y"])
    f = tmp_path / "m.json"
    sio.save(spn, f)
    assert info.main([str(f), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert (st["nodes"], st["edges"], st["sums"], st["products"], st["leaves"]) == (7, 6, 1, 2, 4)
    assert st["parameters"] == {"sum_weights": 2, "leaf": 6, "total": 8}
    assert st["depth"] == 2 and st["shared_nodes"] == 0
    assert st["leaf_families"] == {"bernoulli": {"leaves": 2, "parameters": 2},
                                   "gaussian": {"leaves": 2, "parameters": 4}}
    assert info.main([str(f)]) == 0
    assert "sharing        0 nodes with more than one parent" in capsys.readouterr().out
    shared = spnc.load(Path(__file__).resolve().parents[1] / "formats" / "examples" / "dag_categorical.json")
    from spnc.cli.info import statistics
    assert statistics(shared)["shared_nodes"] == 3
    # a Chow-Liu leaf's parameters are its CPT entries, not its parent indices
    from spnc.leaves.cltree import ChowLiuLeaf
    cl = spnc.compile(ChowLiuLeaf([0, 1, 2], [-1, 0, 1], [[[0.3, 0.7]], [[0.9, 0.1], [0.2, 0.8]],
                                                         [[0.5, 0.5], [0.6, 0.4]]]))
    assert statistics(cl)["leaf_families"] == {"cltree": {"leaves": 1, "parameters": 10}}
    import shutil
    try:
        import matplotlib  # noqa: F401
        can_draw = True
    except ImportError:
        can_draw = shutil.which("dot") is not None
    rc = info.main([str(f), "--plot", str(tmp_path / "m.svg"), "-q"])
    if can_draw:
        assert rc == 0 and (tmp_path / "m.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    else:
        assert rc == 2 and "pip install matplotlib" in one_error(capsys, "spnc-info")


# ------------------------------------------------------------------ 9. DataFrames, Parquet
def test_dataframes_everywhere(model):
    pd = pytest.importorskip("pandas")
    from spnc.learn import ChowLiuTree, EM, LearnSPN, OSLRAU
    X = model["X"]
    df = pd.DataFrame(X, columns=NAMES)
    for est in (LearnSPN(min_instances=50), ChowLiuTree()):
        spn = est.fit(df).spn_
        assert spn.var_names == NAMES
        assert np.array_equal(spn.log_likelihood(df[["d", "c", "b", "a"]]), spn.log_likelihood(X))
        with pytest.raises(DataError, match="variable 'a' is not among the DataFrame's columns"):
            spn.log_likelihood(df.rename(columns={"a": "A"}))
    assert EM(init=spn, max_iter=2).fit(df).spn_.var_names == NAMES
    o = OSLRAU().fit(pd.DataFrame(np.random.default_rng(0).normal(size=(50, 2)), columns=["u", "v"]))
    assert o.spn_.var_names == ["u", "v"]
    with pytest.raises(DataError, match="column 'a' has dtype"):
        LearnSPN().fit(df.astype({"a": str}))


def test_nullable_pandas_columns_are_missing_values(model):
    pd = pytest.importorskip("pandas")
    from spnc.learn import ChowLiuTree
    X = model["X"][:20].astype(float)
    df = pd.DataFrame(X, columns=NAMES).astype({"a": "Int64", "b": "boolean", "c": "Int8", "d": "UInt8"})
    spn = model["spn"]
    assert np.array_equal(spn.log_likelihood(df), spn.log_likelihood(X))
    df.loc[0, "a"] = pd.NA
    df.loc[1, "b"] = pd.NA
    X[0, 0] = X[1, 1] = np.nan
    assert np.array_equal(spn.log_likelihood(df), spn.log_likelihood(X))
    with pytest.raises(DataError, match="missing"):
        ChowLiuTree().fit(df)


def test_parquet_input(model, tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    f = tmp_path / "t.parquet"
    pd.DataFrame(model["X"][:, [3, 2, 1, 0]], columns=NAMES[::-1]).to_parquet(f)
    assert evaluate.main([str(model["model"]), str(f), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["log_likelihood"][0]["mean"]
    assert got == pytest.approx(model["spn"].log_likelihood(model["X"]).mean(), abs=1e-12)


def test_parquet_column_names_read_as_from_csv(tmp_path, capsys):
    # a name no model file could store (here > 1024 bytes) is refused where it would name a
    # model, not when spnc-eval queries an unnamed model with it (was refused for Parquet
    # only; the same CSV header was read)
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    spnc.save(spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .4)])), tmp_path / "m.h5")
    X = np.array([[0.0, 1.0], [1.0, 0.0]])
    pd.DataFrame(X, columns=["x" * 1100, "b"]).to_parquet(tmp_path / "t.parquet")
    (tmp_path / "t.csv").write_text("x" * 1100 + ",b\n0,1\n1,0\n")
    for f in ("t.parquet", "t.csv"):
        assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / f), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)["log_likelihood"][0]["mean"]
        assert out == pytest.approx(float(np.mean(np.log([0.7 * 0.4, 0.3 * 0.6]))), abs=1e-12)


@pytest.mark.parametrize("learner", ["LearnSPN", "ChowLiuTree", "Prometheus", "OSLRAU", "TreeSPN"])
def test_complex_data_is_refused_not_truncated(learner):
    import spnc.learn
    make = getattr(spnc.learn, learner)
    X = (np.random.default_rng(0).random((60, 3)) < 0.5).astype(complex)
    with pytest.raises(spnc.DataError, match="complex"):
        make().fit(X)
