# cython: language_level=3
"""Kernels of the Prometheus learner: the maximum spanning forest of an affinity graph
given as an edge list, read as the chain of partitions obtained by severing its edges
weakest first (Kruskal's merges in reverse), and affinities of sampled variable pairs."""
import numpy as np

from cython.parallel cimport prange, threadid
from libc.math cimport log
from libc.stdint cimport int32_t, int64_t, uint8_t

ctypedef fused code_t:
    uint8_t
    int32_t


cdef inline int64_t _find(int64_t[::1] parent, int64_t x) noexcept nogil:
    cdef int64_t r = x, t
    while parent[r] != r:
        r = parent[r]
    while parent[x] != r:           # path compression
        t = parent[x]
        parent[x] = r
        x = t
    return r


def spanning_chain(int64_t n, const int64_t[::1] eu, const int64_t[::1] ev):
    """Kruskal on edges already sorted strongest first. Returns ``(tree_edges, born, died,
    order, start, size)`` over the ``2n - 1`` possible blocks (leaves ``0..n-1``, then one
    block per merge): block ``b`` exists after ``t`` merges iff ``born[b] <= t < died[b]``
    (``died`` is ``n`` for blocks never merged); its variables are
    ``order[start[b]:start[b] + size[b]]`` (every block is contiguous in ``order``).
    ``tree_edges`` indexes the accepted edges, strongest first; severing them from the
    end back reproduces the blocks."""
    cdef int64_t E = eu.shape[0], m = 0, e, a, b, ra, rb, x, pos, k
    cdef int64_t nb = 2 * n - 1 if n > 0 else 0
    parent_np = np.arange(n, dtype=np.int64)
    block_np = np.arange(n, dtype=np.int64)       # union-find root -> its current block
    head_np = np.arange(nb, dtype=np.int64)       # block -> first leaf of its list
    tail_np = np.arange(nb, dtype=np.int64)       # block -> last leaf of its list
    nxt_np = np.full(n, -1, dtype=np.int64)
    born_np = np.zeros(nb, dtype=np.int64)
    died_np = np.full(nb, n, dtype=np.int64)
    size_np = np.ones(nb, dtype=np.int64)
    left_np = np.full(nb, -1, dtype=np.int64)
    tree_np = np.empty(max(n - 1, 0), dtype=np.int64)
    cdef int64_t[::1] parent = parent_np, block = block_np, head = head_np, tail = tail_np
    cdef int64_t[::1] nxt = nxt_np, born = born_np, died = died_np, size = size_np, left = left_np
    cdef int64_t[::1] tree = tree_np
    with nogil:
        for e in range(E):
            if m == n - 1:
                break
            ra = _find(parent, eu[e])
            rb = _find(parent, ev[e])
            if ra == rb:
                continue
            a = block[ra]
            b = block[rb]
            x = n + m
            m += 1
            born[x] = m
            died[a] = m
            died[b] = m
            size[x] = size[a] + size[b]
            head[x] = head[a]
            tail[x] = tail[b]
            nxt[tail[a]] = head[b]
            left[x] = a
            parent[rb] = ra
            block[ra] = x
            tree[m - 1] = e
    # one contiguous order: the final blocks' lists one after the other
    order_np = np.empty(n, dtype=np.int64)
    start_np = np.zeros(nb, dtype=np.int64)
    pos_np = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] order = order_np, start = start_np, posv = pos_np
    pos = 0
    with nogil:
        for b in range(n + m):
            if died[b] == n:             # a final block (a root of the forest)
                x = head[b]
                while x != -1:
                    order[pos] = x
                    posv[x] = pos
                    pos += 1
                    x = nxt[x]
        for b in range(n + m):
            start[b] = posv[head[b]]
    return tree_np[:m], born_np[:n + m], died_np[:n + m], order_np, start_np[:n + m], size_np[:n + m]


def pair_correlation(const double[:, ::1] ZT, const int64_t[::1] u, const int64_t[::1] v, int n_threads):
    """``|mean(ZT[u[e]] * ZT[v[e]])|`` per pair: absolute correlations of standardised columns."""
    cdef Py_ssize_t E = u.shape[0], n = ZT.shape[1], e, r
    out_np = np.empty(E, dtype=np.float64)
    cdef double[::1] out = out_np
    cdef double s
    for e in prange(E, nogil=True, num_threads=max(n_threads, 1), schedule="static"):
        s = 0.0
        for r in range(n):
            s = s + ZT[u[e], r] * ZT[v[e], r]
        out[e] = s / n if s >= 0 else -s / n
    return out_np


def pair_mutual_information(const code_t[:, ::1] XT, const int64_t[::1] card, const int64_t[::1] u,
                            const int64_t[::1] v, double alpha, int n_threads):
    """Smoothed mutual information (nats) of each pair ``(u[e], v[e])`` of code rows:
    ``p_ab = (N_ab + alpha) / (n + alpha k_u k_v)``, marginals from the same table."""
    cdef Py_ssize_t E = u.shape[0], n = XT.shape[1], e, r, a, b
    cdef int64_t K = 0
    for e in range(card.shape[0]):
        K = max(K, card[e])
    out_np = np.empty(E, dtype=np.float64)
    cdef double[::1] out = out_np
    cdef int nt = max(n_threads, 1)
    tab_np = np.zeros((nt, K * K + 2 * K), dtype=np.float64)
    cdef double[:, ::1] tab = tab_np
    cdef int tid
    cdef int64_t ku, kv
    cdef double tot, mi, pab, pa, pb
    for e in prange(E, nogil=True, num_threads=nt, schedule="dynamic"):
        tid = threadid()
        ku = card[u[e]]
        kv = card[v[e]]
        for a in range(ku * kv + ku + kv):
            tab[tid, a] = 0.0
        for r in range(n):
            tab[tid, XT[u[e], r] * kv + XT[v[e], r]] += 1.0
        tot = n + alpha * ku * kv
        for a in range(ku):
            for b in range(kv):
                tab[tid, ku * kv + a] += tab[tid, a * kv + b] + alpha
                tab[tid, ku * kv + ku + b] += tab[tid, a * kv + b] + alpha
        mi = 0.0
        for a in range(ku):
            pa = tab[tid, ku * kv + a] / tot
            for b in range(kv):
                pab = (tab[tid, a * kv + b] + alpha) / tot
                pb = tab[tid, ku * kv + ku + b] / tot
                if pab > 0:
                    mi = mi + pab * log(pab / (pa * pb))
        out[e] = mi if mi > 0 else 0.0
    return out_np
