"""The compiled SPN: flat typed arrays, validation, and batched inference.

Nodes are stored children-before-parents (the root last), children in CSR form
(``child_ptr``/``child``) with one weight per edge, scopes in CSR form, and the leaf
parameters in one table per leaf type (:mod:`spnc.leaves`). Every query runs over row
chunks: the leaf tables fill a leaf matrix, then the compiled sweeps of :mod:`spnc._core`
walk all nodes for blocks of rows, in parallel over blocks.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

import numpy as np

from . import _budget, _core
from .data import as_data
from .errors import DataError, ScopeError, StructureError
from .leaves import base as _lb
from .nodes import Leaf, Node, Product, Sum

SUM, PRODUCT = 0, 1
VAR_BINARY, VAR_CATEGORICAL, VAR_REAL = 0, 1, 2
_COMBINE = ("single", "mixture", "independent")
#: sum weights must add up to 1 within this tolerance
WEIGHT_TOL = 1e-6
#: leaf-matrix budget per chunk (float64 values): 16 MB, so the matrix is still in the
#: last-level cache when the sweep reads it back
_CHUNK_VALUES = 1 << 21
#: below this much work (rows x edges) queries run on one thread
_SERIAL_WORK = 1 << 20


def _n_threads(n_threads: int | None, work: int) -> int:
    if n_threads is None:
        return 1 if work < _SERIAL_WORK else _core.max_threads()
    if n_threads < 0:
        return max(1, (os.cpu_count() or 1) + 1 + n_threads)
    if n_threads == 0:
        raise ValueError("n_threads must be a positive integer, -1 for all cores, or None")
    return int(n_threads)


def _as_array(x, dtype, name: str, ndim: int = 1) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != ndim:
        raise StructureError(f"{name} must be {ndim}-D, got shape {a.shape}")
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


class SPN:
    """A compiled sum-product network (a DAG) over ``n_vars`` variables.

    Build one with :func:`spnc.compile` from construction objects, with
    :meth:`from_arrays` from arrays (what the file readers do), or load one with
    :func:`spnc.load`. Queries take float64 data of shape ``(n, n_vars)`` where NaN marks a
    missing value.
    """

    def __init__(self, *args, **kwargs):
        raise TypeError("build an SPN with spnc.compile(root) or SPN.from_arrays(...)")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, kind, child_ptr, child, weight, leaf_tables: dict[str, _lb.LeafType],
                    cardinality, var_type=None, var_names: Sequence[str] | None = None,
                    scope_ptr=None, scope=None, roots=None, root_weights=None,
                    combine: str = "single", stats: dict | None = None,
                    learner: dict | None = None, validate: bool = True) -> "SPN":
        """Assemble and check an SPN from its arrays. Raises :class:`StructureError`
        (or :class:`ScopeError`) naming the offending node."""
        self = object.__new__(cls)
        self.kind = _as_array(kind, np.uint8, "kind")
        N = len(self.kind)
        if N == 0:
            raise StructureError("an SPN needs at least one node")
        if N >= 2**31 - 1:
            raise StructureError(f"{N} nodes is more than the 2^31 - 1 supported")
        self.child_ptr = _as_array(child_ptr, np.int64, "child_ptr")
        self.child = _as_array(child, np.int32, "child")
        self.weight = _as_array(weight, np.float64, "weight")
        self.cardinality = _as_array(cardinality, np.int32, "cardinality")
        V = len(self.cardinality)
        if var_type is None:
            var_type = np.where(self.cardinality == 0, VAR_REAL,
                                np.where(self.cardinality == 2, VAR_BINARY, VAR_CATEGORICAL))
        self.var_type = _as_array(var_type, np.uint8, "var_type")
        self.var_names = None if var_names is None else [str(s) for s in var_names]
        self.roots = _as_array([N - 1] if roots is None else roots, np.int64, "roots")
        self.root_weights = None if root_weights is None else _as_array(root_weights, np.float64, "root_weights")
        if combine not in _COMBINE:
            raise StructureError(f"combine must be one of {_COMBINE}, got {combine!r}")
        self.combine = combine
        self.leaf_tables = dict(leaf_tables)
        self.stats = {} if stats is None else dict(stats)
        self.learner = {} if learner is None else dict(learner)
        self._check_arrays(V)
        self._index_leaves()
        sp, sc = self._scopes()
        if scope_ptr is not None or scope is not None:
            if scope_ptr is None or scope is None:
                raise StructureError("scope_ptr and scope must be given together")
            given_ptr = np.asarray(scope_ptr)
            given = np.asarray(scope)
            if given_ptr.shape != sp.shape or given.shape != sc.shape or \
                    np.any(given_ptr != sp) or np.any(given != sc):
                bad = _first_scope_difference(sp, sc, given_ptr, given)
                raise ScopeError(f"node {bad}: stored scope differs from the scope implied by its children")
        self.scope_ptr, self.scope = sp, sc
        sp.setflags(write=False)
        sc.setflags(write=False)
        if validate:
            self._check_parameters()
            self._check_roots()
        self.logw = np.log(self.weight, where=self.weight > 0,
                           out=np.full(len(self.weight), -np.inf))
        self.logw[self.kind[np.repeat(np.arange(N), np.diff(self.child_ptr))] == PRODUCT] = 0.0
        self.logw.setflags(write=False)
        return self

    def _check_arrays(self, V: int) -> None:
        kind, ptr, child, w = self.kind, self.child_ptr, self.child, self.weight
        N, E = len(kind), len(child)
        known = {SUM, PRODUCT} | {t.code for t in _lb.leaf_types()}
        bad = np.flatnonzero(~np.isin(kind, list(known)))
        if bad.size:
            raise StructureError(f"node {bad[0]}: unknown kind code {kind[bad[0]]}")
        if len(ptr) != N + 1:
            raise StructureError(f"child_ptr has length {len(ptr)}, expected n_nodes + 1 = {N + 1}")
        if ptr[0] != 0 or ptr[-1] != E:
            raise StructureError(f"child_ptr must start at 0 and end at n_edges = {E}; got {ptr[0]} and {ptr[-1]}")
        deg = np.diff(ptr)
        if np.any(deg < 0):
            n = int(np.flatnonzero(deg < 0)[0])
            raise StructureError(f"node {n}: child_ptr decreases ({ptr[n]} -> {ptr[n + 1]})")
        if len(w) != E:
            raise StructureError(f"weight has length {len(w)}, expected n_edges = {E}")
        leaf = kind >= 2
        b = np.flatnonzero(leaf & (deg > 0))
        if b.size:
            raise StructureError(f"node {b[0]}: a leaf cannot have children")
        b = np.flatnonzero(~leaf & (deg == 0))
        if b.size:
            raise StructureError(f"node {b[0]}: a {'sum' if kind[b[0]] == SUM else 'product'} node needs children")
        parent = np.repeat(np.arange(N, dtype=np.int64), deg)
        b = np.flatnonzero((child < 0) | (child >= parent))
        if b.size:
            e = b[0]
            if child[e] < 0:
                raise StructureError(f"node {parent[e]}: child id {child[e]} is negative")
            raise StructureError(f"node {parent[e]} lists child {child[e]}; children must precede "
                                 f"their parents (a cycle, or nodes not in topological order)")
        if np.any(self.cardinality < 0) or np.any(self.cardinality == 1):
            v = int(np.flatnonzero((self.cardinality < 0) | (self.cardinality == 1))[0])
            raise StructureError(f"variable {v}: cardinality {self.cardinality[v]} (use 0 for real, >= 2 for discrete)")
        if len(self.var_type) != V:
            raise StructureError(f"var_type has length {len(self.var_type)}, expected n_vars = {V}")
        if self.var_names is not None and len(self.var_names) != V:
            raise StructureError(f"var_names has {len(self.var_names)} names for {V} variables")
        if self.var_names is not None and len(set(self.var_names)) != V:
            raise StructureError("var_names has duplicate names")
        bt = (self.var_type > 2) | ((self.var_type == VAR_REAL) != (self.cardinality == 0)) | \
             ((self.var_type == VAR_BINARY) & (self.cardinality != 2))
        if bt.any():
            v = int(np.flatnonzero(bt)[0])
            raise StructureError(f"variable {v}: type {self.var_type[v]} does not match cardinality {self.cardinality[v]}")

    def _index_leaves(self) -> None:
        N, V = len(self.kind), len(self.cardinality)
        slot = np.full(N, -1, dtype=np.int64)
        scope_len = np.zeros(N, dtype=np.int64)
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        offset = 0
        for name, table in self.leaf_tables.items():
            tcls = _lb.leaf_type_by_name(name)
            if not isinstance(table, tcls):
                raise StructureError(f"leaf table {name!r} holds a {type(table).__name__}")
            node = table.node
            if node.size and (node.min() < 0 or node.max() >= N):
                i = int(np.flatnonzero((node < 0) | (node >= N))[0])
                raise StructureError(f"{name} leaf {i}: node id {node[i]} is out of range [0, {N})")
            if len(table.scopes) != len(node):
                raise StructureError(f"{name} leaves: {len(table.scopes)} scopes for {len(node)} nodes")
            bad = np.flatnonzero(self.kind[node] != tcls.code)
            if bad.size:
                n = node[bad[0]]
                raise StructureError(f"node {n} is listed as a {name} leaf but has kind {self.kind[n]}")
            twice = np.flatnonzero(slot[node] >= 0)
            if twice.size or len(np.unique(node)) != len(node):
                n = node[twice[0]] if twice.size else node[np.flatnonzero(np.bincount(node) > 1)[0]]
                raise StructureError(f"node {n} is listed twice in the leaf tables")
            slot[node] = offset + np.arange(len(node))
            lens = np.fromiter((getattr(s, "size", -1) if getattr(s, "ndim", 0) == 1 else -1
                                for s in table.scopes), dtype=np.int64, count=len(node))
            if np.any(lens <= 0):
                raise StructureError(f"node {node[np.flatnonzero(lens <= 0)[0]]} ({name} leaf): empty or malformed scope")
            flat = np.concatenate(table.scopes).astype(np.int64) if len(node) else np.zeros(0, np.int64)
            owner = np.repeat(np.arange(len(node)), lens)
            bad = np.flatnonzero((flat < 0) | (flat >= V))
            if bad.size:
                raise StructureError(f"node {node[owner[bad[0]]]} ({name} leaf): variable {flat[bad[0]]} is outside 0..{V - 1}")
            if flat.size > 1:
                same = owner[1:] == owner[:-1]
                bad = np.flatnonzero(same & (np.diff(flat) <= 0))
                if bad.size:
                    raise StructureError(f"node {node[owner[bad[0]]]} ({name} leaf): scope must be strictly ascending")
            scope_len[node] = lens
            table.slot = np.arange(offset, offset + len(node), dtype=np.int64)
            offset += len(node)
            parts.append((node, lens, flat))
        missing = np.flatnonzero((self.kind >= 2) & (slot < 0))
        if missing.size:
            raise StructureError(f"node {missing[0]} is a leaf (kind {self.kind[missing[0]]}) missing from its leaf table")
        self.leaf_slot = slot
        self.n_leaves = offset
        lptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(scope_len, out=lptr[1:])
        lscope = np.empty(lptr[-1], dtype=np.int32)
        for node, lens, flat in parts:
            start = np.repeat(lptr[node] - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
            lscope[start + np.arange(flat.size)] = flat
        self._leaf_scope = (lptr, lscope)

    def _scopes(self) -> tuple[np.ndarray, np.ndarray]:
        sp, sc, code, n, extra = _core.compute_scopes(self.kind, self.child_ptr, self.child, *self._leaf_scope)
        if code == _core.SCOPE_EMPTY:
            raise ScopeError(f"node {n}: empty scope")
        if code == _core.SCOPE_OVERLAP:
            raise ScopeError(f"node {n}: product children share variable {extra} (not decomposable)")
        if code == _core.SCOPE_MISMATCH:
            raise ScopeError(f"node {n}: child {extra} has a different scope from the sum's first child (not complete)")
        if code == _core.SCOPE_DUP_CHILD:
            raise StructureError(f"node {n}: child {extra} is listed twice under the sum")
        return sp, sc

    def _check_parameters(self) -> None:
        N = len(self.kind)
        w = self.weight
        parent = np.repeat(np.arange(N, dtype=np.int64), np.diff(self.child_ptr))
        bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
        if bad.size:
            e = bad[0]
            raise StructureError(f"node {parent[e]}: edge weight {float(w[e])!r} to child {self.child[e]} is negative or not finite")
        pk = self.kind[parent]
        bad = np.flatnonzero((pk == PRODUCT) & (w != 1.0))
        if bad.size:
            raise StructureError(f"node {parent[bad[0]]}: product edge weight must be 1.0, got {float(w[bad[0]])!r}")
        sums = np.flatnonzero(self.kind == SUM)
        if sums.size:
            cs = np.concatenate([[0.0], np.cumsum(w)])
            tot = cs[self.child_ptr[sums + 1]] - cs[self.child_ptr[sums]]
            bad = np.flatnonzero(np.abs(tot - 1.0) > WEIGHT_TOL)
            if bad.size:
                raise StructureError(f"node {sums[bad[0]]}: sum weights add up to {float(tot[bad[0]])!r}, not 1")
        for name, table in self.leaf_tables.items():
            if len(table):
                vars_ = np.concatenate(table.scopes)
                card = self.cardinality[vars_]
                if table.discrete and np.any(card == 0):
                    i = int(np.flatnonzero(card == 0)[0])
                    raise StructureError(f"{name} leaf on real-valued variable {vars_[i]}")
                if not table.discrete and np.any(card != 0):
                    i = int(np.flatnonzero(card != 0)[0])
                    raise StructureError(f"{name} leaf on discrete variable {vars_[i]}")
            table.validate(self.cardinality)

    def _check_roots(self) -> None:
        N, r = len(self.kind), self.roots
        if r.size == 0:
            raise StructureError("no roots")
        if r.min() < 0 or r.max() >= N:
            raise StructureError(f"root id {int(r.max() if r.max() >= N else r.min())} is out of range [0, {N})")
        if len(np.unique(r)) != len(r):
            raise StructureError("a root is listed twice")
        if self.combine == "single" and len(r) != 1:
            raise StructureError(f"combine='single' needs exactly one root, got {len(r)}")
        if self.combine == "mixture":
            rw = self.root_weights
            if rw is None or len(rw) != len(r):
                raise StructureError("combine='mixture' needs one root weight per root")
            if np.any(~np.isfinite(rw) | (rw < 0)) or abs(rw.sum() - 1.0) > WEIGHT_TOL:
                raise StructureError("mixture root weights must be finite, non-negative and add up to 1")
        if self.combine != "independent":
            s0 = self.node_scope(int(r[0]))
            for x in r[1:]:
                if not np.array_equal(self.node_scope(int(x)), s0):
                    raise ScopeError(f"root {x} has a different scope from root {r[0]}")
        mark = _core.reachable(r, self.child_ptr, self.child)
        if not mark.all():
            raise StructureError(f"node {int(np.flatnonzero(mark == 0)[0])} is not reachable from any root")

    # ------------------------------------------------------------------ properties
    @property
    def n_nodes(self) -> int:
        return len(self.kind)

    @property
    def n_edges(self) -> int:
        return len(self.child)

    @property
    def n_vars(self) -> int:
        return len(self.cardinality)

    @property
    def root(self) -> int:
        return int(self.roots[0])

    def node_scope(self, n: int) -> np.ndarray:
        return self.scope[self.scope_ptr[n]:self.scope_ptr[n + 1]]

    def children(self, n: int) -> np.ndarray:
        return self.child[self.child_ptr[n]:self.child_ptr[n + 1]]

    def __repr__(self) -> str:
        types = ", ".join(f"{k}={len(t)}" for k, t in self.leaf_tables.items() if len(t))
        return (f"SPN(n_vars={self.n_vars}, n_nodes={self.n_nodes}, n_edges={self.n_edges}, "
                f"sums={int(np.sum(self.kind == SUM))}, products={int(np.sum(self.kind == PRODUCT))}, "
                f"leaves: {types or 'none'})")

    def __reduce__(self):
        tables = {k: (t.node, t.scopes, t.to_arrays()) for k, t in self.leaf_tables.items()}
        return (_rebuild, (self._state(), tables))

    def _state(self) -> dict:
        return dict(kind=self.kind, child_ptr=self.child_ptr, child=self.child, weight=self.weight,
                    cardinality=self.cardinality, var_type=self.var_type, var_names=self.var_names,
                    roots=self.roots, root_weights=self.root_weights, combine=self.combine,
                    stats=self.stats, learner=self.learner)

    def copy(self) -> "SPN":
        """An independent copy (arrays copied, parameters editable on the copy only)."""
        tables = {k: type(t).from_arrays(t.node.copy(), [s.copy() for s in t.scopes],
                                         {a: v.copy() for a, v in t.to_arrays().items()})
                  for k, t in self.leaf_tables.items()}
        st = self._state()
        st["stats"] = {k: np.array(v, copy=True) for k, v in self.stats.items()}
        st["learner"] = dict(self.learner)
        return SPN.from_arrays(leaf_tables=tables, **st)

    # ------------------------------------------------------------------ data handling
    def _check_X(self, X, name: str = "X") -> np.ndarray:
        X = as_data(X, self.var_names, name)[0]      # a DataFrame: columns matched by name
        try:
            A = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{name} must be numeric (float64 convertible): {exc}") from None
        if A.ndim == 1 and self.n_vars > 1 and A.shape[0] == self.n_vars:
            raise DataError(f"{name} must be 2-D (n_rows, {self.n_vars}); got a 1-D array — use X[None, :] for one row")
        if A.ndim != 2:
            raise DataError(f"{name} must be 2-D (n_rows, {self.n_vars}), got shape {A.shape}")
        if A.shape[1] != self.n_vars:
            raise DataError(f"{name} has {A.shape[1]} columns, the model has {self.n_vars} variables")
        r, c, code = _core.first_bad_value(A, self.cardinality)
        if code == 1:
            raise DataError(f"{name}[{r}, {c}] = {A[r, c]}: infinite values are not allowed (use NaN for missing)")
        if code == 2:
            raise DataError(f"{name}[{r}, {c}] = {float(A[r, c])!r} is not a state 0..{self.cardinality[c] - 1} "
                            f"of discrete variable {c}")
        return A

    def _chunk_rows(self, n_threads: int) -> int:
        """Rows per chunk: the leaf matrix stays within budget, yet every thread gets blocks.
        Results never depend on it (rows are independent, random numbers counter-based)."""
        rows = _CHUNK_VALUES // max(self.n_leaves, 1)
        B = _core.BLOCK
        return int(min(max(2 * B * n_threads, rows // B * B), 16 * 1024))

    def _workspace(self, n_threads: int, per_thread: int = 1) -> np.ndarray:
        return np.empty((n_threads, per_thread * self.n_nodes * _core.BLOCK))

    def _chunks(self, X: np.ndarray, n_threads: int) -> Iterable[tuple[int, int, np.ndarray]]:
        """(r0, r1, XT) with XT the transposed chunk padded with NaN to a multiple of BLOCK."""
        n = X.shape[0]
        step = self._chunk_rows(n_threads)
        B = _core.BLOCK
        for r0 in range(0, n, step):
            r1 = min(n, r0 + step)
            m = -(-(r1 - r0) // B) * B
            XT = np.full((self.n_vars, m), np.nan)
            XT[:, : r1 - r0] = X[r0:r1].T
            yield r0, r1, XT

    def _leaf_matrix(self, XT: np.ndarray, mode: int, n_threads: int,
                     buf: np.ndarray | None = None) -> np.ndarray:
        """Leaf log-values (n_leaves, m) for a chunk; ``buf`` (reused across chunks of one
        query) avoids re-faulting a large fresh array per chunk."""
        shape = (max(self.n_leaves, 1), XT.shape[1])
        if buf is not None and buf.size >= shape[0] * shape[1]:
            L = buf.ravel()[: shape[0] * shape[1]].reshape(shape)
        else:
            L = np.empty(shape)
        for table in self.leaf_tables.values():
            if len(table):
                table.log_prob(XT, L, mode, n_threads)
        return L

    def _graph(self) -> tuple:
        return self.kind, self.child_ptr, self.child, self.logw, self.leaf_slot

    @property
    def _ident(self) -> np.ndarray:
        """Identity slots: every node keeps its own workspace row (backward, MPE, sampling)."""
        if getattr(self, "_ident_cache", None) is None:
            self._ident_cache = np.arange(self.n_nodes, dtype=np.int32)
        return self._ident_cache

    def _plan(self) -> tuple[np.ndarray, np.ndarray, int]:
        """(child slots, node slots, n_slots) for forward-only sweeps (see _core.plan_slots)."""
        if getattr(self, "_plan_cache", None) is None:
            slot, n_slots = _core.plan_slots(self.child_ptr, self.child, self.roots)
            self._plan_cache = (np.ascontiguousarray(slot[self.child]), slot, int(n_slots))
        return self._plan_cache

    # ------------------------------------------------------------------ queries
    def log_likelihood(self, X, *, n_threads: int | None = None) -> np.ndarray:
        """log p(x) for each row of ``X`` (n, n_vars); NaN entries are marginalised out, so
        one call answers joint and marginal queries. For ``combine='independent'`` the
        result has one column per root."""
        X = self._check_X(X)
        return self._forward(X, mode=_lb.MARGINAL, n_threads=n_threads)

    def _forward(self, X: np.ndarray, mode: int, n_threads: int | None) -> np.ndarray:
        nt = _n_threads(n_threads, X.shape[0] * (self.n_edges + self.n_nodes))
        R = len(self.roots)
        vals = np.empty((R, X.shape[0]))
        empty = np.empty((0, 0))
        child_slot, node_slot, n_slots = self._plan()
        ws = np.empty((nt, n_slots * _core.BLOCK))
        kind, ptr, _, logw, leaf_slot = self._graph()
        lbuf = np.empty(max(self.n_leaves, 1) * min(self._chunk_rows(nt), -(-X.shape[0] // _core.BLOCK) * _core.BLOCK))
        for r0, r1, XT in self._chunks(X, nt):
            L = self._leaf_matrix(XT, mode, nt, lbuf)
            out = np.empty((R, XT.shape[1]))
            _core.forward(kind, ptr, child_slot, logw, leaf_slot, L, self.roots, out, empty, mode, nt, ws, node_slot)
            vals[:, r0:r1] = out[:, : r1 - r0]
        if self.combine == "single":
            return vals[0]
        if self.combine == "independent":
            return vals.T
        lw = np.log(self.root_weights, where=self.root_weights > 0,
                    out=np.full(R, -np.inf))[:, None]
        if mode == _lb.MAX:
            return np.max(vals + lw, axis=0)
        return _logsumexp0(vals + lw)

    def conditional(self, X_query, X_evidence, *, n_threads: int | None = None) -> np.ndarray:
        """log p(query | evidence) per row: ``X_query`` holds the query and evidence values
        (NaN elsewhere), ``X_evidence`` only the evidence values."""
        q = self.log_likelihood(X_query, n_threads=n_threads)
        e = self.log_likelihood(X_evidence, n_threads=n_threads)
        Xq = self._check_X(X_query, "X_query")
        Xe = self._check_X(X_evidence, "X_evidence")
        both = ~np.isnan(Xe)
        if np.any(both & (np.isnan(Xq) | (Xq != Xe))):
            r, c = np.argwhere(both & (np.isnan(Xq) | (Xq != Xe)))[0]
            raise DataError(f"X_query[{r}, {c}] must repeat the evidence value {float(Xe[r, c])!r}")
        return q - e

    def mpe(self, X, *, n_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Fill the missing entries of ``X`` with the max-product (MPE) assignment.

        Returns ``(X_filled, log_p)`` where ``log_p`` is the log-likelihood of the
        completed rows. Observed entries are kept as given."""
        X = self._check_X(X)
        self._need_single_root("mpe")
        filled = self._select(X, _lb.MAX, seed=0, n_threads=n_threads)
        return filled, self.log_likelihood(filled, n_threads=n_threads)

    def sample(self, n: int | None = None, evidence=None, seed: int | None = None, *,
               n_threads: int | None = None) -> np.ndarray:
        """Draw rows (n, n_vars) from the model, or from p(missing | observed) for each row
        of ``evidence`` (NaN marks what to sample). Reproducible for a given ``seed``,
        whatever ``n_threads``."""
        self._need_single_root("sample")
        if evidence is None:
            if n is None or int(n) < 0:
                raise ValueError("sample needs n >= 0 (or evidence rows)")
            X = np.full((int(n), self.n_vars), np.nan)
        else:
            X = self._check_X(evidence, "evidence")
            if n is not None and int(n) != X.shape[0]:
                raise ValueError(f"n={n} does not match the {X.shape[0]} evidence rows")
            if X.shape[0]:
                ll = self.log_likelihood(X, n_threads=n_threads)
                if np.any(ll == -np.inf):
                    r = int(np.flatnonzero(ll == -np.inf)[0])
                    raise DataError(f"evidence row {r} has probability zero under the model")
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
        return self._select(X, _lb.MARGINAL, seed=int(seed) & (2**64 - 1), n_threads=n_threads)

    def _need_single_root(self, what: str) -> None:
        if self.combine != "single":
            raise StructureError(f"{what} needs a single-root model; this one has combine={self.combine!r} "
                                 "(add a sum root to mix the members)")

    def _select(self, X: np.ndarray, mode: int, seed: int, n_threads: int | None) -> np.ndarray:
        nt = _n_threads(n_threads, X.shape[0] * (self.n_edges + self.n_nodes))
        out = X.copy()
        ws = self._workspace(nt)
        acts = np.empty((nt, self.n_nodes * _core.BLOCK), dtype=np.uint8)
        lbuf = np.empty(max(self.n_leaves, 1) * min(self._chunk_rows(nt), -(-X.shape[0] // _core.BLOCK) * _core.BLOCK))
        for r0, r1, XT in self._chunks(X, nt):
            L = self._leaf_matrix(XT, mode, nt, lbuf)
            active = np.zeros((max(self.n_leaves, 1), XT.shape[1]), dtype=np.uint8)
            rv = np.empty(XT.shape[1])
            _core.select(*self._graph(), L, self.root, active, rv, mode, seed, r0, nt, ws, acts, self._ident)
            if mode == _lb.MAX and np.any(rv[: r1 - r0] == -np.inf):
                r = r0 + int(np.flatnonzero(rv[: r1 - r0] == -np.inf)[0])
                raise DataError(f"row {r} has probability zero under the model; no MPE completion exists")
            outT = XT.copy()
            for table in self.leaf_tables.values():
                if len(table):
                    table.fill(XT, active, outT, mode, seed, r0)
            out[r0:r1] = outT[:, : r1 - r0].T
        return out

    def backward(self, X, *, sample_weight=None, node_posteriors: bool = False,
                 leaf_responsibilities: bool = False, n_threads: int | None = None) -> dict:
        """One forward + backward pass (the E-step of EM and the counting statistics).

        Returns a dict with ``log_likelihood`` (n,), ``edge_counts`` (n_edges,): for each
        sum edge the expected number of rows routed through it (sum over rows of
        w_c S_c dS/dS_parent / S), ``node_counts`` (n_nodes,): expected rows through each
        node; both weighted by ``sample_weight``. Optionally ``node_posteriors`` (n, n_nodes),
        the probability rho_n that node n is on a row's induced tree, with which
        ``log dS/dS_n = log rho_n + log S - log S_n``, and ``leaf_responsibilities``
        (n, n_leaves) in leaf-slot order (the EM weights of leaf refits)."""
        X = self._check_X(X)
        if self.combine == "independent":
            raise StructureError("backward needs a single-root or mixture model")
        n = X.shape[0]
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (n,):
            raise DataError(f"sample_weight must have shape ({n},), got {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise DataError("sample_weight must be finite and non-negative")
        nt = _n_threads(n_threads, n * (self.n_edges + self.n_nodes))
        if self.combine == "mixture":
            rlw = np.log(self.root_weights, where=self.root_weights > 0,
                         out=np.full(len(self.roots), -np.inf))
        else:
            rlw = np.zeros(1)
        ll = np.empty(n)
        edge_acc = np.zeros((nt, self.n_edges))
        node_acc = np.zeros((nt, self.n_nodes))
        post = np.empty((n, self.n_nodes)) if node_posteriors else None
        resp = np.empty((n, self.n_leaves)) if leaf_responsibilities else None
        ws = self._workspace(nt, 2)
        lbuf = np.empty(max(self.n_leaves, 1) * min(self._chunk_rows(nt), -(-X.shape[0] // _core.BLOCK) * _core.BLOCK))
        for r0, r1, XT in self._chunks(X, nt):
            m = XT.shape[1]
            L = self._leaf_matrix(XT, _lb.MARGINAL, nt, lbuf)
            rw = np.zeros(m)
            rw[: r1 - r0] = w[r0:r1]
            llc = np.empty(m)
            lr = np.empty((self.n_leaves, m)) if leaf_responsibilities else np.empty((0, m))
            ap = np.empty((self.n_nodes, m)) if node_posteriors else np.empty((0, m))
            _core.backward(*self._graph(), L, self.roots, rlw, rw, llc, edge_acc, node_acc, lr, ap, nt, ws, self._ident)
            ll[r0:r1] = llc[: r1 - r0]
            if post is not None:
                post[r0:r1] = ap[:, : r1 - r0].T
            if resp is not None:
                resp[r0:r1] = lr[:, : r1 - r0].T
        out = {"log_likelihood": ll, "edge_counts": edge_acc.sum(0), "node_counts": node_acc.sum(0)}
        if post is not None:
            out["node_posteriors"] = post
        if resp is not None:
            out["leaf_responsibilities"] = resp
        return out

    def node_log_values(self, X, *, mode: int = 0, n_threads: int | None = None) -> np.ndarray:
        """log S_n(x) of every node for every row, shape (n, n_nodes); ``mode=1`` for
        max-product values. Memory grows with n x n_nodes: meant for learners and tests."""
        X = self._check_X(X)
        nt = _n_threads(n_threads, X.shape[0] * (self.n_edges + self.n_nodes))
        vals = np.empty((X.shape[0], self.n_nodes))
        ws = self._workspace(nt)
        lbuf = np.empty(max(self.n_leaves, 1) * min(self._chunk_rows(nt), -(-X.shape[0] // _core.BLOCK) * _core.BLOCK))
        for r0, r1, XT in self._chunks(X, nt):
            L = self._leaf_matrix(XT, mode, nt, lbuf)
            allv = np.empty((self.n_nodes, XT.shape[1]))
            out = np.empty((len(self.roots), XT.shape[1]))
            _core.forward(*self._graph(), L, self.roots, out, allv, mode, nt, ws, self._ident)
            vals[r0:r1] = allv[:, : r1 - r0].T
        return vals

    # ------------------------------------------------------------------ walking back
    def to_nodes(self) -> Node:
        """Construction objects equal to this SPN (shared nodes stay shared). Returns the
        root (or a list of roots for multi-root models)."""
        objs: list[Node | None] = [None] * self.n_nodes
        for name, table in self.leaf_tables.items():
            for i, n in enumerate(table.node):
                objs[n] = table.to_node(i)
        for n in np.flatnonzero(self.kind < 2):
            ch = [objs[c] for c in self.children(n)]
            if self.kind[n] == SUM:
                objs[n] = Sum(ch, self.weight[self.child_ptr[n]:self.child_ptr[n + 1]])
            else:
                objs[n] = Product(ch)
        if self.combine == "single":
            return objs[self.root]
        return [objs[r] for r in self.roots]


def _logsumexp0(a: np.ndarray) -> np.ndarray:
    m = np.max(a, axis=0)
    ms = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return ms + np.log(np.sum(np.exp(a - ms), axis=0))


def _first_scope_difference(sp, sc, gp, g) -> int:
    N = len(sp) - 1
    for n in range(N):  # only on the error path
        if n + 1 >= len(gp) or not np.array_equal(sc[sp[n]:sp[n + 1]], g[gp[n]:gp[n + 1]]):
            return n
    return N - 1


def _rebuild(state: dict, tables: dict) -> SPN:
    lt = {k: _lb.leaf_type_by_name(k).from_arrays(node, scopes, arrays)
          for k, (node, scopes, arrays) in tables.items()}
    return SPN.from_arrays(leaf_tables=lt, **state)


# ---------------------------------------------------------------------- compile
def compile(root: Node | Sequence[Node], n_vars: int | None = None, cardinality=None,
            var_names: Sequence[str] | None = None, *, normalize: bool = False,
            root_weights=None, combine: str | None = None) -> SPN:
    """Compile construction objects into an :class:`SPN`.

    Walks the graph once (no recursion), keeping shared objects shared. Sum weights must
    be non-negative and add up to 1 within ``WEIGHT_TOL`` (``normalize=True`` rescales any
    positive total instead).
    Variable cardinalities are inferred from the discrete leaves unless given
    (``cardinality[v] == 0`` marks a real variable). Several roots make an ensemble:
    ``combine='mixture'`` with ``root_weights``, or ``'independent'``.
    """
    roots = list(root) if isinstance(root, (list, tuple)) else [root]
    if not roots:
        raise StructureError("nothing to compile: no root")
    index: dict[int, int] = {}
    order: list[Node] = []
    state: dict[int, int] = {}  # 1 = on the stack, 2 = done
    for r in roots:
        if not isinstance(r, Node):
            raise StructureError(f"root must be a spnc node (Sum, Product or a leaf), got {type(r).__name__}")
        stack = [(r, False)]
        while stack:
            obj, expanded = stack.pop()
            key = id(obj)
            if expanded:
                state[key] = 2
                index[key] = len(order)
                order.append(obj)
                continue
            st = state.get(key)
            if st == 2:
                continue
            if st == 1:
                raise StructureError(f"cycle: {obj!r} is its own descendant")
            if not isinstance(obj, Node):
                raise StructureError(f"child must be a spnc node, got {type(obj).__name__}: {obj!r}")
            state[key] = 1
            stack.append((obj, True))
            if isinstance(obj, (Sum, Product)):
                if not obj.children:
                    raise StructureError(f"{obj!r} (node {len(order)}) has no children")
                for c in reversed(obj.children):
                    if state.get(id(c)) == 1:
                        raise StructureError(f"cycle: {c!r} is its own descendant")
                    if state.get(id(c)) != 2:
                        stack.append((c, False))
            elif not isinstance(obj, Leaf):
                raise StructureError(f"unknown node class {type(obj).__name__}")
    N = len(order)
    kind = np.empty(N, dtype=np.uint8)
    deg = np.zeros(N, dtype=np.int64)
    by_type: dict[type, list[int]] = {}
    for i, obj in enumerate(order):
        if isinstance(obj, Sum):
            kind[i] = SUM
            deg[i] = len(obj.children)
            if len(obj.weights) != len(obj.children):
                raise StructureError(f"node {i}: {len(obj.weights)} weights for {len(obj.children)} children")
        elif isinstance(obj, Product):
            kind[i] = PRODUCT
            deg[i] = len(obj.children)
        else:
            lt = type(obj)._leaf_type
            if lt is None:
                raise StructureError(f"node {i}: leaf class {type(obj).__name__} is not registered")
            kind[i] = lt.code
            by_type.setdefault(lt, []).append(i)
    ptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(deg, out=ptr[1:])
    child = np.empty(ptr[-1], dtype=np.int64)
    weight = np.ones(ptr[-1], dtype=np.float64)
    for i in np.flatnonzero(kind < 2):
        obj = order[i]
        a, b = ptr[i], ptr[i + 1]
        child[a:b] = [index[id(c)] for c in obj.children]
        if kind[i] == SUM:
            w = np.asarray(obj.weights, dtype=np.float64)
            if np.any(~np.isfinite(w)) or np.any(w < 0):
                raise StructureError(f"node {i}: sum weights must be finite and non-negative, got {w}")
            tot = w.sum()
            if tot <= 0:
                raise StructureError(f"node {i}: sum weights add up to {tot}, cannot normalise")
            if not normalize and abs(tot - 1.0) > WEIGHT_TOL:
                raise StructureError(f"node {i}: sum weights {w.tolist()} add up to {float(tot):.6g}, not 1 "
                                     "(rescale them, or compile(..., normalize=True))")
            # exactly-normalised input is kept bit for bit (compile(spn.to_nodes()) is exact)
            weight[a:b] = w / tot if abs(tot - 1.0) > 1e-12 else w
    tables = {lt.name: lt.from_nodes(np.asarray(ids, dtype=np.int64), [order[j] for j in ids])
              for lt, ids in by_type.items()}
    all_vars = [int(v) for ids in by_type.values() for j in ids for v in order[j].scope]
    if n_vars is None:
        n_vars = (max(all_vars) + 1) if all_vars else 0
        if cardinality is not None:
            n_vars = len(cardinality)
    _budget.check_n_vars(int(n_vars))
    if cardinality is None:
        card = np.full(n_vars, -1, dtype=np.int64)
        for ids in by_type.values():
            for j in ids:
                for v, k in order[j].cardinality_hint().items():
                    if not 0 <= v < n_vars:
                        raise StructureError(f"node {j}: variable {v} is outside 0..{n_vars - 1}")
                    if card[v] != -1 and (card[v] == 0) != (k == 0):
                        raise StructureError(f"variable {v} has both discrete and real-valued leaves")
                    card[v] = max(card[v], k)
        card[card == -1] = 0
        cardinality = card
    roots_idx = [index[id(r)] for r in roots]
    if combine is None:
        combine = "single" if len(roots) == 1 else ("mixture" if root_weights is not None else "independent")
    if root_weights is not None:
        rw = np.asarray(root_weights, dtype=np.float64)
        if rw.shape != (len(roots),) or np.any(~np.isfinite(rw)) or np.any(rw < 0) or rw.sum() <= 0:
            raise StructureError("root_weights must be one finite non-negative weight per root, with a positive total")
        if not normalize and abs(rw.sum() - 1.0) > WEIGHT_TOL:
            raise StructureError(f"root_weights add up to {rw.sum()!r}, not 1 (or pass normalize=True)")
        root_weights = rw / rw.sum() if abs(rw.sum() - 1.0) > 1e-12 else rw
    return SPN.from_arrays(kind, ptr, child, weight, tables, cardinality, var_names=var_names,
                           roots=roots_idx, root_weights=root_weights, combine=combine)
