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
#include "_stage.h"

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

#ifdef SPNC_X86_512
/* Inline leaves of at most SPNC_LUT_STATES states are read by a lookup in one register: the
 * table holds the leaf's value of each state (probability or log) and `miss` after them; a
 * missing x (NaN) becomes the index past the last state (vminpd returns its second operand
 * for NaN) and a permute reads the lane, one per 8 rows, where the generic loops take two
 * to three compares and as many masked broadcasts, all on one port of Intel's cores. The
 * table is one masked load: built from scalars on the stack, it stalled on store forwarding.
 * s = y (op 1), s * y (op 2), s + y (op 3) or base + y (op 4), for the values y of rows x. */
#define SPNC_LUT_STATES 7
__attribute__((target("avx512f,avx512dq")))
static inline __m512i spnc_state_index512(const double *x, __m512d past)
{
    return _mm512_cvttpd_epi64(_mm512_min_pd(_mm512_loadu_pd(x), past));
}

__attribute__((target("avx512f,avx512dq")))
static void spnc_leaf_lut512(double *restrict s, const double *restrict base, const double *restrict x,
                             const double *restrict tab_values, double miss, int32_t ns, int op)
{
    const __m512d tab = _mm512_mask_loadu_pd(_mm512_set1_pd(miss), (__mmask8)((1u << ns) - 1u), tab_values);
    const __m512d past = _mm512_set1_pd((double)ns);
    int j;
    for (j = 0; j < SPNC_B; j += 8) {
        const __m512d y = _mm512_permutexvar_pd(spnc_state_index512(x + j, past), tab);
        __m512d r;
        switch (op) {
        case 1: r = y; break;
        case 2: r = _mm512_mul_pd(_mm512_loadu_pd(s + j), y); break;
        case 3: r = _mm512_add_pd(_mm512_loadu_pd(s + j), y); break;
        default: r = _mm512_add_pd(_mm512_loadu_pd(base + j), y); break;
        }
        _mm512_storeu_pd(s + j, r);
    }
}

/* spnc_lin_leaf_mul's lookup: mantissas into m, exponents added to x (missing: 0.5 * 2^1). */
__attribute__((target("avx512f,avx512dq")))
static void spnc_lin_leaf_lut512(double *restrict m, double *restrict x, const double *restrict xv,
                                 const double *restrict sm, const double *restrict se, int32_t ns)
{
    const __mmask8 k = (__mmask8)((1u << ns) - 1u);
    const __m512d tm = _mm512_mask_loadu_pd(_mm512_set1_pd(0.5), k, sm);
    const __m512d te = _mm512_mask_loadu_pd(_mm512_set1_pd(1.0), k, se);
    const __m512d past = _mm512_set1_pd((double)ns);
    int j;
    for (j = 0; j < SPNC_B; j += 8) {
        const __m512i i = spnc_state_index512(xv + j, past);
        _mm512_storeu_pd(m + j, _mm512_mul_pd(_mm512_loadu_pd(m + j), _mm512_permutexvar_pd(i, tm)));
        _mm512_storeu_pd(x + j, _mm512_add_pd(_mm512_loadu_pd(x + j), _mm512_permutexvar_pd(i, te)));
    }
}
#endif

/* Add (log domain) leaf c's log-values for rows col0.. to s, or (put) write them there; with
 * base, write base + them (a product's first two children at once: no copy of the first). */
static SPNC_INLINE void spnc_leaf_log_to(double *restrict s, const double *restrict base, const spnc_net *g,
                                         int64_t c, int64_t col0, int put)
{
    const double *restrict x = SPNC_XV(g, g->XT, g->var[c], col0);
    const double *restrict lp = g->logp + g->off[c];
    const double miss = g->miss[c];
    int j;
#ifdef SPNC_X86_512
    if (g->nst[c] <= SPNC_LUT_STATES && SPNC_HAS_DQ()) {
        spnc_leaf_lut512(s, base, x, lp, miss, g->nst[c], base ? 4 : (put ? 1 : 3));
        return;
    }
#endif
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
#ifdef SPNC_X86_512
    if (g->nst[c] <= SPNC_LUT_STATES && SPNC_HAS_DQ()) {
        spnc_lin_leaf_lut512(m, x, xv, sm, se, g->nst[c]);
        return;
    }
#endif
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
 * their edges' shares; with G (mode 1), sums write their arg-max edges as bits (a word per
 * edge, at toff: see spnc_arg_bits). */
SPNC_CLONES
static void spnc_forward_log(const spnc_net *g, int64_t col0, double *W, int mode, const int32_t *cs,
                             const int32_t *ns, double *T, uint64_t *G)
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
            spnc_max_block(out, W, cs + a, g->logw + a, k, G ? G + g->toff[n] : NULL);
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
