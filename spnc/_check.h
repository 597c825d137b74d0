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

/* 1 if a staged block (n_vars rows of SPNC_B values, padding NaN) holds a bad value; each
 * is replaced by NaN, as no kernel may index a state table with it. The block is in L1:
 * this costs a fraction of the separate pass over X it replaces. */
SPNC_CLONES
static int spnc_bad_block(double *xb, int64_t n_vars, const double *card)
{
    int any = 0;
    int64_t v, j;
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
