/* Input checks of the queries: one branch-free pass over the data that the compiler
 * vectorises (a row's columns, or a column's rows for column-major data), or over each
 * block a sweep stages; the exact first bad cell is looked for only once a bad value is
 * known to exist. */
#ifndef SPNC_CHECK_H
#define SPNC_CHECK_H

#include "_kernels.h"

/* 1 if x is not a value of a variable with k states (k = 0: real): inf for any variable;
 * for a discrete one, outside [0, k) or not a whole number. NaN (missing) is allowed. */
static inline int spnc_bad(double x, double k)
{
    const int inf = fabs(x) == INFINITY;
    const int in = (x >= 0.0) & (x < k) & (x == floor(x));
    return inf | ((k > 0.0) & (x == x) & (in == 0));
}

/* 1 if any cell of X (n rows, d columns, element strides rs, cs) is bad (card: the
 * variables' state counts as doubles). Never stops early: the good case is the common one. */
SPNC_CLONES
static int spnc_any_bad(const double *X, int64_t n, int64_t d, int64_t rs, int64_t cs, const double *card)
{
    int bad = 0;
    int64_t r, c;
    if (rs == 1 && cs != 1) {                   /* column-major: a column at a time */
        for (c = 0; c < d; c++) {
            const double *x = X + c * cs, k = card[c];
            for (r = 0; r < n; r++) bad |= spnc_bad(x[r], k);
        }
    } else {
        for (r = 0; r < n; r++) {
            const double *x = X + r * rs;
            if (cs == 1)
                for (c = 0; c < d; c++) bad |= spnc_bad(x[c], card[c]);
            else
                for (c = 0; c < d; c++) bad |= spnc_bad(x[c * cs], card[c]);
        }
    }
    return bad;
}

#ifdef SPNC_X86_512
/* spnc_bad in mask registers: good, cleared in the lanes of x (8 values of a variable with
 * k states) that hold a bad value. Each masked compare clears what it refutes, and every
 * predicate is true for NaN. Binary: x * x - x == 0 and x <= 1 (-inf gives +inf, +inf is
 * above 1); real (k = 0): |x| != inf; others: 0 <= x < k and trunc(x) == x. */
__attribute__((target("avx512f")))
static inline __mmask8 spnc_good8(__mmask8 good, __m512d x, double k)
{
    const __m512d zero = _mm512_setzero_pd();
    if (k == 2.0) {
        good = _mm512_mask_cmp_pd_mask(good, _mm512_fmsub_pd(x, x, x), zero, _CMP_EQ_UQ);
        return _mm512_mask_cmp_pd_mask(good, x, _mm512_set1_pd(1.0), _CMP_NGT_UQ);
    }
    if (k > 0.0) {
        good = _mm512_mask_cmp_pd_mask(good, x, zero, _CMP_NLT_UQ);
        good = _mm512_mask_cmp_pd_mask(good, x, _mm512_set1_pd(k), _CMP_NGE_UQ);
        return _mm512_mask_cmp_pd_mask(good, _mm512_roundscale_pd(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), x,
                                       _CMP_EQ_UQ);
    }
    return _mm512_mask_cmp_pd_mask(good, _mm512_abs_pd(x), _mm512_set1_pd(INFINITY), _CMP_NEQ_UQ);
}

/* 1 if variables v0..n_vars-1 of a staged block are all good, the 8-row vectors' masks
 * ANDed into four accumulators in turn (one chain of masked compares is bound by their
 * latency); good: the four masks of the variables before v0. */
__attribute__((target("avx512f")))
static int spnc_good_block512(const double *xb, int64_t v0, int64_t n_vars, const double *card, __mmask8 good[4])
{
    int64_t v;
    int i;
    for (v = v0; v < n_vars; v++)
        for (i = 0; i < SPNC_B / 8; i++)
            good[i & 3] = spnc_good8(good[i & 3], _mm512_loadu_pd(xb + v * SPNC_B + 8 * i), card[v]);
    return (good[0] & good[1] & good[2] & good[3]) == 0xFF;
}
#endif

/* 1 if a staged block (n_vars rows of SPNC_B values, padding NaN) holds a bad value; each
 * is replaced by NaN, as no kernel may index a state table with it. The block is in L1:
 * this costs a fraction of the separate pass over X it replaces. */
SPNC_CLONES
static int spnc_bad_block(double *xb, int64_t n_vars, const double *card)
{
    int any = 0;
    int64_t v, j;
#ifdef SPNC_X86_512
    __mmask8 good[4] = {0xFF, 0xFF, 0xFF, 0xFF};
    if (SPNC_HAS_512() && spnc_good_block512(xb, 0, n_vars, card, good))
        return 0;
#endif
    for (v = 0; v < n_vars; v++) {
        double *x = xb + v * SPNC_B;
        const double k = card[v];
        int bad = 0;
        for (j = 0; j < SPNC_B; j++) bad |= spnc_bad(x[j], k);
        if (bad) {
            for (j = 0; j < SPNC_B; j++)
                if (spnc_bad(x[j], k)) x[j] = NAN;
            any = 1;
        }
    }
    return any;
}

#endif
