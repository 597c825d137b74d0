"""Routing bit sets to per-node row lists (see spnc.learn.routing)."""
import numpy as np
from libc.stdint cimport int32_t, int64_t, uint64_t


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
