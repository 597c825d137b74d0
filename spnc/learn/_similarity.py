"""Per-node statistics merging works from: single-variable marginals of every node in one
pass, mean-field distances between nodes of one scope, same-scope heights (which keep
merging acyclic) and parameter counts."""
from __future__ import annotations

import numpy as np

from .. import _budget
from ..graph import SUM, SPN
from ..leaves.base import _ranges
from ._pairs import l1_pairs

#: pairwise distance entries computed at once
_BLOCK = 1 << 22
#: a group with more pair entries (pairs x marginal columns) gets its own compiled call
_SMALL = 1 << 14
#: a group of this many pairs over at most 2 marginal columns gets its own compiled call
_MANY = 256
#: vectorised same-scope height steps before the one ordered pass
_HEIGHT_STEPS = 32


def used_vars(spn: SPN) -> np.ndarray:
    """Boolean mask of the variables some leaf (so some node's scope) holds."""
    used = np.zeros(spn.n_vars, dtype=bool)
    used[spn.scope] = True
    return used


def indicator_evidence(spn: SPN) -> tuple[np.ndarray, np.ndarray]:
    """``(E, off)``: one row per (discrete variable ``v`` in some leaf, state ``k``), row
    ``off[v] + k``, observing only ``X_v = k`` (at least one row). Variables no leaf uses
    get no rows: no node's scope holds them."""
    card = np.where((spn.cardinality > 0) & used_vars(spn), spn.cardinality, 0).astype(np.int64)
    off = np.zeros(spn.n_vars + 1, dtype=np.int64)
    np.cumsum(card, out=off[1:])
    K = int(off[-1])
    # the rows, a transposed copy, then every node's value on them and their exponentials
    _budget.check(16.0 * max(K, 1) * (spn.n_vars + spn.n_nodes),
                  f"merging's single-variable marginals of {spn.n_nodes} nodes ({K} indicator rows over "
                  f"{spn.n_vars} variables)", "merge a smaller model, or raise the budget")
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
    L = node_values(spn, E, np.arange(spn.n_nodes), n_threads=n_threads, cache=cache, by_node=True)
    return np.exp(L[:, :K]), off


def scope_marginals(spn: SPN, n_threads: int | None, evidence, cache, store=None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`node_marginals` where only the columns of each node's own scope variables are
    set (the others are undefined): all :class:`Pairs` reads. The same values there, one
    ``exp`` per entry read rather than per node and column. ``store``: a
    :class:`._nodevalues.NodeValues` of the evidence rows (the same values, kept)."""
    from .routing import node_values
    E, off = evidence
    N, K = spn.n_nodes, int(off[-1])
    sp, sc = spn.scope_ptr, spn.scope
    card = off[sc + 1] - off[sc]
    rows = np.repeat(np.repeat(np.arange(N), np.diff(sp)), card)
    cols = _ranges(off[sc], card)
    L = None if store is None else store.column_values(spn, rows, cols)
    if L is None:
        L = node_values(spn, E, np.arange(N), n_threads=n_threads, cache=cache, by_node=True)[rows, cols]
    P = np.empty((N, K))
    P[rows, cols] = np.exp(L)
    return P, off


def same_scope_height(spn: SPN) -> np.ndarray:
    """Longest chain of descendants with the node's own scope (0 when none): one
    vectorised step per link of the longest chain, and for deep chains (where those
    steps would cost depth x edges) one pass over the edges in node order instead."""
    size = np.diff(spn.scope_ptr)
    parent = np.repeat(np.arange(spn.n_nodes), np.diff(spn.child_ptr))
    keep = size[spn.child] == size[parent]       # a child's scope is a subset: equal size, same scope
    par, ch = parent[keep], spn.child[keep]
    h = np.zeros(spn.n_nodes, dtype=np.int64)
    for _ in range(_HEIGHT_STEPS):
        new = h.copy()
        np.maximum.at(new, par, h[ch] + 1)
        if np.array_equal(new, h):
            return h
        h = new
    # children precede their parents (SPN.from_arrays checks it) and ``par`` ascends, so a
    # child's height is final before any edge to it is read
    hl = h.tolist()
    for p, c in zip(par.tolist(), ch.tolist()):
        if hl[c] >= hl[p]:
            hl[p] = hl[c] + 1
    return np.asarray(hl, dtype=np.int64)


def n_parameters(spn: SPN) -> tuple[int, int]:
    """(sum weights, all parameters): sum-edge weights, plus the real numbers the leaves
    store (Bernoulli 1, categorical k, Chow-Liu every CPT entry, Gaussian 2, indicators 0;
    stored numbers, not free ones: a categorical leaf has k - 1 free)."""
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


class Pairs:
    """Candidate pairs of one model (Alg. 2's grouping): nodes of identical scope and equal
    same-scope height over discrete variables, in groups of two or more (smallest scopes
    first, then by first member; members ascending: ``members[gptr[g]:gptr[g + 1]]``), and
    the mean-field distance of every pair of a group, ``dist[pptr[g]:pptr[g + 1]]`` in the
    order of ``np.triu_indices(size, 1)``; ``gmin`` is each group's smallest distance.
    Large groups take one compiled distance call each, small ones one pass for all.
    ``memo``: the ``memo`` of an earlier model's pairs; a large group whose marginals are
    those of a group there (most, after a small edit) takes its distances, which depend on
    nothing else. ``self.memo`` holds this model's."""

    def __init__(self, spn: SPN, P: np.ndarray, off: np.ndarray, distance: str, skip: np.ndarray,
                 memo: dict | None = None):
        self.members, self.gptr = _scope_groups(spn, skip)
        sizes = np.diff(self.gptr)
        sp, sc, card = spn.scope_ptr, spn.scope, spn.cardinality
        lead = self.members[self.gptr[:-1]]
        nv = sp[lead + 1] - sp[lead]
        svar = sc[_ranges(sp[lead], nv)]               # each group's scope, group after group
        vptr = np.concatenate([[0], np.cumsum(nv)])
        vcard = card[svar].astype(np.int64)
        voff = np.concatenate([[0], np.cumsum(vcard)])  # each scope variable's first column
        clen = voff[vptr[1:]] - voff[vptr[:-1]]
        cols = _ranges(off[svar], vcard)
        npairs = sizes * (sizes - 1) // 2
        if len(sizes):       # every pair's distance (a close group's matrices: matrix())
            top = int(np.argmax(sizes))
            self._budget(8.0 * float(npairs.sum()), top, f"{float(npairs.sum()):.3g} pairs in all")
        self.pptr = np.concatenate([[0], np.cumsum(npairs)])
        self.dist = np.empty(int(self.pptr[-1]))
        big = npairs * clen > _SMALL
        if distance == "manhattan":     # many pairs of few columns: compiled too (each sums in order,
            big |= (clen <= 2) & (npairs >= _MANY)      # of two terms in any order: the same bits)
        self.memo: dict = {}
        for g in np.flatnonzero(big):
            m = self.members[self.gptr[g]:self.gptr[g + 1]]
            Q = P[np.ix_(m, cols[voff[vptr[g]]:voff[vptr[g + 1]]])]
            starts = voff[vptr[g]:vptr[g + 1]] - voff[vptr[g]]
            out = self.dist[self.pptr[g]:self.pptr[g + 1]]
            key = (distance, Q.shape, starts.tobytes(), Q.tobytes())
            hit = None if memo is None else memo.get(key)
            if hit is None:
                _group_distance(Q, starts, distance, out)
            else:
                out[:] = hit
            self.memo[key] = out
        small = np.flatnonzero(~big)
        ss = sizes[small]
        # pairs of the small groups: position k of a group of s members pairs with k + 1 .. s - 1
        k = np.arange(int(ss.sum())) - np.repeat(np.cumsum(ss) - ss, ss)
        after = np.repeat(ss, ss) - 1 - k
        pa, pb = np.repeat(k, after), _ranges(k + 1, after)
        pg = np.repeat(small, npairs[small])
        where = _ranges(self.pptr[small], npairs[small])
        ent = np.cumsum(clen[pg])
        edges = np.unique(np.concatenate([[0], np.searchsorted(ent, np.arange(_BLOCK, ent[-1] if len(pg) else 0,
                                                                             _BLOCK)) + 1, [len(pg)]]))
        K = P.shape[1]
        flat = P.reshape(-1) if P.flags.c_contiguous else None
        for p0, p1 in zip(edges[:-1], edges[1:]):     # pairs in blocks of about _BLOCK entries
            g = pg[p0:p1]
            na = self.members[self.gptr[g] + pa[p0:p1]]
            nb = self.members[self.gptr[g] + pb[p0:p1]]
            c = cols[_ranges(voff[vptr[g]], clen[g])]
            if flat is not None:        # one gather from the flat array: the same entries, faster
                A, B = flat.take(np.repeat(na * K, clen[g]) + c), flat.take(np.repeat(nb * K, clen[g]) + c)
            else:
                A, B = P[np.repeat(na, clen[g]), c], P[np.repeat(nb, clen[g]), c]
            seg = np.concatenate([[0], np.cumsum(clen[g])[:-1]])
            differ = np.logical_or.reduceat((A <= 0.0) != (B <= 0.0), seg)  # other support: never similar
            if distance == "manhattan":
                d = np.add.reduceat(np.abs(A - B), seg)
            elif distance == "kl":   # symmetric: (KL(p||q) + KL(q||p)) / 2 = sum (p - q)(log p - log q) / 2
                A, B = np.clip(A, 1e-12, 1.0), np.clip(B, 1e-12, 1.0)
                d = 0.5 * np.add.reduceat((A - B) * (np.log(A) - np.log(B)), seg)
            else:                    # hellinger, per variable, then summed
                v = _ranges(vptr[g], nv[g])
                vstart = np.repeat(seg - voff[vptr[g]], nv[g]) + voff[v]
                per = np.sqrt(0.5 * np.add.reduceat((np.sqrt(A) - np.sqrt(B)) ** 2, vstart))
                d = np.add.reduceat(per, np.concatenate([[0], np.cumsum(nv[g])[:-1]]))
            d = d / nv[g]
            d[differ] = np.inf
            self.dist[where[p0:p1]] = d
        self.gmin = np.minimum.reduceat(self.dist, self.pptr[:-1]) if len(sizes) else np.zeros(0)

    def __len__(self) -> int:
        return len(self.gptr) - 1

    def _budget(self, nbytes: float, g: int, what: str) -> None:
        size = int(self.gptr[g + 1] - self.gptr[g])
        _budget.check(nbytes, f"merging's pairwise distances ({size} nodes of one scope, {what})",
                      f"node {int(self.members[self.gptr[g]])} has as many nodes of its scope and "
                      "same-scope height; merge a smaller model, or raise the budget")

    def close(self, g: int, eps: float) -> np.ndarray:
        """Group ``g``'s pairs within ``eps`` as a boolean matrix with a true diagonal:
        ``matrix(g) <= eps`` with its diagonal set, made from the pairs alone."""
        s, o = int(self.gptr[g + 1] - self.gptr[g]), int(self.pptr[g])
        self._budget(17.0 * s * s, g, "a matrix of its close pairs")     # bool, pair indices, selections
        i, j = _triu(s)
        c = self.dist[o:o + len(i)] <= eps
        C = np.eye(s, dtype=bool)
        C[i[c], j[c]] = True
        C[j[c], i[c]] = True
        return C

    def single_pairs(self, groups: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
        """For each of ``groups``: the members (local indices ``i < j``) of its one pair
        within ``eps``, or -1 when it has none or several; all groups in one pass. (Such a
        group's only cluster is that pair, whatever the leaders' order.)"""
        a, k = self.pptr[groups], self.pptr[groups + 1] - self.pptr[groups]
        c = self.dist[_ranges(a, k)] <= eps
        owner = np.repeat(np.arange(len(groups)), k)
        one = np.bincount(owner[c], minlength=len(groups)) == 1
        i = np.full(len(groups), -1, dtype=np.int64)
        j = i.copy()
        pos = np.flatnonzero(c)
        pos = pos[one[owner[pos]]]
        g = owner[pos]
        q = pos - (np.cumsum(k) - k)[g]                  # the pair's place in triu order
        n = (self.gptr[groups + 1] - self.gptr[groups])[g]
        r = ((2 * n - 1 - np.sqrt((2 * n - 1) ** 2 - 8 * q)) // 2).astype(np.int64)
        for _ in range(2):                               # exact in integers: row r holds q
            first = r * n - r * (r + 1) // 2
            r = np.where(first > q, r - 1, np.where(first + n - 1 - r <= q, r + 1, r))
        first = r * n - r * (r + 1) // 2
        i[g], j[g] = r, q - first + r + 1
        return i, j

    def matrix(self, g: int) -> np.ndarray:
        """Group ``g``'s distance matrix, with an infinite diagonal."""
        s, o = int(self.gptr[g + 1] - self.gptr[g]), int(self.pptr[g])
        self._budget(17.0 * s * s, g, "a matrix of them and its comparisons")    # D, min(D, D.T), bool
        D = np.full((s, s), np.inf)
        D[np.triu_indices(s, 1)] = self.dist[o:o + s * (s - 1) // 2]    # row after row, as stored
        return np.minimum(D, D.T)


_TRIU: dict = {}


def _triu(s: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(s, 1)`` (as int32), kept for ``s`` up to 128: groups of a size
    recur every round, and all sizes kept take 2.8 MB at most."""
    t = _TRIU.get(s)
    if t is None:
        t = tuple(a.astype(np.int32) for a in np.triu_indices(s, 1))
        for a in t:
            a.setflags(write=False)
        if s <= 128:
            _TRIU[s] = t
    return t


def _group_distance(Q: np.ndarray, starts: np.ndarray, distance: str, out: np.ndarray) -> None:
    """The mean-field distances of all pairs of rows of ``Q`` (nodes x concatenated
    marginals of the scope's variables, variable ``j`` starting at column ``starts[j]``)
    into ``out``, in the order of ``np.triu_indices(len(Q), 1)``: Manhattan in one compiled
    call (:mod:`._pairs`), the others by blocks of rows against the rows after them, so no
    matrix of the whole group is made."""
    g, k = Q.shape
    nv = len(starts)
    # a different support is never "similar": label each row's zero pattern
    zero = Q <= 0.0
    support = np.unique(np.packbits(zero, axis=1), axis=0, return_inverse=True)[1].ravel() if zero.any() \
        else np.zeros(g, dtype=np.int64)           # the usual case: one support, no sort
    if distance == "manhattan":             # compiled, in tiles of pairs
        l1_pairs(np.ascontiguousarray(Q), support.astype(np.int64), float(nv), out)
        return
    if distance == "hellinger":
        Q = np.sqrt(Q)
    elif distance == "kl":
        Q = np.clip(Q, 1e-12, 1.0)
        logQ = np.log(Q)
    step = max(1, _BLOCK // max(g * k, 1))
    o = 0
    for i0 in range(0, g - 1, step):
        i1 = min(g - 1, i0 + step)
        A, B = Q[i0:i1, None, :], Q[None, i0:]
        if distance == "hellinger":
            per = np.sqrt(0.5 * np.add.reduceat((A - B) ** 2, starts, axis=2))
        else:   # symmetric KL
            per = 0.5 * np.add.reduceat((A - B) * (logQ[i0:i1, None, :] - logQ[None, i0:]), starts, axis=2)
        D = per.sum(axis=2) / nv
        D[support[i0:i1, None] != support[None, i0:]] = np.inf
        for i in range(i0, i1):                  # row i against the rows after it
            out[o:o + g - 1 - i] = D[i - i0, i - i0 + 1:]
            o += g - 1 - i


_WORDS: list = [None]


def _scope_words(n: int) -> np.ndarray:
    """Two random 64-bit words per variable (fixed seed) that scopes are hashed by; the
    last ones drawn are kept (a fit asks for the same variables every round)."""
    w = _WORDS[0]
    if w is None or w.shape[1] != n:
        w = np.random.default_rng(0x5EED).integers(0, 2**63, size=(2, n)).astype(np.uint64)
        w.setflags(write=False)
        _WORDS[0] = w
    return w


def _scope_groups(spn: SPN, skip: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(members, gptr)`` of :class:`Pairs`: nodes outside ``skip`` over discrete
    variables only, grouped by identical scope and same-scope height. Scopes are compared
    by two random 64-bit sums, then checked entry by entry."""
    sp, sc = spn.scope_ptr, spn.scope
    size = np.diff(sp)
    real = np.concatenate([[0], np.cumsum(spn.cardinality[sc] <= 0)])
    nodes = np.flatnonzero(~skip & (size > 0) & (real[sp[1:]] == real[sp[:-1]]))
    words = _scope_words(max(spn.n_vars, 1))
    with np.errstate(over="ignore"):
        cs = np.concatenate([np.zeros((2, 1), np.uint64), np.cumsum(words[:, sc], axis=1, dtype=np.uint64)], axis=1)
        hs = cs[:, sp[nodes + 1]] - cs[:, sp[nodes]]
    h = same_scope_height(spn)[nodes]
    order = np.lexsort((nodes, hs[1], hs[0], h, size[nodes]))
    key = np.stack([size[nodes], h, hs[0].view(np.int64), hs[1].view(np.int64)])[:, order]
    nodes = nodes[order]
    new = np.ones(len(nodes), dtype=bool)
    new[1:] = np.any(key[:, 1:] != key[:, :-1], axis=0)
    start = np.flatnonzero(new)
    lens = np.diff(np.append(start, len(nodes)))
    lead = np.repeat(nodes[start], lens)
    if not np.array_equal(sc[_ranges(sp[nodes], size[nodes])], sc[_ranges(sp[lead], size[nodes])]):
        # two scopes share both sums (about 2^-128 a pair): group by the scopes themselves
        by: dict = {}
        for i, n in enumerate(nodes):
            by.setdefault((sc[sp[n]:sp[n + 1]].tobytes(), int(key[1, i])), []).append(i)
        runs = sorted(by.values())
        nodes = nodes[np.concatenate(runs)]
        lens = np.array([len(r) for r in runs])
        start = np.concatenate([[0], np.cumsum(lens)[:-1]])
    keepg = lens >= 2
    start, lens = start[keepg], lens[keepg]
    first = nodes[start]
    go = np.lexsort((first, size[first]))
    start, lens = start[go], lens[go]
    members = nodes[_ranges(start, lens)]
    return members, np.concatenate([[0], np.cumsum(lens)])
