# cython: language_level=3
"""Kernels of the top-down structure learners: hard-EM clustering of discrete rows under a
naive-Bayes mixture, k-means for real rows and connected components (the counting and
G-test kernels are in spnc/_counts.pyx). Data slices arrive row-major (rows x vars)."""
import numpy as np

cimport cython
from cython.parallel cimport prange
from libc.math cimport log, INFINITY
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memset

ctypedef fused code_t:
    uint8_t
    int32_t


cdef void _nb_tables(const double *counts, const double *csize, const int64_t *off,
                     const int64_t *card, Py_ssize_t d, Py_ssize_t m, Py_ssize_t k,
                     double alpha, double n, double *T, double *lw) noexcept nogil:
    """Smoothed log-probability tables and log mixing weights from hard counts."""
    cdef Py_ssize_t c, v, j
    cdef double denom
    for c in range(k):
        lw[c] = log((csize[c] + alpha) / (n + k * alpha)) if csize[c] + alpha > 0 else -INFINITY
        for v in range(d):
            denom = csize[c] + alpha * card[v]
            for j in range(off[v], off[v + 1]):
                if denom > 0:
                    T[c * m + j] = log((counts[c * m + j] + alpha) / denom)
                else:
                    T[c * m + j] = -INFINITY


def nb_hard_em(const code_t[:, ::1] X, const int64_t[::1] off, const int64_t[::1] card,
               const int64_t[:, ::1] protos, int n_iter, double alpha, int n_threads):
    """Hard EM for a mixture of ``k`` naive-Bayes components over discrete rows.

    Each restart (a row of ``protos``: ``k`` seed rows) starts from components centred on
    its seed rows, then alternates assigning every row to its most likely component and
    re-estimating the (``alpha``-smoothed) tables and mixing weights, until no row moves
    or ``n_iter`` rounds. Returns ``(labels, loglik)`` of the restart with the highest
    complete-data log-likelihood."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], k = protos.shape[1], R = protos.shape[0]
    cdef Py_ssize_t m = off[d], r, c, v, i, it
    T_arr = np.empty(k * m, dtype=np.float64)
    counts_arr = np.zeros(k * m, dtype=np.float64)
    csize_arr = np.zeros(k, dtype=np.float64)
    lw_arr = np.zeros(k, dtype=np.float64)
    lab_arr = np.full(n, -1, dtype=np.int32)
    best_arr = np.zeros(n, dtype=np.int32)
    score_arr = np.zeros(n, dtype=np.float64)
    cdef double[::1] T = T_arr
    cdef double[::1] counts = counts_arr
    cdef double[::1] csize = csize_arr
    cdef double[::1] lw = lw_arr
    cdef int32_t[::1] lab = lab_arr
    cdef int32_t[::1] best = best_arr
    cdef double[::1] score = score_arr
    cdef double s, total, best_total = -INFINITY
    cdef Py_ssize_t changed
    cdef int32_t old
    cdef int nt = n_threads if n_threads > 0 else 1
    if n == 0 or k == 0:
        return best_arr, 0.0
    with nogil:
        for r in range(R):
            # components centred on the seed rows (a pseudo-count of one each)
            memset(&counts[0], 0, k * m * sizeof(double))
            for c in range(k):
                csize[c] = 1.0
                for v in range(d):
                    counts[c * m + off[v] + X[protos[r, c], v]] = 1.0
            for i in range(n):
                lab[i] = -1
            for it in range(n_iter):
                _nb_tables(&counts[0], &csize[0], &off[0], &card[0], d, m, k, alpha,
                           <double>n if it > 0 else <double>k, &T[0], &lw[0])
                changed = 0
                for i in prange(n, num_threads=nt, schedule="static"):
                    _assign_row(&X[0, 0] + i * d, i, &off[0], &T[0], &lw[0], d, m, k, &lab[0], &score[0])
                # recount
                memset(&counts[0], 0, k * m * sizeof(double))
                memset(&csize[0], 0, k * sizeof(double))
                for i in range(n):
                    c = lab[i] & 0x7fffffff
                    if lab[i] < 0:
                        changed += 1
                        lab[i] = <int32_t>c
                    csize[c] += 1.0
                    for v in range(d):
                        counts[c * m + off[v] + X[i, v]] += 1.0
                if changed == 0:
                    break
            # score the final assignment under the final tables
            _nb_tables(&counts[0], &csize[0], &off[0], &card[0], d, m, k, alpha, <double>n, &T[0], &lw[0])
            total = 0.0
            for i in range(n):
                c = lab[i]
                s = lw[c]
                for v in range(d):
                    s = s + T[c * m + off[v] + X[i, v]]
                total += s
            if total > best_total:
                best_total = total
                for i in range(n):
                    best[i] = lab[i]
    return best_arr, best_total


cdef inline void _assign_row(const code_t *x, Py_ssize_t i, const int64_t *off,
                             const double *T, const double *lw, Py_ssize_t d, Py_ssize_t m,
                             Py_ssize_t k, int32_t *lab, double *score) noexcept nogil:
    """Most likely component of row ``i``; a moved row is flagged by a set sign bit (the
    caller counts and clears it)."""
    cdef Py_ssize_t c, v, bc = 0
    cdef double s, bs = -INFINITY
    cdef const double *Tc
    for c in range(k):
        Tc = T + c * m
        s = lw[c]
        for v in range(d):
            s = s + Tc[off[v] + x[v]]
        if s > bs:
            bs = s
            bc = c
    score[i] = bs
    if lab[i] != <int32_t>bc:
        lab[i] = <int32_t>(bc | (-0x7fffffff - 1))   # sign bit marks a move
    # unchanged rows keep their label


def kmeans(const double[:, ::1] X, const int64_t[:, ::1] init, int n_iter, int n_threads):
    """Lloyd's k-means from each row of ``init`` (``k`` seed rows per restart); returns
    ``(labels, inertia)`` of the restart with the lowest within-cluster sum of squares."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], k = init.shape[1], R = init.shape[0]
    cdef Py_ssize_t r, c, v, i, it, changed
    cent_arr = np.zeros((k, d), dtype=np.float64)
    sums_arr = np.zeros((k, d), dtype=np.float64)
    size_arr = np.zeros(k, dtype=np.float64)
    lab_arr = np.full(n, -1, dtype=np.int32)
    best_arr = np.zeros(n, dtype=np.int32)
    dist_arr = np.zeros(n, dtype=np.float64)
    cdef double[:, ::1] cent = cent_arr
    cdef double[:, ::1] sums = sums_arr
    cdef double[::1] size = size_arr
    cdef int32_t[::1] lab = lab_arr
    cdef int32_t[::1] best = best_arr
    cdef double[::1] dist = dist_arr
    cdef double total, best_total = INFINITY
    cdef int nt = n_threads if n_threads > 0 else 1
    if n == 0 or k == 0:
        return best_arr, 0.0
    with nogil:
        for r in range(R):
            for c in range(k):
                for v in range(d):
                    cent[c, v] = X[init[r, c], v]
            for i in range(n):
                lab[i] = -1
            for it in range(n_iter + 1):
                for i in prange(n, num_threads=nt, schedule="static"):
                    _nearest(&X[0, 0] + i * d, i, &cent[0, 0], k, d, &lab[0], &dist[0])
                changed = 0
                memset(&sums[0, 0], 0, k * d * sizeof(double))
                memset(&size[0], 0, k * sizeof(double))
                for i in range(n):
                    if lab[i] < 0:
                        changed += 1
                        lab[i] = lab[i] & 0x7fffffff
                    c = lab[i]
                    size[c] += 1.0
                    for v in range(d):
                        sums[c, v] += X[i, v]
                if changed == 0 or it == n_iter:
                    break
                for c in range(k):
                    if size[c] > 0:
                        for v in range(d):
                            cent[c, v] = sums[c, v] / size[c]
            total = 0.0
            for i in range(n):
                total += dist[i]
            if total < best_total:
                best_total = total
                for i in range(n):
                    best[i] = lab[i]
    return best_arr, best_total


cdef inline void _nearest(const double *x, Py_ssize_t i, const double *cent,
                          Py_ssize_t k, Py_ssize_t d, int32_t *lab, double *dist) noexcept nogil:
    cdef Py_ssize_t c, v, bc = 0
    cdef double s, t, bs = INFINITY
    for c in range(k):
        s = 0.0
        for v in range(d):
            t = x[v] - cent[c * d + v]
            s = s + t * t
        if s < bs:
            bs = s
            bc = c
    dist[i] = bs
    if lab[i] != <int32_t>bc:
        lab[i] = <int32_t>(bc | (-0x7fffffff - 1))


def components_dense(const uint8_t[:, ::1] adj):
    """Connected-component label of every vertex of a symmetric boolean adjacency matrix
    (depth-first search; labels numbered in order of each component's smallest vertex)."""
    cdef Py_ssize_t n = adj.shape[0], s, u, v, top, n_lab = 0
    labels_arr = np.full(n, -1, dtype=np.int64)
    stack_arr = np.empty(max(n, 1), dtype=np.int64)
    cdef int64_t[::1] labels = labels_arr
    cdef int64_t[::1] stack = stack_arr
    if adj.shape[1] != n:
        raise ValueError("adjacency matrix must be square")
    with nogil:
        for s in range(n):
            if labels[s] >= 0:
                continue
            labels[s] = n_lab
            stack[0] = s
            top = 1
            while top > 0:
                top -= 1
                u = stack[top]
                for v in range(n):
                    if labels[v] < 0 and (adj[u, v] or adj[v, u]):
                        labels[v] = n_lab
                        stack[top] = v
                        top += 1
            n_lab += 1
    return labels_arr
