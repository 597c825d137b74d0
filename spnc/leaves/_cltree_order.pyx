"""Breadth-first orders of the Chow-Liu leaf table's trees (all leaves at once), which
also find malformed parent arrays (:mod:`spnc.leaves._cltree_arrays`)."""
import numpy as np

from libc.stdint cimport int32_t, int64_t


cdef Py_ssize_t _bfs(const int32_t[::1] fpar, const int64_t[::1] var_ptr, int32_t[::1] out,
                     int64_t[::1] kid_ptr, int32_t[::1] kids, int64_t[::1] fill) noexcept nogil:
    cdef Py_ssize_t T = fpar.shape[0], L = var_ptr.shape[0] - 1, i, f, p, head, tail, q
    for f in range(T):
        if fpar[f] >= T:
            return 0
        if fpar[f] >= 0:
            kid_ptr[fpar[f] + 1] += 1
    for f in range(T):
        kid_ptr[f + 1] += kid_ptr[f]
        fill[f] = kid_ptr[f]
    for f in range(T):                   # children listed in increasing flat index
        p = fpar[f]
        if p >= 0:
            kids[fill[p]] = <int32_t>f
            fill[p] += 1
    for i in range(L):
        head = tail = var_ptr[i]
        for f in range(var_ptr[i], var_ptr[i + 1]):
            if fpar[f] < 0:
                out[tail] = <int32_t>f
                tail += 1
        while head < tail:
            f = out[head]
            head += 1
            for q in range(kid_ptr[f], kid_ptr[f + 1]):
                if kids[q] < var_ptr[i] or kids[q] >= var_ptr[i + 1]:
                    return i                   # a child in another leaf: malformed
                out[tail] = kids[q]
                tail += 1
        if tail != var_ptr[i + 1]:
            return i
    return -1


def bfs_order(const int32_t[::1] fpar, const int64_t[::1] var_ptr, int32_t[::1] out):
    """Flat variables of every leaf parents-first: breadth-first from the leaf's roots, the
    children of a variable in scope order. Returns the first leaf some variable of which
    is never reached (its parent array has a cycle or leaves the leaf), or -1."""
    cdef Py_ssize_t T = fpar.shape[0], bad
    cdef int64_t[::1] kid_ptr = np.zeros(T + 1, dtype=np.int64)
    cdef int32_t[::1] kids = np.empty(max(T, 1), dtype=np.int32)
    cdef int64_t[::1] fill = np.empty(T + 1, dtype=np.int64)
    with nogil:
        bad = _bfs(fpar, var_ptr, out, kid_ptr, kids, fill)
    return bad
