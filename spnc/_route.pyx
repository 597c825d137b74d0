# cython: freethreading_compatible=False
"""Merging's hard routing of rows down max-product induced trees, one compiled sweep per
chunk (see :mod:`spnc.learn.routing`); the kernels' conventions are those of
:mod:`spnc._infer`."""
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t, uint64_t

from spnc._graph cimport Graph, GraphC, LeafStates
from spnc._kinds cimport MAX
from spnc._net cimport spnc_net, chunk_net, SPNC_B, spnc_forward_log, spnc_route
from spnc._domains cimport _best_root


def route(Graph graph, LeafStates states, const double[:, ::1] XT, const double[:, ::1] L,
          const int64_t[::1] roots, const double[::1] root_logw, bint pick_one, Py_ssize_t m_valid,
          uint64_t[:, ::1] bits, Py_ssize_t word0, double[:, ::1] edge_acc, int n_threads, double[:, ::1] ws,
          uint64_t[:, ::1] acts, const uint64_t[:, ::1] entry=None):
    """Hard routing of the chunk's first ``m_valid`` rows (merging, see spnc.learn.routing):
    a max-product forward, then each row follows its max-product induced tree from the root
    (``pick_one``: the first root maximising value + ``root_logw``, even at probability zero;
    else every root). Node n's rows go to bits ``bits[n, word0 + w]`` (rows ``64 w`` to
    ``64 w + 63``); each sum edge's rows are counted in ``edge_acc[t, e]`` (thread t); ``ws``,
    ``acts`` as for :func:`spnc._infer.select`. ``entry`` (without ``pick_one``): the rows entering each
    root, as bits laid out like ``bits``, instead of every row entering every root."""
    cdef const GraphC *g = &graph.c
    cdef spnc_net net = chunk_net(g, &states.c, XT, L, True)
    cdef Py_ssize_t R = roots.shape[0], wpb = SPNC_B // 64
    cdef Py_ssize_t n_blocks = (m_valid + SPNC_B - 1) // SPNC_B, b, i, j, t, col0
    cdef Py_ssize_t W_arg = max(g.n_nodes, 2 * g.n_slots) * SPNC_B
    cdef const int64_t[::1] start = graph.start_
    cdef int64_t pick
    cdef double best
    cdef double *W
    cdef uint64_t *A, *G
    cdef bint has_entry = entry is not None and not pick_one
    if ws.shape[1] < W_arg + SPNC_B + g.n_sum_edges:
        raise ValueError("route: workspace smaller than select_ws")
    if n_blocks * SPNC_B > XT.shape[1] or word0 + n_blocks * wpb > bits.shape[1] or bits.shape[0] != g.n_nodes:
        raise ValueError("route: bits or chunk too small")
    if has_entry and (entry.shape[0] != R or word0 + n_blocks * wpb > entry.shape[1]):
        raise ValueError("route: entry must hold a row of bits per root")
    if n_blocks == 0:
        return
    for b in prange(n_blocks, nogil=True, num_threads=n_threads, schedule="static"):
        t = threadid()
        W = &ws[t, 0]
        G = <uint64_t *> (W + W_arg)
        A = &acts[t, 0]
        col0 = b * SPNC_B
        for i in range(start.shape[0]):
            A[g.pslot[start[i]]] = 0
        spnc_forward_log(&net, col0, W, MAX, g.child_slot, g.node_slot, NULL, G)
        if has_entry:
            for i in range(R):
                A[g.pslot[roots[i]]] |= entry[i, word0 + b * wpb]
        else:
            for j in range(min(SPNC_B, m_valid - col0)):
                if pick_one:
                    pick = _best_root(W, g.node_slot, &roots[0], &root_logw[0], R, j, &best)
                    A[g.pslot[roots[pick]]] |= (<uint64_t> 1) << j
                else:
                    for i in range(R):
                        A[g.pslot[roots[i]]] |= (<uint64_t> 1) << j
        spnc_route(&net, G, A, &bits[0, word0 + b * wpb], bits.shape[1], &edge_acc[t, 0])
