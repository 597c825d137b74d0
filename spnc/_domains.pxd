"""The number formats of a forward block (log, scaled, plain doubles), which one a block
ran in, and the log of a node's value read back from any of them."""
from libc.math cimport INFINITY, exp, frexp, isfinite, log
from libc.stdint cimport int32_t, int64_t, uint64_t

from spnc._kinds cimport MARGINAL
from spnc._net cimport (spnc_net, SPNC_B, spnc_forward_log, spnc_forward_lin, spnc_forward_plain, spnc_fp_clear,
                       spnc_fp_bad, spnc_budget_left, spnc_budget_spend)

cdef enum:
    LOG_DOMAIN = 0      # log values, one per slot and row
    SCALED = 1          # mantissa and power-of-two exponent (two per slot and row)
    PLAIN = 2           # linear values as plain doubles


cdef inline uint64_t _rows_to_redo(const double *W, const int32_t *ns, const int64_t *nodes,
                                   Py_ssize_t R) noexcept nogil:
    """Bit j set where a plain value of ``nodes`` (row j) is below 2^-960 or not finite: the
    rows that an underflowed block cannot keep (see :func:`_forward_roots`)."""
    cdef Py_ssize_t i, j
    cdef uint64_t redo = 0
    cdef double v
    for i in range(R):
        for j in range(SPNC_B):
            v = W[ns[nodes[i]] * SPNC_B + j]
            if not (1.0261342003245941e-289 <= v <= 1.7976931348623157e308):
                redo |= (<uint64_t> 1) << j
    return redo


cdef inline int _sum_forward(const spnc_net *net, int64_t col0, double *W, const int32_t *cs,
                             const int32_t *ns, double *T, bint linear, int *budget,
                             const int64_t *roots=NULL, Py_ssize_t R=0) noexcept nogil:
    """Sum-product forward of one block; returns the domain its values are in. A linear
    block runs on plain doubles first and is redone scaled only if that pass underflowed or
    overflowed (the values then agree bit for bit, see _plain.h); each redo spends one of
    the sweep's ``budget``, and with none left the blocks go scaled at once. With ``roots``
    (a bounded graph, see :func:`_forward_roots`, and outputs that are sums over rows), a
    block whose every row keeps its roots' plain values is not redone."""
    if not linear:
        spnc_forward_log(net, col0, W, MARGINAL, cs, ns, T, NULL)
        return LOG_DOMAIN
    if spnc_budget_left(budget):
        spnc_fp_clear()
        spnc_forward_plain(net, col0, W, cs, ns, T)
        if not spnc_fp_bad() or (R > 0 and not _rows_to_redo(W, ns, roots, R)):
            return PLAIN
        spnc_budget_spend(budget)
    spnc_forward_lin(net, col0, W, cs, ns, T)
    return SCALED


cdef inline double _root_log(const double *W, int64_t slot, Py_ssize_t j, int domain) noexcept nogil:
    """log of the value of the node in ``slot``, row j of the block. Plain values are split
    into mantissa and exponent first, so both linear domains give the same bits."""
    cdef double m
    cdef int e
    if domain == LOG_DOMAIN:
        return W[slot * SPNC_B + j]
    if domain == PLAIN:
        m = frexp(W[slot * SPNC_B + j], &e)
        return log(m) + e * 0.6931471805599453 if m > 0.0 else -INFINITY
    m = W[slot * 2 * SPNC_B + j]
    return log(m) + W[slot * 2 * SPNC_B + SPNC_B + j] * 0.6931471805599453 if m > 0.0 else -INFINITY


cdef inline void _forward_roots(const spnc_net *net, int64_t col0, double *W, const int32_t *cs,
                                const int32_t *ns, const int64_t *nodes, Py_ssize_t R, double *out,
                                Py_ssize_t stride, bint bounded, int *budget) noexcept nogil:
    """A linear sum-product block whose only outputs are the log values of ``nodes``:
    ``out[i * stride + j]`` for node i and row j. As :func:`_sum_forward`, except that on a
    ``bounded`` graph (every leaf value at most 1) an underflow in the plain pass redoes only
    the rows whose own values of ``nodes`` fell below 2^-960 (or overflowed). A row is
    computed lane by lane, so its plain values never depend on the other rows. With every
    leaf value at most 1 and normalised sums, a root's derivative by any node is at most 1,
    so each rounding below 2^-1022 moves a root by at most 2^-1075: a kept root (2^-960 or
    more) is within n * 2^-115 relative of the scaled sweep's after n such roundings, though
    not always its bits."""
    cdef Py_ssize_t i, j
    cdef uint64_t redo = ~(<uint64_t> 0)
    cdef bint bad
    if spnc_budget_left(budget):
        spnc_fp_clear()
        spnc_forward_plain(net, col0, W, cs, ns, NULL)
        bad = spnc_fp_bad()
        if not bad or bounded:
            for i in range(R):
                for j in range(SPNC_B):
                    out[i * stride + j] = _root_log(W, ns[nodes[i]], j, PLAIN)
            redo = _rows_to_redo(W, ns, nodes, R) if bad else 0
            if not redo:
                return
        spnc_budget_spend(budget)
    spnc_forward_lin(net, col0, W, cs, ns, NULL)
    for i in range(R):
        for j in range(SPNC_B):
            if (redo >> j) & 1:
                out[i * stride + j] = _root_log(W, ns[nodes[i]], j, SCALED)


cdef inline int64_t _best_root(const double *W, const int32_t *slot, const int64_t *roots,
                               const double *root_logw, Py_ssize_t R, Py_ssize_t j,
                               double *best) noexcept nogil:
    """The first root maximising its log value (row j of the block, W in log domain) plus its
    log weight; that maximum in ``best`` (-inf when every root gives the row probability 0)."""
    cdef int64_t pick = 0
    cdef Py_ssize_t i
    cdef double v
    best[0] = -INFINITY
    for i in range(R):
        v = W[slot[roots[i]] * SPNC_B + j] + root_logw[i]
        if v > best[0]:
            best[0] = v
            pick = i
    return pick


cdef inline void _mix_roots(const double *W, const int32_t *slot, const int64_t *roots, Py_ssize_t R,
                            const double *root_logw, double *ll, double *P, const int32_t *pslot, int domain,
                            double seed) noexcept nogil:
    """ll[j] = log sum_i exp(log S_root_i[j] + root_logw[i]) (root values in their forward
    ``slot``); P[pslot[root_i], j] += the root's share times ``seed`` (a power of two). A
    single root with a finite log value takes no exp or log: exp(0) is 1 and log(1) is 0, so
    its bits are the general path's."""
    cdef Py_ssize_t i, j
    cdef double mx, s, v
    for j in range(SPNC_B):
        if R == 1:
            v = _root_log(W, slot[roots[0]], j, domain) + root_logw[0]
            if isfinite(v):
                ll[j] = v
                if P != NULL:
                    P[pslot[roots[0]] * SPNC_B + j] += seed
                continue
        mx = -INFINITY
        for i in range(R):
            v = _root_log(W, slot[roots[i]], j, domain) + root_logw[i]
            if v > mx:
                mx = v
        s = 0.0
        if mx > -INFINITY:
            for i in range(R):
                s = s + exp(_root_log(W, slot[roots[i]], j, domain) + root_logw[i] - mx)
            ll[j] = mx + log(s)
            if P != NULL:
                for i in range(R):
                    P[pslot[roots[i]] * SPNC_B + j] += exp(_root_log(W, slot[roots[i]], j, domain) + root_logw[i] - ll[j]) * seed
        else:
            ll[j] = -INFINITY
