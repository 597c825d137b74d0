# cython: language_level=3
"""The one counting module: value counts, (weighted) pairwise co-occurrences of binary and
one-hot indicator columns (popcounts, sparse rows) and edge count tables; their mutual
information, G statistics and spanning forests are in spnc/_mi.pyx. Shared by Chow-Liu
(spnc/chowliu.py), the LearnSPN splitting tests (spnc/learn/structure.py) and any learner
that needs pairwise statistics.

Everything here trusts its arguments; the Python callers check them. All loops run
without the GIL; OpenMP parallel loops cover pairs. Results do not depend on the number
of threads.
"""
import numpy as np

from cython.parallel cimport prange, parallel
from libc.math cimport isnan
from libc.stdint cimport uint8_t, int32_t, int64_t, uint64_t
from libc.stdlib cimport malloc, free


cdef extern from *:
    """
    #include <stdint.h>
    /* Popcount of (a & b) over n words; hardware popcnt when the CPU has it. */
    static uint64_t spnc_andpop_sw(const uint64_t *a, const uint64_t *b, Py_ssize_t n) {
        uint64_t s = 0; Py_ssize_t k;
        for (k = 0; k < n; k++) s += (uint64_t)__builtin_popcountll(a[k] & b[k]);
        return s;
    }
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    __attribute__((target("popcnt")))
    static uint64_t spnc_andpop_hw(const uint64_t *a, const uint64_t *b, Py_ssize_t n) {
        uint64_t s0 = 0, s1 = 0; Py_ssize_t k = 0;
        for (; k + 1 < n; k += 2) {
            s0 += (uint64_t)__builtin_popcountll(a[k] & b[k]);
            s1 += (uint64_t)__builtin_popcountll(a[k + 1] & b[k + 1]);
        }
        if (k < n) s0 += (uint64_t)__builtin_popcountll(a[k] & b[k]);
        return s0 + s1;
    }
    static int spnc_has_popcnt(void) { __builtin_cpu_init(); return __builtin_cpu_supports("popcnt"); }
    #else
    #define spnc_andpop_hw spnc_andpop_sw
    static int spnc_has_popcnt(void) { return 0; }
    #endif
    /* One data row into the 8-row byte planes (bit m) and the running column maxima;
       restrict lets the compiler vectorise the byte loop. */
    static void spnc_pack_row(const uint8_t *restrict row, uint8_t *restrict pb,
                              uint8_t *restrict cm, uint8_t m, Py_ssize_t d) {
        Py_ssize_t c;
        for (c = 0; c < d; c++) {
            uint8_t v = row[c];
            pb[c] |= (uint8_t)(0u - (v & 1u)) & m;
            cm[c] = v > cm[c] ? v : cm[c];
        }
    }
    """
    uint64_t spnc_andpop_sw(const uint64_t *a, const uint64_t *b, Py_ssize_t n) noexcept nogil
    uint64_t spnc_andpop_hw(const uint64_t *a, const uint64_t *b, Py_ssize_t n) noexcept nogil
    int spnc_has_popcnt() noexcept nogil
    void spnc_pack_row(const uint8_t *row, uint8_t *pb, uint8_t *cm, uint8_t m, Py_ssize_t d) noexcept nogil

cdef bint _HW_POPCNT = spnc_has_popcnt() != 0



ctypedef fused code_t:
    uint8_t
    int32_t

# ---------------------------------------------------------------------------------------
# validation scans


cdef Py_ssize_t _first_bad_f64(const double[:, ::1] X, const int64_t[::1] card) noexcept nogil:
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], r, c
    cdef double v
    for r in range(n):
        for c in range(d):
            v = X[r, c]
            if not (v >= 0.0 and v < <double>card[c] and v == <double>(<int64_t>v)):
                return r * d + c
    return -1


cdef Py_ssize_t _first_bad_u8(const uint8_t[:, ::1] X, const int64_t[::1] card) noexcept nogil:
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], r, c
    for r in range(n):
        for c in range(d):
            if X[r, c] >= card[c]:
                return r * d + c
    return -1


def first_bad_code(const double[:, ::1] X, const int64_t[::1] card) -> int:
    """Flat index of the first entry of ``X`` that is not an integer in ``0..card[c]-1``
    (NaN included), or -1."""
    cdef Py_ssize_t k
    with nogil:
        k = _first_bad_f64(X, card)
    return k


def first_bad_code_u8(const uint8_t[:, ::1] X, const int64_t[::1] card) -> int:
    """As :func:`first_bad_code` for uint8 input."""
    cdef Py_ssize_t k
    with nogil:
        k = _first_bad_u8(X, card)
    return k


# ---------------------------------------------------------------------------------------
# counting and mutual information


def pack_bits(const uint8_t[:, ::1] X):
    """Column bit vectors of a 0/1 matrix plus each column's maximum.

    Returns ``(bits, colmax)``: ``bits[c, w]`` holds bit 0 of rows 64w..64w+63 of column c
    (so only meaningful when ``colmax <= 1``). Rows are first gathered 8 at a time into
    one byte per column (a byte-wide loop over columns, which vectorises), then the bytes
    are assembled into 64-bit words."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], nb = (n + 7) // 8, nw = (n + 63) // 64
    cdef Py_ssize_t r, c, b, k
    P_arr = np.zeros((max(nb, 1), d), dtype=np.uint8)
    bitsT_arr = np.zeros((max(nw, 1), d), dtype=np.uint64)
    colmax_arr = np.zeros(d, dtype=np.uint8)
    cdef uint8_t[:, ::1] P = P_arr
    cdef uint64_t[:, ::1] bitsT = bitsT_arr
    cdef uint64_t *wp
    cdef uint8_t[::1] colmax = colmax_arr
    cdef uint8_t *cm = &colmax[0] if d else NULL
    cdef uint8_t *pb
    cdef const uint8_t *row
    cdef uint8_t v, m
    with nogil:
        for r in range(n):
            row = &X[r, 0]
            pb = &P[r >> 3, 0]
            m = <uint8_t>(1 << (r & 7))
            spnc_pack_row(row, pb, cm, m, d)
        for b in range(nb):
            pb = &P[b, 0]
            wp = &bitsT[b >> 3, 0]
            k = 8 * (b & 7)
            for c in range(d):
                wp[c] |= (<uint64_t>pb[c]) << k
    return np.ascontiguousarray(bitsT_arr.T), colmax_arr


def cooc_popcount(const uint64_t[:, ::1] bits, int n_threads):
    """Co-occurrence counts ``C[i, j] = #rows with x_i = x_j = 1`` (j >= i; lower triangle
    left zero) from packed columns."""
    cdef Py_ssize_t d = bits.shape[0], nw = bits.shape[1], i, j
    C_arr = np.zeros((d, d), dtype=np.float64)
    cdef double[:, ::1] C = C_arr
    cdef bint hw = _HW_POPCNT
    if d == 0:
        return C_arr
    for i in prange(d, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
        for j in range(i, d):
            if hw:
                C[i, j] = <double>spnc_andpop_hw(&bits[i, 0], &bits[j, 0], nw)
            else:
                C[i, j] = <double>spnc_andpop_sw(&bits[i, 0], &bits[j, 0], nw)
    return C_arr


cdef enum:
    _CHUNK = 128  # blocks of 8 rows per table chunk (128 x 256 doubles = 256 KiB)


def cooc_weighted(const uint8_t[:, ::1] X, const double[::1] w, int n_threads):
    """Weighted co-occurrence ``C[i, j] = sum_r w_r x_ri x_rj`` (j >= i) of a 0/1 matrix.

    Rows are taken 8 at a time: a 256-entry table holds the weight sum of every subset of
    the 8 rows, so each pair costs one table look-up per 8 rows (indexed by the AND of the
    two columns' bytes)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], nb = (n + 7) // 8
    cdef Py_ssize_t i, j, b, c0, c1, k, v, r
    C_arr = np.zeros((d, d), dtype=np.float64)
    P_arr = np.zeros((max(nb, 1), d), dtype=np.uint8)
    T_arr = np.zeros((_CHUNK, 256), dtype=np.float64)
    wp_arr = np.zeros(max(nb, 1) * 8, dtype=np.float64)
    wp_arr[:n] = w
    cdef double[:, ::1] C = C_arr
    cdef uint8_t[:, ::1] P = P_arr
    cdef double[:, ::1] T = T_arr
    cdef double[::1] wp = wp_arr
    cdef uint8_t a
    cdef double *t
    cdef double *crow
    cdef const uint8_t *p
    if d == 0 or n == 0:
        return C_arr
    with nogil:
        for r in range(n):
            for i in range(d):
                P[r >> 3, i] |= (X[r, i] & 1) << (r & 7)
        c0 = 0
        while c0 < nb:
            c1 = min(nb, c0 + _CHUNK)
            for b in range(c0, c1):
                t = &T[b - c0, 0]
                t[0] = 0.0
                for k in range(8):
                    for v in range(1 << k):
                        t[(1 << k) + v] = t[v] + wp[8 * b + k]
            for i in prange(d, num_threads=n_threads, schedule="dynamic", chunksize=1):
                crow = &C[i, 0]
                for b in range(c0, c1):
                    a = P[b, i]
                    if a == 0:
                        continue
                    t = &T[b - c0, 0]
                    p = &P[b, 0]
                    for j in range(i, d):
                        crow[j] += t[a & p[j]]
            c0 = c1
    return C_arr


def column_counts(const uint8_t[:, ::1] X):
    """Number of nonzero entries per column (one vectorised row-major pass)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], r, c
    cnt_arr = np.zeros(d, dtype=np.int64)
    cdef int64_t[::1] cnt = cnt_arr
    cdef int64_t *cp = &cnt[0] if d else NULL
    cdef const uint8_t *row
    with nogil:
        for r in range(n):
            row = &X[r, 0]
            for c in range(d):
                cp[c] += row[c] != 0
    return cnt_arr


def row_lengths(const uint8_t[:, ::1] X, const uint8_t[::1] flip):
    """Row pointer of the per-row lists of columns c with ``x_rc XOR flip[c] == 1`` (0/1
    matrix) and the sum of squared row lengths: ``(indptr int64[n+1], sq)``."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], r, c
    ptr_arr = np.zeros(n + 1, dtype=np.int64)
    cdef int64_t[::1] ptr = ptr_arr
    cdef int64_t sq = 0
    cdef int32_t m
    cdef const uint8_t *row
    cdef const uint8_t *fl = &flip[0] if d else NULL
    with nogil:
        for r in range(n):
            row = &X[r, 0]
            m = 0
            for c in range(d):  # vectorises
                m += (row[c] ^ fl[c]) & 1
            ptr[r + 1] = ptr[r] + m
            sq += <int64_t>m * m
    return ptr_arr, int(sq)


def active_lists(const uint8_t[:, ::1] X, const uint8_t[::1] flip, const int64_t[::1] ptr):
    """Column indices of the lists delimited by ``ptr`` (from :func:`row_lengths`)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], r, c, k
    idx_arr = np.empty(ptr[n] + 1, dtype=np.int32)  # +1: the branch-free writer overshoots
    cdef int32_t[::1] idx = idx_arr
    cdef int32_t *ip = &idx[0]
    cdef const uint8_t *row
    cdef const uint8_t *fl = &flip[0] if d else NULL
    with nogil:
        k = 0
        for r in range(n):
            row = &X[r, 0]
            for c in range(d):
                ip[k] = <int32_t>c
                k += (row[c] ^ fl[c]) & 1
    return idx_arr[:ptr[n]]


def cooc_sparse(const int64_t[::1] ptr, const int32_t[::1] idx, const double[::1] w,
                Py_ssize_t d, int n_threads):
    """Weighted co-occurrence (upper triangle + diagonal) from per-row active lists
    (ascending column indices).

    The rows i of ``C`` are cut into stripes of about equal triangle area, handed out
    dynamically; a stripe finds its part of each list by binary search and adds the row's
    weight to ``C[i, j]`` for every later j in the list. Every entry is summed in data-row
    order, so the result does not depend on the thread count."""
    cdef Py_ssize_t n = ptr.shape[0] - 1, r, k, l, i, s, S, lo, hi, mid, e
    cdef int nt = max(1, n_threads)
    C_arr = np.zeros((d, d), dtype=np.float64)
    cdef double[:, ::1] C = C_arr
    cdef double wr
    cdef double *crow
    if d == 0 or n == 0:
        return C_arr
    S = 1 if nt == 1 else min(d, 2 * nt)
    # stripe s covers rows bound[s] .. bound[s+1]-1 of C; equal areas of the triangle
    bound_arr = np.unique(np.round(d * (1.0 - np.sqrt(1.0 - np.arange(S + 1) / S))).astype(np.int64))
    S = len(bound_arr) - 1
    cdef int64_t[::1] bound = bound_arr
    for s in prange(S, nogil=True, num_threads=nt, schedule="dynamic", chunksize=1):
        for r in range(n):
            # first list position with idx >= bound[s]
            lo = ptr[r]
            hi = ptr[r + 1]
            while lo < hi:
                mid = (lo + hi) // 2
                if idx[mid] < bound[s]:
                    lo = mid + 1
                else:
                    hi = mid
            wr = w[r]
            e = ptr[r + 1]
            k = lo
            while k < e and idx[k] < bound[s + 1]:
                i = idx[k]
                crow = &C[i, 0]
                for l in range(k, e):
                    crow[idx[l]] += wr
                k = k + 1
    return C_arr


def pack_onehot(const code_t[:, ::1] X, const int64_t[::1] off, Py_ssize_t n_ind):
    """Bit vectors of the one-hot indicators: column ``off[c] + x_rc`` of ``bits`` has row
    r set (``bits[k, w]`` holds rows 64w..64w+63 of indicator k)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], nw = (n + 63) // 64, r, c
    bits_arr = np.zeros((n_ind, max(nw, 1)), dtype=np.uint64)
    cdef uint64_t[:, ::1] bits = bits_arr
    cdef uint64_t bit
    with nogil:
        for r in range(n):
            bit = (<uint64_t>1) << (r & 63)
            for c in range(d):
                bits[off[c] + X[r, c], r >> 6] |= bit
    return bits_arr


def edge_counts(const code_t[:, ::1] XT, const int64_t[::1] card, const double[::1] w,
                const int32_t[::1] parent, const int64_t[::1] off, int n_threads):
    """Weighted count tables: variable j gets ``card[parent[j]] x card[j]`` entries
    (``1 x card[j]`` for a root) at ``off[j]``, row-major."""
    cdef Py_ssize_t d = XT.shape[0], n = XT.shape[1], j, r, p, kj
    out_arr = np.zeros(off[d] if d else 0, dtype=np.float64)
    cdef double[::1] out = out_arr
    cdef double *tab
    for j in prange(d, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
        tab = &out[off[j]]
        p = parent[j]
        kj = card[j]
        if p < 0:
            for r in range(n):
                tab[XT[j, r]] += w[r]
        else:
            for r in range(n):
                tab[XT[p, r] * kj + XT[j, r]] += w[r]
    return out_arr


def value_counts(const code_t[:, ::1] X, const int64_t[::1] off):
    """``counts[off[v] + x]`` = number of rows with ``X[:, v] == x``."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], r, v
    counts_arr = np.zeros(off[d], dtype=np.float64)
    cdef double[::1] counts = counts_arr
    with nogil:
        for r in range(n):
            for v in range(d):
                counts[off[v] + X[r, v]] += 1.0
    return counts_arr
