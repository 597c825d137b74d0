# The only place that names omp_* functions; prange itself needs no guard.
cdef extern from *:
    """
    #ifdef _OPENMP
        #include <omp.h>
        #define SPNC_OPENMP 1
    #else
        #define SPNC_OPENMP 0
        #define omp_get_max_threads() 1
        #define omp_get_thread_num() 0
    #endif
    """
    bint SPNC_OPENMP
    int omp_get_max_threads() noexcept nogil
    int omp_get_thread_num() noexcept nogil
