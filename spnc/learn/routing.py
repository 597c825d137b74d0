"""Which data rows reach which node: recovered from any model, or taken from a learner.

Merging needs, for every node, the training (and validation) rows that "reached" it when
the model was learned. A learner such as LearnSPN knows this partition while it builds the
tree; a model from a file does not. :func:`route` recovers it from the model itself by
hard assignment, top-down from the root:

* a product sends a row to all its children;
* a sum sends it to the child maximising ``log w_c + M_c(x)``, ``M_c`` being the
  max-product value of the child (first maximum at ties; a mixture root likewise picks one
  root). Through a *latent* sum this is the max-product (Viterbi) assignment of the latent
  variable. Through an *observed* sum (children are products each containing an indicator
  leaf on one variable, see :func:`observed_sums`) every child but the one whose indicator
  matches the row has value ``-inf``, so the row follows its observed value, as the learner
  split it.

Short of probability zero (below), no decision through products, sums of one child and
observed sums reads a leaf's value, so leaves that no latent sum of two or more children
has below it are not evaluated: for an O-SPN (observed sums only) routing complete rows
costs one look at each row's observed values, not a pass over the leaves.
A row the model gives probability zero at a sum, every child's value being zero, goes to
the sum's first child, observed sums included, as max-product routing does, whatever the
other rows of the batch: so a leaf of the leaf matrix that may give a row probability zero
(:meth:`~spnc.leaves.base.LeafType.zero_leaves`: a Chow-Liu leaf with a zero in its
tables, an indicator over a huge state space; never a Gaussian) is evaluated when it lies
below a sum of two or more children. So are all leaves when a density there is zero in
doubles for a row of the batch (a Gaussian far from its mean, whose log-density is
``-inf``: :meth:`~spnc.leaves.base.LeafType.underflow_leaves`, read off the columns'
ranges). When every sum of two or more children is an observed sum, the model is not a
mixture and no such leaf is found, no sweep runs at all: each row's decisions follow from
which leaves give it probability zero, as bit operations on one bit per (node, row)
(:func:`_route_observed`).

For a tree learned by LearnSPN the recovered routing equals the learner's partition through
observed sums; through latent sums it is the model's own hard assignment, which is what the
paper's hard-EM re-estimation uses. A caller holding the routing a learner recorded passes
it instead (``Merge(routing=...)``): any boolean (or 0/1) matrix of shape
``(n_rows, n_nodes)``, dense or ``scipy.sparse``, column ``n`` marking the rows that reached
node ``n``.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .. import _infer, _route
from .._kinds import MAX
from .._sweep import CHUNK_VALUES, Sweep
from ..graph import PRODUCT, SUM, SPN
from ..leaves.base import _ranges
from ._graphedit import descendants
from ._routing import bits_to_csc, column_ranges, copy_runs, observed_route, state_masks


def route(spn: SPN, X, *, n_threads: int | None = None, edge_counts: np.ndarray | None = None,
          cache=None, chunk_values: int = CHUNK_VALUES) -> sp.csc_matrix:
    """Boolean ``(n_rows, n_nodes)`` sparse matrix: ``[r, n]`` is set when row ``r`` of
    ``X`` reaches node ``n`` under hard assignment (see the module notes). Column ``n``'s
    indices are the rows of node ``n``, in increasing order. Works on any single-root or
    mixture model. ``edge_counts`` (n_edges,), when given, receives the rows sent along
    each sum edge (added to its contents).

    One compiled sweep per chunk of rows (:func:`spnc._route.route`): the max-product
    forward keeps only the live nodes' values and each sum's arg-max edge, the top-down
    pass writes one bit per (node, row); memory is ``n_nodes * n_rows / 8`` bytes.
    ``cache``: a :class:`._leafcache.LeafCache` of ``X`` in max mode (used when it
    applies), which keeps leaf values from earlier passes. ``chunk_values``: the leaf
    matrix's budget per chunk (:class:`spnc._sweep.Sweep`'s ``budget``)."""
    mine = cache is not None and cache.checked(spn, X)
    X = X if mine else spn._check_X(X)
    if not decisive_leaves(spn).any() and (cache.complete if mine else not np.isnan(X).any()) \
            and not _underflows(spn, X, cache if mine else None):
        plan = _observed_plan(spn)
        if plan is not None:
            return _route_observed(spn, X, plan, edge_counts, cache if mine else None)
        lv = _ZERO_LEAVES     # every decision is an observed one (see the module notes)
    else:
        lv = cache if mine and cache.serves(MAX) and cache.usable(spn, X) else None
    n = X.shape[0]
    N = spn.n_nodes
    sw = Sweep(spn, X, MAX, n_threads, workspace="select", leaf_values=lv, transposed=cache.rows if mine else None,
               budget=chunk_values)
    nt = sw.n_threads
    acts = sw.acts()
    edge = np.zeros((nt, max(spn.n_edges, 1)))
    bits = np.zeros((N, -(-n // 64) + 1), dtype=np.uint64)
    rlw = spn._root_logw()
    pick_one = spn.combine == "mixture"
    for r0, r1, XT, L in sw:
        _route.route(sw.graph, sw.states, XT, L, spn.roots, rlw, pick_one, r1 - r0, bits, r0 // 64, edge, nt,
                     sw.ws, acts)
    if edge_counts is not None:
        edge_counts += edge.sum(0)[: spn.n_edges]
    return _as_csc(bits, n)


def _observed_plan(spn: SPN):
    """What :func:`_route_observed` needs, or None when ``spn`` has a sum of two or more
    children that is not an observed sum, or is a mixture (cached on ``spn``, by its leaves'
    contents): the dead sum edges (weight 0) and, per leaf the sweep evaluates itself, the
    (variable, state) pairs of probability zero. Leaf-matrix leaves count as never zero, as
    under ``_ZERO_LEAVES``: :func:`route` comes here only when none may be
    (:func:`decisive_leaves`)."""
    stamp = tuple((id(t),) + t.content_key() for t in spn.leaf_tables.values())   # in-place edits
    hit = spn.__dict__.get("_observed_route")
    if hit is not None and hit[0] == stamp:
        return hit[1] or None
    kind, ptr = spn.kind, spn.child_ptr
    deg = np.diff(ptr)
    latent = (kind == SUM) & (deg >= 2) & (observed_sums(spn) < 0)
    plan = False
    if spn.combine != "mixture" and not latent.any():
        parent = np.repeat(np.arange(spn.n_nodes), deg)
        dead = ((kind[parent] == SUM) & (spn.weight <= 0)).astype(np.uint8)
        node, var, val = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for t in spn.leaf_tables.values():
            st = t.state_log_probs(spn.cardinality) if len(t) else None
            if st is None:
                continue
            tvar, tptr, lp = st
            z = np.flatnonzero(np.isneginf(lp))
            owner = np.searchsorted(tptr, z, side="right") - 1
            node.append(t.node[owner].astype(np.int64))
            var.append(np.asarray(tvar, dtype=np.int64)[owner])
            val.append(z - tptr[owner])
        node, var, val = (np.concatenate(a) for a in (node, var, val))
        span = int(val.max()) + 1 if val.size else 1
        pair, src = np.unique(var * span + val, return_inverse=True)
        o = np.argsort(node, kind="stable")
        zptr = np.zeros(spn.n_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(node, minlength=spn.n_nodes), out=zptr[1:])
        plan = (np.ascontiguousarray(kind, dtype=np.uint8), dead, zptr, src.ravel()[o].astype(np.int64),
                pair // span, pair % span)
    spn.__dict__["_observed_route"] = (stamp, plan)
    return plan or None


def _route_observed(spn: SPN, X: np.ndarray, plan, edge_counts, cache) -> sp.csc_matrix:
    """:func:`route` of complete rows through a model whose decisions are all observed
    ones (:func:`_observed_plan`): bit operations on the rows each leaf gives probability
    zero, no pass over the leaves (:func:`._routing.observed_route`)."""
    kind8, dead, zptr, zsrc, pvar, pval = plan
    n, N = X.shape[0], spn.n_nodes
    masks = cache.state_masks(pvar, pval) if cache is not None else \
        state_masks(np.ascontiguousarray(X, dtype=np.float64), pvar, pval)
    bits = np.zeros((N, -(-n // 64) + 1), dtype=np.uint64)
    ec = np.zeros(max(spn.n_edges, 1))
    observed_route(kind8, spn.child_ptr, spn.child, dead, zptr, zsrc, masks,
                   np.asarray(spn.roots, dtype=np.int64), n, bits, ec)
    if edge_counts is not None:
        edge_counts += ec[: spn.n_edges]
    return _as_csc(bits, n)


def _as_csc(bits: np.ndarray, n: int) -> sp.csc_matrix:
    """The routing matrix (n rows x nodes) of one bit row per node."""
    indptr, indices = bits_to_csc(bits, n)
    return sp.csc_matrix((np.ones(len(indices), dtype=bool), indices, indptr), shape=(n, bits.shape[0]))


class _ZeroLeaves:
    """Leaf values for :func:`route` when no decision reads them: log 1 everywhere."""

    all_zero = True         # the sweep zeroes its leaf matrix once and skips chunk()

    @staticmethod
    def chunk(spn, L: np.ndarray, r0: int, r1: int, XT: np.ndarray) -> None:
        L[...] = 0.0


_ZERO_LEAVES = _ZeroLeaves()


def decisive_leaves(spn: SPN) -> np.ndarray:
    """Boolean mask of the leaf-matrix leaves (types not evaluated inside the sweep) whose
    values some routing decision reads: those below a child of a latent sum of two or more
    children, or below any root of a mixture, and those that may give a row probability zero
    (:meth:`~spnc.leaves.base.LeafType.zero_leaves`) below a child of any sum of two or more
    children, as such a row goes to the sum's first child, observed sums included (cached
    on ``spn``, by the leaves' contents)."""
    return _leaf_masks(spn)[0]


def _leaf_masks(spn: SPN) -> tuple[np.ndarray, np.ndarray, list]:
    """(:func:`decisive_leaves`, the leaf-matrix leaves below a child of a sum of two or
    more children, their variables: cached on ``spn`` by the leaves' contents; the
    leaf-matrix tables)."""
    matrix = [t for t in spn.leaf_tables.values() if len(t) and t.state_log_probs(spn.cardinality) is None]
    stamp = tuple((id(t),) + t.content_key() for t in matrix)      # in-place edits
    hit = spn.__dict__.get("_decisive_leaves")
    if hit is not None and hit[0] == stamp:
        return hit[1] + (matrix,)
    read, guard = np.zeros(spn.n_nodes, dtype=bool), np.zeros(spn.n_nodes, dtype=bool)
    ptr, deg = spn.child_ptr, np.diff(spn.child_ptr)
    # any leaf below a latent sum's child is read; one that may be zero below any sum's
    # child (a sum of one child decides nothing: its rows all go to that child)
    choice = (spn.kind == SUM) & (deg >= 2)
    for sums, mask in ((choice & (observed_sums(spn) < 0), read), (choice, guard)) if matrix else ():
        sums = np.flatnonzero(sums)
        heads = spn.child[_ranges(ptr[sums], deg[sums])]
        if spn.combine == "mixture":       # the root is picked by value, as by a latent sum
            heads = np.concatenate([heads, np.asarray(spn.roots, dtype=heads.dtype)])
        if heads.size:
            below = descendants(spn, heads)
            for t in matrix:
                mask[t.node] = below[t.node]
    cols = [np.zeros(0, dtype=np.int64)]
    for t in matrix:
        read[t.node] |= guard[t.node] & t.zero_leaves()
        if guard[t.node].any():
            cols.append(np.concatenate(t.scopes).astype(np.int64))
    out = (read, guard, np.unique(np.concatenate(cols)))
    spn.__dict__["_decisive_leaves"] = (stamp, out)
    return out + (matrix,)


def _underflows(spn: SPN, X: np.ndarray, cache) -> bool:
    """True when a leaf-matrix leaf that is never zero in exact arithmetic may be zero in
    doubles (:meth:`~spnc.leaves.base.LeafType.underflow_leaves`) for a row of ``X``
    (complete) below a child of a sum of two or more children: such a row goes to the
    sum's first child, which only a sweep of the leaves' values finds. ``cache``: a
    :class:`._leafcache.LeafCache` of ``X``, which keeps its columns' ranges."""
    _, guard, cols, matrix = _leaf_masks(spn)
    tables = [t for t in matrix if guard[t.node].any()]
    if not tables or not X.shape[0]:
        return False
    lo, hi = cache.column_ranges() if cache is not None else column_ranges(np.ascontiguousarray(X), cols)
    return any((t.underflow_leaves(lo, hi) & guard[t.node]).any() for t in tables)


def as_routing(routing, n_rows: int, n_nodes: int) -> sp.csc_matrix:
    """Check a routing given by a caller and return it as a boolean CSC matrix."""
    from ..errors import DataError
    A = routing if sp.issparse(routing) else np.asarray(routing)
    if A.ndim != 2 or A.dtype.kind not in "biuf":
        raise DataError(f"routing must be a 2-D 0/1 (or boolean) matrix, got {A.ndim}-D {A.dtype}")
    M = sp.csc_matrix(A)
    if M.shape != (n_rows, n_nodes):
        raise DataError(f"routing must have shape (n_rows, n_nodes) = ({n_rows}, {n_nodes}), got {M.shape}")
    if M.nnz and not np.all((M.data == 0) | (M.data == 1)):
        raise DataError("routing must hold only 0 and 1 (or booleans); found other values (NaN, -1, 0.5, ...)")
    return M.astype(bool)


def rows_of(R, node: int) -> np.ndarray:
    """Row indices that reached ``node`` (``R`` a routing matrix, or a
    :class:`._carry.Routing`)."""
    if not sp.issparse(R):
        return R.rows(node)
    return R.indices[R.indptr[node]:R.indptr[node + 1]]


def rows_of_many(R, nodes) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr, idx)``: :func:`rows_of` ``nodes[i]`` is ``idx[ptr[i]:ptr[i + 1]]``."""
    if not sp.issparse(R):
        return R.rows_of_many(nodes)
    nodes = np.asarray(nodes, dtype=np.int64)
    a = R.indptr[nodes].astype(np.int64)
    lens = R.indptr[nodes + 1] - a
    ptr = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    idx = np.empty(int(ptr[-1]), dtype=np.int64)
    copy_runs(R.indices, a, lens.astype(np.int64), idx, ptr[:-1])
    return ptr, idx


def observed_sums(spn: SPN) -> np.ndarray:
    """For every node, the variable an *observed sum* conditions on, else -1.

    An observed sum is a sum with at least two children, each a product holding an
    indicator leaf on the same variable (distinct values). Every other sum is latent.
    Cached on ``spn`` (a read-only array)."""
    hit = spn.__dict__.get("_observed_sums")
    if hit is None:
        hit = spn.__dict__["_observed_sums"] = _observed_sums(spn)
        hit.flags.writeable = False
    return hit


def _observed_sums(spn: SPN) -> np.ndarray:
    out = np.full(spn.n_nodes, -1, dtype=np.int64)
    ind = spn.leaf_tables.get("indicator")
    if ind is None or not len(ind):
        return out
    kind, ptr, child = spn.kind, spn.child_ptr, spn.child
    deg = np.diff(ptr)
    sums = np.flatnonzero(kind == SUM)
    sums = sums[deg[sums] >= 2]
    if not sums.size:
        return out
    # indicator grandchildren: (product, variable, value) per edge, in edge order
    ind_var = np.full(spn.n_nodes, -1, dtype=np.int64)
    ind_val = np.zeros(spn.n_nodes, dtype=np.int64)
    ind_var[ind.node] = ind.var
    ind_val[ind.node] = ind.params["value"]
    parent = np.repeat(np.arange(spn.n_nodes), deg)
    e = np.flatnonzero((kind[parent] == PRODUCT) & (ind_var[child] >= 0))
    if not e.size:
        return out
    p_of, v_of, k_of = parent[e], ind_var[child[e]], ind_val[child[e]]
    # the candidate variable of a sum: the smallest indicator variable of its first child
    nv = max(spn.n_vars, int(v_of.max()) + 1 if v_of.size else 1)
    vmin = np.full(spn.n_nodes, nv, dtype=np.int64)
    np.minimum.at(vmin, p_of, v_of)
    # the first indicator of each (product, variable), as a sorted key
    key = p_of * nv + v_of
    ukey, first = np.unique(key, return_index=True)
    uval = k_of[first]
    se = _ranges(ptr[sums], deg[sums])               # the sums' edges
    owner = np.repeat(np.arange(len(sums)), deg[sums])
    ch = child[se]
    var = vmin[child[ptr[sums]]]
    want = ch * nv + var[owner]
    j = np.minimum(np.searchsorted(ukey, want), len(ukey) - 1)
    hit = (ukey[j] == want) & (kind[ch] == PRODUCT)
    val = np.where(hit, uval[j], -1)
    # every child a product holding an indicator on the variable, values distinct
    o = np.lexsort((val, owner))
    same = (owner[o][1:] == owner[o][:-1]) & (val[o][1:] == val[o][:-1])
    bad = np.bincount(owner, ~hit, minlength=len(sums)) + np.bincount(owner[o][1:], same, minlength=len(sums))
    ok = (var < nv) & (bad == 0)
    out[sums[ok]] = var[ok]
    return out


def node_values(spn: SPN, X, nodes, *, mode: int = 0, n_threads: int | None = None, cache=None,
                by_node: bool = False) -> np.ndarray:
    """``log S_n(x)`` of the given nodes for every row, shape (n_rows, len(nodes)), or
    (len(nodes), n_rows) with ``by_node`` (the sweep's own layout, no transposing copy; when
    one chunk holds every row, a view of the sweep's array, rows padded): one forward sweep
    keeping every node's value per block, copying out only ``nodes`` (``cache``: as in
    :func:`route`, for ``X`` in ``mode``)."""
    mine = cache is not None and cache.checked(spn, X)
    lv = cache if mine and cache.serves(mode) and cache.usable(spn, X) else None
    X = X if mine else spn._check_X(X)
    nodes = np.ascontiguousarray(nodes, dtype=np.int64)
    if not len(nodes) or not X.shape[0]:
        return np.empty((len(nodes), X.shape[0]) if by_node else (X.shape[0], len(nodes)))
    out = None
    sw = Sweep(spn, X, mode, n_threads, workspace="all", leaf_values=lv, transposed=cache.rows if mine else None)
    empty = np.empty((0, 0))
    for r0, r1, XT, L in sw:
        vals = np.empty((len(nodes), XT.shape[1]))
        _infer.forward(sw.graph, sw.states, XT, L, nodes, vals, empty, mode, sw.n_threads, sw.ws, True)
        if by_node and r0 == 0 and r1 == X.shape[0]:
            return vals[:, :r1]        # one chunk: no copy
        if out is None:
            out = np.empty((len(nodes), X.shape[0]) if by_node else (X.shape[0], len(nodes)))
        if by_node:
            out[:, r0:r1] = vals[:, : r1 - r0]
        else:
            out[r0:r1] = vals[:, : r1 - r0].T
    return out
