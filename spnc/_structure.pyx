# cython: freethreading_compatible=False
"""The structural checks of an SPN's arrays that need a loop over nodes: bottom-up scopes
with the first node that breaks completeness or decomposability, and reachability from
the roots (used by :mod:`spnc._validation`)."""
import numpy as np
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport qsort

from spnc._kinds cimport SUM, PRODUCT, LEAF

# error codes of compute_scopes
cdef enum ScopeCode:
    C_OK = 0
    C_EMPTY = 1          # node has an empty scope
    C_OVERLAP = 2        # product children share a variable (extra = variable)
    C_MISMATCH = 3       # sum child scope differs from the first child's (extra = child)
    C_DUP_CHILD = 4      # a child listed twice under a sum (extra = child)

SCOPE_OK, SCOPE_EMPTY, SCOPE_OVERLAP, SCOPE_MISMATCH, SCOPE_DUP_CHILD = C_OK, C_EMPTY, C_OVERLAP, C_MISMATCH, C_DUP_CHILD


cdef int _cmp_i32(const void *a, const void *b) noexcept nogil:
    cdef int32_t x = (<const int32_t *> a)[0]
    cdef int32_t y = (<const int32_t *> b)[0]
    return (x > y) - (x < y)


def compute_scopes(const uint8_t[::1] kind, const int64_t[::1] child_ptr,
                   const int32_t[::1] child, const int64_t[::1] leaf_scope_ptr,
                   const int32_t[::1] leaf_scope):
    """Bottom-up scopes (sorted CSR). Leaves take ``leaf_scope[leaf_scope_ptr[n]:...]``
    (indexed by node; empty for internal nodes). Returns (scope_ptr, scope, code, node, extra)
    with code != 0 at the first node that breaks completeness or decomposability."""
    cdef Py_ssize_t N = kind.shape[0]
    cdef Py_ssize_t n, e, a, b, i
    cdef int64_t size, c
    cdef int code = 0
    cdef int64_t bad_node = -1, extra = -1
    size_arr = np.zeros(N + 1, dtype=np.int64)
    cdef int64_t[::1] sp = size_arr
    with nogil:
        for n in range(N):
            if kind[n] >= LEAF:
                size = leaf_scope_ptr[n + 1] - leaf_scope_ptr[n]
            elif kind[n] == PRODUCT:
                size = 0
                for e in range(child_ptr[n], child_ptr[n + 1]):
                    c = child[e]
                    size = size + sp[c + 1] - sp[c]
            else:
                c = child[child_ptr[n]]
                size = sp[c + 1] - sp[c]
            sp[n + 1] = sp[n] + size
    scope_arr = np.empty(sp[N], dtype=np.int32)
    cdef int32_t[::1] sc = scope_arr
    # last node that used a variable (products) or listed a child (sums), for duplicates
    cdef int64_t[::1] stamp = np.full(max(int(np.max(leaf_scope, initial=-1)) + 1, 1), -1, dtype=np.int64)
    cdef int64_t[::1] seen = np.full(N, -1, dtype=np.int64)
    cdef int32_t v
    with nogil:
        for n in range(N):
            a = sp[n]
            if sp[n + 1] == a:
                code = C_EMPTY; bad_node = n; break
            if kind[n] >= LEAF:
                for i in range(leaf_scope_ptr[n], leaf_scope_ptr[n + 1]):
                    sc[a] = leaf_scope[i]; a = a + 1
            elif kind[n] == PRODUCT:
                for e in range(child_ptr[n], child_ptr[n + 1]):
                    c = child[e]
                    for i in range(sp[c], sp[c + 1]):
                        v = sc[i]
                        if stamp[v] == n:
                            code = C_OVERLAP; bad_node = n; extra = v; break
                        stamp[v] = n
                        sc[a] = v; a = a + 1
                    if code:
                        break
                if code:
                    break
                qsort(&sc[sp[n]], sp[n + 1] - sp[n], sizeof(int32_t), _cmp_i32)
            else:
                b = child[child_ptr[n]]
                for i in range(sp[b], sp[b + 1]):
                    sc[a + i - sp[b]] = sc[i]
                for e in range(child_ptr[n], child_ptr[n + 1]):
                    c = child[e]
                    if seen[c] == n:
                        code = C_DUP_CHILD; bad_node = n; extra = c; break
                    seen[c] = n
                    if sp[c + 1] - sp[c] != sp[b + 1] - sp[b]:
                        code = C_MISMATCH; bad_node = n; extra = c; break
                    for i in range(sp[c + 1] - sp[c]):
                        if sc[sp[c] + i] != sc[sp[b] + i]:
                            code = C_MISMATCH; bad_node = n; extra = c; break
                    if code:
                        break
                if code:
                    break
    return size_arr, scope_arr, code, bad_node, extra


def reachable(const int64_t[::1] roots, const int64_t[::1] child_ptr, const int32_t[::1] child):
    """uint8 mask of nodes reachable from ``roots`` (children precede parents)."""
    cdef Py_ssize_t N = child_ptr.shape[0] - 1
    mark_arr = np.zeros(N, dtype=np.uint8)
    cdef uint8_t[::1] mark = mark_arr
    cdef Py_ssize_t n, e
    for n in range(roots.shape[0]):
        mark[roots[n]] = 1
    with nogil:
        for n in range(N - 1, -1, -1):
            if mark[n]:
                for e in range(child_ptr[n], child_ptr[n + 1]):
                    mark[child[e]] = 1
    return mark_arr
