"""Top-down hard routing of rows through a compiled SPN (see spnc.learn.routing)."""
from libc.math cimport INFINITY



def route_active(const unsigned char[::1] kind, const long long[::1] ptr, const int[::1] child,
                 const double[::1] logw, const double[:, ::1] V, unsigned char[:, ::1] act,
                 double[::1] edge_count):
    """``act`` (m, N) holds the roots' rows on entry; on return ``act[r, n]`` is set at
    every node its hard induced tree reaches: products pass rows to all children, sums to
    the first child maximising ``logw + V`` (``V`` (m, N) the max-product node values).
    ``edge_count[e]`` is increased by the rows sent along sum edge ``e``."""
    cdef Py_ssize_t N = kind.shape[0], m = V.shape[0]
    cdef Py_ssize_t n, r, e, best
    cdef double b, v
    with nogil:
        for n in range(N - 1, -1, -1):
            if kind[n] >= 2:
                continue
            if kind[n] == 1:
                for e in range(ptr[n], ptr[n + 1]):
                    for r in range(m):
                        act[r, child[e]] |= act[r, n]
                continue
            for r in range(m):
                if not act[r, n]:
                    continue
                best = -1
                b = -INFINITY
                for e in range(ptr[n], ptr[n + 1]):
                    v = logw[e] + V[r, child[e]]
                    if best < 0 or v > b:
                        b = v
                        best = e
                act[r, child[best]] = 1
                edge_count[best] += 1.0
