"""Chow-Liu tree leaves: a tree-shaped Bayesian network over several discrete variables.

Inference is exact on the tree (compiled kernels in :mod:`spnc.leaves._cltree`): log-likelihood
with any subset of the leaf's variables missing (sum-product messages towards the root),
the max-product value, the max-product completion and conditional sampling (upward
messages, then a downward pass from the root).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import _cltree as K
from ..chowliu import (check_weights, cpts_from_counts, fit_chow_liu, forest_to_tree,
                       resolve_threads, _tables_direct)
from ..errors import DataError, StructureError
from ..nodes import Leaf, real_array
from ._cltree_arrays import (ROW_TOL, _bfs_order, _binary_if_consistent, _check_tree, _exclusive_within,
                             _solve_cards)
from .base import LeafType, _err, register_leaf


class ChowLiuLeaf(Leaf):
    """Tree-shaped distribution over discrete variables ``vars`` (ascending global ids).

    ``parents[j]`` is the local index of the parent of ``vars[j]`` (-1 for the one root);
    ``cpts[j]`` has shape ``(card(parent), card(vars[j]))``, rows being
    ``P(x_j | x_parent)``; the root's has shape ``(1, card(root))``.

    Examples
    --------
    >>> leaf = ChowLiuLeaf([0, 3], [-1, 0], [[[0.4, 0.6]], [[0.9, 0.1], [0.2, 0.8]]])
    >>> leaf.scope
    (0, 3)
    """

    __slots__ = ("vars", "parents", "cpts")

    def __init__(self, vars: Sequence[int], parents: Sequence[int], cpts: Sequence[Any]):
        v = np.asarray(vars)
        if v.ndim != 1 or v.size == 0 or not np.issubdtype(v.dtype, np.integer) or np.any(v < 0):
            raise StructureError(f"ChowLiuLeaf: vars must be a non-empty list of non-negative integers, got {vars!r}")
        if np.any(np.diff(v) <= 0):
            raise StructureError(f"ChowLiuLeaf: vars must be strictly ascending, got {v.tolist()}")
        p = np.asarray(parents)
        if p.shape != v.shape or not np.issubdtype(p.dtype, np.integer):
            raise StructureError(f"ChowLiuLeaf: parents must be {v.size} integers (one per variable), got {parents!r}")
        if len(cpts) != v.size:
            raise StructureError(f"ChowLiuLeaf: {len(cpts)} CPTs for {v.size} variables")
        tabs = [real_array(c, f"ChowLiuLeaf: cpts[{j}]") for j, c in enumerate(cpts)]
        for j, c in enumerate(tabs):
            if c.ndim != 2:
                raise StructureError(f"ChowLiuLeaf: cpts[{j}] must be 2-D (parent states x states), got shape {c.shape}")
        self.vars = v.astype(np.int64)
        self.parents = p.astype(np.int32)
        self.cpts = tabs

    @property
    def scope(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.vars)

    def cardinality_hint(self) -> dict[int, int]:
        return {int(v): int(c.shape[1]) for v, c in zip(self.vars, self.cpts)}

    def __repr__(self) -> str:
        return f"ChowLiuLeaf(vars={self.vars.tolist()}, parents={self.parents.tolist()})"


class _Prepared:
    """Flat arrays the kernels read (see the layout notes in spnc/leaves/_cltree.pyx)."""

    __slots__ = ("var_ptr", "order", "gvar", "card", "fpar", "coff", "loff", "cpt", "logcpt", "scratch",
                 "used", "cvar", "cpar")


@register_leaf
class CLTreeLeafType(LeafType):
    """All Chow-Liu tree leaves of one SPN.

    Parameter arrays: ``parent_ptr`` (int64, L+1) delimits each leaf's variables in
    ``parent`` (int32, local parent index, -1 at the root); ``cpt_ptr`` (int64, L+1)
    delimits each leaf's CPTs in ``cpt`` (float64): per variable in scope order a
    ``card(parent) x card`` row-major block (``1 x card`` for the root) of probabilities.
    """

    name = "cltree"
    code = 6
    node_class = ChowLiuLeaf
    discrete = True

    def __init__(self, node, scopes, params):
        super().__init__(node, scopes, params)
        self._prep: _Prepared | None = None
        self._prep_key: tuple | None = None
        # states per scope variable (concatenated scopes); known from the construction
        # objects or from validate(cardinality) -- the parameter arrays do not store them
        self._card: np.ndarray | None = None

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_nodes(cls, node_ids, leaves):
        pptr = np.zeros(len(leaves) + 1, dtype=np.int64)
        cptr = np.zeros(len(leaves) + 1, dtype=np.int64)
        np.cumsum([len(l.vars) for l in leaves], out=pptr[1:])
        np.cumsum([sum(c.size for c in l.cpts) for l in leaves], out=cptr[1:])
        parent = np.concatenate([l.parents for l in leaves]).astype(np.int32) if leaves else np.zeros(0, np.int32)
        cpt = (np.concatenate([c.ravel() for l in leaves for c in l.cpts]) if leaves else np.zeros(0))
        table = cls(node_ids, [np.asarray(l.vars) for l in leaves],
                    {"parent_ptr": pptr, "parent": parent, "cpt_ptr": cptr, "cpt": cpt.astype(np.float64)})
        table._card = np.array([c.shape[1] for l in leaves for c in l.cpts], dtype=np.int64)
        return table

    def _gathered(self, parts) -> None:
        # the states per variable travel with the leaves' parent entries
        if not all(t._card is not None and len(t._card) == len(t.params["parent"]) for t, _, _ in parts):
            return
        from .base import _ranges
        ptr = self.params["parent_ptr"]
        card = np.empty(int(ptr[-1]), dtype=np.int64)
        for t, idx, pos in parts:
            tp = t.params["parent_ptr"]
            lens = np.diff(tp)[idx]
            card[_ranges(ptr[:-1][pos], lens)] = t._card[_ranges(tp[idx], lens)]
        self._card = card

    def _leaf_arrays(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        pptr, cptr = self.params["parent_ptr"], self.params["cpt_ptr"]
        return (self.params["parent"][pptr[i]:pptr[i + 1]],
                self.params["cpt"][cptr[i]:cptr[i + 1]])

    def _cards(self, i: int) -> np.ndarray:
        a, b = int(self.params["parent_ptr"][i]), int(self.params["parent_ptr"][i + 1])
        if self._card is not None and len(self._card) == int(self.params["parent_ptr"][-1]):
            return self._card[a:b]
        par, cpt = self._leaf_arrays(i)
        card = _binary_if_consistent(par, cpt.size)
        if card is None:
            card = _solve_cards(par.astype(np.int64), cpt)
        if card is None:
            raise _err(self, i, "cardinalities cannot be recovered from the CPT sizes; "
                                "call validate(cardinality) on this table first")
        return card

    def to_node(self, i):
        par, cpt = self._leaf_arrays(i)
        card = self._cards(i)
        cpts, o = [], 0
        for j, p in enumerate(par):
            rows = 1 if p < 0 else card[p]
            cpts.append(cpt[o:o + rows * card[j]].reshape(rows, card[j]).copy())
            o += rows * card[j]
        return ChowLiuLeaf(self.scopes[i].astype(np.int64), par.copy(), cpts)

    def describe(self, i, var_names):
        vs = ",".join(var_names[v] for v in self.scopes[i])
        return f"CLT({vs})"

    # ---------------------------------------------------------------- validation
    def zero_leaves(self):
        """The leaves with a conditional probability of zero somewhere in their tables."""
        cptr, cpt = self.params["cpt_ptr"], self.params["cpt"]
        owner = np.repeat(np.arange(len(self.node)), np.diff(cptr))
        return np.bincount(owner[cpt <= 0], minlength=len(self.node)) > 0

    def validate(self, cardinality):
        L = len(self.node)
        for key, dt in (("parent_ptr", np.int64), ("parent", np.int32), ("cpt_ptr", np.int64), ("cpt", np.float64)):
            a = self.params.get(key)
            if a is None or a.ndim != 1:
                raise _err(self, 0, f"missing or malformed parameter array {key!r}")
            if (dt is np.float64) != np.issubdtype(a.dtype, np.floating):
                raise _err(self, 0, f"parameter {key!r} has dtype {a.dtype}, expected {np.dtype(dt).name}")
        pptr, par = self.params["parent_ptr"], self.params["parent"]
        cptr, cpt = self.params["cpt_ptr"], self.params["cpt"]
        for key, ptr, total in (("parent_ptr", pptr, len(par)), ("cpt_ptr", cptr, len(cpt))):
            if len(ptr) != L + 1 or ptr[0] != 0 or ptr[-1] != total or np.any(np.diff(ptr) < 0):
                raise _err(self, 0, f"{key} must have {L + 1} entries, start at 0, not decrease and end at {total}")
        if self._all_valid(cardinality):
            # the state counts the CPT sizes were checked against: files store no per-variable
            # counts, and guessing them from the CPTs is ambiguous (rows ending in zeros)
            self._card = (np.asarray(cardinality)[np.concatenate(self.scopes)].astype(np.int64) if L
                          else np.zeros(0, np.int64))
            return
        for i in range(L):     # something is wrong: find the first leaf at fault, and say what
            scope = self.scopes[i]
            p = par[pptr[i]:pptr[i + 1]].astype(np.int64)
            if len(p) != len(scope):
                raise _err(self, i, f"{len(p)} parent entries for a scope of {len(scope)} variables")
            card = np.asarray(cardinality)[scope].astype(np.int64)
            if np.any(card < 2):
                j = int(np.flatnonzero(card < 2)[0])
                raise _err(self, i, f"variable {scope[j]} is not discrete (cardinality {card[j]})")
            _check_tree(self, i, p)
            sizes = np.where(p < 0, 1, card[np.maximum(p, 0)]) * card
            block = cpt[cptr[i]:cptr[i + 1]]
            if block.size != sizes.sum():
                raise _err(self, i, f"cpt holds {block.size} values; the tree over cardinalities {card.tolist()} needs {int(sizes.sum())}")
            if not block.size:
                continue
            bad = np.flatnonzero(~np.isfinite(block) | (block < 0))
            if bad.size:
                j = int(np.searchsorted(np.cumsum(sizes), bad[0], side="right"))
                raise _err(self, i, f"CPT of variable {scope[j]} has negative or non-finite entries")
            rows = sizes // card                       # CPT rows per variable, each of card[j] entries
            s = np.add.reduceat(block, np.concatenate([[0], np.cumsum(np.repeat(card, rows))[:-1]]))
            bad = np.flatnonzero(np.abs(s - 1.0) > ROW_TOL)
            if bad.size:
                ends = np.cumsum(rows)
                j = int(np.searchsorted(ends, bad[0], side="right"))
                row = int(bad[0] - (ends[j] - rows[j]))
                raise _err(self, i, f"CPT of variable {scope[j]}, row {row} sums to {float(s[bad[0]])!r}, not 1")

    def _all_valid(self, cardinality) -> bool:
        """The checks of :meth:`validate` on all leaves at once (no loop over leaves): True
        when every leaf passes, False when some check fails (validate then names it)."""
        pptr, cptr, cpt = self.params["parent_ptr"], self.params["cpt_ptr"], self.params["cpt"]
        lens = np.fromiter((len(sc) for sc in self.scopes), dtype=np.int64, count=len(self.scopes))
        if len(lens) != len(self.node) or not np.array_equal(np.diff(pptr), lens) or np.any(lens == 0):
            return False
        if not len(lens):
            return True
        cardinality = np.asarray(cardinality)
        scope = np.concatenate(self.scopes).astype(np.int64)
        if scope.min() < 0 or scope.max() >= len(cardinality):
            return False
        card = cardinality[scope].astype(np.int64)
        leaf = np.repeat(np.arange(len(lens)), lens)
        p = self.params["parent"].astype(np.int64)
        if np.any(card < 2) or np.any((p < -1) | (p >= lens[leaf])):
            return False
        if np.any(np.bincount(leaf[p == -1], minlength=len(lens)) != 1):
            return False
        fpar = np.where(p < 0, -1, p + pptr[:-1][leaf])
        try:
            _bfs_order(fpar, pptr)          # raises on a cycle
        except StructureError:
            return False
        sizes = np.where(p < 0, 1, card[np.maximum(fpar, 0)]) * card
        if not np.array_equal(np.add.reduceat(sizes, pptr[:-1]), np.diff(cptr)):
            return False
        if not cpt.size:
            return True
        if not np.all(np.isfinite(cpt) & (cpt >= 0)):
            return False
        starts = np.concatenate([[0], np.cumsum(np.repeat(card, sizes // card))[:-1]])
        return bool(np.all(np.abs(np.add.reduceat(cpt, starts) - 1.0) <= ROW_TOL))

    # ---------------------------------------------------------------- kernels
    def _prepared(self) -> _Prepared:
        # contents, not identities: parameters may be edited in place (cheap: O(size))
        key = self.content_key() + (id(self._card),)
        if self._prep is not None and self._prep_key == key:
            return self._prep
        pptr = np.ascontiguousarray(self.params["parent_ptr"], dtype=np.int64)
        par = self.params["parent"].astype(np.int64)
        cptr = self.params["cpt_ptr"].astype(np.int64)
        T = int(pptr[-1])
        P = _Prepared()
        P.var_ptr = pptr
        P.order = np.empty(T, dtype=np.int32)
        P.card = np.empty(T, dtype=np.int32)
        P.fpar = np.where(par < 0, -1, par + np.repeat(pptr[:-1], np.diff(pptr))).astype(np.int32)
        P.coff = np.empty(T, dtype=np.int64)
        P.loff = np.empty(T, dtype=np.int64)
        P.gvar = (np.concatenate(self.scopes).astype(np.int32) if T else np.zeros(0, np.int32))
        L = len(self.node)
        leaf = np.repeat(np.arange(L), np.diff(pptr))
        if self._card is not None and len(self._card) == T:
            card = self._card.astype(np.int64)
        else:
            card = np.concatenate([self._cards(i) for i in range(L)]).astype(np.int64) if L else np.zeros(0, np.int64)
        P.order[:] = _bfs_order(P.fpar, pptr)
        P.card[:] = card
        sizes = np.where(P.fpar < 0, 1, card[np.maximum(P.fpar, 0)]) * card
        P.coff[:] = cptr[leaf] + _exclusive_within(sizes, pptr, leaf)
        P.loff[:] = _exclusive_within(card, pptr, leaf)
        scratch = max(1, int(np.add.reduceat(card, pptr[:-1][np.diff(pptr) > 0]).max())) if T else 1
        P.cpt = np.ascontiguousarray(self.params["cpt"], dtype=np.float64)
        with np.errstate(divide="ignore"):
            P.logcpt = np.log(P.cpt)
        P.scratch = scratch
        used, inv = np.unique(P.gvar, return_inverse=True)
        P.used = used.astype(np.int32)
        P.cvar = inv.astype(np.int32)
        P.cpar = np.where(P.fpar >= 0, P.cvar[np.maximum(P.fpar, 0)], len(used)).astype(np.int32)
        self._prep, self._prep_key = P, key
        return P

    def _args(self, P: _Prepared | None = None) -> tuple:
        P = self._prepared() if P is None else P
        return (P.var_ptr, P.order, P.gvar, P.card, P.fpar, P.coff, P.loff, P.cpt, P.logcpt,
                P.used, P.cvar, P.cpar)

    def log_prob(self, XT, out, mode, n_threads):
        if not len(self.node):
            return
        P = self._prepared()
        K.tree_pass(*self._args(P), self.slot, self.node, P.scratch, XT, out, _NO_ACTIVE, _NO_VALUES,
                    int(mode), 0, 0, int(n_threads))

    def fill(self, XT, active, out_XT, mode, seed, row0):
        if not len(self.node):
            return
        P = self._prepared()
        nt = resolve_threads(None, float(XT.shape[1]) * len(P.gvar) * 64)
        K.tree_pass(*self._args(P), self.slot, self.node, P.scratch, XT, _NO_VALUES, active, out_XT,
                    int(mode), int(seed) & (2**64 - 1), int(row0), nt)

    def log_marginals(self):
        P = self._prepared()
        soff = np.zeros(len(P.card) + 1, dtype=np.int64)
        np.cumsum(P.card, out=soff[1:])
        out = np.empty(int(soff[-1]))
        K.var_marginals(P.var_ptr, P.order, P.card, P.fpar, P.coff, P.cpt, P.logcpt, soff[:-1], out)
        return P.var_ptr, P.gvar.astype(np.int64), out

    # ---------------------------------------------------------------- learning
    def log_prior(self, alpha: float) -> np.ndarray:
        """``alpha`` times the sum of the log CPT entries of each leaf: the pseudo-counts
        that make :meth:`weighted_fit`'s tables ``(count + alpha) / row total``."""
        cpt, ptr = self.params["cpt"], self.params["cpt_ptr"]
        if not len(self.node) or alpha == 0:
            return np.zeros(len(self.node))
        with np.errstate(divide="ignore"):
            return np.add.reduceat(alpha * np.log(cpt), ptr[:-1])

    def weighted_fit(self, X, resp, *, alpha: float = 0.0, mi_threshold: float = 0.0,
                     structure: bool = True, n_threads: int | None = None, **_):
        """Weighted ML refit of every leaf: structure and CPTs (``structure=True``, the
        mixture-of-trees M-step) or CPTs only. Leaves whose weights are all zero keep their
        parameters. Rows with positive weight must be complete on the leaf's scope."""
        P = self._prepared()
        X = np.asarray(X, dtype=np.float64)
        resp = np.asarray(resp, dtype=np.float64)
        new_par, new_cpt = [], []
        for i in range(len(self.node)):
            a, b = int(P.var_ptr[i]), int(P.var_ptr[i + 1])
            card = P.card[a:b].astype(np.int64)
            par_i = self.params["parent"][a:b]
            cp = self.params["cpt"][self.params["cpt_ptr"][i]:self.params["cpt_ptr"][i + 1]]
            w = resp[:, i] if resp.ndim == 2 else resp
            keep = w > 0
            if not np.any(keep):
                new_par.append(par_i.copy())
                new_cpt.append(cp.copy())
                continue
            check_weights(w, X.shape[0])
            Xs = X[np.ix_(keep, self.scopes[i])]
            if np.isnan(Xs).any():
                r, c = np.argwhere(np.isnan(Xs))[0]
                raise DataError(f"X[{np.flatnonzero(keep)[r]}, {self.scopes[i][c]}] is missing; "
                                f"the Chow-Liu leaf at node {int(self.node[i])} needs complete rows to refit")
            if structure:
                fit = fit_chow_liu(Xs, card, w[keep], alpha=alpha, mi_threshold=mi_threshold, n_threads=n_threads)
                p, cpts = forest_to_tree(fit.parents, fit.cpts)
            else:
                codes = np.ascontiguousarray(Xs, dtype=np.int32 if card.max() > 256 else np.uint8)
                p = par_i.copy()
                cpts = cpts_from_counts(_tables_direct(codes, card, w[keep], p.astype(np.int64), 1), alpha)
            new_par.append(np.asarray(p, dtype=np.int32))
            new_cpt.append(np.concatenate([c.ravel() for c in cpts]))
        cptr = np.zeros(len(self.node) + 1, dtype=np.int64)
        np.cumsum([len(c) for c in new_cpt], out=cptr[1:])
        self.params["parent"] = np.concatenate(new_par).astype(np.int32) if new_par else self.params["parent"]
        self.params["cpt"] = np.concatenate(new_cpt).astype(np.float64) if new_cpt else self.params["cpt"]
        self.params["cpt_ptr"] = cptr
        self._prep = None


_NO_ACTIVE = np.zeros((0, 1), dtype=np.uint8)
_NO_VALUES = np.zeros((0, 1))
