"""Node values on fixed rows, kept from model to model while merging.

Merging asks for node values on the same rows (the validation rows, the indicator evidence
of the marginals) again and again, for models that differ from the one they were made from
in a few nodes and their ancestors. A node that is an unchanged copy of a node of that
model (:func:`._hashcons.changed_nodes`: same kind and parameters, children the images of
the old node's children, all of them unchanged copies too) has its values bit for bit: the
log-domain sweep computes a node from its children's values alone. :class:`NodeValues`
keeps every node's values of the last models it was asked about, gives an unchanged copy
the old node's slot and computes only the other nodes (:func:`spnc._infer.forward_some`,
the sweep's own per-node code).
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .. import _infer
from .._kinds import MARGINAL
from .._sweep import graph_of, leaf_states, transposed_chunk
from ..graph import SPN
from ._hashcons import changed_nodes

_B = _infer.BLOCK
_SHIFT = _B.bit_length() - 1
assert _B == 1 << _SHIFT


class NodeValues:
    """Sum-product log-values of every node on the rows of ``cache`` (a
    :class:`._leafcache.LeafCache` in marginal mode, whose kept leaf values the matrix
    leaves take), for the last ``keep`` models asked about; a model made from one of them
    (:meth:`link`) computes its changed nodes alone, in place: each node has a slot of the
    store, one block of rows per slab. The slots take at most ``max_bytes`` (beyond, the
    kept models are dropped; a model too large for a third of them gets None from
    :meth:`slots_of` and the caller sweeps)."""

    def __init__(self, cache, *, n_threads: int = 1, max_bytes: int = 256 << 20, keep: int = 4):
        self.cache, self.n_threads, self.keep = cache, int(n_threads), int(keep)
        self.n = cache.n
        self.nb = -(-self.n // _B)
        self.slots = int(min(max_bytes // max(8 * _B * self.nb, 1), np.iinfo(np.int32).max))
        self.XT = None
        self.P = None                       # (blocks, slots, BLOCK), made once (pages touched as used)
        self.used = 0                       # slots handed out so far
        self.free = np.zeros(0, dtype=np.int64)
        self.models: OrderedDict = OrderedDict()    # id -> (model, slot of each node)
        self.made: OrderedDict = OrderedDict()      # id(new) -> (new, old, old node -> new node)

    def link(self, old: SPN, new: SPN, target) -> None:
        """Record that ``new`` was made from ``old``, old node ``n`` becoming ``target[n]``
        (-1: dropped); None: unknown (``new`` is computed whole when asked)."""
        if target is None or old is new:
            return
        self.made[id(new)] = (new, old, target)
        self.made.move_to_end(id(new))
        while len(self.made) > 4 * self.keep:
            self.made.popitem(last=False)

    def values(self, spn: SPN, nodes) -> np.ndarray | None:
        """``log S_n`` of ``nodes`` on the rows, shape (len(nodes), n_rows); None when the
        model's values cannot be kept (see the class notes)."""
        at = self.slots_of(spn)
        if at is None:
            return None
        s = at[np.asarray(nodes, dtype=np.int64)]
        return np.take(self.P, s, axis=1).transpose(1, 0, 2).reshape(len(s), -1)[:, : self.n]

    def column_values(self, spn: SPN, nodes: np.ndarray, cols: np.ndarray) -> np.ndarray | None:
        """``log S_n`` of node ``nodes[i]`` on row ``cols[i]``, for each i (None as in
        :meth:`values`)."""
        at = self.slots_of(spn)
        if at is None:
            return None
        # one gather from the flat slabs (three index arrays cost four times as much)
        return self.P.reshape(-1).take((cols >> _SHIFT) * (self.slots * _B) + (at[nodes] << _SHIFT) + (cols & (_B - 1)))

    def slots_of(self, spn: SPN) -> np.ndarray | None:
        """The slot of every node of ``spn``, its values computed (None as in
        :meth:`values`)."""
        hit = self.models.get(id(spn))
        if hit is not None and hit[0] is spn:
            self.models.move_to_end(id(spn))
            return hit[1]
        if 3 * spn.n_nodes > self.slots:
            return None
        at = self._inherit(spn, 0)
        for _ in range(2):
            if at is None:
                at = np.full(spn.n_nodes, -1, dtype=np.int64)
            try:
                at = self._compute(spn, at.copy())
                break
            except _Full:               # every kept slot dropped: the model from scratch
                self.models.clear()
                self.used, self.free, at = 0, np.zeros(0, dtype=np.int64), None
        if at is None:
            return None
        self.models[id(spn)] = (spn, at)
        if len(self.models) > self.keep:
            self.models.popitem(last=False)
            live = np.zeros(self.used, dtype=bool)
            for _, a in self.models.values():
                live[a] = True
            self.free = np.flatnonzero(~live)
        return at

    def _inherit(self, spn: SPN, depth: int) -> np.ndarray | None:
        """Slots of the nodes of ``spn`` that are unchanged copies of a kept model's (-1
        for the others), through the recorded links; None when none leads to a kept one."""
        hit = self.models.get(id(spn))
        if hit is not None and hit[0] is spn:
            return hit[1]
        link = self.made.get(id(spn))
        if link is None or link[0] is not spn or depth > 16:
            return None
        _, old, target = link
        base = self._inherit(old, depth + 1)
        if base is None:
            return None
        target = np.asarray(target, dtype=np.int64)
        ok = ~changed_nodes(old, spn, target)
        pre = np.full(spn.n_nodes, -1, dtype=np.int64)
        src = np.flatnonzero(target >= 0)
        pre[target[src]] = src
        out = np.full(spn.n_nodes, -1, dtype=np.int64)
        out[ok] = base[pre[ok]]
        return out

    def _alloc(self, k: int) -> np.ndarray:
        take = self.free[:k]
        self.free = self.free[k:]
        more = k - len(take)
        if self.P is None:
            self.P = np.empty((self.nb, self.slots, _B))
        if self.used + more > self.slots:
            raise _Full
        new = np.arange(self.used, self.used + more, dtype=np.int64)
        self.used += more
        return np.concatenate([take, new])

    def _compute(self, spn: SPN, at: np.ndarray) -> np.ndarray | None:
        """``at`` completed: matrix leaves copied from the leaf cache, every other node
        without a slot computed from its children."""
        miss = at < 0
        if not miss.any():
            return at
        states, matrix, _ = leaf_states(spn, MARGINAL)
        mat = np.zeros(spn.n_nodes, dtype=bool)
        for t in matrix:
            mat[t.node] = True
        need = np.flatnonzero(miss & mat)
        if need.size:
            cache = self.cache
            src = cache.kept_rows(spn, spn.leaf_slot[need]) if cache.serves(MARGINAL) else None
            if src is None:
                return None
            s = self._alloc(need.size)
            V = np.empty((need.size, self.nb * _B))
            V[:, : self.n] = cache.V[src]
            V[:, self.n:] = V[:, self.n - 1: self.n]      # padding: a real row's values
            self.P[:, s, :] = V.reshape(need.size, self.nb, _B).transpose(1, 0, 2)
            at[need] = s
        nodes = np.flatnonzero(miss & ~mat)
        if nodes.size:
            at[nodes] = self._alloc(nodes.size)
            if self.XT is None:
                self.XT = transposed_chunk(self.cache.X, 0, self.n, self.n_threads)
            _infer.forward_some(graph_of(spn), states, self.XT, np.zeros((1, 1)), self.P,
                                at[spn.child].astype(np.int32), at.astype(np.int32), nodes, MARGINAL,
                                self.n_threads)
        return at


class _Full(Exception):
    """No slot of the store left."""
