"""Data input without silent mistakes: commented CSV headers, learners' X_valid
messages, out-of-range long doubles, streamed DataFrame blocks, polars frames."""
from __future__ import annotations

import json

import numpy as np
import pytest

import spnc.io as sio
from spnc.cli import evaluate, learn

NAMES = ["a", "b", "c"]


def _err(capsys, prog: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{prog}: error: ") and "\n" not in err, err
    return err


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    """A model over named binary variables a, b, c (dependent columns) and its data."""
    d = tmp_path_factory.mktemp("comments")
    rng = np.random.default_rng(0)
    X = (rng.random((300, 3)) < [.1, .5, .9]).astype(int)
    X[:, 1] = np.where(rng.random(300) < .8, X[:, 0], X[:, 1])
    train = d / "train.csv"
    np.savetxt(train, X, fmt="%d", delimiter=",", header="a,b,c", comments="")
    m = d / "m.h5"
    assert learn.main([str(train), "-o", str(m), "--learner", "chowliu", "-q"]) == 0
    return {"X": X, "model": m, "ll": float(sio.load(m).log_likelihood(X).mean())}


def _mean(capsys, argv) -> float:
    capsys.readouterr()
    assert evaluate.main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)["log_likelihood"][0]["mean"]


@pytest.mark.parametrize("delimiter", [",", " ", "\t"])
def test_commented_header_of_savetxt_is_the_header(named, tmp_path, capsys, delimiter):
    f = tmp_path / "f.txt"
    np.savetxt(f, named["X"][:, [2, 0, 1]], fmt="%d", delimiter=delimiter,
               header=delimiter.join("cab"))
    opt = ["--delimiter", {",": ",", " ": "space", "\t": "tab"}[delimiter]]
    assert _mean(capsys, [str(named["model"]), str(f)] + opt) == pytest.approx(named["ll"], abs=1e-12)


def test_commented_header_when_learning(tmp_path, capsys):
    X = np.random.default_rng(1).integers(0, 2, (100, 3))
    f = tmp_path / "t.csv"
    np.savetxt(f, X, fmt="%d", delimiter=",", header="x,y,z")
    assert learn.main([str(f), "-o", str(tmp_path / "m.h5"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["data"]["rows"] == 100
    assert sio.load(tmp_path / "m.h5").var_names == ["x", "y", "z"]
    # no model confirms the names: the tool says it took the comment as the header
    assert "spnc-learn: warning:" in err and "the comment on line 1 is taken as the header" in err
    assert "'x', 'y', 'z'" in err and "--no-header" in err


def test_other_comments_stay_comments(named, tmp_path, capsys):
    X, m = named["X"], str(named["model"])
    body = "\n".join(",".join(map(str, r)) for r in X)
    f = tmp_path / "c.csv"
    f.write_text("# made by hand, on a Tuesday\n" + body + "\n")     # two cells, three columns
    assert _mean(capsys, [m, str(f)]) == pytest.approx(named["ll"], abs=1e-12)
    f.write_text("# c,a,b\na,b,c\n" + body + "\n")                    # a real header follows
    assert _mean(capsys, [m, str(f)]) == pytest.approx(named["ll"], abs=1e-12)
    f.write_text("# a,b,c\n" + body + "\n")
    assert _mean(capsys, [m, str(f), "--no-header"]) == pytest.approx(named["ll"], abs=1e-12)


def test_commented_header_of_other_names_is_an_error(named, tmp_path, capsys):
    f = tmp_path / "o.csv"
    np.savetxt(f, named["X"], fmt="%d", delimiter=",", header="p,q,r")
    assert evaluate.main([str(named["model"]), str(f)]) == 2
    line = _err(capsys, "spnc-eval")
    assert "missing 'a', 'b', 'c'; unknown 'p', 'q', 'r'" in line and "--by-position" in line
    assert _mean(capsys, [str(named["model"]), str(f), "--by-position"]) == pytest.approx(named["ll"], abs=1e-12)


# ------------------------------------------------------------------ X_valid DataFrames
def _learners():
    from spnc.learn import EM, BaggedSPN, ChowLiuTree, LearnSPN, Merge, Prometheus, TreeSPN
    X = (np.random.default_rng(0).random((200, 3)) < .5).astype(int)
    init = ChowLiuTree().fit(X).spn_
    return {"learnspn": lambda: LearnSPN(refine="em"),
            "learnspn-auto": lambda: LearnSPN(refine="em", min_instances="auto"),
            "prometheus": lambda: Prometheus(),
            "em": lambda: EM(init=init, max_iter=2),
            "merge": lambda: Merge(init=init, epsilon=[.1, .2]),
            "treespn": lambda: TreeSPN(),
            "bagged-valid": lambda: BaggedSPN(LearnSPN(), n_bags=2, weights="valid", n_jobs=1),
            "bagged-merge": lambda: BaggedSPN(LearnSPN(), n_bags=2, merge=Merge(epsilon=[.1, .2]), n_jobs=1)}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("learner", list(_learners()))
def test_x_valid_frame_errors_name_the_frames_cell(learner):
    pd = pytest.importorskip("pandas")
    from spnc.errors import DataError
    rng = np.random.default_rng(0)
    df = pd.DataFrame((rng.random((200, 3)) < .5).astype(int), columns=NAMES)
    bad = df[list("cab")].copy()
    bad.iloc[1, 0] = 5
    with pytest.raises(DataError, match=r"X_valid\[1, 0\] = 5\.0 is not a state 0\.\.1 of discrete "
                                        r"variable 2 \('c'\)"):
        _learners()[learner]().fit(df, X_valid=bad)


# ------------------------------------------------------------------ long doubles
@pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max,
                    reason="np.longdouble is float64 on this platform")
def test_longdouble_beyond_float64_is_named_not_infinite():
    import warnings

    import spnc
    from spnc import Gaussian, Product
    from spnc.errors import DataError
    m = spnc.compile(Product([Gaussian(0, 0, 1), Gaussian(1, 0, 1)]))
    X = np.array([[1, 1], [0, -1]], dtype=np.longdouble)
    X[1, 1] = np.longdouble("-1e400")
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # no RuntimeWarning of the cast
        with pytest.raises(DataError, match=r"X\[1, 1\] = -1e\+400 is beyond the range of float64"):
            m.log_likelihood(X)
    assert np.isfinite(m.log_likelihood(np.array([[1, 2]], dtype=np.longdouble))).all()


# ------------------------------------------------------------------ streamed X_valid frames
@pytest.mark.parametrize("learner", ["em", "learnspn"])
def test_streamed_x_valid_frames_for_an_unnamed_model_warn_once(learner):
    import warnings

    pd = pytest.importorskip("pandas")
    from spnc.learn import EM, ChowLiuTree, LearnSPN
    X = (np.random.default_rng(0).random((100, 3)) < .5).astype(int)
    f = pd.DataFrame(X, columns=NAMES)
    make = {"em": lambda: EM(init=ChowLiuTree().fit(X).spn_, max_iter=2),
            "learnspn": lambda: LearnSPN(refine="em")}[learner]
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        make().fit(X, X_valid=[f[:30], f[30:60], f[60:]])
    msgs = [str(w.message) for w in got if "has feature names" in str(w.message)]
    assert msgs == ["X_valid has feature names, but this SPN has no variable names (var_names): its "
                    "DataFrame columns are taken by position"]
    with warnings.catch_warnings():                 # a named model: matched by name, no warning
        warnings.simplefilter("error")
        shuffled = [b[list("cab")] for b in (f[:50], f[50:])]
        a = make().fit(f, X_valid=shuffled).spn_
        b = make().fit(f, X_valid=[f[:50], f[50:]]).spn_
    assert np.array_equal(a.log_likelihood(X), b.log_likelihood(X))


# ------------------------------------------------------------------ polars
def test_polars_frames_are_refused_with_how_to_convert():
    pl = pytest.importorskip("polars")
    import spnc
    from spnc.errors import DataError
    from spnc.learn import EM, LearnSPN
    X = (np.random.default_rng(0).random((100, 3)) < .5).astype(int)
    p = pl.DataFrame(X, schema=NAMES)
    m = LearnSPN().fit(X).spn_
    calls = {"query": lambda: m.log_likelihood(p), "fit": lambda: LearnSPN().fit(p),
             "stream": lambda: spnc.stream.log_likelihood(m, p),
             "blocks": lambda: EM(init=m, max_iter=2).fit(X, X_valid=[p[:50], p[50:]])}
    for call in calls.values():
        with pytest.raises(DataError, match=r"is a polars DataFrame; .*df\.to_pandas\(\).*df\.to_numpy\(\)"):
            call()
    with pytest.raises(DataError, match=r"polars LazyFrame; .*df\.collect\(\)\.to_pandas\(\)"):
        m.log_likelihood(p.lazy())
