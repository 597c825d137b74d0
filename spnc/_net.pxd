# The C sweeps over one block (_select.h and the headers it includes) as Cython sees them,
# and the chunk's C view and per-block staging of rows that the sweep drivers in _infer.pyx
# share.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

from spnc._graph cimport GraphC, StatesC

cdef extern from "_select.h" nogil:
    int SPNC_B
    int SPNC_STATE_LANES
    int SPNC_EDGE_LANES
    ctypedef struct spnc_net:
        int64_t n_nodes
        const uint8_t *kind
        const int64_t *child_ptr
        const int32_t *child
        const double *logw
        const double *wm
        const double *we
        const double *w
        const int64_t *leaf_slot
        const int64_t *toff
        const int64_t *sidx
        const int32_t *pslot
        const uint8_t *first
        const uint8_t *alias
        const uint8_t *counted
        const int64_t *spar_ptr
        const int64_t *spar_edge
        const int32_t *spar_node
        const uint8_t *pfirst
        const uint8_t *pbase
        const uint8_t *skip
        const int32_t *var
        const int64_t *off
        const double *logp
        const double *miss
        const double *lm
        const double *le
        const double *lin
        const int32_t *nst
        const int32_t *best
        const double *XT
        const double *L
        int64_t m
        int64_t xm
        int64_t x0
    void spnc_forward_log(const spnc_net *g, int64_t col0, double *W, int mode, const int32_t *cs,
                          const int32_t *ns, double *T, uint64_t *G)
    void spnc_forward_log_some(const spnc_net *g, int64_t col0, double *W, int mode, const int32_t *cs,
                               const int32_t *ns, const int64_t *nodes, int64_t n_list)
    void spnc_forward_lin(const spnc_net *g, int64_t col0, double *W, const int32_t *cs, const int32_t *ns,
                          double *T)
    void spnc_forward_plain(const spnc_net *g, int64_t col0, double *W, const int32_t *cs, const int32_t *ns,
                            double *T)
    void spnc_fp_clear()
    int spnc_fp_bad()
    int spnc_budget_left(const int *b)
    void spnc_budget_spend(int *b)
    ctypedef struct spnc_runs:
        const int64_t *ptr
        const int32_t *var
        const int64_t *off
        const int32_t *nst
    void spnc_backward(const spnc_net *g, int64_t col0, double *P, const double *T, const double *W,
                       int domain, const double *wt, double *edge_acc, double *node_acc,
                       double *leaf_resp, double *all_post, double *state_acc, const int32_t *visit,
                       int64_t n_visit, const spnc_runs *runs)
    void spnc_counts_from_parents(const spnc_net *g, const double *edge_cnt, double *cnt)
    void spnc_backward_gather(const spnc_net *g, int64_t col0, double *P, const double *W, double *Q,
                              const double *wt, double *sacc, double *node_acc,
                              double *leaf_resp, double *all_post, double *state_acc)
    void spnc_select(const spnc_net *g, int64_t col0, int mode, int evidence, const double *W,
                     const uint64_t *G, uint64_t *A, uint64_t seed, int64_t row, const double *row_w,
                     double *edge_acc, double *node_acc, uint8_t *leaf_active, double *leaf_resp,
                     double *out_XT, uint64_t *mb, int64_t n_vars, const int32_t *visit,
                     const uint8_t *vclear, int64_t n_visit)
    void spnc_route(const spnc_net *g, const uint64_t *G, uint64_t *A, uint64_t *bits, int64_t stride,
                    double *edge_acc)
    int spnc_stage(const double *X, int64_t rs, int64_t cs, int64_t n, int64_t n_vars, double *xb,
                   const double *card)
    void spnc_stage_ahead(const double *X, int64_t rs, int64_t cs, int64_t n_ahead, int64_t n_vars)
    void spnc_unstage(const double *xb, double *Y, int64_t rs, int64_t n, int64_t n_vars)

cdef struct Staging:
    # rows of the chunk that each block stages itself (instead of a transposed chunk)
    const double *X
    int64_t rs, cs, n, n_vars
    bint ahead                  # prefetch the next block's rows (not where the sweep's
                                # own workspace outgrows the caches: the backward pass)
    double *buf                 # n_vars * SPNC_B per thread
    const double *card          # not NULL: each staged block is checked against these state
    uint8_t *bad                # counts (spnc_bad); thread t sets bad[t] if one had a bad value
    spnc_net *nets              # two per thread: the sweep's nets reading its staged block


cdef inline spnc_net *block_net(Staging *st, spnc_net *net, int t, int64_t col0) noexcept nogil:
    """The net thread ``t`` sweeps the block at ``col0`` with: ``net`` itself, or a copy
    reading the block's rows staged into the thread's buffer (bad values checked there and
    made NaN, if ``st.card`` is set)."""
    if st.X == NULL:
        return net
    cdef double *xb = st.buf + t * st.n_vars * SPNC_B
    if spnc_stage(st.X + col0 * st.rs, st.rs, st.cs, min(<int64_t> SPNC_B, st.n - col0), st.n_vars, xb, st.card):
        st.bad[t] = 1
    if st.ahead and col0 + SPNC_B < st.n:
        spnc_stage_ahead(st.X + (col0 + SPNC_B) * st.rs, st.rs, st.cs, min(<int64_t> SPNC_B, st.n - col0 - SPNC_B),
                         st.n_vars)
    return staged_net(st, net, t, 0, col0)


cdef inline spnc_net *staged_net(Staging *st, spnc_net *net, int t, int which, int64_t col0) noexcept nogil:
    """Copy ``which`` (0 or 1) of thread ``t``: ``net`` reading the block already staged."""
    cdef spnc_net *nb = &st.nets[2 * t + which]
    nb[0] = net[0]
    nb.XT = st.buf + t * st.n_vars * SPNC_B
    nb.xm = SPNC_B
    nb.x0 = col0
    return nb


cdef inline spnc_net chunk_net(const GraphC *g, const StatesC *s, const double[:, ::1] XT,
                               const double[:, ::1] L, bint skip) noexcept:
    """The C view of a sweep over one chunk; ``skip``: inline leaves that only products
    read are not materialised (forward-only sweeps, whose workspace is the plan's)."""
    cdef spnc_net c
    c.n_nodes = g.n_nodes
    c.kind, c.child_ptr, c.child, c.logw, c.wm, c.we = g.kind, g.child_ptr, g.child, g.logw, g.wm, g.we
    c.w = g.w
    c.leaf_slot, c.toff, c.sidx, c.pslot, c.first, c.alias = g.leaf_slot, g.toff, g.sidx, g.pslot, g.first, g.alias
    c.counted = g.counted
    c.spar_ptr, c.spar_edge, c.spar_node, c.pfirst, c.pbase = g.spar_ptr, g.spar_edge, g.spar_node, g.pfirst, g.pbase
    c.skip = s.skip if skip else NULL
    c.var, c.off, c.logp, c.miss, c.lm, c.le, c.nst, c.best = s.var, s.off, s.logp, s.miss, s.lm, s.le, s.nst, s.best
    c.lin = s.lin
    c.XT = &XT[0, 0] if XT.shape[1] else NULL
    c.L = &L[0, 0]
    c.m = c.xm = XT.shape[1]
    c.x0 = 0
    return c
