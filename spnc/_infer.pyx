# cython: freethreading_compatible=False
"""The block sweeps over a compiled graph: forward (sum-product or max-product), backward
(node posteriors and expected counts) and top-down selection (MPE, sampling, hard EM);
merging's hard routing is in :mod:`spnc._route`.

Every kernel takes the :class:`spnc._graph.Graph`, the leaf states of the query's mode
(:class:`spnc._graph.LeafStates`), one chunk of data transposed (``XT`` (n_vars, m)) and
the leaf matrix ``L`` (n_leaves, m) that the other leaf types filled; m is a multiple of
BLOCK. Blocks of BLOCK rows run in parallel; each thread owns a row of ``ws``. When every
leaf is inline, forward, backward and select take the chunk's rows instead (``rows``) and
each block stages its own rows, transposed, in the thread's cache.
"""
import numpy as np
from spnc._buffers import aligned_empty
from spnc._visit import backward_plan, edge_lane_totals
from spnc._threads import reduction_groups
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY, frexp, log, exp, isfinite
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

from spnc._graph cimport Graph, GraphC, LeafStates, StatesC
from spnc._kinds cimport SUM, PRODUCT, LEAF, MARGINAL, MAX
from spnc._net cimport (spnc_net, Staging, block_net, chunk_net, staged_net, SPNC_B, SPNC_STATE_LANES, SPNC_EDGE_LANES,
                       spnc_counts_from_parents, spnc_forward_log, spnc_forward_log_some, spnc_forward_lin,
                       spnc_forward_plain, spnc_fp_clear, spnc_fp_bad, spnc_budget_left, spnc_budget_spend,
                       spnc_backward, spnc_backward_gather, spnc_runs, spnc_select, spnc_unstage)
from spnc._openmp cimport SPNC_OPENMP
from spnc._domains cimport LOG_DOMAIN, SCALED, PLAIN, _sum_forward, _mix_roots, _forward_roots, _best_root

BLOCK = SPNC_B
STATE_LANES = SPNC_STATE_LANES     # partial sums per state of EM's state counts
HAVE_OPENMP = bool(SPNC_OPENMP)


cdef object _staging(Staging *st, spnc_net *net, const double[:, :] rows, int n_threads, bint ahead=True,
                     object check=None):
    """Set up ``st`` for ``rows`` (None: the kernels read the transposed chunk ``net``
    has); ``net.m`` becomes the chunk's width in whole blocks. ``check``: None, or the
    variables' state counts (float64) and a flag per thread (uint8, set to 1 where a block had
    a bad value; see ``spnc._sweep.Sweep.check_cells``). Returns the buffers, which must
    outlive the sweep."""
    st.X = NULL
    st.card = NULL
    if rows is None:
        return None
    cdef Py_ssize_t n = rows.shape[0], d = rows.shape[1], es = sizeof(double)
    if rows.strides[0] % es or rows.strides[1] % es:
        raise ValueError("staged rows must be aligned to whole doubles")
    bufs = (aligned_empty((n_threads, max(d, 1) * SPNC_B)),
            np.empty(2 * n_threads * sizeof(spnc_net), dtype=np.uint8), check)
    cdef double[:, ::1] b = bufs[0]
    cdef uint8_t[::1] nb = bufs[1]
    cdef const double[::1] card
    cdef uint8_t[::1] bad
    if check is not None and d:
        card, bad = check
        if card.shape[0] != d or bad.shape[0] < n_threads:
            raise ValueError("check: a state count per variable and a flag per thread")
        st.card, st.bad = &card[0], &bad[0]
    st.X = &rows[0, 0] if n and d else NULL
    st.rs, st.cs, st.n, st.n_vars = rows.strides[0] // es, rows.strides[1] // es, n, d
    st.ahead = ahead
    st.buf, st.nets = &b[0, 0], <spnc_net *> &nb[0]
    net.m = (n + SPNC_B - 1) // SPNC_B * SPNC_B
    return bufs


def forward(Graph graph, LeafStates states, const double[:, ::1] XT, const double[:, ::1] L,
            const int64_t[::1] out_nodes, double[:, ::1] out, double[:, ::1] all_values,
            int mode, int n_threads, double[:, ::1] ws, bint keep_all=False, const double[:, :] rows=None,
            check=None):
    """Values of ``out_nodes`` for every column of the chunk: ``out[i, r]``. If
    ``all_values`` has N rows, every node's value is stored there too (N, m) and ``ws``
    holds N slots per thread; otherwise twice the forward plan's n_slots (linear sweeps
    keep a mantissa and an exponent per value). Blocks are handed out dynamically: nothing
    is accumulated, so the result does not depend on which thread ran a block, and a thread
    the OS preempts on a busy machine does not hold the others up. ``keep_all``: every
    node keeps its value in ``ws`` (N slots per thread) without ``all_values``, so
    ``out_nodes`` may be any nodes, not only roots. ``rows``: the chunk's rows (n, n_vars),
    staged block by block, in place of ``XT`` (models whose leaves are all inline), and
    checked with ``check`` (see :func:`_staging`)."""
    cdef const GraphC *g = &graph.c
    cdef Py_ssize_t N = g.n_nodes, R = out_nodes.shape[0]
    cdef bint copy_all = all_values.shape[0] == N
    cdef bint keep = copy_all or keep_all
    cdef spnc_net net = chunk_net(g, &states.c, XT, L, not keep)
    cdef Staging st
    bufs = _staging(&st, &net, rows, n_threads, True, check)
    cdef spnc_net *nb
    cdef Py_ssize_t n_blocks = net.m // SPNC_B, b, i, j
    cdef const int32_t *child = g.child if keep else g.child_slot
    cdef const int32_t *slot = g.ident if keep else g.node_slot
    cdef bint linear = g.linear and mode == MARGINAL and not keep
    cdef double *W
    cdef int budget0 = graph.plain_budget(n_blocks, True) if linear else 0
    cdef int budget = budget0
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=4):
        W = &ws[threadid(), 0]
        nb = block_net(&st, &net, threadid(), b * SPNC_B)
        if linear:
            if R:
                _forward_roots(nb, b * SPNC_B, W, child, slot, &out_nodes[0], R, &out[0, b * SPNC_B],
                               out.shape[1], g.bounded, &budget)
            continue
        spnc_forward_log(nb, b * SPNC_B, W, mode, child, slot, NULL, NULL)
        for i in range(R):
            memcpy(&out[i, b * SPNC_B], W + (<int64_t> slot[out_nodes[i]]) * SPNC_B, SPNC_B * sizeof(double))
        if copy_all:
            for i in range(N):
                memcpy(&all_values[i, b * SPNC_B], W + i * SPNC_B, SPNC_B * sizeof(double))
    graph.plain_record(n_blocks, budget0, budget, True)


def forward_some(Graph graph, LeafStates states, const double[:, ::1] XT, const double[:, ::1] L,
                 double[:, :, ::1] P, const int32_t[::1] edge_slot, const int32_t[::1] node_slot,
                 const int64_t[::1] nodes, int mode, int n_threads):
    """Log-domain values of ``nodes`` (increasing) alone, with :func:`forward`'s per-node code
    (the same bits): node n's values of block b in ``P[b, node_slot[n]]``, edge e's child
    in slot ``edge_slot[e]``; the unlisted children of listed nodes hold theirs already."""
    cdef spnc_net net = chunk_net(&graph.c, &states.c, XT, L, False)
    cdef Py_ssize_t b
    if P.shape[2] != SPNC_B or P.shape[0] * SPNC_B > XT.shape[1] or edge_slot.shape[0] < graph.c.n_edges \
            or node_slot.shape[0] < graph.c.n_nodes:
        raise ValueError("forward_some: P must be (blocks within XT's columns, slots, BLOCK), a slot per node and edge")
    for b in prange(P.shape[0] if nodes.shape[0] else 0, nogil=True, num_threads=n_threads, schedule="static"):
        spnc_forward_log_some(&net, b * SPNC_B, &P[b, 0, 0], mode, &edge_slot[0], &node_slot[0], &nodes[0],
                              nodes.shape[0])


def backward_ws(Graph graph) -> int:
    """Doubles of workspace per thread that :func:`backward` needs."""
    cdef const GraphC *g = &graph.c
    if g.shares:
        return (2 * g.n_slots + g.n_sum_edges + g.n_pslots + 1) * SPNC_B
    return (2 * g.n_nodes + g.n_pslots + (2 * g.n_sums if g.gather else 0) + 1) * SPNC_B


def backward(Graph graph, LeafStates states, const double[:, ::1] XT, const double[:, ::1] L,
             const int64_t[::1] roots, const double[::1] root_logw, const double[::1] row_w,
             double[::1] ll, double[:, ::1] edge_acc, double[:, ::1] node_acc,
             double[:, ::1] leaf_resp, double[:, ::1] all_post, int n_threads, double[:, ::1] ws,
             double[:, ::1] state_acc=None, const double[:, :] rows=None, double seed=1.0, check=None):
    """Forward then backward over each block: ``ll[r]`` the log-likelihood (roots mixed by
    ``root_logw``), node posteriors rho. Adds, weighted by ``row_w``, expected sum-edge counts
    to ``edge_acc[0, e]`` and node counts to ``node_acc[0, n]`` (other rows untouched; the
    same bits for every ``n_threads``, see :func:`spnc._threads.reduction_groups`); writes
    ``leaf_resp[slot, r]`` if it has rows and ``all_post[n, r]`` if it has N rows. ``ws``:
    :func:`backward_ws` doubles per thread (the forward plan's values, each sum edge's share
    w_c S_c / S_n, the posteriors in the backward plan's slots; with ``Graph.shares`` false,
    every node's value instead of the shares, gathered from or pushed, ``Graph.gather``). With
    ``state_acc`` (row 0 added to, STATE_LANES * n_states), inline discrete leaves add their
    weighted posterior to the count of the observed state (EM's sufficient statistics), in
    STATE_LANES partial sums per state (state s at STATE_LANES s onwards) that the caller adds
    up (``spnc.learn._em_pass.lane_totals``). ``rows``, ``check`` as for :func:`forward`. ``seed``: the
    roots' posterior, a power of two (counts only: no ``leaf_resp``, no ``all_post``). Every
    posterior is then ``seed`` times its value, exactly: with 2^600, posteriors down to
    2^-1674 stay normal doubles (a subnormal operand costs a microcode assist). The edge
    and node counts are scaled back here; ``state_acc`` keeps the factor."""
    cdef const GraphC *g = &graph.c
    if seed != 1.0 and (leaf_resp.shape[0] > 0 or all_post.shape[0] == g.n_nodes):
        raise ValueError("backward: a seed other than 1 is for counts only")
    cdef spnc_net net = chunk_net(g, &states.c, XT, L, True)
    cdef Staging st
    bufs = _staging(&st, &net, rows, n_threads, False, check)
    cdef spnc_net *nb
    cdef Py_ssize_t N = g.n_nodes, E = g.n_edges
    cdef Py_ssize_t n_blocks = net.m // SPNC_B, b, i, t, col0
    cdef bint want_leaf = leaf_resp.shape[0] > 0, want_all = all_post.shape[0] == N
    cdef bint linear = g.linear
    cdef bint want_states = state_acc is not None
    if want_states and state_acc.shape[1] < STATE_LANES * len(states.logp_):
        raise ValueError(f"backward: state_acc needs {STATE_LANES} columns per state")
    cdef const int64_t[::1] start = graph.start_
    cdef bint shares = g.shares
    cdef bint gather = g.gather and not shares
    cdef const int32_t[::1] visit, rvar, rnst
    cdef const int64_t[::1] rptr, roff
    visit, rptr, rvar, roff, rnst = backward_plan(graph, states, want_leaf, want_all, want_states)
    cdef spnc_runs runs     # products that count the states of the leaves in their slot
    if rvar.shape[0]:
        runs.ptr, runs.var, runs.off, runs.nst = &rptr[0], &rvar[0], &roff[0], &rnst[0]
    cdef const spnc_runs *rp = &runs if rvar.shape[0] else NULL
    cdef const int32_t *vp = &visit[0] if visit.shape[0] else NULL
    cdef const int32_t *cs = g.child_slot if shares else g.child
    cdef const int32_t *ns = g.node_slot if shares else g.ident
    cdef double *W, *T, *P, *Q
    cdef int dom, budget0 = graph.plain_budget(n_blocks), budget = budget0
    # EM's counts only (sums over rows): plain blocks whose roots absorbed an underflow are
    # kept (posteriors below 2^-1022 move by less than 2^-100 absolutely; _forward_roots)
    cdef Py_ssize_t R_kept = roots.shape[0] if g.bounded and want_states and not want_leaf and not want_all else 0
    # Totals over rows that do not depend on the thread count: the blocks form groups fixed by
    # the chunk alone, each group's partial sums start from zero in a slot of its own, and the
    # slots are added to the totals in group order, whichever thread filled them. Per slot:
    # sum edges' partial counts (by edge, or spar order when gathering), counted nodes' counts,
    # inline leaves' state counts.
    cdef Py_ssize_t per = _group_blocks(row_w, n_blocks, reduction_groups()), k, w0, ng, b1
    cdef Py_ssize_t n_groups = (n_blocks + per - 1) // per
    cdef Py_ssize_t n_lanes = SPNC_EDGE_LANES * max(E, 1)
    cdef Py_ssize_t n_glanes = SPNC_EDGE_LANES * max(g.spar_ptr[N] if gather else 1, 1)
    cdef Py_ssize_t n_sacc = state_acc.shape[1] if want_states else 1
    # slots for up to 32 MB of partial sums, at least one per thread: one parallel region for
    # all the groups of a small model's chunk, shared out dynamically (threads of a busy machine
    # are not evenly fast)
    cdef Py_ssize_t n_parts = _parts(n_groups, n_threads, n_lanes + max(N, 1) + (n_glanes if gather else 0)
                                     + (n_sacc if want_states else 0))
    lanes_arr = aligned_empty((n_parts, n_lanes))
    glanes_arr = aligned_empty((n_parts, n_glanes))
    cnt_arr = np.empty((n_parts, max(N, 1)))
    sslot_arr = aligned_empty((n_parts, n_sacc))
    lanes_tot_arr = aligned_empty((1, n_lanes), zero=True)
    glanes_tot_arr = aligned_empty((1, n_glanes), zero=True)
    cnt_tot_arr = np.zeros((1, max(N, 1)))
    cdef double[:, ::1] lanes = lanes_arr, glanes = glanes_arr, cnt = cnt_arr, sslot = sslot_arr
    cdef double[:, ::1] lanes_tot = lanes_tot_arr, glanes_tot = glanes_tot_arr, cnt_tot = cnt_tot_arr
    cdef Py_ssize_t n_cnt = cnt.shape[1]
    for w0 in range(0, n_groups, n_parts):
        ng = min(n_parts, n_groups - w0)
        for k in prange(ng, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
            t = threadid()
            W = &ws[t, 0]
            if shares:
                T = W + 2 * g.n_slots * SPNC_B
                P = T + g.n_sum_edges * SPNC_B
            else:
                T = NULL
                P = W + 2 * N * SPNC_B
            Q = P + g.n_pslots * SPNC_B     # the gathering sweep's q_s and q_s * wt (no shares only)
            memset(&lanes[k, 0], 0, n_lanes * sizeof(double))
            memset(&cnt[k, 0], 0, n_cnt * sizeof(double))
            if gather:
                memset(&glanes[k, 0], 0, n_glanes * sizeof(double))
            if want_states:
                memset(&sslot[k, 0], 0, n_sacc * sizeof(double))
            b1 = min((w0 + k + 1) * per, n_blocks)
            for b in range((w0 + k) * per, b1):
                col0 = b * SPNC_B
                nb = block_net(&st, &net, t, col0)
                dom = _sum_forward(nb, col0, W, cs, ns, T, linear, &budget, &roots[0], R_kept)
                for i in range(start.shape[0]):
                    memset(P + g.pslot[start[i]] * SPNC_B, 0, SPNC_B * sizeof(double))
                _mix_roots(W, ns, &roots[0], roots.shape[0], &root_logw[0], &ll[col0], P, g.pslot, dom, seed)
                if dom == PLAIN and gather:
                    spnc_backward_gather(nb, col0, P, W, Q, &row_w[col0], &glanes[k, 0], &cnt[k, 0],
                                         &leaf_resp[0, 0] if want_leaf else NULL,
                                         &all_post[0, 0] if want_all else NULL,
                                         &sslot[k, 0] if want_states else NULL)
                else:
                    spnc_backward(nb, col0, P, T, W, dom, &row_w[col0], &lanes[k, 0], &cnt[k, 0],
                                  &leaf_resp[0, 0] if want_leaf else NULL, &all_post[0, 0] if want_all else NULL,
                                  &sslot[k, 0] if want_states else NULL, vp, visit.shape[0], rp)
        with nogil:
            for k in range(ng):     # group order: the same sums for every thread count
                _fold(&lanes_tot[0, 0], &lanes[k, 0], n_lanes)
                _fold(&cnt_tot[0, 0], &cnt[k, 0], n_cnt)
                if gather:
                    _fold(&glanes_tot[0, 0], &glanes[k, 0], n_glanes)
                if want_states:
                    _fold(&state_acc[0, 0], &sslot[k, 0], n_sacc)
    graph.plain_record(n_blocks, budget0, budget)
    edges_arr = edge_lane_totals(lanes_tot_arr)
    if gather:
        spar = graph.spar_edge_[:g.spar_ptr[N]]
        edges_arr[:, spar] += edge_lane_totals(glanes_tot_arr)[:, :spar.shape[0]] * graph.w_[spar]
    cdef double[:, ::1] edges = edges_arr
    with nogil:
        spnc_counts_from_parents(&net, &edges[0, 0], &cnt_tot[0, 0])
    if seed != 1.0:
        edges_arr *= 1.0 / seed
        cnt_tot_arr *= 1.0 / seed
    np.asarray(edge_acc)[0, :E] += edges_arr[0, :E]
    np.asarray(node_acc)[0, :N] += cnt_tot_arr[0, :N]


cdef Py_ssize_t _group_blocks(const double[::1] row_w, Py_ssize_t n_blocks, Py_ssize_t groups):
    """Blocks per group: the blocks up to the last with a row of nonzero weight in about
    ``groups`` groups. Padding (weight 0, adds exact zeros) does not move the groups' bounds,
    so a chunk padded to an odd number of blocks sums as one padded to whole blocks."""
    cdef Py_ssize_t n = min(n_blocks * SPNC_B, row_w.shape[0])
    while n > 0 and row_w[n - 1] == 0.0:
        n -= 1
    n = max((n + SPNC_B - 1) // SPNC_B, 1)
    groups = max(1, min(n, groups))
    return (n + groups - 1) // groups


cdef Py_ssize_t _parts(Py_ssize_t n_groups, int n_threads, Py_ssize_t per_slot):
    """Slots of partial sums (``per_slot`` doubles each) for groups reduced in group order:
    every group at once if that fits in 32 MB, else at least one per thread."""
    return max(1, min(n_groups, max(<Py_ssize_t> n_threads, (<Py_ssize_t> 1 << 22) // max(per_slot, 1))))


cdef inline void _fold(double *tot, const double *part, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        tot[i] += part[i]


def select_ws(Graph graph) -> int:
    """Doubles of workspace per thread that :func:`select` needs."""
    return (max(graph.c.n_nodes, 2 * graph.c.n_slots) + 1) * SPNC_B + graph.c.n_sum_edges


def select(Graph graph, LeafStates states, const double[:, ::1] XT, const double[:, ::1] L,
           const int64_t[::1] roots, const double[::1] root_logw, int mode, bint evidence,
           uint64_t seed, int64_t row0, double[::1] root_value, uint8_t[:, ::1] leaf_active,
           const double[::1] row_w, double[:, ::1] edge_acc, double[:, ::1] node_acc,
           double[:, ::1] leaf_resp, int n_threads, double[:, ::1] ws, uint64_t[:, ::1] acts,
           double[:, ::1] out_XT=None, LeafStates ll_states=None, double[::1] ll=None,
           const double[:, :] rows=None, double[:, ::1] out_rows=None, const int32_t[::1] visit=None,
           const uint8_t[::1] clear=None, check=None):
    """Top-down choice of one induced tree per row. mode MAX (MPE, hard EM): max-product
    forward, the best root (first maximum) and the arg-max child at each sum node. mode
    MARGINAL (sampling): a child drawn with probability w_c S_c / S at each sum node; with
    ``evidence`` False nothing is observed, every S is 1 and the forward pass is skipped.
    Writes ``root_value[r]`` (the forward value of the chosen root), marks the chosen
    leaves in ``leaf_active[slot, r]`` and/or ``leaf_resp[slot, r]`` (1.0/0.0) when they
    have rows, and, when ``edge_acc`` has rows, adds ``row_w[r]`` to the edge and node
    counts of the chosen tree (to row 0, the same bits for every ``n_threads``). With
    ``out_XT`` (a copy of ``XT``), the inline discrete leaves on the chosen tree write their
    missing variables there themselves (the leaf tables' ``fill`` is then only needed for the
    others). With ``ll`` (single-root
    models whose leaves are all inline, MPE), the sum-product log-likelihood of each
    completed row is computed in the same block, with ``ll_states`` (MARGINAL tables).
    ``rows``: the chunk's rows, staged block by block in place of ``XT`` (models whose leaves
    are all inline, checked with ``check`` as in :func:`forward`); the completed rows then go
    to ``out_rows`` (same shape), not ``out_XT``. ``visit``, ``clear`` (:func:`spnc._visit.select_visit`, only without leaf flags
    or counts): the nodes swept, the products filling for the leaves that share their slot,
    and which entries clear their slot after them (inactive nodes are skipped)."""
    cdef const GraphC *g = &graph.c
    cdef bint sampling = mode != MAX
    cdef spnc_net net = chunk_net(g, &states.c, XT, L, not sampling)
    cdef Staging st
    bufs = _staging(&st, &net, rows, n_threads, True, check)
    cdef bint staged = rows is not None, unstage = out_rows is not None
    if unstage and not (staged and out_rows.shape[0] == rows.shape[0] and out_rows.shape[1] == rows.shape[1]):
        raise ValueError("select: out_rows needs staged rows of the same shape")
    cdef spnc_net *nb
    cdef spnc_net *lnb
    cdef Py_ssize_t N = g.n_nodes, R = roots.shape[0]
    cdef Py_ssize_t n_blocks = net.m // SPNC_B, b, i, j, t, col0
    cdef int64_t pick
    cdef bint count = edge_acc.shape[0] > 0
    cdef uint8_t *la = &leaf_active[0, 0] if leaf_active.shape[0] > 0 else NULL
    cdef const int32_t *vis = &visit[0] if visit is not None and visit.shape[0] > 0 else NULL
    cdef Py_ssize_t n_vis = visit.shape[0] if vis != NULL else 0
    if vis != NULL and (clear is None or clear.shape[0] != n_vis):
        raise ValueError("select: visit needs its clear flags")
    cdef const uint8_t *vcl = &clear[0] if vis != NULL else NULL
    cdef double *lr = &leaf_resp[0, 0] if leaf_resp.shape[0] > 0 else NULL
    if vis != NULL and (la != NULL or lr != NULL or count):
        raise ValueError("select: a visit list leaves out leaves that flags or counts need")
    cdef double *oxt = &out_XT[0, 0] if out_XT is not None else NULL
    cdef Py_ssize_t n_vars = rows.shape[1] if staged else XT.shape[0]
    # max-product: the forward plan (live nodes), arg-max edges kept per sum; sampling with
    # evidence: every node's log value (the draw at a sum reads its children's)
    cdef const int32_t *cs = g.child if sampling else g.child_slot
    cdef const int32_t *ns = g.ident if sampling else g.node_slot
    cdef const int64_t[::1] start = graph.start_
    cdef bint want_ll = ll is not None
    cdef spnc_net lnet
    if want_ll:
        lnet = chunk_net(g, &ll_states.c, out_XT if not staged else XT, L, True)
        lnet.m = net.m
    cdef Py_ssize_t W_arg = max(N, 2 * g.n_slots) * SPNC_B
    if ws.shape[1] < W_arg + SPNC_B + g.n_sum_edges:
        raise ValueError("select: workspace smaller than select_ws")
    cdef double best, v
    cdef double *W
    cdef uint64_t *A, *G
    cdef int budget0 = graph.plain_budget(n_blocks, True) if want_ll else 0, budget = budget0
    # counts (hard EM) as in backward: fixed groups of blocks whose partial counts start from
    # zero in a slot of their own and are added to row 0 in group order; without counts the
    # groups are the static schedule's thread shares
    cdef Py_ssize_t per = (_group_blocks(row_w, n_blocks, reduction_groups()) if count
                           else max((n_blocks + n_threads - 1) // n_threads, 1)), k, w0, ng
    cdef Py_ssize_t n_groups = (n_blocks + per - 1) // per
    cdef Py_ssize_t nE = edge_acc.shape[1] if count else 1, nN = node_acc.shape[1] if count else 1
    cdef Py_ssize_t n_parts = _parts(n_groups, n_threads, nE + nN) if count else max(n_groups, 1)
    eslot_arr = np.empty((n_parts if count else 1, nE))
    nslot_arr = np.empty((n_parts if count else 1, nN))
    cdef double[:, ::1] eslot = eslot_arr, nslot = nslot_arr
    for w0 in range(0, n_groups, n_parts):
        ng = min(n_parts, n_groups - w0)
        for k in prange(ng, nogil=True, num_threads=n_threads, schedule="dynamic", chunksize=1):
            t = threadid()
            W = &ws[t, 0]
            G = <uint64_t *> (W + W_arg)
            A = &acts[t, 0]
            if count:
                memset(&eslot[k, 0], 0, nE * sizeof(double))
                memset(&nslot[k, 0], 0, nN * sizeof(double))
            for b in range((w0 + k) * per, min((w0 + k + 1) * per, n_blocks)):
                col0 = b * SPNC_B
                nb = block_net(&st, &net, t, col0)
                if vis != NULL:        # every slot starts at 0 (the visited nodes keep them so)
                    memset(A, 0, g.n_pslots * sizeof(uint64_t))
                else:
                    for i in range(start.shape[0]):
                        A[g.pslot[start[i]]] = 0
                if evidence:
                    spnc_forward_log(nb, col0, W, mode, cs, ns, NULL, NULL if sampling else G)
                for j in range(SPNC_B):
                    pick = 0
                    best = 0.0
                    if evidence:
                        pick = _best_root(W, ns, &roots[0], &root_logw[0], R, j, &best)
                    root_value[col0 + j] = best
                    if best > -INFINITY:
                        A[g.pslot[roots[pick]]] |= (<uint64_t> 1) << j
                # staged: the block is completed in place in the thread's buffer
                spnc_select(nb, col0, mode, evidence, W, G, A, seed, row0 + col0, &row_w[col0],
                            &eslot[k, 0] if count else NULL, &nslot[k, 0] if count else NULL, la, lr,
                            <double *> nb.XT if unstage else oxt, A + g.n_pslots, n_vars, vis, vcl, n_vis)
                if unstage:
                    spnc_unstage(nb.XT, &out_rows[col0, 0], out_rows.strides[0] // sizeof(double),
                                 min(<Py_ssize_t> SPNC_B, rows.shape[0] - col0), n_vars)
                if want_ll:
                    lnb = staged_net(&st, &lnet, t, 1, col0) if staged else &lnet
                    if g.linear:
                        _forward_roots(lnb, col0, W, g.child_slot, g.node_slot, &roots[0], 1, &ll[col0], 0, g.bounded,
                                       &budget)
                    else:
                        spnc_forward_log(lnb, col0, W, MARGINAL, g.child_slot, g.node_slot, NULL, NULL)
                        for j in range(SPNC_B):
                            ll[col0 + j] = W[g.node_slot[roots[0]] * SPNC_B + j]
        if count:
            with nogil:
                for k in range(ng):     # group order: the same sums for every thread count
                    _fold(&edge_acc[0, 0], &eslot[k, 0], nE)
                    _fold(&node_acc[0, 0], &nslot[k, 0], nN)
    graph.plain_record(n_blocks, budget0, budget, True)


cdef extern from "_kernels.h":
    int spnc_dq_off
    int SPNC_HAS_DQ() nogil


def dq_paths(on=None) -> bool:
    """Whether this module's sweeps take their AVX-512DQ kernels (the register lookup of
    inline leaves, the vector draws of sampling, the max-product sums); ``on=False`` turns
    them off, so tests can compare them with the generic loops. Not thread-safe: tests only."""
    global spnc_dq_off
    if on is not None:
        spnc_dq_off = not on
    return bool(SPNC_HAS_DQ())
