"""Invalid files of the conformance suite: one per rule of formats/spnc-hdf5.md §7."""
from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any, Callable

import h5py
import numpy as np

from spnc.io import jsonio
from spnc.io._spec import Group

from make_suite import (M, m_bernoulli, m_categorical_dag, m_cltree, m_gaussian, m_mixture,
                        m_mvgaussian, rehash, insert_vendor, t_vendor_fallback, tree_of, write_h5)

#: 1.1 rules a 1.0 reader does not apply (it ignores members of a newer minor version)
ACCEPTED_BY_1_0 = {"V4_unknown_member", "V4_unknown_attr", "V4_unknown_leaf_attr", "H1_mismatch", "H1_syntax",
                   "H1_missing"}

BASES: dict[str, Callable[[], Group]] = {
    "cat": lambda: tree_of(m_categorical_dag()), "bern": lambda: tree_of(m_bernoulli()),
    "gauss": lambda: tree_of(m_gaussian()), "mvn": m_mvgaussian, "clt": lambda: tree_of(m_cltree()),
    "mix": lambda: tree_of(m_mixture()), "vendor": t_vendor_fallback,
}


def _set(t: Group, path: str, value: Any) -> None:
    *g, name = path.strip("/").split("/")
    M(t, *g).members[name] = value


def _poke(path: str, i: int, v: Any) -> Callable[[Group], None]:
    def f(t: Group) -> None:
        *g, name = path.strip("/").split("/")
        a = M(t, *g).members[name].copy()
        a[i] = v
        M(t, *g).members[name] = a
    return f


def _attr(path: str, name: str, v: Any) -> Callable[[Group], None]:
    def f(t: Group) -> None:
        (M(t, *path.strip("/").split("/")) if path.strip("/") else t).attrs[name] = v
    return f


def _del(path: str) -> Callable[[Group], None]:
    def f(t: Group) -> None:
        *g, name = path.strip("/").split("/")
        del M(t, *g).members[name]
    return f


def _nest(depth: int) -> Callable[[Group], None]:
    def f(t: Group) -> None:
        g = Group(members={"v": np.zeros(1)})
        for i in range(depth - 1, 0, -1):
            g = Group(members={f"g{i}": g})
        t.members["x_deep"] = g
    return f


def _shift(path: str, i: int, j: int, d: float) -> Callable[[Group], None]:
    """Add ``d`` to element i and subtract it from element j."""
    def f(t: Group) -> None:
        *g, name = path.strip("/").split("/")
        a = M(t, *g).members[name].copy()
        a[i] += d
        a[j] -= d
        M(t, *g).members[name] = a
    return f


def _swap_last_scope(t: Group) -> None:
    s = M(t, "nodes", "scope").copy()
    s[-2:] = s[-2:][::-1].copy()
    M(t, "nodes").members["scope"] = s


def _unreachable(t: Group) -> None:
    """Add a Bernoulli leaf nobody points to (node id N, after the root)."""
    nodes, edges = M(t, "nodes"), M(t, "edges")
    N = nodes.members["kind"].size
    nodes.members["kind"] = np.append(nodes.members["kind"], np.uint8(2))
    nodes.members["scope"] = np.append(nodes.members["scope"], np.int32(0))
    nodes.members["scope_ptr"] = np.append(nodes.members["scope_ptr"], nodes.members["scope_ptr"][-1] + 1)
    edges.members["ptr"] = np.append(edges.members["ptr"], edges.members["ptr"][-1])
    b = M(t, "leaves", "bernoulli")
    b.members["node"] = np.append(b.members["node"], np.int64(N))
    b.members["p"] = np.append(b.members["p"], 0.5)


def _two_roots(t: Group) -> None:
    r = M(t, "roots", "node")
    M(t, "roots").members["node"] = np.array([r[0], r[0] - 1], dtype=np.int64)


def _mixture_scopes(t: Group) -> None:
    """Mixture of the root and one of its leaves (different scopes)."""
    M(t, "roots").members["node"] = np.array([M(t, "roots", "node")[0], 0], dtype=np.int64)
    M(t, "roots").members["weight"] = np.array([0.5, 0.5])
    M(t, "roots").attrs["combine"] = "mixture"


def _cpt_row(t: Group) -> None:
    c = M(t, "leaves", "cltree", "cpt").copy()
    c[2] += 2e-6           # first row of the second variable's table
    M(t, "leaves", "cltree").members["cpt"] = c


def _clt_parent(v: list) -> Callable[[Group], None]:
    def f(t: Group) -> None:
        p = M(t, "leaves", "cltree", "parent").copy()
        p[:3] = v
        M(t, "leaves", "cltree").members["parent"] = p
    return f


def _var_names(names: list) -> Callable[[Group], None]:
    return lambda t: M(t, "variables").members.__setitem__("name", names)


def _vendor_unlisted(t: Group) -> None:
    t.attrs["optional_features"] = []


def _vendor_required_too(t: Group) -> None:
    t.attrs["required_features"] = ["leaf:x_acme_poisson"]


def _fallback_self(t: Group) -> None:
    fb = M(t, "fallback")
    fb.members["target"] = fb.members["node"] + 1


def _fallback_scope(t: Group) -> None:
    M(t, "fallback").members["target"] = np.array([0], dtype=np.int64)   # indicator over X0


def _fallback_vendor_target(t: Group) -> None:
    """A second vendor node used as the fallback of the first."""
    v = int(M(t, "fallback", "node")[0])
    insert_vendor(t, v - 1, "x_acme_other", 201, {"w": np.array([1.0])})
    t.attrs["optional_features"] = ["leaf:x_acme_other", "leaf:x_acme_poisson"]
    fb = M(t, "fallback")
    w = v                       # the new node took id v, the old vendor node is now v + 1
    fb.members["node"] = np.array([w + 1, w], dtype=np.int64)
    fb.members["target"] = np.array([w, v - 1], dtype=np.int64)


def _no_fallback(t: Group) -> None:
    del t.members["fallback"]


# (file stem, rule, what, base, mutation on the tree; the hash is recomputed afterwards)
TREE_CASES: list[tuple[str, str, str, str, Callable[[Group], None]]] = [
    ("V1_format", "V1", "@format is not spnc-model", "cat", _attr("/", "format", "spn-model")),
    ("V2_major", "V2", "major version 2", "cat", _attr("/", "format_version", np.array([2, 0, 0], np.uint32))),
    ("V2_dtype", "V2", "format_version stored as i8", "cat", _attr("/", "format_version", np.array([1, 1, 0], np.int64))),
    ("V2_length", "V2", "format_version has two entries", "cat", _attr("/", "format_version", np.array([1, 1], np.uint32))),
    ("V3_unknown_feature", "V3", "required feature leaf:hypercube unknown", "cat", _attr("/", "required_features", ["leaf:hypercube"])),
    ("V3_feature_syntax", "V3", "required feature not of the form leaf:<name>", "cat", _attr("/", "required_features", ["hypercube-v3"])),
    ("V4_unknown_member", "V4", "unknown member /notes in a 1.1 file", "cat", lambda t: t.members.__setitem__("notes", Group())),
    ("V4_unknown_attr", "V4", "unknown attribute /roots@order in a 1.1 file", "cat", _attr("roots", "order", "any")),
    ("V4_unknown_leaf_attr", "V4", "unknown attribute /leaves/categorical@note in a 1.1 file", "cat",
     _attr("leaves/categorical", "note", "any")),
    ("V4_1_1_in_1_0", "V4", "content_hash in a file that says 1.0", "cat", _attr("/", "format_version", np.array([1, 0, 0], np.uint32))),
    ("T2_child_f8", "T2", "/edges/child stored as f8", "cat", lambda t: _set(t, "edges/child", M(t, "edges", "child").astype(np.float64))),
    ("T2_p_f4", "T2", "/leaves/bernoulli/p stored as f4", "bern", lambda t: _set(t, "leaves/bernoulli/p", M(t, "leaves", "bernoulli", "p").astype(np.float32))),
    ("T2_scope_i8", "T2", "/nodes/scope stored as i8", "cat", lambda t: _set(t, "nodes/scope", M(t, "nodes", "scope").astype(np.int64))),
    ("T7_bad_name", "T7", "extension member with a space in its name", "cat", lambda t: t.members.__setitem__("x_bad name", np.zeros(1))),
    ("T7_reserved", "T7", "member named 'data' in /stats", "cat", lambda t: t.members.__setitem__("stats", Group(members={"data": np.zeros(1)}))),
    ("T7_long_name", "T7", "129-character member name", "cat", lambda t: t.members.__setitem__("x_" + "a" * 127, np.zeros(1))),
    ("L2_depth", "L2", "extension groups nested 9 deep", "cat", _nest(9)),
    ("L3_attr_elements", "L3", "attribute with 4097 elements", "cat", _attr("/", "x_many", np.zeros(4097, np.uint8))),
    ("L3_attr_bytes", "L3", "string attribute of 60 001 bytes", "cat", _attr("/", "x_long", "a" * 60001)),
    ("L3_name_bytes", "L3", "variable name of 1025 bytes", "cat", _var_names(["a" * 1025, "b", "c"])),
    ("G1_ptr_start", "G1", "/edges/ptr[0] = 1", "cat", _poke("edges/ptr", 0, 1)),
    ("G1_ptr_decreasing", "G1", "/nodes/scope_ptr decreases", "cat", _poke("nodes/scope_ptr", 2, 0)),
    ("G1_ptr_end", "G1", "/leaves/categorical/prob_ptr ends short", "cat", _poke("leaves/categorical/prob_ptr", -1, 3)),
    ("G2_child_range", "G2", "/edges/child holds N", "cat", _poke("edges/child", 0, 10**6)),
    ("G2_scope_range", "G2", "/nodes/scope holds V", "cat", _poke("nodes/scope", 0, 3)),
    ("G2_root_range", "G2", "/roots/node holds -1", "cat", _poke("roots/node", 0, -1)),
    ("G3_order", "G3", "a child id not below its parent", "cat", lambda t: _poke("edges/child", -1, int(M(t, "roots", "node")[0]))(t)),
    ("G4_leaf_children", "G4", "a leaf with children", "bern", lambda t: (_poke("edges/ptr", 1, 1)(t), _poke("edges/ptr", 2, 1)(t))),
    ("G4_dup_child", "G4", "a sum lists a child twice", "bern", lambda t: _poke("edges/child", -1, int(M(t, "edges", "child")[-2]))(t)),
    ("G4_kind_names", "G4", "code 2 named gaussian", "bern", lambda t: M(t, "nodes").attrs.__setitem__("kind_names", ["sum", "product", "gaussian"])),
    ("G4_unknown_kind", "G4", "kind code 9 with no feature", "bern", lambda t: (_poke("nodes/kind", 0, 9)(t), M(t, "nodes").attrs.__setitem__("kind_names", ["sum", "product", "bernoulli"] + [""] * 6 + ["poisson"]))),
    ("G5_unsorted", "G5", "a scope not ascending", "gauss", _swap_last_scope),
    ("G5_completeness", "G5", "sum children with different scopes", "bern", lambda t: _set(t, "edges/child", np.where(M(t, "edges", "child") == 5, 0, M(t, "edges", "child")))),
    ("G5_decomposability", "G5", "product children share a variable", "bern", _poke("nodes/scope", 1, 0)),
    ("G6_single_two", "G6", "combine single with two roots", "bern", _two_roots),
    ("G6_dup_root", "G6", "a root listed twice", "mix", lambda t: _set(t, "roots/node", np.repeat(M(t, "roots", "node")[:1], 2))),
    ("G6_no_weight", "G6", "mixture without /roots/weight", "mix", _del("roots/weight")),
    ("G6_weight_single", "G6", "root weight with combine single", "bern", lambda t: _set(t, "roots/weight", np.ones(1))),
    ("G6_weight_sum", "G6", "mixture root weights sum to 1 + 2e-6", "mix", lambda t: _set(t, "roots/weight", np.array([0.25, 0.75 + 2e-6]))),
    ("G6_mixture_scope", "G6", "mixture roots with different scopes", "bern", _mixture_scopes),
    ("G7_unreachable", "G7", "a node no root reaches", "bern", _unreachable),
    ("P1_sum_tol", "P1", "sum weights add up to 1 + 2e-6", "bern", _poke("edges/weight", -1, 0.65 + 2e-6)),
    ("P1_negative", "P1", "a negative sum weight", "bern", lambda t: (_poke("edges/weight", -1, 1.35)(t), _poke("edges/weight", -2, -0.35)(t))),
    ("P1_product_weight", "P1", "a product edge weight 0.5", "bern", _poke("edges/weight", 0, 0.5)),
    ("P2_nan", "P2", "NaN Gaussian mean", "gauss", _poke("leaves/gaussian/mean", 0, np.nan)),
    ("P2_inf_stats", "P2", "+Inf in /stats", "gauss", lambda t: t.members.__setitem__("stats", Group(members={"x": np.array([np.inf])}))),
    ("P2_inf_attr", "P2", "-Inf in an extension attribute", "gauss", _attr("/", "x_bad", np.float64(-np.inf))),
    ("P3_unlisted", "P3", "a leaf missing from its table", "bern", lambda t: (_set(t, "leaves/bernoulli/node", M(t, "leaves", "bernoulli", "node")[1:]), _set(t, "leaves/bernoulli/p", M(t, "leaves", "bernoulli", "p")[1:]))),
    ("P3_twice", "P3", "a leaf listed twice", "bern", _poke("leaves/bernoulli/node", 1, 0)),
    ("P3_unknown_table", "P3", "leaf table of an unknown type", "bern", lambda t: M(t, "leaves").members.__setitem__("poisson", Group(members={"node": np.zeros(0, np.int64)}))),
    ("P3_gauss_discrete", "P3", "Gaussian over a discrete variable", "gauss", lambda t: (_set(t, "variables/cardinality", np.array([2, 0], np.int32)), _set(t, "variables/type", np.array([0, 2], np.uint8)))),
    ("P4_p_range", "P4", "Bernoulli p = 1.5", "bern", _poke("leaves/bernoulli/p", 0, 1.5)),
    ("P4_not_binary", "P4", "Bernoulli over a 3-state variable", "bern", lambda t: (_set(t, "variables/cardinality", np.array([3, 2], np.int32)), _set(t, "variables/type", np.array([1, 0], np.uint8)))),
    ("P5_length", "P5", "categorical with card - 1 values", "cat", lambda t: (_set(t, "leaves/categorical/prob", M(t, "leaves", "categorical", "prob")[1:]), _set(t, "leaves/categorical/prob_ptr", np.maximum(M(t, "leaves", "categorical", "prob_ptr") - 1, 0)))),
    ("P5_sum_tol", "P5", "categorical probabilities add up to 1 + 2e-6", "cat", lambda t: _poke("leaves/categorical/prob", 0, M(t, "leaves", "categorical", "prob")[0] + 2e-6)(t)),
    ("P5_negative", "P5", "a negative probability (row still sums to 1)", "cat", lambda t: _shift("leaves/categorical/prob", 0, 1, -0.1 - M(t, "leaves", "categorical", "prob")[0])(t)),
    ("P6_std_zero", "P6", "Gaussian std = 0", "gauss", _poke("leaves/gaussian/std", 0, 0.0)),
    ("P7_asymmetric", "P7", "covariance asymmetric beyond 1e-9 relative", "mvn", lambda t: _poke("leaves/mvgaussian/cov", 1, M(t, "leaves", "mvgaussian", "cov")[1] * (1 + 1e-7))(t)),
    ("P7_not_pd", "P7", "covariance not positive definite", "mvn", lambda t: (_poke("leaves/mvgaussian/cov", 1, 5.0)(t), _poke("leaves/mvgaussian/cov", 3, 5.0)(t))),
    ("P7_mean_length", "P7", "mean_ptr steps do not match the scope size", "mvn", lambda t: (_set(t, "leaves/mvgaussian/mean", M(t, "leaves", "mvgaussian", "mean")[1:]), _set(t, "leaves/mvgaussian/mean_ptr", np.maximum(M(t, "leaves", "mvgaussian", "mean_ptr") - 1, 0)))),
    ("P8_two_roots", "P8", "Chow-Liu parents with two roots", "clt", _clt_parent([-1, -1, 0])),
    ("P8_cycle", "P8", "Chow-Liu parents with a cycle", "clt", _clt_parent([-1, 2, 1])),
    ("P8_row_sum", "P8", "a CPT row adds up to 1 + 2e-6", "clt", _cpt_row),
    ("P9_value", "P9", "indicator value = cardinality", "cat", _poke("leaves/indicator/value", 0, 3)),
    ("P10_type", "P10", "variable type 3", "cat", _poke("variables/type", 0, 3)),
    ("P10_binary_card", "P10", "binary variable with cardinality 3", "cat", _poke("variables/type", 2, 0)),
    ("P10_dup_names", "P10", "two variables with one name", "cat", _var_names(["a", "b", "a"])),
    ("P10_empty_name", "P10", "an empty variable name", "cat", _var_names(["a", "", "c"])),
    ("P11_count_length", "P11", "/stats/count of the wrong length", "cat", lambda t: t.members.__setitem__("stats", Group(members={"count": np.ones(2)}))),
    ("P11_count_negative", "P11", "a negative count", "cat", lambda t: t.members.__setitem__("stats", Group(members={"count": -np.ones(M(t, "nodes", "kind").size)}))),
    ("P11_learner_name", "P11", "/learner without @name", "cat", lambda t: t.members.__setitem__("learner", Group({"version": "1"}))),
    ("P11_learner_params", "P11", "/learner@params not a JSON object", "cat", lambda t: t.members.__setitem__("learner", Group({"name": "em", "params": "[1, 2]"}))),
    ("X1_vendor_name", "X1", "vendor code 200 named poisson (no x_ prefix)", "vendor", lambda t: (M(t, "nodes").attrs["kind_names"].__setitem__(200, "poisson"), _attr("/", "optional_features", ["leaf:poisson"])(t))),
    ("X1_dup_names", "X1", "kind_names names a kind twice", "bern", lambda t: M(t, "nodes").attrs.__setitem__("kind_names", ["sum", "product", "bernoulli", "bernoulli"])),
    ("X1_unlisted", "X1", "vendor leaf type in no feature list", "vendor", _vendor_unlisted),
    ("X2_required_and_optional", "X2", "a feature both required and optional", "vendor", _vendor_required_too),
    ("X2_no_fallback", "X2", "optional leaf type without /fallback", "vendor", _no_fallback),
    ("X2_target_order", "X2", "fallback target after its node", "vendor", _fallback_self),
    ("X2_target_scope", "X2", "fallback target with another scope", "vendor", _fallback_scope),
    ("X2_target_vendor", "X2", "fallback subgraph holds a vendor node", "vendor", _fallback_vendor_target),
]


def _h5_special(d: Path, base: Group) -> list[tuple[str, str, str]]:
    """Cases built with h5py directly (storage, types, links)."""
    out = []

    def case(stem: str, rule: str, what: str, edit: Callable[[h5py.File], None]) -> None:
        p = d / f"{stem}.h5"
        write_h5(base, p)
        with h5py.File(p, "a") as f:
            edit(f)
        out.append((stem, rule, what))

    def replace(f: h5py.File, path: str, **kw: Any) -> None:
        data = f[path][()]
        del f[path]
        f.create_dataset(path, data=data, **kw)

    case("T1_two_d", "T1", "a 2-D dataset", lambda f: (f.__delitem__("edges/weight"), f.create_dataset("edges/weight", data=np.ones((3, 2)))))
    case("T1_null_dataspace", "T1", "required_features with a null dataspace", lambda f: f.attrs.create("required_features", h5py.Empty(h5py.string_dtype("utf-8", 1))))
    case("T2_enum", "T2", "a boolean (enum) dataset in /stats", lambda f: f.create_dataset("stats/flag", data=np.array([True, False])))
    case("T2_compound", "T2", "a compound dataset in /stats", lambda f: f.create_dataset("stats/pair", data=np.zeros(2, dtype=[("a", "<f8"), ("b", "<i4")])))
    case("T3_vlen", "T3", "variable-length strings", lambda f: (f.__delitem__("variables/name"), f.create_dataset("variables/name", data=["colour", "flag", "größe"], dtype=h5py.string_dtype())))
    case("T3_spacepad", "T3", "space-padded strings", lambda f: _spacepad(f))
    case("T3_utf8", "T3", "invalid UTF-8", lambda f: (f.__delitem__("variables/name"), f.create_dataset("variables/name", data=np.array([b"a\xff", b"b", b"c"], dtype=h5py.string_dtype("utf-8", 2)))))
    case("T3_nul", "T3", "a NUL inside a string", lambda f: (f.__delitem__("variables/name"), f.create_dataset("variables/name", data=np.array([b"a\x00b", b"b", b"c"], dtype=h5py.string_dtype("utf-8", 3)))))
    case("T4_soft_link", "T4", "a soft link", lambda f: f.__setitem__("x_soft", h5py.SoftLink("/edges/weight")))
    case("T4_external_link", "T4", "an external link", lambda f: f.__setitem__("x_ext", h5py.ExternalLink("other.h5", "/w")))
    case("T4_named_type", "T4", "a committed datatype", lambda f: f.__setitem__("x_type", np.dtype("<f8")))
    case("T5_lzf", "T5", "the LZF filter", lambda f: replace(f, "edges/weight", compression="lzf", chunks=True))
    case("T5_scaleoffset", "T5", "the scale-offset filter", lambda f: replace(f, "edges/child", scaleoffset=0, chunks=True))
    case("T6_dataset_attr", "T6", "a dataset with an attribute", lambda f: f["edges/weight"].attrs.__setitem__("scale", np.int32(1)))
    case("L1_declared", "L1", "a dataset declaring 2^28 + 1 elements (never written)", lambda f: f.create_dataset("x_huge", shape=(2**28 + 1,), dtype="u1", chunks=(2**16,), compression="gzip"))
    return out


def _spacepad(f: h5py.File) -> None:
    del f["variables/name"]
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(8)
    tid.set_strpad(h5py.h5t.STR_SPACEPAD)
    tid.set_cset(h5py.h5t.CSET_UTF8)
    sid = h5py.h5s.create_simple((3,))
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_obj_track_times(False)
    ds = h5py.h5d.create(f["variables"].id, b"name", tid, sid, dcpl=dcpl)
    ds.write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([b"colour  ", b"flag    ", b"size    "], dtype="S8"), mtype=tid)


def _bytes_cases(d: Path, base: Group) -> list[tuple[str, str, str]]:
    src = d / "_src.h5"
    write_h5(base, src, chunked=True)
    raw = src.read_bytes()
    out = []
    (d / "C1_empty.h5").write_bytes(b"")
    out.append(("C1_empty", "C1", "an empty file"))
    (d / "C1_signature.h5").write_bytes(b'{"format": "spnc-model"}')
    out.append(("C1_signature", "C1", "not HDF5 (no signature at byte 0)"))
    p = d / "C1_userblock.h5"
    with h5py.File(p, "w", userblock_size=512) as f:
        from spnc.io import hdf5 as h5io
        h5io._write_group(f, base)
    out.append(("C1_userblock", "C1", "a 512-byte user block before the signature"))
    (d / "C2_truncated.h5").write_bytes(raw[: len(raw) * 2 // 3])
    out.append(("C2_truncated", "C2", "truncated to two thirds"))
    with h5py.File(src, "r") as f:
        off = f["edges/weight"].id.get_chunk_info(0).byte_offset
    b = bytearray(raw)
    b[off + 3] ^= 0x10
    (d / "C2_checksum.h5").write_bytes(bytes(b))
    out.append(("C2_checksum", "C2", "a flipped bit in a fletcher32-checked chunk"))
    src.unlink()
    return out


JSON_CASES: list[tuple[str, str, str, Callable[[str], str]]] = [
    ("J1_duplicate_key", "J1", "a duplicate key", lambda s: s.replace('"format": "spnc-model",', '"format": "spnc-model", "format": "spnc-model",', 1)),
    ("J1_nan", "J1", "a NaN token", lambda s: s.replace('"std": [0.5,', '"std": [NaN,', 1)),
    ("J1_bool", "J1", "true inside a numeric array", lambda s: s.replace('"kind": [', '"kind": [true,', 1).replace('"ptr": [0,', '"ptr": [0,0,', 1)),
    ("J1_bom", "J1", "a byte-order mark", lambda s: "\ufeff" + s),
    ("J1_not_object", "J1", "top level is an array", lambda s: "[" + s + "]"),
    ("J3_typed_fixed", "J3", "a fixed dataset in typed form", lambda s: s.replace('"weight": [', '"weight": {"dtype": "f8", "data": [', 1).replace('],\n    "x_after"', ']},\n    "x_after"', 1)),
    ("J3_plain_free", "J3", "a plain array in /stats", lambda s: re.sub(r'"count": \{"dtype": "f8", "data": (\[[^]]*\])\}', r'"count": \1', s)),
    ("J4_typed_fixed_attr", "J4", "a fixed attribute in typed form", lambda s: s.replace('"format_version": [1,1,0]', '"format_version": {"dtype": "u4", "data": [1,1,0]}', 1)),
    ("J4_bad_dtype", "J4", "a typed attribute with dtype f16", lambda s: s.replace('"@x_level": {"dtype": "u1"', '"@x_level": {"dtype": "f16"', 1)),
    ("J5_fraction", "J5", "2.5 in an integer array", lambda s: s.replace('"child": [0,', '"child": [0.5,', 1)),
    ("J5_unsafe_number", "J5", "an integer beyond 2^53 - 1 written as a number", lambda s: s.replace('"@x_level": {"dtype": "u1", "data": 3}', '"@x_level": {"dtype": "u8", "data": 9007199254740993}', 1)),
    ("J5_small_string", "J5", "a small integer written as a string", lambda s: s.replace('"@x_level": {"dtype": "u1", "data": 3}', '"@x_level": {"dtype": "u1", "data": "3"}', 1)),
    ("J5_f4_range", "J5", "an f4 value beyond the binary32 range", lambda s: s.replace('"@x_level": {"dtype": "u1", "data": 3}', '"@x_level": {"dtype": "f4", "data": 1e39}', 1)),
]


def _json_base() -> str:
    t = tree_of(m_gaussian())
    t.members["stats"] = Group(members={"count": np.ones(M(t, "nodes", "kind").size)})
    M(t, "edges").members["x_after"] = np.zeros(1, np.uint8)
    M(t, "edges").attrs["x_level"] = np.uint8(3)
    rehash(t)
    return jsonio.dumps_tree(t)


def write_invalid(out: Path, manifest: list) -> None:
    d = out / "invalid"
    d.mkdir(parents=True)
    bases = {k: f() for k, f in BASES.items()}

    def add(stem: str, ext: str, rule: str, what: str, ten: str = "refuse") -> None:
        ten = "accept" if stem in ACCEPTED_BY_1_0 else ten
        manifest.append({"file": f"invalid/{stem}.{ext}", "expect": "refuse", "rule": rule,
                         "what": what, "reader_1_0": ten})

    for stem, rule, what, base, mutate in TREE_CASES:
        t = copy.deepcopy(bases[base])
        mutate(t)
        try:
            rehash(t)
        except (ValueError, TypeError):
            t.attrs.pop("content_hash", None)
        write_h5(t, d / f"{stem}.h5")
        add(stem, "h5", rule, what)
    t = copy.deepcopy(bases["cat"])
    _poke("edges/weight", -1, M(t, "edges", "weight")[-1] * (1 + 1e-9))(t)   # within tau, hash kept
    write_h5(t, d / "H1_mismatch.h5")
    add("H1_mismatch", "h5", "H1", "sum weights changed by 1e-9 relative after hashing", "accept")
    t = copy.deepcopy(bases["cat"])
    del t.attrs["content_hash"]
    write_h5(t, d / "H1_missing.h5")
    add("H1_missing", "h5", "H1", "a 1.1 file without content hash")
    t = copy.deepcopy(bases["cat"])
    t.attrs["content_hash"] = t.attrs["content_hash"].upper()
    write_h5(t, d / "H1_syntax.h5")
    add("H1_syntax", "h5", "H1", "content hash in upper-case hex", "accept")
    for stem, rule, what in _h5_special(d, bases["cat"]) + _bytes_cases(d, bases["cat"]):
        add(stem, "h5", rule, what)
    base = _json_base()
    for stem, rule, what, edit in JSON_CASES:
        text = edit(base)
        assert text != base, stem
        (d / f"{stem}.json").write_bytes(text.encode("utf-8"))
        add(stem, "json", rule, what)
