"""The data check every query runs first: one vectorised pass over a batch for inf and
out-of-range categories (C in _check.h), the bad cell located only when there is one."""
import numpy as np
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
