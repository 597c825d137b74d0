"""Format 1.1 details: JSON Schema agrees with the spec, vendor leaf types with file-local
codes, fallback loading, JSON number rules."""
from __future__ import annotations

import copy
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import spnc
import spnc.io as sio
from spnc.io import jsonio
from spnc.io._hash import content_hash
from spnc.leaves.base import register_leaf
from spnc.leaves.univariate import Gaussian, GaussianLeaves

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "formats" / "examples"


@pytest.fixture(scope="module")
def validator():
    jsonschema = pytest.importorskip("jsonschema")
    return jsonschema.Draft202012Validator(json.loads((ROOT / "formats" / "spnc-model.schema.json").read_text()))


def doc() -> dict:
    return json.loads((EX / "mixed.json").read_text())


@pytest.mark.parametrize("edit, ok", [
    (lambda d: None, True),
    (lambda d: d["edges"].__setitem__("child", [0, 1, 3.0, 4, 2, 5]), True),      # 2.0 is 2 (J5)
    (lambda d: d["edges"].__setitem__("child", [0, 1, 3.5, 4, 2, 5]), False),
    (lambda d: d["leaves"].__setitem__("@x_note", "kept"), True),                  # §9
    (lambda d: d.__setitem__("learner", {"@name": "em"}), True),                    # P11
    (lambda d: d.__setitem__("learner", {"@version": "1"}), False),
    (lambda d: d.__setitem__("x_" + "a" * 126, {"dtype": "u1", "data": [1]}), True),
    (lambda d: d.__setitem__("x_" + "a" * 127, {"dtype": "u1", "data": [1]}), False),   # T7
    (lambda d: d.__setitem__("x_v", {"dtype": "u1", "data": [256]}), False),
    (lambda d: d.__setitem__("x_v", {"dtype": "i8", "data": ["9007199254740993"]}), True),
    (lambda d: d.__setitem__("x_v", {"dtype": "i8", "data": ["12"]}), False),
    (lambda d: d.__setitem__("x_v", {"dtype": "f4", "data": [1e39]}), False),
    (lambda d: d["nodes"].__setitem__("label", ["a"]), False),                      # V4 in 1.1
    (lambda d: (d.__setitem__("format_version", [1, 4, 0]), d["nodes"].__setitem__("label", ["a"]),
                d.__setitem__("notes", {"x": 1})), True),                           # newer minor
    (lambda d: d.__setitem__("format_version", [1, 0, 0]), False),                  # hash in 1.0
    (lambda d: d["roots"].__setitem__("weight", [1.0]), False),                     # G6: weight only
    (lambda d: d["roots"].__setitem__("@combine", "mixture"), False),               # ... and needed
    (lambda d: d["roots"].update({"@combine": "mixture", "weight": [1.0]}), True),  # with a mixture
    (lambda d: d["roots"].__setitem__("node", [6, 5]), False),                      # single: one root
    (lambda d: d["roots"].update({"@combine": "independent", "node": [6, 5]}), True),
    (lambda d: d.__setitem__("stats", {"count": {"dtype": "f8", "data": [2.0] * 7}}), True),   # P11
    (lambda d: d.__setitem__("stats", {"count": {"dtype": "f8", "data": [-1.0] * 7}}), False),
    (lambda d: d.__setitem__("stats", {"count": {"dtype": "i8", "data": [1] * 7}}), False),
    (lambda d: (d.__setitem__("format_version", [1, 0, 0]), d.pop("content_hash")), True),
])
def test_schema_agrees_with_spec(validator, edit, ok):
    d = doc()
    edit(d)
    assert validator.is_valid(d) == ok


def test_json_numbers(tmp_path):
    t = sio.read_validated(EX / "mixed.h5").tree
    t.attrs["x_big"] = np.array([2**63 - 1, -5], dtype=np.int64)
    t.members["x_u8"] = np.array([2**64 - 1, 3], dtype=np.uint64)
    t.attrs["content_hash"] = content_hash(t)
    text = jsonio.dumps_tree(sio.validate_tree(t).tree)
    assert '"@x_big": {"dtype": "i8", "data": ["9223372036854775807",-5]}' in text
    assert '["18446744073709551615",3]' in text
    back = sio.validate_tree(jsonio.loads_tree(text)).tree
    assert sio.trees_equal(back, sio.validate_tree(t).tree)



@pytest.mark.parametrize("old, new, where", [
    ('"smoker"', '"smo\\ud800ker"', "/variables/name[0]"),
    ('"@combine": "single"', '"@combine": "sin\\udfffgle"', "/roots@combine"),
    ('"created": "', '"created": "\\ud83d', "/@created"),
])
def test_json_strings_with_unpaired_surrogates_are_refused_by_path(tmp_path, old, new, where):
    # a JSON escape such as \ud800 is no UTF-8 text (§2); it failed later as
    # "damaged file (UnicodeEncodeError: ...)", naming no place in the file
    text = (EX / "mixed.json").read_text()
    assert old in text
    (tmp_path / "m.json").write_text(text.replace(old, new, 1))
    with pytest.raises(spnc.FormatError, match=re.escape(where) + ": string .* unpaired surrogate"):
        sio.load(tmp_path / "m.json")
    ok = jsonio.loads_tree(text.replace('"smoker"', '"\\ud83d\\ude00"', 1))     # a pair is fine
    assert ok.members["variables"].members["name"][0] == "\U0001F600"

class _XGauss(Gaussian):
    __slots__ = ()


@pytest.fixture(scope="module")
def vendor_type():
    @register_leaf
    class XTestGauss(GaussianLeaves):      # a vendor leaf type: x_<vendor>_<type>, code >= 128
        name, code, node_class = "x_test_gauss", 130, _XGauss
    return XTestGauss


def test_registry_ranges():
    with pytest.raises(ValueError, match="vendor code"):
        register_leaf(type("Bad", (GaussianLeaves,), {"name": "poisson", "code": 9, "node_class": _XGauss}))
    with pytest.raises(ValueError, match="vendor code"):
        register_leaf(type("Bad", (GaussianLeaves,), {"name": "poisson", "code": 140, "node_class": _XGauss}))


def test_vendor_codes_are_file_local(tmp_path, vendor_type):
    m = spnc.compile(spnc.Sum([_XGauss(0, 0.0, 1.0), _XGauss(0, 1.0, 2.0)], [0.3, 0.7]))
    sio.save(m, tmp_path / "v.h5")
    t = sio.read_validated(tmp_path / "v.h5").tree
    assert t.attrs["required_features"] == ["leaf:x_test_gauss"]
    kind = t.members["nodes"].members["kind"]
    kn = t.members["nodes"].attrs["kind_names"]
    assert kn[130] == "x_test_gauss"
    # another writer numbered the same type 200: read by name, not by code
    t2 = copy.deepcopy(t)
    t2.members["nodes"].members["kind"] = np.where(kind == 130, 200, kind).astype(np.uint8)
    t2.members["nodes"].attrs["kind_names"] = kn[:130] + [""] * 70 + ["x_test_gauss"]
    t2.attrs["content_hash"] = content_hash(t2)
    sio.write_tree(sio.validate_tree(t2).tree, tmp_path / "v200.h5")
    X = np.array([[0.5], [np.nan], [-1.0]])
    assert np.array_equal(sio.load(tmp_path / "v200.h5").log_likelihood(X), m.log_likelihood(X))


def test_fallback_is_used_only_by_readers_that_lack_the_type(tmp_path, vendor_type):
    """§10.2: spnc knows x_test_gauss and evaluates it; the reference reader does not and
    evaluates the fallback node instead."""
    import importlib.util
    import sys
    sys.path.insert(0, str(ROOT / "formats" / "conformance"))
    try:
        from make_suite import insert_vendor
    finally:
        sys.path.pop(0)
    from spnc.io._model import tree_from_model
    with_fb = spnc.compile(spnc.Sum([spnc.Gaussian(0, 5.0, 1.0), spnc.Gaussian(0, 1.0, 1.0)], [0.5, 0.5]))
    t = tree_from_model(with_fb)
    fb = int(t.members["leaves"].members["gaussian"].members["node"][0])
    insert_vendor(t, fb, "x_test_gauss", 130, {"mean": np.array([0.0]), "std": np.array([1.0])})
    t.attrs["required_features"], t.attrs["optional_features"] = [], ["leaf:x_test_gauss"]
    t.attrs["content_hash"] = content_hash(t)
    sio.write_tree(sio.validate_tree(t).tree, tmp_path / "fb.h5")
    X = np.array([[0.5], [np.nan], [4.0]])
    known = spnc.compile(spnc.Sum([_XGauss(0, 0.0, 1.0), spnc.Gaussian(0, 1.0, 1.0)], [0.5, 0.5]))
    with pytest.warns(UserWarning, match=r"leaves out /fallback .*spnc.save will not write them back"):
        m = sio.load(tmp_path / "fb.h5")
    assert m.n_nodes == known.n_nodes                    # the fallback-only node is dropped
    np.testing.assert_allclose(m.log_likelihood(X), known.log_likelihood(X), rtol=1e-12)
    spec = importlib.util.spec_from_file_location("rr", ROOT / "formats" / "reference_reader.py")
    rr = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rr)
    np.testing.assert_allclose(rr.Model(tmp_path / "fb.h5").log_likelihood(X),
                               with_fb.log_likelihood(X), rtol=1e-12)


def _poisson_doc(tmp_path, name: str, kind, ptr, child, weight, roots: dict) -> Path:
    """A 1.1 file over one binary variable: node 0 Cat(0.25, 0.75), node 1 an unknown
    optional leaf type whose fallback is node 0."""
    n = len(kind)
    d = {"format": "spnc-model", "format_version": [1, 1, 0], "required_features": [],
         "optional_features": ["leaf:x_acme_poisson"], "content_hash": "sha256:" + "0" * 64,
         "variables": {"type": [0], "cardinality": [2]},
         "nodes": {"@kind_names": ["sum", "product", "bernoulli", "categorical", "gaussian", "mvgaussian",
                                   "cltree", "indicator"] + [""] * 192 + ["x_acme_poisson"],
                   "kind": kind, "scope_ptr": list(range(n + 1)), "scope": [0] * n},
         "edges": {"ptr": ptr, "child": child, "weight": weight}, "roots": roots,
         "leaves": {"categorical": {"node": [0], "prob": [0.25, 0.75], "prob_ptr": [0, 2]},
                    "x_acme_poisson": {"node": {"dtype": "i8", "data": [1]},
                                       "rate": {"dtype": "f8", "data": [1.5]}}},
         "fallback": {"node": [1], "target": [0]}}
    p = tmp_path / name
    p.write_text(json.dumps(d))
    d["content_hash"] = content_hash(jsonio.read_tree(p, sio.DEFAULT_LIMITS))
    p.write_text(json.dumps(d))
    return p


def test_fallback_onto_a_sibling_or_another_root(tmp_path):
    """§10.2: a sum over an unknown node and its own fallback target, or mixture roots that
    are both, is a valid file; redirecting made the target a repeated child (or root) and
    spnc refused the file with 'child 0 is listed twice'."""
    X = np.array([[0.0], [1.0], [np.nan]])
    want = np.log([0.25, 0.75, 1.0])
    p = _poisson_doc(tmp_path, "sum.json", [3, 200, 0], [0, 0, 0, 2], [1, 0], [0.4, 0.6],
                     {"@combine": "single", "node": [2]})
    with pytest.warns(UserWarning, match=r"leaves out leaf type 'x_acme_poisson' \(its nodes are replaced"):
        m = sio.load(p)
    assert m.n_nodes == 2 and m.weight.tolist() == [1.0]
    np.testing.assert_allclose(m.log_likelihood(X), want, rtol=1e-15)
    p = _poisson_doc(tmp_path, "mix.json", [3, 200], [0, 0, 0], [], [],
                     {"@combine": "mixture", "node": [1, 0], "weight": [0.4, 0.6]})
    with pytest.warns(UserWarning, match="x_acme_poisson"):
        m = sio.load(p)
    assert m.n_nodes == 1 and m.root_weights.tolist() == [1.0]
    np.testing.assert_allclose(m.log_likelihood(X), want, rtol=1e-15)
    p = _poisson_doc(tmp_path, "indep.json", [3, 200], [0, 0, 0], [], [],
                     {"@combine": "independent", "node": [1, 0]})
    with pytest.raises(spnc.FormatError, match="two roots fall back to node 0"):
        sio.load(p)


def test_load_warns_about_the_extensions_a_save_drops(tmp_path):
    """spnc.load keeps no x_* extension (§9) but spnc's own learner report: it says which
    ones, so a load and save that loses them is no surprise; a plain file loads silently."""
    t = sio.read_validated(EX / "mixed.h5").tree
    t.attrs["x_acme_note"] = "hi"
    t.members["x_acme"] = sio.Group({"x_v": "1"}, {"d": np.array([1, 2], dtype=np.uint8)})
    t.members["leaves"].attrs["x_note"] = "a"
    t.members["nodes"].attrs["x_n"] = "b"
    t.members["learner"] = sio.Group({"name": "me", "x_by": "acme"}, {"x_kept": np.array([1.0])})
    t.attrs["content_hash"] = content_hash(t)
    sio.write_tree(sio.validate_tree(t).tree, tmp_path / "ext.h5")
    with pytest.warns(UserWarning) as got:
        m = sio.load(tmp_path / "ext.h5")
    assert len(got) == 1 and str(got[0].message) == (
        f"{tmp_path / 'ext.h5'}: the loaded model leaves out /@x_acme_note, /nodes@x_n, /leaves@x_note, "
        "/learner@x_by, /x_acme; spnc.save will not write them back (spnc-convert keeps them)")
    assert got[0].filename == __file__
    sio.save(m, tmp_path / "again.json")
    back = sio.read_validated(tmp_path / "again.json").tree
    assert "x_acme" not in back.members and "x_acme_note" not in back.attrs
    assert "x_kept" in back.members["learner"].members
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sio.load(EX / "mixed.h5")
        sio.load(tmp_path / "again.json")


def test_tools_that_write_a_loaded_model_warn_about_what_it_leaves_out(tmp_path, capsys):
    # spnc-merge and spnc-compose write models they loaded: they say what the output lacks;
    # spnc-eval, which writes no model, stays silent
    from spnc.cli import compose, evaluate, merge
    t = sio.read_validated(EX / "mixed.h5").tree
    t.members["x_acme"] = sio.Group({}, {"d": np.array([1, 2], dtype=np.uint8)})
    t.attrs["content_hash"] = content_hash(t)
    sio.write_tree(sio.validate_tree(t).tree, tmp_path / "ext.h5")
    m = sio.load(EX / "mixed.h5")
    X = m.sample(300, seed=1)
    np.savetxt(tmp_path / "d.csv", X, delimiter=",")
    want = f"{tmp_path / 'ext.h5'}: the loaded model leaves out /x_acme; {{}} will not write them back"
    assert compose.main(["mix", str(tmp_path / "ext.h5"), str(EX / "mixed.h5"), "-o", str(tmp_path / "c.h5"),
                         "--weights", "0.5,0.5"]) == 0
    assert "spnc-compose: warning: " + want.format("spnc-compose") in capsys.readouterr().err
    assert merge.main([str(tmp_path / "ext.h5"), str(tmp_path / "d.csv"), "-o", str(tmp_path / "g.h5"),
                       "--by-position"]) == 0
    assert "spnc-merge: warning: " + want.format("spnc-merge") in capsys.readouterr().err
    assert evaluate.main([str(tmp_path / "ext.h5"), str(tmp_path / "d.csv"), "--by-position"]) == 0
    assert "leaves out" not in capsys.readouterr().err
