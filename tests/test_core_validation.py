"""Invalid structures and bad data raise clear exceptions naming the problem."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import spnc
from spnc import Bernoulli, Categorical, Gaussian, Product, Sum
from spnc.leaves.univariate import BernoulliLeaves


def _simple():
    return spnc.compile(Sum([Product([Bernoulli(0, .3), Bernoulli(1, .6)]),
                             Product([Bernoulli(0, .8), Bernoulli(1, .1)])], [.4, .6]))


@pytest.mark.parametrize("root, match", [
    (Product([Bernoulli(0, .5), Bernoulli(0, .4)]), "share variable 0"),
    (Sum([Bernoulli(0, .5), Bernoulli(1, .4)]), "not complete"),
    (Sum([Bernoulli(0, .5), Bernoulli(0, .4)], [0.5, -0.1]), "non-negative"),
    (Sum([Bernoulli(0, .5), Bernoulli(0, .4)], [0.0, 0.0]), "cannot normalise"),
    (Sum([Bernoulli(0, .5), Bernoulli(0, .4)], [0.5, np.nan]), "finite"),
    (Sum([], []), "no children"),
    (Product([]), "no children"),
    (Bernoulli(0, 1.5), r"p = 1.5 is outside \[0, 1\]"),
    (Categorical(0, [0.5, 0.6]), "add up to"),
    (Gaussian(0, 0.0, 0.0), "std = 0.0"),
    (Sum([Bernoulli(0, .5), Gaussian(0, 0, 1)]), "discrete and real"),
    (spnc.MultivariateGaussian([0, 1], [0, 0], [[1, 2], [2, 1]]), "positive definite"),
    (spnc.MultivariateGaussian([0, 1], [0, 0], [[1, 0.5], [0.4, 1]]), "symmetric"),
])
def test_invalid_structures_raise_value_errors(root, match):
    with pytest.raises(ValueError, match=match):
        spnc.compile(root)


def test_duplicate_child_and_cycles():
    b = Bernoulli(0, .5)
    with pytest.raises(spnc.StructureError, match="listed twice"):
        spnc.compile(Sum([b, b], [.5, .5]))
    s = Sum([Bernoulli(0, .5)])
    s.children.append(s)
    with pytest.raises(spnc.StructureError, match="cycle"):
        spnc.compile(s)
    with pytest.raises(spnc.StructureError, match="spnc node"):
        spnc.compile(Sum([Bernoulli(0, .5), "x"]))


def _arrays(spn):
    return dict(kind=spn.kind.copy(), child_ptr=spn.child_ptr.copy(), child=spn.child.copy(),
                weight=spn.weight.copy(), cardinality=spn.cardinality.copy())


def _tables(spn):
    t = spn.leaf_tables["bernoulli"]
    return {"bernoulli": BernoulliLeaves(t.node.copy(), [s.copy() for s in t.scopes], {"p": t.params["p"].copy()})}


@pytest.mark.parametrize("edit, match", [
    (lambda a: a["child"].__setitem__(0, 6), "children must precede"),
    (lambda a: a["child"].__setitem__(0, -1), "negative"),
    (lambda a: a["kind"].__setitem__(2, 99), "unknown kind code 99"),
    (lambda a: a["weight"].__setitem__(-1, 0.7), "add up to"),
    (lambda a: a["weight"].__setitem__(0, 0.5), "product edge weight"),
    (lambda a: a["child_ptr"].__setitem__(3, 5), "decreases|start at 0|leaf cannot"),
    (lambda a: a.__setitem__("child_ptr", a["child_ptr"][:-1]), "length"),
    (lambda a: a["kind"].__setitem__(0, 0), "missing from its leaf table|needs children"),
])
def test_from_arrays_rejects_broken_arrays(edit, match):
    spn = _simple()
    a = _arrays(spn)
    edit(a)
    with pytest.raises(spnc.StructureError, match=match):
        spnc.SPN.from_arrays(leaf_tables=_tables(spn), **a)


def test_from_arrays_roundtrip_and_stored_scope_check():
    spn = _simple()
    again = spnc.SPN.from_arrays(leaf_tables=_tables(spn), scope_ptr=spn.scope_ptr, scope=spn.scope, **_arrays(spn))
    X = np.array([[0, 1], [1, np.nan]], float)
    np.testing.assert_array_equal(again.log_likelihood(X), spn.log_likelihood(X))
    bad = spn.scope.copy()
    bad[0] = 1
    with pytest.raises(spnc.ScopeError, match="stored scope"):
        spnc.SPN.from_arrays(leaf_tables=_tables(spn), scope_ptr=spn.scope_ptr, scope=bad, **_arrays(spn))


def test_unreachable_nodes_are_rejected():
    spn = _simple()
    a = _arrays(spn)
    with pytest.raises(spnc.StructureError, match="not reachable"):
        spnc.SPN.from_arrays(leaf_tables=_tables(spn), roots=[2], **a)


@pytest.mark.parametrize("X, match", [
    (np.zeros((3, 3)), "3 columns, the model has 2"),
    (np.zeros(2), "1-D"),
    (np.zeros((2, 2, 1)), "2-D"),
    (np.array([[0.0, np.inf]]), r"X\[0, 1\] = inf"),
    (np.array([[0.0, 1.0], [2.0, 0.0]]), r"X\[1, 0\] = 2.0 is not a state 0..1"),
    (np.array([[0.0, 0.5]]), r"X\[0, 1\] = 0.5"),
    (np.array([[0.0, -1.0]]), r"X\[0, 1\] = -1.0"),
    ([["a", "b"]], "numeric"),
    (np.array([[0.0, 1 + 2j]]), "complex"),
    ([[0.0, 1 + 2j]], "complex"),
])
def test_bad_data_raises_data_error(X, match):
    spn = _simple()
    with pytest.raises(spnc.DataError, match=match):
        spn.log_likelihood(X)


def test_bad_call_arguments():
    spn = _simple()
    with pytest.raises(spnc.ParameterError, match="n >= 0") as e:       # a ValueError too
        spn.sample(-1)
    assert e.value.param == "n"
    with pytest.raises(spnc.ParameterError, match="whole number"):
        spn.sample(2.5)
    with pytest.raises(spnc.ParameterError, match="seed"):
        spn.sample(3, seed=-1)
    with pytest.raises(spnc.ParameterError, match="mode"):
        spn.node_log_values(np.zeros((1, 2)), mode=7)
    with pytest.raises(spnc.ParameterError, match="n_threads"):
        spn.log_likelihood(np.zeros((1, 2)), n_threads=0)
    with pytest.raises(spnc.DataError, match="sample_weight"):
        spn.backward(np.zeros((2, 2)), sample_weight=[1.0, -1.0])
    with pytest.raises(ValueError, match="non-negative integer"):
        Bernoulli(-1, 0.5)
    assert spn.sample(0, seed=1).shape == (0, 2)
    assert spn.log_likelihood(np.zeros((0, 2))).shape == (0,)


def test_vocabulary_mirror_and_thread_policy(monkeypatch):
    """spnc/_kinds.py mirrors spnc/_kinds.pxd; the thread policy honours OMP_NUM_THREADS
    and importing spnc changes no environment variable."""
    import pathlib
    import re
    import subprocess
    import sys

    from spnc import _kinds
    from spnc._threads import SERIAL_WORK, effective_n_threads
    pxd = (pathlib.Path(spnc.__file__).parent / "_kinds.pxd").read_text()
    for name, value in re.findall(r"^\s+([A-Z]+) = (\d+)", pxd, flags=re.M):
        assert getattr(_kinds, name) == int(value), name
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert effective_n_threads(-1) == 3 and effective_n_threads(-2) == 2
    assert effective_n_threads(None, SERIAL_WORK - 1) == 1
    assert effective_n_threads(None, 10**12) == 3
    assert effective_n_threads(2) == 2
    code = "import os; before = dict(os.environ); import spnc; print(dict(os.environ) == before)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


@pytest.mark.parametrize("layout", ["C", "F", "reversed", "every_other_column", "unaligned"])
def test_first_bad_value_finds_the_first_bad_cell_in_any_layout(layout):
    from spnc import _data
    rng = np.random.default_rng(7)
    card = np.array([2, 3, 0, 5, 2, 0, 4, 2], dtype=np.int32)
    for trial in range(30):
        n = int(rng.integers(1, 300))
        base = np.where(card > 0, rng.integers(0, 99, (n, len(card))) % np.maximum(card, 1), rng.normal(size=(n, len(card))))
        base[rng.random(base.shape) < 0.3] = np.nan
        bad = {0: 2.5, 1: -1.0, 2: np.inf, 3: 5.0, 4: -np.inf}
        for _ in range(int(rng.integers(0, 3))):
            r, c = int(rng.integers(n)), int(rng.integers(len(card)))
            base[r, c] = bad[int(rng.integers(5))]
        X = {"C": base, "F": np.asfortranarray(base), "reversed": base[::-1],
             "every_other_column": np.repeat(base, 2, axis=1)[:, ::2]}.get(layout)
        if layout == "unaligned":
            buf = np.zeros(base.size * 8 + 1, dtype=np.uint8)
            X = buf[1:].view(np.float64).reshape(base.shape)
            X[:] = base
        k = card.astype(float)
        flat = (np.isinf(X) | ((k > 0) & ~np.isnan(X) & ((X < 0) | (X >= k) | (X != np.floor(X)))))
        want = (-1, -1, 0)
        if flat.any():
            r, c = np.argwhere(flat)[0]
            want = (r, c, 1 if np.isinf(X[r, c]) else 2)
        assert tuple(_data.first_bad_value(X, card)) == want


def test_importing_an_unbuilt_source_tree_says_so(tmp_path):
    """`import spnc` from a checkout that was installed with `pip install .` (not built in
    place) picks up the source tree in the current directory; it must say that, not fail
    with a circular-import error deep in the package. (-S: no site packages, so no editable
    install's finder maps `spnc` elsewhere.)"""
    import shutil
    import subprocess
    import sys
    (tmp_path / "spnc").mkdir()
    shutil.copy(Path(spnc.__file__), tmp_path / "spnc" / "__init__.py")
    r = subprocess.run([sys.executable, "-S", "-c", "import spnc"], cwd=tmp_path, capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, timeout=60)
    assert r.returncode != 0
    assert "compiled extensions are missing" in r.stderr and "pip install -e ." in r.stderr


def test_a_leaf_listed_twice_in_one_table_is_refused():
    from spnc.leaves.univariate import BernoulliLeaves
    t = BernoulliLeaves(np.array([0, 0]), [np.array([0]), np.array([0])], {"p": np.array([0.5, 0.5])})
    with pytest.raises(spnc.StructureError, match="node 0 is listed twice"):
        spnc.SPN.from_arrays(np.array([2, 2, 0], np.uint8), np.array([0, 0, 0, 2]), np.array([0, 1]),
                             np.array([0.5, 0.5]), {"bernoulli": t}, np.array([2]))
