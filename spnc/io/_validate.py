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
import json
import warnings
from typing import Any

import numpy as np

from .. import _validation
from .._kinds import LEAF
from ..errors import FormatError
from ..leaves import base as leaf_base
from ._spec import (COMBINE, DEFAULT_LIMITS, FIXED, FORMAT,
                    GROUP_ATTRS, NAME_RE, PORTABLE, PRODUCT, REQUIRED_GROUPS, ROOT_ATTRS,
                    ROOT_ORDER, SUM, VERSION, Group, Limits, dtype_code, err, np_dtype)


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


def parse_json_strict(text: str, path: str) -> Any:
    """json.loads refusing NaN/Infinity and duplicate keys."""
    def bad_constant(tok: str) -> Any:
        raise err(path, f"{tok} is not allowed (not valid JSON)")

    def pairs(kv: list) -> dict:
        d: dict = {}
        for k, v in kv:
            if k in d:
                raise err(path, f"duplicate key {k!r}")
            d[k] = v
        return d
    try:
        return json.loads(text, parse_constant=bad_constant, object_pairs_hook=pairs)
    except FormatError:
        raise
    except RecursionError:
        raise err(path, "JSON nested too deeply") from None
    except ValueError as e:   # JSONDecodeError, int conversion limits
        raise err(path, f"invalid JSON: {e}") from None


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _fmt(v: Any) -> str:
    return repr(v.item()) if isinstance(v, np.generic) else repr(v)


class _Checker:
    def __init__(self, limits: Limits):
        self.limits = limits
        self.total = 0

    # ---- datasets ---------------------------------------------------------------------
    def info(self, obj: Any, path: str) -> tuple[tuple, str | None, str]:
        if isinstance(obj, Group):
            raise err(path, "is a group, expected a dataset")
        if isinstance(obj, list):
            return (len(obj),), "str", ""
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind == "O":
                return obj.shape, None, "object dtype"
            return obj.shape, dtype_code(obj.dtype), f"dtype {obj.dtype}"
        return tuple(obj.shape), obj.code, obj.why

    def dataset(self, g: Group, gpath: str, name: str, code: str | None, *,
                length: int | None = None, why: str = "", required: bool = True) -> Any:
        """Check and read one 1-D dataset; ``code=None`` accepts any portable dtype."""
        path = f"{gpath}/{name}"
        if name not in g.members:
            if required:
                raise err(path, "required dataset is missing")
            return None
        obj = g.members[name]
        shape, dc, desc = self.info(obj, path)
        if len(shape) != 1:
            raise err(path, f"must be a 1-D dataset, got shape {shape}")
        if dc is None or dc not in PORTABLE:
            raise err(path, f"has a non-portable type ({desc or 'unknown'})")
        if code is not None and dc != code:
            raise err(path, f"has dtype {dc}, expected {code}")
        n = int(shape[0])
        if n > self.limits.max_elements:
            raise err(path, f"declares {n} elements, above the limit of {self.limits.max_elements}")
        if length is not None and n != length:
            raise err(path, f"has length {n}, expected {length}{why}")
        self.total += n
        if self.total > self.limits.max_total_elements:
            raise err(path, f"file declares more than {self.limits.max_total_elements} elements in total")
        if isinstance(obj, list):
            data: Any = obj
        elif isinstance(obj, np.ndarray):
            data = obj
        else:
            data = obj.read()
        if dc == "str":
            data = list(data)
            if not all(isinstance(s, str) for s in data):
                raise err(path, "string dataset holds non-string values")
            return data
        data = np.ascontiguousarray(data, dtype=np_dtype(dc))
        if data.shape != (n,):
            raise err(path, f"read shape {data.shape} differs from declared ({n},)")
        return data

    def shape_of(self, g: Group, gpath: str, name: str) -> int:
        path = f"{gpath}/{name}"
        if name not in g.members:
            raise err(path, "required dataset is missing")
        shape, _, _ = self.info(g.members[name], path)
        if len(shape) != 1:
            raise err(path, f"must be a 1-D dataset, got shape {shape}")
        return int(shape[0])

    # ---- value checks -----------------------------------------------------------------
    @staticmethod
    def in_range(a: np.ndarray, path: str, lo: int, hi: int, what: str = "") -> None:
        if a.size == 0:
            return
        bad = (a < lo) | (a >= hi)
        if bad.any():
            i = _first(bad)
            raise err("", f"{path}[{i}] = {int(a[i])} is out of range [{lo}, {hi}){what}")

    def ptr(self, p: np.ndarray, path: str, flat_len: int, flat_path: str) -> None:
        if p.size == 0:
            raise err(path, "pointer array is empty (must have length n + 1)")
        if p[0] != 0:
            raise err("", f"{path}[0] = {int(p[0])}, expected 0")
        d = np.diff(p)
        if (d < 0).any():
            i = _first(d < 0)
            raise err("", f"{path}[{i + 1}] = {int(p[i + 1])} is smaller than {path}[{i}] = {int(p[i])}")
        if p[-1] != flat_len:
            raise err("", f"{path}[{p.size - 1}] = {int(p[-1])} does not match the length "
                          f"{flat_len} of {flat_path}")

    @staticmethod
    def finite(a: np.ndarray, path: str) -> None:
        bad = ~np.isfinite(a)
        if bad.any():
            i = _first(bad)
            raise err("", f"{path}[{i}] = {_fmt(a[i])} is not finite")

    def attr(self, attrs: dict, path: str, name: str, kind: str, required: bool) -> Any:
        apath = f"{path}@{name}" if path != "/" else f"/@{name}"
        if name not in attrs:
            if required:
                raise err(apath, "required attribute is missing")
            return None
        v = attrs[name]
        if kind == "str":
            if not isinstance(v, str):
                raise err(apath, f"must be a string, got {type(v).__name__}")
            if len(v) > self.limits.max_attr_chars:
                raise err(apath, "string attribute is too long")
        elif kind == "strs":
            if not (isinstance(v, list) and all(isinstance(s, str) for s in v)):
                raise err(apath, "must be a list of strings")
            if len(v) > self.limits.max_attr_elements:
                raise err(apath, "attribute has too many elements")
        elif kind == "version":
            if not (isinstance(v, list) and len(v) == 3
                    and all(type(x) is int and 0 <= x < 2**32 for x in v)):
                raise err(apath, f"must be three non-negative integers, got {v!r}")
        return v

    def free_attrs(self, attrs: dict, path: str) -> dict:
        for k, v in attrs.items():
            apath = f"{path}@{k}"
            if not NAME_RE.match(k):
                raise err(apath, "invalid attribute name")
            vals = v if isinstance(v, list) else [v]
            if len(vals) > self.limits.max_attr_elements:
                raise err(apath, "attribute has too many elements")
            for x in vals:
                if isinstance(x, bool) or not isinstance(x, (int, float, str)):
                    raise err(apath, f"unsupported attribute value {type(x).__name__}")
                if isinstance(x, float) and not np.isfinite(x):
                    raise err(apath, f"{x!r} is not finite")
                if isinstance(x, int) and not -2**63 <= x < 2**63:
                    raise err(apath, "integer does not fit in 64 bits")
                if isinstance(x, str) and len(x) > self.limits.max_attr_chars:
                    raise err(apath, "string attribute is too long")
            if isinstance(v, list) and len({type(x) for x in v}) > 1:
                raise err(apath, "list attribute mixes types")
        return dict(attrs)

    def free_group(self, g: Any, path: str, depth: int, allow_groups: bool) -> Group:
        """A group whose datasets may have any portable dtype (stats, learner, x_*)."""
        if not isinstance(g, Group):
            raise err(path, "must be a group")
        if depth > self.limits.max_depth:
            raise err(path, "groups nested too deeply")
        if len(g.members) > self.limits.max_members:
            raise err(path, f"has {len(g.members)} members, above the limit")
        out = Group(self.free_attrs(g.attrs, path))
        for name, m in g.members.items():
            mpath = f"{path}/{name}"
            if not NAME_RE.match(name) or name in ("dtype", "data"):
                raise err(mpath, "invalid or reserved member name")
            if isinstance(m, Group):
                if not allow_groups:
                    raise err(mpath, "sub-groups are not allowed here")
                out.members[name] = self.free_group(m, mpath, depth + 1, True)
            else:
                a = self.dataset(g, path, name, None)
                if not isinstance(a, list) and a.dtype.kind == "f":
                    self.finite(a, mpath)
                out.members[name] = a
        return out


_kind_name = _validation.kind_name


def validate_tree(tree: Group, limits: Limits = DEFAULT_LIMITS) -> Validated:
    """Check a file tree against format 1.x; return the normalised, fully read tree."""
    c = _Checker(limits)
    if not isinstance(tree, Group):
        raise err("/", "file root must be a group / JSON object")
    out = Group()

    # ---- root attributes and version ----------------------------------------------------
    fmt = c.attr(tree.attrs, "/", "format", "str", True)
    if fmt != FORMAT:
        raise err("/@format", f"is {fmt!r}, expected {FORMAT!r}")
    ver = c.attr(tree.attrs, "/", "format_version", "version", True)
    if ver[0] != VERSION[0]:
        raise err("/@format_version", f"is {'.'.join(map(str, ver))}; this reader supports "
                  f"major version {VERSION[0]} only")
    newer = tuple(ver[:2]) > VERSION[:2]
    feats = c.attr(tree.attrs, "/", "required_features", "strs", True)
    known = {f"leaf:{t.name}" for t in leaf_base.leaf_types()}
    for f in feats:
        if f not in known:
            raise err("/@required_features", f"unknown required feature {f!r}; this reader "
                      f"understands {sorted(known)}")
    for name, (kind, req) in ROOT_ATTRS.items():
        v = c.attr(tree.attrs, "/", name, kind, req)
        if v is not None:
            out.attrs[name] = list(v) if isinstance(v, list) else v
    for name in tree.attrs:
        if name not in ROOT_ATTRS:
            if name.startswith("x_"):
                out.attrs[name] = c.free_attrs({name: tree.attrs[name]}, "/")[name]
            elif not newer:
                raise err(f"/@{name}", "unknown attribute (not part of format 1.0)")

    if len(tree.members) > limits.max_members:
        raise err("/", "too many members")
    for name in tree.members:
        if name not in ROOT_ORDER and not name.startswith("x_"):
            if not newer:
                raise err(f"/{name}", "unknown member (not part of format 1.0)")
            warnings.warn(f"ignoring /{name} (from a newer format minor version)", stacklevel=3)
    for name in REQUIRED_GROUPS:
        if name not in tree.members:
            raise err(f"/{name}", "required group is missing")
        if not isinstance(tree.members[name], Group):
            raise err(f"/{name}", "must be a group")

    def known_group(name: str) -> Group:
        g = tree.members[name]
        path = f"/{name}"
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
                if an.startswith("x_"):
                    og.attrs[an] = c.free_attrs({an: g.attrs[an]}, path)[an]
                elif not newer:
                    raise err(f"{path}@{an}", "unknown attribute (not part of format 1.0)")
        allowed = FIXED.get(name, {})
        for mn in g.members:
            if mn not in allowed and name != "leaves" and not newer and not mn.startswith("x_"):
                raise err(f"{path}/{mn}", "unknown member (not part of format 1.0)")
        for mn, m in g.members.items():
            if mn.startswith("x_"):
                og.members[mn] = c.free_group(m, f"{path}/{mn}", 1, True) if isinstance(m, Group) \
                    else c.dataset(g, path, mn, None)
        out.members[name] = og
        return og

    # ---- variables ----------------------------------------------------------------------
    gv = tree.members["variables"]
    ov = known_group("variables")
    V = c.shape_of(gv, "/variables", "type")
    if not 1 <= V <= limits.max_vars:
        raise err("/variables/type", f"declares {V} variables; need 1..{limits.max_vars}")
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
        seen: dict[str, int] = {}
        for i, s in enumerate(names):
            if not s or len(s) > 1024 or "\x00" in s:
                raise err("", f"/variables/name[{i}] = {s[:40]!r} is empty, too long or has NUL")
            if s in seen:
                raise err("", f"/variables/name[{i}] = {s!r} repeats /variables/name[{seen[s]}]")
            seen[s] = i
        ov.members["name"] = names

    # ---- nodes --------------------------------------------------------------------------
    gn = tree.members["nodes"]
    on = known_group("nodes")
    N = c.shape_of(gn, "/nodes", "kind")
    if not 1 <= N <= limits.max_nodes:
        raise err("/nodes/kind", f"declares {N} nodes; need 1..{limits.max_nodes}")
    kind = c.dataset(gn, "/nodes", "kind", "u1")
    kind_names = on.attrs["kind_names"]
    used = np.flatnonzero(np.bincount(kind, minlength=256))
    for code in used:
        name = _kind_name(int(code))
        if name is None:
            i = _first(kind == code)
            label = f" ({kind_names[code]!r})" if code < len(kind_names) else ""
            raise err("", f"/nodes/kind[{i}] = {int(code)}{label} is not a known node kind")
        if code >= len(kind_names) or kind_names[code] != name:
            got = kind_names[code] if code < len(kind_names) else "nothing"
            raise err("/nodes@kind_names", f"code {int(code)} is named {got!r}, but this reader "
                      f"knows it as {name!r}")
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

    # ---- edges --------------------------------------------------------------------------
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
    child32 = child.astype(np.int32)
    sp, sc = _validation.derive_scopes(kind, ptr, child32, scope_ptr, scope, _FILE)
    _validation.check_stored_scopes(sp, sc, scope_ptr, scope, _FILE)
    oe.members.update(ptr=ptr, child=child, weight=weight)

    # ---- leaves -------------------------------------------------------------------------
    gl = tree.members["leaves"]
    ol = known_group("leaves")
    listed = np.zeros(N, dtype=np.int64)
    tables: dict[str, Any] = {}
    node_of_scope = None
    for lname, tg in gl.members.items():
        tpath = f"/leaves/{lname}"
        if lname.startswith("x_"):
            continue
        if not isinstance(tg, Group):
            raise err(tpath, "must be a group")
        try:
            cls = leaf_base.leaf_type_by_name(lname)
        except FormatError as e:
            raise err(tpath, str(e)) from None
        if len(tg.members) > limits.max_members:
            raise err(tpath, "too many members")
        L = c.shape_of(tg, tpath, "node")
        node = c.dataset(tg, tpath, "node", "i8")
        c.in_range(node, f"{tpath}/node", 0, N)
        wrong = kind[node] != cls.code
        if wrong.any():
            i = _first(wrong)
            raise err("", f"{tpath}/node[{i}] = {int(node[i])} has kind {int(kind[node[i]])} "
                          f"({_kind_name(int(kind[node[i]]))}), not {lname}")
        np.add.at(listed, node, 1)
        if (listed[node] > 1).any():
            i = _first(listed[node] > 1)
            raise err("", f"{tpath}/node[{i}] = {int(node[i])} is listed more than once")
        want = getattr(cls, "param_dtypes", None)
        # declared shapes first: pointer arrays and their flat partners
        arrays: dict[str, np.ndarray] = {}
        names_ = [m for m in tg.members if m != "node"]
        if want is not None:
            for m in want:
                if m not in tg.members:
                    raise err(f"{tpath}/{m}", "required dataset is missing")
            for m in names_:
                if m not in want:
                    raise err(f"{tpath}/{m}", f"unknown dataset for leaf type {lname}")
        for m in names_:
            if not NAME_RE.match(m):
                raise err(f"{tpath}/{m}", "invalid dataset name")
            if isinstance(tg.members[m], Group):
                raise err(f"{tpath}/{m}", "is a group, expected a dataset")
        flat_of_ptr = {m: m[:-4] for m in names_ if m.endswith("_ptr")}
        for p, f in flat_of_ptr.items():
            if f not in tg.members:
                raise err(f"{tpath}/{f}", f"missing (pointed into by {tpath}/{p})")
        for m in names_:
            if m in flat_of_ptr:
                pa = c.dataset(tg, tpath, m, "i8", length=L + 1, why=" (n_leaves + 1)")
                flen = c.shape_of(tg, tpath, flat_of_ptr[m])
                c.ptr(pa, f"{tpath}/{m}", flen, f"{tpath}/{flat_of_ptr[m]}")
                arrays[m] = pa
        for m in names_:
            if m in flat_of_ptr:
                continue
            code = None if want is None else want[m]
            ln = None if m in flat_of_ptr.values() else L
            shape, dc, desc = c.info(tg.members[m], f"{tpath}/{m}")
            if code is None:
                if dc not in ("i4", "f8"):
                    raise err(f"{tpath}/{m}", f"has dtype {dc or desc}; leaf parameters are i4 or f8")
                code = dc
            a = c.dataset(tg, tpath, m, code, length=ln, why=" (one per leaf)")
            if a.dtype.kind == "f":
                c.finite(a, f"{tpath}/{m}")
            arrays[m] = a
        if cls.discrete and L:
            if node_of_scope is None:
                node_of_scope = np.repeat(np.arange(N, dtype=np.int64), slen)
            mine = np.zeros(N, dtype=bool)
            mine[node] = True
            bad = mine[node_of_scope] & (card[scope] == 0)
            if bad.any():
                j = _first(bad)
                raise err(tpath, f"node {int(node_of_scope[j])} uses real variable "
                          f"{int(scope[j])}, but {lname} leaves need discrete variables")
        scopes = [scope[scope_ptr[n]:scope_ptr[n + 1]] for n in node.tolist()]
        try:
            table = cls.from_arrays(node, scopes, arrays)
            table.validate(card)
        except FormatError as e:
            raise err(tpath, str(e)) from None
        except (ValueError, IndexError, TypeError, ArithmeticError, KeyError) as e:
            raise err(tpath, str(e) or type(e).__name__) from None
        tables[lname] = table
        ol.members[lname] = Group(members={"node": node, **arrays})
    missing = (kind >= LEAF) & (listed == 0)
    if missing.any():
        i = _first(missing)
        raise err("/leaves", f"leaf node {i} ({_kind_name(int(kind[i]))}) is missing from "
                  f"/leaves/{_kind_name(int(kind[i]))}")

    # ---- roots --------------------------------------------------------------------------
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
    rw = c.dataset(gr, "/roots", "weight", "f8", length=R, why=" (one per root)",
                   required=combine == "mixture")
    if rw is not None:
        if combine != "mixture":
            raise err("/roots/weight", "is only allowed with @combine = 'mixture'")
        c.finite(rw, "/roots/weight")
        orr.members["weight"] = rw
    orr.members["node"] = roots
    _validation.check_roots(roots, combine, rw, N, sp, sc, ptr, child32, _FILE, tol=limits.weight_tol)

    # ---- stats, learner, extensions -----------------------------------------------------
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
        learner_params = parse_json_strict(lg.attrs["params"], "/learner@params")
        if not isinstance(learner_params, dict):
            raise err("/learner@params", "must be a JSON object")
        out.members["learner"] = lg
    for name, m in tree.members.items():
        if name.startswith("x_"):
            out.members[name] = c.free_group(m, f"/{name}", 1, True) if isinstance(m, Group) \
                else c.dataset(tree, "", name, None)
    return Validated(out, N, E, V, tables, learner_params)
