"""Pairwise mean-field Manhattan distances of one large candidate group (see
spnc/learn/_pairs.h and spnc.learn._similarity)."""
import numpy as np
from libc.stdint cimport int64_t


cdef extern from "_pairs.h" nogil:
    void spnc_l1_pairs(const double *QT, int64_t g, int64_t gp, int64_t K, const int64_t *label,
                       double nv, double *out)


def l1_pairs(Q, const int64_t[::1] label, double nv, double[::1] out):
    """``out`` (length g (g - 1) / 2, the order of ``np.triu_indices(g, 1)``) = the
    Manhattan distance of every pair of rows of ``Q`` (g x K) divided by ``nv``, or inf
    where the rows' labels differ."""
    cdef Py_ssize_t g = Q.shape[0], K = Q.shape[1], gp = (g + 7) // 8 * 8
    if label.shape[0] != g or out.shape[0] != g * (g - 1) // 2 or nv <= 0:
        raise ValueError("l1_pairs: shapes do not match")
    cdef double[:, ::1] QT = np.zeros((max(K, 1), gp))
    if g < 2:
        return
    np.asarray(QT)[:K, :g] = np.asarray(Q).T
    with nogil:
        spnc_l1_pairs(&QT[0, 0], g, gp, K, &label[0], nv, &out[0])
