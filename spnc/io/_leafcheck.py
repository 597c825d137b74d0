"""Kind codes and features (§4, §10), leaf tables (§5) and fallback nodes (§10.2)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .._kinds import LEAF
from ..errors import FormatError
from ..leaves import base as leaf_base
from ._spec import BUILTIN_LEAVES, LEAF_DTYPES, NAME_RE, VENDOR_NAME_RE, Group, err
from ._checker import _Checker, _first, _kind_name


def _kind_map(kind: np.ndarray, kind_names: list[str], required: list[str],
              optional: list[str]) -> tuple[np.ndarray, set[int]]:
    """File kind code -> this reader's code (X1), and the file codes of optional leaf types
    this reader does not know (evaluated through /fallback)."""
    if len(kind_names) > 256:
        raise err("/nodes@kind_names", f"has {len(kind_names)} entries; codes stop at 255")
    named = [n for n in kind_names if n]
    if len(set(named)) != len(named):
        raise err("/nodes@kind_names", "names a kind twice")
    kmap = np.arange(256, dtype=np.uint8)
    fallback_codes: set[int] = set()
    feats = set(required) | set(optional)
    for code in np.flatnonzero(np.bincount(kind, minlength=256)).tolist():
        name = kind_names[code] if code < len(kind_names) else ""
        where = f"/nodes/kind[{_first(kind == code)}] = {code}"
        std = _kind_name(code) if code < 128 else None
        if std is not None and std in ("sum", "product", *BUILTIN_LEAVES):
            if name != std:
                raise err("/nodes@kind_names", f"code {code} is named {name!r}, but the format "
                          f"defines it as {std!r}")
            continue
        if code >= 128 and not VENDOR_NAME_RE.match(name):
            raise err("", f"{where}: vendor kind codes need an 'x_<vendor>_<type>' name in "
                          f"/nodes@kind_names, got {name!r}")
        if code < 128 and (not name or name.startswith("x_")):
            raise err("", f"{where} ({name!r}) is not a known node kind")
        if f"leaf:{name}" not in feats:
            raise err("", f"{where}: leaf type {name!r} is not listed in @required_features "
                          "or @optional_features")
        try:
            cls = leaf_base.leaf_type_by_name(name)
        except FormatError:
            cls = None
        if cls is not None and (code >= 128 or cls.code == code):
            kmap[code] = cls.code
        elif f"leaf:{name}" in optional:
            fallback_codes.add(code)
        else:
            raise err("", f"{where} ({name!r}) is not a known node kind")
    return kmap, fallback_codes


def _leaf_tables(c: _Checker, gl: Group, ol: Group, kind: np.ndarray, mkind: np.ndarray,
                 kind_names: list[str], fallback_codes: set[int], card: np.ndarray,
                 scope_ptr: np.ndarray, scope: np.ndarray, slen: np.ndarray, N: int,
                 unknown: Any = None) -> dict:
    listed = np.zeros(N, dtype=np.int64)
    tables: dict[str, Any] = {}
    skip = {kind_names[k] for k in fallback_codes}
    node_of_scope = None
    for lname, tg in gl.members.items():
        tpath = f"/leaves/{lname}"
        if lname in skip or (lname.startswith("x_") and lname not in kind_names):
            ol.members[lname] = c.free_group(tg, tpath, 2, lname not in skip) \
                if isinstance(tg, Group) else c.free_dataset(gl, "/leaves", lname)
            continue
        if not isinstance(tg, Group):
            raise err(tpath, "must be a group")
        try:
            cls = leaf_base.leaf_type_by_name(lname)
        except FormatError as e:
            raise err(tpath, str(e)) from None
        if len(tg.members) > c.limits.max_members:
            raise err(tpath, "too many members")
        L = c.shape_of(tg, tpath, "node")
        node = c.dataset(tg, tpath, "node", "i8")
        c.in_range(node, f"{tpath}/node", 0, N)
        wrong = mkind[node] != cls.code
        if wrong.any():
            i = _first(wrong)
            raise err("", f"{tpath}/node[{i}] = {int(node[i])} has kind {int(kind[node[i]])} "
                          f"({kind_names[kind[node[i]]] if kind[node[i]] < len(kind_names) else '?'}), "
                          f"not {lname}")
        np.add.at(listed, node, 1)
        if (listed[node] > 1).any():
            i = _first(listed[node] > 1)
            raise err("", f"{tpath}/node[{i}] = {int(node[i])} is listed more than once")
        want = LEAF_DTYPES.get(lname) if BUILTIN_LEAVES.get(lname) == cls.code else None
        want = want or getattr(cls, "param_dtypes", None)
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
        if L:
            if node_of_scope is None:
                node_of_scope = np.repeat(np.arange(N, dtype=np.int64), slen)
            mine = np.zeros(N, dtype=bool)
            mine[node] = True
            bad = mine[node_of_scope] & ((card[scope] == 0) if cls.discrete else (card[scope] != 0))
            if bad.any():
                j = _first(bad)
                raise err(tpath, f"node {int(node_of_scope[j])} uses "
                          f"{'real' if cls.discrete else 'discrete'} variable {int(scope[j])}, but "
                          f"{lname} leaves need {'discrete' if cls.discrete else 'real'} variables")
        scopes = [scope[scope_ptr[n]:scope_ptr[n + 1]] for n in node.tolist()]
        try:
            table = cls.from_arrays(node, scopes, arrays)
            table.validate(card)
        except FormatError as e:
            raise err(tpath, str(e)) from None
        except (ValueError, IndexError, TypeError, ArithmeticError, KeyError) as e:
            raise err(tpath, str(e) or type(e).__name__) from None
        tables[lname] = table
        attrs = {}
        for an in tg.attrs:                  # x_* attributes are kept (§9); others are V4's
            if not an.startswith("x_") and unknown is not None:
                unknown(f"{tpath}@{an}", "attribute")
            attrs[an] = c.free_attrs({an: tg.attrs[an]}, tpath)[an]
        ol.members[lname] = Group(attrs=attrs, members={"node": node, **arrays})
    unknown = np.isin(kind, sorted(fallback_codes))
    missing = (kind >= LEAF) & ~unknown & (listed == 0)
    if missing.any():
        i = _first(missing)
        raise err("/leaves", f"leaf node {i} ({kind_names[kind[i]]}) is missing from "
                  f"/leaves/{kind_names[kind[i]]}")
    return tables


def _fallback(c: _Checker, tree: Group, out: Group, kind: np.ndarray, fallback_codes: set[int],
              h: np.ndarray, slen: np.ndarray, ptr: np.ndarray, child: np.ndarray,
              N: int) -> np.ndarray:
    """X2: check /fallback; return target per node (-1 where none)."""
    g = tree.members["fallback"]
    if not isinstance(g, Group):
        raise err("/fallback", "must be a group")
    og = Group()
    if g.attrs or set(g.members) - {"node", "target"}:
        extra = sorted(set(g.attrs) | (set(g.members) - {"node", "target"}))
        raise err("/fallback", f"holds unknown members or attributes {extra}")
    F = c.shape_of(g, "/fallback", "node")
    node = c.dataset(g, "/fallback", "node", "i8")
    target = c.dataset(g, "/fallback", "target", "i8", length=F, why=" (one per fallback node)")
    c.in_range(node, "/fallback/node", 0, N)
    c.in_range(target, "/fallback/target", 0, N)
    if np.unique(node).size != F:
        raise err("/fallback/node", "lists a node twice")
    bad = kind[node] < 8
    if bad.any():
        i = _first(bad)
        raise err("", f"/fallback/node[{i}] = {int(node[i])} is not a leaf of a non-standard type")
    bad = target >= node
    if bad.any():
        i = _first(bad)
        raise err("", f"/fallback/target[{i}] = {int(target[i])} does not precede its node {int(node[i])}")
    bad = (h[target] != h[node]) | (slen[target] != slen[node])
    if bad.any():
        i = _first(bad)
        raise err("", f"/fallback/target[{i}] = {int(target[i])} has a different scope from node {int(node[i])}")
    fb = np.full(N, -1, dtype=np.int64)
    fb[node] = target
    for code in fallback_codes:
        lack = (kind == code) & (fb < 0)
        if lack.any():
            raise err("/fallback/node", f"node {_first(lack)} of optional leaf type code {code} "
                      "has no fallback")
    seen = _reach(N, ptr, child, target)
    bad = seen & (kind > 7)
    if bad.any():
        raise err("/fallback/target", f"node {_first(bad)} under a fallback target is not of a "
                  "standard type")
    og.members.update(node=node, target=target)
    out.members["fallback"] = og
    return fb


def _reach(N: int, ptr: np.ndarray, child: np.ndarray, start: np.ndarray,
           fb: np.ndarray | None = None) -> np.ndarray:
    """Nodes reachable from ``start`` along child edges (and fallback links)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order
    deg = np.diff(ptr)
    if fb is not None:   # a node with a fallback gets its target as one more child
        extra = (fb >= 0).astype(np.int64)
        nptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(deg + extra, out=nptr[1:])
        idx = np.empty(nptr[-1], dtype=np.int64)
        pos = np.repeat(nptr[:-1], deg) + (np.arange(child.size) - np.repeat(ptr[:-1], deg))
        idx[pos] = child
        has = np.flatnonzero(extra)
        idx[nptr[has + 1] - 1] = fb[has]
        ptr, child = nptr, idx
    R = start.size
    indptr = np.concatenate([ptr, [ptr[-1] + R]])
    indices = np.concatenate([child, start])
    g = csr_matrix((np.ones(indices.size, dtype=np.int8), indices, indptr), shape=(N + 1, N + 1))
    order = breadth_first_order(g, N, directed=True, return_predecessors=False)
    seen = np.zeros(N + 1, dtype=bool)
    seen[order] = True
    return seen[:N]


def _check_reachable(N: int, ptr: np.ndarray, child: np.ndarray, roots: np.ndarray,
                     fb: np.ndarray | None = None) -> None:
    """G7: every node must be reachable from a root (through edges and fallback links)."""
    seen = _reach(N, ptr, child, roots, fb)
    if not seen.all():
        raise err("/roots/node", f"node {_first(~seen)} is not reachable from any root")
