/* Mean-field Manhattan distances of all pairs of one large candidate group (merging's
 * candidate search, spnc/learn/_similarity.py): rows of marginals against the rows after
 * them, in tiles of 8 x 8 pairs so that each loaded value serves eight pairs. Each pair
 * sums its |differences| in column order, so a distance does not depend on the tiling. */
#ifndef SPNC_PAIRS_H
#define SPNC_PAIRS_H

#include <math.h>
#include "_kernels.h"

typedef double spnc_v8d __attribute__((vector_size(64), aligned(8)));
typedef int64_t spnc_v8i __attribute__((vector_size(64), aligned(8)));

/* For rows i of Q (g x K) and j > i: out[o(i) + j - i - 1] = sum_k |Q[i, k] - Q[j, k]| / nv,
 * or +inf when label[i] != label[j]; o(i) is the start of row i in the strict upper
 * triangle, row-major. QT is Q transposed and padded with zeros to gp columns (a multiple
 * of 8): each tile reads eight rows' values (broadcast) against eight columns' (a vector). */
SPNC_CLONES
static void spnc_l1_pairs(const double *QT, int64_t g, int64_t gp, int64_t K, const int64_t *label,
                          double nv, double *out)
{
    const spnc_v8i no_sign = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX,
                              INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
    int64_t i, j, k, r, l;
    for (i = 0; i < g; i += 8) {
        for (j = (i + 1) & ~(int64_t)7; j < g; j += 8) {
            spnc_v8d acc[8];
            double tile[8][8];
            for (r = 0; r < 8; r++) acc[r] = (spnc_v8d){0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
            for (k = 0; k < K; k++) {
                spnc_v8d b;
                memcpy(&b, QT + k * gp + j, sizeof b);
                for (r = 0; r < 8; r++) {
                    const spnc_v8d d = QT[k * gp + i + r] - b;
                    acc[r] += (spnc_v8d)((spnc_v8i)d & no_sign);
                }
            }
            memcpy(tile, acc, sizeof tile);
            for (r = 0; r < 8 && i + r < g; r++) {
                const int64_t row = i + r;
                const int64_t o = row * (g - 1) - row * (row - 1) / 2;     /* start of row */
                for (l = 0; l < 8 && j + l < g; l++) {
                    const int64_t col = j + l;
                    if (col <= row) continue;
                    out[o + col - row - 1] = label[row] != label[col] ? INFINITY : tile[r][l] / nv;
                }
            }
        }
    }
}

#endif
