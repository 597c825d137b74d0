# Counter-based random numbers (defined once, in _kernels.h): a value depends only on
# (seed, row, node, k), never on threads or chunking, so sampling is reproducible.
from libc.stdint cimport uint64_t

cdef extern from "_kernels.h" nogil:
    double rand_uniform "spnc_rand_uniform"(uint64_t seed, uint64_t row, uint64_t node, uint64_t k)
    double rand_normal "spnc_rand_normal"(uint64_t seed, uint64_t row, uint64_t node, uint64_t k)
