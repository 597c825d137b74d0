/* Block kernels for spnc's sum/product sweeps.
 *
 * Node values live in a per-thread workspace laid out node-major: node n's values for the
 * SPNC_B rows of the current block are W[n*SPNC_B .. n*SPNC_B + SPNC_B). Every loop below runs
 * over those SPNC_B contiguous rows with no branches, so the compiler vectorises it.
 *
 * The log-domain sum needs one exp per edge and row; libm's scalar exp would cap the kernel
 * at ~1e8 edge-rows/s, so we use a branch-free exp/log (Cody-Waite reduction plus a
 * polynomial, ~1 ulp) that vectorises. Both are specialised to the ranges the kernels feed
 * them: exp for x <= 0 (terms relative to the row maximum), log for s >= 1 or s == 0.
 *
 * On x86-64 with GCC the block kernels are compiled twice (AVX2+FMA and baseline) and the
 * loader picks one at run time, so the package stays portable.
 */
#ifndef SPNC_KERNELS_H
#define SPNC_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef SPNC_B
#define SPNC_B 64
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(SPNC_NO_CLONES)
#define SPNC_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SPNC_CLONES
#endif
/* A few kernels have an AVX-512 form in intrinsics, taken at run time where the CPU has it
 * (generic vectors are 4 doubles wide, see SPNC_VL, and bit masks of rows cannot be built
 * from them in a few instructions). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(SPNC_NO_CLONES)
#include <immintrin.h>
#define SPNC_X86_512 1
#define SPNC_HAS_512() __builtin_cpu_supports("avx512bw")
#endif
/* Kernels that also need AVX-512DQ (64-bit integer lanes): the register lookups of inline
 * leaves and the vector draws of sampling (those of a few rows packed together also need
 * VBMI2's byte compress); the max-product sums take the same switch. spnc_dq_off = 1
 * (tests) takes the generic loops. */
static int spnc_dq_off = 0;
#ifdef SPNC_X86_512
#define SPNC_HAS_DQ() (!spnc_dq_off && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
#define SPNC_HAS_VBMI2() (SPNC_HAS_DQ() && __builtin_cpu_supports("avx512vbmi2"))
#else
#define SPNC_HAS_DQ() 0
#define SPNC_HAS_VBMI2() 0
#endif
/* block kernels are inlined into the sweeps of _sweeps.h, which are the cloned functions */
#define SPNC_INLINE inline __attribute__((always_inline))

static inline int64_t spnc_bits(double x) { int64_t b; memcpy(&b, &x, 8); return b; }
static inline double spnc_double(int64_t b) { double x; memcpy(&x, &b, 8); return x; }

/* exp(x) for x <= 0 (also -inf); 0 below -708 where the result is below the normal range
 * and, relative to the row maximum (which contributes exactly 1), negligible. */
static inline double spnc_exp_nonpos(double x)
{
    const double shifter = 6755399441055744.0;          /* 1.5 * 2^52 */
    double xc = x < -708.0 ? -708.0 : x;
    double t = xc * 1.4426950408889634 + shifter;
    double n = t - shifter;                              /* nearest integer to x/ln2 */
    double r = xc - n * 6.93147180369123816490e-01;      /* ln2 hi */
    r = r - n * 1.90821492927058770002e-10;              /* ln2 lo */
    double p = 1.0 / 6227020800.0;                       /* 1/13! */
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    double scale = spnc_double((spnc_bits(t) + 1023) << 52);  /* 2^n */
    return x < -708.0 ? 0.0 : p * scale;
}

/* log(s) for s == 0 (-> -inf) or s a positive normal number. */
static inline double spnc_log_pos(double s)
{
    const double two52 = 4503599627370496.0;
    int64_t b = spnc_bits(s);
    int64_t eb = (b >> 52) & 0x7ff;                      /* biased exponent */
    double e = spnc_double(eb | 0x4330000000000000LL) - two52 - 1023.0;
    double m = spnc_double((b & 0x000fffffffffffffLL) | 0x3ff0000000000000LL);  /* [1, 2) */
    int big = m > 1.4142135623730951;
    m = big ? 0.5 * m : m;
    e = big ? e + 1.0 : e;
    double f = (m - 1.0) / (m + 1.0);
    double f2 = f * f;
    double q = 1.0 / 21.0;
    q = q * f2 + 1.0 / 19.0;
    q = q * f2 + 1.0 / 17.0;
    q = q * f2 + 1.0 / 15.0;
    q = q * f2 + 1.0 / 13.0;
    q = q * f2 + 1.0 / 11.0;
    q = q * f2 + 1.0 / 9.0;
    q = q * f2 + 1.0 / 7.0;
    q = q * f2 + 1.0 / 5.0;
    q = q * f2 + 1.0 / 3.0;
    q = q * f2 + 1.0;
    double lg = e * 0.6931471805599453 + 2.0 * f * q;
    return s > 0.0 ? lg : -INFINITY;
}

/* ---- forward -------------------------------------------------------------------------- */

/* T[e] /= s (0 where s is 0): the terms of a sum become the edges' shares of it. */
static SPNC_INLINE void spnc_share(double *restrict T, const double *restrict s, int64_t k)
{
    double inv[SPNC_B];
    int64_t e;
    int j;
    for (j = 0; j < SPNC_B; j++) { const double r = 1.0 / s[j]; inv[j] = s[j] > 0.0 ? r : 0.0; }
    for (e = 0; e < k; e++)
        for (j = 0; j < SPNC_B; j++) T[e * SPNC_B + j] *= inv[j];
}


/* Four rows as one vector (GCC vector extension: one ymm on AVX2 and AVX-512, two xmm on
 * the baseline). GCC 12 splits wider generic vectors on AVX2 into scalar compares and
 * selects, ten times slower. Loads and stores go through memcpy: no alignment is assumed. */
#define SPNC_VL 4
typedef double spnc_vd __attribute__((vector_size(8 * SPNC_VL)));
typedef int64_t spnc_vm __attribute__((vector_size(8 * SPNC_VL)));
static SPNC_INLINE spnc_vd spnc_ld(const double *p) { spnc_vd v; memcpy(&v, p, sizeof v); return v; }
static SPNC_INLINE void spnc_st(double *p, spnc_vd v) { memcpy(p, &v, sizeof v); }
/* Filled through memory: GCC 12 turns the initialiser {x, x, ...} into one masked insert
 * per lane inside target_clones functions; this form is one broadcast. */
static SPNC_INLINE spnc_vd spnc_splat(double x)
{
    double a[SPNC_VL];
    spnc_vd v;
    int i;
    for (i = 0; i < SPNC_VL; i++) a[i] = x;
    memcpy(&v, a, sizeof v);
    return v;
}
/* where msk: a, else b */
static SPNC_INLINE spnc_vd spnc_blend(spnc_vm msk, spnc_vd a, spnc_vd b)
{
    return (spnc_vd)(((spnc_vm)a & msk) | ((spnc_vm)b & ~msk));
}

/* out = max(init, max_e(add[e] + W[ch[e] * stride])) per row; with arg, the arg-max edge of
 * each row (first maximum). Rows go SPNC_MAXV vectors at a time with the edges inside, so
 * the running maxima and arg-maxes stay in registers (with the edge loop outside, both are
 * stored and reloaded for every edge, and GCC vectorises that loop across edges, with
 * gathers); four independent maxima hide the compare-and-select latency of each. */
#define SPNC_MAXV 4
static SPNC_INLINE void spnc_max_rows(double *restrict out, const double *restrict W, int64_t stride,
                                      const int32_t *restrict ch, const double *restrict add, int64_t k,
                                      double init, double *restrict arg)
{
    int64_t e;
    int j0, i;
    for (j0 = 0; j0 < SPNC_B; j0 += SPNC_VL * SPNC_MAXV) {
        spnc_vd m[SPNC_MAXV], ag[SPNC_MAXV];
        for (i = 0; i < SPNC_MAXV; i++) { m[i] = spnc_splat(init); ag[i] = spnc_splat(0.0); }
        if (arg) {
            for (e = 0; e < k; e++) {
                const double *restrict c = W + (int64_t)ch[e] * stride + j0;
                const spnc_vd lw = spnc_splat(add[e]), de = spnc_splat((double)e);
                for (i = 0; i < SPNC_MAXV; i++) {
                    const spnc_vd v = spnc_ld(c + SPNC_VL * i) + lw;
                    const spnc_vm gt = v > m[i];
                    ag[i] = spnc_blend(gt, de, ag[i]);
                    m[i] = spnc_blend(gt, v, m[i]);
                }
            }
            for (i = 0; i < SPNC_MAXV; i++) spnc_st(arg + j0 + SPNC_VL * i, ag[i]);
        } else {
            for (e = 0; e < k; e++) {
                const double *restrict c = W + (int64_t)ch[e] * stride + j0;
                const spnc_vd lw = spnc_splat(add[e]);
                for (i = 0; i < SPNC_MAXV; i++) {
                    const spnc_vd v = spnc_ld(c + SPNC_VL * i) + lw;
                    m[i] = spnc_blend(v > m[i], v, m[i]);
                }
            }
        }
        for (i = 0; i < SPNC_MAXV; i++) spnc_st(out + j0 + SPNC_VL * i, m[i]);
    }
}

/* A max-product sum's arg-max edges as bits: G[e] (one word per edge, bit j: row j) holds
 * the rows where edge e beat the running maximum of the edges before it, so a row's arg-max
 * edge (first maximum) is the last edge whose bit is set, edge 0 when none is. Rows (not
 * one double per row and sum) are what the top-down pass needs: it reads each edge's rows
 * as one word. */
static inline void spnc_arg_bits(uint64_t *restrict G, const double *restrict ag, int64_t k)
{
    int64_t e;
    int j;
    for (e = 0; e < k; e++) G[e] = 0;
    for (j = 0; j < SPNC_B; j++) G[(int64_t)ag[j]] |= 1ULL << j;
}

#ifdef SPNC_X86_512
/* spnc_max_rows (stride SPNC_B, init -inf) eight rows to a vector, the 64 rows of the block
 * at once; with G, each edge's compares are stored as its word of bits (byte i: rows 8i to
 * 8i + 7) in place of a running arg-max per row: a byte store, not a blend on the vector
 * pipes. The same compares (v > m, false for NaN), so the same maxima and arg-maxes. */
__attribute__((target("avx512f")))
static void spnc_max_rows512(double *restrict out, const double *restrict W, const int32_t *restrict ch,
                             const double *restrict add, int64_t k, uint64_t *restrict G)
{
    __m512d m[8];
    int64_t e;
    int i;
    for (i = 0; i < 8; i++) m[i] = _mm512_set1_pd(-INFINITY);
    for (e = 0; e < k; e++) {
        const double *restrict c = W + (int64_t)ch[e] * SPNC_B;
        const __m512d lw = _mm512_set1_pd(add[e]);
        volatile uint8_t *gb = (volatile uint8_t *)(G + e);   /* byte stores, not shifts into one */
        for (i = 0; i < 8; i++) {
            const __m512d v = _mm512_add_pd(_mm512_loadu_pd(c + 8 * i), lw);
            const __mmask8 gt = _mm512_cmp_pd_mask(v, m[i], _CMP_GT_OQ);
            m[i] = _mm512_mask_mov_pd(m[i], gt, v);
            if (G) gb[i] = (uint8_t)gt;
        }
    }
    for (i = 0; i < 8; i++) _mm512_storeu_pd(out + 8 * i, m[i]);
}
#endif

/* The max-product sum node: out = max_e(logw[e] + W[ch[e]]), its arg-max edges in G (see
 * spnc_arg_bits) when G is given. */
static SPNC_INLINE void spnc_max_block(double *restrict out, const double *restrict W,
                                       const int32_t *restrict ch, const double *restrict logw, int64_t k,
                                       uint64_t *restrict G)
{
    double ag[SPNC_B];
#ifdef SPNC_X86_512
    if (SPNC_HAS_DQ()) {
        spnc_max_rows512(out, W, ch, logw, k, G);
        return;
    }
#endif
    spnc_max_rows(out, W, SPNC_B, ch, logw, k, -INFINITY, G ? ag : NULL);
    if (G) spnc_arg_bits(G, ag, k);
}

/* out = logsumexp_e(logw[e] + W[ch[e]]) over the k edges of one sum node; with T, each
 * edge's share of the sum, w_e S_e / S (rows of T follow the edges), for the backward pass. */
static SPNC_INLINE void spnc_sum_block(double *restrict out, const double *restrict W,
                                       const int32_t *restrict ch, const double *restrict logw, int64_t k,
                                       double *restrict T)
{
    double m[SPNC_B], s[SPNC_B];
    int64_t e;
    int j;
    spnc_max_block(m, W, ch, logw, k, NULL);
    for (j = 0; j < SPNC_B; j++) {
        m[j] = m[j] == -INFINITY ? 0.0 : m[j];
        s[j] = 0.0;
    }
    for (e = 0; e < k; e++) {
        const double *restrict c = W + (int64_t)ch[e] * SPNC_B;
        const double lw = logw[e];
        if (T) {
            double *restrict t = T + e * SPNC_B;
            for (j = 0; j < SPNC_B; j++) { t[j] = spnc_exp_nonpos(c[j] + lw - m[j]); s[j] += t[j]; }
        } else {
            for (j = 0; j < SPNC_B; j++) s[j] += spnc_exp_nonpos(c[j] + lw - m[j]);
        }
    }
    for (j = 0; j < SPNC_B; j++) out[j] = m[j] + spnc_log_pos(s[j]);
    if (T) spnc_share(T, s, k);
}

/* ---- linear domain with power-of-two exponents ---------------------------------------- */
/* A value is m * 2^e with m in [0.5, 1) (or 0, with e = SPNC_NOEXP) and e an integer held
 * in a double; a node's slot holds its SPNC_B mantissas followed by its SPNC_B exponents.
 * Sums scale each term by 2^(e_c - e_max), built from the bits of the exponent, so no exp
 * runs per edge; products multiply mantissas and add exponents. Edge weights arrive split
 * the same way (wm, we), so zero and tiny weights cannot hide a term. SPNC_NOEXP also starts
 * a sum's e_max, so it is -DBL_MAX, below the exponent of any nonzero value: a marker of
 * -1e250 made sums read children of log p below about -7e249 as zeros. */
#define SPNC_NOEXP (-1.7976931348623157e308)

/* 2^d for an integer-valued d <= 1023 (0 below -1022, where a term is negligible). */
static inline double spnc_pow2(double d)
{
    double t = d + (6755399441055744.0 + 1023.0);
    double p = spnc_double(spnc_bits(t) << 52);
    return d < -1022.0 ? 0.0 : p;
}

/* (m, e) of the value s * 2^e0, s >= 0 (subnormal s lifted first). */
static inline void spnc_lin_norm(double *restrict m, double *restrict e, double s, double e0)
{
    const double two52 = 4503599627370496.0;
    int small = s < 0x1p-900;
    double s2 = small ? s * 0x1p+200 : s;
    int64_t b = spnc_bits(s2);
    double ex = spnc_double(((b >> 52) & 0x7ff) | 0x4330000000000000LL) - two52 - 1022.0;
    double mm = spnc_double((b & 0x000fffffffffffffLL) | 0x3fe0000000000000LL);
    *m = s > 0.0 ? mm : 0.0;
    *e = s > 0.0 ? e0 + ex - (small ? 200.0 : 0.0) : SPNC_NOEXP;
}

static SPNC_INLINE void spnc_lin_sum_block(double *restrict out, const double *restrict W, const int32_t *restrict ch,
                                           const double *restrict wm, const double *restrict we, int64_t k,
                                           double *restrict T)
{
    double emax[SPNC_B], s[SPNC_B];
    int64_t e;
    int j;
    for (j = 0; j < SPNC_B; j++) s[j] = 0.0;
    spnc_max_rows(emax, W + SPNC_B, 2 * SPNC_B, ch, we, k, SPNC_NOEXP, NULL);   /* exponents */
    for (e = 0; e < k; e++) {
        const double *restrict cm = W + (int64_t)ch[e] * 2 * SPNC_B;
        const double *restrict ce = cm + SPNC_B;
        const double a = wm[e], x = we[e];
        if (T) {
            double *restrict t = T + e * SPNC_B;
            for (j = 0; j < SPNC_B; j++) { t[j] = a * cm[j] * spnc_pow2(ce[j] + x - emax[j]); s[j] += t[j]; }
        } else {
            for (j = 0; j < SPNC_B; j++) s[j] += a * cm[j] * spnc_pow2(ce[j] + x - emax[j]);
        }
    }
    for (j = 0; j < SPNC_B; j++) spnc_lin_norm(out + j, out + SPNC_B + j, s[j], emax[j]);
    if (T) spnc_share(T, s, k);
}

/* Discrete leaf from its state table (mantissa sm, exponent se), missing -> (mm, me). */
static SPNC_INLINE void spnc_lin_states_block(double *restrict out, const double *restrict x,
                                  const double *restrict sm, const double *restrict se,
                                  double mm, double me)
{
    int j;
    for (j = 0; j < SPNC_B; j++) {
        double v = x[j];
        int32_t st = (int32_t)(v == v ? v : 0.0);
        double a = sm[st], b = se[st];
        out[j] = v == v ? a : mm;
        out[SPNC_B + j] = v == v ? b : me;
    }
}

/* A leaf's log-values (from the leaf matrix) into (m, e): one exp per leaf and row. */
static SPNC_INLINE void spnc_lin_from_log(double *restrict out, const double *restrict lv)
{
    int j;
    for (j = 0; j < SPNC_B; j++) {
        double l = lv[j];
        double e = floor(l * 1.4426950408889634) + 1.0;
        double r = l - e * 0.6931471805599453;
        r = r > 0.0 ? 0.0 : r;
        /* beyond |l| ~ 1e18, e * ln2 keeps fewer bits than l: r lands far outside [-ln2, 0)
           and exp(r) would be 0 (a finite value read as -inf). Any r in range is then as
           exact as l itself; take the middle. Inputs in range keep every bit. */
        r = r < -1.0 ? -0.34657359027997264 : r;
        double fin = l > -INFINITY;
        out[j] = fin ? spnc_exp_nonpos(fin ? r : 0.0) : 0.0;
        out[SPNC_B + j] = fin ? e : SPNC_NOEXP;
    }
}

/* ---- counter-based random numbers ------------------------------------------------------ */
/* A value depends only on (seed, row, node, k), never on threads or chunking, so sampling is
 * reproducible for any n_threads. splitmix64 finaliser as the mixing function. */
static inline uint64_t spnc_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in the open interval (0, 1). */
static inline double spnc_rand_uniform(uint64_t seed, uint64_t row, uint64_t node, uint64_t k)
{
    uint64_t h = spnc_mix64(seed * 0x9E3779B97F4A7C15ULL + row);
    h = spnc_mix64(h ^ (node * 0xD1B54A32D192ED03ULL));
    h = spnc_mix64(h ^ (k * 0x8CB92BA72F3D8DD7ULL + 0x632BE59BD9B4E019ULL));
    return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Standard normal by Box-Muller from the uniforms k and k + 2^32. */
static inline double spnc_rand_normal(uint64_t seed, uint64_t row, uint64_t node, uint64_t k)
{
    double u1 = spnc_rand_uniform(seed, row, node, k);
    double u2 = spnc_rand_uniform(seed, row, node, k + (1ULL << 32));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
