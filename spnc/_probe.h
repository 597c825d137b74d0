/* Throughput probes for tools/bench_inference.py: the limits of the sweeps on this CPU,
 * compiled like the block kernels (vectorised, cloned per CPU level). */
#ifndef SPNC_PROBE_H
#define SPNC_PROBE_H

#include "_kernels.h"

/* No dependency chain across elements. */
SPNC_CLONES static void spnc_probe_exp(double *x, int64_t n, int reps)
{
    int r;
    int64_t j;
    for (r = 0; r < reps; r++)
        for (j = 0; j < n; j++) x[j] = spnc_exp_nonpos(x[j] * 0.5 - 1e-3);
}

SPNC_CLONES static void spnc_probe_fma(double *x, int64_t n, int reps)
{
    int r;
    int64_t j;
    for (r = 0; r < reps; r++)
        for (j = 0; j < n; j++) x[j] = x[j] * 0.999999 + 1e-9;
}

/* The multiply pipes' peak: 96 independent multiply-add chains held in registers (no load
 * or store per operation), reps rounds; x (96 values) in and out. */
SPNC_CLONES static void spnc_probe_peak(double *x, int reps)
{
    double a[96];
    int r, j;
    memcpy(a, x, sizeof a);
    for (r = 0; r < reps; r++) {
#pragma GCC unroll 96
        for (j = 0; j < 96; j++) a[j] = a[j] * 0.999999 + 1e-9;
    }
    memcpy(x, a, sizeof a);
}

#endif
