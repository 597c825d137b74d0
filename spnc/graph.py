"""The compiled SPN: the public facade of queries.

Nodes are stored children-before-parents (the root last), children in CSR form
(``child_ptr``/``child``) with one weight per edge, scopes in CSR form, and the leaf
parameters in one table per leaf type (:mod:`spnc.leaves`). Checks live in
:mod:`spnc._validation`, compilation from node objects in :mod:`spnc.compile`, chunking
and threads in :mod:`spnc._sweep`, the compiled passes in :mod:`spnc._infer`.
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from . import _budget, _data, _infer
from . import _validation as _v
from ._buffers import aligned_empty
from ._kinds import COMBINE, MARGINAL, MAX, PRODUCT, SUM, VAR_BINARY, VAR_CATEGORICAL, VAR_REAL, WEIGHT_TOL  # noqa: F401
from ._conditional import check_evidence_range, check_mpe_evidence, log_conditional
from ._seeds import SeedLike, seed_of
from ._selection import select
from ._sweep import Sweep, cell, check_posterior_range
from ._text import counted
from ._warn import positional_frame
from .data import as_data, column_names, frame_column, is_frame, real_array
from .errors import DataError, ParameterError, StructureError
from .leaves import base as _lb
from .nodes import Node

#: per-model caches that a reparameterised copy must not share
_PARAM_CACHES = frozenset({"_compiled", "_leafcache", "_decisive_leaves", "_observed_sums", "_leaf_states",
                            "_observed_route", "_changed_from"})


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
        self.kind = _v.as_array(kind, np.uint8, "kind")
        N = len(self.kind)
        if N == 0:
            raise StructureError("an SPN needs at least one node")
        if N >= 2**31 - 1:
            raise StructureError(f"{N} nodes is more than the 2^31 - 1 supported")
        self.child_ptr = _v.as_array(child_ptr, np.int64, "child_ptr")
        self.child = _v.as_array(child, np.int32, "child")
        self.weight = _v.as_array(weight, np.float64, "weight")
        self.cardinality = _v.as_array(cardinality, np.int32, "cardinality")
        if var_type is None:
            c = self.cardinality
            var_type = np.where(c == 0, VAR_REAL, np.where(c == 2, VAR_BINARY, VAR_CATEGORICAL))
        self.var_type = _v.as_array(var_type, np.uint8, "var_type")
        self.var_names = var_names      # checks the variables too
        self.roots = _v.as_array([N - 1] if roots is None else roots, np.int64, "roots")
        self.root_weights = None if root_weights is None else _v.as_array(root_weights, np.float64, "root_weights")
        if combine not in COMBINE:
            raise StructureError(f"combine must be one of {COMBINE}, got {combine!r}")
        self.combine = combine
        self.leaf_tables = dict(leaf_tables)
        self.stats = {} if stats is None else dict(stats)
        self.learner = {} if learner is None else dict(learner)
        _v.check_kinds(self.kind)
        _v.check_csr(self.child_ptr, N, len(self.child))
        parent = _v.check_edges(self.kind, self.child_ptr, self.child)
        if len(self.weight) != len(self.child):
            raise StructureError(f"weight has length {len(self.weight)}, expected n_edges = {len(self.child)}")
        self.leaf_slot, self.n_leaves, lptr, lscope = _v.index_leaves(self.kind, self.leaf_tables, self.n_vars)
        sp, sc = _v.derive_scopes(self.kind, self.child_ptr, self.child, lptr, lscope)
        if scope_ptr is not None or scope is not None:
            if scope_ptr is None or scope is None:
                raise StructureError("scope_ptr and scope must be given together")
            _v.check_stored_scopes(sp, sc, scope_ptr, scope)
        self.scope_ptr, self.scope = sp, sc
        sp.setflags(write=False)
        sc.setflags(write=False)
        if validate:
            _v.check_weights(self.kind, self.child_ptr, self.weight, parent)
            _v.check_leaf_parameters(self.leaf_tables, self.cardinality)
            _v.check_roots(self.roots, combine, self.root_weights, N, sp, sc, self.child_ptr, self.child)
        self.logw = np.log(self.weight, where=self.weight > 0, out=np.full(len(self.weight), -np.inf))
        self.logw[self.kind[parent] == PRODUCT] = 0.0
        self.logw.setflags(write=False)
        return self

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

    @property
    def var_names(self) -> list[str] | None:
        """The variables' names (None: unnamed; DataFrames are then taken by position)."""
        return self._var_names

    @var_names.setter
    def var_names(self, names: Sequence[str] | None) -> None:
        names = _v.as_names(names)
        _v.check_variables(self.cardinality, self.var_type, names)     # one distinct, storable name each
        self._var_names = names

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

    def _reparameterised(self, weight: np.ndarray, leaf_tables: dict, root_weights=None) -> "SPN":
        """The same structure with new sum weights, leaf tables (same leaves, same order)
        and root weights: what EM's M-step produces. Checks the new parameters only."""
        new = object.__new__(SPN)
        # caches derived from the parameters (compiled graph, merging's leaf values) stay behind
        new.__dict__.update({k: v for k, v in self.__dict__.items() if k not in _PARAM_CACHES})
        new.weight = _v.as_array(weight, np.float64, "weight")
        new.root_weights = None if root_weights is None else _v.as_array(root_weights, np.float64, "root_weights")
        new.leaf_tables = dict(leaf_tables)
        new.stats, new.learner = dict(self.stats), dict(self.learner)
        for k, t in new.leaf_tables.items():
            old = self.leaf_tables[k]
            if t is not old and not np.array_equal(t.node, old.node):
                raise StructureError(f"leaf table {k!r}: the leaves changed; build a new SPN")
            t.slot = old.slot
        parent = np.repeat(np.arange(self.n_nodes), np.diff(self.child_ptr))
        _v.check_weights(self.kind, self.child_ptr, new.weight, parent)
        _v.check_leaf_parameters(new.leaf_tables, self.cardinality, known=self.leaf_tables)
        _v.check_root_weights(self.roots, self.combine, new.root_weights)   # roots and scopes as before
        new.logw = np.log(new.weight, where=new.weight > 0, out=np.full(len(new.weight), -np.inf))
        new.logw[self.kind[parent] == PRODUCT] = 0.0
        new.logw.setflags(write=False)
        if "_compiled" in self.__dict__:    # the structure's plans carry over
            new._compiled = self._compiled.reweighted(new.logw, new.weight)
        return new

    def copy(self) -> "SPN":
        """An independent copy (arrays copied, parameters editable on the copy only)."""
        tables = {k: type(t).from_arrays(t.node.copy(), [s.copy() for s in t.scopes],
                                         {a: v.copy() for a, v in t.to_arrays().items()})
                  for k, t in self.leaf_tables.items()}
        st = self._state()
        st["stats"] = {k: np.array(v, copy=True) for k, v in self.stats.items()}
        st["learner"] = dict(self.learner)
        return SPN.from_arrays(leaf_tables=tables, **st)

    def _check_X(self, X, name: str = "X", row0: int = 0, *, defer: bool = False):
        """``X`` as a float64 (n, n_vars) array; raises DataError naming the bad cell (its row
        counted from ``row0``, the row of the whole input where a block ``X`` starts). With
        ``defer``, returns ``(X, check)`` and leaves the check of the values (inf, categories)
        to ``check`` (None if done here), which a :class:`Sweep` runs on the blocks it stages
        (``check(r0, r1)`` raises on rows r0:r1 as this would on all rows)."""
        if isinstance(X, (str, bytes)) or hasattr(X, "__fspath__"):
            raise DataError(f"{name} is a file name ({X!r}); this call needs rows in memory: read them with "
                            "spnc.stream.load, or use the spnc.stream functions that stream")
        given = X
        X = as_data(X, self.var_names, name, model_names=False)[0]    # a DataFrame: matched by name
        if self.var_names is None and is_frame(given):     # after as_data: no warning for a refused frame
            positional_frame(name)
        A = real_array(X, name, np.float64)
        if A.ndim == 1 and self.n_vars > 1 and A.shape[0] == self.n_vars:
            raise DataError(f"{name} must be 2-D (n_rows, {self.n_vars}); got a 1-D array — use {name}[None, :] for one row")
        if A.ndim != 2:
            raise DataError(f"{name} must be 2-D (n_rows, {self.n_vars}), got shape {A.shape}")
        if A.shape[1] != self.n_vars:
            raise DataError(f"{name} has {counted(A.shape[1], 'column')}, the model has {counted(self.n_vars, 'variable')}")
        check = functools.partial(self._check_values, A, name, row0, given)
        hooks = [t for t in self.leaf_tables.values() if len(t) and type(t).check_data is not _lb.LeafType.check_data]
        if not defer or hooks:      # a leaf type's own check sees values that passed the general one
            check(0, A.shape[0])
            check = None
        for t in hooks:             # a leaf type's own support (the hook of LeafType)
            t.check_data(A, self.cardinality)
        return (A, check) if defer else A

    def _check_values(self, A: np.ndarray, name: str, row0, given, r0: int, r1: int) -> None:
        """Raise DataError naming the first inf or out-of-range category in rows r0:r1 of A."""
        r, c, code = _data.first_bad_value(A[r0:r1], self.cardinality)
        if not code:
            return
        r += r0
        var = f"variable {c}" + ("" if self.var_names is None else f" ({self.var_names[c]!r})")
        # a DataFrame's columns were put in the model's order: name the cell by the frame's
        fc = frame_column(given, self.var_names, c)
        if code == 1:
            raise DataError(f"{cell(name, row0, r, fc)} = {A[r, c]}: infinite values are not allowed "
                            f"(use NaN for missing), {var}")
        raise DataError(f"{cell(name, row0, r, fc)} = {float(A[r, c])!r} is not a state "
                        f"0..{self.cardinality[c] - 1} of discrete {var}")

    def _root_logw(self) -> np.ndarray:
        if self.combine == "mixture":
            return np.log(self.root_weights, where=self.root_weights > 0, out=np.full(len(self.roots), -np.inf))
        return np.zeros(len(self.roots))

    # ------------------------------------------------------------------ queries
    def log_likelihood(self, X, *, n_threads: int | None = None) -> np.ndarray:
        """log p(x) for each row of ``X`` (n, n_vars); NaN entries are marginalised out, so
        one call answers joint and marginal queries. For ``combine='independent'`` the
        result has one column per root."""
        X, check = self._check_X(X, defer=True)
        return self._forward(X, MARGINAL, n_threads, check)

    def _forward(self, X: np.ndarray, mode: int, n_threads: int | None, check=None) -> np.ndarray:
        R = len(self.roots)
        vals = np.empty((R, X.shape[0]))
        empty = np.empty((0, 0))
        sw = Sweep(self, X, mode, n_threads, stage=True, check=check)
        for r0, r1, XT, L in sw:
            out = np.empty((R, sw.width(r0, r1, XT)))
            _infer.forward(sw.graph, sw.states, XT, L, self.roots, out, empty, mode, sw.n_threads, sw.ws,
                           rows=sw.rows(r0, r1), check=sw.cells)
            sw.check_cells(r0, r1)
            vals[:, r0:r1] = out[:, : r1 - r0]
        if self.combine == "single":
            return vals[0]
        if self.combine == "independent":
            return vals.T
        v = vals + self._root_logw()[:, None]
        if mode == MAX:
            return np.max(v, axis=0)
        m = np.max(v, axis=0)
        ms = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(divide="ignore"):
            return ms + np.log(np.sum(np.exp(v - ms), axis=0))

    def conditional(self, X_query, X_evidence, *, n_threads: int | None = None) -> np.ndarray:
        """log p(query | evidence) per row: ``X_query`` holds the query and evidence values
        (NaN elsewhere), ``X_evidence`` only the evidence values, one row per query row.
        Evidence of probability zero, or log-likelihoods too large for their difference
        to be accurate, raise :class:`DataError` (:func:`log_conditional`)."""
        Xq, cq = self._check_X(X_query, "X_query", defer=True)
        Xe, ce = self._check_X(X_evidence, "X_evidence", defer=True)
        if Xq.shape[0] != Xe.shape[0]:          # before two passes over the rows
            raise DataError(f"X_query has {Xq.shape[0]} rows and X_evidence {Xe.shape[0]}: one evidence "
                            "row per query row")
        q = self._forward(Xq, MARGINAL, n_threads, cq)      # bad values are refused first
        e = self._forward(Xe, MARGINAL, n_threads, ce)
        bad = ~np.isnan(Xe) & (np.isnan(Xq) | (Xq != Xe))
        if bad.any():
            r, c = (int(i) for i in np.argwhere(bad)[0])
            # DataFrames were put in the model's order: name each frame's own cell
            q_at = cell("X_query", 0, r, frame_column(X_query, self.var_names, c))
            e_at = cell("X_evidence", 0, r, frame_column(X_evidence, self.var_names, c))
            var = f"variable {c}" + ("" if self.var_names is None else f" ({self.var_names[c]!r})")
            raise DataError(f"{q_at} = {float(Xq[r, c])!r} must repeat the evidence value {e_at} = "
                            f"{float(Xe[r, c])!r} ({var})")
        return log_conditional(q, e)

    def mpe(self, X, *, log_likelihood: bool = False,
            n_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Fill the missing entries of ``X`` with the max-product (MPE) assignment.

        Returns ``(X_filled, log_p)``. ``log_p`` is the max-product value of each completed
        row: the log weight of its most probable induced tree, which the completion
        maximises. It equals log p(X_filled) on selective models and is a lower bound of it
        otherwise. With ``log_likelihood=True``, ``log_p`` is log p(X_filled) (the
        sum-product value, at the cost of about one more log-likelihood pass). Observed
        entries are kept, variables in no leaf stay NaN; the columns are X's (a DataFrame's
        in its own order). Evidence too improbable for exact conditionals raises DataError."""
        A, check = self._check_X(X, defer=True)
        self._need_single_root("mpe")
        ll = np.empty(A.shape[0]) if log_likelihood else None
        rv = np.empty(A.shape[0])
        filled = select(self, A, MAX, seed=0, n_threads=n_threads, evidence=True, ll=ll, root_value=rv, check=check)
        check_mpe_evidence(self, A, rv, n_threads)
        return self._in_order_of(X, filled), (ll if log_likelihood else rv)

    def _in_order_of(self, X, rows: np.ndarray) -> np.ndarray:
        """``rows`` (the model's variable order) with the columns of ``X``: a DataFrame's
        columns, or a dataset's that names them, are taken by name and may come in another
        order."""
        cols = None if self.var_names is None else column_names(X)
        if cols is None:
            return rows
        pos = {v: i for i, v in enumerate(self.var_names)}
        order = np.array([pos[c] for c in cols], dtype=np.int64)
        return rows if np.array_equal(order, np.arange(len(order))) else rows[:, order]

    def sample(self, n: int | None = None, evidence=None, seed: SeedLike = None, *,
               n_threads: int | None = None) -> np.ndarray:
        """Draw rows (n, n_vars) from the model, or from p(missing | observed) for each row of
        ``evidence`` (NaN: to sample; a DataFrame's in its own column order; refused as in
        :meth:`mpe`). Variables in no leaf stay NaN. Reproducible for a given integer
        ``seed``, whatever ``n_threads``; a numpy ``Generator`` or ``RandomState`` draws
        the seed (and advances)."""
        self._need_single_root("sample")
        seed = seed_of(seed)
        whole = lambda v: not isinstance(v, (bool, np.bool_)) and isinstance(v, (int, np.integer))  # noqa: E731
        if n is not None and not whole(n):
            raise ParameterError("n", f"sample needs a whole number n >= 0 (or evidence rows), got {n!r}")
        if seed is not None and not (whole(seed) and 0 <= int(seed) < 2**64):
            raise ParameterError("seed", "seed must be an integer in [0, 2**64), a numpy Generator, a "
                                         f"RandomState or None, got {seed!r}")
        if evidence is None:
            if n is None or int(n) < 0:
                raise ParameterError("n", f"sample needs a whole number n >= 0 (or evidence rows), got {n!r}")
            _budget.check(8.0 * int(n) * self.n_vars, f"{int(n)} samples of {self.n_vars} variables")
            # all missing, read through zero strides: no n x n_vars input to fill (serially)
            X = np.broadcast_to(np.float64(np.nan), (int(n), self.n_vars))
        else:
            X, check = self._check_X(evidence, "evidence", defer=True)
            ll = self._forward(X, MARGINAL, n_threads, check)     # bad values are refused first
            if n is not None and int(n) != X.shape[0]:
                raise ParameterError("n", f"n={n} does not match the {X.shape[0]} evidence rows")
            if X.shape[0]:
                if np.any(ll == -np.inf):
                    r = int(np.flatnonzero(ll == -np.inf)[0])
                    raise DataError(f"evidence row {r} has probability zero under the model")
                check_evidence_range(self, X, ll, "evidence")
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
        out = select(self, X, MARGINAL, seed=int(seed) & (2**64 - 1), n_threads=n_threads,
                           evidence=evidence is not None)
        return out if evidence is None else self._in_order_of(evidence, out)

    def _need_single_root(self, what: str) -> None:
        if self.combine != "single":
            raise StructureError(f"{what} needs a single-root model; this one has combine={self.combine!r} "
                                 "(add a sum root to mix the members)")

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
        X, check = self._check_X(X, defer=True)
        if self.combine == "independent":
            raise StructureError("backward needs a single-root or mixture model")
        n = X.shape[0]
        from .chowliu import check_weights
        w = np.ones(n) if sample_weight is None else check_weights(sample_weight, n, positive_total=False)
        sw = Sweep(self, X, MARGINAL, n_threads, workspace="backward", stage=True, check=check)
        nt = sw.n_threads
        ll = np.empty(n)
        edge_acc = np.zeros((nt, self.n_edges))
        node_acc = np.zeros((nt, self.n_nodes))
        _budget.check(8.0 * n * (self.n_nodes * node_posteriors + self.n_leaves * leaf_responsibilities), "posteriors")
        post = np.empty((n, self.n_nodes)) if node_posteriors else None
        resp = np.empty((n, self.n_leaves)) if leaf_responsibilities else None
        rlw = self._root_logw()
        for r0, r1, XT, L in sw:
            m = sw.width(r0, r1, XT)
            rw = aligned_empty(m, zero=True)       # row weights: read with every posterior
            rw[: r1 - r0] = w[r0:r1]
            llc = np.empty(m)
            lr = np.empty((self.n_leaves, m)) if leaf_responsibilities else np.empty((0, m))
            ap = np.empty((self.n_nodes, m)) if node_posteriors else np.empty((0, m))
            _infer.backward(sw.graph, sw.states, XT, L, self.roots, rlw, rw, llc,
                            edge_acc, node_acc, lr, ap, nt, sw.ws, rows=sw.rows(r0, r1), check=sw.cells)
            sw.check_cells(r0, r1)
            ll[r0:r1] = llc[: r1 - r0]
            check_posterior_range(llc[: r1 - r0], r0)
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

    def node_log_values(self, X, *, mode: int = MARGINAL, n_threads: int | None = None) -> np.ndarray:
        """log S_n(x) of every node for every row, shape (n, n_nodes); ``mode=MAX`` for
        max-product values. Memory grows with n x n_nodes: meant for learners and tests."""
        if isinstance(mode, (bool, np.bool_)) or mode not in (MARGINAL, MAX):
            raise ParameterError("mode", f"mode must be {MARGINAL} (MARGINAL: sum-product) or {MAX} "
                                         f"(MAX: max-product), got {mode!r}")
        X = self._check_X(X)
        _budget.check(16.0 * X.shape[0] * self.n_nodes, f"node values of {X.shape[0]} rows x {self.n_nodes} nodes")
        vals = np.empty((X.shape[0], self.n_nodes))
        sw = Sweep(self, X, mode, n_threads, workspace="all")
        for r0, r1, XT, L in sw:
            allv = np.empty((self.n_nodes, XT.shape[1]))
            out = np.empty((len(self.roots), XT.shape[1]))
            _infer.forward(sw.graph, sw.states, XT, L, self.roots, out, allv, mode, sw.n_threads, sw.ws)
            vals[r0:r1] = allv[:, : r1 - r0].T
        return vals

    def to_nodes(self) -> Node:
        """Construction objects equal to this SPN (shared nodes stay shared). Returns the
        root (or a list of roots for multi-root models)."""
        from .compile import to_nodes
        return to_nodes(self)


def _rebuild(state: dict, tables: dict) -> SPN:
    lt = {k: _lb.leaf_type_by_name(k).from_arrays(node, scopes, arrays)
          for k, (node, scopes, arrays) in tables.items()}
    return SPN.from_arrays(leaf_tables=lt, **state)


from .compile import compile  # noqa: E402,F401  (spnc.graph.compile stays importable)
