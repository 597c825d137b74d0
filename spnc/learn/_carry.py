"""Training routings carried over from model to model while merging.

A merge round changes a few sub-networks of a large model. Rather than routing every
training row through the whole new model, the rows that reached each node are carried
over (the paper's per-node data sets, Rahman & Gogate Sec. 3.2): a node that survives keeps
its rows, a merged node gets the union of its members' rows, and the rows of a re-estimated
sub-network are routed below it alone (:func:`route_from`). :class:`Routing` holds the
columns by reference, so carrying them costs in proportion to the nodes, not the rows.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import _route
from .._kinds import MAX
from .._sweep import Sweep
from ..graph import SPN
from ..leaves.base import _ranges
from ._graphedit import descendants
from ._routing import copy_runs, union_runs
from .routing import _as_csc

_EMPTY = np.zeros(0, dtype=np.int32)


class Routing:
    """The rows (of ``n_rows``) that reached each node: node ``j``'s are column
    ``col[j]`` of the CSC matrix ``mats[which[j]]`` (none when ``which[j] < 0``)."""

    def __init__(self, mats: list, which: np.ndarray, col: np.ndarray, n_rows: int):
        self.mats, self.which, self.col, self.n_rows = mats, which, col, int(n_rows)

    @classmethod
    def of(cls, R: sp.csc_matrix) -> "Routing":
        """A routing matrix (rows x nodes) as a :class:`Routing`."""
        N = R.shape[1]
        return cls([R], np.zeros(N, dtype=np.int64), np.arange(N, dtype=np.int64), R.shape[0])

    @property
    def n_nodes(self) -> int:
        return len(self.which)

    def rows(self, j: int) -> np.ndarray:
        """Sorted indices of the rows that reached node ``j``."""
        k = int(self.which[j])
        if k < 0:
            return _EMPTY
        m, c = self.mats[k], int(self.col[j])
        return m.indices[m.indptr[c]:m.indptr[c + 1]]

    def rows_of_many(self, nodes) -> tuple[np.ndarray, np.ndarray]:
        """``(ptr, idx)``: the rows of ``nodes[i]`` (as :meth:`rows`) are
        ``idx[ptr[i]:ptr[i + 1]]``, gathered with no loop over the nodes."""
        nodes = np.asarray(nodes, dtype=np.int64)
        k, c = self.which[nodes], self.col[nodes]
        lens = np.zeros(len(nodes), dtype=np.int64)
        on = [np.flatnonzero(k == j) for j in range(len(self.mats))]
        for m, o in zip(self.mats, on):
            lens[o] = m.indptr[c[o] + 1] - m.indptr[c[o]]
        ptr = np.zeros(len(nodes) + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        idx = np.empty(int(ptr[-1]), dtype=np.int64)
        for m, o in zip(self.mats, on):
            if o.size:
                copy_runs(m.indices, m.indptr[c[o]].astype(np.int64), lens[o], idx, ptr[o])
        return ptr, idx

    def counts(self) -> np.ndarray:
        """The number of rows of every node."""
        out = np.zeros(self.n_nodes, dtype=np.int64)
        for k, m in enumerate(self.mats):
            on = np.flatnonzero(self.which == k)
            out[on] = m.indptr[self.col[on] + 1] - m.indptr[self.col[on]]
        return out

    def tocsc(self) -> sp.csc_matrix:
        """The routing as a boolean (rows x nodes) CSC matrix."""
        cols = [self.rows(j) for j in range(self.n_nodes)]
        indptr = np.zeros(self.n_nodes + 1, dtype=np.int64)
        np.cumsum([len(c) for c in cols], out=indptr[1:])
        idx = np.concatenate(cols) if cols else _EMPTY
        return sp.csc_matrix((np.ones(len(idx), dtype=bool), idx, indptr), shape=(self.n_rows, self.n_nodes))

    def carry(self, target: np.ndarray, n_nodes: int) -> "Routing":
        """The routing of a model made from this one, old node ``n`` becoming new node
        ``target[n]`` (-1: dropped): a new node gets the union of its old nodes' rows."""
        target = np.asarray(target, dtype=np.int64)
        old = np.flatnonzero(target >= 0)
        t = target[old]
        cnt = np.bincount(t, minlength=n_nodes)
        which = np.full(n_nodes, -1, dtype=np.int64)
        col = np.zeros(n_nodes, dtype=np.int64)
        one = cnt[t] == 1
        which[t[one]] = self.which[old[one]]
        col[t[one]] = self.col[old[one]]
        mats = list(self.mats)
        many = np.flatnonzero(~one)
        if many.size:          # merged nodes: the union of their rows, one new matrix
            o = np.argsort(t[many], kind="stable")        # each new node's old nodes together
            ptr, parts = self.rows_of_many(old[many][o])
            u, first = np.unique(t[many][o], return_index=True)
            cnt_u, i = union_runs(np.append(ptr[first], ptr[-1]), parts, self.n_rows)
            indptr = np.zeros(n_nodes + 1, dtype=np.int64)
            indptr[u + 1] = cnt_u
            np.cumsum(indptr, out=indptr)
            mats.append(sp.csc_matrix((np.ones(len(i), dtype=bool), i, indptr), shape=(self.n_rows, n_nodes)))
            which[u], col[u] = len(mats) - 1, u
        return Routing(mats, which, col, self.n_rows)._compact()

    def splice(self, S: sp.csc_matrix, cols: np.ndarray) -> "Routing":
        """This routing with the columns ``cols`` (boolean mask) taken from ``S``, a
        (rows x nodes) matrix of the same model."""
        which, col = self.which.copy(), self.col.copy()
        on = np.flatnonzero(cols)
        which[on], col[on] = len(self.mats), on
        return Routing(self.mats + [S], which, col, self.n_rows)._compact()

    def _compact(self) -> "Routing":
        """Drop the matrices no column refers to."""
        used = np.unique(self.which[self.which >= 0])
        if len(used) == len(self.mats):
            return self
        new = np.full(len(self.mats), -1, dtype=np.int64)
        new[used] = np.arange(len(used))
        which = np.where(self.which >= 0, new[np.maximum(self.which, 0)], -1)
        return Routing([self.mats[k] for k in used.tolist()], which, self.col, self.n_rows)


def route_from(spn: SPN, X: np.ndarray, heads, entry, *, n_threads: int | None = None):
    """:func:`route` of given rows entering the sub-network below given nodes: the rows
    ``entry[i]`` (sorted indices of ``X``; or ``(ptr, idx)``, head ``i``'s rows being
    ``idx[ptr[i]:ptr[i + 1]]``) start at ``heads[i]`` and follow the max-product
    decisions below it; a node below several heads gets the union. Returns ``(R, ec)``:
    the routing ``(n_rows, n_nodes)``, whose columns outside the heads' sub-networks are
    empty, and the rows sent along each sum edge (n_edges,). Only the sub-networks and the
    entering rows are swept (a model of just those nodes, compiled for the call); a leaf
    head below no other head keeps its entering rows, with no sweep."""
    heads = np.asarray(heads, dtype=np.int64)
    n, N = X.shape[0], spn.n_nodes
    if isinstance(entry, tuple):
        eptr, flat = (np.asarray(a, dtype=np.int64) for a in entry)
    else:
        eptr = np.zeros(len(entry) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in entry], out=eptr[1:])
        flat = np.concatenate(entry).astype(np.int64) if len(entry) else np.zeros(0, dtype=np.int64)
    lens = np.diff(eptr)
    ec = np.zeros(spn.n_edges)
    # leaf heads that no other head reaches: their rows are their entering rows
    leaf = spn.kind[heads] >= 2
    below = descendants(spn, heads[~leaf])
    alone = leaf & ~below[heads] & (np.bincount(heads, minlength=N)[heads] == 1)
    cnt = np.zeros(N, dtype=np.int64)
    cnt[heads[alone]] = lens[alone]
    rest = np.flatnonzero(~alone)
    S = F = rows = None
    if rest.size and lens[rest].sum():
        S, F, rows = _route_below(spn, X, heads[rest], eptr, flat, rest, ec, n_threads)
        cnt[F] = np.diff(S.indptr)
    indptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(cnt, out=indptr[1:])
    idx = np.empty(int(indptr[-1]), dtype=np.int64)
    a = np.flatnonzero(alone)
    idx[_ranges(indptr[heads[a]], lens[a])] = flat[_ranges(eptr[a], lens[a])]
    if S is not None:
        idx[_ranges(indptr[F], cnt[F])] = rows[S.indices]
    return sp.csc_matrix((np.ones(len(idx), dtype=bool), idx, indptr), shape=(n, N)), ec


def _route_below(spn: SPN, X: np.ndarray, heads: np.ndarray, eptr: np.ndarray, flat: np.ndarray,
                 which: np.ndarray, ec: np.ndarray, n_threads):
    """:func:`route_from`'s sweep: the rows of entries ``which`` (of ``eptr``/``flat``)
    entering ``heads`` routed below them; adds to ``ec``. Returns (S, F, rows): the routing
    of the entering ``rows`` (rows x the sub-network's nodes ``F``)."""
    lens = eptr[which + 1] - eptr[which]
    p = flat[_ranges(eptr[which], lens)]
    on = np.zeros(X.shape[0], dtype=bool)
    on[p] = True
    rows = np.flatnonzero(on)
    sub, F, e = subnetwork(spn, heads)
    new_id = np.full(spn.n_nodes, -1, dtype=np.int64)
    new_id[F] = np.arange(len(F))
    words = -(-rows.size // 64) + 1
    pos = (np.cumsum(on) - 1)[p]          # each entering row's place among the rows
    # bit pos of word (entry, pos // 64): one OR per word (each entry's rows are sorted)
    word = np.repeat(np.arange(len(which)), lens) * words + (pos >> 6)
    bit = np.left_shift(np.uint64(1), (pos & 63).astype(np.uint64))
    enter = np.zeros((len(which), words), dtype=np.uint64)
    if word.size:
        first = np.flatnonzero(np.concatenate([[True], word[1:] != word[:-1]]))
        enter.ravel()[word[first]] = np.bitwise_or.reduceat(bit, first)
    XU = np.ascontiguousarray(X[rows])
    sw = Sweep(sub, XU, MAX, n_threads, workspace="select")
    nt = sw.n_threads
    acts = sw.acts()
    edge = np.zeros((nt, max(sub.n_edges, 1)))
    bits = np.zeros((len(F), words), dtype=np.uint64)
    roots = new_id[heads]
    none = np.zeros(len(heads))
    for r0, r1, XT, L in sw:
        _route.route(sw.graph, sw.states, XT, L, roots, none, False, r1 - r0, bits, r0 // 64, edge, nt,
                     sw.ws, acts, enter)
    ec[e] = edge.sum(0)[: sub.n_edges]
    return _as_csc(bits, rows.size), F, rows


def subnetwork(spn: SPN, heads, mark: np.ndarray | None = None):
    """(model, nodes, edges): the nodes below ``heads`` (``heads`` included; ``mark``: their
    mask, when known) as a model of their own, renumbered in order, with the ids of its
    nodes and of its edges in ``spn``. Its values are those of the same nodes in ``spn``."""
    N = spn.n_nodes
    ptr, child = spn.child_ptr, spn.child
    deg = np.diff(ptr)
    heads = np.asarray(heads, dtype=np.int64)
    mark = descendants(spn, heads) if mark is None else mark
    F = np.flatnonzero(mark)
    new_id = np.full(N, -1, dtype=np.int64)
    new_id[F] = np.arange(len(F))
    e = _ranges(ptr[F], deg[F])
    cptr = np.zeros(len(F) + 1, dtype=np.int64)
    np.cumsum(deg[F], out=cptr[1:])
    tables = {}
    for name, t in spn.leaf_tables.items():
        ix = np.flatnonzero(mark[t.node])
        if ix.size:
            tables[name] = type(t).gather(new_id[t.node[ix]], [(t, ix, np.arange(ix.size))])
    sub = SPN.from_arrays(spn.kind[F], cptr, new_id[child[e]], spn.weight[e], tables, spn.cardinality,
                          var_type=spn.var_type, roots=new_id[heads], combine="independent", validate=False)
    return sub, F, e
