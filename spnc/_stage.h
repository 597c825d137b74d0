/* Staging: a block of SPNC_B rows of the caller's data transposed into a thread's buffer
 * (one row of SPNC_B values per variable, NaN = missing) and checked on the way, and a
 * completed block written back to rows (MPE, sampling). Included by _sweeps.h. */
#ifndef SPNC_STAGE_H
#define SPNC_STAGE_H

#include "_kernels.h"
#include "_check.h"

/* 4 x 4 transposition: rows r[0..3] (4 values each) to columns c[0..3]. */
static SPNC_INLINE void spnc_tr4(const spnc_vd r[4], spnc_vd c[4])
{
    const spnc_vm lo = {0, 4, 2, 6}, hi = {1, 5, 3, 7}, a = {0, 1, 4, 5}, b = {2, 3, 6, 7};
    const spnc_vd t0 = __builtin_shuffle(r[0], r[1], lo), t1 = __builtin_shuffle(r[0], r[1], hi);
    const spnc_vd t2 = __builtin_shuffle(r[2], r[3], lo), t3 = __builtin_shuffle(r[2], r[3], hi);
    c[0] = __builtin_shuffle(t0, t2, a);
    c[1] = __builtin_shuffle(t1, t3, a);
    c[2] = __builtin_shuffle(t0, t2, b);
    c[3] = __builtin_shuffle(t1, t3, b);
}

/* dst[c * dr + r] = src[r * sr + c] for r < nr, c < nc: whole 4 x 4 tiles through vector
 * shuffles (an element-wise copy costs as much as a small model's sweep: both sides are
 * strided, and the loads wait on the stores through 4 kB aliasing), the edges one by one. */
SPNC_CLONES __attribute__((noinline))
static void spnc_transpose(const double *src, int64_t sr, double *restrict dst, int64_t dr, int64_t nr, int64_t nc)
{
    const int64_t r4 = nr / 4 * 4, c4 = nc / 4 * 4;
    int64_t r, c, k;
    spnc_vd a[4], b[4];
    for (r = 0; r < r4; r += 4) {
        for (c = 0; c < c4; c += 4) {
            for (k = 0; k < 4; k++) a[k] = spnc_ld(src + (r + k) * sr + c);
            spnc_tr4(a, b);
            for (k = 0; k < 4; k++) spnc_st(dst + (c + k) * dr + r, b[k]);
        }
        for (c = c4; c < nc; c++)
            for (k = 0; k < 4; k++) dst[c * dr + r + k] = src[(r + k) * sr + c];
    }
    for (r = r4; r < nr; r++)
        for (c = 0; c < nc; c++) dst[c * dr + r] = src[r * sr + c];
}

#ifdef SPNC_X86_512
/* r = the 8 x 8 matrix a transposed (a[k]: its row k), in registers. */
__attribute__((target("avx512f")))
static inline void spnc_tr8x8_512(const __m512d a[8], __m512d r[8])
{
    __m512d t[8], u[8];
    int k;
    for (k = 0; k < 8; k += 2) {         /* pairs of rows, columns interleaved */
        t[k] = _mm512_unpacklo_pd(a[k], a[k + 1]);
        t[k + 1] = _mm512_unpackhi_pd(a[k], a[k + 1]);
    }
    for (k = 0; k < 8; k += 4) {         /* quads of rows, by 128-bit lanes */
        u[k] = _mm512_shuffle_f64x2(t[k], t[k + 2], 0x88);
        u[k + 1] = _mm512_shuffle_f64x2(t[k], t[k + 2], 0xDD);
        u[k + 2] = _mm512_shuffle_f64x2(t[k + 1], t[k + 3], 0x88);
        u[k + 3] = _mm512_shuffle_f64x2(t[k + 1], t[k + 3], 0xDD);
    }
    /* u[0..3] hold rows 0..3 of columns (0,4), (2,6), (1,5), (3,7); u[4..7] rows 4..7 */
    static const int col_of[4][2] = {{0, 4}, {2, 6}, {1, 5}, {3, 7}};
    for (k = 0; k < 4; k++) {
        r[col_of[k][0]] = _mm512_shuffle_f64x2(u[k], u[k + 4], 0x88);
        r[col_of[k][1]] = _mm512_shuffle_f64x2(u[k], u[k + 4], 0xDD);
    }
}

/* Rows j..j+7 of variables v..v+7 of a staged block, as one vector per row (r[k]: row j+k). */
__attribute__((target("avx512f")))
static inline void spnc_rows8x8_512(const double *restrict xb, int64_t j, int64_t v, __m512d r[8])
{
    __m512d a[8];
    int k;
    for (k = 0; k < 8; k++) a[k] = _mm512_loadu_pd(xb + (v + k) * SPNC_B + j);
    spnc_tr8x8_512(a, r);
}

/* Stage a whole block of rows whose columns are contiguous in 8 x 8 tiles, each staged
 * variable written 8 rows at a time, and (card not NULL) check each vector while it is in
 * a register (spnc_good8; no value is replaced). The last n_vars % 8 variables go through
 * spnc_transpose and are checked from the buffer. 1 if every value is good. */
__attribute__((target("avx512f"), noinline))
static int spnc_stage512(const double *X, int64_t rs, int64_t n_vars, double *restrict xb, const double *card)
{
    const int64_t v8 = n_vars & ~(int64_t)7;
    __mmask8 good[4] = {0xFF, 0xFF, 0xFF, 0xFF};
    int64_t j, v;
    int k;
    __m512d a[8], r[8];
    for (v = 0; v < v8; v += 8)
        for (j = 0; j < SPNC_B; j += 8) {
            for (k = 0; k < 8; k++) a[k] = _mm512_loadu_pd(X + (j + k) * rs + v);
            spnc_tr8x8_512(a, r);
            for (k = 0; k < 8; k++) {
                _mm512_storeu_pd(xb + (v + k) * SPNC_B + j, r[k]);
                if (card) good[k & 3] = spnc_good8(good[k & 3], r[k], card[v + k]);
            }
        }
    if (v8 == n_vars)
        return (good[0] & good[1] & good[2] & good[3]) == 0xFF;
    spnc_transpose(X + v8, rs, xb + v8 * SPNC_B, SPNC_B, SPNC_B, n_vars - v8);
    return !card || spnc_good_block512(xb, v8, n_vars, card, good);
}
#endif

/* Stage one block: rows 0..n-1 of X (strides rs, cs in elements; n <= SPNC_B) as n_vars
 * rows of SPNC_B values in xb, NaN (missing) past row n. Runs inside the block's sweep, so
 * the staged block stays in cache and no transposed copy of the chunk is ever written.
 * With card (the variables' state counts), the block is checked too (spnc_bad_block): 1 if
 * it held a bad value, now NaN. */
static inline int spnc_stage(const double *X, int64_t rs, int64_t cs, int64_t n, int64_t n_vars,
                             double *restrict xb, const double *card)
{
    int64_t v, j;
#ifdef SPNC_X86_512
    if (cs == 1 && n == SPNC_B && SPNC_HAS_512())
        return spnc_stage512(X, rs, n_vars, xb, card) ? 0 : spnc_bad_block(xb, n_vars, card);
#endif
    if (cs == 1)
        spnc_transpose(X, rs, xb, SPNC_B, n, n_vars);
    else
        for (j = 0; j < n; j++)
            for (v = 0; v < n_vars; v++) xb[v * SPNC_B + j] = X[j * rs + v * cs];
    if (n < SPNC_B)
        for (v = 0; v < n_vars; v++)
            for (j = n; j < SPNC_B; j++) xb[v * SPNC_B + j] = NAN;
    return card ? spnc_bad_block(xb, n_vars, card) : 0;
}

#ifdef SPNC_X86_512
/* spnc_unstage of a whole block whose output rows are whole cache lines (Y on a line,
 * rs and n_vars multiples of 8): 8 x 8 tiles, each output line written at once with a
 * streaming store. The completed rows are written, never read, and usually far larger than
 * the cache: a plain store would first read every line in from memory. */
__attribute__((target("avx512f")))
static void spnc_unstage512(const double *restrict xb, double *Y, int64_t rs, int64_t n_vars)
{
    int64_t j, v;
    int k;
    __m512d r[8];
    for (j = 0; j < SPNC_B; j += 8)
        for (v = 0; v < n_vars; v += 8) {
            spnc_rows8x8_512(xb, j, v, r);
            for (k = 0; k < 8; k++) _mm512_stream_pd(Y + (j + k) * rs + v, r[k]);
        }
    _mm_sfence();       /* the streamed lines are visible before the block is reported done */
}

/* Widest rows whose 8-row groups spnc_unstage512_lines assembles on the stack (64 kB) */
#define SPNC_UNSTAGE_LINES_MAX 1024

/* The same for contiguous rows (rs == n_vars <= SPNC_UNSTAGE_LINES_MAX) of any width, Y on
 * a line: 8 rows are then 8 n_vars doubles of whole lines, assembled in a buffer (in L1 for
 * up to 96 variables) and streamed. */
__attribute__((target("avx512f"), noinline))
static void spnc_unstage512_lines(const double *restrict xb, double *Y, int64_t n_vars)
{
    double buf[8 * SPNC_UNSTAGE_LINES_MAX] __attribute__((aligned(64)));
    const int64_t v8 = n_vars & ~(int64_t)7;
    int64_t j, v, i;
    int k;
    __m512d r[8];
    for (j = 0; j < SPNC_B; j += 8) {
        for (v = 0; v < v8; v += 8) {
            spnc_rows8x8_512(xb, j, v, r);
            for (k = 0; k < 8; k++) _mm512_storeu_pd(buf + k * n_vars + v, r[k]);
        }
        for (v = v8; v < n_vars; v++)
            for (k = 0; k < 8; k++) buf[k * n_vars + v] = xb[v * SPNC_B + j + k];
        for (i = 0; i < 8 * n_vars; i += 8) _mm512_stream_pd(Y + j * n_vars + i, _mm512_load_pd(buf + i));
    }
    _mm_sfence();
}
#endif

/* The inverse for rows 0..n-1: Y[j * rs + v] = xb[v * SPNC_B + j] (a completed block). */
static inline void spnc_unstage(const double *restrict xb, double *Y, int64_t rs, int64_t n, int64_t n_vars)
{
#ifdef SPNC_X86_512
    if (n == SPNC_B && ((uintptr_t) Y & 63) == 0 && SPNC_HAS_512()) {
        if ((n_vars & 7) == 0 && (rs & 7) == 0) {
            spnc_unstage512(xb, Y, rs, n_vars);
            return;
        }
        if (rs == n_vars && n_vars <= SPNC_UNSTAGE_LINES_MAX) {
            spnc_unstage512_lines(xb, Y, n_vars);
            return;
        }
    }
#endif
    spnc_transpose(xb, SPNC_B, Y, rs, n_vars, n);
}

/* Ask for the rows of the next block (n_ahead rows from X, strides as above) while this
 * block is swept, so its staging finds them in cache. */
static inline void spnc_stage_ahead(const double *X, int64_t rs, int64_t cs, int64_t n_ahead, int64_t n_vars)
{
    int64_t j, v;
    if (cs != 1) return;
    for (j = 0; j < n_ahead; j++)
        for (v = 0; v < n_vars; v += 8) __builtin_prefetch(X + j * rs + v, 0, 2);
}

#endif
