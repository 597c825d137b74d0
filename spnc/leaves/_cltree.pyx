# cython: language_level=3
"""Message passing on Chow-Liu trees of discrete variables (all leaves of one
:class:`spnc.leaves.cltree.CLTreeLeafType` table at once): log-likelihoods, marginals and
max-marginals, and conditional modes and samples. Parallel over rows; trusts its arguments
(spnc/leaves/cltree.py checks them)."""
import numpy as np

from cython.parallel cimport prange, parallel
from libc.float cimport DBL_MIN
from libc.math cimport exp, log, INFINITY, isnan
from libc.stdint cimport uint8_t, int32_t, int64_t, uint64_t
from libc.stdlib cimport malloc, free

from spnc._kinds cimport MARGINAL, MAX
from spnc._random cimport rand_uniform


cdef extern from "_cltree_block.h" nogil:
    void spnc_cl_complete(const int64_t *var_ptr, const int64_t *coff, const int32_t *card,
                          const double *logcpt, const int32_t *cpar, const int32_t *cvar,
                          const int32_t *codes, int64_t L, const int64_t *slot, double *out,
                          int64_t stride, int64_t nb, double *acc)


#: messages below this (DBL_MIN * 2^53) may have lost digits to underflowing products
cdef double TINY_MESSAGE = DBL_MIN * 9007199254740992.0


# ---------------------------------------------------------------------------------------
# message passing on trees (all leaves of one table at once)
#
# Flat layout over the concatenated scopes of the L leaves: leaf i owns flat variables
# var_ptr[i] .. var_ptr[i+1]-1. For flat variable f: gvar[f] (row of XT), card[f],
# fpar[f] (flat index of its parent, -1 at the root), coff[f] (offset of its CPT in
# cpt/logcpt), loff[f] (offset of its message vector inside one leaf's scratch).
# order[var_ptr[i]:var_ptr[i+1]] lists the leaf's flat variables parents-first. used lists
# the distinct variables of all leaves; cvar[f] and cpar[f] index into it f's variable and
# its parent's (len(used) at a root), for the complete-row pass.

cdef struct Tree:
    const int64_t *var_ptr
    const int32_t *order
    const int32_t *gvar
    const int32_t *card
    const int32_t *fpar
    const int64_t *coff
    const int64_t *loff
    const double *cpt
    const double *logcpt


cdef inline Tree _tree(const int64_t[::1] var_ptr, const int32_t[::1] order,
                       const int32_t[::1] gvar, const int32_t[::1] card,
                       const int32_t[::1] fpar, const int64_t[::1] coff,
                       const int64_t[::1] loff, const double[::1] cpt,
                       const double[::1] logcpt) noexcept:
    cdef Tree t
    t.var_ptr = &var_ptr[0]
    t.order = &order[0]
    t.gvar = &gvar[0]
    t.card = &card[0]
    t.fpar = &fpar[0]
    t.coff = &coff[0]
    t.loff = &loff[0]
    t.cpt = &cpt[0]
    t.logcpt = &logcpt[0]
    return t


cdef inline double _message(const double *row, const double *lf, Py_ssize_t k, int mode) noexcept nogil:
    """One CPT row against a child's message: sum (marginals) or max (MPE) of row * lf."""
    cdef double s = 0.0, v
    cdef Py_ssize_t x
    if mode == MARGINAL:
        for x in range(k):
            s += row[x] * lf[x]
    else:
        for x in range(k):  # a select, not a branch: which entry wins is data, not pattern
            v = row[x] * lf[x]
            s = v if v > s else s
    return s


cdef inline double _log_message(const double *logrow, const double *lf, Py_ssize_t k, int mode) noexcept nogil:
    """_message in the log domain: ``lf`` holds log messages."""
    cdef double m = -INFINITY, s = 0.0, v
    cdef Py_ssize_t x
    for x in range(k):
        v = logrow[x] + lf[x]
        if v > m:
            m = v
    if mode != MARGINAL or m == -INFINITY:
        return m
    for x in range(k):
        s += exp(logrow[x] + lf[x] - m)
    return m + log(s)


cdef double _upward_log(const Tree *t, Py_ssize_t i, int mode, double *lam, const int32_t *val) noexcept nogil:
    """_upward in the log domain, for rows whose linear messages underflowed: ``lam``
    gets the log messages (max 0), from the observed codes ``val`` _upward set."""
    cdef Py_ssize_t f0 = t.var_ptr[i], f1 = t.var_ptr[i + 1], q, f, a, x, k, p
    cdef double m, total = 0.0, root_val = -INFINITY
    cdef double *lf
    for q in range(f0, f1):
        lf = lam + t.loff[q]
        for x in range(t.card[q]):
            lf[x] = 0.0 if val[q - f0] < 0 or val[q - f0] == x else -INFINITY
    for q in range(f1 - 1, f0 - 1, -1):  # children before parents
        f = t.order[q]
        k = t.card[f]
        lf = lam + t.loff[f]
        m = -INFINITY
        for x in range(k):
            if lf[x] > m:
                m = lf[x]
        if m == -INFINITY:
            return -INFINITY
        for x in range(k):
            lf[x] -= m
        total += m
        p = t.fpar[f]
        if p < 0:
            root_val = _log_message(t.logcpt + t.coff[f], lf, k, mode)
        else:
            for a in range(t.card[p]):
                lam[t.loff[p] + a] += _log_message(t.logcpt + t.coff[f] + a * k, lf, k, mode)
    return total + root_val


cdef void _careful(const Tree *t, Py_ssize_t L, uint8_t *out) noexcept nogil:
    """``out[i]``: leaf i has a CPT entry below TINY_MESSAGE (or 0), the only leaves whose
    results underflow can touch: elsewhere a message is at least the entry of its child's
    likeliest state, and a parent entry that underflows is below 1e-208 of its largest."""
    cdef Py_ssize_t i, q, j, n
    for i in range(L):
        out[i] = 0
        for q in range(t.var_ptr[i], t.var_ptr[i + 1]):
            n = t.card[q] * (1 if t.fpar[q] < 0 else t.card[t.fpar[q]])
            for j in range(n):
                if t.cpt[t.coff[q] + j] < TINY_MESSAGE:
                    out[i] = 1


cdef double _upward(const Tree *t, Py_ssize_t i, const double[:, ::1] XT, Py_ssize_t r,
                    int mode, double *lam, int32_t *val, bint careful, bint *in_log) noexcept nogil:
    """Upward pass for leaf i on row r. Fills the normalised message vectors ``lam`` (max 1)
    and ``val`` (observed code or -1); returns log p (mode 0) or log max p (mode 1). Where a
    linear message loses digits to underflow (tiny CPT entries against tiny messages; only
    ``careful`` leaves, see _careful), the pass is redone in the log domain (_upward_log) and
    ``in_log`` is set: ``lam`` then holds log messages (max 0)."""
    cdef Py_ssize_t f0 = t.var_ptr[i], f1 = t.var_ptr[i + 1], q, f, a, x, k, kp, p
    cdef double v, m, s, msg, old, logscale = 0.0, scale = 1.0, root_val = 0.0
    cdef double *lf
    cdef bint all_obs = True, lost = False
    in_log[0] = False
    for q in range(f0, f1):
        v = XT[t.gvar[q], r]
        if isnan(v):
            val[q - f0] = -1
            all_obs = False
        else:
            val[q - f0] = <int32_t>v
    if all_obs:  # fully observed: sum of log-CPT entries
        s = 0.0
        for q in range(f0, f1):
            p = t.fpar[q]
            a = 0 if p < 0 else val[p - f0]
            s += t.logcpt[t.coff[q] + a * t.card[q] + val[q - f0]]
        return s
    for q in range(f0, f1):
        f = q - f0
        lf = lam + t.loff[q]
        if val[f] < 0:
            for x in range(t.card[q]):
                lf[x] = 1.0
        else:
            for x in range(t.card[q]):
                lf[x] = 0.0
            lf[val[f]] = 1.0
    for q in range(f1 - 1, f0 - 1, -1):  # children before parents
        f = t.order[q]
        k = t.card[f]
        lf = lam + t.loff[f]
        m = 0.0
        for x in range(k):
            if lf[x] > m:
                m = lf[x]
        if m <= 0.0:
            break                      # log p = -inf, unless an underflow made the zero
        for x in range(k):
            lf[x] /= m
        # messages stay <= 1, so m <= 1: multiply the scales and take one log per ~100 of
        # them (a log per variable was most of the cost of a row with missing values)
        if m < 1e-200:
            logscale += log(m)
        else:
            scale *= m
            if scale < 1e-100:
                logscale += log(scale)
                scale = 1.0
        p = t.fpar[f]
        if p < 0:
            root_val = _message(t.cpt + t.coff[f], lf, k, mode)
            if careful:
                lost = lost | (root_val < TINY_MESSAGE)
        else:
            kp = t.card[p]
            m = 0.0
            if careful:
                for a in range(kp):
                    msg = _message(t.cpt + t.coff[f] + a * k, lf, k, mode)
                    old = lam[t.loff[p] + a]
                    v = old * msg
                    # flags, not branches; a parent state ruled out by observation (old 0) loses nothing
                    lost = lost | ((msg < TINY_MESSAGE) & (old > 0.0)) | ((v < DBL_MIN) & (v < old))
                    lam[t.loff[p] + a] = v
                    m = v if v > m else m
            else:
                for a in range(kp):
                    lam[t.loff[p] + a] *= _message(t.cpt + t.coff[f] + a * k, lf, k, mode)
                    if lam[t.loff[p] + a] > m:
                        m = lam[t.loff[p] + a]
            # a parent multiplies the messages of all its children before it is normalised:
            # rescale it on the way, or many small messages underflow to a false zero
            if 0.0 < m < 1e-100:
                for a in range(kp):
                    lam[t.loff[p] + a] /= m
                logscale += log(m)
    if lost:
        in_log[0] = True
        return _upward_log(t, i, mode, lam, val)
    if root_val <= 0.0:
        return -INFINITY
    return logscale + log(scale) + log(root_val)


cdef inline double _score(const double *row, const double *logrow, const double *lf, Py_ssize_t x,
                         bint in_log, double shift) noexcept nogil:
    """State x's unnormalised weight in a fill: row[x] * lf[x], from log messages (relative
    to exp(shift)) where _upward fell back to them, row[x] alone without messages."""
    if lf == NULL:
        return row[x]
    if in_log:
        return exp(logrow[x] + lf[x] - shift)
    return row[x] * lf[x]


cdef enum:
    BLOCK = 64   # rows per block of the complete-row pass


cdef void _complete_block(const Tree *t, Py_ssize_t L, const int64_t *slot, const int32_t *used,
                          Py_ssize_t n_used, const int32_t *cpar, const int32_t *cvar,
                          const double[:, ::1] XT, double[:, ::1] out, Py_ssize_t r0, Py_ssize_t nb,
                          int32_t *codes, double *acc, uint8_t *todo) noexcept nogil:
    """log p of every leaf on rows r0 .. r0+nb-1, rows innermost: one table lookup per
    variable (spnc_cl_complete in _cltree_block.h), summed in _upward's order (so the same
    bits). Rows missing a leaf variable get todo = 1 and are left to the message-passing
    loop."""
    cdef Py_ssize_t j, b
    cdef double x
    cdef const double *src
    cdef int32_t *dst
    for b in range(nb):
        todo[b] = 0
    for j in range(n_used):
        src = &XT[used[j], r0]
        dst = codes + j * BLOCK
        for b in range(nb):
            x = src[b]
            if isnan(x):
                todo[b] = 1
                dst[b] = 0
            else:
                dst[b] = <int32_t>x
    for b in range(nb):  # the roots' "parent": state 0
        codes[n_used * BLOCK + b] = 0
    spnc_cl_complete(t.var_ptr, t.coff, t.card, t.logcpt, cpar, cvar, codes, L, slot,
                     &out[0, r0], out.shape[1], nb, acc)


def tree_pass(const int64_t[::1] var_ptr, const int32_t[::1] order,
              const int32_t[::1] gvar, const int32_t[::1] card, const int32_t[::1] fpar,
              const int64_t[::1] coff, const int64_t[::1] loff, const double[::1] cpt,
              const double[::1] logcpt, const int32_t[::1] used, const int32_t[::1] cvar,
              const int32_t[::1] cpar, const int64_t[::1] slot, const int64_t[::1] node,
              Py_ssize_t scratch, const double[:, ::1] XT, double[:, ::1] out,
              const uint8_t[:, ::1] active, double[:, ::1] out_XT, int mode, uint64_t seed,
              int64_t row0, int n_threads):
    """If ``out`` has rows: ``out[slot[i], r]`` = log p (mode MARGINAL, missing summed out)
    or log max p (mode MAX) of leaf i on column r of ``XT``. If ``active`` has rows: write
    the missing variables of each active leaf into ``out_XT``, the max-product completion
    given the observed ones (MAX) or a sample from the conditional (MARGINAL, random
    numbers keyed by (seed, row0 + r, node[i], local variable index))."""
    cdef Py_ssize_t L = slot.shape[0], m = XT.shape[1], r, i, q, f, f0, p, x, k, pick
    cdef Tree t
    cdef double *lam
    cdef int32_t *val
    cdef double *lf
    cdef const double *row
    cdef double s, best, u, acc, lp, shift
    cdef const double *logrow
    cdef bint in_log
    cdef bint want_out = out.shape[0] > 0, want_fill = active.shape[0] > 0
    cdef bint complete_pass = want_out and not want_fill
    cdef Py_ssize_t n_used = used.shape[0], blk
    cdef uint8_t[::1] todo
    cdef uint8_t[::1] careful
    cdef int32_t *codes
    cdef double *bacc
    if L == 0 or m == 0:
        return
    t = _tree(var_ptr, order, gvar, card, fpar, coff, loff, cpt, logcpt)
    if complete_pass:  # complete rows first, by blocks; the loop below finishes the others
        todo = np.empty(m, dtype=np.uint8)
        with nogil, parallel(num_threads=n_threads):
            codes = <int32_t *> malloc(sizeof(int32_t) * (n_used + 1) * BLOCK)
            bacc = <double *> malloc(sizeof(double) * BLOCK)
            for blk in prange((m + BLOCK - 1) // BLOCK, schedule="static"):
                _complete_block(&t, L, &slot[0], &used[0], n_used, &cpar[0], &cvar[0], XT, out,
                                blk * BLOCK, min(<Py_ssize_t>BLOCK, m - blk * BLOCK), codes, bacc,
                                &todo[blk * BLOCK])
            free(bacc)
            free(codes)
        if not np.any(todo):
            return
    careful = np.empty(L, dtype=np.uint8)
    _careful(&t, L, &careful[0])
    with nogil, parallel(num_threads=n_threads):
        lam = <double *> malloc(sizeof(double) * scratch + sizeof(int32_t) * scratch)
        val = <int32_t *> (lam + scratch)
        for r in prange(m, schedule="static"):
            if complete_pass and not todo[r]:
                continue
            for i in range(L):
                if not want_out and not active[slot[i], r]:
                    continue
                f0 = var_ptr[i]
                # the all-observed shortcut leaves lam unset, but then nothing is missing
                in_log = False   # assigned here, so each thread has its own
                lp = _upward(&t, i, XT, r, mode, lam, val, careful[i], &in_log)
                if want_out:
                    out[slot[i], r] = lp
                if not want_fill or not active[slot[i], r]:
                    continue
                for q in range(f0, var_ptr[i + 1]):  # parents first
                    f = order[q]
                    if val[f - f0] >= 0:
                        continue
                    k = card[f]
                    p = fpar[f]
                    row = t.cpt + coff[f] + (0 if p < 0 else val[p - f0] * k)
                    logrow = t.logcpt + coff[f] + (0 if p < 0 else val[p - f0] * k)
                    lf = lam + loff[f]
                    if lp == -INFINITY:  # impossible evidence: ignore messages
                        lf = NULL
                    shift = 0.0          # log messages: scores relative to the largest
                    if in_log and lf != NULL:
                        shift = -INFINITY
                        for x in range(k):
                            if logrow[x] + lf[x] > shift:
                                shift = logrow[x] + lf[x]
                        if shift == -INFINITY:
                            shift = 0.0
                    pick = 0
                    if mode == MAX:
                        best = -1.0
                        for x in range(k):
                            s = _score(row, logrow, lf, x, in_log, shift)
                            if s > best:
                                best = s
                                pick = x
                    else:
                        s = 0.0
                        for x in range(k):
                            s = s + _score(row, logrow, lf, x, in_log, shift)
                        u = rand_uniform(seed, <uint64_t>(row0 + r), <uint64_t>node[i],
                                         <uint64_t>(f - f0)) * s
                        acc = 0.0
                        pick = -1
                        for x in range(k):
                            acc = acc + _score(row, logrow, lf, x, in_log, shift)
                            if u < acc:
                                pick = x
                                break
                        if pick < 0:  # rounding at the top end: last state with mass
                            for x in range(k):
                                if _score(row, logrow, lf, x, in_log, shift) > 0.0:
                                    pick = x
                            if pick < 0:
                                pick = 0
                    val[f - f0] = <int32_t>pick
                    out_XT[gvar[f], r] = <double>pick
        free(lam)


def var_marginals(const int64_t[::1] var_ptr, const int32_t[::1] order, const int32_t[::1] card,
                  const int32_t[::1] fpar, const int64_t[::1] coff, const double[::1] cpt,
                  const double[::1] logcpt, const int64_t[::1] soff, double[::1] out):
    """Single-variable log marginals of every leaf: ``out[soff[f] + k] = log P(x_f = k)`` for
    flat variable f, pushed from the root down (parents first), one pass per leaf; a leaf
    with a marginal small enough to have lost digits to underflow (or zero) is pushed again
    in the log domain."""
    cdef Py_ssize_t L = var_ptr.shape[0] - 1, i, q, f, p, a, k, c, cp, j
    cdef double pa, m, v, t
    cdef bint redo
    with nogil:
        for i in range(L):
            redo = False
            for q in range(var_ptr[i], var_ptr[i + 1]):
                f = order[q]
                c = card[f]
                p = fpar[f]
                if p < 0:
                    for k in range(c):
                        out[soff[f] + k] = cpt[coff[f] + k]
                    continue
                cp = card[p]
                for k in range(c):
                    out[soff[f] + k] = 0.0
                for a in range(cp):
                    pa = out[soff[p] + a]
                    for k in range(c):
                        out[soff[f] + k] += pa * cpt[coff[f] + a * c + k]
                for k in range(c):
                    redo = redo | (out[soff[f] + k] < TINY_MESSAGE)
            for q in range(var_ptr[i], var_ptr[i + 1]):
                f = order[q]
                p = fpar[f]
                for k in range(card[f]):
                    j = soff[f] + k
                    if not redo:
                        out[j] = log(out[j])
                    elif p < 0:
                        out[j] = logcpt[coff[f] + k]
                    else:                  # logsumexp over the parent's states
                        c = card[f]
                        m = -INFINITY
                        for a in range(card[p]):
                            v = out[soff[p] + a] + logcpt[coff[f] + a * c + k]
                            m = v if v > m else m
                        t = 0.0
                        if m > -INFINITY:
                            for a in range(card[p]):
                                t += exp(out[soff[p] + a] + logcpt[coff[f] + a * c + k] - m)
                        out[j] = m + log(t) if m > -INFINITY else -INFINITY
