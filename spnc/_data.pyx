"""The data kernels every query runs first: the check of a batch for inf and out-of-range
categories (one vectorised pass, C in _check.h; the bad cell is located only when there is
one) and the transposition of a chunk of rows into one row per variable, and back."""
import numpy as np
from cython.parallel cimport prange
from libc.math cimport INFINITY, fabs
from libc.stdint cimport int32_t, int64_t


cdef extern from "_check.h" nogil:
    int spnc_any_bad(const double *X, int64_t n, int64_t d, int64_t rs, int64_t cs, const double *card)
    int spnc_bad(double x, double k)


def first_bad_value(const double[:, :] X, const int32_t[::1] card):
    """First (row, col, code) where X is inf (code 1) or, for a discrete variable, not an
    integer in [0, card) (code 2); (-1, -1, 0) if none. NaN (missing) is allowed. One
    vectorised pass; the cell is located only when there is a bad one."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], r, c
    cdef double[::1] k = np.asarray(card, dtype=np.float64)
    cdef int bad
    if n == 0 or d == 0:
        return -1, -1, 0
    if X.strides[0] % sizeof(double) or X.strides[1] % sizeof(double):
        bad = 1                                     # unaligned view: the exact scan only
    else:
        with nogil:
            bad = spnc_any_bad(&X[0, 0], n, d, X.strides[0] // sizeof(double), X.strides[1] // sizeof(double),
                               &k[0])
    if bad:
        for r in range(n):
            for c in range(d):
                if spnc_bad(X[r, c], k[c]):
                    return r, c, 1 if fabs(X[r, c]) == INFINITY else 2
    return -1, -1, 0


cdef void _tile_copy(const double *src, Py_ssize_t sr, Py_ssize_t sc, double *dst, Py_ssize_t dr,
                     Py_ssize_t dc, Py_ssize_t n, Py_ssize_t d, int n_threads) noexcept nogil:
    """``dst[i dr + j dc] = src[i sr + j sc]`` for i < n, j < d (strides in elements) in 8 x 8
    tiles, tiles of rows shared among ``n_threads``: each cache line on either side is
    touched once per tile, where an element-wise transposed copy reads each line of the
    strided side eight times, far apart."""
    cdef Py_ssize_t t, i, j, ii, jj, ie, je
    for t in prange((n + 7) // 8, num_threads=max(n_threads, 1), schedule="static"):
        i = 8 * t
        ie = min(i + 8, n)
        for j in range(0, d, 8):
            je = min(j + 8, d)
            for jj in range(j, je):
                for ii in range(i, ie):
                    dst[ii * dr + jj * dc] = src[ii * sr + jj * sc]


def transpose_into(const double[:, :] X, Py_ssize_t r0, Py_ssize_t r1, double[:, ::1] XT, int n_threads=1):
    """``XT[:, :r1 - r0] = X[r0:r1].T`` in tiles (on small models an element-wise strided copy
    costs as much as the sweep itself). Other columns of ``XT`` are left alone."""
    cdef Py_ssize_t n = r1 - r0, d = X.shape[1], es = sizeof(double)
    if X.shape[0] < r1 or XT.shape[0] != d or XT.shape[1] < n or r0 < 0 or n < 0:
        raise ValueError("transpose_into: shapes do not match")
    if n == 0 or d == 0:
        return
    if X.strides[0] % es or X.strides[1] % es:       # a view of packed records
        np.asarray(XT)[:, :n] = np.asarray(X)[r0:r1].T
        return
    _tile_copy(&X[r0, 0], X.strides[0] // es, X.strides[1] // es, &XT[0, 0], 1, XT.shape[1], n, d, n_threads)


def transpose_back(const double[:, ::1] XT, double[:, ::1] X, Py_ssize_t r0, Py_ssize_t r1, int n_threads=1):
    """``X[r0:r1] = XT[:, :r1 - r0].T``, the inverse of :func:`transpose_into` (a completed
    chunk written back to the caller's row layout)."""
    cdef Py_ssize_t n = r1 - r0, d = XT.shape[0]
    if X.shape[0] < r1 or X.shape[1] != d or XT.shape[1] < n or r0 < 0 or n < 0:
        raise ValueError("transpose_back: shapes do not match")
    if n == 0 or d == 0:
        return
    _tile_copy(&XT[0, 0], 1, XT.shape[1], &X[r0, 0], d, 1, n, d, n_threads)
