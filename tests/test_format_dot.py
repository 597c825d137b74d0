"""DOT drawings: shared nodes once, weights on sum edges, caps, quoting, rendering."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import spnc
import spnc.io as sio

EX = Path(__file__).resolve().parents[1] / "formats" / "examples"


def test_dag_nodes_drawn_once_with_weights():
    m = sio.load(EX / "dag_categorical.h5")
    text = sio.to_dot(m)
    ids = re.findall(r"^  n(\d+) \[", text, flags=re.M)
    assert sorted(map(int, ids)) == list(range(m.n_nodes))          # each node exactly once
    edges = re.findall(r"^  n(\d+) -> n(\d+)", text, flags=re.M)
    assert len(edges) == m.n_edges
    indeg = np.bincount([int(c) for _, c in edges], minlength=m.n_nodes)
    assert indeg.max() >= 2                                          # a shared child
    for n in np.flatnonzero(np.asarray(m.kind) == 0):
        for e in range(m.child_ptr[n], m.child_ptr[n + 1]):
            w = float(m.weight[e])
            assert f'n{n} -> n{m.child[e]} [label="{w:.3g}", spnc_w="{w!r}"]' in text
    assert 'label="Cat(X2)\\nprob=[0.1 0.6 0.3]"' in text
    assert text == sio.to_dot(m)                                     # deterministic


def test_caps_and_markers():
    rng = np.random.default_rng(0)
    leaves = [spnc.Bernoulli(0, float(p)) for p in rng.uniform(0.1, 0.9, 50)]
    m = spnc.compile(spnc.Sum(leaves, rng.dirichlet(np.ones(50))))
    text = sio.to_dot(m, max_nodes=10)
    assert len(re.findall(r"^  n\d+ \[", text, flags=re.M)) == 10
    assert "… 41 more" in text and "// showing 10 of 51 nodes" in text
    text = sio.to_dot(sio.load(EX / "mixed.h5"), max_depth=1)
    assert "Bern" not in text and "… 2 more" in text


def test_quoting_and_counts():
    root = spnc.Product([spnc.Bernoulli(0, 0.5), spnc.Gaussian(1, 0.0, 2.0)])
    m = spnc.compile(root, var_names=['a "quoted" \\ name', "node"])
    text = sio.to_dot(m, title='t"1')
    assert 'Bern(a \\"quoted\\" \\\\ name)' in text and 'label="t\\"1"' in text
    m2 = sio.load(EX / "learner_stats.h5")
    assert "\\nn=9.1" in sio.to_dot(m2, show_counts=True)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
@pytest.mark.parametrize("name", sorted(p.stem for p in EX.glob("*.h5")))
def test_graphviz_accepts_output(tmp_path, name):
    text = sio.to_dot(sio.load(EX / f"{name}.h5"), show_counts=True)
    res = subprocess.run(["dot", "-Tcanon"], input=text.encode(), capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    sio.render(text, tmp_path / "m.svg")
    assert "<svg" in (tmp_path / "m.svg").read_text()


def test_several_roots_hang_from_a_node_that_says_how_they_combine():
    from spnc import Bernoulli, Sum
    leaves = spnc.compile(Sum([Bernoulli(0, .3), Bernoulli(0, .8)], [.5, .5])).leaf_tables

    def drawn(combine, w):
        m = spnc.SPN.from_arrays(np.array([2, 2], np.uint8), np.zeros(3, np.int64), np.zeros(0, np.int32),
                                 np.zeros(0), leaves, [2], roots=[0, 1], root_weights=w, combine=combine)
        return sio.to_dot(m)
    a, b, c = drawn("mixture", [.25, .75]), drawn("mixture", [.9, .1]), drawn("independent", None)
    assert len({a, b, c}) == 3
    assert 'roots -> n1 [label="0.75", spnc_w="0.75"];' in a and 'spnc_kind="roots_mixture"' in a
    assert 'spnc_kind="roots_independent"' in c and "roots -> n0;" in c
