"""What foreign model files keep of the variables: names, types, counts, and how each
feature token of SPFlow's text maps to a column."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import spnc
from spnc.io import importers
from spnc.io.importers import spflow_text


def test_spflow_text_refuses_two_spellings_of_one_variable():
    text = ("(0.5*((Bernoulli(V1|p=0.3) * Bernoulli(V0|p=0.6))) +\n"
            " 0.5*((Bernoulli(V01|p=0.8) * Bernoulli(V0|p=0.1))))\n")
    # SPFlow reads V1 and V01 as the same column 1; the two leaves were merged silently
    with pytest.raises(spnc.FormatError, match=r"m.spflow: line 2, character 18: feature 'V01' is variable 1, "
                                               r"and so is 'V1' \(line 1, character 18\)"):
        spflow_text.loads_text(text, "m.spflow")
    # names that are not all V<k>: every distinct token is its own variable
    named = spflow_text.loads_text("(Bernoulli(V1|p=0.3) * Bernoulli(age|p=0.6) * Bernoulli(V01|p=0.8))")
    assert named.var_names == ["V1", "age", "V01"]
    same = spflow_text.loads_text(text.replace("V01", "V1"), "m.spflow")
    assert same.n_vars == 2 and same.var_names is None


# ---------------------------------------------------------------- models for the round trips
CARD = [2, 2, 3, 0, 0, 2, 2, 3, 2]       # 7 and 8 are in no leaf
TYPE = [0, 1, 1, 2, 2, 0, 0, 1, 0]       # 1: a 2-state categorical variable, not binary
NAMES = [f"col {i}" for i in range(9)]
LEAVES = {"spflow-text": ("bernoulli", "categorical", "gaussian"),
          "spflow-json": ("bernoulli", "categorical", "gaussian", "mvgaussian", "cltree"),
          "deeprob-json": ("bernoulli", "categorical", "gaussian", "cltree"),
          "sparc-json": ("bernoulli", "categorical", "indicator"),
          "native": ("bernoulli", "categorical", "gaussian", "mvgaussian", "cltree", "indicator")}


def typed_model(kinds: tuple, combine: str = "single", names=NAMES) -> spnc.SPN:
    """Two sub-models over variables 0..6 using the given leaf kinds; variables 7 and 8
    are declared but in no leaf."""
    def part(seed: int) -> spnc.Product:
        r = np.random.default_rng(seed)
        ind = lambda v, k: spnc.Sum([spnc.Indicator(v, s) for s in range(k)], r.dirichlet(np.ones(k)))  # noqa: E731
        ch = [spnc.Bernoulli(0, r.uniform(.1, .9)) if "bernoulli" in kinds else ind(0, 2),
              spnc.Categorical(1, r.dirichlet([1, 1])),
              spnc.Categorical(2, r.dirichlet([1, 1, 1])) if "indicator" not in kinds else ind(2, 3)]
        if "mvgaussian" in kinds:
            ch.append(spnc.MultivariateGaussian([3, 4], r.normal(size=2), [[1.0, 0.2], [0.2, 2.0]]))
        elif "gaussian" in kinds:
            ch += [spnc.Gaussian(3, r.normal(), 1.1), spnc.Gaussian(4, r.normal(), 0.7)]
        else:       # sparc-pc circuits are all discrete: 3 and 4 become binary there
            ch += [spnc.Bernoulli(3, .2), spnc.Bernoulli(4, .9)]
        if "cltree" in kinds:
            ch.append(spnc.ChowLiuLeaf([5, 6], [-1, 0], [r.dirichlet([1, 1], 1), r.dirichlet([1, 1], 2)]))
        else:
            ch += [spnc.Bernoulli(5, r.uniform(.1, .9)), spnc.Bernoulli(6, r.uniform(.1, .9))]
        return spnc.Product(ch)
    card, vtype = list(CARD), list(TYPE)
    if "gaussian" not in kinds:
        card[3] = card[4] = 2
        vtype[3] = vtype[4] = 0
    roots = [part(1), part(2)]
    if combine == "single":
        roots = spnc.Sum(roots, [0.3, 0.7])
    return spnc.compile(roots, cardinality=card, var_type=vtype, var_names=names, combine=combine,
                        root_weights=[0.3, 0.7] if combine == "mixture" else None)


def rows_for(spn: spnc.SPN) -> np.ndarray:
    X = spnc.compile(spn.to_nodes() if spn.combine == "single" else spnc.Sum(spn.to_nodes(), [.5, .5]),
                     cardinality=spn.cardinality).sample(60, seed=3)
    X[np.random.default_rng(4).random(X.shape) < 0.3] = np.nan
    return X


def assert_same_variables(a: spnc.SPN, b: spnc.SPN) -> None:
    assert b.var_names == a.var_names
    assert b.cardinality.tolist() == a.cardinality.tolist()
    assert b.var_type.tolist() == a.var_type.tolist()


@pytest.mark.parametrize("fmt", ["spflow-json", "deeprob-json", "sparc-json"])
@pytest.mark.parametrize("combine", ["single", "mixture"])
def test_json_formats_keep_names_types_and_the_variable_count(fmt, combine, tmp_path, recwarn):
    spn = typed_model(LEAVES[fmt], combine)
    path = tmp_path / f"m.{fmt}"
    importers.save(spn, path, fmt)
    back = importers.load(path, fmt)
    assert not recwarn.list, [str(w.message) for w in recwarn.list]
    assert_same_variables(spn, back)
    assert {k: len(t) for k, t in back.leaf_tables.items()} == {k: len(t) for k, t in spn.leaf_tables.items()}
    X = rows_for(spn)
    np.testing.assert_allclose(back.log_likelihood(X), spn.log_likelihood(X), rtol=0, atol=1e-12)
    # a mixture of roots is written as a sum node, and read back as one (documented)
    assert back.combine == "single" and back.n_nodes == spn.n_nodes + (combine == "mixture")
    # the model without names keeps having none
    plain = importers.format_for("x", fmt).loads(importers.format_for("x", fmt).dumps(
        typed_model(LEAVES[fmt], combine, names=None)), fmt)
    assert plain.var_names is None and plain.n_vars == 9


def test_spflow_text_says_what_it_cannot_keep(tmp_path):
    spn = typed_model(LEAVES["spflow-text"])
    with pytest.warns(UserWarning) as w:
        importers.save(spn, tmp_path / "m.spflow")
    msg = " ".join(str(x.message) for x in w)
    for lost in ("variable names", "variables 7..8 are in no leaf", "2-state categorical variables (1)"):
        assert lost in msg
    gap = spnc.compile(spnc.Product([spnc.Bernoulli(0, 0.5), spnc.Bernoulli(2, 0.5)]), cardinality=[2, 3, 2])
    with pytest.warns(UserWarning, match=r"discrete variables in no leaf \(1\): read back as real"):
        importers.save(gap, tmp_path / "gap.spflow")
    gap = spnc.compile(gap.to_nodes(), cardinality=[2, 0, 2])       # a real one: nothing is lost
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importers.save(gap, tmp_path / "gap.spflow")
    back = importers.load(tmp_path / "m.spflow")
    assert back.n_vars == 7 and back.var_names is None and back.var_type[1] == 0   # as warned
    X = rows_for(spn)
    np.testing.assert_allclose(back.log_likelihood(X[:, :7]), spn.log_likelihood(X), rtol=0, atol=1e-12)


@pytest.mark.parametrize("ext", ["h5", "json"])
@pytest.mark.parametrize("combine", ["single", "mixture", "independent"])
def test_native_files_keep_everything(ext, combine, tmp_path):
    spn = typed_model(LEAVES["native"], combine)
    spn.learner = {"name": "by-hand", "version": "1", "params": {"alpha": 0.5}, "arrays": {}}
    spn.stats = {"count": np.arange(spn.n_nodes, dtype=np.float64)}
    spnc.save(spn, tmp_path / f"m.{ext}")
    back = spnc.load(tmp_path / f"m.{ext}")
    assert_same_variables(spn, back)
    assert back.combine == spn.combine and back.learner == spn.learner
    np.testing.assert_array_equal(back.stats["count"], spn.stats["count"])
    for k in ("kind", "child_ptr", "child", "weight", "roots"):
        np.testing.assert_array_equal(getattr(back, k), getattr(spn, k))
    for name, t in spn.leaf_tables.items():
        for k, a in t.to_arrays().items():
            np.testing.assert_array_equal(back.leaf_tables[name].to_arrays()[k], a)


def deeprob_doc(graph: dict | None = None) -> str:
    """A DeeProb-kit file over variables 0 and 2 (1 is in no leaf)."""
    import json
    doc = {"directed": True, "multigraph": False, "graph": graph or {},
           "nodes": [{"id": 0, "class": "Product", "scope": [0, 2]},
                     {"id": 1, "class": "Bernoulli", "scope": [0], "params": {"p": 0.3}},
                     {"id": 2, "class": "Categorical", "scope": [2],
                      "params": {"categories": [0, 1, 2], "probabilities": [0.2, 0.3, 0.5]}}],
           "links": [{"source": 1, "target": 0, "idx": 0}, {"source": 2, "target": 0, "idx": 1}]}
    return json.dumps(doc)


def test_a_variable_in_no_leaf_of_a_foreign_file_is_kept_as_real_with_a_warning():
    with pytest.warns(UserWarning, match=r"m.deeprob.json: variable 1 in no leaf: kept as real-valued"):
        spn = importers.format_for("x", "deeprob-json").loads(deeprob_doc(), "m.deeprob.json")
    assert spn.cardinality.tolist() == [2, 0, 3] and spn.var_type.tolist() == [0, 2, 1]
    X = np.array([[1.0, 7.5, 2.0], [0.0, np.nan, 0.0]])     # any value in column 1
    np.testing.assert_allclose(spn.log_likelihood(X), np.log([0.3 * 0.5, 0.7 * 0.2]))


@pytest.mark.parametrize("block, match", [
    ({"cardinality": [2, 2], "type": [0, 0]}, "declares 2 variables but a leaf uses variable 2"),
    ({"cardinality": [0, 2, 3], "type": [2, 0, 1]}, "variable 0 has cardinality 0 but discrete leaves"),
    ({"cardinality": [2, 2, 2], "type": [0, 0, 0]}, "variable 2 has cardinality 2 but a leaf needs 3"),
    ({"cardinality": [2, 2, 3], "type": [0, 2, 1]}, "variable 1: type 2 does not match"),
    ({"cardinality": [2, 2, 3], "type": [0, 0, 1], "names": ["a", "b"]}, "'names' must be a list of 3"),
    ({"cardinality": [2, 2, 3], "type": [0, 0, 1], "names": ["a", "a", "b"]}, "duplicate"),
    ({"cardinality": [2, 2, 3]}, "must hold 'cardinality', 'type'"),
    ({"cardinality": [2, -1, 3], "type": [0, 0, 1]}, r"cardinality\[1\] = -1 is outside"),
    ("all", "must be an object"),
])
def test_a_bad_variable_declaration_is_refused(block, match):
    with pytest.raises(spnc.FormatError, match=match):
        importers.format_for("x", "deeprob-json").loads(deeprob_doc({"spnc_variables": block}), "m")
    ok = {"cardinality": [2, 4, 3], "type": [0, 1, 1], "names": ["a", "b", "c"]}
    spn = importers.format_for("x", "deeprob-json").loads(deeprob_doc({"spnc_variables": ok}), "m")
    assert spn.var_names == ["a", "b", "c"] and spn.cardinality.tolist() == [2, 4, 3]
