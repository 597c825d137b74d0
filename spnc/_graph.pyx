# cython: freethreading_compatible=False
"""The compiled graph object every kernel takes, and the structural kernels on it.

:class:`Graph` owns the typed node arrays of an SPN (kinds, CSR children, log weights,
leaf slots) plus the workspace plan of forward-only sweeps, and hands kernels raw pointers
(as scikit-learn's ``Tree`` does). :class:`LeafStates` carries the state tables of discrete
univariate leaves, which the sweep evaluates itself instead of reading a leaf matrix.
"""
import numpy as np
from libc.stdint cimport int32_t, int64_t, uint8_t

from spnc._kinds cimport SUM, PRODUCT, LEAF

#: backward sweeps keep every node's value (two per node and row in the linear domain) when
#: the sums have more than SHARES_PER_NODE edges per node, or the model has at most
#: VALUES_NODES nodes (a 64-row block's values, 4 MB, stay in cache); else one share per sum
#: edge and row, over the live nodes only (a 10^5-node model's values would not)
SHARES_PER_NODE = 2
VALUES_NODES = 4096
#: with every node's value kept, plain blocks gather from sum parents (_gather.h) when the sums
#: have at least this many edges on average; narrower sums push to their children (measured:
#: 4 edges per sum, pushing 5-15 % faster; 25 or more, gathering 6-30 % faster)
GATHER_FAN_IN = 8


cdef class Graph:
    """Typed, read-only structure arrays of an SPN, with the forward workspace plan.

    ``kind`` uint8[N], ``child_ptr`` int64[N+1], ``child`` int32[E] (child < parent),
    ``logw`` float64[E] (0 on product edges), ``leaf_slot`` int64[N] (-1 for internal nodes),
    ``keep`` the nodes (roots) whose forward values must survive the sweep. ``plain``:
    linear sum-product sweeps try plain doubles first (``False`` keeps them scaled, to test
    that both agree). ``bounded``: every leaf value is at most 1 (discrete leaves), so a
    sweep of root values keeps a row's plain value through an underflow it absorbed.
    ``Graph()`` without arguments is an empty shell for :meth:`reweighted`."""

    def __cinit__(self, kind=None, child_ptr=None, child=None, logw=None, leaf_slot=None, keep=None,
                  Py_ssize_t n_leaves=0, weight=None, linear=None, plain=True, bounded=False):
        if kind is None:
            return
        self.kind_ = np.ascontiguousarray(kind, dtype=np.uint8)
        self.child_ptr_ = np.ascontiguousarray(child_ptr, dtype=np.int64)
        self.child_ = np.ascontiguousarray(child, dtype=np.int32)
        self.logw_ = np.ascontiguousarray(logw, dtype=np.float64)
        self.leaf_slot_ = np.ascontiguousarray(leaf_slot, dtype=np.int64)
        self.c.n_nodes = self.kind_.shape[0]
        self.c.n_edges = self.child_.shape[0]
        self.c.n_leaves = n_leaves
        slot, n_slots = plan_slots(self.child_ptr_, self.child_, np.ascontiguousarray(keep, dtype=np.int64))
        self.node_slot_ = slot
        self.child_slot_ = np.ascontiguousarray(slot[self.child_]) if self.c.n_edges else np.zeros(1, np.int32)
        self.c.n_slots = n_slots
        self.ident_ = np.arange(max(self.c.n_nodes, 1), dtype=np.int32)
        self._set_weights(self.logw_, np.exp(self.logw_) if weight is None else weight)
        self.c.plain = self.c.plain_roots = bool(plain)
        self.c.bounded = bool(bounded)
        self.c.linear = choose_linear(self.kind_, self.child_ptr_, self.child_) if linear is None else bool(linear)
        cdef const uint8_t[::1] k = self.kind_
        cdef const int64_t[::1] p = self.child_ptr_
        cdef const int32_t[::1] c = self.child_ if self.c.n_edges else np.zeros(1, np.int32)
        cdef const int64_t[::1] ls = self.leaf_slot_
        cdef const int32_t[::1] cs = self.child_slot_
        cdef const int32_t[::1] ns = self.node_slot_
        cdef const int32_t[::1] idn = self.ident_
        self.c.kind, self.c.child_ptr, self.c.child = &k[0], &p[0], &c[0]
        self.c.leaf_slot, self.c.child_slot, self.c.node_slot, self.c.ident = &ls[0], &cs[0], &ns[0], &idn[0]
        if not self.c.n_edges:  # keep the 1-element placeholder alive
            self.child_ = c.base

        self._plan_backward(keep)

    def _set_weights(self, logw, w):
        """Point the kernels at new edge weights (log, plain, and as mantissa * 2^exponent)."""
        self.logw_ = np.ascontiguousarray(logw if self.c.n_edges else np.zeros(1), dtype=np.float64)
        self.w_ = np.ascontiguousarray(w if self.c.n_edges else np.ones(1), dtype=np.float64)
        self.wm_, self.we_ = split_pow2(self.w_)
        cdef const double[::1] lw = self.logw_
        cdef const double[::1] wp = self.w_
        cdef const double[::1] wm = self.wm_
        cdef const double[::1] we = self.we_
        self.c.logw, self.c.w, self.c.wm, self.c.we = &lw[0], &wp[0], &wm[0], &we[0]

    def reweighted(self, logw, weight) -> "Graph":
        """The same structure with new edge weights (EM's M-step): the workspace and
        backward plans are shared, not redone. Sweeps try plain doubles again, as on a
        new compile."""
        if len(logw) != self.c.n_edges or len(weight) != self.c.n_edges:
            raise ValueError(f"reweighted: {self.c.n_edges} edge weights needed, got {len(logw)} and {len(weight)}")
        cdef Graph g = Graph()
        g.c = self.c
        (g.kind_, g.child_ptr_, g.child_, g.leaf_slot_, g.child_slot_, g.node_slot_, g.ident_) = (
            self.kind_, self.child_ptr_, self.child_, self.leaf_slot_, self.child_slot_, self.node_slot_, self.ident_)
        (g.toff_, g.sidx_, g.pslot_, g.first_, g.alias_, g.start_, g.prod_only_, g.group_, g.counted_) = (
            self.toff_, self.sidx_, self.pslot_, self.first_, self.alias_, self.start_, self.prod_only_, self.group_,
            self.counted_)
        g.spar_ptr_, g.spar_edge_, g.spar_node_, g.pfirst_, g.pbase_ = (
            self.spar_ptr_, self.spar_edge_, self.spar_node_, self.pfirst_, self.pbase_)
        g._set_weights(logw, weight)
        g.c.plain = g.c.plain_roots = True
        if self.visit_cache is None:       # shared: visit lists depend on the structure only
            self.visit_cache = {}
        g.visit_cache = self.visit_cache
        return g

    def _plan_backward(self, keep):
        n_edges = self.c.n_edges
        deg = np.diff(self.child_ptr_)
        is_sum = self.kind_ == SUM
        sum_deg = np.where(is_sum, deg, 0)
        self.toff_ = np.ascontiguousarray(np.cumsum(sum_deg) - sum_deg, dtype=np.int64)
        self.sidx_ = np.ascontiguousarray(np.cumsum(is_sum) - is_sum, dtype=np.int64)
        self.c.n_sum_edges = int(sum_deg.sum())
        self.c.n_sums = int(is_sum.sum())
        self.c.shares = self.c.n_sum_edges <= SHARES_PER_NODE * self.c.n_nodes and self.c.n_nodes > VALUES_NODES
        (self.pslot_, self.first_, self.alias_, self.start_, self.prod_only_, self.group_,
         self.c.n_pslots) = plan_backward(
            self.kind_, self.child_ptr_, self.child_[:n_edges], np.ascontiguousarray(keep, dtype=np.int64))
        cdef const int64_t[::1] to = self.toff_
        cdef const int64_t[::1] si = self.sidx_
        cdef const int32_t[::1] ps = self.pslot_
        cdef const uint8_t[::1] fi = self.first_
        cdef const uint8_t[::1] al = self.alias_
        self.c.toff, self.c.sidx, self.c.pslot, self.c.first, self.c.alias = &to[0], &si[0], &ps[0], &fi[0], &al[0]
        self.counted_ = np.zeros(max(self.c.n_nodes, 1), dtype=np.uint8)
        self.counted_[self.start_] = 1
        cdef const uint8_t[::1] co = self.counted_
        self.c.counted = &co[0]
        self.spar_ptr_, self.spar_edge_, self.spar_node_, self.pfirst_, self.pbase_ = plan_gather(
            self.kind_, self.child_ptr_, self.child_[:n_edges], self.start_)
        cdef const int64_t[::1] gp = self.spar_ptr_
        cdef const int64_t[::1] ge = self.spar_edge_
        cdef const int32_t[::1] gn = self.spar_node_
        cdef const uint8_t[::1] gf = self.pfirst_
        cdef const uint8_t[::1] gb = self.pbase_
        self.c.spar_ptr, self.c.spar_edge, self.c.spar_node, self.c.pfirst, self.c.pbase = \
            &gp[0], &ge[0], &gn[0], &gf[0], &gb[0]
        self.c.gather = self.c.n_sum_edges >= GATHER_FAN_IN * self.c.n_sums

    cdef int plain_budget(self, Py_ssize_t n_blocks, bint roots=False) noexcept:
        """Blocks of a sweep that may be redone scaled before it stops trying plain doubles
        (``roots``: a sweep whose outputs are root values only)."""
        return <int> max(4, n_blocks // 8) if (self.c.plain_roots if roots else self.c.plain) and self.c.linear else 0

    cdef void plain_record(self, Py_ssize_t n_blocks, int budget, int left, bint roots=False) noexcept:
        """Stop trying plain doubles on a model whose blocks keep underflowing (rows of many
        variables): a sweep that spent its whole budget, or one block in four redone over 8+.
        Sweeps of root values and of every node keep their own tally: on a bounded graph the
        first redo only rows whose roots underflowed, the second every block that did."""
        if budget == 0:
            return
        if roots:
            self.roots_blocks += n_blocks
            self.roots_falls += budget - max(left, 0)
            if left <= 0 or (self.roots_falls >= 8 and 4 * self.roots_falls >= self.roots_blocks):
                self.c.plain_roots = False
            return
        self.plain_blocks += n_blocks
        self.plain_falls += budget - max(left, 0)
        if left <= 0 or (self.plain_falls >= 8 and 4 * self.plain_falls >= self.plain_blocks):
            self.c.plain = False

    def __repr__(self):
        return f"Graph(n_nodes={self.c.n_nodes}, n_edges={self.c.n_edges}, n_slots={self.c.n_slots})"

    @property
    def linear(self):
        """True if sum-product sweeps run in the linear domain (see choose_linear)."""
        return bool(self.c.linear)

    @property
    def plain(self):
        """True if linear sweeps of every node try plain doubles before power-of-two scaling."""
        return bool(self.c.plain)

    @property
    def plain_roots(self):
        """True if linear sweeps of root values only try plain doubles first."""
        return bool(self.c.plain_roots)

    @property
    def bounded(self):
        """True if every leaf value is at most 1 (see ``_domains._forward_roots``)."""
        return bool(self.c.bounded)

    @property
    def shares(self):
        """True if backward sweeps keep each sum edge's share (else every node's value)."""
        return bool(self.c.shares)

    @shares.setter
    def shares(self, value):
        self.c.shares = bool(value)

    @property
    def gather(self):
        """True if backward sweeps of plain blocks without shares gather from sum parents
        (``spnc_backward_gather``) instead of pushing to children."""
        return bool(self.c.gather)

    @gather.setter
    def gather(self, value):
        self.c.gather = bool(value)

    @property
    def n_pslots(self):
        """Slots of the backward and selection sweeps (see plan_backward)."""
        return self.c.n_pslots

    @property
    def n_slots(self):
        """Workspace rows of a forward-only sweep (the live set, see plan_slots)."""
        return self.c.n_slots


cdef class LeafStates:
    """``var`` int32[N] (-1: not inline), ``off`` int64[N], ``logp`` float64[T] (the
    log-probabilities of the states of every inline leaf), ``miss`` float64[N] (its value
    when the variable is missing, for the query's mode), ``nst``/``best`` int32[N] (its
    number of states and most probable state, for selection), ``skip`` uint8[N] (inline
    leaves that only products read, which read them from the data themselves)."""

    def __cinit__(self, var, off, logp, miss, nst=None, best=None, skip=None):
        self.var_ = np.ascontiguousarray(var, dtype=np.int32)
        self.skip_ = np.ascontiguousarray(np.zeros(len(self.var_)) if skip is None else skip, dtype=np.uint8)
        cdef const uint8_t[::1] sk = self.skip_
        self.c.skip = &sk[0]
        self.nst_ = np.ascontiguousarray(np.zeros(len(self.var_)) if nst is None else nst, dtype=np.int32)
        self.best_ = np.ascontiguousarray(np.zeros(len(self.var_)) if best is None else best, dtype=np.int32)
        cdef const int32_t[::1] ns = self.nst_
        cdef const int32_t[::1] bs = self.best_
        self.c.nst, self.c.best = &ns[0], &bs[0]
        self.off_ = np.ascontiguousarray(off, dtype=np.int64)
        self.logp_ = np.ascontiguousarray(logp if len(logp) else np.zeros(1), dtype=np.float64)
        self.miss_ = np.ascontiguousarray(miss, dtype=np.float64)
        with np.errstate(under="ignore"):
            self.lin_ = np.ascontiguousarray(np.exp(self.logp_))
        self.lm_, self.le_ = split_pow2(self.lin_)
        cdef const double[::1] lm = self.lm_
        cdef const double[::1] le = self.le_
        cdef const double[::1] ln = self.lin_
        self.c.lm, self.c.le, self.c.lin = &lm[0], &le[0], &ln[0]
        cdef const int32_t[::1] v = self.var_
        cdef const int64_t[::1] o = self.off_
        cdef const double[::1] lp = self.logp_
        cdef const double[::1] ms = self.miss_
        self.c.var, self.c.off, self.c.logp, self.c.miss = &v[0], &o[0], &lp[0], &ms[0]


#: exponent of a zero value in linear sweeps (SPNC_NOEXP in _kernels.h)
NOEXP = -1.7976931348623157e308


def split_pow2(x):
    """(m, e) with x = m * 2^e, m in [0.5, 1) (0 and NOEXP for x == 0), as float64."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    e = e.astype(np.float64)
    e[m == 0] = NOEXP
    return np.ascontiguousarray(m), np.ascontiguousarray(e)


def choose_linear(kind, child_ptr, child):
    """Whether sum-product sweeps run in the linear domain: a sum edge costs about a third
    of its log-domain cost there (no exp), a product edge about twice (a multiply and an
    add instead of an add), so the linear sweep wins unless products dominate."""
    deg = np.diff(child_ptr)
    sum_edges = int(deg[np.asarray(kind) == SUM].sum())
    prod_edges = int(deg[np.asarray(kind) == PRODUCT].sum())
    return 20 * sum_edges + 2 * len(kind) >= 1 * prod_edges


def plan_gather(kind, child_ptr, child, start):
    """The gathering backward sweep's view of the edges (see ``spnc_backward_gather``):
    each node's sum-parent edges (``spar_ptr`` int64[N+1], ``spar_edge`` int64, ``spar_node``
    int32 parents, grouped by child in edge order), ``pfirst`` uint8[E] (a product edge
    whose parent is the child's highest product parent, the child no start node: it writes
    the child's slot, later ones add) and ``pbase`` uint8[N] (start nodes and children of
    products: the slot already holds part of the posterior when the node is reached)."""
    N, E = len(kind), len(child)
    parent = np.repeat(np.arange(N, dtype=np.int64), np.diff(child_ptr))
    by_sum = np.asarray(kind)[parent] == SUM
    se = np.flatnonzero(by_sum)
    spar_edge = se[np.argsort(child[se], kind="stable")]
    spar_ptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(np.bincount(child[se], minlength=N), out=spar_ptr[1:])
    pe = np.flatnonzero(~by_sum & (np.asarray(kind)[parent] == PRODUCT))
    top = np.full(N, -1, dtype=np.int64)
    np.maximum.at(top, child[pe], parent[pe])
    is_start = np.zeros(N, dtype=bool)
    is_start[start] = True
    pfirst = np.zeros(max(E, 1), dtype=np.uint8)
    pfirst[pe] = (parent[pe] == top[child[pe]]) & ~is_start[child[pe]]
    pbase = np.zeros(max(N, 1), dtype=np.uint8)
    pbase[start] = 1
    pbase[child[pe]] = 1
    return (spar_ptr, np.ascontiguousarray(spar_edge if se.size else np.zeros(1, np.int64)),
            np.ascontiguousarray(parent[spar_edge].astype(np.int32) if se.size else np.zeros(1, np.int32)),
            pfirst, pbase)


def plan_backward(const uint8_t[::1] kind, const int64_t[::1] child_ptr, const int32_t[::1] child,
                  const int64_t[::1] roots):
    """Slots of the backward (top-down) sweeps, in which every node's posterior (or flag) is
    live from its first (highest) parent to itself. A node whose only parent is a product
    (and that is no root) shares that parent's slot: its posterior is the parent's. Returns
    (pslot int32[N], first uint8[E] (the edge's parent is the child's first writer), alias
    uint8[N], start int64[] (roots and parentless nodes: their slots are zeroed before the
    sweep), prod_only uint8[N] (the node has parents, all of them products, and is no
    root), group int64[N] (the highest node of n's chain of aliases: n's posterior is its
    posterior), n_slots)."""
    cdef Py_ssize_t N = kind.shape[0], E = child.shape[0], n, e, c
    maxpar_arr = np.full(N, -1, dtype=np.int64)
    indeg_arr = np.zeros(N, dtype=np.int64)
    is_root_arr = np.zeros(N, dtype=np.uint8)
    pslot_arr = np.zeros(max(N, 1), dtype=np.int32)
    first_arr = np.zeros(max(E, 1), dtype=np.uint8)
    alias_arr = np.zeros(max(N, 1), dtype=np.uint8)
    prod_arr = np.zeros(max(N, 1), dtype=np.uint8)
    grp_arr = np.zeros(max(N, 1), dtype=np.int64)
    last_arr = np.zeros(max(N, 1), dtype=np.int64)
    free_arr = np.empty(N + 1, dtype=np.int32)
    cdef int64_t[::1] maxpar = maxpar_arr, indeg = indeg_arr, grp = grp_arr, last = last_arr
    cdef uint8_t[::1] is_root = is_root_arr, first = first_arr, alias = alias_arr, prod = prod_arr
    cdef int32_t[::1] pslot = pslot_arr, free_ = free_arr
    cdef int64_t nfree = 0, nslots = 0
    for n in range(roots.shape[0]):
        is_root[roots[n]] = 1
    with nogil:
        for n in range(N):
            prod[n] = 1
        for n in range(N):
            for e in range(child_ptr[n], child_ptr[n + 1]):
                c = child[e]
                indeg[c] += 1
                maxpar[c] = n
                if kind[n] != PRODUCT:
                    prod[c] = 0
        for n in range(N):
            if indeg[n] == 0 or is_root[n]:
                prod[n] = 0
            alias[n] = indeg[n] == 1 and not is_root[n] and kind[maxpar[n]] == PRODUCT
        for n in range(N):
            for e in range(child_ptr[n], child_ptr[n + 1]):
                c = child[e]
                first[e] = maxpar[c] == n and not is_root[c]
        for n in range(N - 1, -1, -1):
            grp[n] = grp[maxpar[n]] if alias[n] else n
            last[grp[n]] = n          # descending: ends at the group's lowest node
        for n in range(N):
            if (indeg[n] == 0 or is_root[n]) and not alias[n]:
                pslot[n] = <int32_t> nslots
                nslots += 1
        for n in range(N - 1, -1, -1):
            for e in range(child_ptr[n], child_ptr[n + 1]):
                c = child[e]
                if alias[c]:
                    pslot[c] = pslot[n]
                elif first[e]:
                    if nfree > 0:
                        nfree -= 1
                        pslot[c] = free_[nfree]
                    else:
                        pslot[c] = <int32_t> nslots
                        nslots += 1
            if last[grp[n]] == n:
                free_[nfree] = pslot[n]
                nfree += 1
    start = np.flatnonzero((indeg_arr == 0) | (is_root_arr == 1)).astype(np.int64)
    return pslot_arr, first_arr, alias_arr, start, prod_arr, grp_arr, max(int(nslots), 1)


def plan_slots(const int64_t[::1] child_ptr, const int32_t[::1] child, const int64_t[::1] keep):
    """Workspace slot of every node for a forward-only sweep: a slot is reused once the
    node's last parent has read it, so the workspace holds the live set, not all N nodes
    (for tree-shaped models a small fraction, which keeps the sweep in cache). Nodes in
    ``keep`` (the roots) are never freed. Returns (slot int32[N], n_slots)."""
    cdef Py_ssize_t N = child_ptr.shape[0] - 1, n, e
    last_arr = np.full(N, -1, dtype=np.int64)
    slot_arr = np.empty(max(N, 1), dtype=np.int32)
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
