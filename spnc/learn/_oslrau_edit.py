"""oSLRAU's structure changes (Alg. 2-5 of Hsu, Kalra & Poupart, 2017): merging two
correlated children of a product into a multivariate leaf or a mixture, passing the
batch's rows down a new mixture, and splicing nodes. The learner
(:mod:`spnc.learn.oslrau`) mixes this in, on top of :class:`._oslrau_store.TreeStore`."""
from __future__ import annotations

import numpy as np

from . import _oslrau
from .._kinds import LEAF, PRODUCT, SUM


class StructureEdits:
    """Structure edits on the learner's tree; uses the storage of ``TreeStore`` and the
    learner's ``_cfg``, ``_stream`` and ``_workspace``."""

    def _leaf_cov(self, cov: np.ndarray) -> np.ndarray:
        """A new leaf's covariance: diagonal raised to ``min_var`` under the paper's floor."""
        cov = np.array(cov, dtype=np.float64, copy=True)
        if self._cfg["variance_floor"] == "creation":
            k = np.arange(len(cov))
            cov[k, k] = np.maximum(cov[k, k], float(self._cfg["min_var"]))
        return cov

    def _merge(self, p: int, a: int, b: int, rows: np.ndarray, cap: int) -> None:
        """Correlate children ``a`` and ``b`` of product ``p``, whose statistics already
        hold the ``rows`` of the current batch that reached it (``a`` and ``b`` have not
        seen them): one multivariate leaf when the joint scope fits ``cap`` (and ``cap``
        is below the number of variables, Alg. 4), else a mixture of a product over the
        two children and a new factored model (Alg. 3, 5), down which the rows are then
        passed (Sec. 3.2)."""
        kids = self._kids(p)
        if a not in kids or b not in kids:
            return
        self._merges[p] += 1
        pscope = self._node_scope(p)
        joint = np.union1d(self._node_scope(a), self._node_scope(b)).astype(np.int32)
        idx = np.searchsorted(pscope, joint)
        pmean, pcov = self._node_stats(p)
        jmean, jcov = pmean[idx].copy(), pcov[np.ix_(idx, idx)].copy()
        cnt = float(self._count[p])
        if len(joint) <= cap and self._d > cap:
            new = self._new(LEAF, joint, jmean, self._leaf_cov(jcov), count=cnt)   # Alg. 4
        else:
            before = cnt - len(rows)           # the mixture takes the rows below
            p1 = self._new(PRODUCT, joint, jmean, jcov, [a, b], count=before,  # Alg. 3
                           merges=int(self._merges[p]))
            centre = rows[:, joint].mean(0) if len(rows) else jmean
            var = np.diag(jcov).copy()
            leaves = [self._new(LEAF, [v], centre[i:i + 1], self._leaf_cov(var[i:i + 1].reshape(1, 1)))
                      for i, v in enumerate(joint)]
            p2 = self._new(PRODUCT, joint, centre, np.diag(var), leaves)  # Alg. 5
            new = self._new(SUM, joint, np.zeros(len(joint)), np.zeros(0), [p1, p2], count=before)
            if len(rows):
                self._pass_down(new, rows)
        kids.remove(a)
        kids.remove(b)
        kids.append(new)
        if len(kids) == 1:                     # single-child product: splice it out
            self._replace(p, new)
            self._set_kids(p, [])
        else:
            self._set_kids(p, kids)

    def _pass_down(self, node: int, rows: np.ndarray) -> None:
        """Parameter update (Alg. 1) of the subtree under ``node`` with ``rows``, as one
        batch and without structure changes."""
        g = self._g
        out = np.empty(g["kind"].n, dtype=np.int32)
        k = _oslrau.postorder(g["cstart"].view, g["cend"].view, g["child"].view, node, out)
        self._workspace(len(rows))
        rows = np.ascontiguousarray(rows)
        nb, nc = self._stream(rows, 0, len(rows), out[:k], -1, np.inf, 2.0)
        assert nb == 1 and nc == 0

    def _replace(self, old: int, new: int) -> None:
        """Put ``new`` where ``old`` was; a sum put under a sum hands over its children."""
        par = int(self._parent[old])
        self._parent[old] = -1
        if par < 0:
            self._root = new
            self._parent[new] = -1
            self._dirty = True
            return
        kids = self._kids(par)
        i = kids.index(old)
        if self._kind[par] == SUM and self._kind[new] == SUM:
            kids[i:i + 1] = self._kids(new)
            self._set_kids(new, [])
            self._parent[new] = -1
        else:
            kids[i] = new
        self._set_kids(par, kids)
