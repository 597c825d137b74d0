# Small dense linear algebra shared by the kernels (one Cholesky for all of them).
from libc.math cimport sqrt


cdef inline int cholesky(double *A, Py_ssize_t d) noexcept nogil:
    """In-place lower Cholesky factor of the d x d row-major A (the strict upper triangle
    is left as it was); returns -1 if A is not positive definite."""
    cdef Py_ssize_t a, b, c
    cdef double s
    for a in range(d):
        for b in range(a + 1):
            s = A[a * d + b]
            for c in range(b):
                s = s - A[a * d + c] * A[b * d + c]
            if a == b:
                if not s > 0.0:
                    return -1
                A[a * d + a] = sqrt(s)
            else:
                A[a * d + b] = s / A[b * d + b]
    return 0
