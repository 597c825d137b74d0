"""Generate the conformance suite of the spnc model format (formats/spnc-hdf5.md).

    python formats/conformance/make_suite.py [outdir]

Writes ``valid/`` (models in HDF5 and JSON, each with ``<name>.data.json``: data rows with
NaN written as null, the expected log-likelihoods, and out-of-domain rows an evaluator must
refuse), ``invalid/`` (one file per rule of §7, named after the rule) and ``manifest.json``
(file -> accept/refuse, rule id, what is wrong, and what a 1.0 reader does). Expected values
come from spnc; everything is seeded, so regenerating gives identical files.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

import spnc
import spnc.io as sio
from spnc.io import hdf5 as h5io, jsonio
from spnc.io._hash import content_hash
from spnc.io._model import tree_from_model
from spnc.io._spec import Group
from spnc.leaves.cltree import ChowLiuLeaf

HERE = Path(__file__).resolve().parent
FIXED_PROV = {"creator": "spnc conformance suite", "created": "2026-01-01T00:00:00Z",
              "model_uuid": "00000000-0000-4000-8000-000000000000"}


# ----------------------------------------------------------------------------- trees
def tree_of(m: Any) -> Group:
    t = tree_from_model(m)
    t.attrs.update(FIXED_PROV)
    return rehash(t)


def rehash(t: Group) -> Group:
    t.attrs.pop("content_hash", None)
    t.attrs["content_hash"] = content_hash(t)
    return t


def write_h5(t: Group, path: Path, chunked: bool = False) -> None:
    """Write a tree without any check (the raw writer used for bad files too): as spnc
    saves (chunked, fletcher32) or, to keep the suite small, with contiguous datasets."""
    h5io.MAX_ATTR_BYTES = 1 << 16      # let the L3 case through the writer's own limit
    with h5py.File(path, "w", libver=("v108", "v110")) as f:
        (h5io._write_group if chunked else _write_plain)(f, t)


def _write_plain(g: h5py.Group, node: Group) -> None:
    for k, v in node.attrs.items():
        h5io._write_attr(g, k, v)
    for k, m in node.members.items():
        if isinstance(m, Group):
            _write_plain(g.create_group(k), m)
        elif isinstance(m, list):
            data, dt = h5io._fixed_str(m, k)
            g.create_dataset(k, shape=(len(m),), dtype=dt, data=data if m else None)
        else:
            a = np.asarray(m)
            g.create_dataset(k, data=a.astype(a.dtype.newbyteorder("<") if a.dtype.itemsize > 1 else a.dtype))


def storage_variants(path: Path) -> None:
    """Rewrite parts of a valid file in other allowed storage: compact layout, big-endian,
    NUL-terminated ASCII-charset strings, an unchunked gzip-free dataset stays as is."""
    with h5py.File(path, "a") as f:
        w = f["edges/weight"][()]
        del f["edges/weight"]
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        dcpl.set_obj_track_times(False)      # no timestamps: regenerating gives the same bytes
        ds = h5py.h5d.create(f["edges"].id, b"weight", h5py.h5t.IEEE_F64LE,
                             h5py.h5s.create_simple(w.shape), dcpl=dcpl)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(w))
        ch = f["edges/child"][()]
        del f["edges/child"]
        f.create_dataset("edges/child", data=ch.astype(">i8"))
        names = [s.encode() for s in f["variables/name"].asstr()[()]]
        del f["variables/name"]
        tid = h5py.h5t.C_S1.copy()
        tid.set_size(max(len(s) for s in names) + 1)
        tid.set_strpad(h5py.h5t.STR_NULLTERM)
        tid.set_cset(h5py.h5t.CSET_ASCII)
        untimed = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        untimed.set_obj_track_times(False)
        sd = h5py.h5d.create(f["variables"].id, b"name", tid, h5py.h5s.create_simple((len(names),)),
                             dcpl=untimed)
        sd.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array(names, dtype=f"S{tid.get_size()}"), mtype=tid)


def M(t: Group, *path: str) -> Any:
    for p in path:
        t = t.members[p]
    return t


# ----------------------------------------------------------------------------- models
def m_bernoulli():
    b = [spnc.Bernoulli(v, p) for v, p in ((0, 0.2), (1, 0.7), (0, 0.9), (1, 0.05))]
    return spnc.compile(spnc.Sum([spnc.Product(b[:2]), spnc.Product(b[2:])], [0.35, 0.65]))


def m_categorical_dag():
    c2 = spnc.Categorical(2, [0.1, 0.6, 0.3])
    shared = spnc.Product([spnc.Categorical(1, [0.25, 0.75]), c2])
    ind = [spnc.Indicator(0, v) for v in range(3)]
    s0 = spnc.Sum(ind, [1 / 3, 0.5, 1 - 1 / 3 - 0.5])
    p1 = spnc.Product([s0, shared])
    p2 = spnc.Product([ind[1], spnc.Sum([shared, spnc.Product([spnc.Categorical(1, [0.5, 0.5]), c2])],
                                        [0.123456789012345, 1 - 0.123456789012345])])
    return spnc.compile(spnc.Sum([p1, p2], [0.1, 0.9]), cardinality=[3, 2, 3],
                        var_names=["colour", "flag", "größe"])


def m_gaussian():
    g = [spnc.Gaussian(0, -1.0, 0.5), spnc.Gaussian(1, 2.0, 1.5), spnc.Gaussian(0, 1.0, 2.0),
         spnc.Gaussian(1, 0.0, 0.25)]
    return spnc.compile(spnc.Sum([spnc.Product(g[:2]), spnc.Product(g[2:])], [0.4, 0.6]))


def m_mvgaussian():
    a = spnc.MultivariateGaussian([0, 2, 3], [0.5, -1.0, 0.0],
                                  [[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.8]])
    b = spnc.MultivariateGaussian([0, 2, 3], [1.5, 0.25, 1.0],
                                  [[1.0, -0.2, 0.0], [-0.2, 0.5, 0.1], [0.0, 0.1, 1.2]])
    one = spnc.MultivariateGaussian([1], [3.0], [[0.01]])          # one-variable MVN (§5.1)
    m = spnc.compile(spnc.Product([spnc.Sum([a, b], [0.4, 0.6]), one]))
    t = tree_of(m)
    cov = M(t, "leaves", "mvgaussian", "cov")
    cov[1] *= 1 + 5e-10      # upper triangle differs within the tolerance: lower one is used
    return rehash(t)


def m_cltree():
    leaf = ChowLiuLeaf([0, 1, 3], [-1, 0, 0],
                       [[[0.4, 0.6]], [[0.9, 0.1], [0.2, 0.8]], [[0.3, 0.3, 0.4], [0.1, 0.1, 0.8]]])
    other = ChowLiuLeaf([0, 1, 3], [1, -1, 1],
                        [[[0.5, 0.5], [0.7, 0.3]], [[0.2, 0.8]], [[0.6, 0.2, 0.2], [0.3, 0.3, 0.4]]])
    single = ChowLiuLeaf([2], [-1], [[[0.3, 0.7]]])                # one-variable tree (§5.1)
    s = spnc.Sum([leaf, other], [0.7, 0.3])
    return spnc.compile(spnc.Product([s, single]), cardinality=[2, 2, 2, 3])


def m_storage():
    b = [spnc.Bernoulli(0, 0.25), spnc.Gaussian(1, 0.0, 2.0), spnc.Bernoulli(0, 0.75), spnc.Gaussian(1, 1.0, 0.5)]
    return spnc.compile(spnc.Sum([spnc.Product(b[:2]), spnc.Product(b[2:])], [0.5, 0.5]),
                        var_names=["a", "b"])


def _members():
    shared = spnc.Product([spnc.Bernoulli(0, 0.3), spnc.Bernoulli(1, 0.6)])
    r1 = spnc.Sum([shared, spnc.Product([spnc.Bernoulli(0, 0.8), spnc.Bernoulli(1, 0.1)])], [0.5, 0.5])
    r2 = spnc.Sum([shared, spnc.Product([spnc.Bernoulli(0, 0.05), spnc.Bernoulli(1, 0.95)])], [0.2, 0.8])
    return r1, r2


def m_mixture():
    return spnc.compile(list(_members()), combine="mixture", root_weights=[0.25, 0.75])


def m_independent():
    """Independent roots over different scopes, and variable 3 outside every root."""
    r1, r2 = _members()
    r3 = spnc.Product([spnc.Gaussian(2, 0.5, 1.0), spnc.Bernoulli(1, 0.4)])
    return spnc.compile([r1, r2, r3], combine="independent", cardinality=[2, 2, 0, 3])


def m_tolerance():
    """Every normalised quantity off by up to 9e-7 (within tau): used as stored."""
    c = [spnc.Categorical(0, [0.2, 0.3, 0.5 + 9e-7]), spnc.Categorical(0, [0.6, 0.4 - 9e-7, 0.0])]
    clt = ChowLiuLeaf([1, 2], [-1, 0], [[[0.5, 0.5 + 8e-7]], [[0.1, 0.9], [0.4, 0.6 - 8e-7]]])
    p1 = spnc.Product([c[0], clt])
    p2 = spnc.Product([c[1], ChowLiuLeaf([1, 2], [1, -1], [[[0.3, 0.7], [0.5, 0.5]], [[0.25, 0.75]]])])
    s = spnc.Sum([p1, p2], [0.3, 0.7 + 9e-7])
    s2 = spnc.Sum([p2, p1], [0.5, 0.5])
    return spnc.compile([s, s2], combine="mixture", root_weights=[0.6, 0.4 - 9e-7],
                        normalize=False, cardinality=[3, 2, 2])


def t_version_1_0():
    t = tree_of(m_bernoulli())
    del t.attrs["content_hash"]
    t.attrs["format_version"] = np.array([1, 0, 0], dtype=np.uint32)
    return t


def t_newer_minor():
    """A 1.2 file with members this reader does not know: ignored, model loads."""
    t = tree_of(m_bernoulli())
    t.attrs["format_version"] = np.array([1, 2, 0], dtype=np.uint32)
    t.attrs["license"] = "CC0"
    t.members["annotations"] = Group({"about": "future"}, {"score": np.arange(3, dtype=np.float32)})
    M(t, "nodes").members["label"] = [f"n{i}" for i in range(M(t, "nodes", "kind").size)]
    return rehash(t)


def insert_vendor(t: Group, target: int, name: str, code: int, params: dict) -> int:
    """Insert a vendor leaf right after node ``target`` (same scope) and move every edge
    and root from ``target`` to it; ``target`` becomes its fallback. Returns its id."""
    nodes, edges, roots = M(t, "nodes"), M(t, "edges"), M(t, "roots")
    v = target + 1
    shift = (lambda a: np.where(a >= v, a + 1, a))
    child = shift(edges.members["child"])
    child[child == target] = v
    edges.members["child"] = child
    r = shift(roots.members["node"])
    r[r == target] = v
    roots.members["node"] = r
    for tab in M(t, "leaves").members.values():
        tab.members["node"] = shift(tab.members["node"])
    kind = nodes.members["kind"]
    nodes.members["kind"] = np.insert(kind, v, code).astype(np.uint8)
    sp, sc = nodes.members["scope_ptr"], nodes.members["scope"]
    s = sc[sp[target]:sp[target + 1]]
    nodes.members["scope"] = np.insert(sc, sp[v], s).astype(np.int32)
    nodes.members["scope_ptr"] = np.insert(sp + np.where(np.arange(sp.size) >= v, s.size, 0), v, sp[v])
    ptr = edges.members["ptr"]
    edges.members["ptr"] = np.insert(ptr, v, ptr[v])
    kn = list(nodes.attrs["kind_names"]) + [""] * (code + 1 - len(nodes.attrs["kind_names"]))
    kn[code] = name
    nodes.attrs["kind_names"] = kn
    M(t, "leaves").members[name] = Group(members={"node": np.array([v], dtype=np.int64), **params})
    t.members["fallback"] = Group(members={"node": np.array([v], dtype=np.int64),
                                           "target": np.array([target], dtype=np.int64)})
    return v


def t_vendor_fallback():
    """An optional vendor leaf type with a fallback node (§10.2)."""
    m = m_categorical_dag()
    t = tree_of(m)
    cat = int(M(t, "leaves", "categorical", "node")[0])
    insert_vendor(t, cat, "x_acme_poisson", 200, {"rate": np.array([1.5])})
    t.attrs["optional_features"] = ["leaf:x_acme_poisson"]
    return rehash(t)


def t_extensions():
    """Extensions of every kind, typed attributes of every dtype, depth-8 groups."""
    m = m_gaussian()
    st = m._state()
    st["stats"] = {"count": np.arange(m.n_nodes, dtype=np.float64) + 0.5,
                   "big": np.array([0, 2**64 - 1], dtype=np.uint64),
                   "neg": np.array([-2**63, 2**53 + 1, -1], dtype=np.int64)}
    st["learner"] = {"name": "acme-em", "params": {"iters": 3},
                     "arrays": {"merges": np.arange(m.n_nodes, dtype=np.int32)}}
    m = spnc.SPN.from_arrays(leaf_tables=m.leaf_tables, **st)
    t = tree_of(m)
    t.attrs["x_note"] = "root extension attribute"
    t.attrs["x_scale"] = np.float32(0.1)
    t.attrs["x_codes"] = np.array([1, 2, 250], dtype=np.uint8)
    t.attrs["x_empty"] = []
    M(t, "leaves").attrs["x_hint"] = np.int16(-7)
    M(t, "leaves", "gaussian").attrs["x_note"] = "leaf-table extension attribute"
    M(t, "nodes").attrs["x_big"] = np.array([2**63 - 1], dtype=np.int64)
    deep = Group({"level": np.uint16(8)}, {"v": np.array([1.5, -0.0], dtype=np.float32)})
    for i in range(6, 0, -1):             # /x_acme/deep/g1/.../g6: depth 8, the limit
        deep = Group(members={f"g{i}": deep})
    t.members["x_acme"] = Group({"tags": ["a", "b"]}, {"deep": deep, "ids": np.array([3, 1], dtype=np.uint16),
                                                       "empty": Group()})
    return rehash(t)


VALID: dict[str, Callable[[], Any]] = {
    "bernoulli": m_bernoulli, "categorical_dag": m_categorical_dag, "gaussian": m_gaussian,
    "mvgaussian": m_mvgaussian, "cltree": m_cltree, "mixture": m_mixture,
    "independent": m_independent, "tolerance": m_tolerance, "version_1_0": t_version_1_0,
    "newer_minor": t_newer_minor, "vendor_fallback": t_vendor_fallback,
    "extensions": t_extensions, "storage": lambda: tree_of(m_storage()),
}
#: written as spnc saves (chunked, fletcher32); the others use contiguous datasets
CHUNKED = {"bernoulli", "gaussian", "cltree"}
VALID_NOTES = {
    "bernoulli": "single root, Bernoulli leaves", "categorical_dag": "categorical and indicator leaves, DAG sharing, UTF-8 names",
    "gaussian": "Gaussian leaves", "mvgaussian": "MVN leaves incl. d = 1; upper triangle off by 5e-10 relative (lower one is used)",
    "cltree": "Chow-Liu leaves incl. d = 1", "mixture": "mixture roots sharing a subgraph",
    "independent": "independent roots with different scopes; variable 3 outside every root",
    "tolerance": "sum, categorical, CPT and root weights off by <= 9e-7 (within tau), used as stored",
    "version_1_0": "a 1.0 file (no 1.1 members)",
    "newer_minor": "a 1.2 file with unknown members (ignored)",
    "vendor_fallback": "optional vendor leaf x_acme_poisson with a fallback node",
    "storage": "compact layout, a big-endian dataset, NUL-terminated ASCII-charset strings",
    "extensions": "x_* attributes/groups of every dtype, depth-8 group, stats and learner, u8/i8 beyond 2^53",
}


def data_rows(card: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    X = np.empty((41, card.size))
    for v, k in enumerate(card):
        X[:, v] = rng.integers(0, k, 41) if k else rng.normal(0.5, 1.5, 41)
    X[20:40][rng.random((20, card.size)) < 0.35] = np.nan
    X[40] = np.nan
    return X


def bad_rows(card: np.ndarray) -> list[list]:
    rows = []
    ok = [0.0 if k else 0.5 for k in card]
    for v, k in enumerate(card):
        bads = ([float(k), 0.5, -1.0, float("inf")] if k else [float("inf"), float("-inf")])
        for b in bads:
            r = list(ok)
            r[v] = b
            rows.append(r)
    return rows


def enc(x: float) -> Any:
    return x if np.isfinite(x) else ("-inf" if x < 0 else ("inf" if x > 0 else None))


def write_valid(out: Path, manifest: list) -> None:
    d = out / "valid"
    d.mkdir(parents=True)
    for i, (name, make) in enumerate(VALID.items()):
        obj = make()
        t = obj if isinstance(obj, Group) else tree_of(obj)
        write_h5(t, d / f"{name}.h5", chunked=name in CHUNKED)
        if name == "storage":
            storage_variants(d / f"{name}.h5")
        v = sio.read_validated(d / f"{name}.h5")
        jsonio.write_tree(v.tree, d / f"{name}.json")
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = sio.load(d / f"{name}.h5")
        card = np.asarray(M(t, "variables", "cardinality"))
        X = data_rows(card, np.random.default_rng(100 + i))
        ll = np.asarray(m.log_likelihood(X))
        side = {"model": f"{name}.h5", "note": VALID_NOTES[name],
                "rows": [[None if np.isnan(x) else float(x) for x in r] for r in X],
                "log_likelihood": [[enc(x) for x in r] for r in ll] if ll.ndim == 2 else [enc(x) for x in ll],
                "invalid_rows": [[enc(x) for x in r] for r in bad_rows(card)]}
        (d / f"{name}.data.json").write_text(json.dumps(side, indent=0) + "\n")
        refuse10 = name == "vendor_fallback"
        for ext in ("h5", "json"):
            manifest.append({"file": f"valid/{name}.{ext}", "expect": "accept", "rule": "",
                             "what": VALID_NOTES[name], "data": f"valid/{name}.data.json",
                             "reader_1_0": "refuse" if refuse10 else "accept"})


if __name__ == "__main__":
    from _invalid import write_invalid   # noqa: E402  (sibling module)
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    for sub in ("valid", "invalid"):
        shutil.rmtree(out / sub, ignore_errors=True)
    manifest: list = []
    write_valid(out, manifest)
    write_invalid(out, manifest)
    (out / "manifest.json").write_text(json.dumps({"format_version": [1, 1, 0], "files": manifest},
                                                  indent=1, ensure_ascii=False) + "\n")
    print(f"{len(manifest)} files in {out}")
