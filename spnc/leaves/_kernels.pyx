"""nogil kernels of the built-in leaf types (see spnc/leaves/*.py for the Python side).

Every ``*_log_prob`` writes ``out[slot[i], r]`` for leaf i and column r of the transposed
chunk ``XT`` (n_vars, m); NaN = missing, marginalised (mode 0) or maximised (mode 1).
Every ``*_fill`` writes, for rows where ``active[slot[i], r]`` is set, the missing variables
of leaf i into ``outT``: the conditional mode (mode 1) or a conditional sample (mode 0).
Loops run in parallel over leaves; two leaves active on one row never share a variable.
The ``*_counts``/``*_moments`` kernels reduce EM's responsibilities ``R`` (n_leaves, m) to
each leaf type's sufficient statistics.
"""
from cython.parallel cimport prange
from spnc._kinds cimport MARGINAL, MAX
from libc.float cimport DBL_MAX
from libc.math cimport INFINITY, NAN, isinf, isnan, log, sqrt, M_PI
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport malloc, free

from spnc._linalg cimport cholesky
from spnc._random cimport rand_uniform, rand_normal

cdef double HALF_LOG_2PI = 0.5 * log(2.0 * M_PI)


cdef inline double finite_draw(double v) noexcept nogil:
    # a draw past the float range (|mean| + std near DBL_MAX) is its nearest float, not +-inf
    if v > DBL_MAX:
        return DBL_MAX
    if v < -DBL_MAX:
        return -DBL_MAX
    return v


# ---------------------------------------------------------------- Bernoulli / categorical
cdef extern from *:
    """
    /* branch-free over a contiguous row so it vectorises (x is 0, 1 or NaN) */
    static void spnc_bernoulli_row(double *restrict out, const double *restrict x, Py_ssize_t m,
                                   double lp0, double lp1, double miss)
    {
        for (Py_ssize_t r = 0; r < m; r++) {
            double v = x[r] > 0.5 ? lp1 : lp0;
            out[r] = x[r] != x[r] ? miss : v;
        }
    }
    """
    void spnc_bernoulli_row(double *out, const double *x, Py_ssize_t m, double lp0, double lp1,
                            double miss) noexcept nogil


def bernoulli_log_prob(const double[:, ::1] XT, const int32_t[::1] var, const double[::1] logp,
                       const int64_t[::1] slot, double[:, ::1] out, int mode, int n_threads):
    """Bernoulli leaves: ``logp[2 i]`` = log(1 - p_i), ``logp[2 i + 1]`` = log p_i."""
    cdef Py_ssize_t L = var.shape[0], m = XT.shape[1], i
    cdef double miss
    for i in prange(L, nogil=True, num_threads=n_threads, schedule="static"):
        miss = 0.0 if mode == MARGINAL else (logp[2 * i] if logp[2 * i] > logp[2 * i + 1] else logp[2 * i + 1])
        spnc_bernoulli_row(&out[slot[i], 0], &XT[var[i], 0], m, logp[2 * i], logp[2 * i + 1], miss)

def categorical_log_prob(const double[:, ::1] XT, const int32_t[::1] var,
                         const int64_t[::1] ptr, const double[::1] logp, const double[::1] maxlogp,
                         const int64_t[::1] slot, double[:, ::1] out, int mode, int n_threads):
    """Categorical (and Bernoulli, as k = 2) leaves: ``logp[ptr[i] + x]``."""
    cdef Py_ssize_t L = var.shape[0], m = XT.shape[1], i, r
    cdef double x, miss
    for i in prange(L, nogil=True, num_threads=n_threads, schedule="static"):
        miss = 0.0 if mode == MARGINAL else maxlogp[i]
        for r in range(m):
            x = XT[var[i], r]
            if isnan(x):
                out[slot[i], r] = miss
            else:
                out[slot[i], r] = logp[ptr[i] + <int64_t> x]


def categorical_fill(const double[:, ::1] XT, const uint8_t[:, ::1] active, double[:, ::1] outT,
                     const int32_t[::1] var, const int64_t[::1] ptr, const double[::1] prob,
                     const int64_t[::1] node, const int64_t[::1] slot, int mode,
                     uint64_t seed, int64_t row0, int n_threads):
    cdef Py_ssize_t L = var.shape[0], m = XT.shape[1], i, r
    cdef int64_t k, s, best
    cdef double u, cum
    for i in prange(L, nogil=True, num_threads=n_threads, schedule="static"):
        for r in range(m):
            if active[slot[i], r] and isnan(XT[var[i], r]):
                k = ptr[i + 1] - ptr[i]
                best = 0
                if mode == MAX:
                    for s in range(1, k):
                        if prob[ptr[i] + s] > prob[ptr[i] + best]:
                            best = s
                else:
                    u = rand_uniform(seed, row0 + r, node[i], 0)
                    cum = 0.0
                    best = -1
                    for s in range(k):
                        cum = cum + prob[ptr[i] + s]
                        if u <= cum and prob[ptr[i] + s] > 0:
                            best = s
                            break
                    if best < 0:  # rounding: take the last state with mass
                        for s in range(k):
                            if prob[ptr[i] + s] > 0:
                                best = s
                outT[var[i], r] = best


# ---------------------------------------------------------------- Gaussian
def gaussian_log_prob(const double[:, ::1] XT, const int32_t[::1] var, const double[::1] mean,
                      const double[::1] std, const int64_t[::1] slot, double[:, ::1] out,
                      int mode, int n_threads):
    cdef Py_ssize_t L = var.shape[0], m = XT.shape[1], i, r
    cdef double x, z, c, inv
    cdef bint tiny
    for i in prange(L, nogil=True, num_threads=n_threads, schedule="static"):
        c = -log(std[i]) - HALF_LOG_2PI
        inv = 1.0 / std[i]
        tiny = isinf(inv)      # a subnormal std: 1/std overflows, so divide
        for r in range(m):
            x = XT[var[i], r]
            if isnan(x):
                out[slot[i], r] = 0.0 if mode == MARGINAL else c
            else:
                z = x - mean[i]
                if isinf(z):    # x and the mean on either side of 0, both near DBL_MAX
                    z = x / std[i] - mean[i] / std[i]
                else:
                    z = z / std[i] if tiny else z * inv
                out[slot[i], r] = c - 0.5 * z * z


def gaussian_fill(const double[:, ::1] XT, const uint8_t[:, ::1] active, double[:, ::1] outT,
                  const int32_t[::1] var, const double[::1] mean, const double[::1] std,
                  const int64_t[::1] node, const int64_t[::1] slot, int mode,
                  uint64_t seed, int64_t row0, int n_threads):
    cdef Py_ssize_t L = var.shape[0], m = XT.shape[1], i, r
    for i in prange(L, nogil=True, num_threads=n_threads, schedule="static"):
        for r in range(m):
            if active[slot[i], r] and isnan(XT[var[i], r]):
                if mode == MAX:
                    outT[var[i], r] = mean[i]
                else:
                    outT[var[i], r] = finite_draw(mean[i] + std[i] * rand_normal(seed, row0 + r, node[i], 0))


# ---------------------------------------------------------------- indicator
def indicator_log_prob(const double[:, ::1] XT, const int32_t[::1] var, const int32_t[::1] value,
                       const int64_t[::1] slot, double[:, ::1] out, int mode, int n_threads):
    cdef Py_ssize_t L = var.shape[0], m = XT.shape[1], i, r
    cdef double x
    for i in prange(L, nogil=True, num_threads=n_threads, schedule="static"):
        for r in range(m):
            x = XT[var[i], r]
            if isnan(x) or x == value[i]:
                out[slot[i], r] = 0.0
            else:
                out[slot[i], r] = -INFINITY


def indicator_fill(const double[:, ::1] XT, const uint8_t[:, ::1] active, double[:, ::1] outT,
                   const int32_t[::1] var, const int32_t[::1] value, const int64_t[::1] slot,
                   int n_threads):
    cdef Py_ssize_t L = var.shape[0], m = XT.shape[1], i, r
    for i in prange(L, nogil=True, num_threads=n_threads, schedule="static"):
        for r in range(m):
            if active[slot[i], r] and isnan(XT[var[i], r]):
                outT[var[i], r] = value[i]


# ---------------------------------------------------------------- multivariate Gaussian
def cholesky_all(const int64_t[::1] dim, const int64_t[::1] cov_ptr, const double[::1] cov,
                 double[::1] chol):
    """Lower Cholesky factor of every covariance block; returns the first non-PD leaf or -1."""
    cdef Py_ssize_t L = dim.shape[0], i, j, k
    for i in range(L):
        for j in range(cov_ptr[i], cov_ptr[i + 1]):
            chol[j] = cov[j]
        if cholesky(&chol[cov_ptr[i]], dim[i]) < 0:
            return i
        for j in range(dim[i]):  # zero the strict upper triangle
            for k in range(j + 1, dim[i]):
                chol[cov_ptr[i] + j * dim[i] + k] = 0.0
    return -1


cdef double _mvn_row(const double[:, ::1] XT, Py_ssize_t r, const int32_t *vars_,
                     const double *mu, const double *cov, const double *chol, Py_ssize_t d,
                     double *work, int *perm, int mode, double *fill_to, bint sample,
                     uint64_t seed, uint64_t row, uint64_t node) noexcept nogil:
    """Log value of one row; optionally writes the conditional mode / a conditional sample
    of the missing variables (in scope order) to ``fill_to``. Conditioning uses the Cholesky
    factor of the covariance permuted to (observed, missing): x_m = mu_m + L_mo z_o + L_mm e."""
    cdef Py_ssize_t a, b, no = 0, nm = 0
    cdef double *C = work
    cdef double *z = work + d * d
    cdef const double *F
    cdef double s, quad = 0.0, logdet_o = 0.0, logdet_m = 0.0, x
    for a in range(d):
        if not isnan(XT[vars_[a], r]):
            perm[no] = <int> a
            no = no + 1
    nm = d - no
    if nm == 0:
        F = chol
        for a in range(d):
            perm[a] = <int> a
    else:
        b = no
        for a in range(d):
            if isnan(XT[vars_[a], r]):
                perm[b] = <int> a
                b = b + 1
        for a in range(d):
            for b in range(d):
                C[a * d + b] = cov[perm[a] * d + perm[b]]
        cholesky(C, d)
        F = C
    for a in range(no):
        s = XT[vars_[perm[a]], r] - mu[perm[a]]
        for b in range(a):
            s = s - F[a * d + b] * z[b]
        z[a] = s / F[a * d + a]
        quad = quad + z[a] * z[a]
        logdet_o = logdet_o + log(F[a * d + a])
    for a in range(no, d):
        logdet_m = logdet_m + log(F[a * d + a])
        if fill_to != NULL:
            s = mu[perm[a]]
            for b in range(no):
                s = s + F[a * d + b] * z[b]
            if sample:
                z[a] = rand_normal(seed, row, node, a)
                for b in range(no, a + 1):
                    s = s + F[a * d + b] * z[b]
            fill_to[perm[a]] = finite_draw(s)
    x = -0.5 * quad - logdet_o - no * HALF_LOG_2PI
    if mode == MAX:
        x = x - logdet_m - nm * HALF_LOG_2PI
    return x


def mvn_pass(const double[:, ::1] XT, const int64_t[::1] var_ptr, const int32_t[::1] var,
             const int64_t[::1] mean_ptr, const double[::1] mean, const int64_t[::1] cov_ptr,
             const double[::1] cov, const double[::1] chol, const int64_t[::1] node,
             const int64_t[::1] slot, double[:, ::1] out, const uint8_t[:, ::1] active,
             double[:, ::1] outT, int mode, uint64_t seed, int64_t row0, int n_threads):
    """Multivariate Gaussian leaves: ``out[slot[i], r]`` (when ``out`` has rows) and, for
    the active rows (when ``active`` has rows), the missing variables into ``outT``."""
    cdef Py_ssize_t L = var_ptr.shape[0] - 1, m = XT.shape[1], i, r, d, a
    cdef double *work
    cdef double *vals
    cdef int *perm
    cdef bint want_out = out.shape[0] > 0, want_fill = active.shape[0] > 0
    for i in prange(L, nogil=True, num_threads=n_threads, schedule="dynamic"):
        d = var_ptr[i + 1] - var_ptr[i]
        work = <double *> malloc((d * d + d + 1) * sizeof(double))
        vals = <double *> malloc((d + 1) * sizeof(double))
        perm = <int *> malloc((d + 1) * sizeof(int))
        for r in range(m):
            if want_out:
                out[slot[i], r] = _mvn_row(XT, r, &var[var_ptr[i]], &mean[mean_ptr[i]], &cov[cov_ptr[i]],
                                           &chol[cov_ptr[i]], d, work, perm, mode, NULL, False, 0, 0, 0)
            if want_fill and active[slot[i], r]:
                for a in range(d):
                    vals[a] = NAN
                _mvn_row(XT, r, &var[var_ptr[i]], &mean[mean_ptr[i]], &cov[cov_ptr[i]],
                         &chol[cov_ptr[i]], d, work, perm, mode, vals, mode == MARGINAL,
                         seed, row0 + r, node[i])
                for a in range(d):
                    if not isnan(vals[a]):
                        outT[var[var_ptr[i] + a], r] = vals[a]
        free(work)
        free(vals)
        free(perm)


# ---------------------------------------------------------------- EM statistics
def discrete_counts(const double[:, ::1] R, const int64_t[::1] slot, const int32_t[::1] var,
                    const double[:, ::1] XT, const double[::1] row_w, const int64_t[::1] offset,
                    double[::1] counts, int n_threads):
    """Weighted state counts of discrete leaves: ``counts[offset[l] + x] += R[slot[l], r] *
    row_w[r]`` for every column r where ``x = XT[var[l], r]`` is observed. Parallel over
    leaves (each leaf owns its counts)."""
    cdef Py_ssize_t n_l = slot.shape[0], m = XT.shape[1], l, j
    cdef double x
    for l in prange(n_l, nogil=True, num_threads=n_threads, schedule="static"):
        for j in range(m):
            x = XT[var[l], j]
            if x == x:
                counts[offset[l] + <int64_t> x] += R[slot[l], j] * row_w[j]


def gauss_moments(const double[:, ::1] R, const int64_t[::1] slot, const int32_t[::1] var,
                  const double[:, ::1] XT, const double[::1] row_w, const double[::1] center,
                  double[::1] w, double[::1] sd, double[::1] sdd, int n_threads):
    """Weighted moments of univariate leaves around ``center``: for observed ``x`` add
    ``r``, ``r * d`` and ``r * d * d`` with ``r = R[slot[l], j] * row_w[j]``, ``d = x - center[l]``."""
    cdef Py_ssize_t n_l = slot.shape[0], m = XT.shape[1], l, j
    cdef double x, r, d, a0, a1, a2
    for l in prange(n_l, nogil=True, num_threads=n_threads, schedule="static"):
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        for j in range(m):
            x = XT[var[l], j]
            if x == x:
                r = R[slot[l], j] * row_w[j]
                d = x - center[l]
                a0 = a0 + r
                a1 = a1 + r * d
                a2 = a2 + r * d * d
        w[l] += a0
        sd[l] += a1
        sdd[l] += a2


def binary_counts(const double[:, ::1] R, const int64_t[::1] slot, const int32_t[::1] var,
                  const double[:, ::1] XT, const double[::1] row_w, double[::1] counts, int n_threads):
    """Bernoulli leaves: ``counts[2 l]`` and ``counts[2 l + 1]`` gain the weighted
    responsibility of the rows with ``x = 0`` and ``x = 1`` (missing rows are skipped).
    Branch-free inner loop with per-leaf accumulators."""
    cdef Py_ssize_t n_l = slot.shape[0], m = XT.shape[1], l, j
    cdef double x, r, tot, ones, o
    cdef const double *xr
    cdef const double *rr
    for l in prange(n_l, nogil=True, num_threads=n_threads, schedule="static"):
        xr = &XT[var[l], 0]
        rr = &R[slot[l], 0]
        tot = 0.0
        ones = 0.0
        for j in range(m):
            x = xr[j]
            o = 1.0 if x == x else 0.0
            x = x if x == x else 0.0
            r = rr[j] * row_w[j] * o
            tot = tot + r
            ones = ones + r * x
        counts[2 * l] += tot - ones
        counts[2 * l + 1] += ones
