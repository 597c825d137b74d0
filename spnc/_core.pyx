# cython: freethreading_compatible=False
"""Compiled sweeps over a flat SPN: scopes and structural checks, data checks, and the
forward / backward / top-down passes over one chunk of rows.

Graph arrays (see spnc/graph.py): ``kind`` uint8[N] (0 sum, 1 product, >= 2 leaf),
``child_ptr`` int64[N+1], ``child`` int32[E] (child < parent), ``logw`` float64[E],
``leaf_slot`` int64[N] (row of the leaf matrix, -1 for internal nodes).
Row data per chunk: the leaf matrix ``L`` (n_leaves, m) with m a multiple of BLOCK.
Work is split into blocks of BLOCK rows; each thread owns a row of ``ws``, an (N, BLOCK)
workspace (two for the backward pass) that the caller allocates once per query.
"""
import numpy as np
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY, isnan, isinf, floor, log, exp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport qsort, malloc, free
from libc.string cimport memcpy, memset

from spnc._openmp cimport omp_get_max_threads, SPNC_OPENMP

cdef extern from "_kernels.h" nogil:
    int SPNC_B
    void spnc_sum_block(double *out, const double *W, const int32_t *ch, const double *logw, int64_t k)
    void spnc_max_block(double *out, const double *W, const int32_t *ch, const double *logw, int64_t k)
    void spnc_prod_block(double *out, const double *W, const int32_t *ch, int64_t k)
    void spnc_sum_back_block(double *R, const double *W, int64_t n, const int32_t *ch,
                             const double *logw, int64_t k, double *edge_acc, const double *row_w)
    void spnc_prod_back_block(double *R, int64_t n, const int32_t *ch, int64_t k)
    void spnc_sum_select_max(uint8_t *A, const double *W, int64_t n, const int32_t *ch,
                             const double *logw, int64_t k)
    double spnc_exp_nonpos(double x)
    double spnc_log_pos(double s)
    double spnc_rand_uniform(uint64_t seed, uint64_t row, uint64_t node, uint64_t k)

BLOCK = SPNC_B
HAVE_OPENMP = bool(SPNC_OPENMP)

DEF_SUM = 0
DEF_PRODUCT = 1

# error codes of compute_scopes
SCOPE_OK = 0
SCOPE_EMPTY = 1          # node has an empty scope
SCOPE_OVERLAP = 2        # product children share a variable (extra = variable)
SCOPE_MISMATCH = 3       # sum child scope differs from the first child's (extra = child)
SCOPE_DUP_CHILD = 4      # a child listed twice under a sum (extra = child)


def max_threads() -> int:
    return omp_get_max_threads()


cdef int _cmp_i32(const void *a, const void *b) noexcept nogil:
    cdef int32_t x = (<const int32_t *> a)[0]
    cdef int32_t y = (<const int32_t *> b)[0]
    return (x > y) - (x < y)


def compute_scopes(const uint8_t[::1] kind, const int64_t[::1] child_ptr,
                   const int32_t[::1] child, const int64_t[::1] leaf_scope_ptr,
                   const int32_t[::1] leaf_scope):
    """Bottom-up scopes (sorted CSR). Leaves take ``leaf_scope[leaf_scope_ptr[n]:...]``
    (indexed by node; empty for internal nodes). Returns (scope_ptr, scope, code, node, extra)
    with code != 0 at the first node that breaks completeness or decomposability."""
    cdef Py_ssize_t N = kind.shape[0]
    cdef Py_ssize_t n, e, a, b, i
    cdef int64_t total = 0, size, c
    cdef int code = 0
    cdef int64_t bad_node = -1, extra = -1
    size_arr = np.zeros(N + 1, dtype=np.int64)
    cdef int64_t[::1] sp = size_arr
    with nogil:
        for n in range(N):
            if kind[n] >= 2:
                size = leaf_scope_ptr[n + 1] - leaf_scope_ptr[n]
            elif kind[n] == 1:
                size = 0
                for e in range(child_ptr[n], child_ptr[n + 1]):
                    c = child[e]
                    size = size + sp[c + 1] - sp[c]
            else:
                c = child[child_ptr[n]]
                size = sp[c + 1] - sp[c]
            sp[n + 1] = sp[n] + size
    scope_arr = np.empty(sp[N], dtype=np.int32)
    stamp_arr = np.full(max(int(np.max(leaf_scope, initial=-1)) + 1, 1), -1, dtype=np.int64)
    seen_arr = np.full(N, -1, dtype=np.int64)
    cdef int32_t[::1] sc = scope_arr
    cdef int64_t[::1] stamp = stamp_arr
    cdef int64_t[::1] seen = seen_arr
    cdef int32_t v
    with nogil:
        for n in range(N):
            a = sp[n]
            if sp[n + 1] == a:
                code = 1; bad_node = n; break
            if kind[n] >= 2:
                for i in range(leaf_scope_ptr[n], leaf_scope_ptr[n + 1]):
                    sc[a] = leaf_scope[i]; a = a + 1
            elif kind[n] == 1:
                for e in range(child_ptr[n], child_ptr[n + 1]):
                    c = child[e]
                    for i in range(sp[c], sp[c + 1]):
                        v = sc[i]
                        if stamp[v] == n:
                            code = 2; bad_node = n; extra = v; break
                        stamp[v] = n
                        sc[a] = v; a = a + 1
                    if code:
                        break
                if code:
                    break
                qsort(&sc[sp[n]], sp[n + 1] - sp[n], sizeof(int32_t), _cmp_i32)
            else:
                b = child[child_ptr[n]]
                for i in range(sp[b], sp[b + 1]):
                    sc[a + i - sp[b]] = sc[i]
                for e in range(child_ptr[n], child_ptr[n + 1]):
                    c = child[e]
                    if seen[c] == n:
                        code = 4; bad_node = n; extra = c; break
                    seen[c] = n
                    if sp[c + 1] - sp[c] != sp[b + 1] - sp[b]:
                        code = 3; bad_node = n; extra = c; break
                    for i in range(sp[c + 1] - sp[c]):
                        if sc[sp[c] + i] != sc[sp[b] + i]:
                            code = 3; bad_node = n; extra = c; break
                    if code:
                        break
                if code:
                    break
    return size_arr, scope_arr, code, bad_node, extra


def reachable(const int64_t[::1] roots, const int64_t[::1] child_ptr, const int32_t[::1] child):
    """uint8 mask of nodes reachable from ``roots`` (children precede parents)."""
    cdef Py_ssize_t N = child_ptr.shape[0] - 1
    mark_arr = np.zeros(N, dtype=np.uint8)
    cdef uint8_t[::1] mark = mark_arr
    cdef Py_ssize_t n, e
    for n in range(roots.shape[0]):
        mark[roots[n]] = 1
    with nogil:
        for n in range(N - 1, -1, -1):
            if mark[n]:
                for e in range(child_ptr[n], child_ptr[n + 1]):
                    mark[child[e]] = 1
    return mark_arr


def first_bad_value(const double[:, :] X, const int32_t[::1] card):
    """First (row, col, code) where X is inf (code 1) or, for a discrete variable, not an
    integer in [0, card) (code 2); (-1, -1, 0) if none. NaN (missing) is allowed."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], r, c
    cdef double x
    cdef int code = 0
    cdef Py_ssize_t br = -1, bc = -1
    with nogil:
        for r in range(n):
            for c in range(d):
                x = X[r, c]
                if isnan(x):
                    continue
                if isinf(x):
                    code = 1
                elif card[c] > 0 and (x < 0 or x >= card[c] or x != floor(x)):
                    code = 2
                if code:
                    br = r; bc = c
                    break
            if code:
                break
    return br, bc, code


def plan_slots(const int64_t[::1] child_ptr, const int32_t[::1] child, const int64_t[::1] keep):
    """Workspace slot of every node for a forward-only sweep: a slot is reused once the
    node's last parent has read it, so the workspace holds the live set, not all N nodes
    (for tree-shaped models a small fraction, which keeps the sweep in cache). Nodes in
    ``keep`` (the roots) are never freed. Returns (slot int32[N], n_slots)."""
    cdef Py_ssize_t N = child_ptr.shape[0] - 1, n, e
    last_arr = np.full(N, -1, dtype=np.int64)
    slot_arr = np.empty(N, dtype=np.int32)
    free_arr = np.empty(N + 1, dtype=np.int32)
    cdef int64_t[::1] last = last_arr
    cdef int32_t[::1] slot = slot_arr
    cdef int32_t[::1] free_ = free_arr
    cdef int64_t nfree = 0, nslots = 0
    with nogil:
        for n in range(N):
            for e in range(child_ptr[n], child_ptr[n + 1]):
                last[child[e]] = n
    for n in range(keep.shape[0]):
        last[keep[n]] = N
    with nogil:
        for n in range(N):
            if nfree > 0:
                nfree = nfree - 1
                slot[n] = free_[nfree]
            else:
                slot[n] = <int32_t> nslots
                nslots = nslots + 1
            for e in range(child_ptr[n], child_ptr[n + 1]):
                if last[child[e]] == n:
                    last[child[e]] = -2  # freed once, even if listed twice
                    free_[nfree] = slot[child[e]]
                    nfree = nfree + 1
    return slot_arr, nslots


cdef inline void _forward_block(const uint8_t[::1] kind, const int64_t[::1] child_ptr,
                                const int32_t[::1] child, const double[::1] logw,
                                const int64_t[::1] leaf_slot, const double[:, ::1] L,
                                Py_ssize_t col0, double *W, int mode,
                                const int32_t *node_slot) noexcept nogil:
    """``child`` holds workspace slots of children and ``node_slot[n]`` the slot of n (the
    identity when every node's value is kept)."""
    cdef Py_ssize_t N = kind.shape[0], n
    cdef int64_t a
    cdef double *out
    for n in range(N):
        a = child_ptr[n]
        out = W + (<int64_t> node_slot[n]) * SPNC_B
        if kind[n] >= 2:
            memcpy(out, &L[leaf_slot[n], col0], SPNC_B * sizeof(double))
        elif kind[n] == 1:
            spnc_prod_block(out, W, &child[a], child_ptr[n + 1] - a)
        elif mode == 0:
            spnc_sum_block(out, W, &child[a], &logw[a], child_ptr[n + 1] - a)
        else:
            spnc_max_block(out, W, &child[a], &logw[a], child_ptr[n + 1] - a)


def forward(const uint8_t[::1] kind, const int64_t[::1] child_ptr, const int32_t[::1] child,
            const double[::1] logw, const int64_t[::1] leaf_slot, const double[:, ::1] L,
            const int64_t[::1] out_nodes, double[:, ::1] out, double[:, ::1] all_values,
            int mode, int n_threads, double[:, ::1] ws, const int32_t[::1] node_slot):
    """Values of ``out_nodes`` for every column of ``L``: ``out[i, r]``. mode 0 = sum-product
    (log-likelihood / marginals), 1 = max-product. ``child``/``node_slot`` address workspace
    slots (see plan_slots). If ``all_values`` has N rows (slots must then be the identity),
    every node's value is stored there too (N, m)."""
    cdef Py_ssize_t N = kind.shape[0], m = L.shape[1], R = out_nodes.shape[0]
    cdef Py_ssize_t n_blocks = m // SPNC_B, b, i, t
    cdef bint keep = all_values.shape[0] == N
    cdef double *W
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="static"):
        W = &ws[threadid(), 0]
        _forward_block(kind, child_ptr, child, logw, leaf_slot, L, b * SPNC_B, W, mode, &node_slot[0])
        for i in range(R):
            memcpy(&out[i, b * SPNC_B], W + (<int64_t> node_slot[out_nodes[i]]) * SPNC_B, SPNC_B * sizeof(double))
        if keep:
            for i in range(N):
                memcpy(&all_values[i, b * SPNC_B], W + i * SPNC_B, SPNC_B * sizeof(double))


def backward(const uint8_t[::1] kind, const int64_t[::1] child_ptr, const int32_t[::1] child,
             const double[::1] logw, const int64_t[::1] leaf_slot, const double[:, ::1] L,
             const int64_t[::1] roots, const double[::1] root_logw, const double[::1] row_w,
             double[::1] ll, double[:, ::1] edge_acc, double[:, ::1] node_acc,
             double[:, ::1] leaf_resp, double[:, ::1] all_post, int n_threads, double[:, ::1] ws,
             const int32_t[::1] ident):
    """Forward then backward over each block: ``ll[r]`` the log-likelihood (roots mixed by
    ``root_logw``), node posteriors rho (probability that a node is on the row's induced
    tree). Accumulates, weighted by ``row_w``: ``edge_acc[t, e]`` (expected edge counts,
    sum edges only) and ``node_acc[t, n]`` per thread t; writes ``leaf_resp[slot, r]`` if it
    has rows and ``all_post[n, r]`` if it has N rows."""
    cdef Py_ssize_t N = kind.shape[0], m = L.shape[1], R = roots.shape[0]
    cdef Py_ssize_t n_blocks = m // SPNC_B, b, i, j, t, col0
    cdef int64_t a
    cdef bint want_leaf = leaf_resp.shape[0] > 0, want_all = all_post.shape[0] == N
    cdef double mx, s, v
    cdef double *W
    cdef double *P
    cdef double *wt
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="static"):
        t = threadid()
        W = &ws[t, 0]
        P = &ws[t, N * SPNC_B]
        col0 = b * SPNC_B
        _forward_block(kind, child_ptr, child, logw, leaf_slot, L, col0, W, 0, &ident[0])
        memset(P, 0, N * SPNC_B * sizeof(double))
        for j in range(SPNC_B):
            mx = -INFINITY
            for i in range(R):
                v = W[roots[i] * SPNC_B + j] + root_logw[i]
                if v > mx:
                    mx = v
            s = 0.0
            if mx > -INFINITY:
                for i in range(R):
                    s = s + exp(W[roots[i] * SPNC_B + j] + root_logw[i] - mx)
                ll[col0 + j] = mx + log(s)
                for i in range(R):
                    P[roots[i] * SPNC_B + j] = P[roots[i] * SPNC_B + j] + exp(W[roots[i] * SPNC_B + j] + root_logw[i] - ll[col0 + j])
            else:
                ll[col0 + j] = -INFINITY
        wt = <double *> &row_w[col0]
        for i in range(N - 1, -1, -1):
            a = child_ptr[i]
            if kind[i] == 0:
                spnc_sum_back_block(P, W, i, &child[a], &logw[a], child_ptr[i + 1] - a,
                                    &edge_acc[t, a], wt)
            elif kind[i] == 1:
                spnc_prod_back_block(P, i, &child[a], child_ptr[i + 1] - a)
            elif want_leaf:
                memcpy(&leaf_resp[leaf_slot[i], col0], P + i * SPNC_B, SPNC_B * sizeof(double))
            s = 0.0
            for j in range(SPNC_B):
                s = s + P[i * SPNC_B + j] * wt[j]
            node_acc[t, i] += s
        if want_all:
            for i in range(N):
                memcpy(&all_post[i, col0], P + i * SPNC_B, SPNC_B * sizeof(double))


def select(const uint8_t[::1] kind, const int64_t[::1] child_ptr, const int32_t[::1] child,
           const double[::1] logw, const int64_t[::1] leaf_slot, const double[:, ::1] L,
           int64_t root, uint8_t[:, ::1] leaf_active, double[::1] root_value,
           int mode, uint64_t seed, int64_t row0, int n_threads, double[:, ::1] ws,
           uint8_t[:, ::1] acts, const int32_t[::1] ident):
    """Top-down choice of one induced tree per row. mode 1 (MPE): max-product forward, then
    the arg-max child at each sum node. mode 0 (sampling): sum-product forward on the
    evidence, then a child drawn with probability w_c S_c / S at each sum node, using the
    counter-based uniform keyed by (seed, row0 + row, node). Marks the chosen leaves in
    ``leaf_active[slot, r]``; ``root_value[r]`` is the forward value of the root."""
    cdef Py_ssize_t N = kind.shape[0], m = L.shape[1]
    cdef Py_ssize_t n_blocks = m // SPNC_B, b, i, j, t, col0
    cdef int64_t a, k, e, pick, last
    cdef double u, cum, p
    cdef double *W
    cdef uint8_t *A
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="static"):
        t = threadid()
        W = &ws[t, 0]
        A = &acts[t, 0]
        col0 = b * SPNC_B
        _forward_block(kind, child_ptr, child, logw, leaf_slot, L, col0, W, mode, &ident[0])
        memcpy(&root_value[col0], W + root * SPNC_B, SPNC_B * sizeof(double))
        memset(A, 0, N * SPNC_B)
        for j in range(SPNC_B):
            A[root * SPNC_B + j] = W[root * SPNC_B + j] > -INFINITY
        for i in range(N - 1, -1, -1):
            a = child_ptr[i]
            k = child_ptr[i + 1] - a
            if kind[i] == 0:
                if mode == 1:
                    spnc_sum_select_max(A, W, i, &child[a], &logw[a], k)
                else:
                    for j in range(SPNC_B):
                        if A[i * SPNC_B + j]:
                            u = spnc_rand_uniform(seed, row0 + col0 + j, i, 0)
                            cum = 0.0
                            pick = -1
                            last = -1
                            for e in range(k):
                                p = W[child[a + e] * SPNC_B + j] + logw[a + e] - W[i * SPNC_B + j]
                                p = spnc_exp_nonpos(p if p < 0.0 else 0.0)
                                if p > 0.0:
                                    last = e
                                cum = cum + p
                                if cum >= u:
                                    pick = e
                                    break
                            if pick < 0:
                                pick = last
                            if pick >= 0:
                                A[child[a + pick] * SPNC_B + j] = 1
            elif kind[i] == 1:
                for e in range(k):
                    for j in range(SPNC_B):
                        A[child[a + e] * SPNC_B + j] |= A[i * SPNC_B + j]
            else:
                memcpy(&leaf_active[leaf_slot[i], col0], A + i * SPNC_B, SPNC_B)
