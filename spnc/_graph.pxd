from libc.stdint cimport int32_t, int64_t, uint8_t

cdef struct GraphC:
    Py_ssize_t n_nodes, n_edges, n_leaves, n_slots
    const uint8_t *kind
    const int64_t *child_ptr
    const int32_t *child
    const double *logw
    const double *wm               # edge weights as wm * 2^we (wm in [0.5, 1)) for linear sweeps
    const double *we
    bint linear                    # sum-product sweeps run in the linear domain
    const int64_t *leaf_slot
    const int32_t *child_slot      # workspace slot of each edge's child (forward-only sweeps)
    const int32_t *node_slot       # workspace slot of each node (forward-only sweeps)
    const int32_t *ident           # identity slots (every node keeps its values)


cdef struct StatesC:
    const int32_t *var             # (N,) variable of an inline leaf, -1 otherwise
    const int64_t *off             # (N,) offset of its states in logp
    const double *logp             # log-probability of each state
    const double *miss             # (N,) value when the variable is missing (per mode)
    const double *lm               # the states' probabilities as lm * 2^le (linear sweeps)
    const double *le
    const int32_t *nst             # (N,) number of states of an inline leaf
    const int32_t *best            # (N,) its most probable state (first maximum)


cdef class Graph:
    """The compiled structure every kernel takes (see spnc/_graph.pyx)."""
    cdef readonly object kind_, child_ptr_, child_, logw_, leaf_slot_, child_slot_, node_slot_, ident_, wm_, we_
    cdef GraphC c


cdef class LeafStates:
    """Discrete univariate leaves evaluated inside the sweep (a state table per leaf)."""
    cdef readonly object var_, off_, logp_, miss_, lm_, le_, nst_, best_
    cdef StatesC c
