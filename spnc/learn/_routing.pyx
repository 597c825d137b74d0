"""Routing bit sets to per-node row lists (see spnc.learn.routing), and kept leaf values
copied into a sweep's leaf matrix (spnc.learn._leafcache)."""
import numpy as np
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
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


def state_masks(const double[:, ::1] X, const int64_t[::1] var, const int64_t[::1] value):
    """``(P, ceil(n / 64))`` bit rows: bit r of row j set when ``X[r, var[j]] == value[j]``
    (complete rows of a checked ``X``). One pass over the rows, reading only these
    variables."""
    cdef Py_ssize_t n = X.shape[0], P = var.shape[0], nw = (n + 63) // 64, j, u, nv
    for j in range(P):
        if not 0 <= var[j] < X.shape[1] or value[j] < 0:
            raise ValueError("state_masks: variable or value out of range")
    out_a = np.zeros((P, nw), dtype=np.uint64)
    if P == 0 or n == 0:
        return out_a
    # the pairs grouped by variable: distinct variables u, their pairs in order
    uvar_a, inv_a = np.unique(np.asarray(var), return_inverse=True)
    order_a = np.argsort(inv_a, kind="stable").astype(np.int64)
    uptr_a = np.zeros(len(uvar_a) + 1, dtype=np.int64)
    np.cumsum(np.bincount(inv_a, minlength=len(uvar_a)), out=uptr_a[1:])
    cdef const int64_t[::1] uvar = uvar_a.astype(np.int64), order = order_a, uptr = uptr_a
    cdef uint64_t[:, ::1] out = out_a
    cdef uint64_t word
    cdef double k
    cdef Py_ssize_t w, b, m, r0
    nv = uvar.shape[0]
    with nogil:
        for w in range(nw):             # 64 rows at a time: their lines stay in cache
            r0 = 64 * w
            m = min(64, n - r0)
            for u in range(nv):
                for j in range(uptr[u], uptr[u + 1]):
                    k = <double> value[order[j]]
                    word = 0
                    for b in range(m):  # no branch: the values are as random as the data
                        word |= (<uint64_t> (X[r0 + b, uvar[u]] == k)) << b
                    out[order[j], w] = word
    return out_a


def column_ranges(const double[:, ::1] X, const int64_t[::1] cols):
    """``(lo, hi)``, each of length ``X.shape[1]``: the least and greatest value of each
    column in ``cols`` (complete rows; other entries 0). One pass over the rows, reading
    only these columns."""
    cdef Py_ssize_t n = X.shape[0], m = cols.shape[0], r, j, r0, r1, c
    cdef double x, a, b
    for j in range(m):
        if not 0 <= cols[j] < X.shape[1]:
            raise ValueError("column_ranges: column out of range")
    lo_a, hi_a = np.zeros(X.shape[1]), np.zeros(X.shape[1])
    cdef double[::1] lo = lo_a, hi = hi_a
    if n == 0:
        return lo_a, hi_a
    with nogil:
        for j in range(m):
            lo[cols[j]] = X[0, cols[j]]
            hi[cols[j]] = X[0, cols[j]]
        for r0 in range(0, n, 256):     # a block of rows stays in cache across the columns
            r1 = min(n, r0 + 256)
            for j in range(m):
                c = cols[j]
                a, b = lo[c], hi[c]
                for r in range(r0, r1):
                    x = X[r, c]
                    a = x if x < a else a
                    b = x if x > b else b
                lo[c], hi[c] = a, b
    return lo_a, hi_a


def observed_route(const uint8_t[::1] kind, const int64_t[::1] ptr, const int32_t[::1] child,
                   const uint8_t[::1] dead, const int64_t[::1] zptr, const int64_t[::1] zsrc,
                   const uint64_t[:, ::1] masks, const int64_t[::1] roots, Py_ssize_t n_rows,
                   uint64_t[:, ::1] bits, double[::1] edge_counts):
    """Hard routing without values, for models whose every sum of two or more children is
    an observed sum (spnc.learn.routing): which rows give each node probability zero
    (``zero``, bottom-up: a leaf's rows are the OR of its ``masks`` rows ``zsrc[zptr[n]:
    zptr[n + 1]]``, a product ORs its children's, a sum ANDs those of its live edges),
    then top-down: a product and a one-child sum pass their rows on; a sum sends a row to
    its first child of nonzero value (an observed sum has at most one) or, when all are
    zero, to its first child, as the max-product sweep does. ``bits[n]`` receives node
    n's rows, ``edge_counts[e]`` adds the rows sent along edge e."""
    cdef Py_ssize_t N = kind.shape[0], nw = (n_rows + 63) // 64, n, e, w, i, a, b
    cdef uint64_t full = ~(<uint64_t> 0), tail, x, rem, take, z
    if (ptr.shape[0] != N + 1 or dead.shape[0] != child.shape[0] or zptr.shape[0] != N + 1
            or bits.shape[0] != N or bits.shape[1] < nw or edge_counts.shape[0] < child.shape[0]
            or (zsrc.shape[0] and masks.shape[1] < nw)):
        raise ValueError("observed_route: shapes do not match")
    for e in range(child.shape[0]):
        if not 0 <= child[e] < N:
            raise ValueError("observed_route: child out of range")
    for e in range(zsrc.shape[0]):
        if not 0 <= zsrc[e] < masks.shape[0]:
            raise ValueError("observed_route: mask row out of range")
    for i in range(roots.shape[0]):
        if not 0 <= roots[i] < N:
            raise ValueError("observed_route: root out of range")
    zero_a = np.zeros((N, max(nw, 1)), dtype=np.uint64)
    cdef uint64_t[:, ::1] zero = zero_a
    tail = full if n_rows % 64 == 0 else ((<uint64_t> 1) << (n_rows % 64)) - 1
    if nw == 0:
        return
    with nogil:
        for n in range(N):
            a, b = ptr[n], ptr[n + 1]
            if kind[n] >= 2:
                for i in range(zptr[n], zptr[n + 1]):
                    for w in range(nw):
                        zero[n, w] |= masks[zsrc[i], w]
            elif kind[n] == 1:
                for e in range(a, b):
                    for w in range(nw):
                        zero[n, w] |= zero[child[e], w]
            else:
                for w in range(nw):
                    zero[n, w] = full
                for e in range(a, b):
                    if not dead[e]:
                        for w in range(nw):
                            zero[n, w] &= zero[child[e], w]
        for i in range(roots.shape[0]):
            for w in range(nw - 1):
                bits[roots[i], w] = full
            bits[roots[i], nw - 1] = tail
        for n in range(N - 1, -1, -1):
            a, b = ptr[n], ptr[n + 1]
            if kind[n] >= 2 or a == b:
                continue
            if kind[n] == 1 or b - a == 1:
                for e in range(a, b):
                    for w in range(nw):
                        bits[child[e], w] |= bits[n, w]
                if kind[n] == 0:
                    for w in range(nw):
                        edge_counts[a] += spnc_popcount64(bits[n, w])
                continue
            for w in range(nw):
                rem = bits[n, w]
                if not rem:
                    continue
                for e in range(a, b):
                    z = full if dead[e] else zero[child[e], w]
                    take = rem & ~z
                    if take:
                        bits[child[e], w] |= take
                        edge_counts[e] += spnc_popcount64(take)
                        rem = rem & z
                if rem:
                    bits[child[a], w] |= rem
                    edge_counts[a] += spnc_popcount64(rem)


def sums_over_nodes(const double[:, :] VT, const int64_t[::1] a, const int64_t[::1] b,
                    const int32_t[::1] rows, const int64_t[::1] col):
    """``out[i] = VT[col[i], rows[a[i]:b[i]]].sum()`` for every i, each added in row order
    (merging's kept-member choice: members' validation values, by node, over row sets)."""
    cdef Py_ssize_t m = a.shape[0], i, k
    cdef double s
    if b.shape[0] != m or col.shape[0] != m:
        raise ValueError("sums_over_nodes: a, b and col differ in length")
    for i in range(m):
        if not (0 <= a[i] <= b[i] <= rows.shape[0] and 0 <= col[i] < VT.shape[0]):
            raise ValueError("sums_over_nodes: range or node out of bounds")
    for k in range(rows.shape[0]):
        if not 0 <= rows[k] < VT.shape[1]:
            raise ValueError("sums_over_nodes: row out of range")
    out_a = np.empty(m)
    cdef double[::1] out = out_a
    with nogil:
        for i in range(m):
            s = 0.0
            for k in range(a[i], b[i]):
                s += VT[col[i], rows[k]]
            out[i] = s
    return out_a


def union_runs(const int64_t[::1] gptr, const int64_t[::1] idx, Py_ssize_t n_rows):
    """``(lens, rows)``: for each run ``g`` of ``idx`` (``idx[gptr[g]:gptr[g + 1]]``,
    values in ``[0, n_rows)``), its distinct values in increasing order, run after run
    (``lens[g]`` of them): one bit set of the rows, read back word by word."""
    cdef Py_ssize_t G = gptr.shape[0] - 1, nw = n_rows // 64 + 1, g, e, w, k = 0, lo, hi
    cdef int64_t r
    cdef uint64_t x
    for e in range(idx.shape[0]):
        if not 0 <= idx[e] < n_rows:
            raise ValueError("union_runs: row out of range")
    lens_a = np.zeros(max(G, 0), dtype=np.int64)
    rows_a = np.empty(idx.shape[0], dtype=np.int32)
    bits_a = np.zeros(nw, dtype=np.uint64)
    cdef int64_t[::1] lens = lens_a
    cdef int32_t[::1] rows = rows_a
    cdef uint64_t[::1] bits = bits_a
    with nogil:
        for g in range(G):
            lo, hi = nw, -1
            for e in range(gptr[g], gptr[g + 1]):
                r = idx[e]
                w = r >> 6
                bits[w] |= (<uint64_t> 1) << (r & 63)
                if w < lo:
                    lo = w
                if w > hi:
                    hi = w
            lens[g] = k
            for w in range(lo, hi + 1):            # the words between the run's first and last
                x = bits[w]
                bits[w] = 0
                while x:
                    rows[k] = <int32_t> (64 * w + spnc_ctz64(x))
                    k += 1
                    x = x & (x - 1)
            lens[g] = k - lens[g]
    return lens_a, rows_a[:k]


ctypedef fused index_t:
    int32_t
    int64_t


def copy_runs(const index_t[::1] src, const int64_t[::1] src_start, const int64_t[::1] lens,
              int64_t[::1] dst, const int64_t[::1] dst_start):
    """``dst[dst_start[i]:dst_start[i] + lens[i]] = src[src_start[i]:src_start[i] + lens[i]]``
    for every run ``i``."""
    cdef Py_ssize_t R = lens.shape[0], i, j, a, b
    if src_start.shape[0] != R or dst_start.shape[0] != R:
        raise ValueError("copy_runs: shapes do not match")
    for i in range(R):
        if lens[i] < 0 or src_start[i] < 0 or dst_start[i] < 0 or src_start[i] + lens[i] > src.shape[0] \
                or dst_start[i] + lens[i] > dst.shape[0]:
            raise ValueError("copy_runs: a run is out of range")
    with nogil:
        for i in range(R):
            a, b = src_start[i], dst_start[i]
            for j in range(lens[i]):
                dst[b + j] = src[a + j]


def count_codes(const uint8_t[:, ::1] codes_by_var, const int64_t[::1] var, const int64_t[::1] ptr,
                const int64_t[::1] rows):
    """For each run ``i``, the sum of ``codes_by_var[var[i], r]`` over its rows ``r`` in
    ``rows[ptr[i]:ptr[i + 1]]`` (whole numbers, int64)."""
    cdef Py_ssize_t R = var.shape[0], n = codes_by_var.shape[1], i, e
    cdef int64_t s
    if ptr.shape[0] != R + 1 or (R and (ptr[0] < 0 or ptr[R] > rows.shape[0])):
        raise ValueError("count_codes: shapes do not match")
    for i in range(R):
        if not 0 <= var[i] < codes_by_var.shape[0] or ptr[i + 1] < ptr[i]:
            raise ValueError("count_codes: a run is out of range")
    for e in range(rows.shape[0]):
        if not 0 <= rows[e] < n:
            raise ValueError("count_codes: a row is out of range")
    out_a = np.zeros(R, dtype=np.int64)
    cdef int64_t[::1] out = out_a
    with nogil:
        for i in range(R):
            s = 0
            for e in range(ptr[i], ptr[i + 1]):
                s += codes_by_var[var[i], rows[e]]
            out[i] = s
    return out_a
