/* Log-likelihood of Chow-Liu leaves on a block of complete rows: one log-CPT lookup per
 * variable and row, rows innermost (see _complete_block in _cltree.pyx, which fills the
 * codes). A C function so that it is compiled once per CPU level: on x86-64-v3/v4 the row
 * loop becomes vector gathers. Each row's sum is added in the leaf's variable order, four
 * variables at a time, whatever the vector width: the same bits on every CPU. */
#ifndef SPNC_CLTREE_BLOCK_H
#define SPNC_CLTREE_BLOCK_H

#include "_kernels.h"

/* out[slot[i] * stride + b] = sum over the leaf's flat variables q (in order) of
 * logcpt[coff[q] + code(parent of q) * card[q] + code(q)], for b < nb. codes holds one
 * row of 64 codes per used variable, plus a row of zeros (the roots' parent) at cpar's
 * largest index; acc is 64 doubles of scratch. */
SPNC_CLONES
static void spnc_cl_complete(const int64_t *var_ptr, const int64_t *coff, const int32_t *card,
                             const double *logcpt, const int32_t *cpar, const int32_t *cvar,
                             const int32_t *codes, int64_t L, const int64_t *slot, double *out,
                             int64_t stride, int64_t nb, double *restrict acc)
{
    int64_t i, q, b;
    for (i = 0; i < L; i++) {
        for (b = 0; b < nb; b++) acc[b] = 0.0;
        q = var_ptr[i];
        for (; q + 4 <= var_ptr[i + 1]; q += 4) {
            const double *l0 = logcpt + coff[q], *l1 = logcpt + coff[q + 1];
            const double *l2 = logcpt + coff[q + 2], *l3 = logcpt + coff[q + 3];
            const int32_t c0 = card[q], c1 = card[q + 1], c2 = card[q + 2], c3 = card[q + 3];
            const int32_t *P0 = codes + (int64_t)cpar[q] * 64, *V0 = codes + (int64_t)cvar[q] * 64;
            const int32_t *P1 = codes + (int64_t)cpar[q + 1] * 64, *V1 = codes + (int64_t)cvar[q + 1] * 64;
            const int32_t *P2 = codes + (int64_t)cpar[q + 2] * 64, *V2 = codes + (int64_t)cvar[q + 2] * 64;
            const int32_t *P3 = codes + (int64_t)cpar[q + 3] * 64, *V3 = codes + (int64_t)cvar[q + 3] * 64;
            for (b = 0; b < nb; b++)
                acc[b] = (((acc[b] + l0[P0[b] * c0 + V0[b]]) + l1[P1[b] * c1 + V1[b]])
                          + l2[P2[b] * c2 + V2[b]]) + l3[P3[b] * c3 + V3[b]];
        }
        for (; q < var_ptr[i + 1]; q++) {
            const double *lc = logcpt + coff[q];
            const int32_t c = card[q];
            const int32_t *P = codes + (int64_t)cpar[q] * 64, *V = codes + (int64_t)cvar[q] * 64;
            for (b = 0; b < nb; b++) acc[b] += lc[P[b] * c + V[b]];
        }
        for (b = 0; b < nb; b++) out[slot[i] * stride + b] = acc[b];
    }
}

#endif
