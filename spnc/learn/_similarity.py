"""Per-node statistics merging works from: single-variable marginals of every node in one
pass, mean-field distances between nodes of one scope, same-scope heights (which keep
merging acyclic) and parameter counts."""
from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from ..graph import SUM, SPN

#: pairwise distance entries computed at once
_BLOCK = 1 << 22


def indicator_evidence(spn: SPN) -> tuple[np.ndarray, np.ndarray]:
    """``(E, off)``: one row per (discrete variable ``v``, state ``k``), row ``off[v] + k``,
    observing only ``X_v = k`` (at least one row)."""
    card = np.where(spn.cardinality > 0, spn.cardinality, 0).astype(np.int64)
    off = np.zeros(spn.n_vars + 1, dtype=np.int64)
    np.cumsum(card, out=off[1:])
    K = int(off[-1])
    var = np.repeat(np.arange(spn.n_vars), card)
    E = np.full((max(K, 1), spn.n_vars), np.nan)
    E[np.arange(K), var] = np.arange(K) - off[var]
    return E, off


def node_marginals(spn: SPN, n_threads: int | None = None, evidence=None,
                   cache=None) -> tuple[np.ndarray, np.ndarray]:
    """``(P, off)``: ``P[n, off[v] + k] = P_n(X_v = k)`` for every node ``n`` and discrete
    variable ``v`` in its scope (1 for variables outside it), from one forward pass over
    indicator evidence; real variables get no columns (``off[v] == off[v + 1]``).
    ``evidence``: :func:`indicator_evidence` of ``spn``'s variables, computed once by a
    caller with many models over the same variables, with ``cache`` a
    :class:`._leafcache.LeafCache` of it in marginal mode."""
    from .routing import node_values
    E, off = indicator_evidence(spn) if evidence is None else evidence
    K = int(off[-1])
    L = node_values(spn, E, np.arange(spn.n_nodes), n_threads=n_threads, cache=cache)[:K]
    return np.exp(L.T), off


def pairwise_distance(Q: np.ndarray, starts: np.ndarray, distance: str) -> np.ndarray:
    """Mean-field distance matrix of the rows of ``Q`` (nodes x concatenated marginals of
    the scope's variables, variable ``j`` starting at column ``starts[j]``)."""
    g, k = Q.shape
    nv = len(starts)
    Z = (Q <= 0.0).astype(np.float64)          # a different support is never "similar"
    differ = (Z @ (1.0 - Z).T + (1.0 - Z) @ Z.T) > 0
    if distance == "manhattan":                # a sum over all columns: one compiled call
        D = cdist(Q, Q, "cityblock") / nv
        D[differ] = np.inf
        return D
    D = np.empty((g, g))
    if distance == "hellinger":
        Q = np.sqrt(Q)
    elif distance == "kl":
        Q = np.clip(Q, 1e-12, 1.0)
        logQ = np.log(Q)
    step = max(1, _BLOCK // max(g * k, 1))
    for i0 in range(0, g, step):
        A = Q[i0:i0 + step, None, :]
        if distance == "manhattan":
            per = np.add.reduceat(np.abs(A - Q[None]), starts, axis=2)
        elif distance == "hellinger":
            per = np.sqrt(0.5 * np.add.reduceat((A - Q[None]) ** 2, starts, axis=2))
        else:   # symmetric KL: (KL(p||q) + KL(q||p)) / 2 = sum (p - q)(log p - log q) / 2
            per = 0.5 * np.add.reduceat((A - Q[None]) * (logQ[i0:i0 + step, None, :] - logQ[None]), starts, axis=2)
        D[i0:i0 + step] = per.sum(axis=2) / nv
    D[differ] = np.inf
    return D


def same_scope_height(spn: SPN) -> np.ndarray:
    """Longest chain of descendants with the node's own scope (0 when none)."""
    size = np.diff(spn.scope_ptr)
    h = np.zeros(spn.n_nodes, dtype=np.int64)
    ptr, child, kind = spn.child_ptr, spn.child, spn.kind
    for n in np.flatnonzero(kind < 2):
        ch = child[ptr[n]:ptr[n + 1]]
        same = ch[size[ch] == size[n]]
        if same.size:
            h[n] = 1 + int(h[same].max())
    return h


def n_parameters(spn: SPN) -> tuple[int, int]:
    """(sum weights, all free parameters): sum-edge weights, plus leaf parameters
    (Bernoulli 1, categorical k-1, Chow-Liu CPT rows, Gaussian 2, indicators 0)."""
    sums = int(np.sum(np.diff(spn.child_ptr)[spn.kind == SUM]))
    leaf = 0
    for name, t in spn.leaf_tables.items():
        if name == "indicator" or not len(t):
            continue
        for a in t.to_arrays().values():
            a = np.asarray(a)
            if a.dtype.kind == "f":
                leaf += a.size
    return sums, sums + leaf
