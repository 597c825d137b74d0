"""The one sweep engine: rows in chunks, workspaces, the leaf matrix and the thread count.

Every query of :class:`spnc.SPN`, EM's E-step and the learners' passes run as a
:class:`Sweep`: it picks the thread count (:func:`spnc._threads.effective_n_threads`),
sizes chunks of rows so that the leaf matrix stays in cache, transposes each chunk (one
contiguous row per variable, NaN = missing) and lets the leaf tables that the sweep does
not evaluate itself fill their rows of the leaf matrix. Discrete univariate leaves (those
whose table has ``state_log_probs``) are evaluated inside the compiled sweep; a model with
no other leaves needs no transposed chunk at all, as its blocks stage their own rows. Per-row
results (log-likelihoods, marginals, MPE, samples, posteriors) never depend on the chunking
or the thread count. Totals over rows (the backward pass's counts, EM's statistics) are
added in fixed groups of blocks, in group order (:func:`spnc._threads.reduction_groups`), and
the chunks do not depend on the thread count either: they are the same bits for every
``n_threads``.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

import numpy as np

from . import _data, _graph, _infer
from ._buffers import aligned_empty, whole_lines
from ._kinds import MAX
from ._threads import available_threads, effective_n_threads

BLOCK = _infer.BLOCK
#: leaf-matrix budget per chunk (float64 values): 16 MB, so the matrix is still in the
#: last-level cache when the sweep reads it back
CHUNK_VALUES = 1 << 21
#: rows per chunk at the most (the transposed chunk and the outputs stay small)
MAX_CHUNK_ROWS = 16 * 1024
#: chunks of at most this many rows give their matrix leaves a compact copy of the real
#: columns: the padding (up to 2 * BLOCK - 1 columns) is a large share of a small chunk
COMPACT_ROWS = 1024
#: beyond this |log p| the scaled sweeps' power-of-two exponents (doubles) are no longer
#: exact integers: log-likelihoods stay right to their own rounding, but ratios of node
#: values (posteriors, edge counts) can be off by powers of two
EXACT_LOG_RANGE = 1e15


#: {data name: the caller's row of each of its rows} while a learner sees a resample of the
#: caller's rows (BaggedSPN's bootstrap samples and out-of-bag rows); None: they are the caller's
_INPUT_ROWS: contextvars.ContextVar = contextvars.ContextVar("spnc_input_rows", default=None)


@contextlib.contextmanager
def resampled_rows(rows: np.ndarray, valid_rows: np.ndarray | None = None):
    """Within this block the training rows are ``X[rows]`` of the caller's ``X`` (and the
    validation rows ``X_valid``, if ``valid_rows`` is given, ``X[valid_rows]``): row numbers
    in data errors (:func:`row_number`, :func:`cell`) name the caller's rows. Nests."""
    outer = _INPUT_ROWS.get()

    def lift(r):
        r = np.asarray(r)
        return r if outer is None else outer["X"][r]
    inner = {"X": lift(rows)}
    if valid_rows is not None:
        inner["X_valid"] = lift(valid_rows)
    token = _INPUT_ROWS.set(inner)
    try:
        yield
    finally:
        _INPUT_ROWS.reset(token)


def row_number(row0, r: int, name: str = "X") -> int:
    """Row ``r`` of a block as a row of the input ``name``; ``row0`` is the input row where
    the block starts, or an array of the input row of each row of the block. Inside
    :func:`resampled_rows`, the row of the caller's ``X`` that it was drawn from (for the
    data names that block maps)."""
    i = int(row0[r]) if isinstance(row0, np.ndarray) else int(row0) + int(r)
    rows = _INPUT_ROWS.get()
    rows = None if rows is None else rows.get(name)
    return i if rows is None or not 0 <= i < len(rows) else int(rows[i])


def cell(name: str, row0, r: int, c: int | None = None) -> str:
    """``name[i, c]`` (or ``name row i`` without ``c``) for row ``r`` of a block, as
    :func:`row_number` numbers it; inside :func:`resampled_rows` the data is named ``X``,
    the caller's own."""
    i = row_number(row0, r, name)
    rows = _INPUT_ROWS.get()
    if rows is not None and name in rows:
        name = "X"
    return f"{name}[{i}, {c}]" if c is not None else f"{name} row {i}"


def check_posterior_range(ll: np.ndarray, row0=0) -> None:
    """Refuse rows whose posteriors the backward pass cannot compute exactly (``row0`` as
    in :func:`row_number`)."""
    from .errors import DataError
    bad = np.flatnonzero(np.isfinite(ll) & (ll < -EXACT_LOG_RANGE))
    if bad.size:
        r = int(bad[0])
        raise DataError(f"row {row_number(row0, r)}: log p = {float(ll[r]):.3g} is below -{EXACT_LOG_RANGE:g}, "
                        "beyond which the backward pass's posteriors are not exact (a value far outside every "
                        "leaf's mass)")


def graph_of(spn) -> _graph.Graph:
    """The compiled :class:`spnc._graph.Graph` of ``spn`` (built once, cached)."""
    g = spn.__dict__.get("_compiled")
    if g is None:
        g = _graph.Graph(spn.kind, spn.child_ptr, spn.child, spn.logw, spn.leaf_slot, spn.roots, spn.n_leaves,
                         spn.weight, bounded=all(t.discrete for t in spn.leaf_tables.values() if len(t)))
        spn._compiled = g
    return g


def leaf_states(spn, mode: int) -> tuple[_graph.LeafStates, list, dict]:
    """State tables of the leaves the sweep evaluates itself, for ``mode``, the list of
    the other (leaf-matrix) tables, and {table name: (first, end)} of each inline table's
    states in the state arrays. Kept on the model per mode, keyed by the tables' parameter
    contents (parameters may be edited in place), so repeated small queries do not rebuild
    them."""
    key = (mode, hash(np.asarray(spn.cardinality).tobytes()),
           tuple((id(t),) + t.content_key() for t in spn.leaf_tables.values()))
    kept = spn.__dict__.setdefault("_leaf_states", {})
    hit = kept.get(mode)
    if hit is not None and hit[0] == key:
        return hit[1]
    out = _leaf_states(spn, mode)
    kept[mode] = (key, out)
    return out


def _leaf_states(spn, mode: int) -> tuple[_graph.LeafStates, list, dict]:
    N = spn.n_nodes
    var = np.full(N, -1, dtype=np.int32)
    off = np.zeros(N, dtype=np.int64)
    miss = np.zeros(N)
    nst = np.zeros(N, dtype=np.int32)
    best = np.zeros(N, dtype=np.int32)
    parts, base, matrix, spans = [], 0, [], {}
    for table in spn.leaf_tables.values():
        if not len(table):
            continue
        st = table.state_log_probs(spn.cardinality)
        if st is None:
            matrix.append(table)
            continue
        tvar, ptr, lp = st
        var[table.node] = tvar
        off[table.node] = base + ptr[:-1]
        nst[table.node] = np.diff(ptr)
        mx = np.maximum.reduceat(lp, ptr[:-1])
        first = np.flatnonzero(lp == np.repeat(mx, np.diff(ptr)))  # the first maximum of each leaf
        owner = np.searchsorted(ptr, first, side="right") - 1
        keep = np.concatenate([[True], owner[1:] != owner[:-1]])
        best[table.node[owner[keep]]] = first[keep] - ptr[owner[keep]]
        if mode == MAX:
            miss[table.node] = mx
        parts.append(lp)
        spans[table.name] = (base, base + len(lp))
        base += len(lp)
    logp = np.concatenate(parts) if parts else np.zeros(1)
    skip = graph_of(spn).prod_only_[:N].astype(bool) & (var >= 0)
    return _graph.LeafStates(var, off, logp, miss, nst, best, skip), matrix, spans


def _width(rows: int) -> int:
    """Columns of a transposed chunk: whole blocks, an odd number of them. A row stride of
    a multiple of 4 kB * 2^k maps the chunk's variables (read together, a block at a time)
    to the same cache sets, which evicts them from L1 and L2 long before the caches fill."""
    b = -(-rows // BLOCK)
    return (b + 1 - b % 2) * BLOCK


def transposed_chunk(X: np.ndarray, r0: int, r1: int, n_threads: int = 1) -> np.ndarray:
    """Rows ``r0:r1`` of ``X`` as a transposed chunk (n_vars, _width(r1 - r0)), padded
    (:func:`pad_columns`)."""
    XT = aligned_empty((X.shape[1], _width(r1 - r0)))
    if X.dtype == np.float64:
        _data.transpose_into(X, r0, r1, XT, n_threads)
    else:
        XT[:, : r1 - r0] = X[r0:r1].T
    pad_columns(XT, r1 - r0)
    return XT


class TransposedRows:
    """The transposed chunks of fixed rows ``X``, made once and kept (for the chunk sizes
    of the last two sweeps), for passes that read the same rows again and again; rows
    whose two copies would take more than ``max_bytes`` are transposed on every pass
    instead. The chunks are shared: sweeps given them must not write into them."""

    def __init__(self, X: np.ndarray, n_threads: int = 1, max_bytes: int = 512 << 20):
        self.X, self.n_threads = X, n_threads
        self.keep = 2 * 8 * X.size <= max_bytes
        self._kept: dict[int, dict[int, np.ndarray]] = {}
        self.last_step = 4096           # chunk size of the last request

    def chunk(self, r0: int, r1: int, step: int) -> np.ndarray:
        """The chunk of rows ``r0:r1`` of a sweep walking the rows in steps of ``step``."""
        if not self.keep:
            return transposed_chunk(self.X, r0, r1, self.n_threads)
        by_row = self._kept.pop(step, None) or {}
        self._kept[step] = by_row                  # the most recent step last
        self.last_step = step
        while len(self._kept) > 2:
            del self._kept[next(iter(self._kept))]
        XT = by_row.get(r0)
        if XT is None:
            XT = by_row[r0] = transposed_chunk(self.X, r0, r1, self.n_threads)
        return XT


def pad_columns(XT: np.ndarray, m: int) -> None:
    """Fill the padding columns ``m:`` of a transposed chunk with copies of column ``m-1``.
    Their results are never read; a real row keeps the leaves on their fast path, where an
    all-missing pad sent tree leaves through message passing (small chunks give matrix
    leaves no padding at all: :meth:`Sweep.leaf_matrix`)."""
    if 0 < m < XT.shape[1]:
        XT[:, m:] = XT[:, m - 1:m]


class Sweep:
    """One pass over the rows of ``X`` in ``mode``.

    ``workspace``: ``"plan"`` (forward values of the live nodes only), ``"all"`` (every
    node's value kept: node values), ``"backward"`` (values and posteriors) or ``"select"``
    (MPE, hard EM and sampling).
    ``leaf_values``: an object whose ``chunk(spn, L, r0, r1, XT)`` writes the leaf-matrix
    rows of rows ``r0:r1`` of ``X`` (transposed chunk ``XT``) into ``L`` (values computed
    earlier and kept, see :class:`spnc.learn._leafcache.LeafCache`); None evaluates the
    leaves.
    ``budget_rows``: leaf rows per column the chunk budget is shared by (default: the
    leaf-matrix leaves; EM passes all leaves, whose responsibilities it reads back).
    ``stage``: the kernel may read the rows of ``X`` itself, staging each block it sweeps;
    when it can (every leaf inline, float64 rows), :attr:`staged` is True and the chunks
    come untransposed: XT is an empty (n_vars, 0) array and the kernel takes :meth:`rows`.
    ``transposed``: a :class:`TransposedRows` of ``X`` whose kept chunks the sweep reads
    (read only) instead of transposing them again.
    ``check``: the check of ``X``'s values that ``spn._check_X(..., defer=True)`` left to the
    sweep, ``check(r0, r1)`` raising DataError on the first bad cell of rows r0:r1. A staged
    sweep checks each block it stages (bad values become NaN there) and the query calls
    :meth:`check_cells` after each chunk's kernel; otherwise all rows are checked here."""

    def __init__(self, spn, X: np.ndarray, mode: int, n_threads: int | None, *, workspace: str = "plan",
                 budget: int = CHUNK_VALUES, budget_rows: int | None = None, leaf_matrix: bool = True,
                 leaf_values=None, stage: bool = False, transposed: "TransposedRows | None" = None,
                 check=None):
        self.spn, self.X, self.mode = spn, X, mode
        self.leaf_values = leaf_values
        self.transposed = transposed
        n = X.shape[0]
        self.graph = graph_of(spn)
        self.n_threads = nt = effective_n_threads(n_threads, n * (spn.n_edges + spn.n_nodes))
        self.states, self.matrix, self.spans = leaf_states(spn, mode)
        self._fill_matrix = leaf_matrix
        n_mat = sum(len(t) for t in self.matrix)
        rows = budget // max(n_mat if budget_rows is None else budget_rows, 1)
        # at least two blocks per available thread, not per thread used: the chunks, and so the
        # order in which totals over rows are added, must not depend on n_threads
        step = int(min(max(2 * BLOCK * available_threads(), rows // BLOCK * BLOCK), MAX_CHUNK_ROWS)) // BLOCK
        self.step = (step - 1 + step % 2) * BLOCK if step > 1 else BLOCK   # an odd number of blocks
        m_max = _width(min(self.step, max(n, 1)))
        # linear sweeps keep a mantissa and an exponent per value
        per = {"plan": 2 * self.graph.n_slots * BLOCK, "all": spn.n_nodes * BLOCK,
               "backward": _infer.backward_ws(self.graph), "select": _infer.select_ws(self.graph)}[workspace]
        self.ws = aligned_empty((nt, whole_lines(max(per, BLOCK))))
        # leaf values that are all log 1 need the matrix zeroed once, not per chunk
        self._zero = bool(getattr(leaf_values, "all_zero", False))
        self._lbuf = aligned_empty(max(spn.n_leaves, 1) * m_max, zero=self._zero) \
            if self.matrix and leaf_matrix else np.zeros((1, 1))
        self.staged = bool(stage and not self.matrix and X.dtype == np.float64
                           and all(st % X.itemsize == 0 for st in X.strides))
        self._no_XT = np.empty((max(spn.n_vars, 1), 0))   # never read: the kernels stage rows
        self._check, self.cells = check, None
        if check is not None and self.staged:       # the kernels' argument ``check``
            self.cells = (np.asarray(spn.cardinality, dtype=np.float64), np.zeros(nt, dtype=np.uint8))
        elif check is not None:
            check(0, n)

    def acts(self) -> np.ndarray:
        """Per-thread row masks of the selection kernels (a 64-bit word per slot and one per
        variable)."""
        return np.empty((self.n_threads, self.graph.n_pslots + self.spn.n_vars), dtype=np.uint64)

    def __iter__(self) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
        """(r0, r1, XT, L): the transposed chunk padded to whole blocks (see
        :func:`pad_columns`), and the leaf matrix of the matrix leaves (n_leaves, m) for it."""
        X, n = self.X, self.X.shape[0]
        for r0 in range(0, n, self.step):
            r1 = min(n, r0 + self.step)
            if self.staged:
                yield r0, r1, self._no_XT, self._lbuf
                continue
            if self.transposed is not None and self.transposed.X is X:
                XT = self.transposed.chunk(r0, r1, self.step)
            else:
                XT = transposed_chunk(X, r0, r1, self.n_threads)
            if self.leaf_values is not None and self.matrix and self._fill_matrix:
                L = self._lbuf[: max(self.spn.n_leaves, 1) * XT.shape[1]].reshape(-1, XT.shape[1])
                if not self._zero:
                    self.leaf_values.chunk(self.spn, L, r0, r1, XT)
                yield r0, r1, XT, L
            else:
                yield r0, r1, XT, self.leaf_matrix(XT, r1 - r0)

    def rows(self, r0: int, r1: int) -> np.ndarray | None:
        """The rows the kernel stages for chunk r0:r1 (None: it reads the chunk's XT)."""
        return self.X[r0:r1] if self.staged else None

    def check_cells(self, r0: int, r1: int) -> None:
        """After the kernel swept chunk r0:r1: raise the DataError of its first bad cell if a
        staged block had one (its results are not valid then)."""
        if self.cells is not None and self.cells[1].any():
            self._check(r0, r1)
            raise RuntimeError("spnc: a staged block was flagged bad, but its rows check good")

    def width(self, r0: int, r1: int, XT: np.ndarray) -> int:
        """Columns of chunk r0:r1 in the kernels' outputs: XT's, or whole blocks."""
        return -(-(r1 - r0) // BLOCK) * BLOCK if self.staged else XT.shape[1]

    def leaf_matrix(self, XT: np.ndarray, m: int | None = None) -> np.ndarray:
        """The matrix leaves' values on the columns of ``XT``, of which the first ``m`` are
        rows (the others padding: their values are 0)."""
        if not self.matrix or not self._fill_matrix:
            return self._lbuf
        shape = (max(self.spn.n_leaves, 1), XT.shape[1])
        L = self._lbuf[: shape[0] * shape[1]].reshape(shape)
        m = XT.shape[1] if m is None else m
        compact = m < XT.shape[1] and m <= COMPACT_ROWS
        XTc, Lc = (np.ascontiguousarray(XT[:, :m]), np.empty((shape[0], m))) if compact else (XT, L)
        for table in self.matrix:
            table.log_prob(XTc, Lc, self.mode, self.n_threads)
        if compact:             # only the matrix leaves' rows: no kernel reads the others
            s = np.concatenate([t.slot for t in self.matrix])
            L[s, :m] = Lc[s]
            L[s, m:] = 0.0
        return L
