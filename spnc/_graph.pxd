from libc.stdint cimport int32_t, int64_t, uint8_t

cdef struct GraphC:
    Py_ssize_t n_nodes, n_edges, n_leaves, n_slots
    const uint8_t *kind
    const int64_t *child_ptr
    const int32_t *child
    const double *logw
    const double *wm               # edge weights as wm * 2^we (wm in [0.5, 1)) for linear sweeps
    const double *we
    const double *w                # the same weights as plain doubles
    bint linear                    # sum-product sweeps run in the linear domain
    bint plain                     # linear sweeps of every node try plain doubles first (see _plain.h)
    bint plain_roots               # the same for sweeps whose outputs are root values only
    bint bounded                   # every leaf value is at most 1 (see _domains._forward_roots)
    const int64_t *leaf_slot
    const int32_t *child_slot      # workspace slot of each edge's child (forward-only sweeps)
    const int32_t *node_slot       # workspace slot of each node (forward-only sweeps)
    const int32_t *ident           # identity slots (every node keeps its values)
    # backward and selection sweeps (see plan_backward)
    Py_ssize_t n_sums, n_sum_edges, n_pslots
    bint shares                    # backward keeps edge shares (else every node's value)
    const int64_t *toff            # sum node: its first edge's row in the edge-share buffer
    const int64_t *sidx            # sum node: its index among the sums
    const int32_t *pslot           # backward slot of each node
    const uint8_t *first           # edge: its parent is the child's first (highest) writer
    const uint8_t *alias           # node shares the slot of its only parent, a product
    const uint8_t *counted         # node: the backward sweep sums its count (the others follow)
    # the gathering backward sweep (plain blocks of models without shares, see plan_gather)
    bint gather                    # use it (False: the pushing sweep, to compare the two)
    const int64_t *spar_ptr        # node: its sum-parent edges in spar_edge[spar_ptr[n]:...]
    const int64_t *spar_edge       # those edges, grouped by child
    const int32_t *spar_node       # and their parents
    const uint8_t *pfirst          # product edge: its parent is the child's first product writer
    const uint8_t *pbase           # node: its slot holds a value before its sum parents are added


cdef struct StatesC:
    const int32_t *var             # (N,) variable of an inline leaf, -1 otherwise
    const int64_t *off             # (N,) offset of its states in logp
    const double *logp             # log-probability of each state
    const double *miss             # (N,) value when the variable is missing (per mode)
    const double *lm               # the states' probabilities as lm * 2^le (linear sweeps)
    const double *le
    const double *lin              # lm * 2^le as plain doubles (plain sweeps, sampling)
    const int32_t *nst             # (N,) number of states of an inline leaf
    const int32_t *best            # (N,) its most probable state (first maximum)
    const uint8_t *skip            # (N,) inline leaf read only by product parents (never materialised)


cdef class Graph:
    """The compiled structure every kernel takes (see spnc/_graph.pyx)."""
    cdef readonly object kind_, child_ptr_, child_, logw_, leaf_slot_, child_slot_, node_slot_, ident_, wm_, we_, w_
    cdef readonly object toff_, sidx_, pslot_, first_, alias_, start_, prod_only_, group_, counted_
    cdef readonly object spar_ptr_, spar_edge_, spar_node_, pfirst_, pbase_
    cdef GraphC c
    cdef public Py_ssize_t plain_blocks, plain_falls   # linear blocks tried plain, and redone
    cdef public Py_ssize_t roots_blocks, roots_falls   # the same, of sweeps of root values only
    cdef public object visit_cache     # spnc._visit.backward_visit's lists
    cdef int plain_budget(self, Py_ssize_t n_blocks, bint roots=*) noexcept
    cdef void plain_record(self, Py_ssize_t n_blocks, int budget, int left, bint roots=*) noexcept


cdef class LeafStates:
    """Discrete univariate leaves evaluated inside the sweep (a state table per leaf)."""
    cdef readonly object var_, off_, logp_, miss_, lm_, le_, lin_, nst_, best_, skip_
    cdef StatesC c
