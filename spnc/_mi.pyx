# cython: language_level=3
"""Mutual information, G statistics and the maximum spanning forest over pair tables: the
second half of the shared counting layer (the counts themselves come from spnc/_counts.pyx).
Used by Chow-Liu (spnc/chowliu.py), the LearnSPN splitting tests (spnc/learn/structure.py)
and any learner that needs pairwise dependence. Trusts its arguments; OpenMP loops cover
pairs, and results do not depend on the number of threads.
"""
import numpy as np

from cython.parallel cimport prange, parallel
from libc.math cimport log, INFINITY
from libc.stdint cimport uint8_t, int32_t, int64_t
from libc.stdlib cimport malloc, free

ctypedef fused code_t:
    uint8_t
    int32_t


cdef inline double _xlogx(double p) noexcept nogil:
    return p * log(p) if p > 0.0 else 0.0


cdef double _mi_table(const double *tab, Py_ssize_t ka, Py_ssize_t kb, double total,
                      double alpha, double *ma) noexcept nogil:
    """Mutual information (nats) of the smoothed joint (tab + alpha) / Z, tab ka x kb;
    ``ma`` is scratch for the ka + kb marginals."""
    cdef double z = total + alpha * ka * kb, p, s = 0.0
    cdef double *mb = ma + ka
    cdef Py_ssize_t a, b
    if z <= 0.0:
        return 0.0
    for a in range(ka):
        ma[a] = 0.0
    for b in range(kb):
        mb[b] = 0.0
    for a in range(ka):
        for b in range(kb):
            p = (tab[a * kb + b] + alpha) / z
            if p < 0.0:
                p = 0.0
            s += _xlogx(p)
            ma[a] += p
            mb[b] += p
    for a in range(ka):
        s -= _xlogx(ma[a])
    for b in range(kb):
        s -= _xlogx(mb[b])
    return s if s > 0.0 else 0.0


cdef double _mi_binary(double c11, double ci, double cj, double total, double alpha) noexcept nogil:
    cdef double tab[4]
    cdef double ma[4]
    tab[3] = c11
    tab[2] = ci - c11
    tab[1] = cj - c11
    tab[0] = total - ci - cj + c11
    return _mi_table(tab, 2, 2, total, alpha, ma)


cdef Py_ssize_t _max_card(const int64_t[::1] card) noexcept nogil:
    cdef Py_ssize_t i, k = 1
    for i in range(card.shape[0]):
        k = max(k, card[i])
    return k


cdef inline double *_pair_scratch(Py_ssize_t kmax) noexcept nogil:
    """A kmax x kmax pair table followed by room for 2 kmax marginals (caller frees)."""
    return <double *> malloc(sizeof(double) * (kmax * kmax + 2 * kmax))


def mi_from_onehot(const double[:, ::1] C, const int64_t[::1] off, const int64_t[::1] card,
                   double total, double alpha, int n_threads):
    """Symmetric MI matrix from one-hot co-occurrences (``C`` upper triangle: variable
    pair (i, j), i < j, is the block at rows off[i].., columns off[j]..)."""
    cdef Py_ssize_t d = card.shape[0], i, j, a, b, ki, kj, kmax = _max_card(card)
    M_arr = np.zeros((d, d), dtype=np.float64)
    cdef double[:, ::1] M = M_arr
    cdef double *tab
    with nogil, parallel(num_threads=n_threads):
        tab = _pair_scratch(kmax)
        for i in prange(d, schedule="dynamic", chunksize=4):
            ki = card[i]
            for j in range(i + 1, d):
                kj = card[j]
                for a in range(ki):
                    for b in range(kj):
                        tab[a * kj + b] = C[off[i] + a, off[j] + b]
                M[i, j] = _mi_table(tab, ki, kj, total, alpha, tab + kmax * kmax)
        free(tab)
    M_arr += M_arr.T
    return M_arr


def mi_from_cooc(const double[:, ::1] C, double total, double alpha, int n_threads):
    """Symmetric MI matrix of binary variables from co-occurrences (upper triangle +
    diagonal of ``C``) and the total weight."""
    cdef Py_ssize_t d = C.shape[0], i, j
    M_arr = np.zeros((d, d), dtype=np.float64)
    cdef double[:, ::1] M = M_arr
    for i in prange(d, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=4):
        for j in range(i + 1, d):
            M[i, j] = _mi_binary(C[i, j], C[i, i], C[j, j], total, alpha)
    M_arr += M_arr.T
    return M_arr


def mi_general(const code_t[:, ::1] XT, const int64_t[::1] card, const double[::1] w,
               double total, double alpha, int n_threads):
    """Symmetric MI matrix from codes ``XT`` (n_vars x n_rows) by direct pair tables."""
    cdef Py_ssize_t d = XT.shape[0], n = XT.shape[1], i, j, r, ki, kj, q
    cdef Py_ssize_t kmax = _max_card(card)
    cdef double *tab
    cdef double[:, ::1] M
    M_arr = np.zeros((d, d), dtype=np.float64)
    M = M_arr
    with nogil, parallel(num_threads=n_threads):
        tab = _pair_scratch(kmax)
        for i in prange(d, schedule="dynamic", chunksize=1):
            ki = card[i]
            for j in range(i + 1, d):
                kj = card[j]
                for q in range(ki * kj):
                    tab[q] = 0.0
                for r in range(n):
                    tab[XT[i, r] * kj + XT[j, r]] += w[r]
                M[i, j] = _mi_table(tab, ki, kj, total, alpha, tab + kmax * kmax)
        free(tab)
    M_arr += M_arr.T
    return M_arr


def prim_max_forest(const double[:, ::1] M, double threshold):
    """Maximum spanning forest over edges with ``M[i, j] > threshold`` (dense Prim, O(d^2)).

    Each component is rooted at its lowest-numbered vertex; ties go to the lowest index.
    Returns ``parent`` (int32, -1 at roots)."""
    cdef Py_ssize_t d = M.shape[0], step, u, v, best_v
    parent_arr = np.full(d, -1, dtype=np.int32)
    best_arr = np.full(d, -INFINITY, dtype=np.float64)
    done_arr = np.zeros(d, dtype=np.uint8)
    cdef int32_t[::1] parent = parent_arr
    cdef double[::1] best = best_arr
    cdef uint8_t[::1] done = done_arr
    cdef double bv
    with nogil:
        for step in range(d):
            best_v = -1
            bv = -INFINITY
            for u in range(d):
                if not done[u] and best[u] > bv:
                    bv = best[u]
                    best_v = u
            if best_v < 0:  # no edge left into the tree: start a new component
                for u in range(d):
                    if not done[u]:
                        best_v = u
                        break
                parent[best_v] = -1
            v = best_v
            done[v] = 1
            for u in range(d):
                if not done[u] and M[v, u] > threshold and M[v, u] > best[u]:
                    best[u] = M[v, u]
                    parent[u] = <int32_t>v
    return parent_arr


def gtest_onehot(const double[:, ::1] C, const int64_t[::1] off, double n):
    """G statistic and degrees of freedom of every variable pair.

    ``C`` holds co-occurrences of one-hot indicator columns (upper triangle and diagonal,
    as ``cooc_popcount`` gives them); ``off`` the first indicator of each
    variable. ``G[i, j] = 2 sum_ab c_ab log(c_ab n / (c_a c_b))`` over the pair's table and
    ``dof[i, j] = (k_i - 1)(k_j - 1)`` with ``k`` the number of values seen in the slice."""
    cdef Py_ssize_t d = off.shape[0] - 1, i, j, a, b, ia, jb
    G_arr = np.zeros((d, d), dtype=np.float64)
    dof_arr = np.zeros((d, d), dtype=np.float64)
    seen_arr = np.zeros(d, dtype=np.float64)
    cdef double[:, ::1] G = G_arr
    cdef double[:, ::1] dof = dof_arr
    cdef double[::1] seen = seen_arr
    cdef double g, c, ca, cb
    with nogil:
        for i in range(d):
            for a in range(off[i], off[i + 1]):
                if C[a, a] > 0:
                    seen[i] += 1
        for i in range(d):
            for j in range(i + 1, d):
                g = 0.0
                for a in range(off[i], off[i + 1]):
                    ca = C[a, a]
                    if ca <= 0:
                        continue
                    for b in range(off[j], off[j + 1]):
                        c = C[a, b]
                        cb = C[b, b]
                        if c > 0:
                            g += c * log(c * n / (ca * cb))
                G[i, j] = 2.0 * g
                G[j, i] = 2.0 * g
                dof[i, j] = (seen[i] - 1) * (seen[j] - 1)
                dof[j, i] = dof[i, j]
    return G_arr, dof_arr
