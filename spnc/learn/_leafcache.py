"""Leaf values kept across the many passes of merging over the same rows.

Merging evaluates a model on the same training (and validation) rows again and again:
routing, refits, the kept-member choice and the Chow-Liu check, every round and every
threshold. Between two passes only the re-estimated sub-networks change; every other leaf
keeps its scope and parameters, hence its values. :class:`LeafCache` stores the log-values
of the *matrix* leaves (types the compiled sweep does not evaluate inline, such as Chow-Liu
trees, which dominate these passes) by leaf content (:func:`._graphedit.leaf_keys`) and
evaluates only leaves it has not seen. Each leaf is evaluated on its own, so the values
are exactly those of a fresh evaluation.
"""
from __future__ import annotations

import numpy as np

from .._kinds import MARGINAL, MAX
from .._sweep import TransposedRows
from ..leaves.base import _ranges
from ._graphedit import leaf_keys
from ._routing import column_ranges, copy_rows, state_masks


class LeafCache:
    """Log-values of matrix leaves on the fixed rows ``X`` (complete data) in ``mode``,
    at most ``max_bytes`` of them; the leaves of a model beyond that are evaluated on
    every pass."""

    def __init__(self, X: np.ndarray, mode: int, *, max_bytes: int = 512 << 20, n_threads: int = 1,
                 evidence_off: np.ndarray | None = None, checked_by=None):
        self.X = np.asarray(X, dtype=np.float64)
        self.mode, self.n_threads = int(mode), int(n_threads)
        # rows of X are indicator evidence (spnc.learn._similarity.indicator_evidence with
        # these offsets): leaves that know their marginals skip the rows
        self.evidence_off = evidence_off
        self.complete = not np.isnan(self.X).any()
        self.n = self.X.shape[0]
        self.capacity = max(0, int(max_bytes) // max(8 * self.n, 1))
        self.V = np.empty((0, self.n))
        self.row: dict = {}                 # leaf key -> row of V
        self._gen = 0                       # bumped when rows of V move (stale layouts)
        self.evaluated = 0                  # leaves evaluated so far (for tests and profiling)
        self.rows = TransposedRows(self.X, self.n_threads)   # its chunks, transposed once
        self._checked: set = set()          # models' data checks X passed (cardinalities)
        if checked_by is not None:          # a model whose data check X has passed already
            self._checked.add(self._check_key(checked_by))
        self._masks: dict = {}              # (variable, value) -> its rows as bits
        self._codes = self._codes_t = None
        self._col_ranges = None

    @property
    def codes(self) -> np.ndarray:
        """The rows as integer codes (uint8, or int32 beyond 256 states; complete rows of
        a checked ``X`` only), made once: counting reads a gather of them, not of ``X``."""
        if self._codes is None:
            big = self.n and self.X.size and np.nanmax(self.X) > 255
            self._codes = self.X.astype(np.int32 if big else np.uint8)
        return self._codes

    @property
    def codes_by_var(self) -> np.ndarray:
        """:attr:`codes` transposed (a variable's codes in one contiguous row), made once:
        per-variable counts over row sets read it."""
        if self._codes_t is None:
            self._codes_t = np.ascontiguousarray(self.codes.T)
        return self._codes_t

    def state_masks(self, var: np.ndarray, value: np.ndarray) -> np.ndarray:
        """:func:`._routing.state_masks` of these rows, each pair computed once."""
        pairs = list(zip(var.tolist(), value.tolist()))
        new = [p for p in dict.fromkeys(pairs) if p not in self._masks]
        if new:
            v, k = (np.array(a, dtype=np.int64) for a in zip(*new))
            self._masks.update(zip(new, state_masks(np.ascontiguousarray(self.X), v, k)))
        if not pairs:
            return np.zeros((0, -(-self.n // 64)), dtype=np.uint64)
        return np.stack([self._masks[p] for p in pairs])

    def column_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """Each column's least and greatest value (complete rows), found once."""
        if self._col_ranges is None:
            self._col_ranges = column_ranges(np.ascontiguousarray(self.X), np.arange(self.X.shape[1]))
        return self._col_ranges

    def checked(self, spn, X) -> bool:
        """True when ``X`` is this cache's rows and passes ``spn``'s data checks (made once
        per cardinality vector; a failing check raises as ``spn._check_X`` does)."""
        if X is not self.X:
            return False
        key = self._check_key(spn)
        if key not in self._checked:
            spn._check_X(X)
            self._checked.add(key)
        return True

    @staticmethod
    def _check_key(spn) -> tuple:
        return spn.n_vars, np.asarray(spn.cardinality).tobytes()

    def _layout(self, spn):
        """(slots, rows of V, rest) for the matrix leaves of ``spn``: the kept ones (unseen
        ones evaluated now), and the tables of those beyond the capacity, which
        :meth:`chunk` evaluates on every pass. None when no leaf can be kept."""
        mine = spn.__dict__.setdefault("_leafcache", {})
        lay = mine.get(id(self))
        if lay is not None and lay[0] is self and lay[1] == self._gen:
            return lay[2]
        tables = [t for t in spn.leaf_tables.values() if len(t) and t.state_log_probs(spn.cardinality) is None]
        if not tables or not self.capacity:
            return None
        keys = [leaf_keys(t) for t in tables]
        if sum(len(ks) for ks in keys) <= self.capacity:     # every leaf kept already: the same layout
            row = self.row
            rows = [np.fromiter((row.get(k, -1) for k in ks), dtype=np.int64, count=len(ks)) for ks in keys]
            if all((r >= 0).all() for r in rows):
                lay = (np.concatenate([t.slot for t in tables]), np.concatenate(rows), [])
                mine[id(self)] = (self, self._gen, lay)
                return lay
        distinct = list(dict.fromkeys(k for ks in keys for k in ks))
        # leaves already kept first (no evaluation), then new ones, up to the capacity
        kept = set([k for k in distinct if k in self.row][: self.capacity])
        kept.update([k for k in distinct if k not in self.row][: self.capacity - len(kept)])
        if len(self.row) + sum(1 for k in kept if k not in self.row) > self.capacity:
            old = [(k, r) for k, r in self.row.items() if k in kept]     # keep only this model's
            V = np.empty((min(self.capacity, max(len(kept), 2 * len(old) + 16)), self.n))
            for j, (k, r) in enumerate(old):
                V[j] = self.V[r]
            self.V, self.row = V, {k: j for j, (k, _) in enumerate(old)}
            self._gen += 1
        slots, rows, rest = [], [], []
        for t, ks in zip(tables, keys):
            miss = [i for i, k in enumerate(ks) if k in kept and k not in self.row]
            if miss:
                self._evaluate(t, miss, ks)
            mask = np.fromiter((k in kept for k in ks), dtype=bool, count=len(ks))
            slots.append(t.slot[mask])
            rows.append(np.fromiter((self.row[k] for k in ks if k in kept), dtype=np.int64, count=int(mask.sum())))
            if not mask.all():
                ix = np.flatnonzero(~mask)
                sub = type(t).gather(t.node[ix], [(t, ix, np.arange(len(ix)))])
                sub.slot = t.slot[ix]
                rest.append(sub)
        lay = (np.concatenate(slots), np.concatenate(rows), rest)
        mine[id(self)] = (self, self._gen, lay)
        return lay

    def _evaluate(self, t, miss: list[int], keys: list) -> None:
        fresh = {}
        for i in miss:                       # a leaf may occur twice in one table
            fresh.setdefault(keys[i], i)
        idx = list(fresh.values())
        ix = np.asarray(idx, dtype=np.int64)
        sub = type(t).gather(t.node[ix], [(t, ix, np.arange(len(ix)))])
        sub.slot = np.arange(len(idx), dtype=np.int64)
        start = len(self.row)
        if start + len(idx) > self.V.shape[0]:
            V = np.empty((min(self.capacity, max(2 * self.V.shape[0], start + len(idx))), self.n))
            V[:start] = self.V[:start]
            self.V = V
        if not self._from_marginals(sub, start):
            self._by_rows(sub, self.V[start:start + len(idx)])
        for j, k in enumerate(fresh):
            self.row[k] = start + j
        self.evaluated += len(idx)

    def _from_marginals(self, sub, start: int) -> bool:
        """Evidence rows from the leaves' own marginals: row ``off[v] + k`` of a leaf is
        ``log P(X_v = k)`` when ``v`` is in its scope, else 0."""
        off = self.evidence_off
        if off is None or self.mode != MARGINAL:
            return False
        m = sub.log_marginals()
        if m is None:
            return False
        ptr, var, logp = m
        cards = off[var + 1] - off[var]
        if len(logp) != int(cards.sum()):
            return False
        rows = start + np.repeat(np.repeat(np.arange(len(ptr) - 1), np.diff(ptr)), cards)
        self.V[start:start + len(ptr) - 1] = 0.0
        self.V[rows, _ranges(off[var], cards)] = logp
        return True

    def _by_rows(self, sub, V: np.ndarray) -> None:
        step = self.rows.last_step
        for r0 in range(0, self.n, step):
            r1 = min(self.n, r0 + step)
            XT = self.rows.chunk(r0, r1, step)
            out = np.empty((len(sub), XT.shape[1]))
            sub.log_prob(XT, out, self.mode, self.n_threads)
            V[:, r0:r1] = out[:, : r1 - r0]

    def evaluate(self, table, rows: np.ndarray | None = None) -> np.ndarray:
        """Log-values ``(len(table), len(rows))`` of the leaves of ``table`` (any slots) on
        these rows (``rows`` of them, default all), evaluated now and not kept: for leaves
        that may never join a model."""
        sub = type(table).gather(table.node, [(table, np.arange(len(table)), np.arange(len(table)))])
        sub.slot = np.arange(len(table), dtype=np.int64)
        if rows is None:
            V = np.empty((len(table), self.n))
            if len(table):
                self._by_rows(sub, V)
            return V
        V = np.empty((len(table), len(rows)))
        if len(table) and len(rows):
            sub.log_prob(np.ascontiguousarray(self.X[rows].T), V, self.mode, self.n_threads)
        return V

    def kept_rows(self, spn, slots: np.ndarray) -> np.ndarray | None:
        """The rows of ``V`` holding ``spn``'s matrix leaves at leaf ``slots``; None when
        one of them is not kept (or some tables are evaluated on every pass)."""
        lay = self._layout(spn)
        if lay is None or lay[2]:
            return None
        row = np.full(spn.n_leaves, -1, dtype=np.int64)
        row[lay[0]] = lay[1]
        r = row[slots]
        return None if np.any(r < 0) else r

    def serves(self, mode: int) -> bool:
        """True when values in ``mode`` are this cache's (on complete rows a leaf's
        max-product value is its log-likelihood)."""
        return mode == self.mode or (self.complete and {mode, self.mode} <= {MARGINAL, MAX})

    def usable(self, spn, X) -> bool:
        """True when ``X`` is this cache's data and it keeps some of ``spn``'s matrix
        leaves."""
        return X is self.X and self._layout(spn) is not None

    def chunk(self, spn, L: np.ndarray, r0: int, r1: int, XT: np.ndarray) -> None:
        """Write the values of rows ``r0:r1`` (transposed chunk ``XT``) into the leaf
        matrix ``L`` (slot x column): kept leaves copied (their padding columns 0), the
        others evaluated."""
        slots, rows, rest = self._layout(spn)
        copy_rows(self.V, rows, r0, r1, L, slots)
        for t in rest:
            t.log_prob(XT, L, self.mode, self.n_threads)


def leaf_values(spn, nodes: np.ndarray, cache: LeafCache) -> np.ndarray | None:
    """The values ``(len(nodes), n)`` of leaves ``nodes`` of ``spn`` on the complete rows
    of ``cache`` in marginal or max mode, as a sweep gives them, without one: matrix
    leaves' kept rows (unseen ones evaluated now), and the state tables of the leaves a
    sweep evaluates itself read at each row's value. None when a matrix leaf is not kept
    or the rows are incomplete."""
    if not cache.complete or cache.mode not in (MARGINAL, MAX):
        return None
    out = np.empty((len(nodes), cache.n))
    at = np.full(spn.n_nodes, -1, dtype=np.int64)
    at[nodes] = np.arange(len(nodes))
    if not np.array_equal(at[nodes], np.arange(len(nodes))):       # a node asked twice
        return None
    for t in spn.leaf_tables.values():
        mine = np.flatnonzero(at[t.node] >= 0) if len(t) else np.zeros(0, dtype=np.int64)
        if not mine.size:
            continue
        pos = at[t.node[mine]]
        st = t.state_log_probs(spn.cardinality)
        if st is None:
            r = cache.kept_rows(spn, t.slot[mine])
            if r is None:
                return None
            out[pos] = cache.V[r]
            continue
        var, ptr, lp = st
        x = cache.X[:, np.asarray(var, dtype=np.int64)[mine]].T.astype(np.int64)
        out[pos] = lp[ptr[mine][:, None] + x]
    return out
