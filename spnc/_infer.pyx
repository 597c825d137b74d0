# cython: freethreading_compatible=False
"""The block sweeps over a compiled graph: forward (sum-product or max-product), backward
(node posteriors and expected counts) and top-down selection (MPE, sampling, hard EM).

Every kernel takes the :class:`spnc._graph.Graph`, the leaf states of the query's mode
(:class:`spnc._graph.LeafStates`), one chunk of data transposed (``XT`` (n_vars, m)) and
the leaf matrix ``L`` (n_leaves, m) that the other leaf types filled; m is a multiple of
BLOCK. Blocks of BLOCK rows run in parallel; each thread owns a row of ``ws``.
"""
import numpy as np
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY, isnan, isinf, floor, log, exp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

from spnc._graph cimport Graph, GraphC, LeafStates, StatesC
from spnc._kinds cimport SUM, PRODUCT, LEAF, MARGINAL, MAX
from spnc._openmp cimport SPNC_OPENMP

cdef extern from "_kernels.h" nogil:
    int SPNC_B
    void spnc_sum_block(double *out, const double *W, const int32_t *ch, const double *logw, int64_t k)
    void spnc_max_block(double *out, const double *W, const int32_t *ch, const double *logw, int64_t k)
    void spnc_prod_block(double *out, const double *W, const int32_t *ch, int64_t k)
    void spnc_states_block(double *out, const double *x, const double *lp, double miss)
    void spnc_sum_back_block(double *R, const double *W, int64_t n, const int32_t *ch,
                             const double *logw, int64_t k, double *edge_acc, const double *row_w)
    void spnc_prod_back_block(double *R, int64_t n, const int32_t *ch, int64_t k)
    void spnc_sum_select_max(uint8_t *A, const double *W, int64_t n, const int32_t *ch,
                             const double *logw, int64_t k, double *edge_acc, const double *row_w)
    void spnc_lin_sum_block(double *out, const double *W, const int32_t *ch, const double *wm,
                            const double *we, int64_t k)
    void spnc_lin_prod_block(double *out, const double *W, const int32_t *ch, int64_t k)
    void spnc_lin_states_block(double *out, const double *x, const double *sm, const double *se,
                               double mm, double me)
    void spnc_lin_from_log(double *out, const double *lv)
    void spnc_lin_sum_back_block(double *R, const double *W, int64_t n, const int32_t *ch,
                                 const double *wm, const double *we, int64_t k,
                                 double *edge_acc, const double *row_w)
    double spnc_exp_nonpos(double x)
    double spnc_rand_uniform(uint64_t seed, uint64_t row, uint64_t node, uint64_t k)

BLOCK = SPNC_B
HAVE_OPENMP = bool(SPNC_OPENMP)


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


cdef struct Chunk:
    const double *XT        # (n_vars, m)
    const double *L         # (n_leaves, m)
    Py_ssize_t m


cdef inline Chunk _chunk(const double[:, ::1] XT, const double[:, ::1] L) noexcept:
    cdef Chunk c
    c.XT = &XT[0, 0]
    c.L = &L[0, 0]
    c.m = XT.shape[1]
    return c


cdef void _forward_block(const GraphC *g, const StatesC *s, Chunk d, Py_ssize_t col0, double *W,
                         int mode, const int32_t *child, const int32_t *node_slot) noexcept nogil:
    """Values of every node for rows col0.. of the chunk, node n at ``W + node_slot[n] * B``;
    ``child`` holds the workspace slots of the children."""
    cdef Py_ssize_t n
    cdef int64_t a
    cdef double *out
    for n in range(g.n_nodes):
        a = g.child_ptr[n]
        out = W + (<int64_t> node_slot[n]) * SPNC_B
        if g.kind[n] >= LEAF:
            if s.var[n] >= 0:
                spnc_states_block(out, d.XT + s.var[n] * d.m + col0, s.logp + s.off[n], s.miss[n])
            else:
                memcpy(out, d.L + g.leaf_slot[n] * d.m + col0, SPNC_B * sizeof(double))
        elif g.kind[n] == PRODUCT:
            spnc_prod_block(out, W, &child[a], g.child_ptr[n + 1] - a)
        elif mode == MARGINAL:
            spnc_sum_block(out, W, &child[a], &g.logw[a], g.child_ptr[n + 1] - a)
        else:
            spnc_max_block(out, W, &child[a], &g.logw[a], g.child_ptr[n + 1] - a)


cdef void _lin_forward_block(const GraphC *g, const StatesC *s, Chunk d, Py_ssize_t col0, double *W,
                             const int32_t *child, const int32_t *node_slot) noexcept nogil:
    """Sum-product values in the linear domain: node n's mantissas then exponents at
    ``W + node_slot[n] * 2 B`` (see _kernels.h)."""
    cdef Py_ssize_t n
    cdef int64_t a, o
    cdef double *out
    for n in range(g.n_nodes):
        a = g.child_ptr[n]
        out = W + (<int64_t> node_slot[n]) * 2 * SPNC_B
        if g.kind[n] >= LEAF:
            if s.var[n] >= 0:
                o = s.off[n]
                spnc_lin_states_block(out, d.XT + s.var[n] * d.m + col0, s.lm + o, s.le + o, 0.5, 1.0)
            else:
                spnc_lin_from_log(out, d.L + g.leaf_slot[n] * d.m + col0)
        elif g.kind[n] == PRODUCT:
            spnc_lin_prod_block(out, W, &child[a], g.child_ptr[n + 1] - a)
        else:
            spnc_lin_sum_block(out, W, &child[a], &g.wm[a], &g.we[a], g.child_ptr[n + 1] - a)


cdef inline double _lin_log(const double *W, int64_t slot, Py_ssize_t j) noexcept nogil:
    """log of the linear value of the node in ``slot``, row j of the block."""
    cdef double m = W[slot * 2 * SPNC_B + j]
    if m <= 0.0:
        return -INFINITY
    return log(m) + W[slot * 2 * SPNC_B + SPNC_B + j] * 0.6931471805599453


def forward(Graph graph, LeafStates states, const double[:, ::1] XT, const double[:, ::1] L,
            const int64_t[::1] out_nodes, double[:, ::1] out, double[:, ::1] all_values,
            int mode, int n_threads, double[:, ::1] ws):
    """Values of ``out_nodes`` for every column of the chunk: ``out[i, r]``. If
    ``all_values`` has N rows, every node's value is stored there too (N, m) and ``ws``
    holds N slots per thread; otherwise twice the forward plan's n_slots (linear sweeps
    keep a mantissa and an exponent per value)."""
    cdef const GraphC *g = &graph.c
    cdef const StatesC *s = &states.c
    cdef Chunk d = _chunk(XT, L)
    cdef Py_ssize_t N = g.n_nodes, R = out_nodes.shape[0]
    cdef Py_ssize_t n_blocks = d.m // SPNC_B, b, i
    cdef bint keep = all_values.shape[0] == N
    cdef const int32_t *child = g.child if keep else g.child_slot
    cdef const int32_t *slot = g.ident if keep else g.node_slot
    cdef bint linear = g.linear and mode == MARGINAL and not keep
    cdef double *W
    cdef Py_ssize_t j
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="static"):
        W = &ws[threadid(), 0]
        if linear:
            _lin_forward_block(g, s, d, b * SPNC_B, W, child, slot)
            for i in range(R):
                for j in range(SPNC_B):
                    out[i, b * SPNC_B + j] = _lin_log(W, slot[out_nodes[i]], j)
            continue
        _forward_block(g, s, d, b * SPNC_B, W, mode, child, slot)
        for i in range(R):
            memcpy(&out[i, b * SPNC_B], W + (<int64_t> slot[out_nodes[i]]) * SPNC_B, SPNC_B * sizeof(double))
        if keep:
            for i in range(N):
                memcpy(&all_values[i, b * SPNC_B], W + i * SPNC_B, SPNC_B * sizeof(double))


cdef inline double _root_log(const double *W, int64_t n, Py_ssize_t j, bint linear) noexcept nogil:
    return _lin_log(W, n, j) if linear else W[n * SPNC_B + j]


cdef void _mix_roots(const double *W, const int64_t[::1] roots, const double[::1] root_logw,
                     double *ll, double *P, bint linear) noexcept nogil:
    """ll[j] = log sum_i exp(log S_root_i[j] + root_logw[i]); P[root_i, j] += the root's share."""
    cdef Py_ssize_t R = roots.shape[0], i, j
    cdef double mx, s, v
    for j in range(SPNC_B):
        mx = -INFINITY
        for i in range(R):
            v = _root_log(W, roots[i], j, linear) + root_logw[i]
            if v > mx:
                mx = v
        s = 0.0
        if mx > -INFINITY:
            for i in range(R):
                s = s + exp(_root_log(W, roots[i], j, linear) + root_logw[i] - mx)
            ll[j] = mx + log(s)
            if P != NULL:
                for i in range(R):
                    P[roots[i] * SPNC_B + j] += exp(_root_log(W, roots[i], j, linear) + root_logw[i] - ll[j])
        else:
            ll[j] = -INFINITY


def backward(Graph graph, LeafStates states, const double[:, ::1] XT, const double[:, ::1] L,
             const int64_t[::1] roots, const double[::1] root_logw, const double[::1] row_w,
             double[::1] ll, double[:, ::1] edge_acc, double[:, ::1] node_acc,
             double[:, ::1] leaf_resp, double[:, ::1] all_post, int n_threads, double[:, ::1] ws,
             double[:, ::1] state_acc=None):
    """Forward then backward over each block: ``ll[r]`` the log-likelihood (roots mixed by
    ``root_logw``), node posteriors rho (probability that a node is on the row's induced
    tree). Accumulates, weighted by ``row_w``: ``edge_acc[t, e]`` (expected edge counts,
    sum edges only) and ``node_acc[t, n]`` per thread t; writes ``leaf_resp[slot, r]`` if it
    has rows and ``all_post[n, r]`` if it has N rows. ``ws`` holds 3 N slots per thread
    (values in the linear domain when the graph says so, then the posteriors). With
    ``state_acc`` (threads, n_states), inline discrete leaves add their weighted posterior
    to the count of the observed state (EM's sufficient statistics, no responsibilities
    matrix needed)."""
    cdef const GraphC *g = &graph.c
    cdef const StatesC *s = &states.c
    cdef Chunk d = _chunk(XT, L)
    cdef Py_ssize_t N = g.n_nodes
    cdef Py_ssize_t n_blocks = d.m // SPNC_B, b, i, j, t, col0
    cdef int64_t a
    cdef bint want_leaf = leaf_resp.shape[0] > 0, want_all = all_post.shape[0] == N
    cdef bint linear = g.linear
    cdef bint want_states = state_acc is not None
    cdef double acc, x
    cdef double *W
    cdef double *P
    cdef const double *wt
    cdef const double *xr
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="static"):
        t = threadid()
        W = &ws[t, 0]
        P = &ws[t, 2 * N * SPNC_B]
        col0 = b * SPNC_B
        if linear:
            _lin_forward_block(g, s, d, col0, W, g.child, g.ident)
        else:
            _forward_block(g, s, d, col0, W, MARGINAL, g.child, g.ident)
        memset(P, 0, N * SPNC_B * sizeof(double))
        _mix_roots(W, roots, root_logw, &ll[col0], P, linear)
        wt = &row_w[col0]
        for i in range(N - 1, -1, -1):
            a = g.child_ptr[i]
            if g.kind[i] == SUM and linear:
                spnc_lin_sum_back_block(P, W, i, &g.child[a], &g.wm[a], &g.we[a], g.child_ptr[i + 1] - a,
                                        &edge_acc[t, a], wt)
            elif g.kind[i] == SUM:
                spnc_sum_back_block(P, W, i, &g.child[a], &g.logw[a], g.child_ptr[i + 1] - a,
                                    &edge_acc[t, a], wt)
            elif g.kind[i] == PRODUCT:
                spnc_prod_back_block(P, i, &g.child[a], g.child_ptr[i + 1] - a)
            else:
                if want_leaf:
                    memcpy(&leaf_resp[g.leaf_slot[i], col0], P + i * SPNC_B, SPNC_B * sizeof(double))
                if want_states and s.var[i] >= 0:
                    xr = d.XT + s.var[i] * d.m + col0
                    for j in range(SPNC_B):
                        x = xr[j]
                        if x == x:
                            state_acc[t, s.off[i] + <int64_t> x] += P[i * SPNC_B + j] * wt[j]
            acc = 0.0
            for j in range(SPNC_B):
                acc = acc + P[i * SPNC_B + j] * wt[j]
            node_acc[t, i] += acc
        if want_all:
            for i in range(N):
                memcpy(&all_post[i, col0], P + i * SPNC_B, SPNC_B * sizeof(double))


cdef void _sample_sum(uint8_t *A, const double *W, const GraphC *g, Py_ssize_t i, bint evidence,
                      uint64_t seed, int64_t row0) noexcept nogil:
    """At sum node i, activate for each active row a child drawn with probability
    w_c S_c / S_i (w_c without evidence, where every S is 1), keyed by (seed, row, i)."""
    cdef int64_t a = g.child_ptr[i], k = g.child_ptr[i + 1] - a, e, pick, last
    cdef Py_ssize_t j
    cdef double u, cum, p
    for j in range(SPNC_B):
        if A[i * SPNC_B + j]:
            u = spnc_rand_uniform(seed, row0 + j, i, 0)
            cum = 0.0
            pick = -1
            last = -1
            for e in range(k):
                if evidence:
                    p = W[g.child[a + e] * SPNC_B + j] + g.logw[a + e] - W[i * SPNC_B + j]
                else:
                    p = g.logw[a + e]
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
                A[g.child[a + pick] * SPNC_B + j] = 1


cdef void _fill_states(const StatesC *s, Py_ssize_t n, const uint8_t *A, Chunk d, double *out_XT,
                       Py_ssize_t col0, int mode, uint64_t seed, int64_t row0) noexcept nogil:
    """Missing variable of inline leaf n on the rows where it is active: its most probable
    state (MAX) or a state drawn from its table keyed by (seed, row, n) (MARGINAL)."""
    cdef Py_ssize_t j
    cdef int64_t o = s.off[n], k = s.nst[n], st, pick, last
    cdef const double *x = d.XT + s.var[n] * d.m + col0
    cdef double *y = out_XT + s.var[n] * d.m + col0
    cdef double u, cum, p
    for j in range(SPNC_B):
        if not A[j] or x[j] == x[j]:
            continue
        if mode == MAX:
            y[j] = s.best[n]
            continue
        u = spnc_rand_uniform(seed, row0 + col0 + j, n, 0)
        cum = 0.0
        pick = -1
        last = -1
        for st in range(k):
            p = exp(s.logp[o + st])
            if p > 0.0:
                last = st
            cum = cum + p
            if u <= cum and p > 0.0:
                pick = st
                break
        y[j] = pick if pick >= 0 else last


def select(Graph graph, LeafStates states, const double[:, ::1] XT, const double[:, ::1] L,
           const int64_t[::1] roots, const double[::1] root_logw, int mode, bint evidence,
           uint64_t seed, int64_t row0, double[::1] root_value, uint8_t[:, ::1] leaf_active,
           const double[::1] row_w, double[:, ::1] edge_acc, double[:, ::1] node_acc,
           double[:, ::1] leaf_resp, int n_threads, double[:, ::1] ws, uint8_t[:, ::1] acts,
           double[:, ::1] out_XT=None):
    """Top-down choice of one induced tree per row. mode MAX (MPE, hard EM): max-product
    forward, the best root (first maximum) and the arg-max child at each sum node. mode
    MARGINAL (sampling): a child drawn with probability w_c S_c / S at each sum node; with
    ``evidence`` False nothing is observed, every S is 1 and the forward pass is skipped.
    Writes ``root_value[r]`` (the forward value of the chosen root), marks the chosen
    leaves in ``leaf_active[slot, r]`` and/or ``leaf_resp[slot, r]`` (1.0/0.0) when they
    have rows, and, when ``edge_acc`` has rows, adds ``row_w[r]`` to the edge and node
    counts of the chosen tree (per thread t). With ``out_XT`` (a copy of ``XT``), the inline
    discrete leaves on the chosen tree write their missing variables there themselves (the
    leaf tables' ``fill`` is then only needed for the others)."""
    cdef const GraphC *g = &graph.c
    cdef const StatesC *s = &states.c
    cdef Chunk d = _chunk(XT, L)
    cdef Py_ssize_t N = g.n_nodes, R = roots.shape[0]
    cdef Py_ssize_t n_blocks = d.m // SPNC_B, b, i, j, t, col0, e
    cdef int64_t a, k, pick
    cdef bint want_active = leaf_active.shape[0] > 0, want_resp = leaf_resp.shape[0] > 0
    cdef bint count = edge_acc.shape[0] > 0
    cdef bint fill = out_XT is not None
    cdef double *oxt = &out_XT[0, 0] if fill else NULL
    cdef double best, v, acc
    cdef double *W
    cdef uint8_t *A
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="static"):
        t = threadid()
        W = &ws[t, 0]
        A = &acts[t, 0]
        col0 = b * SPNC_B
        memset(A, 0, N * SPNC_B)
        if evidence:
            _forward_block(g, s, d, col0, W, mode, g.child, g.ident)
        for j in range(SPNC_B):
            best = -INFINITY
            pick = 0
            if evidence:
                for i in range(R):
                    v = W[roots[i] * SPNC_B + j] + root_logw[i]
                    if v > best:
                        best = v
                        pick = i
            else:
                best = 0.0
            root_value[col0 + j] = best
            if best > -INFINITY:
                A[roots[pick] * SPNC_B + j] = 1
        for i in range(N - 1, -1, -1):
            a = g.child_ptr[i]
            k = g.child_ptr[i + 1] - a
            if g.kind[i] == SUM:
                if mode == MAX:
                    spnc_sum_select_max(A, W, i, &g.child[a], &g.logw[a], k,
                                        &edge_acc[t, a] if count else NULL, &row_w[col0])
                else:
                    _sample_sum(A, W, g, i, evidence, seed, row0 + col0)
            elif g.kind[i] == PRODUCT:
                for e in range(k):
                    for j in range(SPNC_B):
                        A[g.child[a + e] * SPNC_B + j] |= A[i * SPNC_B + j]
            else:
                if want_active:
                    memcpy(&leaf_active[g.leaf_slot[i], col0], A + i * SPNC_B, SPNC_B)
                if want_resp:
                    for j in range(SPNC_B):
                        leaf_resp[g.leaf_slot[i], col0 + j] = A[i * SPNC_B + j]
                if fill and s.var[i] >= 0:
                    _fill_states(s, i, A + i * SPNC_B, d, oxt, col0, mode, seed, row0)
            if count:
                acc = 0.0
                for j in range(SPNC_B):
                    if A[i * SPNC_B + j]:
                        acc = acc + row_w[col0 + j]
                node_acc[t, i] += acc


cdef extern from *:
    """
    /* Throughput probes for tools/bench_inference.py: the limits of the sweep on this CPU
       (compiled like the block kernels, vectorised, no dependency chain across elements). */
    SPNC_CLONES static void spnc_probe_exp(double *x, Py_ssize_t n, int reps) {
        int r; Py_ssize_t j;
        for (r = 0; r < reps; r++) for (j = 0; j < n; j++) x[j] = spnc_exp_nonpos(x[j] * 0.5 - 1e-3);
    }
    SPNC_CLONES static void spnc_probe_fma(double *x, Py_ssize_t n, int reps) {
        int r; Py_ssize_t j;
        for (r = 0; r < reps; r++) for (j = 0; j < n; j++) x[j] = x[j] * 0.999999 + 1e-9;
    }
    """
    void spnc_probe_exp(double *x, Py_ssize_t n, int reps) nogil
    void spnc_probe_fma(double *x, Py_ssize_t n, int reps) nogil


def probe(str what, int reps=2000):
    """Operations per second of one core: ``"exp"`` (the sweep's vectorised exp) or
    ``"fma"`` (multiply-adds), over a cache-resident array of 512 values."""
    import time
    buf = np.full(512, -0.5)
    cdef double[::1] x = buf
    cdef bint is_exp = what == "exp"
    cdef double t0 = time.perf_counter()
    with nogil:
        if is_exp:
            spnc_probe_exp(&x[0], 512, reps)
        else:
            spnc_probe_fma(&x[0], 512, reps)
    return 512.0 * reps / (time.perf_counter() - t0)
