"""Pure checks on the node arrays of an SPN, shared by :meth:`spnc.SPN.from_arrays` and the
file reader (:mod:`spnc.io._validate`): one validator, two ways of naming the arrays.

Every check raises through ``Names.error`` (``StructureError``/``ScopeError`` for arrays,
``FormatError`` with file paths for files), naming the node, edge or variable at fault.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from . import _structure
from ._kinds import COMBINE, LEAF, PRODUCT, SUM, VAR_BINARY, VAR_REAL, WEIGHT_TOL
from ._text import check_unique, counted
from .errors import ScopeError, StructureError
from .leaves import base as _lb


@dataclasses.dataclass(frozen=True)
class Names:
    """How messages name the arrays, and which exceptions they raise."""

    kind: str = "kind"
    child_ptr: str = "child_ptr"
    child: str = "child"
    weight: str = "weight"
    scope: str = "scope"
    roots: str = "roots"
    structure: Callable[[str], Exception] = StructureError
    scope_error: Callable[[str], Exception] = ScopeError


ARRAYS = Names()


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def kind_name(code: int) -> str | None:
    """"sum", "product", the registered leaf type's name, or None for an unknown code."""
    if code == SUM:
        return "sum"
    if code == PRODUCT:
        return "product"
    try:
        return _lb.leaf_type_by_code(code).name
    except ValueError:
        return None


def as_array(x, dtype, name: str) -> np.ndarray:
    """A read-only contiguous 1-D array of ``dtype``; integers must fit, floats be numeric."""
    a = np.asarray(x)
    if a.ndim != 1:
        raise StructureError(f"{name} must be 1-D, got shape {a.shape}")
    if a.size and dtype is not np.float64 and not np.issubdtype(a.dtype, np.integer):
        if not (np.issubdtype(a.dtype, np.floating) and np.all(np.floor(a) == a)):
            raise StructureError(f"{name} must hold integers, got dtype {a.dtype}")
    if dtype is np.float64 and a.size and not np.issubdtype(a.dtype, np.number):
        raise StructureError(f"{name} must be numeric, got dtype {a.dtype}")
    if a.size and np.issubdtype(a.dtype, np.integer) and dtype is not np.float64:
        info = np.iinfo(dtype)
        if a.min() < info.min or a.max() > info.max:
            raise StructureError(f"{name} has values outside the range of {np.dtype(dtype).name}")
    out = np.ascontiguousarray(a, dtype=dtype)
    out.setflags(write=False)
    return out


def check_kinds(kind: np.ndarray, nm: Names = ARRAYS) -> None:
    known = [SUM, PRODUCT] + [t.code for t in _lb.leaf_types()]
    bad = ~np.isin(kind, known)
    if bad.any():
        n = _first(bad)
        raise nm.structure(f"{nm.kind}[{n}]: unknown kind code {int(kind[n])} (node {n})")


def check_csr(ptr: np.ndarray, n_nodes: int, n_edges: int, nm: Names = ARRAYS) -> None:
    """``ptr`` has n_nodes + 1 entries from 0 to n_edges and never decreases."""
    if len(ptr) != n_nodes + 1:
        raise nm.structure(f"{nm.child_ptr} has length {len(ptr)}, expected n_nodes + 1 = {n_nodes + 1}")
    if ptr[0] != 0 or ptr[-1] != n_edges:
        raise nm.structure(f"{nm.child_ptr} must start at 0 and end at n_edges = {n_edges}; "
                           f"got {ptr[0]} and {ptr[-1]}")
    d = np.diff(ptr)
    if (d < 0).any():
        n = _first(d < 0)
        raise nm.structure(f"node {n}: {nm.child_ptr} decreases ({ptr[n]} -> {ptr[n + 1]})")


def check_edges(kind: np.ndarray, ptr: np.ndarray, child: np.ndarray, nm: Names = ARRAYS) -> np.ndarray:
    """Leaves have no children, sums and products have some, every child precedes its
    parent (so the arrays are acyclic and in evaluation order), no child is listed twice
    under one node. Returns the parent of every edge."""
    N = len(kind)
    deg = np.diff(ptr)
    leaf = kind >= LEAF
    bad = leaf & (deg > 0)
    if bad.any():
        n = _first(bad)
        raise nm.structure(f"node {n}: a leaf ({kind_name(int(kind[n]))}) cannot have children")
    bad = ~leaf & (deg == 0)
    if bad.any():
        n = _first(bad)
        raise nm.structure(f"node {n}: a {kind_name(int(kind[n]))} node needs children")
    parent = np.repeat(np.arange(N, dtype=np.int64), deg)
    bad = child < 0
    if bad.any():
        k = _first(bad)
        raise nm.structure(f"{nm.child}[{k}] = {int(child[k])} under node {int(parent[k])}: child id is negative")
    bad = child >= parent
    if bad.any():
        k = _first(bad)
        raise nm.structure(f"{nm.child}[{k}] = {int(child[k])} under node {int(parent[k])}: children must "
                           "precede their parents (a cycle, or nodes not in topological order)")
    if len(child) > 1:
        key = np.sort(parent * np.int64(N) + child)
        dup = key[1:] == key[:-1]
        if dup.any():
            kk = int(key[1:][dup][0])
            raise nm.structure(f"node {kk // N}: child {kk % N} is listed twice")
    return parent


def check_weights(kind: np.ndarray, ptr: np.ndarray, weight: np.ndarray, parent: np.ndarray,
                  nm: Names = ARRAYS, tol: float = WEIGHT_TOL) -> None:
    """Edge weights are finite and non-negative, exactly 1 on product edges, and the
    weights of every sum add up to 1 within ``tol``."""
    if len(weight) != len(parent):
        raise nm.structure(f"{nm.weight} has length {len(weight)}, expected n_edges = {len(parent)}")
    bad = ~np.isfinite(weight)
    if bad.any():
        k = _first(bad)
        raise nm.structure(f"{nm.weight}[{k}] = {float(weight[k])!r} (node {int(parent[k])}) is not finite")
    bad = weight < 0
    if bad.any():
        k = _first(bad)
        raise nm.structure(f"{nm.weight}[{k}] = {float(weight[k])!r} (node {int(parent[k])}) is negative")
    bad = (kind[parent] == PRODUCT) & (weight != 1.0)
    if bad.any():
        k = _first(bad)
        raise nm.structure(f"{nm.weight}[{k}] = {float(weight[k])!r} is on a product edge of node "
                           f"{int(parent[k])}: product edge weights must be 1.0")
    sums = np.flatnonzero(kind == SUM)
    if sums.size:
        tot = np.bincount(parent, weights=weight, minlength=len(kind))[sums]
        bad = np.abs(tot - 1.0) > tol
        if bad.any():
            j = _first(bad)
            raise nm.structure(f"node {int(sums[j])}: sum weights add up to {float(tot[j])!r}, not 1")


#: longest variable name, in UTF-8 bytes (formats/spnc-hdf5.md L3)
MAX_NAME_BYTES = 1024


def as_names(var_names) -> list[str] | None:
    """``var_names`` as a list of str: bytes (h5py attributes, numpy ``S`` arrays) are
    decoded as UTF-8, not turned into their repr ``"b'x'"``; one string is refused, not
    split into its characters."""
    if var_names is None:
        return None
    if isinstance(var_names, (str, bytes)):
        raise StructureError(f"var_names must be a list of names, one per variable, not one string {var_names!r:.40}")
    out = []
    for i, n in enumerate(var_names):
        if isinstance(n, (bytes, np.bytes_)):
            try:
                n = bytes(n).decode("utf-8")
            except UnicodeDecodeError:
                raise StructureError(f"var_names[{i}] = {bytes(n)!r:.40} is bytes that are not UTF-8 text") from None
        out.append(str(n))
    return out


def check_variables(cardinality: np.ndarray, var_type: np.ndarray, var_names) -> None:
    V = len(cardinality)
    bad = (cardinality < 0) | (cardinality == 1)
    if bad.any():
        v = _first(bad)
        raise StructureError(f"variable {v}: cardinality {cardinality[v]} (use 0 for real, >= 2 for discrete)")
    if len(var_type) != V:
        raise StructureError(f"var_type has length {len(var_type)}, expected n_vars = {V}")
    if var_names is not None and len(var_names) != V:
        raise StructureError(f"var_names has {counted(len(var_names), 'name')} for {counted(V, 'variable')}")
    if var_names is not None:
        check_unique(var_names, lambda n, i, j: StructureError(f"var_names has duplicate names: var_names[{j}] = "
                                                               f"{str(n)[:40]!r} repeats var_names[{i}]"))
    if var_names is not None:
        text = "\n".join(map(str, var_names))
        if "\x00" in text:
            i = next(i for i, n in enumerate(map(str, var_names)) if "\x00" in n)
            raise StructureError(f"var_names[{i}] = {str(var_names[i])[:40]!r} holds a NUL character "
                                 "(model files cannot store it)")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            i = next(i for i, n in enumerate(map(str, var_names)) if not n.isascii() and _not_utf8(n))
            raise StructureError(f"var_names[{i}] = {str(var_names[i])!r} is not valid Unicode text (a lone "
                                 "surrogate); model files store names as UTF-8") from None
        size = [len(str(n).encode("utf-8")) for n in var_names]
        if size and not 0 < min(size) <= max(size) <= MAX_NAME_BYTES:
            i = next(i for i, b in enumerate(size) if not 0 < b <= MAX_NAME_BYTES)
            raise StructureError(f"var_names[{i}] = {str(var_names[i])[:40]!r} is empty or longer than "
                                 f"{MAX_NAME_BYTES} bytes (model files store names of 1 to {MAX_NAME_BYTES} bytes)")
    bad = (var_type > 2) | ((var_type == VAR_REAL) != (cardinality == 0)) | \
        ((var_type == VAR_BINARY) & (cardinality != 2))
    if bad.any():
        v = _first(bad)
        raise StructureError(f"variable {v}: type {var_type[v]} does not match cardinality {cardinality[v]}")


def _not_utf8(s: str) -> bool:
    try:
        s.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def derive_scopes(kind: np.ndarray, ptr: np.ndarray, child: np.ndarray, leaf_scope_ptr: np.ndarray,
                  leaf_scope: np.ndarray, nm: Names = ARRAYS) -> tuple[np.ndarray, np.ndarray]:
    """Scopes of every node from its leaves' scopes (CSR indexed by node; only leaf rows
    are read), checking completeness and decomposability on the way."""
    sp, sc, code, n, extra = _structure.compute_scopes(kind, ptr, child, leaf_scope_ptr, leaf_scope)
    if code == _structure.SCOPE_EMPTY:
        raise nm.scope_error(f"node {n}: empty scope")
    if code == _structure.SCOPE_OVERLAP:
        raise nm.scope_error(f"node {n}: product children share variable {extra} (not decomposable: decomposability is violated)")
    if code == _structure.SCOPE_MISMATCH:
        raise nm.scope_error(f"node {n}: child {extra} has a different scope from the sum's first child "
                             "(not complete: completeness is violated)")
    if code == _structure.SCOPE_DUP_CHILD:
        raise nm.structure(f"node {n}: child {extra} is listed twice under the sum")
    return sp, sc


def check_stored_scopes(sp: np.ndarray, sc: np.ndarray, given_ptr, given, nm: Names = ARRAYS) -> None:
    """The stored scopes must equal the derived ones."""
    gp, g = np.asarray(given_ptr), np.asarray(given)
    if gp.shape == sp.shape and g.shape == sc.shape and np.array_equal(gp, sp) and np.array_equal(g, sc):
        return
    N = len(sp) - 1
    for n in range(N):  # only on the error path
        if n + 1 >= len(gp) or not np.array_equal(sc[sp[n]:sp[n + 1]], g[gp[n]:gp[n + 1]]):
            break
    raise nm.scope_error(f"node {n}: stored scope differs from the scope implied by its children "
                         "(completeness or decomposability)")


def check_root_weights(roots: np.ndarray, combine: str, root_weights, nm: Names = ARRAYS,
                       tol: float = WEIGHT_TOL) -> None:
    """A mixture of roots has one finite, non-negative weight per root, adding up to 1."""
    if combine == "mixture":
        rw = root_weights
        if rw is None or len(rw) != len(roots):
            raise nm.structure(f"{nm.roots}: combine='mixture' needs one root weight per root")
        if np.any(~np.isfinite(rw) | (rw < 0)) or abs(rw.sum() - 1.0) > tol:
            raise nm.structure(f"{nm.roots}: mixture root weights must be finite, non-negative and add up to 1")


def check_roots(roots: np.ndarray, combine: str, root_weights, n_nodes: int, sp: np.ndarray, sc: np.ndarray,
                ptr: np.ndarray, child: np.ndarray, nm: Names = ARRAYS, tol: float = WEIGHT_TOL) -> None:
    """Roots are distinct nodes, as many as ``combine`` needs, mixture weights normalised,
    mixed roots over one scope, and every node reachable from a root."""
    if combine not in COMBINE:
        raise nm.structure(f"combine must be one of {COMBINE}, got {combine!r}")
    r = roots
    if r.size == 0:
        raise nm.structure(f"{nm.roots}: no roots")
    if r.min() < 0 or r.max() >= n_nodes:
        raise nm.structure(f"{nm.roots}: root id {int(r.max() if r.max() >= n_nodes else r.min())} "
                           f"is out of range [0, {n_nodes})")
    if len(np.unique(r)) != len(r):
        raise nm.structure(f"{nm.roots}: a root is listed twice")
    if combine == "single" and len(r) != 1:
        raise nm.structure(f"{nm.roots}: combine='single' needs exactly one root, got {len(r)}")
    check_root_weights(r, combine, root_weights, nm, tol)
    if combine != "independent":
        s0 = sc[sp[r[0]]:sp[r[0] + 1]]
        for x in r[1:]:
            if not np.array_equal(sc[sp[x]:sp[x + 1]], s0):
                raise nm.scope_error(f"{nm.roots}: root {x} has a different scope from root {r[0]}")
    mark = _structure.reachable(np.ascontiguousarray(r, dtype=np.int64), ptr, child)
    if not mark.all():
        raise nm.structure(f"{nm.roots}: node {_first(mark == 0)} is not reachable from any root")


def scope_index(table) -> tuple[np.ndarray, np.ndarray]:
    """(length of each leaf's scope, -1 when malformed; the scopes concatenated, int64) of
    a leaf table, kept on it for its ``scopes`` list (tables never edit it in place;
    :meth:`spnc.leaves.base.LeafType.gather` passes it on)."""
    hit = table.__dict__.get("_scope_index")
    if hit is not None and hit[0] is table.scopes and len(hit[1]) == len(table.scopes):
        return hit[1], hit[2]
    lens = np.fromiter((getattr(s, "size", -1) if getattr(s, "ndim", 0) == 1 else -1
                        for s in table.scopes), dtype=np.int64, count=len(table.scopes))
    if np.any(lens <= 0):
        return lens, np.zeros(0, np.int64)
    flat = np.concatenate(table.scopes).astype(np.int64) if len(lens) else np.zeros(0, np.int64)
    table._scope_index = (table.scopes, lens, flat)
    return lens, flat


def index_leaves(kind: np.ndarray, tables: dict, n_vars: int) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """Give each leaf its slot (tables in order) and check that the tables list every leaf
    once, with the right kind and a valid ascending scope. Sets ``table.slot``; returns
    (leaf_slot int64[N] (-1 for internal nodes), n_leaves, leaf_scope_ptr, leaf_scope)."""
    N, V = len(kind), n_vars
    slot = np.full(N, -1, dtype=np.int64)
    scope_len = np.zeros(N, dtype=np.int64)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    offset = 0
    for name, table in tables.items():
        tcls = _lb.leaf_type_by_name(name)
        if not isinstance(table, tcls):
            raise StructureError(f"leaf table {name!r} holds a {type(table).__name__}")
        node = table.node
        if node.size and (node.min() < 0 or node.max() >= N):
            i = _first((node < 0) | (node >= N))
            raise StructureError(f"{name} leaf {i}: node id {node[i]} is out of range [0, {N})")
        if len(table.scopes) != len(node):
            raise StructureError(f"{name} leaves: {len(table.scopes)} scopes for {len(node)} nodes")
        bad = np.flatnonzero(kind[node] != tcls.code)
        if bad.size:
            n = node[bad[0]]
            raise StructureError(f"node {n} is listed as a {name} leaf but has kind {kind[n]}")
        twice = np.flatnonzero(slot[node] >= 0)
        here = offset + np.arange(len(node))
        slot[node] = here        # a node listed twice in this table keeps its last slot only
        if twice.size or not np.array_equal(slot[node], here):
            n = node[twice[0]] if twice.size else node[_first(np.bincount(node) > 1)]
            raise StructureError(f"node {n} is listed twice in the leaf tables")
        lens, flat = scope_index(table)
        if np.any(lens <= 0):
            raise StructureError(f"node {node[_first(lens <= 0)]} ({name} leaf): empty or malformed scope")
        owner = np.repeat(np.arange(len(node)), lens)
        bad = np.flatnonzero((flat < 0) | (flat >= V))
        if bad.size:
            raise StructureError(f"node {node[owner[bad[0]]]} ({name} leaf): variable {flat[bad[0]]} "
                                 f"is outside 0..{V - 1}")
        if flat.size > 1:
            bad = np.flatnonzero((owner[1:] == owner[:-1]) & (np.diff(flat) <= 0))
            if bad.size:
                raise StructureError(f"node {node[owner[bad[0]]]} ({name} leaf): scope must be strictly ascending")
        scope_len[node] = lens
        table.slot = np.arange(offset, offset + len(node), dtype=np.int64)
        offset += len(node)
        parts.append((node, lens, flat))
    missing = np.flatnonzero((kind >= LEAF) & (slot < 0))
    if missing.size:
        raise StructureError(f"node {missing[0]} is a leaf (kind {kind[missing[0]]}) missing from its leaf table")
    lptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(scope_len, out=lptr[1:])
    lscope = np.empty(lptr[-1], dtype=np.int32)
    for node, lens, flat in parts:
        start = np.repeat(lptr[node] - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
        lscope[start + np.arange(flat.size)] = flat
    return slot, offset, lptr, lscope


def check_leaf_parameters(tables: dict, cardinality: np.ndarray, known: dict | None = None) -> None:
    """Discrete leaf types sit on discrete variables, the others on real ones, and every
    table's own parameter check passes. A table sharing its scopes with the table of the
    same name in ``known`` (checked before, same variables) skips the variable check."""
    for name, table in tables.items():
        old = known.get(name) if known else None
        if len(table) and (old is None or old.scopes is not table.scopes):
            vars_ = np.concatenate(table.scopes)
            card = cardinality[vars_]
            if table.discrete and np.any(card == 0):
                raise StructureError(f"{name} leaf on real-valued variable {vars_[_first(card == 0)]}")
            if not table.discrete and np.any(card != 0):
                raise StructureError(f"{name} leaf on discrete variable {vars_[_first(card != 0)]}")
        table.validate(cardinality)
