"""Hash-consing after a small edit: :func:`._graphedit.hash_cons`'s result, keying only the
nodes the edit may have changed.

A model made from a hash-consed one (or from one whose duplicates were just redirected)
keeps most nodes as they were: same kind, same parameters, children that are the images of
the old children. Such a node's key is unchanged and distinct from every other unchanged
node's, so a new duplicate involves a *changed* node (:func:`changed_nodes`, closed
upwards). :func:`hash_cons_changed` keys the changed nodes in node order and looks for an
unchanged node of the same key among the parents of the key's smallest child (a leaf: among
the leaves of its table), giving every node the first node of its key, as
:func:`._graphedit.hash_cons` does.
"""
from __future__ import annotations

import heapq
import weakref

import numpy as np

from .._validation import scope_index
from ..graph import SUM, SPN
from ..leaves.base import _ranges
from ._graphedit import leaf_keys, node_key


def changed_nodes(old: SPN, new: SPN, target: np.ndarray) -> np.ndarray:
    """Boolean mask of the nodes of ``new`` that are not an unchanged copy of one node of
    ``old`` (``target``: old node -> new node, -1 dropped), and of their ancestors. A copy
    has one old node, its kind, parameters and children's images, each child the image of
    one old node. ``old`` must have no two nodes of one key (:func:`._graphedit.hash_cons`,
    or only representatives of its classes mapped one to one). The last answer is kept on
    ``new`` for the same ``old`` and ``target`` objects (merging asks twice)."""
    hit = new.__dict__.get("_changed_from")
    if hit is not None and hit[0]() is old and hit[1] is target:
        return hit[2].copy()
    mark = _changed_nodes(old, new, target)
    new.__dict__["_changed_from"] = (weakref.ref(old), target, mark.copy())
    return mark


def _changed_nodes(old: SPN, new: SPN, target: np.ndarray) -> np.ndarray:
    M = new.n_nodes
    target = np.asarray(target, dtype=np.int64)
    valid = np.flatnonzero(target >= 0)
    cnt = np.bincount(target[valid], minlength=M)
    pre = np.full(M, -1, dtype=np.int64)
    pre[target[valid]] = valid
    ok = cnt == 1
    j = np.flatnonzero(ok)
    ok[j] = old.kind[pre[j]] == new.kind[j]
    dn, do = np.diff(new.child_ptr), np.diff(old.child_ptr)
    j = np.flatnonzero(ok & (new.kind < 2))
    ok[j] = dn[j] == do[pre[j]]
    j = np.flatnonzero(ok & (new.kind < 2))
    en, eo = _ranges(new.child_ptr[j], dn[j]), _ranges(old.child_ptr[pre[j]], dn[j])
    nc = new.child[en].astype(np.int64)
    same = (target[old.child[eo]] == nc) & (cnt[nc] == 1) & \
        (new.weight[en].view(np.int64) == old.weight[eo].view(np.int64))
    ok[np.repeat(j, dn[j])[~same]] = False
    for name, t in new.leaf_tables.items():
        o = old.leaf_tables.get(name)
        if o is None or not len(o):
            ok[t.node] = False
            continue
        at = np.full(old.n_nodes, -1, dtype=np.int64)       # old node -> its place in o
        at[o.node] = np.arange(len(o))
        on = np.flatnonzero(ok[t.node])
        j = at[pre[t.node[on]]]
        cols_t, cols_o = _columns(t), _columns(o)
        if cols_t is not None and cols_o is not None and len(cols_t) == len(cols_o):
            same = j >= 0
            for a, b in zip(cols_t, cols_o):
                same &= a[on] == b[np.maximum(j, 0)]
            ok[t.node[on[~same]]] = False
            continue
        keys, okeys = leaf_keys(t), leaf_keys(o)
        for i, k in zip(on.tolist(), j.tolist()):
            if k < 0 or okeys[k] != keys[i]:
                ok[int(t.node[i])] = False
    # and upwards: a parent's key reads its children's representatives
    mark = ~ok
    parent = np.repeat(np.arange(M), dn)
    while True:
        up = mark[new.child] & ~mark[parent]
        if not up.any():
            return mark
        mark[parent[up]] = True


#: changed inner nodes from which a check that none has another's key (one array pass,
#: about 0.4 ms on 2,700 nodes) is tried before keying them one by one (~4 us each)
_DISTINCT_MIN = 64


def hash_cons_changed(spn: SPN, changed: np.ndarray) -> np.ndarray:
    """:func:`._graphedit.hash_cons` of ``spn`` whose nodes outside ``changed`` (closed
    upwards, :func:`changed_nodes`) have distinct keys."""
    N = spn.n_nodes
    rep = np.arange(N, dtype=np.int64)
    kind, ptr, child, weight = spn.kind, spn.child_ptr, spn.child, spn.weight
    deg = np.diff(ptr)
    o = np.argsort(child, kind="stable")
    par = np.repeat(np.arange(N), deg)[o]                 # parents of node c: par[pptr[c]:pptr[c + 1]]
    pptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(np.bincount(child, minlength=N), out=pptr[1:])
    todo = changed.copy()
    heap: list[int] = []

    def touch(n: int) -> None:        # its key may change: key it in turn
        for p in par[pptr[n]:pptr[n + 1]].tolist():
            if not todo[p]:
                todo[p] = True
                heapq.heappush(heap, p)
    # leaves: the first leaf of the table with the same key (final at once)
    for t in spn.leaf_tables.values():
        if not len(t) or not todo[t.node].any():
            continue
        cols = _columns(t)
        if cols is not None:             # keys as rows of numbers, sorted: each run's first node
            o = np.lexsort([t.node] + cols[::-1])
            nodes = t.node[o]
            start = np.ones(len(o), dtype=bool)
            for c in cols:
                start[1:] &= c[o][1:] == c[o][:-1]
            start[1:] = ~start[1:]
            r = nodes[np.flatnonzero(start)][np.cumsum(start) - 1]
            moved = r != nodes
            rep[nodes[moved]] = r[moved]
            for n in nodes[moved & ~todo[nodes]].tolist():
                touch(n)
            continue
        first: dict = {}
        for n, k in sorted(zip(t.node.tolist(), leaf_keys(t))):
            r = first.setdefault(k, n)
            if r != n:
                rep[n] = r
                if not todo[n]:
                    touch(n)
    inner = todo & (kind < 2)
    if not heap and np.count_nonzero(inner) >= _DISTINCT_MIN and _distinct(spn, rep, inner):
        return rep                       # no changed inner node has another's key
    heap.extend(np.flatnonzero(todo & (kind < 2)).tolist())
    heapq.heapify(heap)
    seen: dict = {}
    done = ~todo | (kind >= 2)
    while heap:
        n = heapq.heappop(heap)
        if done[n]:
            continue
        done[n] = True
        key = node_key(n, int(kind[n]), ptr, child, weight, rep)
        if isinstance(key, int):
            rep[n] = key
        else:
            r = seen.get(key)
            if r is None:
                r = n
                low = min(key[1])                 # an unchanged node of this key is its parent
                for u in par[pptr[low]:pptr[low + 1]].tolist():
                    if u != n and not todo[u] and kind[u] == kind[n] and \
                            node_key(u, int(kind[u]), ptr, child, weight, rep) == key:
                        if u < n:
                            r = u
                        else:                     # the first of its key is n
                            rep[u], todo[u], done[u] = n, True, True
                            touch(u)
                        break
                seen[key] = r
            rep[n] = r
        if rep[n] != n:
            touch(n)
    return rep


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on uint64 words (wrapping)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _distinct(spn: SPN, rep: np.ndarray, cand: np.ndarray) -> bool:
    """True when :func:`._graphedit.node_key` (children by ``rep``) provably gives no node
    of ``cand`` an int (a sum over one node) or the key of another inner node: every sum
    over distinct children, and a 64-bit hash of each inner node's key (kind, sorted
    children, a sum's weights bit for bit in that order) shared by no other. False
    decides nothing."""
    if not cand.any():
        return True
    kind, ptr = spn.kind, spn.child_ptr
    N, deg = spn.n_nodes, np.diff(ptr)
    par = np.repeat(np.arange(N), deg)
    c = rep[spn.child].astype(np.int64)
    wb = np.where(kind[par] == SUM, spn.weight.view(np.uint64), np.uint64(0))
    o = np.lexsort((wb, c, par))                  # each node's edges stay in its range
    p, c, wb = par[o], c[o], wb[o]
    # a sum over one node keys as that node; repeated children are merged into one key
    # (any sum's, which then may equal a changed node's)
    sums = kind == SUM
    if (deg[cand & sums] < 2).any() or (sums[p[1:]] & (p[1:] == p[:-1]) & (c[1:] == c[:-1])).any():
        return False
    pos = np.arange(len(p)) - ptr[p]
    h = _mix(_mix(c.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)) ^ wb) + _mix(pos.astype(np.uint64) + np.uint64(1))
    inner = np.flatnonzero((kind < 2) & (deg > 0))
    H = np.zeros(N, dtype=np.uint64)
    H[inner] = np.add.reduceat(_mix(h), ptr[inner]) if len(h) else 0
    H = _mix(H ^ (kind.astype(np.uint64) << np.uint64(40)) ^ deg.astype(np.uint64))
    inner = np.flatnonzero(kind < 2)
    o = np.argsort(H[inner], kind="stable")
    hs, nodes = H[inner][o], inner[o]
    same = np.flatnonzero(hs[1:] == hs[:-1])
    return not (cand[nodes[same]] | cand[nodes[same + 1]]).any()


def _columns(t) -> list[np.ndarray] | None:
    """A leaf table's keys (:func:`._graphedit.leaf_keys`) as int64 columns, when every
    leaf has one variable and one number per parameter (Bernoulli, Gaussian): two leaves'
    keys are equal exactly when their columns are (parameters compared bit for bit)."""
    var = getattr(t, "var", None)
    if var is None or len(var) != len(t) or np.any(scope_index(t)[0] != 1):
        return None
    cols = [np.asarray(var, dtype=np.int64)]
    for k in sorted(t.params):
        a = t.params[k]
        if a.ndim != 1 or len(a) != len(t) or a.dtype.itemsize != 8:
            return None
        cols.append(a.view(np.int64))
    return cols
