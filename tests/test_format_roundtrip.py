"""Round trips model -> HDF5 -> JSON -> HDF5 -> model for every leaf type, DAG sharing,
ensembles and learner statistics; JSON files validate against the JSON Schema."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import spnc
import spnc.io as sio
from spnc.errors import FormatError
from spnc.io import hdf5 as h5io, jsonio
from spnc.io._hash import content_hash
from spnc.leaves.cltree import ChowLiuLeaf

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "formats" / "spnc-model.schema.json").read_text())


def schema_validate(path: str | os.PathLike) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(Path(path).read_text()))


# ---------------------------------------------------------------- models
def m_mixed():
    b0, g0 = spnc.Bernoulli(0, 0.2), spnc.Gaussian(1, 0.0, 1.0)
    b1, g1 = spnc.Bernoulli(0, 0.9), spnc.Gaussian(1, 1.0, 1.0)
    root = spnc.Sum([spnc.Product([b0, g0]), spnc.Product([b1, g1])], [0.3, 0.7])
    return spnc.compile(root, var_names=["smoker", "Gewicht (kg) — μ"])


def m_dag():
    """Categorical + indicator leaves; a product and a leaf shared by two parents."""
    c2 = spnc.Categorical(2, [0.1, 0.6, 0.3])
    shared = spnc.Product([spnc.Categorical(1, [0.25, 0.75]), c2])
    ind = [spnc.Indicator(0, v) for v in range(3)]
    s0 = spnc.Sum(ind, [1 / 3, 0.5, 1 - 1 / 3 - 0.5])
    p1 = spnc.Product([s0, shared])
    p2 = spnc.Product([ind[1], spnc.Sum([shared, spnc.Product([spnc.Categorical(1, [0.5, 0.5]), c2])],
                                        [0.123456789012345, 1 - 0.123456789012345])])
    return spnc.compile(spnc.Sum([p1, p2], [0.1, 0.9]), cardinality=[3, 2, 3])


def m_mvn():
    a = spnc.MultivariateGaussian([0, 2], [0.5, -1.0], [[2.0, 0.3], [0.3, 1.0]])
    b = spnc.MultivariateGaussian([0, 2], [1.5, 0.25], [[1.0, -0.2], [-0.2, 0.5]])
    g = spnc.Gaussian(1, 3.0, 0.1)
    return spnc.compile(spnc.Product([spnc.Sum([a, b], [0.4, 0.6]), g]))


def m_cltree():
    leaf = ChowLiuLeaf([0, 1, 3], [-1, 0, 0],
                       [[[0.4, 0.6]], [[0.9, 0.1], [0.2, 0.8]], [[0.3, 0.3, 0.4], [0.1, 0.1, 0.8]]])
    other = ChowLiuLeaf([0, 1, 3], [1, -1, 1],
                        [[[0.5, 0.5], [0.7, 0.3]], [[0.2, 0.8]], [[0.6, 0.2, 0.2], [0.3, 0.3, 0.4]]])
    s = spnc.Sum([leaf, other], [0.7, 0.3])
    return spnc.compile(spnc.Product([s, spnc.Bernoulli(2, 0.3)]), cardinality=[2, 2, 2, 3])


def _members():
    shared = spnc.Product([spnc.Bernoulli(0, 0.3), spnc.Bernoulli(1, 0.6)])
    r1 = spnc.Sum([shared, spnc.Product([spnc.Bernoulli(0, 0.8), spnc.Bernoulli(1, 0.1)])], [0.5, 0.5])
    r2 = spnc.Sum([shared, spnc.Product([spnc.Bernoulli(0, 0.05), spnc.Bernoulli(1, 0.95)])], [0.2, 0.8])
    return r1, r2


def m_mixture():
    return spnc.compile(list(_members()), combine="mixture", root_weights=[0.25, 0.75])


def m_independent():
    return spnc.compile(list(_members()), combine="independent")


def m_learner():
    m = m_mixed()
    st = m._state()
    st["stats"] = {"count": np.arange(m.n_nodes, dtype=np.float64) * 1.5 + 0.1,
                   "merges": np.arange(m.n_nodes, dtype=np.int32)}
    st["learner"] = {"name": "oslrau", "version": "1.2",
                     "params": {"batchsize": 100, "corrthresh": 0.1, "mvmaxscope": 4},
                     "arrays": {"mean": np.array([0.1, 1 / 3]), "n_seen": np.array([12], dtype=np.int64)},
                     # what learners report besides their parameters (BaggedSPN, Merge, LearnSPN)
                     "n_train": 12, "fit_seconds": 0.25, "epsilon": None,
                     "bag_params": [{"max_depth": 4}, {}], "params_after": [3, 1e-300]}
    return spnc.SPN.from_arrays(leaf_tables=m.leaf_tables, **st)


MODELS = {"mixed": m_mixed, "dag": m_dag, "mvn": m_mvn, "cltree": m_cltree,
          "mixture": m_mixture, "independent": m_independent, "learner": m_learner}


def rand_data(m, n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = np.empty((n, m.n_vars))
    for v, k in enumerate(m.cardinality):
        X[:, v] = rng.integers(0, k, n) if k else rng.normal(0.5, 1.5, n)
    X[rng.random(X.shape) < 0.2] = np.nan
    return X


def assert_same_model(a, b):
    for k in ("kind", "child_ptr", "child", "weight", "scope_ptr", "scope", "cardinality",
              "var_type", "roots"):
        x, y = np.asarray(getattr(a, k)), np.asarray(getattr(b, k))
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), k
    assert a.var_names == b.var_names and a.combine == b.combine
    assert (a.root_weights is None) == (b.root_weights is None)
    if a.root_weights is not None:
        assert np.asarray(a.root_weights).tobytes() == np.asarray(b.root_weights).tobytes()
    ta = {k: t for k, t in a.leaf_tables.items() if len(t)}
    tb = {k: t for k, t in b.leaf_tables.items() if len(t)}
    assert set(ta) == set(tb)
    for k in ta:
        assert ta[k].node.tobytes() == tb[k].node.tobytes()
        pa, pb = ta[k].to_arrays(), tb[k].to_arrays()
        assert set(pa) == set(pb)
        for p in pa:
            assert pa[p].dtype == pb[p].dtype and pa[p].tobytes() == pb[p].tobytes(), (k, p)
    assert set(a.stats) == set(b.stats)
    for k in a.stats:
        assert a.stats[k].dtype == b.stats[k].dtype and a.stats[k].tobytes() == b.stats[k].tobytes()
    la, lb = a.learner or {}, b.learner or {}
    assert {k: v for k, v in la.items() if k != "arrays"} == {k: v for k, v in lb.items() if k != "arrays"}
    for k, v in (la.get("arrays") or {}).items():
        w = lb["arrays"][k]
        assert v.dtype == w.dtype and v.tobytes() == w.tobytes()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_round_trip_exact(tmp_path, name):
    m = MODELS[name]()
    h1, j1, h2 = tmp_path / "a.h5", tmp_path / "a.json", tmp_path / "b.hdf5"
    sio.save(m, h1)
    v1 = sio.read_validated(h1)
    jsonio.write_tree(v1.tree, j1)          # h5 -> json (as spnc-convert does)
    schema_validate(j1)
    v2 = sio.read_validated(j1)
    assert sio.trees_equal(v1.tree, v2.tree)
    sio.write_tree(v2.tree, h2)             # json -> h5
    v3 = sio.read_validated(h2)
    assert sio.trees_equal(v1.tree, v3.tree)
    assert jsonio.dumps_tree(v3.tree) == j1.read_text()
    back = sio.load(h2)
    assert_same_model(m, back)
    X = rand_data(m)
    a, b = m.log_likelihood(X), back.log_likelihood(X)
    assert a.tobytes() == b.tobytes()       # bit-identical
    # direct JSON save too
    sio.save(m, tmp_path / "c.json")
    schema_validate(tmp_path / "c.json")
    assert m.log_likelihood(X).tobytes() == sio.load(tmp_path / "c.json").log_likelihood(X).tobytes()


def test_float_bits_survive_json(tmp_path):
    m = m_dag()
    st = m._state()
    w = np.asarray(st["weight"]).copy()
    tricky = np.array([5e-324, 2.2250738585072014e-308, 0.1, 1 / 3, np.nextafter(0.5, 1)])
    st["stats"] = {"x": tricky, "f4": np.array([0.1, 1e-30, 3.4e38], dtype=np.float32),
                   "u8": np.array([0, 2**64 - 1], dtype=np.uint64),
                   "i1": np.array([-128, 127], dtype=np.int8)}
    st["weight"] = w
    m2 = spnc.SPN.from_arrays(leaf_tables=m.leaf_tables, **st)
    sio.save(m2, tmp_path / "t.json")
    schema_validate(tmp_path / "t.json")
    back = sio.load(tmp_path / "t.json")
    for k, v in m2.stats.items():
        assert back.stats[k].dtype == v.dtype and back.stats[k].tobytes() == v.tobytes(), k


def test_byteswapped_input_saves_identically(tmp_path):
    m = m_mixed()
    st = m._state()
    st["weight"] = np.asarray(st["weight"]).astype(">f8")
    st["stats"] = {"count": np.linspace(0, 1, m.n_nodes).astype(">f8")}
    m2 = spnc.SPN.from_arrays(leaf_tables=m.leaf_tables, **st)
    sio.save(m2, tmp_path / "be.h5")
    back = sio.load(tmp_path / "be.h5")
    assert back.stats["count"].dtype == np.float64
    assert np.array_equal(back.stats["count"], np.linspace(0, 1, m.n_nodes))



@pytest.mark.parametrize("ext", ["h5", "json"])
def test_stats_of_unportable_dtypes_are_refused_by_name(tmp_path, ext):
    # float16, complex, bytes or object arrays crashed the save with a bare
    # ValueError('cannot hash dtype ...'); a numpy array of str is a list of str
    m = m_mixed()
    for bad in (np.array([1.0], dtype=np.float16), np.array([1j]), np.array([b"a"]),
                np.array([1, "a"], dtype=object), [1, "a"]):
        m.stats = {"odd": bad}
        with pytest.raises(FormatError, match=r"stats\['odd'\]: arrays of dtype .* cannot be stored"):
            sio.save(m, tmp_path / f"m.{ext}")
        m.learner = {"name": "me", "arrays": {"odd": bad}}
        m.stats = {}
        with pytest.raises(FormatError, match=r"learner arrays\['odd'\]: arrays of dtype"):
            sio.save(m, tmp_path / f"m.{ext}")
        m.learner = {}
    m.stats = {"names": np.array(["a", "bé"])}
    sio.save(m, tmp_path / f"m.{ext}")
    assert sio.load(tmp_path / f"m.{ext}").stats["names"] == ["a", "bé"]


def test_hdf5_layout_is_portable(tmp_path):
    """Only standard HDF5 types, little-endian, 1-D; filters only on large datasets."""
    import h5py
    m = m_learner()
    p = tmp_path / "m.h5"
    sio.save(m, p)
    with h5py.File(p, "r") as f:
        assert f.attrs["format"].decode() == "spnc-model"
        assert list(f.attrs["format_version"]) == [1, 1, 0]
        assert f.attrs["format_version"].dtype == np.dtype("<u4")

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                assert obj.ndim == 1, name
                dt = obj.dtype
                sd = h5py.check_string_dtype(dt)
                assert (sd is not None and sd.length is not None) or dt.byteorder in "<|=", name
                assert obj.compression in (None, "gzip")
        f.visititems(visit)
    h5dump = shutil.which("h5dump")
    if h5dump:
        out = subprocess.run([h5dump, "-H", "-A", str(p)], capture_output=True, text=True).stdout
        types = {ln.split("DATATYPE", 1)[1].strip().split()[0]
                 for ln in out.splitlines() if "DATATYPE" in ln}
        assert types <= {"H5T_STD_U8LE", "H5T_STD_U32LE", "H5T_STD_I32LE", "H5T_STD_I64LE",
                         "H5T_IEEE_F64LE", "H5T_STRING"}, types


def test_large_model_is_chunked_and_compressed(tmp_path):
    import h5py
    rng = np.random.default_rng(1)
    leaves = [spnc.Bernoulli(0, float(p)) for p in rng.uniform(0.1, 0.9, 5000)]
    m = spnc.compile(spnc.Sum(leaves, rng.dirichlet(np.ones(5000))))
    p = tmp_path / "big.h5"
    sio.save(m, p)
    with h5py.File(p, "r") as f:
        ds = f["edges/weight"]
        assert ds.chunks is not None and ds.compression == "gzip" and ds.shuffle and ds.fletcher32
    back = sio.load(p)
    assert np.asarray(back.weight).tobytes() == np.asarray(m.weight).tobytes()


def test_atomic_save_keeps_old_file(tmp_path, monkeypatch):
    m = m_mixed()
    p = tmp_path / "keep.h5"
    sio.save(m, p)
    before = p.read_bytes()

    def boom(g, node):
        g.create_group("half-written")
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(h5io, "_write_group", boom)
    with pytest.raises(OSError, match="simulated"):
        sio.save(m_dag(), p)
    assert p.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["keep.h5"]       # no temp file left behind
    monkeypatch.undo()
    j = tmp_path / "keep.json"
    sio.save(m, j)
    before = j.read_bytes()
    monkeypatch.setattr(jsonio, "dumps_tree", lambda t: (_ for _ in ()).throw(OSError("boom")))
    with pytest.raises(OSError):
        sio.save(m_dag(), j)
    assert j.read_bytes() == before


def test_save_refuses_nan_and_bad_names(tmp_path):
    m = m_mixed()
    st = m._state()
    st["stats"] = {"count": np.full(m.n_nodes, np.nan)}
    bad = spnc.SPN.from_arrays(leaf_tables=m.leaf_tables, **st)
    with pytest.raises(FormatError, match=r"/stats/count\[0\]"):
        sio.save(bad, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()
    st["stats"] = {"a/b": np.zeros(2)}
    bad = spnc.SPN.from_arrays(leaf_tables=m.leaf_tables, **st)
    with pytest.raises(FormatError, match="a/b"):
        sio.save(bad, tmp_path / "x.h5")


def test_learner_entries_that_json_cannot_hold_are_dropped_with_a_warning(tmp_path):
    m = m_mixed()
    st = m._state()
    st["learner"] = {"name": "mine", "params": {}, "n_train": 5, "when": object()}
    odd = spnc.SPN.from_arrays(leaf_tables=m.leaf_tables, **st)
    with pytest.warns(UserWarning, match="not saved"):
        sio.save(odd, tmp_path / "x.h5")
    assert "n_train" not in sio.load(tmp_path / "x.h5").learner
    st["learner"] = {"name": "mine", "weights": np.zeros(20000)}
    with pytest.warns(UserWarning, match="longer than"):
        sio.save(spnc.SPN.from_arrays(leaf_tables=m.leaf_tables, **st), tmp_path / "y.json")
    assert set(sio.load(tmp_path / "y.json").learner) == {"name", "version", "params", "arrays"}


@pytest.mark.parametrize("ext", ["h5", "json"])
def test_a_learner_without_a_name_is_refused(tmp_path, ext):
    # /learner@name is required (formats/spnc-hdf5.md §8, P11); spnc.save wrote @name = ""
    m = m_mixed()
    for learner in ({"params": {"a": 1}, "n_train": 5}, {"name": None, "version": "1"}):
        m.learner = learner
        with pytest.raises(FormatError, match=r"spn.learner has no 'name' .*requires /learner@name"):
            sio.save(m, tmp_path / f"m.{ext}")
        assert not (tmp_path / f"m.{ext}").exists()


def test_extension_and_format_selection(tmp_path):
    m = m_mixed()
    with pytest.raises(FormatError, match="unknown extension"):
        sio.save(m, tmp_path / "m.pkl")
    sio.save(m, tmp_path / "m.bin", fmt="json")
    assert sio.load(tmp_path / "m.bin", fmt="json").n_nodes == m.n_nodes
    sio.save(m, tmp_path / "m.dot")
    assert (tmp_path / "m.dot").read_text().startswith("digraph spnc {")
    with pytest.raises(FormatError, match="DOT"):
        sio.load(tmp_path / "m.dot")


def test_examples_load_and_agree():
    ex = ROOT / "formats" / "examples"
    jsons = sorted(ex.glob("*.json"))
    assert jsons, "no example models"
    for j in jsons:
        schema_validate(j)
        h = j.with_suffix(".h5")
        assert h.exists(), h
        a, b = sio.read_validated(j), sio.read_validated(h)
        assert sio.trees_equal(a.tree, b.tree), j.name
        ma, mb = sio.load(j), sio.load(h)
        X = rand_data(ma, 20)
        assert ma.log_likelihood(X).tobytes() == mb.log_likelihood(X).tobytes()


def test_extensions_survive_conversion(tmp_path):
    """x_* groups, datasets and attributes are kept by h5 -> json -> h5 conversion."""
    from spnc.io._spec import Group
    t = sio.read_validated(ROOT / "formats" / "examples" / "mixed.h5").tree
    t.attrs["x_note"] = "made by a test"
    t.members["x_acme"] = Group({"level": 3, "ratio": 0.25, "tags": ["a", "b"]},
                                {"ids": np.array([1, 2, 3], dtype=np.uint16),
                                 "sub": Group(members={"v": np.array([1.5], dtype=np.float32)})})
    t.members["nodes"].attrs["x_hint"] = [1, 2]
    t.attrs["content_hash"] = content_hash(t)     # the edits changed the content
    h1, j, h2 = tmp_path / "a.h5", tmp_path / "a.json", tmp_path / "b.h5"
    sio.write_tree(sio.validate_tree(t).tree, h1)
    v1 = sio.read_validated(h1)
    sio.write_tree(v1.tree, j)
    schema_validate(j)
    sio.write_tree(sio.read_validated(j).tree, h2)
    v2 = sio.read_validated(h2)
    assert sio.trees_equal(v1.tree, v2.tree) and sio.trees_equal(t, v2.tree)
    assert v2.tree.members["x_acme"].members["ids"].dtype == np.uint16


def test_save_does_not_replace_a_read_only_file(tmp_path, monkeypatch):
    """The atomic rename would replace a write-protected file that open() refuses; save
    refuses it too and leaves it as it was (os.access as a non-root user sees it)."""
    import os
    import spnc._atomic as atomic
    p = tmp_path / "kept.h5"
    sio.save(m_mixed(), p)
    before = p.read_bytes()
    p.chmod(0o444)
    real = os.access
    monkeypatch.setattr(atomic.os, "access", lambda f, mode: False if os.fspath(f) == str(p) else real(f, mode))
    with pytest.raises(PermissionError, match="read-only"):
        sio.save(m_learner(), p)
    assert p.read_bytes() == before


def test_save_over_a_file_open_for_writing_is_refused(tmp_path):
    # was: the file was replaced, and what the open handle wrote afterwards went to the
    # old, unlinked file and was lost
    import h5py
    from spnc.errors import SpncError
    p = tmp_path / "model.h5"
    sio.save(m_mixed(), p)
    with h5py.File(p, "a") as f:
        with pytest.raises(SpncError, match="open for writing in this process"):
            sio.save(m_learner(), p)
        f.attrs["note"] = np.int64(7)           # the handle still writes to the file
    with h5py.File(p, "a") as f:
        assert f.attrs["note"] == 7
        del f.attrs["note"]
    assert sio.load(p).learner == {}           # m_mixed's, not m_learner's
    with h5py.File(p, "r"):
        sio.save(m_learner(), p)               # open read-only: nothing to lose
    assert sio.load(p).learner["name"] == "oslrau"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc and RLIMIT_AS")
def test_json_models_load_under_an_address_space_limit():
    # reading a JSON model asked for max_json_bytes + 1 = 4 GiB in one read(), so under
    # `ulimit -v` every JSON model (and a foreign one, 256 MiB) failed with "file structure
    # is too large or too deep"
    code = textwrap.dedent("""
        import os, resource, sys
        import spnc
        from spnc.io import importers
        used = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        cap = used + (1 << 30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        print(spnc.load(sys.argv[1]).n_nodes, importers.load(sys.argv[2]).n_nodes)
    """)
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "formats" / "examples" / "mixed.json"),
                        str(ROOT / "tests" / "data" / "peers" / "deeprob_clt.deeprob.json")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-600:]
    assert r.stdout.split() == ["7", "39"]
