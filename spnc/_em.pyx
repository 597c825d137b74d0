# cython: language_level=3
"""Hard-EM E-step kernel: max-product forward, then each row follows its arg-max induced
tree; counts of the edges and nodes it uses are accumulated per thread (no atomics)."""
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memset

cdef extern from "_kernels.h" nogil:
    int SPNC_B
    void spnc_max_block(double *out, const double *W, const int32_t *ch, const double *logw, int64_t k)
    void spnc_prod_block(double *out, const double *W, const int32_t *ch, int64_t k)


def block_size() -> int:
    return SPNC_B


def hard_backward(const uint8_t[::1] kind, const int64_t[::1] child_ptr, const int32_t[::1] child,
                  const double[::1] logw, const int64_t[::1] leaf_slot, const double[:, ::1] L,
                  const int64_t[::1] roots, const double[::1] root_logw, const double[::1] row_w,
                  double[::1] val, double[:, ::1] edge_acc, double[:, ::1] node_acc,
                  double[:, ::1] leaf_resp, int n_threads, double[:, ::1] ws, uint8_t[:, ::1] acts):
    """For each column r of the leaf matrix ``L`` (max-product leaf values): ``val[r]`` the
    max-product value of the best root (roots weighted by ``root_logw``); the induced tree
    of the first maximum at every sum is marked and ``row_w[r]`` added to ``edge_acc[t, e]``
    and ``node_acc[t, n]`` for its edges and nodes; ``leaf_resp[slot, r]`` is 1 on its
    leaves, else 0. ``ws`` is (threads, N * B) and ``acts`` (threads, N * B)."""
    cdef Py_ssize_t N = kind.shape[0], m = L.shape[1], R = roots.shape[0]
    cdef Py_ssize_t n_blocks = m // SPNC_B, b, i, j, t, col0, e
    cdef int64_t a, k, pick
    cdef double best, v, s
    cdef double *W
    cdef uint8_t *A
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="static"):
        t = threadid()
        W = &ws[t, 0]
        A = &acts[t, 0]
        col0 = b * SPNC_B
        for i in range(N):
            a = child_ptr[i]
            if kind[i] >= 2:
                for j in range(SPNC_B):
                    W[i * SPNC_B + j] = L[leaf_slot[i], col0 + j]
            elif kind[i] == 1:
                spnc_prod_block(W + i * SPNC_B, W, &child[a], child_ptr[i + 1] - a)
            else:
                spnc_max_block(W + i * SPNC_B, W, &child[a], &logw[a], child_ptr[i + 1] - a)
        memset(A, 0, N * SPNC_B)
        for j in range(SPNC_B):
            best = -INFINITY
            pick = 0
            for i in range(R):
                v = W[roots[i] * SPNC_B + j] + root_logw[i]
                if v > best:
                    best = v
                    pick = i
            val[col0 + j] = best
            if best > -INFINITY:
                A[roots[pick] * SPNC_B + j] = 1
        for i in range(N - 1, -1, -1):
            a = child_ptr[i]
            k = child_ptr[i + 1] - a
            s = 0.0
            if kind[i] == 0:
                for j in range(SPNC_B):
                    if A[i * SPNC_B + j]:
                        best = -INFINITY
                        pick = 0
                        for e in range(k):
                            v = W[child[a + e] * SPNC_B + j] + logw[a + e]
                            if v > best:
                                best = v
                                pick = e
                        A[child[a + pick] * SPNC_B + j] = 1
                        edge_acc[t, a + pick] += row_w[col0 + j]
                        s = s + row_w[col0 + j]
            elif kind[i] == 1:
                for j in range(SPNC_B):
                    if A[i * SPNC_B + j]:
                        s = s + row_w[col0 + j]
                        for e in range(k):
                            A[child[a + e] * SPNC_B + j] = 1
            else:
                for j in range(SPNC_B):
                    leaf_resp[leaf_slot[i], col0 + j] = A[i * SPNC_B + j]
                    if A[i * SPNC_B + j]:
                        s = s + row_w[col0 + j]
            node_acc[t, i] += s


def discrete_counts(const double[:, ::1] R, const int64_t[::1] slot, const int32_t[::1] var,
                    const double[:, ::1] XT, const double[::1] row_w, const int64_t[::1] offset,
                    double[::1] counts, int n_threads):
    """Weighted state counts of discrete leaves: ``counts[offset[l] + x] += R[slot[l], r] *
    row_w[r]`` for every column r where ``x = XT[var[l], r]`` is observed. Parallel over
    leaves (each leaf owns its counts)."""
    cdef Py_ssize_t n_l = slot.shape[0], m = XT.shape[1], l, j
    cdef double x
    for l in prange(n_l, nogil=True, num_threads=n_threads, schedule="static"):
        for j in range(m):
            x = XT[var[l], j]
            if x == x:
                counts[offset[l] + <int64_t> x] += R[slot[l], j] * row_w[j]


def gauss_moments(const double[:, ::1] R, const int64_t[::1] slot, const int32_t[::1] var,
                  const double[:, ::1] XT, const double[::1] row_w, const double[::1] center,
                  double[::1] w, double[::1] sd, double[::1] sdd, int n_threads):
    """Weighted moments of univariate leaves around ``center``: for observed ``x`` add
    ``r``, ``r * d`` and ``r * d * d`` with ``r = R[slot[l], j] * row_w[j]``, ``d = x - center[l]``."""
    cdef Py_ssize_t n_l = slot.shape[0], m = XT.shape[1], l, j
    cdef double x, r, d, a0, a1, a2
    for l in prange(n_l, nogil=True, num_threads=n_threads, schedule="static"):
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        for j in range(m):
            x = XT[var[l], j]
            if x == x:
                r = R[slot[l], j] * row_w[j]
                d = x - center[l]
                a0 = a0 + r
                a1 = a1 + r * d
                a2 = a2 + r * d * d
        w[l] += a0
        sd[l] += a1
        sdd[l] += a2


def binary_counts(const double[:, ::1] R, const int64_t[::1] slot, const int32_t[::1] var,
                  const double[:, ::1] XT, const double[::1] row_w, double[::1] counts, int n_threads):
    """Bernoulli leaves: ``counts[2 l]`` and ``counts[2 l + 1]`` gain the weighted
    responsibility of the rows with ``x = 0`` and ``x = 1`` (missing rows are skipped).
    Branch-free inner loop with per-leaf accumulators."""
    cdef Py_ssize_t n_l = slot.shape[0], m = XT.shape[1], l, j
    cdef double x, r, tot, ones, o
    cdef const double *xr
    cdef const double *rr
    for l in prange(n_l, nogil=True, num_threads=n_threads, schedule="static"):
        xr = &XT[var[l], 0]
        rr = &R[slot[l], 0]
        tot = 0.0
        ones = 0.0
        for j in range(m):
            x = xr[j]
            o = 1.0 if x == x else 0.0
            x = x if x == x else 0.0
            r = rr[j] * row_w[j] * o
            tot = tot + r
            ones = ones + r * x
        counts[2 * l] += tot - ones
        counts[2 * l + 1] += ones
