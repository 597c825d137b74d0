"""Rebuilding a compiled SPN after nodes were redirected, merged or replaced.

The merge learner works on node ids of a compiled model: ``rep[n]`` names the node that
stands for ``n`` (itself when kept), ``replace`` maps node ids to new construction objects.
:func:`rebuild` turns this into a new, validated :class:`~spnc.SPN` (children before
parents, unreachable nodes dropped) and applies the exact simplifications of Rahman &
Gogate's Fig. 3 on the way:

* a sum whose children became the same node keeps one edge with the summed weight, and a
  sum left with one child is that child (Fig. 3b);
* an observed sum on ``V`` whose children ``[V=v] x R_v`` share the same rest ``R`` becomes
  the product of a distribution over ``V`` (its weights) and ``R`` (Fig. 3a); when only
  some children share their rest, those become one child ``P(V | group) x R``.

:func:`hash_cons` merges structurally identical sub-networks with equal parameters (a tree
compiled to its DAG), which never changes the distribution.
"""
from __future__ import annotations

import numpy as np

from ..graph import PRODUCT, SUM, SPN
from ..leaves.base import _ranges
from ..leaves.univariate import Bernoulli, Categorical, Indicator
from ..nodes import Node, Product, Sum
from ._redirect_graph import post_order


class _Row:
    """A leaf kept as it is: leaf ``i`` of ``table`` (copied by array slicing, no
    construction object; indicators, which the Fig. 3(a) rule inspects, stay objects)."""

    __slots__ = ("table", "i")

    def __init__(self, table, i: int):
        self.table, self.i = table, i


def leaf_objects(spn: SPN) -> dict[int, tuple]:
    """node id -> (table, index in table)."""
    out = {}
    for t in spn.leaf_tables.values():
        for i, n in enumerate(t.node.tolist()):
            out[n] = (t, i)
    return out


def _sig(v):
    if isinstance(v, (list, tuple)):
        return tuple(_sig(x) for x in v)
    a = np.asarray(v)
    return (a.dtype.str, a.shape, a.tobytes())


def leaf_signature(obj) -> tuple:
    """Hashable value of a leaf construction object: its class and every slot's value."""
    slots = []
    for cls in type(obj).__mro__:
        slots.extend(getattr(cls, "__slots__", ()))
    return (type(obj).__name__,) + tuple(_sig(getattr(obj, s)) for s in slots
                                         if s != "__weakref__" and hasattr(obj, s))


def leaf_keys(table) -> list:
    """A hashable key per leaf of ``table``, equal for two leaves exactly when their type,
    scope and parameters are equal: read from the parameter arrays (per-leaf entries, or
    slices of ``name`` delimited by ``name_ptr``), else from the construction objects.
    Kept on the table (one copy for every cache and pass, gone with the table), and
    rebuilt when its node or parameter arrays have changed in place."""
    stamp = table.content_key()
    memo = table.__dict__.get("_leaf_keys")
    if memo is not None and memo[0] == stamp:
        return memo[1]
    keys = _leaf_keys(table)
    table._leaf_keys = (stamp, keys)
    return keys


def follow_leaf_keys(new, old, edited: np.ndarray) -> None:
    """Keep on ``new``, ``old`` with the parameters of leaves ``edited`` changed, the keys
    of :func:`leaf_keys`: the others' from ``old`` (when kept there), these made now."""
    memo = old.__dict__.get("_leaf_keys")
    if memo is None or memo[0] != old.content_key():
        return
    keys = list(memo[1])
    if len(edited):
        sub = type(new).gather(new.node[edited], [(new, edited, np.arange(len(edited)))])
        for i, k in zip(edited.tolist(), _leaf_keys(sub)):
            keys[i] = k
    new._leaf_keys = (new.content_key(), keys)


def _leaf_keys(table) -> list:
    L = len(table)
    p = table.params
    cols = []
    for k in sorted(p):
        a = p[k]
        if k.endswith("_ptr") and k[:-4] in p:
            continue
        ptr = p.get(k + "_ptr")
        if ptr is not None and len(ptr) == L + 1:
            cols.append([a[ptr[i]:ptr[i + 1]].tobytes() for i in range(L)])
        elif a.ndim >= 1 and a.shape[0] == L:
            cols.append([a[i].tobytes() for i in range(L)])
        else:
            return [leaf_signature(table.to_node(i)) for i in range(L)]
    scopes = [s.tobytes() for s in table.scopes]
    return [(table.name, scopes[i]) + tuple(c[i] for c in cols) for i in range(L)]


def hash_cons(spn: SPN) -> np.ndarray:
    """``rep``: for every node the first node (in topological order) computing exactly the
    same function by the same structure and parameters (sum children compared as a set of
    (child, weight) pairs, duplicates added up; products as a set of children)."""
    N = spn.n_nodes
    rep = np.arange(N, dtype=np.int64)
    seen: dict = {}
    lkey: dict[int, tuple] = {}
    for t in spn.leaf_tables.values():
        lkey.update(zip(t.node.tolist(), leaf_keys(t)))
    kind, ptr, child, weight = spn.kind, spn.child_ptr, spn.child, spn.weight
    for n in range(N):
        k = int(kind[n])
        key = ("L", k, lkey[n]) if k >= 2 else node_key(n, k, ptr, child, weight, rep)
        rep[n] = key if isinstance(key, int) else seen.setdefault(key, n)
    return rep


def node_key(n: int, k: int, ptr, child, weight, rep) -> tuple | int:
    """:func:`hash_cons`'s key of inner node ``n`` (kind ``k``) from its children's
    representatives ``rep``; for a sum over one node, that node."""
    ch = rep[child[ptr[n]:ptr[n + 1]]]
    if k == PRODUCT:
        return ("P", tuple(sorted(ch.tolist())))
    w = weight[ptr[n]:ptr[n + 1]]
    cl = ch.tolist()
    if len(set(cl)) == len(cl) > 1:     # distinct children (the usual case): sort the pairs
        pairs = sorted(zip(cl, w.tolist()))
        return ("S", tuple(c for c, _ in pairs), np.array([x for _, x in pairs]).tobytes())
    u, inv = np.unique(ch, return_inverse=True)
    ws = np.bincount(inv, weights=w, minlength=len(u))
    if len(u) == 1:          # a sum over one node is that node
        return int(u[0])
    return ("S", tuple(u.tolist()), ws.tobytes())


def descendants(spn: SPN, start) -> np.ndarray:
    """Boolean mask of ``start`` nodes and everything below them: one array step per
    level, and past 64 levels one ordered pass over the nodes (deep chains)."""
    mark = np.zeros(spn.n_nodes, dtype=bool)
    mark[np.asarray(start, dtype=np.int64)] = True
    ptr, child = spn.child_ptr, spn.child
    parent = np.repeat(np.arange(spn.n_nodes), np.diff(ptr))
    for _ in range(64):
        new = mark[parent] & ~mark[child]
        if not new.any():
            return mark
        mark[child[new]] = True
    for n in range(spn.n_nodes - 1, -1, -1):      # children precede their parents
        if mark[n] and spn.kind[n] < 2:
            mark[child[ptr[n]:ptr[n + 1]]] = True
    return mark


def rebuild(spn: SPN, rep: np.ndarray, replace: dict[int, Node] | None = None,
            obs_var: np.ndarray | None = None, learner: dict | None = None,
            stats: dict | None = None, created: list | None = None) -> tuple[SPN, dict[int, int]]:
    """The model with every node ``n`` replaced by ``rep[n]`` (after ``replace``), Fig. 3
    simplifications applied. Returns the new SPN and a map old kept node -> new node id
    (for the nodes that survive as themselves); ``created``, if given, receives the new
    ids of the nodes the Fig. 3(a) simplification made."""
    made: list[Node] = []
    replace = replace or {}
    N = spn.n_nodes
    kind, ptr, child, weight = spn.kind, spn.child_ptr, spn.child, spn.weight
    card = spn.cardinality
    leaves = leaf_objects(spn)
    objs: list[Node | None] = [None] * N
    # iterative post-order over the redirected graph
    roots = [int(rep[r]) for r in spn.roots]
    stack = [(r, False) for r in roots]
    while stack:
        n, expanded = stack.pop()
        if objs[n] is not None:
            continue
        if n in replace:
            objs[n] = replace[n]
            continue
        k = int(kind[n])
        if k >= 2:
            t, i = leaves[n]
            objs[n] = t.to_node(i) if t.name == "indicator" else _Row(t, i)
            continue
        ch = rep[child[ptr[n]:ptr[n + 1]]]
        if not expanded:
            stack.append((n, True))
            stack.extend((int(c), False) for c in ch if objs[c] is None)
            continue
        kids = [objs[c] for c in ch]
        if k == PRODUCT:
            objs[n] = kids[0] if len(kids) == 1 else Product(kids)
        else:
            v = -1 if obs_var is None else int(obs_var[n])
            objs[n] = _make_sum(kids, weight[ptr[n]:ptr[n + 1]], v, int(card[v]) if v >= 0 else 0, made)
    index: dict[int, int] = {}
    new = _assemble([objs[r] for r in roots], spn, index, learner, stats)
    if created is not None:
        created.extend(index[id(o)] for o in made if id(o) in index)
    keep = {n: index[id(objs[n])] for n in range(N) if objs[n] is not None and id(objs[n]) in index
            and rep[n] == n}
    return new, keep


def _make_sum(kids: list[Node], w: np.ndarray, var: int, card: int, made: list) -> Node:
    ids: dict[int, int] = {}
    uk, uw = [], []
    for c, wc in zip(kids, w):
        j = ids.get(id(c))
        if j is None:
            ids[id(c)] = len(uk)
            uk.append(c)
            uw.append(float(wc))
        else:
            uw[j] += float(wc)
    if len(uk) == 1:                                   # Fig. 3(b)
        return uk[0]
    plan = fig3a_groups(uk, uw, var, card, lambda c: _split_indicator(c, var), id) if var >= 0 else None
    if plan is not None:                               # Fig. 3(a)
        nk = [uk[a] if dist is None else Product([dist] + a) for a, dist, _ in plan]
        made.extend(c for c, (_, dist, _) in zip(nk, plan) if dist is not None)
        if len(nk) == 1:
            return nk[0]
        uk, uw = nk, [w for _, _, w in plan]
    ws = np.asarray(uw)
    return Sum(uk, ws / ws.sum())


def fig3a_groups(uk: list, uw: list, var: int, card: int, split, key) -> list | None:
    """Fig. 3(a) for the children ``uk`` (weights ``uw``) of an observed sum on ``var``;
    ``split(c)`` gives ``(value, rest)`` of a child ``[V=value] x rest`` (value None for
    any other child), ``key`` a hashable of a rest member. Children with the same rest
    form a group. Returns, group by group in order of first member, ``(j, None, weight)``
    for a lone child ``uk[j]`` and ``(rest, distribution, weight)`` for a group that
    becomes ``distribution x rest``; None when no two children share their rest."""
    vals, rests, groups = [], [], {}
    for j, c in enumerate(uk):
        val, rest = split(c)
        if val is None:
            return None
        vals.append(val)
        rests.append(rest)
        groups.setdefault(tuple(sorted(map(key, rest))), []).append(j)
    if all(len(g) == 1 for g in groups.values()):
        return None
    out = []
    for g in groups.values():
        if len(g) == 1:
            out.append((g[0], None, uw[g[0]]))
            continue
        tot = sum(uw[j] for j in g)
        probs = np.zeros(card)
        for j in g:
            probs[vals[j]] += uw[j] / tot
        out.append((rests[g[0]], Bernoulli(var, float(probs[1])) if card == 2 else Categorical(var, probs), tot))
    return out


def _split_indicator(c: Node, var: int):
    if not isinstance(c, Product):
        return None, None
    val, rest = None, []
    for g in c.children:
        if val is None and isinstance(g, Indicator) and g.var == var:
            val = int(g.value)
        else:
            rest.append(g)
    return val, rest


def _assemble(roots: list[Node], like: SPN, index: dict[int, int], learner, stats) -> SPN:
    """Arrays of the graph below ``roots`` (children first); ``index`` receives
    id(object) -> node id. Roots, root weights and variables follow ``like``."""
    order: list[Node] = []
    stack = [(r, False) for r in reversed(roots)]
    while stack:
        obj, expanded = stack.pop()
        key = id(obj)
        if key in index:
            continue
        if expanded or not isinstance(obj, (Sum, Product)):
            index[key] = len(order)
            order.append(obj)
            continue
        stack.append((obj, True))
        stack.extend((c, False) for c in reversed(obj.children) if id(c) not in index)
    M = len(order)
    kind = np.empty(M, dtype=np.uint8)
    deg = np.zeros(M, dtype=np.int64)
    by_type: dict[type, list[int]] = {}
    for i, obj in enumerate(order):
        if isinstance(obj, Sum):
            kind[i], deg[i] = SUM, len(obj.children)
        elif isinstance(obj, Product):
            kind[i], deg[i] = PRODUCT, len(obj.children)
        else:
            lt = type(obj.table) if isinstance(obj, _Row) else type(obj)._leaf_type
            kind[i] = lt.code
            by_type.setdefault(lt, []).append(i)
    cptr = np.zeros(M + 1, dtype=np.int64)
    np.cumsum(deg, out=cptr[1:])
    ch = np.empty(cptr[-1], dtype=np.int64)
    w = np.ones(cptr[-1])
    for i in np.flatnonzero(kind < 2):
        obj = order[i]
        ch[cptr[i]:cptr[i + 1]] = [index[id(c)] for c in obj.children]
        if kind[i] == SUM:
            ws = np.asarray(obj.weights, dtype=np.float64)
            w[cptr[i]:cptr[i + 1]] = ws / ws.sum()
    tables = {lt.name: _table(lt, ids, order) for lt, ids in by_type.items()}
    new_roots = [index[id(r)] for r in roots]
    return SPN.from_arrays(kind, cptr, ch, w, tables, like.cardinality, var_type=like.var_type,
                           var_names=like.var_names, roots=new_roots,
                           root_weights=like.root_weights if like.combine == "mixture" else None,
                           combine=like.combine, stats=stats, learner=learner,
                           validate=False)   # structure checked; parameters by Merge.fit


def _table(lt, ids: list[int], order: list) -> "object":
    """The leaf table of type ``lt`` for nodes ``ids``: kept leaves are gathered from their
    tables, new construction objects packed by ``from_nodes``."""
    objs = [order[j] for j in ids]
    rows = [k for k, o in enumerate(objs) if isinstance(o, _Row)]
    if not rows:
        return lt.from_nodes(np.asarray(ids, dtype=np.int64), objs)
    parts: dict[int, tuple] = {}
    for k in rows:
        o = objs[k]
        parts.setdefault(id(o.table), (o.table, [], []))
        parts[id(o.table)][1].append(o.i)
        parts[id(o.table)][2].append(k)
    new = [k for k, o in enumerate(objs) if not isinstance(o, _Row)]
    plist = [(t, np.asarray(i, dtype=np.int64), np.asarray(p, dtype=np.int64)) for t, i, p in parts.values()]
    if new:
        made = lt.from_nodes(np.asarray([ids[k] for k in new], dtype=np.int64), [objs[k] for k in new])
        plist.append((made, np.arange(len(new), dtype=np.int64), np.asarray(new, dtype=np.int64)))
    return lt.gather(np.asarray(ids, dtype=np.int64), plist)


def replace_by_leaves(spn: SPN, replace: dict, learner: dict | None = None, ids: list | None = None) -> SPN | None:
    """:func:`rebuild` with ``rep`` the identity and every replacement a leaf object, by
    array operations: the replaced nodes become those leaves, nodes only they reached are
    dropped, and the rest are numbered in depth-first post-order from the roots, as
    :func:`rebuild` numbers them. For a model :func:`rebuild` made (no one-child sums or
    products, no repeated edge) the result is the model :func:`rebuild` gives. None when
    a replacement is not a leaf (the caller rebuilds). ``ids``, if given, receives the new
    id of every old node (-1: dropped), as one array."""
    N = spn.n_nodes
    kind, ptr = spn.kind, spn.child_ptr
    child = spn.child
    if not replace or any(isinstance(o, (Sum, Product)) for o in replace.values()):
        return None
    cut = np.zeros(N, dtype=bool)
    cut[np.fromiter(replace, dtype=np.int64, count=len(replace))] = True
    kc = np.where(cut | (kind >= 2), -1, np.diff(ptr))
    order = post_order(np.ascontiguousarray(ptr, dtype=np.int64), kc, child.astype(np.int64),
                       np.ascontiguousarray(spn.roots, dtype=np.int64))[0]
    live = np.zeros(N, dtype=bool)
    live[order] = True
    nodes = np.flatnonzero(cut & live)           # a replaced node below another is gone
    new_id = np.full(N, -1, dtype=np.int64)
    new_id[order] = np.arange(len(order))
    if ids is not None:
        ids.append(new_id)
    keep = np.asarray(order, dtype=np.int64)
    inner = keep[(kind[keep] < 2) & ~cut[keep]]
    deg = np.zeros(len(keep), dtype=np.int64)
    deg[new_id[inner]] = ptr[inner + 1] - ptr[inner]
    cptr = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(deg, out=cptr[1:])
    e = _ranges(ptr[inner], ptr[inner + 1] - ptr[inner])
    new_kind = kind[keep].copy()
    tables = {}
    made = {type(o)._leaf_type: [] for o in replace.values()}
    for n in nodes.tolist():
        lt = type(replace[n])._leaf_type
        new_kind[new_id[n]] = lt.code
        made[lt].append(n)
    for t in spn.leaf_tables.values():
        lt = type(t)
        rows = np.flatnonzero(live[t.node] & ~cut[t.node])
        ids = [new_id[t.node[rows]]]
        parts = [(t, rows, None)]
        extra = made.pop(lt, [])
        if extra:
            objs = lt.from_nodes(new_id[extra], [replace[n] for n in extra])
            ids.append(new_id[extra])
            parts.append((objs, np.arange(len(extra)), None))
        allid = np.concatenate(ids)
        srt = np.argsort(allid, kind="stable")
        pos = np.empty(len(allid), dtype=np.int64)
        pos[srt] = np.arange(len(allid))
        cuts = np.cumsum([0] + [len(i) for i in ids])
        plist = [(tb, idx, pos[cuts[k]:cuts[k + 1]]) for k, (tb, idx, _) in enumerate(parts)]
        tables[t.name] = lt.gather(allid[srt], plist)
    for lt, extra in made.items():             # a leaf type the model did not have yet
        tables[lt.name] = lt.from_nodes(new_id[np.sort(extra)], [replace[n] for n in sorted(extra)])
    # the tables that have leaves, in the order of their first node, as rebuild makes them
    tables = dict(sorted(((k, t) for k, t in tables.items() if len(t)), key=lambda kv: int(kv[1].node.min())))
    return SPN.from_arrays(new_kind, cptr, new_id[child[e]], spn.weight[e], tables, spn.cardinality,
                           var_type=spn.var_type, var_names=spn.var_names,
                           roots=new_id[np.asarray(spn.roots, dtype=np.int64)],
                           root_weights=spn.root_weights if spn.combine == "mixture" else None,
                           combine=spn.combine, stats={}, learner=learner, validate=False)
