/* The node loops of spnc's sweeps over one block of SPNC_B rows (see _kernels.h for the
 * block kernels they inline). Each sweep is one cloned function, so the per-node kernels
 * are inlined and specialised for the CPU instead of being called through the loader.
 *
 * Inline discrete leaves (a state table per leaf) are read straight from the data by
 * their product parents; a leaf whose parents are all products is never materialised.
 * Sum nodes can write each edge's share of the sum, w_c S_c / S_n, to T (rows of SPNC_B,
 * sum edges in order): the backward pass and sampling then need no node value at all,
 * so the forward keeps only the live set of nodes (the plan of plan_slots) in cache.
 */
#ifndef SPNC_SWEEPS_H
#define SPNC_SWEEPS_H

#include "_kernels.h"
#include "_check.h"

typedef struct {
    int64_t n_nodes;
    const uint8_t *kind;           /* 0 sum, 1 product, >= 2 leaf */
    const int64_t *child_ptr;
    const int32_t *child;
    const double *logw, *wm, *we;
    const double *w;               /* edge weights as plain doubles (wm * 2^we) */
    const int64_t *leaf_slot;
    const int64_t *toff;           /* sum node: its first edge's row in T */
    const int64_t *sidx;           /* sum node: its index among the sums */
    const int32_t *pslot;          /* backward slot of each node */
    const uint8_t *first;          /* edge: the parent is the child's first (highest) writer */
    const uint8_t *alias;          /* node shares the slot of its only parent, a product */
    const uint8_t *counted;        /* node: the backward sweep sums its count (roots, parentless nodes) */
    const int64_t *spar_ptr, *spar_edge;   /* node: its sum-parent edges (see _gather.h) */
    const int32_t *spar_node;      /* their parents */
    const uint8_t *pfirst;         /* product edge: the parent is the child's first product writer */
    const uint8_t *pbase;          /* node: its slot holds a value before sum parents add theirs */
    const uint8_t *skip;           /* inline leaf read only by products: no slot written */
    /* inline discrete leaves */
    const int32_t *var;            /* -1: not inline */
    const int64_t *off;
    const double *logp, *miss, *lm, *le;
    const double *lin;             /* lm * 2^le as plain doubles (plain sweeps, sampling) */
    const int32_t *nst, *best;
    /* the chunk: L (leaf matrix) has rows of m; XT holds variable v's values of the rows
       from column x0 on at XT + v * xm (the whole chunk, or one block staged from the rows) */
    const double *XT, *L;
    int64_t m, xm, x0;
} spnc_net;

/* Variable v's values of the block starting at column col0 of the chunk. */
#define SPNC_XV(g, base, v, col0) ((base) + (int64_t)(v) * (g)->xm + ((col0) - (g)->x0))

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

/* Add (log domain) leaf c's log-values for rows col0.. to s, or (put) write them there; with
 * base, write base + them (a product's first two children at once: no copy of the first). */
static SPNC_INLINE void spnc_leaf_log_to(double *restrict s, const double *restrict base, const spnc_net *g,
                                         int64_t c, int64_t col0, int put)
{
    const double *restrict x = SPNC_XV(g, g->XT, g->var[c], col0);
    const double *restrict lp = g->logp + g->off[c];
    const double miss = g->miss[c];
    int j;
    if (g->nst[c] == 2) {
        const double a0 = lp[0], a1 = lp[1];
        for (j = 0; j < SPNC_B; j++) {
            double v = x[j];
            double y = v == 1.0 ? a1 : a0;
            y = v == v ? y : miss;
            s[j] = base ? base[j] + y : (put ? y : s[j] + y);
        }
    } else {
        for (j = 0; j < SPNC_B; j++) {
            double v = x[j];
            int32_t st = (int32_t)(v == v ? v : 0.0);
            double y = lp[st];
            y = v == v ? y : miss;
            s[j] = base ? base[j] + y : (put ? y : s[j] + y);
        }
    }
}

static SPNC_INLINE void spnc_leaf_log(double *restrict s, const spnc_net *g, int64_t c, int64_t col0, int put)
{
    spnc_leaf_log_to(s, NULL, g, c, col0, put);
}

/* Multiply (linear domain) leaf c's values into (m, x); missing -> 1 = 0.5 * 2^1. */
static SPNC_INLINE void spnc_lin_leaf_mul(double *restrict m, double *restrict x, const spnc_net *g,
                                          int64_t c, int64_t col0)
{
    const double *restrict xv = SPNC_XV(g, g->XT, g->var[c], col0);
    const double *restrict sm = g->lm + g->off[c];
    const double *restrict se = g->le + g->off[c];
    int j;
    if (g->nst[c] == 2) {
        const double a0 = sm[0], a1 = sm[1], b0 = se[0], b1 = se[1];
        for (j = 0; j < SPNC_B; j++) {
            double v = xv[j];
            double a = v == 1.0 ? a1 : a0, b = v == 1.0 ? b1 : b0;
            m[j] *= v == v ? a : 0.5;
            x[j] += v == v ? b : 1.0;
        }
    } else {
        for (j = 0; j < SPNC_B; j++) {
            double v = xv[j];
            int32_t st = (int32_t)(v == v ? v : 0.0);
            double a = sm[st], b = se[st];
            m[j] *= v == v ? a : 0.5;
            x[j] += v == v ? b : 1.0;
        }
    }
}

/* Log-domain product: children in slots (cs) or inline leaves read from the data. */
static SPNC_INLINE void spnc_prod_node(double *restrict out, const double *restrict W, const spnc_net *g,
                                       int64_t a, int64_t k, const int32_t *restrict cs, int64_t col0)
{
    int64_t e;
    int j;
    /* straight into out, which is no child's slot (plan_slots allocates a node's slot before
       it frees its children's); the first child starts the sum (0 + x is x). A first child
       in a slot is added to the second at once: its copy alone was a call to memcpy. */
    e = 0;
    if (k >= 2 && g->var[g->child[a]] < 0) {
        const double *restrict v0 = W + (int64_t)cs[a] * SPNC_B;
        const int64_t c1 = g->child[a + 1];
        if (g->var[c1] >= 0) {
            spnc_leaf_log_to(out, v0, g, c1, col0, 0);
        } else {
            const double *restrict v1 = W + (int64_t)cs[a + 1] * SPNC_B;
            for (j = 0; j < SPNC_B; j++) out[j] = v0[j] + v1[j];
        }
        e = 2;
    }
    for (; e < k; e++) {
        int64_t c = g->child[a + e];
        if (g->var[c] >= 0) {
            spnc_leaf_log(out, g, c, col0, e == 0);
        } else {
            const double *restrict v = W + (int64_t)cs[a + e] * SPNC_B;
            if (e == 0)
                for (j = 0; j < SPNC_B; j++) out[j] = v[j];
            else
                for (j = 0; j < SPNC_B; j++) out[j] += v[j];
        }
    }
    if (k == 0)
        for (j = 0; j < SPNC_B; j++) out[j] = 0.0;
}

static SPNC_INLINE void spnc_lin_prod_node(double *restrict out, const double *restrict W, const spnc_net *g,
                                           int64_t a, int64_t k, const int32_t *restrict cs, int64_t col0)
{
    double m[SPNC_B], x[SPNC_B];
    int64_t e;
    int j;
    for (j = 0; j < SPNC_B; j++) { m[j] = 1.0; x[j] = 0.0; }
    for (e = 0; e < k; e++) {
        int64_t c = g->child[a + e];
        if (g->var[c] >= 0) {
            spnc_lin_leaf_mul(m, x, g, c, col0);
        } else {
            const double *restrict cm = W + (int64_t)cs[a + e] * 2 * SPNC_B;
            const double *restrict ce = cm + SPNC_B;
            for (j = 0; j < SPNC_B; j++) { m[j] *= cm[j]; x[j] += ce[j]; }
        }
        if ((e & 511) == 511)  /* mantissas >= 0.5 each: renormalise before 2^-1022 */
            for (j = 0; j < SPNC_B; j++) spnc_lin_norm(m + j, x + j, m[j], x[j]);
    }
    for (j = 0; j < SPNC_B; j++) spnc_lin_norm(out + j, out + SPNC_B + j, m[j], x[j]);
}

/* Forward sweep in the log domain, sum-product (mode 0) or max-product (mode 1): node n's
 * values at W + ns[n] * SPNC_B, children's slots cs per edge. With T (mode 0), sums write
 * their edges' shares; with arg (mode 1), sums write their arg-max edge per row (SPNC_B
 * int32 per sum, at sidx). */
SPNC_CLONES
static void spnc_forward_log(const spnc_net *g, int64_t col0, double *W, int mode, const int32_t *cs,
                             const int32_t *ns, double *T, double *arg)
{
    int64_t n;
    for (n = 0; n < g->n_nodes; n++) {
        const int64_t a = g->child_ptr[n], k = g->child_ptr[n + 1] - a;
        double *out = W + (int64_t)ns[n] * SPNC_B;
        if (g->kind[n] >= 2) {
            if (g->skip && g->skip[n]) continue;
            if (g->var[n] >= 0) {
                spnc_leaf_log(out, g, n, col0, 1);
            } else {
                memcpy(out, g->L + g->leaf_slot[n] * g->m + col0, SPNC_B * sizeof(double));
            }
        } else if (g->kind[n] == 1) {
            spnc_prod_node(out, W, g, a, k, cs, col0);
        } else if (mode == 0) {
            spnc_sum_block(out, W, cs + a, g->logw + a, k, T ? T + g->toff[n] * SPNC_B : NULL);
        } else {
            spnc_max_block(out, W, cs + a, g->logw + a, k, arg ? arg + g->sidx[n] * SPNC_B : NULL);
        }
    }
}

/* spnc_forward_log of the nodes listed in nodes[0..n_list) alone, in that (increasing)
 * order: the same per-node code, so the same bits. The listed nodes' children that are not
 * listed must hold their values in their slots already (matrix leaves among the listed
 * ones are read from L). */
SPNC_CLONES
static void spnc_forward_log_some(const spnc_net *g, int64_t col0, double *W, int mode, const int32_t *cs,
                                  const int32_t *ns, const int64_t *nodes, int64_t n_list)
{
    int64_t i;
    for (i = 0; i < n_list; i++) {
        const int64_t n = nodes[i], a = g->child_ptr[n], k = g->child_ptr[n + 1] - a;
        double *out = W + (int64_t)ns[n] * SPNC_B;
        if (g->kind[n] >= 2) {
            if (g->var[n] >= 0) {
                spnc_leaf_log(out, g, n, col0, 1);
            } else {
                memcpy(out, g->L + g->leaf_slot[n] * g->m + col0, SPNC_B * sizeof(double));
            }
        } else if (g->kind[n] == 1) {
            spnc_prod_node(out, W, g, a, k, cs, col0);
        } else if (mode == 0) {
            spnc_sum_block(out, W, cs + a, g->logw + a, k, NULL);
        } else {
            spnc_max_block(out, W, cs + a, g->logw + a, k, NULL);
        }
    }
}

/* Sum-product forward sweep in the linear domain (mantissas then exponents per slot). */
SPNC_CLONES
static void spnc_forward_lin(const spnc_net *g, int64_t col0, double *W, const int32_t *cs,
                             const int32_t *ns, double *T)
{
    int64_t n;
    for (n = 0; n < g->n_nodes; n++) {
        const int64_t a = g->child_ptr[n], k = g->child_ptr[n + 1] - a;
        double *out = W + (int64_t)ns[n] * 2 * SPNC_B;
        if (g->kind[n] >= 2) {
            if (g->skip && g->skip[n]) continue;
            if (g->var[n] >= 0) {
                const int64_t o = g->off[n];
                spnc_lin_states_block(out, SPNC_XV(g, g->XT, g->var[n], col0), g->lm + o, g->le + o,
                                      0.5, 1.0);
            } else {
                spnc_lin_from_log(out, g->L + g->leaf_slot[n] * g->m + col0);
            }
        } else if (g->kind[n] == 1) {
            spnc_lin_prod_node(out, W, g, a, k, cs, col0);
        } else {
            spnc_lin_sum_block(out, W, cs + a, g->wm + a, g->we + a, k, T ? T + g->toff[n] * SPNC_B : NULL);
        }
    }
}

#include "_plain.h"

#include "_backward.h"

#endif
