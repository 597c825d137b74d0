"""Conversion between a compiled :class:`spnc.SPN` and the file tree."""
from __future__ import annotations

import datetime
import json
import uuid
import warnings
from typing import Any

import numpy as np

from ..errors import FormatError, SpncError
from ..leaves import base as leaf_base
from ._hash import content_hash
from ._spec import BUILTIN_LEAVES, FORMAT, VERSION, Group, dtype_code
from ._validate import Validated, _reach


def _creator() -> str:
    try:
        from .. import __version__
    except ImportError:  # pragma: no cover
        __version__ = "unknown"
    return f"spnc {__version__}"


def tree_from_model(spn: Any, *, provenance: dict[str, str] | None = None) -> Group:
    """The file tree of a compiled SPN (see formats/spnc-hdf5.md)."""
    tables = {k: t for k, t in spn.leaf_tables.items() if len(t)}
    feats = sorted(f"leaf:{k}" for k in tables if BUILTIN_LEAVES.get(k) != type(tables[k]).code)
    attrs: dict[str, Any] = {
        "format": FORMAT, "format_version": np.array(VERSION, dtype=np.uint32),
        "required_features": feats,
        "creator": _creator(),
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "model_uuid": str(uuid.uuid4()),
    }
    for k, v in (provenance or {}).items():
        attrs[k] = v
    root = Group(attrs)
    var = Group(members={"type": np.asarray(spn.var_type, dtype=np.uint8),
                         "cardinality": np.asarray(spn.cardinality, dtype=np.int32)})
    if spn.var_names is not None:
        var.members["name"] = [str(s) for s in spn.var_names]
    kind = np.asarray(spn.kind, dtype=np.uint8)
    kmax = int(kind.max()) if kind.size else 1
    kn = ["" for _ in range(max(kmax, 1) + 1)]
    kn[0], kn[1] = "sum", "product"
    for t in leaf_base.leaf_types():
        if t.code <= kmax:
            kn[t.code] = t.name
    nodes = Group({"kind_names": kn},
                  {"kind": kind, "scope_ptr": np.asarray(spn.scope_ptr, dtype=np.int64),
                   "scope": np.asarray(spn.scope, dtype=np.int32)})
    edges = Group(members={"ptr": np.asarray(spn.child_ptr, dtype=np.int64),
                           "child": np.asarray(spn.child, dtype=np.int64),
                           "weight": np.asarray(spn.weight, dtype=np.float64)})
    roots = Group({"combine": str(spn.combine)},
                  {"node": np.asarray(spn.roots, dtype=np.int64)})
    if spn.root_weights is not None and spn.combine == "mixture":
        roots.members["weight"] = np.asarray(spn.root_weights, dtype=np.float64)
    leaves = Group()
    for name in sorted(tables, key=lambda k: type(tables[k]).code):
        t = tables[name]
        arrays = t.to_arrays()
        if "node" in arrays:
            raise FormatError(f"leaf type {name!r}: parameter name 'node' is reserved")
        leaves.members[name] = Group(members={"node": np.asarray(t.node, dtype=np.int64),
                                              **{k: np.asarray(v) for k, v in arrays.items()}})
    root.members.update(variables=var, nodes=nodes, edges=edges, roots=roots, leaves=leaves)
    stats = getattr(spn, "stats", None) or {}
    if stats:
        root.members["stats"] = Group(members={k: _free_array(v, f"stats[{k!r}]")
                                               for k, v in stats.items()})
    learner = getattr(spn, "learner", None) or {}
    if learner:
        try:
            params = json.dumps(learner.get("params", {}), allow_nan=False, sort_keys=True)
        except (TypeError, ValueError) as e:
            raise FormatError(f"learner params are not JSON-serialisable: {e}") from None
        name = learner.get("name")
        if not isinstance(name, str):      # /learner@name is required (formats/spnc-hdf5.md §8)
            raise FormatError(f"spn.learner has no 'name' (got {name!r}; entries {sorted(map(str, learner))}), "
                              "but the file format requires /learner@name, a str naming the learner "
                              "that made the model (e.g. 'oslrau'): set spn.learner['name'] or clear "
                              "spn.learner")
        lg = Group({"name": name, "params": params})
        if learner.get("version") is not None:
            lg.attrs["version"] = str(learner["version"])
        info = _info_text({k: v for k, v in learner.items() if k not in _LEARNER_KEYS})
        if info is not None:
            lg.attrs[INFO_ATTR] = info
        for k, v in (learner.get("arrays") or {}).items():
            lg.members[k] = _free_array(v, f"learner arrays[{k!r}]")
        root.members["learner"] = lg
    root.attrs["content_hash"] = content_hash(root)
    return root


#: keys of ``SPN.learner`` with a place of their own in /learner; the others (what a
#: learner reports about its fit: ``n_train``, Merge's ``epsilon``, BaggedSPN's
#: ``bag_params``, ...) are one JSON object in an spnc extension attribute, which other
#: readers ignore (formats/spnc-hdf5.md §9: ``x_<vendor>`` names)
_LEARNER_KEYS = ("name", "version", "params", "arrays")
INFO_ATTR = "x_spnc_info"
#: longest string attribute a file may hold (formats/spnc-hdf5.md L3)
MAX_INFO_BYTES = 60000


def _info_text(info: dict[str, Any]) -> str | None:
    """The learner's other entries as JSON text; None, with a warning, if they cannot be
    stored (not JSON, or too long)."""
    if not info:
        return None

    def plain(v: Any) -> Any:
        if isinstance(v, (np.ndarray, np.generic)):
            return v.tolist()
        raise TypeError(f"{type(v).__name__} is not JSON-serialisable")
    try:
        text = json.dumps(info, allow_nan=False, sort_keys=True, default=plain)
    except (TypeError, ValueError) as e:
        warnings.warn(f"learner entries {sorted(info)} are not saved: {e}", stacklevel=4)
        return None
    if len(text.encode("utf-8")) > MAX_INFO_BYTES:
        warnings.warn(f"learner entries {sorted(info)} are not saved: their JSON text is longer "
                      f"than {MAX_INFO_BYTES} bytes", stacklevel=4)
        return None
    return text


def _info_of(lg: Group) -> dict[str, Any]:
    """The learner entries of ``/learner@x_spnc_info``; an extension, so a value that is not
    a JSON object is ignored with a warning, never a reason to refuse the file."""
    text = lg.attrs.get(INFO_ATTR)
    if text is None:
        return {}
    try:
        info = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        info = None
    if not isinstance(info, dict):
        warnings.warn(f"/learner@{INFO_ATTR} is not a JSON object; the learner's report is not loaded",
                      stacklevel=4)
        return {}
    return {k: v for k, v in info.items() if k not in _LEARNER_KEYS}


def _free_array(v: Any, what: str) -> Any:
    if isinstance(v, (list, tuple)) and all(isinstance(s, str) for s in v) and len(v):
        return list(v)
    a = np.asarray(v)
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    if a.ndim != 1:
        raise FormatError(f"{what}: only 1-D arrays can be stored, got shape {a.shape}")
    if a.dtype.kind == "U" and isinstance(v, np.ndarray):     # not a list of mixed items
        return [str(s) for s in a]
    if dtype_code(a.dtype) is None:
        raise FormatError(f"{what}: arrays of dtype {a.dtype} cannot be stored; use one of "
                          "u1 u2 u4 u8 i1 i2 i4 i8 f4 f8, or a list of str")
    return a


def model_from_validated(v: Validated) -> Any:
    """Build a :class:`spnc.SPN` from a validated tree (using fallback nodes, §10.2, for
    optional leaf types this reader does not know)."""
    from ..graph import SPN
    t = v.tree
    var, nodes, edges, roots = (t.members[k] for k in ("variables", "nodes", "edges", "roots"))
    stats = {}
    if "stats" in t.members:
        stats = {k: a for k, a in t.members["stats"].members.items()}
    learner: dict[str, Any] = {}
    if "learner" in t.members:
        lg = t.members["learner"]
        learner = {**_info_of(lg), "name": lg.attrs["name"], "version": lg.attrs.get("version"),
                   "params": v.learner_params or {}, "arrays": dict(lg.members)}
    kind = v.kind if v.kind is not None else nodes.members["kind"]
    ptr, child, weight = (edges.members[k] for k in ("ptr", "child", "weight"))
    root_ids, tables = roots.members["node"], v.tables
    scope_ptr, scope = nodes.members["scope_ptr"], nodes.members["scope"]
    root_w = roots.members.get("weight")
    if v.fallback is not None:
        kind, ptr, child, weight, root_ids, root_w, tables, scope_ptr, scope, keep = _apply_fallback(
            v, kind, ptr, child, weight, root_ids, root_w, roots.attrs["combine"], scope_ptr, scope)
        if keep is not None and (stats or learner.get("arrays")):
            warnings.warn("fallback nodes replaced optional leaf types: learner statistics "
                          "are dropped from the loaded model", stacklevel=3)
            stats, learner = {}, {k: x for k, x in learner.items() if k != "arrays"}
    try:
        return SPN.from_arrays(
            kind, ptr, child.astype(np.int32), weight, tables, var.members["cardinality"],
            var_type=var.members["type"], var_names=var.members.get("name"),
            scope_ptr=scope_ptr, scope=scope,
            roots=root_ids, root_weights=root_w,
            combine=roots.attrs["combine"], stats=stats, learner=learner, validate=True)
    except SpncError as e:
        raise FormatError(f"/: {e}") from None
    except (ValueError, IndexError, TypeError) as e:
        raise FormatError(f"/: invalid model: {e}") from None


def dropped_on_load(v: Validated) -> list[str]:
    """What a model built from ``v`` leaves out and :func:`spnc.save` would not write back:
    extensions (``x_*`` names, formats/spnc-hdf5.md §9) other than the ones spnc reads,
    vendor leaf types this reader lacks (their nodes replaced by fallbacks, §10.2) and the
    fallback nodes of vendor types it has."""
    kind_names = v.tree.members["nodes"].attrs.get("kind_names", [])
    vendor = {n for n in kind_names if n.startswith("x_")}
    out: list[str] = []

    def walk(g: Group, path: str) -> None:
        out.extend(f"{path or '/'}@{a}" for a in g.attrs
                   if a.startswith("x_") and not (path == "/learner" and a == INFO_ATTR))
        if path in ("/stats", "/learner"):        # every member is loaded (stats, learner arrays)
            return
        for name, m in g.members.items():
            if path == "/leaves" and name in vendor:
                if name in v.tables:
                    walk(m, f"{path}/{name}")
                else:
                    out.append(f"leaf type {name!r} (its nodes are replaced by their fallbacks)")
            elif name.startswith("x_"):
                out.append(f"{path}/{name}")
            elif isinstance(m, Group):
                walk(m, f"{path}/{name}")
    walk(v.tree, "")
    if v.fallback is not None and vendor <= set(v.tables):
        out.append("/fallback (a save lists the vendor leaf types as required features instead)")
    return out


def _apply_fallback(v: Validated, kind, ptr, child, weight, roots, root_w, combine, scope_ptr, scope):
    """Redirect edges and roots from nodes of unknown types to their fallback targets, then
    keep the nodes reachable from the roots (renumbered in order, so children still come
    first). Returns the reduced arrays and the kept-node mask (None if nothing changed)."""
    N = kind.size
    known = {t.code for t in leaf_base.leaf_types()} | {0, 1}
    redirect = np.arange(N, dtype=np.int64)
    unknown = ~np.isin(kind, sorted(known))
    redirect[unknown] = v.fallback[unknown]
    child, roots = redirect[child], redirect[roots]
    ptr, child, weight = _merge_repeated_children(ptr, child, weight)
    roots, root_w = _merge_repeated_roots(roots, root_w, combine)
    mark = _reach(N, ptr, child, roots)
    if mark.all():
        return kind, ptr, child, weight, roots, root_w, v.tables, scope_ptr, scope, None
    new_id = np.cumsum(mark) - 1
    deg = np.diff(ptr)[mark]
    ekeep = np.repeat(mark, np.diff(ptr))
    nptr = np.zeros(mark.sum() + 1, dtype=np.int64)
    np.cumsum(deg, out=nptr[1:])
    slen = np.diff(scope_ptr)
    sptr = np.zeros(mark.sum() + 1, dtype=np.int64)
    np.cumsum(slen[mark], out=sptr[1:])
    tables = {}
    for name, t in v.tables.items():
        rows = np.flatnonzero(mark[t.node])
        tables[name] = type(t).from_arrays(new_id[t.node[rows]], [t.scopes[i] for i in rows],
                                           _subset_rows(t.to_arrays(), rows, len(t)))
    return (kind[mark], nptr, new_id[child[ekeep]], weight[ekeep], new_id[roots], root_w,
            tables, sptr, scope[np.repeat(mark, slen)], mark)


def _merge_repeated_children(ptr, child, weight):
    """A sum that had a fallback node and its target as children now lists the target twice:
    one edge with the weights added is the same mixture. (Products cannot: the two have the
    same scope.)"""
    parent = np.repeat(np.arange(ptr.size - 1, dtype=np.int64), np.diff(ptr))
    order = np.lexsort((child, parent))
    dup = np.zeros(child.size, dtype=bool)
    same = (parent[order][1:] == parent[order][:-1]) & (child[order][1:] == child[order][:-1])
    dup[order[1:][same]] = True
    if not dup.any():
        return ptr, child, weight
    weight = weight.astype(np.float64, copy=True)
    keep = np.ones(child.size, dtype=bool)
    first: dict[tuple[int, int], int] = {}
    for e in np.flatnonzero(np.isin(parent, parent[dup])):     # stored order
        key = (int(parent[e]), int(child[e]))
        if key in first:
            weight[first[key]] += weight[e]
            keep[e] = False
        else:
            first[key] = int(e)
    nptr = np.zeros_like(ptr)
    np.cumsum(np.bincount(parent[keep], minlength=ptr.size - 1), out=nptr[1:])
    return nptr, child[keep], weight[keep]


def _merge_repeated_roots(roots, root_w, combine):
    """Roots that fall back to one node: a mixture adds their weights; independent roots
    would need one node evaluated twice, which spnc does not represent."""
    uniq, first, inv = np.unique(roots, return_index=True, return_inverse=True)
    if uniq.size == roots.size:
        return roots, root_w
    if combine != "mixture":
        r = int(uniq[np.bincount(inv) > 1][0])
        raise FormatError(f"/fallback: two roots fall back to node {r}; spnc cannot evaluate one node "
                          f"as two {combine} roots")
    pos = np.sort(first)
    w = np.zeros(pos.size)
    slot = np.searchsorted(pos, first[inv])
    np.add.at(w, slot, np.asarray(root_w, dtype=np.float64))
    return roots[pos], w


def _subset_rows(arrays: dict[str, np.ndarray], rows: np.ndarray, L: int) -> dict:
    """Leaf-table parameters of the given rows (per-row arrays and CSR pairs)."""
    out = {}
    flat = {k[:-4] for k in arrays if k.endswith("_ptr")}
    for k, a in arrays.items():
        if k.endswith("_ptr") and k[:-4] in arrays:
            f = arrays[k[:-4]]
            lens = np.diff(a)[rows]
            nptr = np.zeros(rows.size + 1, dtype=np.int64)
            np.cumsum(lens, out=nptr[1:])
            idx = np.concatenate([np.arange(a[r], a[r + 1]) for r in rows]) if rows.size \
                else np.zeros(0, dtype=np.int64)
            out[k], out[k[:-4]] = nptr, f[idx]
        elif k not in flat:
            out[k] = a[rows] if len(a) == L else a
    return out
