"""Routing bit sets to per-node row lists (see spnc.learn.routing), and kept leaf values
copied into a sweep's leaf matrix (spnc.learn._leafcache)."""
import numpy as np
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memcpy, memset


cdef extern from *:
    """
    static inline int spnc_popcount64(unsigned long long w) { return __builtin_popcountll(w); }
    static inline int spnc_ctz64(unsigned long long w) { return __builtin_ctzll(w); }
    """
    int spnc_popcount64(unsigned long long w) nogil
    int spnc_ctz64(unsigned long long w) nogil


def bits_to_csc(const uint64_t[:, ::1] bits, Py_ssize_t n_rows):
    """``(indptr, indices)`` of the CSC matrix whose column n lists, in increasing order,
    the rows whose bit is set in ``bits[n]`` (row ``64 w + j`` is bit j of word w); rows
    ``>= n_rows`` are ignored."""
    cdef Py_ssize_t N = bits.shape[0], nw = bits.shape[1], n, w, k
    cdef Py_ssize_t full = min(nw, n_rows // 64)
    cdef uint64_t x, tail = 0
    if n_rows % 64 and full < nw:
        tail = (<uint64_t> 1 << (n_rows % 64)) - 1
    indptr_a = np.zeros(N + 1, dtype=np.int64)
    cdef int64_t[::1] indptr = indptr_a
    with nogil:
        for n in range(N):
            k = 0
            for w in range(full):
                k += spnc_popcount64(bits[n, w])
            if tail:
                k += spnc_popcount64(bits[n, full] & tail)
            indptr[n + 1] = indptr[n] + k
    indices_a = np.empty(indptr[N], dtype=np.int32)
    cdef int32_t[::1] idx = indices_a
    with nogil:
        for n in range(N):
            k = indptr[n]
            for w in range(full + (1 if tail else 0)):
                x = bits[n, w]
                if w == full:
                    x = x & tail
                while x:
                    idx[k] = <int32_t> (64 * w + spnc_ctz64(x))
                    k += 1
                    x = x & (x - 1)
    return indptr_a, indices_a


def copy_rows(const double[:, ::1] V, const int64_t[::1] rows, Py_ssize_t c0, Py_ssize_t c1,
              double[:, ::1] L, const int64_t[::1] slots):
    """``L[slots[i], :c1 - c0] = V[rows[i], c0:c1]`` and the rest of each such row of ``L``
    zero, for every i: one copy per row, no temporary."""
    cdef Py_ssize_t i, m = c1 - c0, w = L.shape[1]
    if rows.shape[0] != slots.shape[0] or c0 < 0 or c1 > V.shape[1] or m < 0 or m > w:
        raise ValueError("copy_rows: shapes do not match")
    for i in range(rows.shape[0]):
        if not (0 <= rows[i] < V.shape[0] and 0 <= slots[i] < L.shape[0]):
            raise ValueError("copy_rows: row or slot out of range")
    with nogil:
        for i in range(rows.shape[0]):
            if m:
                memcpy(&L[slots[i], 0], &V[rows[i], c0], m * sizeof(double))
            if w > m:
                memset(&L[slots[i], m], 0, (w - m) * sizeof(double))
