# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Counting kernel of the oSLRAU learner (:mod:`spnc.learn.oslrau`).

One call streams a whole array through the learner's tree, one mini-batch after the
other, without the GIL: for each batch a bottom-up pass computes every node's
log-likelihood of every row, a top-down pass routes each row to the child of highest
likelihood at sum nodes (ties broken by a counter-based hash of seed, batch, node and
row), and a second top-down pass lets counts and the running means / covariances of
products and leaves absorb the rows that reached them (Eq. 3-4 in Chan's pairwise form),
testing each product right after its own update for a correlation between variables of
different children (Alg. 2). A product that finds one blocks the two children (their
subtrees skip the batch); the call returns after that batch, the caller makes the
structure change and passes the batch's rows down the new mixture (Alg. 3).

Learner arrays, indexed by node id (ids are stable; dead nodes are simply not in
``order``): ``kind`` (0 sum, 1 product, 2 leaf), children ``child[child_start[n]:child_end[n]]``, sorted scopes in CSR (``scope_ptr``, ``scope``; a node's mean vector lives
at ``mean[scope_ptr[n]:scope_ptr[n+1]]``), covariances row-major at
``cov[cov_ptr[n]:cov_ptr[n+1]]``, ``count`` and ``merges``.
"""
from libc.math cimport log, exp, sqrt, fabs, INFINITY
from libc.stdint cimport uint64_t, int64_t, int32_t, int8_t, uint8_t
from libc.stdlib cimport malloc, free
import numpy as np

from spnc._kinds cimport SUM as C_SUM, PRODUCT as C_PRODUCT, LEAF as C_LEAF
from spnc._linalg cimport cholesky
from spnc._random cimport rand_uniform

cdef double LOG_2PI = 1.8378770664093453

SUM, PRODUCT, LEAF = C_SUM, C_PRODUCT, C_LEAF


cdef double _leaf_factor(const double* cov, int s, double min_var, double* L) noexcept nogil:
    """L = lower Cholesky factor of cov + min_var I (jitter raised until it is positive
    definite); returns log det L."""
    cdef int i, j
    cdef double jitter = min_var, logdet = 0.0
    while True:
        for i in range(s):
            for j in range(s):
                L[i * s + j] = cov[i * s + j]
            L[i * s + i] += jitter
        if cholesky(L, s) == 0:
            break
        jitter = jitter * 10.0 + 1e-12
    for i in range(s):
        logdet += log(L[i * s + i])
    return logdet


cdef void _leaf_values(const double[:, ::1] X, int64_t r0, int m, const int32_t* var,
                       const double* mu, const double* L, double logdet, int s,
                       double* z, double* out) noexcept nogil:
    """out[r] = log N(x_r | mu, L L^T) for the m rows starting at r0."""
    cdef int i, k, r
    cdef double acc, q
    for r in range(m):
        q = 0.0
        for i in range(s):
            acc = X[r0 + r, var[i]] - mu[i]
            for k in range(i):
                acc -= L[i * s + k] * z[k]
            z[i] = acc / L[i * s + i]
            q += z[i] * z[i]
        out[r] = -0.5 * q - logdet - 0.5 * s * LOG_2PI


cdef inline bint _any(uint8_t[:, ::1] active, int32_t node, int m) noexcept nogil:
    cdef int r
    for r in range(m):
        if active[node, r]:
            return True
    return False


cdef inline int _find(const int32_t* a, int s, int32_t v) noexcept nogil:
    cdef int lo = 0, hi = s - 1, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef int _run(const double[:, ::1] X, int64_t start, int64_t batch_size,
              const int32_t[::1] order, const int8_t[::1] kind,
              const int64_t[::1] child_start, const int64_t[::1] child_end, const int32_t[::1] child,
              const int64_t[::1] scope_ptr, const int32_t[::1] scope,
              double[::1] count, double[::1] mean, const int64_t[::1] cov_ptr, double[::1] cov,
              const int32_t[::1] merges, double min_var, uint64_t seed, uint64_t batch0,
              int weighted_routing, int64_t struct_points, int64_t seen0,
              double min_merge, int spaced, double threshold,
              double[:, ::1] vals, uint8_t[:, ::1] active,
              double[::1] chol, double[::1] ldet, uint8_t[::1] fresh,
              int32_t[::1] cand, double[::1] cand_corr, int32_t* n_cand,
              double* buf, int32_t* owner, uint8_t* blocked, double* score) noexcept nogil:
    """Process batches from row ``start``; return the number of batches done. ``score``
    (if not NULL) accumulates the root log-likelihood of every row before its batch
    updates the model (prequential, test-then-train)."""
    cdef int64_t n = X.shape[0], r0, p
    cdef int64_t n_order = order.shape[0]
    cdef int m, r, t, s, i, j, k, nb = 0, c, best, ties, nchild
    cdef bint test
    cdef uint8_t blk
    cdef int32_t node, ch
    cdef double v, mx, acc, tot, w, wk, lw, d_i, best_corr, corr, cii, cjj
    cdef double* mu
    cdef double* cv
    cdef int d = <int>X.shape[1], bi = 0, bj = 0
    cdef double* xb = buf            # batch mean (d)
    cdef double* m2 = buf + d        # batch M2 / Cholesky scratch (d * d)
    cdef double* z = buf + d + d * d  # triangular-solve scratch (d)
    cdef int64_t seen = seen0
    r0 = start
    while r0 < n:
        m = <int>(batch_size if n - r0 > batch_size else n - r0)
        # ---- bottom-up: log-likelihood of every node for every row
        for t in range(n_order):
            node = order[t]
            if kind[node] == C_LEAF:
                s = <int>(scope_ptr[node + 1] - scope_ptr[node])
                if not fresh[node]:        # factor cached until the leaf's moments change
                    ldet[node] = _leaf_factor(&cov[cov_ptr[node]], s, min_var, &chol[cov_ptr[node]])
                    fresh[node] = 1
                _leaf_values(X, r0, m, &scope[scope_ptr[node]], &mean[scope_ptr[node]],
                             &chol[cov_ptr[node]], ldet[node], s, z, &vals[node, 0])
            elif kind[node] == C_PRODUCT:
                for r in range(m):
                    vals[node, r] = 0.0
                for p in range(child_start[node], child_end[node]):
                    ch = child[p]
                    for r in range(m):
                        vals[node, r] += vals[ch, r]
            else:
                tot = 0.0
                nchild = <int>(child_end[node] - child_start[node])
                for p in range(child_start[node], child_end[node]):
                    tot += count[child[p]] + 1.0
                for r in range(m):
                    mx = -INFINITY
                    for p in range(child_start[node], child_end[node]):
                        v = vals[child[p], r]
                        if v > mx:
                            mx = v
                    acc = 0.0
                    if mx > -INFINITY:
                        for p in range(child_start[node], child_end[node]):
                            ch = child[p]
                            acc += (count[ch] + 1.0) * exp(vals[ch, r] - mx)
                        vals[node, r] = mx + log(acc / tot)
                    else:
                        vals[node, r] = -INFINITY
        if score != NULL:
            node = order[n_order - 1]
            for r in range(m):
                score[0] += vals[node, r]
        # ---- top-down: route rows (the root is last in order)
        for t in range(n_order):
            node = order[t]
            for r in range(m):
                active[node, r] = 0
        node = order[n_order - 1]
        for r in range(m):
            active[node, r] = 1
        for t in range(n_order - 1, -1, -1):
            node = order[t]
            if kind[node] == C_PRODUCT:
                for p in range(child_start[node], child_end[node]):
                    ch = child[p]
                    for r in range(m):
                        active[ch, r] = active[node, r]
            elif kind[node] == C_SUM:
                tot = 0.0
                for p in range(child_start[node], child_end[node]):
                    tot += count[child[p]] + 1.0
                for r in range(m):
                    if not active[node, r]:
                        continue
                    mx = -INFINITY
                    best = -1
                    ties = 0
                    for p in range(child_start[node], child_end[node]):
                        ch = child[p]
                        v = vals[ch, r]
                        if weighted_routing:
                            v = v + log((count[ch] + 1.0) / tot)
                        if best < 0 or v > mx:
                            mx = v
                            best = ch
                            ties = 1
                        elif v == mx:
                            ties += 1
                            if rand_uniform(seed, batch0 + nb, <uint64_t>node * 1000003 + <uint64_t>r, <uint64_t>ties) * ties < 1.0:
                                best = ch
                    active[best, r] = 1
        # ---- counts, running statistics (Eq. 3-4, Chan's pairwise update) and the
        # correlation test (Alg. 2), top-down: a product is tested right after its own
        # statistics absorbed the batch; when it finds a pair, the two children it merges
        # are blocked (they and their subtrees skip this batch, which the caller then
        # passes down the new mixture, as in Alg. 2-3).
        test = seen + m <= struct_points
        n_cand[0] = 0
        blocked[order[n_order - 1]] = 0
        for t in range(n_order - 1, -1, -1):
            node = order[t]
            blk = blocked[node]
            for p in range(child_start[node], child_end[node]):
                blocked[child[p]] = blk
            if blk:
                continue
            k = 0
            for r in range(m):
                k += active[node, r]
            if k == 0:
                continue
            if kind[node] != C_SUM:
                s = <int>(scope_ptr[node + 1] - scope_ptr[node])
                mu = &mean[scope_ptr[node]]
                cv = &cov[cov_ptr[node]]
                for i in range(s):
                    acc = 0.0
                    for r in range(m):
                        if active[node, r]:
                            acc += X[r0 + r, scope[scope_ptr[node] + i]]
                    xb[i] = acc / k
                for i in range(s):
                    for j in range(i + 1):
                        acc = 0.0
                        for r in range(m):
                            if active[node, r]:
                                acc += (X[r0 + r, scope[scope_ptr[node] + i]] - xb[i]) * \
                                       (X[r0 + r, scope[scope_ptr[node] + j]] - xb[j])
                        m2[i * s + j] = acc
                # a leaf's count starts at 1 (Sec. 3.1: its initial parameters weigh one
                # point); a product's at 0 (Alg. 5: its statistics are the data's alone)
                w = count[node]
                if kind[node] == C_LEAF and w < 1.0:
                    w = 1.0
                wk = w + k
                for i in range(s):
                    d_i = xb[i] - mu[i]
                    for j in range(i + 1):
                        acc = (w * cv[i * s + j] + m2[i * s + j] + (w * k / wk) * d_i * (xb[j] - mu[j])) / wk
                        cv[i * s + j] = acc
                        cv[j * s + i] = acc
                for i in range(s):
                    mu[i] += (k / wk) * (xb[i] - mu[i])
                fresh[node] = 0
            count[node] += k
            if not test or kind[node] != C_PRODUCT:
                continue
            nchild = <int>(child_end[node] - child_start[node])
            # eligible once its count before this batch reaches the bound (the authors' code)
            if nchild < 2 or count[node] - k < min_merge * ((merges[node] + 1) if spaced else 1):
                continue
            s = <int>(scope_ptr[node + 1] - scope_ptr[node])
            for c in range(nchild):
                ch = child[child_start[node] + c]
                for p in range(scope_ptr[ch], scope_ptr[ch + 1]):
                    owner[_find(&scope[scope_ptr[node]], s, scope[p])] = c
            cv = &cov[cov_ptr[node]]
            best_corr = -1.0
            for i in range(s):
                cii = cv[i * s + i]
                if not cii > 0.0:
                    continue
                for j in range(i + 1, s):
                    if owner[i] == owner[j]:
                        continue
                    cjj = cv[j * s + j]
                    if not cjj > 0.0:
                        continue
                    corr = fabs(cv[i * s + j]) / sqrt(cii * cjj)
                    if corr > best_corr:
                        best_corr = corr
                        bi = owner[i]
                        bj = owner[j]
            if best_corr >= threshold:
                cand[3 * n_cand[0]] = node
                cand[3 * n_cand[0] + 1] = child[child_start[node] + bi]
                cand[3 * n_cand[0] + 2] = child[child_start[node] + bj]
                cand_corr[n_cand[0]] = best_corr
                n_cand[0] += 1
                blocked[child[child_start[node] + bi]] = 1
                blocked[child[child_start[node] + bj]] = 1
        nb += 1
        r0 += m
        seen += m
        if n_cand[0] > 0:
            return nb
    return nb


def run(const double[:, ::1] X, int64_t start, int64_t batch_size,
        const int32_t[::1] order, const int8_t[::1] kind,
        const int64_t[::1] child_start, const int64_t[::1] child_end, const int32_t[::1] child,
        const int64_t[::1] scope_ptr, const int32_t[::1] scope,
        double[::1] count, double[::1] mean, const int64_t[::1] cov_ptr, double[::1] cov,
        const int32_t[::1] merges, double min_var, uint64_t seed, uint64_t batch0,
        bint weighted_routing, int64_t struct_points, int64_t seen0,
        double min_merge, bint spaced, double threshold,
        double[:, ::1] vals, uint8_t[:, ::1] active,
        int32_t[::1] cand, double[::1] cand_corr, double[::1] chol=None, double[::1] ldet=None,
        uint8_t[::1] fresh=None, double[::1] score=None) -> tuple:
    """Stream rows ``start:`` of ``X`` through the learner in batches of ``batch_size``,
    updating ``count``, ``mean`` and ``cov`` in place. Stops after the first batch that
    leaves a product with a correlation >= ``threshold`` between two of its children
    (only while ``seen0`` plus the rows done is <= ``struct_points``, and only at
    products whose count before the batch reaches ``min_merge``, times ``merges + 1`` if
    ``spaced``); the two children of each such product, and their subtrees, have not
    absorbed that batch. Returns ``(n_batches_done, n_candidates)``; candidates, in
    top-down order, are ``cand[3*i:3*i+3]`` = (product, child a, child b) with correlation
    ``cand_corr[i]``. ``vals``/``active`` are workspaces of shape (>= n_ids,
    >= batch_size); ``active[n, r]`` tells whether row r of the last batch reached node n.
    ``chol`` (laid out like ``cov``), ``ldet`` and ``fresh`` (per node) cache each leaf's
    Cholesky factor and log determinant while ``fresh[n]`` is set; the kernel clears it when
    the leaf's moments change (None: a cache for this call only). ``score[0]``, if given,
    accumulates each row's root log-likelihood before its batch updates the model."""
    cdef int32_t n_cand = 0
    cdef int nb
    cdef double* score_ptr = NULL
    if score is not None:
        if score.shape[0] < 1:
            raise ValueError("score needs one element")
        score_ptr = &score[0]
    if chol is None:           # no cache kept by the caller: a throw-away one
        chol = np.empty(cov.shape[0])
        ldet = np.empty(kind.shape[0])
        fresh = np.zeros(kind.shape[0], dtype=np.uint8)
    if chol.shape[0] < cov.shape[0] or ldet.shape[0] < kind.shape[0] or fresh.shape[0] < kind.shape[0]:
        raise ValueError("chol / ldet / fresh are smaller than cov / kind")
    cdef int64_t d = X.shape[1]
    cdef double* buf = <double*>malloc((2 * d + d * d + 1) * sizeof(double))
    cdef int32_t* owner = <int32_t*>malloc((d + 1) * sizeof(int32_t))
    cdef uint8_t* blocked = <uint8_t*>malloc((kind.shape[0] + 1) * sizeof(uint8_t))
    if buf == NULL or owner == NULL or blocked == NULL:
        free(buf)
        free(owner)
        free(blocked)
        raise MemoryError()
    with nogil:
        nb = _run(X, start, batch_size, order, kind, child_start, child_end, child, scope_ptr, scope,
                  count, mean, cov_ptr, cov, merges, min_var, seed, batch0, weighted_routing,
                  struct_points, seen0, min_merge, spaced, threshold, vals, active, chol, ldet, fresh,
                  cand, cand_corr,
                  &n_cand, buf, owner, blocked, score_ptr)
    free(buf)
    free(owner)
    free(blocked)
    return nb, n_cand


def postorder(const int64_t[::1] child_start, const int64_t[::1] child_end,
              const int32_t[::1] child, int32_t root, int32_t[::1] out) -> int:
    """Write the nodes reachable from ``root`` into ``out``, children before parents
    (depth-first, children in stored order), root last; return how many."""
    cdef int64_t top = 0, k = 0, n_ids = child_start.shape[0]
    cdef int32_t node
    cdef int64_t p
    cdef int32_t* stack = <int32_t*>malloc(2 * (n_ids + 1) * sizeof(int32_t))
    cdef int32_t* flag = stack + n_ids + 1
    if stack == NULL:
        raise MemoryError()
    with nogil:
        stack[0] = root
        flag[0] = 0
        top = 1
        while top > 0:
            top -= 1
            node = stack[top]
            if flag[top]:
                out[k] = node
                k += 1
                continue
            flag[top] = 1
            top += 1
            for p in range(child_end[node] - 1, child_start[node] - 1, -1):
                stack[top] = child[p]
                flag[top] = 0
                top += 1
    free(stack)
    return k
