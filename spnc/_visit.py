"""The pushing backward sweep's bookkeeping: the nodes it has work for, and the totals of
its edge counts' lanes.

In a tree-shaped model most nodes have nothing to do in the backward: a leaf or sum whose
only parent is a product shares that product's posterior slot, so the product passes it
nothing, and such a leaf adds nothing unless its responsibilities or state counts are asked
for. The sweep visits only the nodes listed here, in the same (descending) order, so its
results keep their bits.
"""
from __future__ import annotations

import numpy as np

from ._kinds import SUM, PRODUCT, LEAF


def _cache(graph) -> dict:
    """The lists kept on ``graph`` (its ``visit_cache``, made on first use)."""
    if graph.visit_cache is None:
        graph.visit_cache = {}
    return graph.visit_cache


def backward_visit(graph, var: np.ndarray, want_leaf: bool, want_all: bool, want_states: bool) -> np.ndarray:
    """int32 nodes in descending order: every sum, every product with a child of a slot of
    its own, every counted node (roots, parentless nodes), and the leaves that write their
    responsibilities (``want_leaf``) or state counts (``want_states``: inline leaves, ``var``
    >= 0); every node with ``want_all`` (posteriors written for all). Kept on the graph."""
    key = (bool(want_leaf), bool(want_all), bool(want_states))
    cache = _cache(graph)
    hit = cache.get(key)
    if hit is not None and (not want_states or hit[0] is var or np.array_equal(hit[0], var)):
        return hit[1]
    kind = np.asarray(graph.kind_)
    N = kind.shape[0]
    if want_all:
        need = np.ones(N, dtype=bool)
    else:
        ptr = np.asarray(graph.child_ptr_)
        child = np.asarray(graph.child_)[: ptr[-1]]
        parent = np.repeat(np.arange(N), np.diff(ptr))
        own = np.asarray(graph.alias_)[:N][child] == 0
        pushes = np.bincount(parent[own], minlength=N) > 0
        need = (kind == SUM) | ((kind == PRODUCT) & pushes) | (np.asarray(graph.counted_)[:N] != 0)
        if want_leaf:
            need |= kind >= LEAF
        if want_states:
            need |= (kind >= LEAF) & (np.asarray(var)[:N] >= 0)
    out = np.ascontiguousarray(np.flatnonzero(need)[::-1], dtype=np.int32)
    if not out.size:
        out = np.zeros(1, dtype=np.int32)[:0]
    cache[key] = (var if want_states else None, out)
    return out


def select_visit(graph) -> tuple[np.ndarray, np.ndarray]:
    """What a top-down selection sweep with nothing asked of its leaves but their fills
    visits: int32 nodes in descending order, all but the leaves sharing their product
    parent's slot (that product fills for them), and uint8 flags, one per entry: the entry
    is the last one reading its slot, so it clears the slot for the slot's next owner (the
    sweep skips inactive nodes, whose slots stay 0). Kept on the graph."""
    cache = _cache(graph)
    hit = cache.get("select")
    if hit is None:
        kind = np.asarray(graph.kind_)
        N = kind.shape[0]
        skip = (kind >= LEAF) & (np.asarray(graph.alias_)[:N] != 0)
        visit = np.ascontiguousarray(np.flatnonzero(~skip)[::-1], dtype=np.int32)
        grp = np.asarray(graph.group_)[:N][visit]
        clear = np.zeros(len(visit), dtype=np.uint8)
        if len(visit):
            _, first_rev = np.unique(grp[::-1], return_index=True)
            clear[len(visit) - 1 - first_rev] = 1      # each group's lowest visited node
        hit = cache["select"] = (visit, clear)
    return hit


def state_runs(graph, states) -> tuple[np.ndarray, ...]:
    """The visit list of a backward pass that counts states and nothing else per leaf, with
    the leaves that share their product parent's slot counted by that product instead:
    ``(visit, ptr, var, off, nst)``, where visit entry i counts the inline leaves
    ``ptr[i]:ptr[i + 1]`` of the run arrays (their variables, state offsets and numbers of
    states; <= 8 states, no count of their own). Such a product is listed even if it
    pushes nothing; its leaves are not. Kept on the graph."""
    var, off, nst = (np.asarray(a) for a in (states.var_, states.off_, states.nst_))
    cache = _cache(graph)
    hit = cache.get("runs")
    if hit is not None and all(h is a or np.array_equal(h, a) for h, a in zip(hit[0], (var, off, nst))):
        return hit[1]
    kind = np.asarray(graph.kind_)
    N = kind.shape[0]
    ptr = np.asarray(graph.child_ptr_)
    child = np.asarray(graph.child_)[: ptr[-1]]
    parent = np.repeat(np.arange(N), np.diff(ptr))
    alias = np.asarray(graph.alias_)[:N] != 0
    counted = np.asarray(graph.counted_)[:N] != 0
    run = (kind >= LEAF) & (var[:N] >= 0) & (nst[:N] <= 8) & alias & ~counted
    owner = np.full(N, -1, dtype=np.int64)
    e = run[child]                      # an alias node has exactly one parent, a product
    owner[child[e]] = parent[e]
    need = np.zeros(N, dtype=bool)
    need[backward_visit(graph, var, False, False, True)] = True
    need &= ~run
    need[owner[run]] = True
    visit = np.ascontiguousarray(np.flatnonzero(need)[::-1], dtype=np.int32)
    leaves = np.flatnonzero(run)[::-1]                  # descending, grouped by owner below
    leaves = leaves[np.argsort(-owner[leaves], kind="stable")]
    pos = np.full(N, -1, dtype=np.int64)
    pos[visit] = np.arange(len(visit))
    counts = np.bincount(pos[owner[leaves]], minlength=len(visit)) if len(visit) else np.zeros(0, np.int64)
    rptr = np.zeros(len(visit) + 1, dtype=np.int64)
    np.cumsum(counts, out=rptr[1:])
    out = (visit, rptr, np.ascontiguousarray(var[leaves], dtype=np.int32),
           np.ascontiguousarray(off[leaves], dtype=np.int64), np.ascontiguousarray(nst[leaves], dtype=np.int32))
    cache["runs"] = ((var, off, nst), out)
    return out


def backward_plan(graph, states, want_leaf: bool, want_all: bool, want_states: bool) -> tuple[np.ndarray, ...]:
    """What a pushing backward pass visits, as :func:`state_runs` returns it: with products
    counting their leaves' states when state counts are all the leaves are asked for, else
    :func:`backward_visit`'s list with no runs."""
    if want_states and not want_leaf and not want_all:
        return state_runs(graph, states)
    visit = backward_visit(graph, states.var_, want_leaf, want_all, want_states)
    return visit, _NO_RUNS[0], _NO_RUNS[1], _NO_RUNS[0], _NO_RUNS[1]


_NO_RUNS = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32))


def edge_lane_totals(acc: np.ndarray) -> np.ndarray:
    """(threads, 8 k) partial sums of the backward's edge counts -> (threads, k) totals, in
    a fixed tree (SPNC_EDGE_LANES is 8, checked in _backward.h)."""
    l = acc.reshape(acc.shape[0], -1, 8)
    return ((l[..., 0] + l[..., 1]) + (l[..., 2] + l[..., 3])) + ((l[..., 4] + l[..., 5]) + (l[..., 6] + l[..., 7]))
