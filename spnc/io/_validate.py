"""File-level checks shared by the HDF5 and JSON readers (formats/spnc-hdf5.md §7).

:func:`validate_tree` takes a tree whose datasets are numpy arrays, string lists, or lazy
handles (objects with ``shape``, ``code``, ``why`` and ``read()``, as made by the HDF5
reader). It checks declared shapes against limits and against each other *before* reading
each dataset, then the values, and returns a :class:`Validated` result whose tree holds only
numpy arrays in native byte order. Every problem raises one :class:`FormatError` naming the
path inside the file.
"""
from __future__ import annotations

import dataclasses
import re
import warnings
from typing import Any

import numpy as np

from .. import _validation
from .._kinds import LEAF
from .._text import check_unique
from ..errors import FormatError
from ..leaves import base as leaf_base
from ._checker import _Checker, _first, _kind_name, parse_json_strict
from ._hash import content_hash
from ._leafcheck import _check_reachable, _fallback, _kind_map, _leaf_tables, _reach
from ._spec import (COMBINE, DEFAULT_LIMITS, FEATURE_RE, FIXED, FORMAT, GROUP_ATTRS,
                    NEW_IN_1_1, PRODUCT, REQUIRED_GROUPS, ROOT_ATTRS, ROOT_ORDER, SUM, VERSION,
                    Group, Limits, err)

__all__ = ["Validated", "validate_tree", "parse_json_strict", "_reach"]


#: structural checks (spnc._validation) name the file's datasets and raise FormatError
_FILE = _validation.Names(kind="/nodes/kind", child_ptr="/edges/ptr", child="/edges/child",
                          weight="/edges/weight", scope="/nodes/scope", roots="/roots/node",
                          structure=FormatError, scope_error=FormatError)


@dataclasses.dataclass
class Validated:
    """A checked file: the normalised tree plus decoded pieces the model builder needs."""

    tree: Group
    n_nodes: int
    n_edges: int
    n_vars: int
    tables: dict[str, Any]          # leaf name -> LeafType instance (validated)
    learner_params: dict[str, Any] | None
    kind: np.ndarray | None = None  # node kinds in this reader's codes (vendor codes mapped)
    fallback: np.ndarray | None = None  # node -> fallback target (-1: none), if /fallback


def validate_tree(tree: Group, limits: Limits = DEFAULT_LIMITS) -> Validated:
    """Check a file tree against format 1.x; return the normalised, fully read tree."""
    c = _Checker(limits)
    if not isinstance(tree, Group):
        raise err("/", "file root must be a group / JSON object")
    out = Group()

    # ---- root attributes and version (V1-V4) --------------------------------------------
    fmt = c.attr(tree.attrs, "/", "format", "str", True)
    if fmt != FORMAT:
        raise err("/@format", f"is {fmt!r}, expected {FORMAT!r}")
    ver = c.attr(tree.attrs, "/", "format_version", "version", True)
    if ver[0] != VERSION[0]:
        raise err("/@format_version", f"is {'.'.join(map(str, ver.tolist()))}; this reader "
                  f"supports major version {VERSION[0]} only")
    minor = int(ver[1])
    newer = minor > VERSION[1]
    vname = f"format 1.{minor}" if not newer else ""

    def unknown(path: str, what: str) -> None:
        """V4: an unknown name is an error unless the file is newer than this reader."""
        if not newer:
            raise err(path, f"unknown {what} (not part of {vname})")

    for name in tree.attrs:
        if name in NEW_IN_1_1 and minor == 0:
            raise err(f"/@{name}", "is not part of format 1.0 (the file says 1.0)")
    for name in tree.members:
        if name in NEW_IN_1_1 and minor == 0:
            raise err(f"/{name}", "is not part of format 1.0 (the file says 1.0)")
    for name, (kind, req) in ROOT_ATTRS.items():
        v = c.attr(tree.attrs, "/", name, kind, req)
        if v is not None:
            out.attrs[name] = list(v) if isinstance(v, list) else v
    for name in tree.attrs:
        if name not in ROOT_ATTRS:
            if not name.startswith("x_"):
                unknown(f"/@{name}", "attribute")
            out.attrs[name] = c.free_attrs({name: tree.attrs[name]}, "/")[name]
    required = out.attrs["required_features"]
    optional = out.attrs.get("optional_features", [])
    for an, fl in (("required_features", required), ("optional_features", optional)):
        for f in fl:
            if not FEATURE_RE.match(f):
                raise err(f"/@{an}", f"feature {f!r} is not of the form 'leaf:<name>'")
        if len(set(fl)) != len(fl):
            raise err(f"/@{an}", "lists a feature twice")
    if set(required) & set(optional):
        raise err("/@optional_features", f"feature {sorted(set(required) & set(optional))[0]!r} "
                  "is also required")
    known = {f"leaf:{t.name}" for t in leaf_base.leaf_types()}
    for f in required:
        if f not in known:
            raise err("/@required_features", f"unknown required feature {f!r}; this reader "
                      f"understands {sorted(known)}")
    if "content_hash" in out.attrs:
        hv = out.attrs["content_hash"]
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", hv):
            raise err("/@content_hash", f"{hv[:80]!r} is not 'sha256:' and 64 lowercase hex digits")

    if len(tree.members) > limits.max_members:
        raise err("/", "too many members")
    for name in tree.members:
        if name not in ROOT_ORDER and not name.startswith("x_"):
            unknown(f"/{name}", "member")
            warnings.warn(f"ignoring /{name} (from a newer format minor version)", stacklevel=3)
    for name in REQUIRED_GROUPS:
        if name not in tree.members:
            raise err(f"/{name}", "required group is missing")
        if not isinstance(tree.members[name], Group):
            raise err(f"/{name}", "must be a group")

    def known_group(name: str) -> Group:
        g = tree.members[name]
        path = f"/{name}"
        if not isinstance(g, Group):
            raise err(path, "must be a group")
        if len(g.members) > limits.max_members:
            raise err(path, f"has {len(g.members)} members, above the limit")
        og = Group()
        spec = GROUP_ATTRS.get(name, {})
        for an, (kind, req) in spec.items():
            v = c.attr(g.attrs, path, an, kind, req)
            if v is not None:
                og.attrs[an] = v
        for an in g.attrs:
            if an not in spec:
                if not an.startswith("x_"):
                    unknown(f"{path}@{an}", "attribute")
                og.attrs[an] = c.free_attrs({an: g.attrs[an]}, path)[an]
        allowed = FIXED.get(name, {})
        for mn, m in g.members.items():
            if mn in allowed or name == "leaves":
                continue
            if not mn.startswith("x_"):
                unknown(f"{path}/{mn}", "member")
            og.members[mn] = c.free_group(m, f"{path}/{mn}", 2, True) if isinstance(m, Group) \
                else c.free_dataset(g, path, mn)
        out.members[name] = og
        return og

    def sized(name: str, member: str, most: int) -> tuple[Group, Group, int]:
        """A top-level group, its checked copy and the length of ``member`` (1..most)."""
        g, og = tree.members[name], known_group(name)
        n = c.shape_of(g, f"/{name}", member)
        if not 1 <= n <= most:
            raise err(f"/{name}/{member}", f"declares {n} {name}; need 1..{most}")
        return g, og, n

    # ---- variables (P10) ----------------------------------------------------------------
    gv, ov, V = sized("variables", "type", limits.max_vars)
    vtype = c.dataset(gv, "/variables", "type", "u1")
    card = c.dataset(gv, "/variables", "cardinality", "i4", length=V, why=" (one per variable)")
    names = c.dataset(gv, "/variables", "name", "str", length=V, why=" (one per variable)",
                      required=False)
    c.in_range(vtype, "/variables/type", 0, 3, " (0 binary, 1 categorical, 2 real)")
    for code, ok, want in ((0, card == 2, "2"), (1, card >= 2, ">= 2"), (2, card == 0, "0")):
        bad = (vtype == code) & ~ok
        if bad.any():
            i = _first(bad)
            raise err("", f"/variables/cardinality[{i}] = {int(card[i])}: a "
                          f"{('binary', 'categorical', 'real')[code]} variable needs {want}")
    ov.members["type"], ov.members["cardinality"] = vtype, card
    if names is not None:
        for i, s in enumerate(names):
            if not s or len(s.encode("utf-8")) > limits.max_name_bytes:
                raise err("", f"/variables/name[{i}] = {s[:40]!r} is empty or longer than "
                              f"{limits.max_name_bytes} bytes")
        check_unique(names, lambda s, i, j: err("", f"/variables/name[{j}] = {s!r} repeats /variables/name[{i}]"))
        ov.members["name"] = names

    # ---- nodes: kinds (G4, X1) and scopes (G5) --------------------------------------------
    gn, on, N = sized("nodes", "kind", limits.max_nodes)
    kind = c.dataset(gn, "/nodes", "kind", "u1")
    kmap, fallback_codes = _kind_map(kind, on.attrs["kind_names"], required, optional)
    mkind = kmap[kind]
    scope_ptr = c.dataset(gn, "/nodes", "scope_ptr", "i8", length=N + 1, why=" (n_nodes + 1)")
    n_scope = c.shape_of(gn, "/nodes", "scope")
    c.ptr(scope_ptr, "/nodes/scope_ptr", n_scope, "/nodes/scope")
    scope = c.dataset(gn, "/nodes", "scope", "i4")
    c.in_range(scope, "/nodes/scope", 0, V)
    slen = np.diff(scope_ptr)
    if (slen == 0).any():
        raise err("/nodes/scope_ptr", f"node {_first(slen == 0)} has an empty scope")
    starts = np.zeros(scope.size, dtype=bool)
    starts[scope_ptr[:-1]] = True
    if scope.size > 1:
        bad = (np.diff(scope) <= 0) & ~starts[1:]
        if bad.any():
            i = _first(bad) + 1
            raise err("", f"/nodes/scope[{i}] = {int(scope[i])} is not above the previous "
                          "variable (scopes must be strictly ascending)")
    on.members.update(kind=kind, scope_ptr=scope_ptr, scope=scope)

    # ---- edges (G1-G5, P1) ----------------------------------------------------------------
    ge = tree.members["edges"]
    oe = known_group("edges")
    ptr = c.dataset(ge, "/edges", "ptr", "i8", length=N + 1, why=" (n_nodes + 1)")
    E = c.shape_of(ge, "/edges", "child")
    c.ptr(ptr, "/edges/ptr", E, "/edges/child")
    child = c.dataset(ge, "/edges", "child", "i8")
    weight = c.dataset(ge, "/edges", "weight", "f8", length=E, why=" (one per edge)")
    c.in_range(child, "/edges/child", 0, N)
    # the structural rules are the arrays' own (spnc._validation), named by file path
    parent = _validation.check_edges(kind, ptr, child, _FILE)
    _validation.check_weights(kind, ptr, weight, parent, _FILE, tol=limits.weight_tol)
    leaf = kind >= LEAF
    # completeness / decomposability by additive hashing of scopes with random 64-bit keys
    rng = np.random.default_rng()
    keys = rng.integers(0, 2**63 - 1, size=V, dtype=np.int64, endpoint=True).view(np.uint64)
    with np.errstate(over="ignore"):
        h = np.add.reduceat(keys[scope], scope_ptr[:-1])
        internal = np.flatnonzero(~leaf)
        if internal.size:
            ch_h = np.add.reduceat(h[child], ptr[internal])
            ch_n = np.add.reduceat(slen[child], ptr[internal])
            is_sum = kind[internal] == SUM
            e_bad = (kind[parent] == SUM) & ((h[child] != h[parent]) | (slen[child] != slen[parent]))
            if e_bad.any():
                k = _first(e_bad)
                raise err("/nodes/scope", f"sum node {int(parent[k])} and its child "
                          f"{int(child[k])} have different scopes (completeness)")
            p_bad = ~is_sum & ((ch_h != h[internal]) | (ch_n != slen[internal]))
            if p_bad.any():
                n = int(internal[_first(p_bad)])
                raise err("/nodes/scope", f"the children of product node {n} do not split its "
                          "scope into disjoint parts (decomposability)")
    oe.members.update(ptr=ptr, child=child, weight=weight)

    # ---- leaves (P3-P9) -------------------------------------------------------------------
    tables = _leaf_tables(c, tree.members["leaves"], known_group("leaves"), kind, mkind,
                          on.attrs["kind_names"], fallback_codes, card, scope_ptr, scope, slen, N, unknown)

    # ---- roots (G6) ---------------------------------------------------------------------
    gr = tree.members["roots"]
    orr = known_group("roots")
    combine = orr.attrs["combine"]
    if combine not in COMBINE:
        raise err("/roots@combine", f"is {combine!r}; expected one of {', '.join(COMBINE)}")
    R = c.shape_of(gr, "/roots", "node")
    if not 1 <= R <= N:
        raise err("/roots/node", f"has {R} roots; need 1..{N}")
    roots = c.dataset(gr, "/roots", "node", "i8")
    c.in_range(roots, "/roots/node", 0, N)
    if np.unique(roots).size != R:
        raise err("/roots/node", "lists a node twice")
    if combine == "single" and R != 1:
        raise err("/roots/node", f"has {R} roots but @combine is 'single'")
    rw = c.dataset(gr, "/roots", "weight", "f8", length=R, why=" (one per root)",
                   required=combine == "mixture")
    if rw is not None:
        if combine != "mixture":
            raise err("/roots/weight", "is only allowed with @combine = 'mixture'")
        c.finite(rw, "/roots/weight")
        if (rw < 0).any() or abs(rw.sum() - 1.0) > limits.weight_tol:
            raise err("/roots/weight", f"must be non-negative and add up to 1, got {rw.tolist()[:8]}")
        if ((h[roots] != h[roots[0]]) | (slen[roots] != slen[roots[0]])).any():
            raise err("/roots/node", "mixture roots must all have the same scope")
        orr.members["weight"] = rw
    orr.members["node"] = roots

    # ---- fallback (X2) and reachability (G7) --------------------------------------------
    fb = None
    if "fallback" in tree.members:
        fb = _fallback(c, tree, out, kind, fallback_codes, h, slen, ptr, child, N)
    elif fallback_codes:
        raise err("/fallback", "is missing, but optional leaf types need fallback nodes")
    _check_reachable(N, ptr, child, roots, fb)

    # ---- stats, learner, extensions (P11) -----------------------------------------------
    learner_params = None
    if "stats" in tree.members:
        st = c.free_group(tree.members["stats"], "/stats", 1, False)
        cnt = st.members.get("count")
        if cnt is not None:
            if isinstance(cnt, list) or cnt.dtype != np.float64 or cnt.size != N:
                raise err("/stats/count", "must be f8 with one value per node")
            if (cnt < 0).any():
                raise err("", f"/stats/count[{_first(cnt < 0)}] is negative")
        out.members["stats"] = st
    if "learner" in tree.members:
        gl_ = tree.members["learner"]
        if not isinstance(gl_, Group):
            raise err("/learner", "must be a group")
        lg = c.free_group(gl_, "/learner", 1, False)
        for an, (kind_, req) in GROUP_ATTRS["learner"].items():
            c.attr(lg.attrs, "/learner", an, kind_, req)
        if "params" in lg.attrs:
            learner_params = parse_json_strict(lg.attrs["params"], "/learner@params")
            if not isinstance(learner_params, dict):
                raise err("/learner@params", "must be a JSON object")
        out.members["learner"] = lg
    for name, m in tree.members.items():
        if name not in ROOT_ORDER:
            out.members[name] = c.free_group(m, f"/{name}", 1, True) if isinstance(m, Group) \
                else c.free_dataset(tree, "", name)

    # ---- content hash (H1) --------------------------------------------------------------
    if minor >= 1 and "content_hash" not in out.attrs:
        raise err("/@content_hash", "required attribute is missing (format 1.1 files carry "
                  "a content hash)")
    if "content_hash" in out.attrs:
        got = content_hash(out)
        if got != out.attrs["content_hash"]:
            raise err("/@content_hash", f"does not match the file content (computed {got}); "
                      "the file was changed or damaged after it was written")
    return Validated(out, N, E, V, tables, learner_params, mkind, fb)
