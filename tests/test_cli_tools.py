"""spnc-convert and spnc-eval, run as subprocesses (python -m) and in-process via main()."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import spnc
import spnc.io as sio
from spnc.cli import convert, evaluate

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "formats" / "examples"
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run(tool: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"spnc.cli.{tool}", *map(str, args)],
                          capture_output=True, text=True, env=dict(ENV, **(env or {})), timeout=120)


def test_convert_round_trip_subprocess(tmp_path):
    j, h, j2 = tmp_path / "a.json", tmp_path / "b.h5", tmp_path / "c.json"
    r = run("convert", EX / "learner_stats.h5", j)
    assert r.returncode == 0, r.stderr
    assert run("convert", j, h).returncode == 0
    assert run("convert", h, j2).returncode == 0
    assert j.read_text() == j2.read_text() == (EX / "learner_stats.json").read_text()
    r = run("convert", "--validate-only", h)
    assert r.returncode == 0 and "ok" in r.stdout and "7 nodes" in r.stdout


def test_convert_dot_and_render(tmp_path):
    d = tmp_path / "m.dot"
    r = run("convert", EX / "dag_categorical.json", d, "--max-depth", "2")
    assert r.returncode == 0, r.stderr
    assert d.read_text().startswith("digraph spnc {")
    if not __import__("shutil").which("dot"):
        pytest.skip("Graphviz dot not installed")
    svg = tmp_path / "m.svg"
    r = run("convert", EX / "mixed.h5", svg)
    assert r.returncode == 0, r.stderr
    assert "<svg" in svg.read_text()
    png = tmp_path / "m.png"
    assert run("convert", EX / "mixed.h5", png).returncode == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("setup, expect", [
    ("missing", "No such file"),
    ("garbage", "not an HDF5 file"),
    ("badjson", "invalid JSON"),
    ("dotin", "DOT files are drawings"),
    ("badext", "unknown extension"),
    ("badchild", r"/edges/child\[3\] = 99 is out of range"),
])
def test_convert_errors_one_line(tmp_path, setup, expect):
    src = tmp_path / {"missing": "nope.h5", "garbage": "g.h5", "badjson": "b.json",
                      "dotin": "m.dot", "badext": "m.h5", "badchild": "c.json"}[setup]
    out = tmp_path / ("out.xyz" if setup == "badext" else "out.json")
    if setup == "garbage":
        src.write_bytes(b"hello world, not hdf5")
    elif setup == "badjson":
        src.write_text('{"format": "spnc-model", ')
    elif setup == "dotin":
        src.write_text("digraph spnc {}")
    elif setup == "badext":
        src.write_bytes((EX / "mixed.h5").read_bytes())
    elif setup == "badchild":
        d = json.loads((EX / "mixed.json").read_text())
        d["edges"]["child"][3] = 99
        src.write_text(json.dumps(d))
    r = run("convert", src, out)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spnc-convert: error: "), r.stderr
    assert __import__("re").search(expect, lines[0]), lines[0]
    assert not out.exists()


def _data(tmp_path: Path):
    m = sio.load(EX / "mixed.h5")
    X = np.array([[0, 0.5], [1, np.nan], [np.nan, 2.0], [1, -1.25]])
    return m, X


def test_eval_csv_tsv_npy_h5(tmp_path):
    m, X = _data(tmp_path)
    ll = m.log_likelihood(X)
    csv = tmp_path / "x.csv"
    csv.write_text("smoker,Gewicht (kg) — μ\n0,0.5\n1,?\n,2.0\n1,-1.25\n")
    tsv = tmp_path / "x.tsv"
    tsv.write_text("0\t0.5\n1\tNaN\n?\t2.0\n1\t-1.25\n")
    npy = tmp_path / "x.npy"
    np.save(npy, X)
    h5 = tmp_path / "x.h5"
    import h5py
    with h5py.File(h5, "w") as f:
        f["grp/test"] = X
    for args in ([csv], [tsv], [npy], [h5, "--dataset", "grp/test"]):
        out = tmp_path / "ll.txt"
        r = run("evaluate", EX / "mixed.h5", *args, "--out-ll", out)
        assert r.returncode == 0, r.stderr
        got = np.array([float(s) for s in out.read_text().split()])
        assert got.tobytes() == ll.tobytes()
        assert f"mean log-likelihood: {ll.mean():.6f}" in r.stdout
        se = ll.std(ddof=1) / np.sqrt(len(ll))
        assert f"+- {se:.6f}" in r.stdout


def test_eval_mpe_sample_conditional_progress(tmp_path):
    m, X = _data(tmp_path)
    npy = tmp_path / "x.npy"
    np.save(npy, X)
    r = run("evaluate", EX / "mixed.h5", npy, "--mpe", tmp_path / "mpe.npy", "--chunk-rows", "2",
            env={"SPNC_PROGRESS_SECONDS": "0"})
    assert r.returncode == 0, r.stderr
    assert "spnc-eval: 2/4 rows" in r.stderr and "4/4 rows" in r.stderr
    filled = np.load(tmp_path / "mpe.npy")
    assert filled.tobytes() == m.mpe(X)[0].tobytes()
    r = run("evaluate", EX / "mixed.h5", "--sample", "50", "--out", tmp_path / "s.npy", "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "s.npy").tobytes() == m.sample(50, seed=3).tobytes()
    out = tmp_path / "c.npy"
    r = run("evaluate", EX / "mixed.h5", npy, "--query", "smoker", "--evidence", "1", "--out-ll", out)
    assert r.returncode == 0, r.stderr
    Xq = X.copy()
    Xe = X.copy()
    Xe[:, 0] = np.nan
    assert np.load(out).tobytes() == (m.log_likelihood(Xq) - m.log_likelihood(Xe)).tobytes()


def test_eval_errors_and_help(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("0,0.5\n1,abc\n")
    r = run("evaluate", EX / "mixed.h5", bad)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"spnc-eval: error: {bad}: line 2, column 2: 'abc' is not a number "
        "(use NaN, ? or an empty cell for missing values)"]
    wide = tmp_path / "w.csv"
    wide.write_text("0,0.5,1\n")
    r = run("evaluate", EX / "mixed.h5", wide)
    assert r.returncode == 2 and "3 columns, the model has 2 variables" in r.stderr
    r = run("evaluate", EX / "mixed.h5", tmp_path / "x.h5")
    assert r.returncode == 2 and "spnc-eval: error:" in r.stderr
    r = run("evaluate", "--help")
    assert r.returncode == 0 and "examples:" in r.stdout and "--query" in r.stdout


def test_main_in_process(tmp_path, capsys):
    assert convert.main([str(EX / "mixed.json"), str(tmp_path / "m.h5")]) == 0
    assert convert.main([str(tmp_path / "nothing.json"), str(tmp_path / "m2.h5")]) == 2
    assert "spnc-convert: error:" in capsys.readouterr().err
    np.save(tmp_path / "x.npy", np.array([[0.0, 1.0]]))
    assert evaluate.main([str(tmp_path / "m.h5"), str(tmp_path / "x.npy")]) == 0
    assert "rows: 1" in capsys.readouterr().out


def test_convert_to_names_the_format_over_a_drawing_extension(tmp_path):
    """--to json / --to <foreign> write that format, also under a .dot name (they drew)."""
    src = EX / "mixed.json"
    for fmt in ("json", "hdf5"):
        out = tmp_path / f"m_{fmt}.dot"
        assert convert.main([str(src), str(out), "--to", fmt]) == 0
        back = spnc.load(out, fmt=fmt)
        assert back.n_nodes == spnc.load(src).n_nodes
    cat = spnc.compile(spnc.Sum([spnc.Bernoulli(0, 0.2), spnc.Bernoulli(0, 0.7)], [0.4, 0.6]))
    spnc.save(cat, tmp_path / "b.json")
    out = tmp_path / "b.svg"
    assert convert.main([str(tmp_path / "b.json"), str(out), "--to", "spflow-text"]) == 0
    assert out.read_text().startswith("(0.4*(Bernoulli(V0|p=0.2))")


def test_convert_dot_to_standard_output_and_no_file_named_dash(tmp_path, capsys, monkeypatch):
    """OUTPUT '-' writes DOT text to standard output; for model files and pictures it is
    refused, instead of writing a file named '-'."""
    monkeypatch.chdir(tmp_path)
    src = EX / "mixed.json"
    assert convert.main([str(src), "-", "--to", "dot", "-q"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("digraph") and not (tmp_path / "-").exists()
    for to in ("json", "svg", None):
        assert convert.main([str(src), "-"] + (["--to", to] if to else [])) == 2
        assert "takes DOT text only" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("how", ["sample", "streamed"])
def test_reader_of_stdout_leaving_exits_141(tmp_path, how):
    """``spnc-eval ... | head``: the large write to the closed pipe comes back short without
    an error, so the tool used to drop the rest silently and exit 0."""
    if how == "sample":
        args = [EX / "mixed.h5", "--sample", "1000000", "--seed", "0"]
    else:
        data = tmp_path / "big.npy"
        np.save(data, np.tile([[1.0, 0.3], [0.0, 1.2]], (200_000, 1)))
        args = [EX / "mixed.h5", data, "--out-ll", "-", "--chunk-rows", "1000000"]
    p = subprocess.Popen([sys.executable, "-m", "spnc.cli.evaluate", *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    assert p.stdout.read(100)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=120) == 141 and err == b""
