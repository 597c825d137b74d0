"""spnc-learn, as a subprocess (python -m spnc.cli.learn) and in-process via main()."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import spnc
import spnc.io as sio
from spnc.cli import learn

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
NAMES = ["smoker", "age_band", "x2", "x3", "x4", "x5"]


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "spnc.cli.learn", *map(str, args)],
                          capture_output=True, text=True, env=ENV, timeout=120)


def write_csv(path: Path, X: np.ndarray, names=None, fmt="%d") -> Path:
    with open(path, "w") as f:
        if names:
            f.write(",".join(names) + "\n")
        for row in X:
            f.write(",".join(fmt % v for v in row) + "\n")
    return path


def binary(n: int, seed: int = 0) -> np.ndarray:
    """Two latent groups over six dependent binary variables."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, size=(n, 1))
    return (rng.random((n, 6)) < np.where(z == 1, 0.85, 0.2)).astype(float)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("learn")
    X = binary(500)
    rng = np.random.default_rng(1)
    C = rng.multivariate_normal([0, 1, -1], [[1, .8, 0], [.8, 1, 0], [0, 0, 1]], size=300)
    return {"dir": d, "X": X, "C": C,
            "train": write_csv(d / "train.csv", X[:350], NAMES),
            "valid": write_csv(d / "valid.csv", X[350:425], NAMES),
            "test": write_csv(d / "test.csv", X[425:]),           # no header: by position
            "cont": write_csv(d / "cont.csv", C, ["u", "v", "w"], fmt="%.17g")}


def printed(stdout: str, tag: str) -> tuple[float, float]:
    m = re.search(rf"^{tag} mean log-likelihood: (\S+) \+- (\S+) \(standard error, (\d+) rows\)",
                  stdout, re.M)
    assert m, stdout
    return float(m.group(1)), float(m.group(2))


def check_printed(stdout: str, model, tag: str, X: np.ndarray) -> None:
    ll = model.log_likelihood(X)
    _, se = printed(stdout, tag)
    assert f"{tag} mean log-likelihood: {ll.mean():.6f} +- " in stdout
    assert se == pytest.approx(ll.std(ddof=1) / np.sqrt(len(ll)), abs=2e-6)


# ------------------------------------------------------------------------ learning
@pytest.mark.parametrize("extra", [[], ["--splitter", "ebvs", "--leaves", "chowliu"],
                                   ["--sum-split", "observed", "--splitter", "rgvs"]])
def test_learnspn_subprocess(files, tmp_path, extra):
    out = tmp_path / "m.h5"
    r = run(files["train"], "-o", out, "--valid", files["valid"], "--test", files["test"],
            "--min-instances", 40, "--seed", 3, *extra)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    m = sio.load(out)
    X = files["X"]
    for tag, rows in (("train", X[:350]), ("valid", X[350:425]), ("test", X[425:])):
        check_printed(r.stdout, m, tag, rows)
    assert m.var_names == NAMES
    assert m.learner["name"] == "learnspn" and m.learner["params"]["min_instances"] == 40
    if extra:
        assert m.learner["params"]["splitter"] == extra[extra.index("--splitter") + 1]
    assert f"model: {m.n_nodes} nodes, {m.n_edges} edges" in r.stdout
    assert re.search(r"^fit time: \d+\.\d+ s$", r.stdout, re.M)
    assert r.stdout.strip().splitlines()[-1] == f"saved: {out}"


def test_seed_and_progress(files, tmp_path, capsys):
    args = [str(files["train"]), "--min-instances", "30", "--seed", "5", "--splitter", "rgvs"]
    assert learn.main([*args, "-o", str(tmp_path / "a.h5"), "--progress"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("spnc-learn: learning with learnspn") and "learnspn: " in err and "nodes built" in err
    assert learn.main([*args, "-o", str(tmp_path / "b.h5"), "--progress", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    X = files["X"]
    a, b = sio.load(tmp_path / "a.h5"), sio.load(tmp_path / "b.h5")
    assert a.log_likelihood(X).tobytes() == b.log_likelihood(X).tobytes()


def test_chowliu_json_and_var_names(files, tmp_path, capsys):
    out = tmp_path / "tree.json"
    assert learn.main([str(files["train"]), "-o", str(out), "--learner", "chowliu", "--alpha", "1",
                       "--test", str(files["test"]), "--quiet"]) == 0
    cap = capsys.readouterr()
    assert cap.err == ""
    m = sio.load(out)
    assert m.var_names == NAMES and m.learner["name"] == "chowliu"
    assert m.learner["params"]["alpha"] == 1.0
    check_printed(cap.out, m, "train", files["X"][:350])
    check_printed(cap.out, m, "test", files["X"][425:])
    # the names survive a round trip through the other format too
    sio.save(m, tmp_path / "tree.h5")
    assert sio.load(tmp_path / "tree.h5").var_names == NAMES


def test_valid_columns_reordered_by_name(files, tmp_path, capsys):
    X = files["X"]
    perm = [3, 0, 5, 1, 4, 2]
    shuffled = write_csv(tmp_path / "v.csv", X[350:425][:, perm], [NAMES[i] for i in perm])
    out = tmp_path / "m.h5"
    assert learn.main([str(files["train"]), "-o", str(out), "--learner", "chowliu",
                       "--valid", str(shuffled), "-q"]) == 0
    check_printed(capsys.readouterr().out, sio.load(out), "valid", X[350:425])


def test_oslrau_continuous(files, tmp_path, capsys):
    out = tmp_path / "o.h5"
    assert learn.main([str(files["cont"]), "-o", str(out), "--learner", "oslrau", "--batch-size", "10",
                       "--correlation-threshold", "0.3", "--max-leaf-vars", "2", "--seed", "1", "-q"]) == 0
    cap = capsys.readouterr()
    m = sio.load(out)
    assert m.var_names == ["u", "v", "w"] and m.learner["name"] == "oslrau"
    assert m.learner["params"]["batch_size"] == 10
    check_printed(cap.out, m, "train", files["C"])


def test_learnspn_real_data_defaults_to_correlation(files, tmp_path, capsys):
    out = tmp_path / "c.h5"
    assert learn.main([str(files["cont"]), "-o", str(out), "--min-instances", "60", "-q"]) == 0
    cap = capsys.readouterr()
    assert "splitter correlation" in cap.out
    check_printed(cap.out, sio.load(out), "train", files["C"])


def test_em_refinement(files, tmp_path, capsys):
    base, refined = tmp_path / "base.h5", tmp_path / "em.h5"
    common = [str(files["train"]), "--min-instances", "40", "--seed", "0", "-q"]
    assert learn.main([*common, "-o", str(base)]) == 0
    capsys.readouterr()
    assert learn.main([*common, "-o", str(refined), "--em", "8", "--valid", str(files["valid"])]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^em: \d+ pass(es)?,", out, re.M)
    b, m = sio.load(base), sio.load(refined)
    X = files["X"]
    check_printed(out, m, "train", X[:350])
    check_printed(out, m, "valid", X[350:425])
    # validation-based stopping never returns a model worse on the validation data
    assert m.log_likelihood(X[350:425]).mean() >= b.log_likelihood(X[350:425]).mean() - 1e-12
    assert m.learner["name"] == "em"
    assert m.learner["params"]["structure_learner"]["name"] == "learnspn"
    assert m.var_names == NAMES
    # without validation data: at most N passes, training likelihood does not drop
    assert learn.main([*common, "-o", str(refined), "--em", "3"]) == 0
    out = capsys.readouterr().out
    n_pass = int(re.search(r"^em: (\d+) pass(es)?,", out, re.M).group(1))
    assert 1 <= n_pass <= 3
    assert sio.load(refined).log_likelihood(X[:350]).mean() >= b.log_likelihood(X[:350]).mean() - 1e-9
    assert sio.load(refined).learner["params"]["alpha"] == 0.1       # LearnSPN's, on discrete data
    # real data: no pseudo-counts, as LearnSPN's own refinement (refine="em") uses
    assert learn.main([str(files["cont"]), "-o", str(refined), "--min-instances", "60", "--em", "2", "-q"]) == 0
    assert sio.load(refined).learner["params"]["alpha"] == 0.0


# ------------------------------------------------------------------------ bad input
def one_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spnc-learn: error: "), r.stderr
    return lines[0]


def test_errors_subprocess(files, tmp_path):
    out = tmp_path / "out.h5"
    nan = tmp_path / "nan.csv"
    nan.write_text("a,b,c\n0,1,0\n1,1,0\n1,?,1\n")
    for args, pattern in [
        ([tmp_path / "nope.csv", "-o", out], r"No such file.*nope\.csv"),
        ([nan, "-o", out], r"nan\.csv: line 4, column 2 \('b'\) is missing: learning needs complete"),
        ([files["train"], "-o", out, "--splitter", "fancy"], r"unknown --splitter 'fancy'; choose one of gvs"),
    ]:
        line = one_error(run(*args))
        assert re.search(pattern, line), (pattern, line)
        assert not out.exists()
    r = run("--help")
    assert r.returncode == 0 and "examples:" in r.stdout and "--splitter" in r.stdout


@pytest.mark.parametrize("case, pattern", [
    ("bernoulli", r"cat\.csv: line 3, column 1 \('a'\) has value 2: --leaves bernoulli needs 0/1 data"),
    ("wide_valid", r"wide\.csv: the header does not match the model's variables \(missing 'x4', 'x5'\); "
                   r"give --by-position"),
    ("splitter_kind", r"error: --splitter correlation works on continuous data, but the data is discrete$"),
    ("clusters", r"error: LearnSPN: --clusters must be an integer >= 2, got 1$"),
    ("not_for_learner", r"--min-instances does not apply to --learner chowliu"),
    ("extension", r"m\.xyz: a model is saved as \.h5, \.hdf5 or \.json"),
    ("no_dir", r"directory .* does not exist"),
    ("unseen_state", r"unseen\.csv: line 3, column 1 \('smoker'\) has value 3, but the column is binary: "
                     r"its values must be 0 or 1"),
    ("learner", r"unknown --learner 'xgboost'"),
    ("inf", r"inf\.csv: line 1, column 2 is inf: learning needs complete"),
])
def test_errors_one_line(files, tmp_path, capsys, case, pattern):
    out = tmp_path / "out.h5"
    cat = write_csv(tmp_path / "cat.csv", np.array([[0, 1], [2, 0], [1, 1]]), ["a", "b"])
    train = str(files["train"])
    argv = {
        "bernoulli": [str(cat), "--leaves", "bernoulli"],
        "wide_valid": [train, "--valid", str(write_csv(tmp_path / "wide.csv", files["X"][:5, :4], NAMES[:4]))],
        "splitter_kind": [train, "--splitter", "correlation"],
        "clusters": [train, "--clusters", "1"],
        "not_for_learner": [train, "--learner", "chowliu", "--min-instances", "5"],
        "extension": [train, "-o", str(tmp_path / "m.xyz")],
        "no_dir": [train, "-o", str(tmp_path / "no" / "m.h5")],
        "unseen_state": [train, "--test", str(write_csv(tmp_path / "unseen.csv",
                                                        np.array([[0] * 6, [3] + [1] * 5]), NAMES))],
        "learner": [train, "--learner", "xgboost"],
        "inf": [str(write_csv(tmp_path / "inf.csv", np.array([[0.5, np.inf]]), fmt="%g"))],
    }[case]
    if "-o" not in argv:
        argv += ["-o", str(out)]
    assert learn.main(argv) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spnc-learn: error: "), cap.err
    assert re.search(pattern, lines[0]), lines[0]
    assert cap.out == "" and not out.exists()


def test_errors_in_process(files, tmp_path, capsys):
    frac = write_csv(tmp_path / "f.csv", np.array([[0.0, 1.5], [1.0, 0.0]]), fmt="%g")
    assert learn.main([str(frac), "-o", str(tmp_path / "m.h5"), "--learner", "chowliu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "line 1, column 2 has value 1.5" in err[0] and "non-negative integer" in err[0]
    assert learn.main([str(files["cont"]), "-o", str(tmp_path / "m.h5"), "--learner", "oslrau",
                       "--batch-size", "0", "-q"]) == 2
    assert capsys.readouterr().err.strip() == \
        "spnc-learn: error: OSLRAU: --batch-size must be an integer >= 1 or auto, got 0"
    assert learn.main([str(files["cont"]), "-o", str(tmp_path / "m.h5"), "--em", "0"]) == 2
    assert "--em needs N >= 1" in capsys.readouterr().err


def test_failed_run_keeps_existing_output(files, tmp_path, capsys, monkeypatch):
    out = tmp_path / "model.h5"
    assert learn.main([str(files["train"]), "-o", str(out), "--learner", "chowliu", "-q"]) == 0
    capsys.readouterr()
    before = out.read_bytes()
    # bad data: nothing is written
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n0,1\nnan,0\n")
    assert learn.main([str(bad), "-o", str(out), "-q"]) == 2
    assert "is missing" in capsys.readouterr().err
    assert out.read_bytes() == before
    # the save itself fails half-way: the old file survives, no temporary file is left
    from spnc.io import hdf5

    def broken(group, tree):
        group.attrs["partial"] = 1
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(hdf5, "_write_group", broken)
    assert learn.main([str(files["train"]), "-o", str(out), "--learner", "chowliu", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0]
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "model.h5"]
    assert sio.load(out).var_names == NAMES


def test_help_states_each_learners_default():
    from spnc.learn import ChowLiuTree, LearnSPN, OSLRAU, Prometheus
    defaults = {k: c().get_params() for k, c in (("learnspn", LearnSPN), ("chowliu", ChowLiuTree),
                                                  ("oslrau", OSLRAU), ("prometheus", Prometheus))}
    helps = {a.dest: a.help for a in learn._parser()._actions}
    for dest, (param, learners) in learn._OPTIONS.items():
        said = re.search(r"\(default:? ([^)]*)\)", helps[dest])
        for name in learners if said else ():
            v = defaults[name][param]
            if isinstance(v, str):
                assert v in helps[dest], (dest, name, v)
            elif v is not None:
                assert format(v, "g") in said.group(1), (dest, name, v)


@pytest.mark.parametrize("argv, line", [
    (["--splitter", "gvs"], "--splitter gvs works on discrete data, but the data is continuous; "
                            "use --splitter correlation"),
    (["--min-instances", "99999999999"], "LearnSPN: --min-instances must be an integer >= 1 or auto, got "
                                         "99999999999 (integers beyond +-2147483647 are not supported)"),
    (["--max-depth", "-1"], "LearnSPN: --max-depth must be an integer >= 0, got -1"),
    (["--learner", "prometheus", "--min-std", "nan"],
     "Prometheus: --min-std must be a finite number > 0 and <= 1e+150, got nan"),
])
def test_estimator_errors_spell_the_options(files, tmp_path, capsys, argv, line):
    assert learn.main([str(files["cont"]), "-o", str(tmp_path / "m.h5"), "-q"] + argv) == 2
    assert capsys.readouterr().err.strip() == "spnc-learn: error: " + line


def test_estimator_errors_keep_python_spelling_outside_the_tools():
    from spnc.learn import LearnSPN
    with pytest.raises(spnc.ParameterError, match=r"^splitter='gvs' works on discrete data.*"
                                                  r"use splitter='correlation' \(data_type='auto' reads X as "
                                                  r"real-valued: X\[0, 0\] = .* is not a whole number\)$"):
        LearnSPN(splitter="gvs", random_state=0).fit(np.random.default_rng(0).normal(size=(20, 3)))
    with pytest.raises(spnc.ParameterError, match=r"g_factor must be a finite number >= 0 or 'auto', got -1$"):
        LearnSPN(g_factor=-1).fit(np.zeros((4, 2)))


def test_types_as_reported_by_json_are_accepted(tmp_path, capsys):
    """spnc-learn --json reports the types as one string ('bcr'); --types refused that form
    ("unknown type 'bcr'")."""
    (tmp_path / "d.csv").write_text("a,b,c\n0,1,0.5\n1,2,1.5\n0,0,2.5\n1,2,0.25\n")
    assert learn.main([str(tmp_path / "d.csv"), "-o", str(tmp_path / "m.h5"), "--types", "brr", "--json"]) == 0
    assert '"types": "brr"' in capsys.readouterr().out
    assert learn.main([str(tmp_path / "d.csv"), "-o", str(tmp_path / "m.h5"), "--types", "br", "-q"]) == 2
    assert "--types gives 2 types for 3 columns" in capsys.readouterr().err
