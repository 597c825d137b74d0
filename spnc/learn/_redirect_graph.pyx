"""The node walks of spnc.learn._redirect.redirect for models without observed sums (no
Fig. 3(a) step): the same visits, decisions and additions as the Python walks, in C."""
import numpy as np
from libc.stdint cimport int32_t, int64_t, uint8_t

cdef enum:
    K_SUM = 0
    K_PRODUCT = 1


def resolve(const uint8_t[::1] kind, const int64_t[::1] ptr, const int32_t[::1] child,
            const double[::1] weight, const int64_t[::1] rep, const int64_t[::1] roots):
    """What every node reached from ``rep[roots]`` becomes when node ``n`` stands for
    ``rep[n]``: ``(res, kcnt, kid, kw)``. ``res[n]``: the node it becomes (-1: not
    reached); a node that survives as an inner node has ``kcnt[n] >= 0`` children, in
    ``kid[ptr[n]:ptr[n] + kcnt[n]]`` with weights ``kw`` (a sum's repeated children merged,
    their weights added in edge order); ``kcnt`` is -1 elsewhere."""
    cdef Py_ssize_t N = kind.shape[0], E = child.shape[0], R = roots.shape[0]
    res_a = np.full(N, -1, dtype=np.int64)
    kcnt_a = np.full(N, -1, dtype=np.int64)
    kid_a = np.zeros(max(E, 1), dtype=np.int64)
    kw_a = np.zeros(max(E, 1))
    pos_a = np.full(N, -1, dtype=np.int64)
    snode_a = np.empty(R + E + N + 1, dtype=np.int64)
    sexp_a = np.empty(R + E + N + 1, dtype=np.uint8)
    cdef int64_t[::1] res = res_a, kcnt = kcnt_a, kid = kid_a, pos = pos_a, snode = snode_a
    cdef double[::1] kw = kw_a
    cdef uint8_t[::1] sexp = sexp_a
    cdef Py_ssize_t top = 0, i, e, a, b, m, j
    cdef int64_t n, c
    cdef double wc
    with nogil:
        for i in range(R):
            snode[top] = rep[roots[i]]
            sexp[top] = 0
            top += 1
        while top > 0:
            top -= 1
            n = snode[top]
            if res[n] >= 0:
                continue
            if kind[n] >= 2:
                res[n] = n
                continue
            a, b = ptr[n], ptr[n + 1]
            if not sexp[top]:
                snode[top] = n
                sexp[top] = 1
                top += 1
                for e in range(a, b):
                    c = rep[child[e]]
                    if res[c] < 0:
                        snode[top] = c
                        sexp[top] = 0
                        top += 1
                continue
            if kind[n] == K_PRODUCT:
                if b - a == 1:
                    res[n] = res[rep[child[a]]]
                else:
                    res[n] = n
                    kcnt[n] = b - a
                    for e in range(a, b):
                        kid[e] = res[rep[child[e]]]
                continue
            m = 0                       # a sum: repeated children add up their weights
            for e in range(a, b):
                c = res[rep[child[e]]]
                wc = weight[e]
                j = pos[c]
                if j < 0:
                    pos[c] = m
                    kid[a + m] = c
                    kw[a + m] = wc
                    m += 1
                else:
                    kw[a + j] += wc
            for j in range(m):
                pos[kid[a + j]] = -1
            if m == 1:
                res[n] = kid[a]
            else:
                res[n] = n
                kcnt[n] = m
    return res_a, kcnt_a, kid_a, kw_a


def post_order(const int64_t[::1] ptr, const int64_t[::1] kcnt, const int64_t[::1] kid,
               const int64_t[::1] roots):
    """``(order, new_id)``: the nodes reached from ``roots`` numbered in depth-first
    post-order, children ``kid[ptr[n]:ptr[n] + kcnt[n]]`` in order (``kcnt[n] < 0``: a node
    not entered), each node at its first visit; ``new_id`` -1 for the others."""
    cdef Py_ssize_t N = kcnt.shape[0], R = roots.shape[0], E = kid.shape[0]
    new_id_a = np.full(N, -1, dtype=np.int64)
    order_a = np.empty(N, dtype=np.int64)
    snode_a = np.empty(R + E + N + 1, dtype=np.int64)
    sexp_a = np.empty(R + E + N + 1, dtype=np.uint8)
    cdef int64_t[::1] new_id = new_id_a, order = order_a, snode = snode_a
    cdef uint8_t[::1] sexp = sexp_a
    cdef Py_ssize_t top = 0, M = 0, i, j, a
    cdef int64_t n, c
    with nogil:
        for i in range(R - 1, -1, -1):
            snode[top] = roots[i]
            sexp[top] = 0
            top += 1
        while top > 0:
            top -= 1
            n = snode[top]
            if new_id[n] >= 0:
                continue
            if sexp[top] or kcnt[n] < 0:
                new_id[n] = M
                order[M] = n
                M += 1
                continue
            sexp[top] = 1
            top += 1
            a = ptr[n]
            for j in range(kcnt[n] - 1, -1, -1):
                c = kid[a + j]
                if new_id[c] < 0:
                    snode[top] = c
                    sexp[top] = 0
                    top += 1
    return order_a[:M], new_id_a


def assemble(const uint8_t[::1] kind, const int64_t[::1] ptr, const int64_t[::1] kcnt,
             const int64_t[::1] kid, const double[::1] kw, const int64_t[::1] roots):
    """The nodes below ``roots`` (of :func:`resolve`'s graph) numbered by :func:`post_order`:
    ``(order, new_id, cptr, ch, w)``, ``order`` the old node of each new one, ``ch``/``w``
    the new children and the raw weights (1 under products)."""
    order_a, new_id_a = post_order(ptr, kcnt, kid, roots)
    cdef int64_t[::1] order = order_a, new_id = new_id_a
    cdef Py_ssize_t M = order.shape[0], i, j, a, q
    cdef int64_t n
    cptr_a = np.zeros(M + 1, dtype=np.int64)
    cdef int64_t[::1] cptr = cptr_a
    for i in range(M):
        n = order[i]
        cptr[i + 1] = cptr[i] + (kcnt[n] if kcnt[n] > 0 else 0)
    ch_a = np.empty(cptr[M], dtype=np.int64)
    w_a = np.ones(cptr[M])
    cdef int64_t[::1] ch = ch_a
    cdef double[::1] w = w_a
    with nogil:
        for i in range(M):
            n = order[i]
            a = ptr[n]
            q = cptr[i]
            for j in range(cptr[i + 1] - q):
                ch[q + j] = new_id[kid[a + j]]
                if kind[n] == K_SUM:
                    w[q + j] = kw[a + j]
    return order_a, new_id_a, cptr_a, ch_a, w_a
