/* The linear sum-product sweep on plain doubles (included by _sweeps.h, which defines
 * spnc_net). See the comment below for why it agrees with the scaled sweep bit for bit. */
#ifndef SPNC_PLAIN_H
#define SPNC_PLAIN_H

/* ---- linear domain in plain doubles ---------------------------------------------------- */
/* The linear sweep without exponents: the same products and sums on plain doubles. Scaling
 * by a power of two is exact, so as long as no value underflows or overflows this gives the
 * scaled sweep's values bit for bit; the caller checks the IEEE flags (spnc_fp_bad) and
 * redoes the block scaled when one was raised. Contraction is off in this sweep: w * c must
 * round before it is added, as the scaled sum rounds a * m_c before scaling it exactly. */
#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
/* MXCSR's sticky flags: denormal operand, overflow, underflow (bits 1, 3, 4) */
static inline void spnc_fp_clear(void) { _mm_setcsr(_mm_getcsr() & ~0x3fu); }
static inline int spnc_fp_bad(void) { return (_mm_getcsr() & 0x1au) != 0; }
#else
#include <fenv.h>
static inline void spnc_fp_clear(void) { feclearexcept(FE_ALL_EXCEPT); }
static inline int spnc_fp_bad(void) { return fetestexcept(FE_UNDERFLOW | FE_OVERFLOW) != 0; }
#endif

/* A sweep's budget of blocks that may fall back before it stops trying plain doubles
 * (shared by its threads; which path a block takes never changes its values). */
static inline int spnc_budget_left(const int *b) { return __atomic_load_n(b, __ATOMIC_RELAXED) > 0; }
static inline void spnc_budget_spend(int *b) { __atomic_fetch_sub(b, 1, __ATOMIC_RELAXED); }

/* Multiply leaf c's probabilities into m, or (put) write them there; missing -> 1. */
static SPNC_INLINE void spnc_plain_leaf_mul(double *restrict m, const spnc_net *g, int64_t c, int64_t col0,
                                            int put)
{
    const double *restrict xv = SPNC_XV(g, g->XT, g->var[c], col0);
    const double *restrict p = g->lin + g->off[c];
    int j;
#ifdef SPNC_X86_512
    if (g->nst[c] <= SPNC_LUT_STATES && SPNC_HAS_DQ()) {
        spnc_leaf_lut512(m, NULL, xv, p, 1.0, g->nst[c], put ? 1 : 2);
        return;
    }
#endif
    if (g->nst[c] == 2) {
        const double a0 = p[0], a1 = p[1];
        for (j = 0; j < SPNC_B; j++) {
            double v = xv[j];
            double a = v == 1.0 ? a1 : a0;
            a = v == v ? a : 1.0;
            m[j] = put ? a : m[j] * a;
        }
    } else {
        for (j = 0; j < SPNC_B; j++) {
            double v = xv[j];
            int32_t st = (int32_t)(v == v ? v : 0.0);
            double a = p[st];
            a = v == v ? a : 1.0;
            m[j] = put ? a : m[j] * a;
        }
    }
}

/* exp(l) from the scaled sweep's (m, e) of it, so the values agree bit for bit; out of
 * range the multiplies raise the flags. Not inlined: spnc_lin_from_log must be compiled
 * with contraction on here, as in the scaled sweep. */
SPNC_CLONES __attribute__((noinline))
static void spnc_plain_from_log(double *restrict out, const double *restrict lv)
{
    double me[2 * SPNC_B];
    int j;
    spnc_lin_from_log(me, lv);
    for (j = 0; j < SPNC_B; j++) {
        const double e = me[SPNC_B + j];
        const double ec = e < -2000.0 ? -2000.0 : (e > 2000.0 ? 2000.0 : e);
        const double h = floor(0.5 * ec);
        out[j] = me[j] * spnc_pow2(h) * spnc_pow2(ec - h);
    }
}

#ifdef SPNC_X86_512
/* A sum of K edges (K a constant: the terms stay in registers) and its edges' shares, 8 rows
 * at a time: the terms w c, their sum s (out), and each share (w c) * (1 / s), 0 where s is
 * 0, stored once to t. The operations and their order are the generic loop's (no
 * contraction), so the bits are too; the generic form keeps s in memory and reads every
 * child twice. */
#define SPNC_SUM_SHARES512(K)                                                                  \
__attribute__((target("avx512f"), optimize("fp-contract=off")))                               \
static void spnc_sum_shares512_##K(double *restrict out, double *restrict t, const double *W,   \
                                   const int32_t *cs, const double *w)                         \
{                                                                                              \
    const double *c[K];                                                                        \
    __m512d wv[K], te[K];                                                                      \
    const __m512d one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd();                       \
    int e, j;                                                                                  \
    for (e = 0; e < K; e++) { c[e] = W + (int64_t)cs[e] * SPNC_B; wv[e] = _mm512_set1_pd(w[e]); } \
    for (j = 0; j < SPNC_B; j += 8) {                                                          \
        __m512d s = te[0] = _mm512_mul_pd(wv[0], _mm512_loadu_pd(c[0] + j));                   \
        for (e = 1; e < K; e++) {                                                              \
            te[e] = _mm512_mul_pd(wv[e], _mm512_loadu_pd(c[e] + j));                           \
            s = _mm512_add_pd(s, te[e]);                                                       \
        }                                                                                      \
        const __m512d inv = _mm512_maskz_div_pd(_mm512_cmp_pd_mask(s, zero, _CMP_GT_OQ), one, s); \
        for (e = 0; e < K; e++) _mm512_storeu_pd(t + e * SPNC_B + j, _mm512_mul_pd(te[e], inv)); \
        _mm512_storeu_pd(out + j, s);                                                          \
    }                                                                                          \
}
SPNC_SUM_SHARES512(2)
SPNC_SUM_SHARES512(3)
SPNC_SUM_SHARES512(4)
SPNC_SUM_SHARES512(5)
SPNC_SUM_SHARES512(6)
SPNC_SUM_SHARES512(7)
SPNC_SUM_SHARES512(8)

/* spnc_sum_shares512_K for sums of 2-8 edges; 0 for the others (the generic loops). */
static inline int spnc_sum_shares512(double *out, double *t, const double *W, const int32_t *cs,
                                     const double *w, int64_t k)
{
    switch (k) {
    case 2: spnc_sum_shares512_2(out, t, W, cs, w); return 1;
    case 3: spnc_sum_shares512_3(out, t, W, cs, w); return 1;
    case 4: spnc_sum_shares512_4(out, t, W, cs, w); return 1;
    case 5: spnc_sum_shares512_5(out, t, W, cs, w); return 1;
    case 6: spnc_sum_shares512_6(out, t, W, cs, w); return 1;
    case 7: spnc_sum_shares512_7(out, t, W, cs, w); return 1;
    case 8: spnc_sum_shares512_8(out, t, W, cs, w); return 1;
    default: return 0;
    }
}
#endif

SPNC_CLONES __attribute__((optimize("fp-contract=off")))
static void spnc_forward_plain(const spnc_net *g, int64_t col0, double *W, const int32_t *cs,
                               const int32_t *ns, double *T)
{
#if defined(__clang__) || !defined(__GNUC__)
#pragma STDC FP_CONTRACT OFF   /* the standard spelling, for compilers without the attribute */
#endif
    int64_t n, e;
    int j;
#ifdef SPNC_X86_512
    const int x512 = T && SPNC_HAS_512();
#endif
    for (n = 0; n < g->n_nodes; n++) {
        const int64_t a = g->child_ptr[n], k = g->child_ptr[n + 1] - a;
        double *restrict out = W + (int64_t)ns[n] * SPNC_B;
        if (g->kind[n] >= 2) {
            if (g->skip && g->skip[n]) continue;
            if (g->var[n] >= 0) {
                spnc_plain_leaf_mul(out, g, n, col0, 1);
            } else {
                spnc_plain_from_log(out, g->L + g->leaf_slot[n] * g->m + col0);
            }
        } else if (g->kind[n] == 1) {
            /* straight into out, which is no child's slot (plan_slots allocates a node's
               slot before it frees its children's); the first child starts (1 * x is x) */
            for (e = 0; e < k; e++) {
                const int64_t c = g->child[a + e];
                if (g->var[c] >= 0) {
                    spnc_plain_leaf_mul(out, g, c, col0, e == 0);
                } else {
                    const double *restrict v = W + (int64_t)cs[a + e] * SPNC_B;
                    if (e == 0)
                        for (j = 0; j < SPNC_B; j++) out[j] = v[j];
                    else
                        for (j = 0; j < SPNC_B; j++) out[j] *= v[j];
                }
            }
            if (k == 0)
                for (j = 0; j < SPNC_B; j++) out[j] = 1.0;
        } else {
            /* the first term starts the sum: 0 + x is x, bit for bit, for the x >= 0 here.
               With T the terms are formed again once the sum is known and stored as shares,
               (w c) / s rounded as spnc_share rounds them: one store per edge and row
               instead of a store, a reload and a second store. */
            double s[SPNC_B];
#ifdef SPNC_X86_512
            if (x512 && spnc_sum_shares512(out, T + g->toff[n] * SPNC_B, W, cs + a, g->w + a, k))
                continue;
#endif
            for (e = 0; e < k; e++) {
                const double *restrict c = W + (int64_t)cs[a + e] * SPNC_B;
                const double w = g->w[a + e];
                if (e == 0)
                    for (j = 0; j < SPNC_B; j++) s[j] = w * c[j];
                else
                    for (j = 0; j < SPNC_B; j++) s[j] += w * c[j];
            }
            if (k == 0)
                for (j = 0; j < SPNC_B; j++) s[j] = 0.0;
            if (T) {
                double *restrict t = T + g->toff[n] * SPNC_B;
                double inv[SPNC_B];
                for (j = 0; j < SPNC_B; j++) { const double r = 1.0 / s[j]; inv[j] = s[j] > 0.0 ? r : 0.0; }
                for (e = 0; e < k; e++) {
                    const double *restrict c = W + (int64_t)cs[a + e] * SPNC_B;
                    const double w = g->w[a + e];
                    for (j = 0; j < SPNC_B; j++) t[e * SPNC_B + j] = (w * c[j]) * inv[j];
                }
            }
            for (j = 0; j < SPNC_B; j++) out[j] = s[j];
        }
    }
}

#endif
