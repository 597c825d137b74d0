"""Growable flat-array storage of oSLRAU's tree: node kind, count, sorted scope, running
mean and covariance of products and leaves, merge counter, and children as segments of
one array (a node's segment is rewritten when its children change; ``_rebuild`` compacts
the stale segments). The learner (:mod:`spnc.learn.oslrau`) mixes this in."""
from __future__ import annotations

import numpy as np

from . import _oslrau

_DTYPES = {"kind": np.int8, "count": np.float64, "merges": np.int32, "scope_ptr": np.int64,
           "scope": np.int32, "cov_ptr": np.int64, "mean": np.float64, "cov": np.float64,
           "child_ptr": np.int64, "child": np.int32}


class _Grow:
    """A 1-D array with spare capacity; ``view`` is the used part (no copy)."""

    __slots__ = ("buf", "n")

    def __init__(self, a, dtype):
        a = np.asarray(a, dtype=dtype)
        self.buf = np.empty(max(16, 2 * len(a)), dtype=dtype)
        self.buf[:len(a)] = a
        self.n = len(a)

    @property
    def view(self) -> np.ndarray:
        return self.buf[:self.n]

    def extend(self, values) -> None:
        values = np.asarray(values, dtype=self.buf.dtype)
        k = self.n + len(values)
        if k > len(self.buf):
            nb = np.empty(max(2 * len(self.buf), k), dtype=self.buf.dtype)
            nb[:self.n] = self.buf[:self.n]
            self.buf = nb
        self.buf[self.n:k] = values
        self.n = k



class TreeStore:
    """Node storage and structure edits; the state lives in ``self._g``."""

    def _alloc(self, a: dict[str, np.ndarray]) -> None:
        """Growable storage from exported arrays (children given in CSR form)."""
        N = len(a["kind"])
        self._g = {k: _Grow(a[k], _DTYPES[k]) for k in ("kind", "count", "merges", "scope", "mean", "cov")}
        self._g["scope_ptr"] = _Grow(a["scope_ptr"], np.int64)
        self._g["cov_ptr"] = _Grow(a["cov_ptr"], np.int64)
        ptr = np.asarray(a["child_ptr"], dtype=np.int64)
        self._g["cstart"] = _Grow(ptr[:-1], np.int64)
        self._g["cend"] = _Grow(ptr[1:], np.int64)
        self._g["child"] = _Grow(a["child"], np.int32)
        parent = np.full(N, -1, dtype=np.int32)
        parent[np.asarray(a["child"], dtype=np.int64)] = np.repeat(np.arange(N, dtype=np.int32), np.diff(ptr))
        self._g["parent"] = _Grow(parent, np.int32)
        # kernel cache, not part of the state: each leaf's Cholesky factor and log det,
        # valid while ``fresh`` (recomputed from the moments after every change)
        self._g["chol"] = _Grow(np.zeros(len(a["cov"])), np.float64)
        self._g["ldet"] = _Grow(np.zeros(N), np.float64)
        self._g["fresh"] = _Grow(np.zeros(N, np.uint8), np.uint8)
        self._dirty = True
        self._spn = None

    # views of the storage (the kernel updates count / mean / cov in place)
    _kind = property(lambda self: self._g["kind"].view)
    _count = property(lambda self: self._g["count"].view)
    _merges = property(lambda self: self._g["merges"].view)
    _mean = property(lambda self: self._g["mean"].view)
    _cov = property(lambda self: self._g["cov"].view)
    _parent = property(lambda self: self._g["parent"].view)

    def _kids(self, n: int) -> list[int]:
        g = self._g
        return g["child"].buf[g["cstart"].buf[n]:g["cend"].buf[n]].tolist()

    def _set_kids(self, n: int, kids: list[int]) -> None:
        g = self._g
        g["cstart"].buf[n] = g["child"].n
        g["child"].extend(np.asarray(kids, dtype=np.int32))
        g["cend"].buf[n] = g["child"].n
        self._parent[np.asarray(kids, dtype=np.int64)] = n
        self._dirty = True

    def _new(self, kind: int, scope, mean, cov, children: list[int] = (), count: float = 0.0,
             merges: int = 0) -> int:
        g = self._g
        scope = np.asarray(list(scope), dtype=np.int32)
        s = len(scope)
        n = g["kind"].n
        g["kind"].extend([kind])
        g["count"].extend([count])
        g["merges"].extend([merges])
        g["scope"].extend(scope)
        g["scope_ptr"].extend([g["scope"].n])
        g["mean"].extend(np.asarray(mean, dtype=np.float64).ravel())
        g["cov"].extend(np.asarray(cov, dtype=np.float64).ravel())
        g["cov_ptr"].extend([g["cov"].n])
        g["chol"].extend(np.zeros(s * s))
        g["ldet"].extend([0.0])
        g["fresh"].extend([0])
        g["parent"].extend([-1])
        g["cstart"].extend([0])
        g["cend"].extend([0])
        self._set_kids(n, list(children))
        return n

    def _node_scope(self, n: int) -> np.ndarray:
        sp = self._g["scope_ptr"].buf
        return self._g["scope"].buf[sp[n]:sp[n + 1]]

    def _node_stats(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        sp, cp = self._g["scope_ptr"].buf, self._g["cov_ptr"].buf
        s = int(sp[n + 1] - sp[n])
        return self._g["mean"].buf[sp[n]:sp[n + 1]], self._g["cov"].buf[cp[n]:cp[n + 1]].reshape(s, s)

    def _rebuild(self) -> None:
        """Post-order of the live nodes (children first, root last); compacts the child
        storage when most of it is stale."""
        g = self._g
        N = g["kind"].n
        if g["child"].n > 4 * N + 64:
            ptr, ch = self._csr()
            g["child"] = _Grow(ch, np.int32)
            g["cstart"].buf[:N] = ptr[:-1]
            g["cend"].buf[:N] = ptr[1:]
        out = np.empty(N, dtype=np.int32)
        k = _oslrau.postorder(g["cstart"].view, g["cend"].view, g["child"].view, self._root, out)
        self._order = out[:k]
        self._dirty = False

    def _csr(self) -> tuple[np.ndarray, np.ndarray]:
        """Children of every id in compact CSR form (child_ptr, child)."""
        g = self._g
        st, en, ch = g["cstart"].view, g["cend"].view, g["child"].buf
        deg = en - st
        ptr = np.zeros(len(st) + 1, dtype=np.int64)
        np.cumsum(deg, out=ptr[1:])
        idx = np.repeat(st - ptr[:-1], deg) + np.arange(ptr[-1])
        return ptr, ch[idx].astype(np.int32)
