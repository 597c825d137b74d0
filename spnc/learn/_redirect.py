"""Redirecting nodes of a compiled model by list and array work on node ids.

:func:`redirect` is :func:`._graphedit.rebuild` without replacements: every node ``n``
stands for ``rep[n]``, Fig. 3 simplifications are applied, unreachable nodes dropped, and
the result is numbered in depth-first post-order from the roots. It makes no construction
object except the Fig. 3(a) distributions, so a merge round's rebuild costs a few
microseconds per node. The result is :func:`~._graphedit.rebuild`'s, array for array and
bit for bit (``tests/test_redirect.py``): merged models do not depend on which is used.
"""
from __future__ import annotations

import numpy as np

from ..graph import PRODUCT, SUM, SPN
from ..leaves.base import _ranges
from ._graphedit import fig3a_groups
from ._redirect_graph import assemble, resolve


def redirect(spn: SPN, rep: np.ndarray, obs_var: np.ndarray | None = None, learner: dict | None = None,
             stats: dict | None = None, created: list | None = None) -> tuple[SPN, dict[int, int]]:
    """:func:`._graphedit.rebuild` with no ``replace``: the new SPN and the map old kept
    node -> new node id; ``created`` receives the new ids of the Fig. 3(a) products."""
    N = spn.n_nodes
    if obs_var is None or not (np.asarray(obs_var) >= 0).any():
        return _redirect_latent(spn, np.asarray(rep, dtype=np.int64), learner, stats)
    kind, ptr, child = spn.kind.tolist(), spn.child_ptr.tolist(), spn.child.tolist()
    weight = spn.weight.tolist()
    rep = np.asarray(rep, dtype=np.int64).tolist()
    obs = [-1] * N if obs_var is None else np.asarray(obs_var).tolist()
    card = spn.cardinality
    ind = spn.leaf_tables.get("indicator")
    ivar = {} if ind is None else dict(zip(ind.node.tolist(), ind.var.tolist()))
    ival = {} if ind is None else dict(zip(ind.node.tolist(), ind.params["value"].tolist()))
    # the new graph: ids < N are old nodes, created nodes are appended
    gkind = list(kind)
    kids: list = [None] * N            # children of the inner nodes that survive
    wts: list = [None] * N             # their weights, for sums
    leaf_obj: dict[int, object] = {}   # created leaves
    made: list[int] = []
    res = [-1] * N                     # what each visited old node became

    roots = [rep[r] for r in np.asarray(spn.roots).tolist()]
    stack = [(r, False) for r in roots]
    while stack:
        n, expanded = stack.pop()
        if res[n] >= 0:
            continue
        k = kind[n]
        if k >= 2:
            res[n] = n
            continue
        cs = [rep[c] for c in child[ptr[n]:ptr[n + 1]]]
        if not expanded:
            stack.append((n, True))
            stack.extend((c, False) for c in cs if res[c] < 0)
            continue
        cs = [res[c] for c in cs]
        if k == PRODUCT:
            if len(cs) == 1:
                res[n] = cs[0]
            else:
                res[n], kids[n] = n, cs
            continue
        # a sum: repeated children add up their weights
        pos: dict[int, int] = {}
        uk: list[int] = []
        uw: list[float] = []
        for c, wc in zip(cs, weight[ptr[n]:ptr[n + 1]]):
            j = pos.get(c)
            if j is None:
                pos[c] = len(uk)
                uk.append(c)
                uw.append(wc)
            else:
                uw[j] += wc
        if len(uk) == 1:                                       # Fig. 3(b)
            res[n] = uk[0]
            continue
        v = obs[n]
        if v >= 0:                                             # Fig. 3(a)
            uk, uw = _fig3a(uk, uw, v, int(card[v]), gkind, kids, ivar, ival, leaf_obj, made)
            if len(uk) == 1:
                res[n] = uk[0]
                continue
        res[n], kids[n], wts[n] = n, uk, uw
    return _assemble(spn, [res[r] for r in roots], gkind, kids, wts, leaf_obj, rep, res, made, learner,
                     stats, created)


def _redirect_latent(spn: SPN, rep: np.ndarray, learner, stats) -> tuple[SPN, dict[int, int]]:
    """:func:`redirect` when no sum is an observed one (no Fig. 3(a) step): the same walks
    in compiled code (:mod:`._redirect_graph`), the same model and map."""
    kind = np.ascontiguousarray(spn.kind, dtype=np.uint8)
    ptr = np.ascontiguousarray(spn.child_ptr, dtype=np.int64)
    res, kcnt, kid, kw = resolve(kind, ptr, np.ascontiguousarray(spn.child, dtype=np.int32),
                                 np.ascontiguousarray(spn.weight, dtype=np.float64), rep,
                                 np.ascontiguousarray(spn.roots, dtype=np.int64))
    roots = res[rep[np.asarray(spn.roots, dtype=np.int64)]]
    order, new_id, cptr, ch, w = assemble(kind, ptr, kcnt, kid, kw, roots)
    tables = {}
    for t in spn.leaf_tables.values():
        rows = np.flatnonzero(new_id[t.node] >= 0)
        tables[t.name] = _gather(type(t), [new_id[t.node[rows]]], [(t, rows)])
    new = _new_model(spn, kind[order], cptr, ch, w, np.flatnonzero(kind[order] == SUM), tables, new_id[roots],
                     learner, stats)
    old = np.flatnonzero((res >= 0) & (rep == np.arange(len(rep))))
    nid = new_id[res[old]]
    on = nid >= 0
    return new, dict(zip(old[on].tolist(), nid[on].tolist()))


def _fig3a(uk, uw, var, card, gkind, kids, ivar, ival, leaf_obj, made):
    """Children of an observed sum on ``var`` that share their rest ``R`` (``[V=v] x R``)
    become one child ``P(V | group) x R`` (:func:`._graphedit.fig3a_groups`): the new
    children and weights."""
    plan = fig3a_groups(uk, uw, var, card, lambda c: _split_indicator(c, var, gkind, kids, ivar, ival), int)
    if plan is None:
        return uk, uw
    nk = []
    for a, dist, _ in plan:
        if dist is None:
            nk.append(uk[a])
            continue
        d = len(gkind)                     # the distribution, then its product with the rest
        gkind.extend([type(dist)._leaf_type.code, PRODUCT])
        kids.extend([None, [d] + a])
        leaf_obj[d] = dist
        made.append(d + 1)
        nk.append(d + 1)
    return nk, [w for _, _, w in plan]


def _split_indicator(c: int, var: int, gkind, kids, ivar, ival):
    """(value, rest) when ``c`` is a product holding an indicator on ``var``, else
    (None, None)."""
    if gkind[c] != PRODUCT or kids[c] is None:
        return None, None
    val, rest = None, []
    for g in kids[c]:
        if val is None and ivar.get(g, -1) == var:
            val = int(ival[g])
        else:
            rest.append(g)
    return val, rest


def _normalise(w: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """``w / w.sum()`` per segment, each sum exactly as numpy's (sequential below 8
    entries; pairwise sums above are taken one segment at a time)."""
    deg = np.diff(ptr)
    start = ptr[:-1]
    tot = w[start].copy()
    for k in range(1, 8):
        on = deg > k
        if not on.any():
            break
        tot[on] += w[start[on] + k]
    for s in np.flatnonzero(deg >= 8).tolist():
        tot[s] = w[ptr[s]:ptr[s + 1]].sum()
    return w / np.repeat(tot, deg)


def _assemble(spn, roots, gkind, kids, wts, leaf_obj, rep, res, made, learner, stats, created):
    """Arrays of the new graph below ``roots``, numbered in depth-first post-order."""
    new_id = [-1] * len(gkind)
    order: list[int] = []
    stack = [(r, False) for r in reversed(roots)]
    while stack:
        n, done = stack.pop()
        if new_id[n] >= 0:
            continue
        cs = kids[n]
        if done or cs is None:
            new_id[n] = len(order)
            order.append(n)
            continue
        stack.append((n, True))
        stack.extend((c, False) for c in reversed(cs) if new_id[c] < 0)
    M = len(order)
    kind = np.asarray([gkind[n] for n in order], dtype=np.uint8)
    inner = [n for n in order if kids[n] is not None]
    deg = np.zeros(M, dtype=np.int64)
    deg[[new_id[n] for n in inner]] = [len(kids[n]) for n in inner]
    cptr = np.zeros(M + 1, dtype=np.int64)
    np.cumsum(deg, out=cptr[1:])
    ch = np.asarray([new_id[c] for n in inner for c in kids[n]], dtype=np.int64)
    w = np.ones(len(ch))
    sums = [n for n in inner if gkind[n] == SUM]
    sum_ids = np.asarray([new_id[n] for n in sums], dtype=np.int64)
    if sums:
        w[_ranges(cptr[sum_ids], deg[sum_ids])] = [x for n in sums for x in wts[n]]
    nid = np.asarray(new_id, dtype=np.int64)
    tables = {}
    made_by_type: dict[type, list[int]] = {}
    for n, obj in leaf_obj.items():
        if new_id[n] >= 0:
            made_by_type.setdefault(type(obj)._leaf_type, []).append(n)
    for t in spn.leaf_tables.values():
        lt = type(t)
        rows = np.flatnonzero(nid[t.node] >= 0)
        ids = [nid[t.node[rows]]]
        parts = [(t, rows)]
        extra = made_by_type.pop(lt, [])
        if extra:
            ids.append(nid[extra])
            parts.append((lt.from_nodes(nid[extra], [leaf_obj[n] for n in extra]), np.arange(len(extra))))
        tables[t.name] = _gather(lt, ids, parts)
    for lt, extra in made_by_type.items():     # a leaf type the model did not have yet
        tables[lt.name] = lt.from_nodes(nid[extra], [leaf_obj[n] for n in extra])
    new = _new_model(spn, kind, cptr, ch, w, sum_ids, tables, [new_id[r] for r in roots], learner, stats)
    if created is not None:
        created.extend(new_id[p] for p in made if new_id[p] >= 0)
    keep = {n: new_id[res[n]] for n in range(len(res)) if res[n] >= 0 and rep[n] == n and new_id[res[n]] >= 0}
    return new, keep


def _new_model(spn, kind, cptr, ch, w, sums, tables: dict, roots, learner, stats) -> SPN:
    """The redirected SPN: the edge weights ``w`` of the new ``sums`` normalised (twice, as
    rebuild does: its Sum objects, then its arrays; the same bits), the non-empty leaf
    tables in order of their first node."""
    if len(sums):
        deg = np.diff(cptr)[sums]
        sptr = np.zeros(len(sums) + 1, dtype=np.int64)
        np.cumsum(deg, out=sptr[1:])
        e = _ranges(cptr[sums], deg)
        w[e] = _normalise(_normalise(w[e], sptr), sptr)
    tables = dict(sorted(((k, t) for k, t in tables.items() if len(t)), key=lambda kv: int(kv[1].node.min())))
    return SPN.from_arrays(kind, cptr, ch, w, tables, spn.cardinality, var_type=spn.var_type,
                           var_names=spn.var_names, roots=roots,
                           root_weights=spn.root_weights if spn.combine == "mixture" else None,
                           combine=spn.combine, stats=stats, learner=learner, validate=False)


def _gather(lt, ids: list[np.ndarray], parts: list[tuple]):
    """One table of type ``lt`` from ``parts`` (table, rows) whose leaves get ``ids``,
    sorted by new id."""
    allid = np.concatenate(ids)
    srt = np.argsort(allid, kind="stable")
    pos = np.empty(len(allid), dtype=np.int64)
    pos[srt] = np.arange(len(allid))
    cuts = np.cumsum([0] + [len(i) for i in ids])
    return lt.gather(allid[srt], [(tb, idx, pos[cuts[k]:cuts[k + 1]]) for k, (tb, idx) in enumerate(parts)])
