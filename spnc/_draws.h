/* The vector draws of unconditional sampling (included by _select.h, after SPNC_FOR_BITS):
 * the counter-keyed uniforms of spnc_rand_uniform for 8 rows in 64-bit lanes, a draw as the
 * count of running weight sums below u, for the 8-row groups of a busy sum or leaf and for
 * the few rows of a sparse one packed into one or two vectors. Each gives the draws of the
 * row-by-row loops of spnc_select and spnc_leaf_fill. */
#ifndef SPNC_DRAWS_H
#define SPNC_DRAWS_H

#ifdef SPNC_X86_512
/* spnc_mix64, and spnc_rand_uniform(seed, r, node, 0), for the row numbers r in the 8 lanes
 * of rows. */
__attribute__((target("avx512f,avx512dq")))
static inline __m512i spnc_mix512(__m512i z)
{
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), _mm512_set1_epi64((long long)0xBF58476D1CE4E5B9ULL));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), _mm512_set1_epi64((long long)0x94D049BB133111EBULL));
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

__attribute__((target("avx512f,avx512dq")))
static inline __m512d spnc_rand_uniform512(uint64_t seed, __m512i rows, uint64_t node)
{
    __m512i h = spnc_mix512(_mm512_add_epi64(_mm512_set1_epi64((long long)(seed * 0x9E3779B97F4A7C15ULL)), rows));
    h = spnc_mix512(_mm512_xor_si512(h, _mm512_set1_epi64((long long)(node * 0xD1B54A32D192ED03ULL))));
    h = spnc_mix512(_mm512_xor_si512(h, _mm512_set1_epi64((long long)0x632BE59BD9B4E019ULL)));   /* k = 0 */
    return _mm512_mul_pd(_mm512_add_pd(_mm512_cvtepu64_pd(_mm512_srli_epi64(h, 11)), _mm512_set1_pd(0.5)),
                         _mm512_set1_pd(1.0 / 9007199254740992.0));
}

/* The row numbers r..r+7 in lanes. */
__attribute__((target("avx512f")))
static inline __m512i spnc_iota8(int64_t r)
{
    return _mm512_add_epi64(_mm512_set1_epi64(r), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The running sums cw of the k <= 64 weights p (as the row-by-row draws add them); returns
 * the last index of positive weight (-1: none). */
static inline int64_t spnc_running_sums(const double *p, int64_t k, double *cw)
{
    double cum = 0.0;
    int64_t e, last = -1;
    for (e = 0; e < k; e++) {
        if (p[e] > 0.0) last = e;
        cum += p[e];
        cw[e] = cum;
    }
    return last;
}

/* The draws of rows row..row+7 among k choices of running sums cw: the row-by-row loop
 * picks the first choice whose running sum reaches u, that is the number of running sums
 * below u (they never decrease), or `last` when none does. So the picks are the loop's. */
__attribute__((target("avx512f,avx512dq")))
static inline __m512i spnc_picks512(const double *cw, int64_t k, int64_t last, uint64_t seed, __m512i rows,
                                    uint64_t node)
{
    const __m512d u = spnc_rand_uniform512(seed, rows, node);
    __m512i cnt = _mm512_setzero_si512();
    int64_t e;
    for (e = 0; e < k; e++)
        cnt = _mm512_mask_add_epi64(cnt, _mm512_cmp_pd_mask(_mm512_set1_pd(cw[e]), u, _CMP_LT_OQ), cnt,
                                    _mm512_set1_epi64(1));
    return _mm512_mask_blend_epi64(_mm512_cmpeq_epi64_mask(cnt, _mm512_set1_epi64(k)), cnt, _mm512_set1_epi64(last));
}

/* An unconditional draw of sum n's edge (k <= 64 of them, from edge a) for each row of an,
 * 8 rows at a time; the rows of each edge go to its child's mask. */
__attribute__((target("avx512f,avx512dq,avx512bw")))
static void spnc_draw512(const spnc_net *g, int64_t n, int64_t a, int64_t k, uint64_t an, uint64_t seed,
                         int64_t row, uint64_t *A)
{
    double cw[64];
    int64_t pick[8];
    const int64_t last = spnc_running_sums(g->w + a, k, cw);
    int jb;
    if (2 * k + 24 <= __builtin_popcountll(an)) {
        /* each row's pick as a byte (-1, none, as 0xff), then one byte compare per edge
           gives the edge's rows: about 24 + 2k operations instead of a read-modify-write
           of a child's mask per row, which wait on each other when rows pick alike
           (sample(20 000) on region 1 k: 0.86x; wider sums gain nothing) */
        __m128i q[8];
        __m512i b;
        int64_t e;
        for (jb = 0; jb < SPNC_B; jb += 8)
            q[jb / 8] = (an >> jb) & 0xffu
                ? _mm512_cvtepi64_epi8(spnc_picks512(cw, k, last, seed, spnc_iota8(row + jb), (uint64_t)n))
                : _mm_set1_epi8(-1);
        b = _mm512_inserti32x4(_mm512_castsi128_si512(_mm_unpacklo_epi64(q[0], q[1])), _mm_unpacklo_epi64(q[2], q[3]), 1);
        b = _mm512_inserti32x4(b, _mm_unpacklo_epi64(q[4], q[5]), 2);
        b = _mm512_inserti32x4(b, _mm_unpacklo_epi64(q[6], q[7]), 3);
        for (e = 0; e < k; e++) {
            const uint64_t m = an & _mm512_cmpeq_epi8_mask(b, _mm512_set1_epi8((char)e));
            if (m) A[g->pslot[g->child[a + e]]] |= m;
        }
        return;
    }
    for (jb = 0; jb < SPNC_B; jb += 8) {
        const uint64_t m8 = (an >> jb) & 0xffu;
        if (!m8) continue;
        _mm512_storeu_si512(pick, spnc_picks512(cw, k, last, seed, spnc_iota8(row + jb), (uint64_t)n));
        SPNC_FOR_BITS(b, m8, {
            if (pick[b] >= 0) A[g->pslot[g->child[a + pick[b]]]] |= 1ULL << (jb + b);
        });
    }
}

/* spnc_leaf_fill's draws of a leaf of ns <= 64 states (probabilities p) into y for the rows
 * of fill, 8 at a time. */
__attribute__((target("avx512f,avx512dq")))
static void spnc_fill_draw512(double *y, const double *p, int64_t ns, uint64_t fill, uint64_t seed, int64_t row,
                              uint64_t node)
{
    double cw[64];
    const int64_t last = spnc_running_sums(p, ns, cw);
    int jb;
    for (jb = 0; jb < SPNC_B; jb += 8) {
        const __mmask8 m8 = (__mmask8)((fill >> jb) & 0xffu);
        if (m8)
            _mm512_mask_storeu_pd(y + jb, m8, _mm512_cvtepi64_pd(spnc_picks512(cw, ns, last, seed, spnc_iota8(row + jb), node)));
    }
}

/* Rows for spnc_draw_few512 and spnc_fill_few512: 4 to 15 (fewer: the row-by-row draws,
 * whose random numbers cost less than a vector's; more: the 8-row groups, whose vectors
 * are mostly full). Measured on sample(20 000): a sparse mask spread over the groups
 * made region graphs and LearnSPN shapes draw a vector per group for one or two rows. */
static inline int spnc_few_rows(uint64_t an)
{
    const int c = __builtin_popcountll(an);
    return c >= 4 && c < 16;
}

/* 0, 1, ..., 63 as bytes. */
static const uint8_t spnc_iota_bytes[64] __attribute__((aligned(64))) = {
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
    30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57,
    58, 59, 60, 61, 62, 63};

/* The draws among k <= 64 choices of running sums cw for the rows of an, at most 16 of
 * them, packed into one or two vectors (the rows of a sparse mask, which the 8-row groups
 * would spread over up to 8 vectors): pick[i] for the i-th lowest row, js[i]. */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vbmi2")))
static int spnc_picks_few512(const double *cw, int64_t k, int64_t last, uint64_t an, uint64_t seed, int64_t row,
                             uint64_t node, int64_t *pick, uint8_t *js)
{
    const __m512i b = _mm512_maskz_compress_epi8(an, _mm512_load_si512(spnc_iota_bytes));
    const __m128i lo = _mm512_castsi512_si128(b);
    const __m512i r0 = _mm512_set1_epi64(row);
    const int c = __builtin_popcountll(an);
    _mm512_storeu_si512(js, b);
    _mm512_storeu_si512(pick, spnc_picks512(cw, k, last, seed, _mm512_add_epi64(r0, _mm512_cvtepu8_epi64(lo)), node));
    if (c > 8)
        _mm512_storeu_si512(pick + 8, spnc_picks512(cw, k, last, seed,
                                                    _mm512_add_epi64(r0, _mm512_cvtepu8_epi64(_mm_srli_si128(lo, 8))),
                                                    node));
    return c;
}

/* spnc_draw512 for at most 16 rows. */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vbmi2")))
static void spnc_draw_few512(const spnc_net *g, int64_t n, int64_t a, int64_t k, uint64_t an, uint64_t seed,
                             int64_t row, uint64_t *A)
{
    double cw[64];
    int64_t pick[16];
    uint8_t js[64];
    const int64_t last = spnc_running_sums(g->w + a, k, cw);
    const int c = spnc_picks_few512(cw, k, last, an, seed, row, (uint64_t)n, pick, js);
    int i;
    for (i = 0; i < c; i++)
        if (pick[i] >= 0) A[g->pslot[g->child[a + pick[i]]]] |= 1ULL << js[i];
}

/* spnc_fill_draw512 for at most 16 rows. */
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vbmi2")))
static void spnc_fill_few512(double *y, const double *p, int64_t ns, uint64_t fill, uint64_t seed, int64_t row,
                             uint64_t node)
{
    double cw[64];
    int64_t pick[16];
    uint8_t js[64];
    const int64_t last = spnc_running_sums(p, ns, cw);
    const int c = spnc_picks_few512(cw, ns, last, fill, seed, row, node, pick, js);
    int i;
    for (i = 0; i < c; i++) y[js[i]] = (double)pick[i];
}
#endif

#endif
