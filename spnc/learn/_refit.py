"""Closed-form re-estimation of part of a model from hard-routed rows (merging's refit).

Every row follows its hard induced tree (:func:`spnc.learn.routing.route`); the sum weights
and leaves of the *free* nodes are then set from the rows that reached them, with Laplace
pseudo-count ``alpha``: sum weights from edge counts, Bernoulli and categorical leaves
from state counts, Chow-Liu leaves relearned (structure and tables) by the Chow-Liu
algorithm. Other leaf types keep their parameters. Repeating route-and-refit is hard EM;
it stops when the routing no longer changes.
"""
from __future__ import annotations

import numpy as np

from ..chowliu import fit_chow_liu, forest_to_tree
from ..graph import SUM, SPN
from ..leaves.cltree import ChowLiuLeaf
from ..leaves.univariate import Categorical
from . import routing as _routing
from ._graphedit import follow_leaf_keys
from ._carry import route_from
from ._routing import count_codes


def refit_from_routing(spn: SPN, X: np.ndarray, R, edge_counts: np.ndarray, free: np.ndarray,
                       alpha: float, codes: np.ndarray | None = None,
                       codes_by_var: np.ndarray | None = None) -> SPN:
    """The model with the parameters of the ``free`` nodes (boolean mask) re-estimated from
    the routing ``R`` (rows x nodes) and its sum-edge counts (``codes``: ``X`` as small
    integers, which Chow-Liu fits read faster; ``codes_by_var``: them transposed, which
    Bernoulli counts read faster)."""
    N = spn.n_nodes
    deg = np.diff(spn.child_ptr)
    parent = np.repeat(np.arange(N), deg)
    weight = spn.weight.copy()
    sel = (spn.kind[parent] == SUM) & free[parent]
    if sel.any():
        c = edge_counts + alpha
        tot = np.bincount(parent[sel], weights=c[sel], minlength=N)
        rows = np.bincount(parent[sel], weights=edge_counts[sel], minlength=N)
        upd = sel & (rows[parent] > 0)
        weight[upd] = c[upd] / tot[parent[upd]]
    tables = {}
    for name, t in spn.leaf_tables.items():
        idx = np.flatnonzero(free[t.node])
        if not idx.size or name not in ("bernoulli", "categorical", "cltree"):
            tables[name] = t
            continue
        if name == "bernoulli":
            tables[name] = _bernoulli(t, idx, X, R, alpha, codes_by_var)
            continue
        objs = {}
        for i in idx.tolist():
            r = _routing.rows_of(R, int(t.node[i]))
            if r.size == 0:
                continue
            s = t.scopes[i]
            if name == "categorical":
                v = int(s[0])
                k = int(spn.cardinality[v])
                cnt = np.bincount(X[r, v].astype(np.int64), minlength=k)[:k] + alpha
                objs[i] = Categorical(v, cnt / cnt.sum())
            else:
                sub = codes[np.ix_(r, s)] if codes is not None else X[np.ix_(r, s)].astype(np.int64)
                fit = fit_chow_liu(sub, spn.cardinality[s], alpha=alpha, n_threads=1)
                parents, cpts = forest_to_tree(fit.parents, fit.cpts)
                objs[i] = ChowLiuLeaf(s.astype(np.int64), parents, cpts)
        if not objs:
            tables[name] = t
            continue
        pos = np.fromiter(objs, dtype=np.int64, count=len(objs))
        keep = np.setdiff1d(np.arange(len(t)), pos)
        made = type(t).from_nodes(t.node[pos], list(objs.values()))
        tables[name] = type(t).gather(t.node, [(t, keep, keep), (made, np.arange(len(pos)), pos)])
        follow_leaf_keys(tables[name], t, pos)
    return SPN.from_arrays(spn.kind, spn.child_ptr, spn.child, weight, tables, spn.cardinality,
                           var_type=spn.var_type, var_names=spn.var_names, roots=spn.roots,
                           root_weights=spn.root_weights, combine=spn.combine, learner=spn.learner,
                           validate=False)


def _bernoulli(t, idx: np.ndarray, X: np.ndarray, R, alpha: float, by_var: np.ndarray | None = None):
    """Bernoulli table ``t`` with leaves ``idx`` re-estimated from their rows (those no row
    reached keep their parameter), as one new parameter array: the ones of a leaf's
    variable are counted exactly (from the codes ``by_var``, when given), so each ``p``
    is the one a count over ``X`` gives."""
    ptr, rows = _routing.rows_of_many(R, t.node[idx])
    size = np.diff(ptr)
    # whole counts (sums of 0/1 values, exact in any order), per leaf
    if by_var is not None and by_var.dtype == np.uint8 and by_var.flags.c_contiguous:
        got = count_codes(by_var, t.var[idx].astype(np.int64), ptr, rows).astype(np.float64)
    else:
        var = np.repeat(t.var[idx].astype(np.int64), size)
        ones = by_var[var, rows] if by_var is not None else X[rows, var]
        got = np.bincount(np.repeat(np.arange(len(idx)), size), weights=ones, minlength=len(idx))
    p = t.params["p"].astype(np.float64, copy=True)
    on = size > 0
    p[idx[on]] = (got[on] + alpha) / (size[on] + 2 * alpha)
    # no leaf keys carried over: merging compares Bernoulli leaves by their parameter
    # columns (._hashcons._columns), and keys asked for later are made from the table
    return t.with_params({"p": p})


def hard_refit(spn: SPN, X: np.ndarray, free: np.ndarray, *, alpha: float, max_iter: int,
               n_threads: int | None = None, cache=None):
    """Hard EM on the free nodes: route, refit, until the routing is stable or
    ``max_iter`` passes (``max_iter=1``: one counting pass). Returns the model and the
    last routing (that of the returned model when the routing converged, else of the
    model before the last refit). ``cache``: leaf values of ``X`` kept between passes
    (:class:`._leafcache.LeafCache`)."""
    prev = None
    for _ in range(max(1, int(max_iter))):
        ec = np.zeros(spn.n_edges)
        R = _routing.route(spn, X, n_threads=n_threads, edge_counts=ec, cache=cache)
        if _same(prev, R):
            break
        codes, by_var = (cache.codes, cache.codes_by_var) if cache is not None else (None, None)   # made once
        spn = refit_from_routing(spn, X, R, ec, free, alpha, codes, by_var)
        prev = R
    return spn, prev if prev is not None else R


def local_refit(spn: SPN, X: np.ndarray, D, free: np.ndarray, heads: np.ndarray, *, alpha: float,
                max_iter: int, n_threads: int | None = None, codes: np.ndarray | None = None,
                codes_by_var: np.ndarray | None = None):
    """:func:`hard_refit` from the rows that reached the free nodes rather than from every
    row: ``D`` is the :class:`._carry.Routing` of ``spn`` carried over from the model it
    was made from (a merged node has the union of its members' rows); the rows of each head
    (the free nodes that are kept, or reached from outside the free ones) enter it and are
    routed below it alone (:func:`._carry.route_from`). Returns the model and
    ``D`` with the free nodes' columns from the last routing (that of the returned model
    when the routing converged, else of the model before the last refit)."""
    entry = D.rows_of_many(heads)
    prev = None
    for _ in range(max(1, int(max_iter))):
        Rf, ec = route_from(spn, X, heads, entry, n_threads=n_threads)
        if _same(prev, Rf):
            break
        spn = refit_from_routing(spn, X, D.splice(Rf, free), ec, free, alpha, codes, codes_by_var)
        prev = Rf
    return spn, D.splice(prev if prev is not None else Rf, free)


def _same(a, b) -> bool:
    """Whether routing ``a`` (None: none yet) equals ``b``: hard EM has converged."""
    return a is not None and np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
