"""Property and signal tests of the console tools (issue 13, "Done when"): generated CSV
files and arrays end in a result or a one-line error, never a traceback; a tool killed at
a random moment leaves every pre-existing file intact."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import spnc  # noqa: E402
from spnc.cli import evaluate, learn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")   # overflow is a bug too
FAST = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

CELLS = st.one_of(
    st.integers(0, 3).map(str),
    st.integers(-5, 10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True, width=64).map(repr),
    st.sampled_from(["", "?", "nan", "NA", "inf", "-inf", "1e308", "1e400", "x", "0x1", " 1 ",
                     '"1"', "1,5", "größe", "１"]),
)


@st.composite
def csv_files(draw):
    """Bytes of a delimited file, and the options to read it."""
    ncol = draw(st.integers(1, 4))
    nrow = draw(st.integers(0, 12))
    d = draw(st.sampled_from([",", ";", "\t", " "]))
    binary = draw(st.booleans())
    cell = st.integers(0, 1).map(str) if binary else CELLS
    rows = [[draw(cell) for _ in range(ncol)] for _ in range(nrow)]
    if nrow and draw(st.booleans()):                   # a ragged row
        rows[draw(st.integers(0, nrow - 1))].append("1")
    header = draw(st.sampled_from(["none", "names", "numbers", "mixed", "accents"]))
    names = {"none": None, "names": [f"v{j}" for j in range(ncol)],
             "numbers": [str(j) for j in range(ncol)],
             "mixed": ["a"] + [str(j) for j in range(1, ncol)],
             "accents": [f"größe{j}" for j in range(ncol)]}[header]
    lines = ([d.join(names)] if names else []) + [d.join(r) for r in rows]
    if draw(st.booleans()):
        lines.insert(0, "# a comment")
    text = "\n".join(lines) + ("\n" if draw(st.booleans()) else "")
    enc = draw(st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "latin-1", "utf-16-le"]))
    try:
        raw = text.encode(enc)
    except UnicodeEncodeError:
        raw = text.encode("utf-8")
    opts = []
    delim_opt = draw(st.sampled_from(["given", "default", "empty"]))
    if delim_opt == "given":
        opts += ["--delimiter", {"\t": "tab", " ": "space"}.get(d, d)]
    elif delim_opt == "empty":
        opts += ["--delimiter", ""]
    opts += draw(st.sampled_from([[], ["--header"], ["--no-header"]]))
    return raw, opts


def check_outcome(rc: int, err: str, prog: str) -> None:
    assert rc in (0, 2), (rc, err)
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("robust")
    spn = spnc.compile(spnc.Sum([spnc.Product([spnc.Bernoulli(0, p=.2), spnc.Bernoulli(1, p=.7)]),
                                 spnc.Product([spnc.Bernoulli(0, p=.6), spnc.Bernoulli(1, p=.1)])],
                                [.5, .5]), var_names=["v0", "v1"])
    spnc.save(spn, d / "m.h5")
    return d / "m.h5"


@FAST
@given(f=csv_files(), learner=st.sampled_from(["chowliu", "learnspn", "oslrau"]))
def test_learn_never_tracebacks(tmp_path_factory, capsys, f, learner):
    raw, opts = f
    d = tmp_path_factory.mktemp("fz")
    path = d / "data.csv"
    path.write_bytes(raw)
    out = d / "m.h5"
    rc = learn.main([str(path), "-o", str(out), "--learner", learner, "--min-instances", "5", "-q", *opts])
    check_outcome(rc, capsys.readouterr().err, "spnc-learn")
    if rc == 0:
        spnc.load(out)


@FAST
@given(f=csv_files())
def test_eval_never_tracebacks(tmp_path_factory, capsys, small_model, f):
    raw, opts = f
    path = tmp_path_factory.mktemp("fz") / "data.csv"
    path.write_bytes(raw)
    rc = evaluate.main([str(small_model), str(path), "-q", *opts])
    check_outcome(rc, capsys.readouterr().err, "spnc-eval")


ARRAYS = st.one_of(
    st.tuples(st.integers(0, 6), st.integers(0, 3)).flatmap(
        lambda s: st.lists(st.sampled_from([0.0, 1.0, 2.0, 0.5, np.nan, np.inf, -1.0, 1e300, 2.0**62]),
                           min_size=s[0] * s[1], max_size=s[0] * s[1]).map(
            lambda v, s=s: np.array(v, dtype=np.float64).reshape(s))),
    st.sampled_from([np.zeros(3), np.zeros((2, 2, 2)), np.ones((3, 2), dtype=bool),
                     np.array([[1, 2**62]], dtype=np.int64), np.array([["a", "b"]])]),
)


@FAST
@given(X=ARRAYS, tool=st.sampled_from(["learn", "eval"]))
def test_npy_never_tracebacks(tmp_path_factory, capsys, small_model, X, tool):
    d = tmp_path_factory.mktemp("fz")
    np.save(d / "x.npy", X)
    if tool == "learn":
        rc = learn.main([str(d / "x.npy"), "-o", str(d / "m.json"), "-q", "--min-instances", "3"])
    else:
        rc = evaluate.main([str(small_model), str(d / "x.npy"), "-q"])
    check_outcome(rc, capsys.readouterr().err, f"spnc-{tool}")


def _run(args, **kw):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=ENV,
                          timeout=120, **kw)


def test_real_subprocess_errors_are_one_line(tmp_path, small_model):
    (tmp_path / "bad.csv").write_bytes("v0,v1\n1,0\n".encode("utf-16-le"))
    for args, prog in ((["spnc.cli.learn", str(tmp_path / "bad.csv"), "-o", str(tmp_path / "m.h5")], "spnc-learn"),
                       (["spnc.cli.evaluate", str(small_model), str(tmp_path / "bad.csv")], "spnc-eval"),
                       (["spnc.cli.evaluate", str(small_model), "--sample", "0"], "spnc-eval")):
        r = _run(args)
        assert r.returncode == 2
        assert r.stderr.strip().splitlines()[-1].startswith(f"{prog}: error: ") and "Traceback" not in r.stderr
    r = _run(["spnc.cli.evaluate", str(small_model), "-"], input="v1,v0\n1,0\n0,0\n")
    assert r.returncode == 0 and "rows: 2" in r.stdout


# ------------------------------------------------------------------ killed at any moment
def _snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}


def _assert_complete(path):
    """A whole output: the model loads, the log-likelihoods are one per training row, the
    samples have all their rows."""
    if path.suffix == ".h5":
        spnc.load(path)
    elif path.suffix == ".npy":
        assert np.load(path).shape == (20000,)
    else:
        assert len(np.loadtxt(path, delimiter=",", ndmin=2, comments=None, skiprows=0
                              if path.read_text()[:1].isdigit() else 1)) == 200000


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_tools_leave_files_intact(tmp_path, sig):
    rng = np.random.default_rng(0)
    X = (rng.random((20000, 30)) < 0.3).astype(int)
    np.savetxt(tmp_path / "train.csv", X, fmt="%d", delimiter=",")
    model = tmp_path / "model.h5"
    r = _run(["spnc.cli.learn", str(tmp_path / "train.csv"), "-o", str(model), "--learner", "chowliu", "-q"])
    assert r.returncode == 0, r.stderr
    (tmp_path / "samples.csv").write_text("old samples\n")
    (tmp_path / "ll.npy").write_bytes(b"old ll")
    jobs = [
        ["spnc.cli.evaluate", str(model), "--sample", "200000", "--out", str(tmp_path / "samples.csv")],
        ["spnc.cli.evaluate", str(model), str(tmp_path / "train.csv"), "--out-ll", str(tmp_path / "ll.npy")],
        ["spnc.cli.learn", str(tmp_path / "train.csv"), "-o", str(model), "--min-instances", "2000", "-q"],
    ]
    rnd = random.Random(int(sig))
    for job in jobs:
        before = _snapshot(tmp_path)
        p = subprocess.Popen([sys.executable, "-m", *job], env=ENV, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        time.sleep(rnd.uniform(0.5, 3.0))
        p.send_signal(sig)
        err = p.communicate(timeout=120)[1].decode()
        assert "Traceback" not in err, err
        after = _snapshot(tmp_path)
        for name, old in before.items():
            new = after.get(name)
            assert new is not None, f"{name} disappeared"
            if new != old:       # only a tool's own output may change, and only to a whole file
                assert name in {"samples.csv", "ll.npy", "model.h5"}, name
                _assert_complete(tmp_path / name)   # the signal may land after the rename
        temps = [n for n in after if n.endswith(".spnc-tmp")]
        if sig != signal.SIGKILL:
            assert temps == [], temps
            assert p.returncode in (0, -int(sig), 128 + int(sig), 130), (p.returncode, err)
        for n in temps:          # SIGKILL cannot be caught: a stale temp is recognisable
            (tmp_path / n).unlink()
    spnc.load(model)


def test_reader_line_endings_quotes_and_blocks(tmp_path, monkeypatch):
    from spnc.cli import _table
    (tmp_path / "cr.csv").write_bytes(b'a,b\r1,0\r"0",1\r')
    t = _table.read_table(str(tmp_path / "cr.csv"))
    assert t.names == ["a", "b"] and t.X.tolist() == [[1, 0], [0, 1]] and t.lines.tolist() == [2, 3]
    (tmp_path / "sp.txt").write_bytes(b"# note\r\n1  0\r\n\r\n0\t1\r\n")
    t = _table.read_table(str(tmp_path / "sp.txt"), delimiter="space")
    assert t.names is None and t.X.tolist() == [[1, 0], [0, 1]] and t.lines.tolist() == [2, 4]
    monkeypatch.setattr(_table, "_BLOCK_CELLS", 4)          # several blocks; error in a later one
    rows = "\n".join(f"{i % 2},{(i + 1) % 2}" for i in range(9)) + "\n1,oops\n"
    (tmp_path / "b.csv").write_text("a,b\n" + rows)
    with pytest.raises(spnc.DataError, match=r"b\.csv: line 11, column 2 \('b'\): 'oops' is not a number "
                                             r"\(use NaN"):
        _table.read_table(str(tmp_path / "b.csv"))
    (tmp_path / "b.csv").write_text("a,b\n" + rows.replace("oops", "1"))
    t = _table.read_table(str(tmp_path / "b.csv"))
    assert t.X.shape == (10, 2) and t.lines.tolist() == list(range(2, 12))


def test_digits_joined_by_underscores_are_not_read_as_numbers(tmp_path):
    """numpy and float() read '3_2' as 32 (Python's digit grouping): a typo or a code in a
    data file was silently taken as another number."""
    from spnc.cli import _table
    (tmp_path / "u.csv").write_text("a,b\n1,0\n3_2,1\n")
    with pytest.raises(spnc.DataError, match=r"u\.csv: line 3, column 1 \('a'\): '3_2' is not a number "
                                             r"\(digits joined by '_'"):
        _table.read_table(str(tmp_path / "u.csv"))
    (tmp_path / "n.csv").write_text("x_1,x_2\n1,0\n")        # names with '_' stay a header
    assert _table.read_table(str(tmp_path / "n.csv")).names == ["x_1", "x_2"]
