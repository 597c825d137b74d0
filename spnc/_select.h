/* Top-down selection over a compiled graph (MPE, hard EM, sampling) and merging's hard
 * routing: the passes that follow one induced tree per row from the root, after the
 * forward sweeps of _sweeps.h. */
#ifndef SPNC_SELECT_H
#define SPNC_SELECT_H

#include "_sweeps.h"

/* The rows of a block that are on a node's induced tree are one bit mask (bit j: row j);
 * a sum visits only its active rows, a product ORs its mask into its children, a leaf
 * fills only its active rows. The work is per active row, not per node and row. */
#if SPNC_B != 64
#error "spnc_select keeps one 64-bit row mask per node and block: SPNC_B must be 64"
#endif

/* Calls body with j = each set bit of mask, lowest first. */
#define SPNC_FOR_BITS(j, mask, ...)                               \
    do {                                                          \
        uint64_t spnc_bits_ = (mask);                             \
        while (spnc_bits_) {                                      \
            const int j = __builtin_ctzll(spnc_bits_);            \
            spnc_bits_ &= spnc_bits_ - 1;                         \
            __VA_ARGS__                                           \
        }                                                         \
    } while (0)

/* The rows of an taking each edge of a max-product sum (a row's arg-max edge is the last
 * whose bit is set in the forward's G, edge 0 when none is: spnc_arg_bits): the edges from
 * the last, each taking the rows of an still left that it holds, edge 0 the rest. Each
 * edge's rows are ORed into its child's mask, and edge_acc (if given) gets them, weighted
 * by row_w (in increasing row order), or counted when row_w is NULL (routing). */
static inline void spnc_arg_rows(const spnc_net *g, int64_t a, int64_t k, const uint64_t *G, uint64_t an,
                                 uint64_t *A, double *edge_acc, const double *row_w)
{
    uint64_t left = an;
    int64_t e;
    if (!edge_acc) {   /* no branch on which edges have rows: ORing none in changes nothing */
        for (e = k - 1; e > 0; e--) {
            const uint64_t m = G[e] & left;
            left ^= m;
            A[g->pslot[g->child[a + e]]] |= m;
        }
        if (k) A[g->pslot[g->child[a]]] |= left;
        return;
    }
    for (e = k - 1; e >= 0 && left; e--) {
        const uint64_t m = e ? G[e] & left : left;
        if (!m) continue;
        left &= ~m;
        A[g->pslot[g->child[a + e]]] |= m;
        if (row_w) SPNC_FOR_BITS(j, m, { edge_acc[a + e] += row_w[j]; });
        else edge_acc[a + e] += (double)__builtin_popcountll(m);      /* rows, unweighted */
    }
}

#ifdef SPNC_X86_512
/* Bit j set where x[j] (j < 64) is NaN: eight compares where the scalar loop takes 64. */
__attribute__((target("avx512f")))
static uint64_t spnc_nan_bits512(const double *x)
{
    uint64_t b = 0;
    int i;
    for (i = 0; i < 8; i++)
        b |= (uint64_t)_mm512_cmp_pd_mask(_mm512_loadu_pd(x + 8 * i), _mm512_loadu_pd(x + 8 * i), _CMP_UNORD_Q) << (8 * i);
    return b;
}

/* y[j] = b for each set bit j of fill: eight masked stores, no loop whose exit mispredicts. */
__attribute__((target("avx512f")))
static void spnc_fill512(double *y, uint64_t fill, double b)
{
    const __m512d v = _mm512_set1_pd(b);
    int i;
    for (i = 0; i < 8; i++) _mm512_mask_storeu_pd(y + 8 * i, (__mmask8)(fill >> (8 * i)), v);
}

#endif

#include "_draws.h"

/* Inline leaf n on the trees of rows an fills its variable where it is missing (mb: the
 * missing entries' masks per variable) in out_XT: its most probable state (mode 1) or one
 * drawn, keyed by (seed, row, n). */
static inline void spnc_leaf_fill(const spnc_net *g, int64_t n, int64_t col0, int mode, uint64_t an,
                                  const uint64_t *mb, uint64_t seed, int64_t row, double *out_XT)
{
    const int64_t o = g->off[n], ns = g->nst[n];
    uint64_t fill;
    double *restrict y;
    if (g->var[n] < 0 || !(fill = an & mb[g->var[n]])) return;
    y = SPNC_XV(g, out_XT, g->var[n], col0);
    if (mode == 1) {
        const double b = g->best[n];
#ifdef SPNC_X86_512
        if (SPNC_HAS_512()) {
            spnc_fill512(y, fill, b);
            return;
        }
#endif
        SPNC_FOR_BITS(j, fill, { y[j] = b; });
        return;
    }
#ifdef SPNC_X86_512
    if (ns <= 64 && spnc_few_rows(fill) && SPNC_HAS_VBMI2()) {
        spnc_fill_few512(y, g->lin + o, ns, fill, seed, row, (uint64_t)n);
        return;
    }
    if (ns <= 64 && __builtin_popcountll(fill) >= 16 && SPNC_HAS_DQ()) {
        spnc_fill_draw512(y, g->lin + o, ns, fill, seed, row, (uint64_t)n);
        return;
    }
#endif
    SPNC_FOR_BITS(j, fill, {
        double u = spnc_rand_uniform(seed, row + j, n, 0), cum = 0.0;
        int64_t st, pick = -1, last = -1;
        for (st = 0; st < ns; st++) {
            double p = g->lin[o + st];
            if (p > 0.0) last = st;
            cum += p;
            if (u <= cum && p > 0.0) { pick = st; break; }
        }
        y[j] = pick >= 0 ? pick : last;
    });
}

/* A product's rows are on every child's tree: its mask goes to each (non-alias) child; the
 * first parent edge of a child (first[]) resets the child's mask, later ones OR into it. */
static inline void spnc_product_masks(const spnc_net *g, int64_t a, int64_t k, uint64_t an, uint64_t *A)
{
    int64_t e;
    for (e = 0; e < k; e++) {
        const int64_t c = g->child[a + e];
        if (g->alias[c]) continue;
        if (g->first[a + e]) A[g->pslot[c]] = an;
        else A[g->pslot[c]] |= an;
    }
}

/* spnc_product_masks when the leaves sharing their product's slot are not visited (see
 * spnc_select): the product fills their missing entries itself. Every slot is 0 before its
 * first writer, so each child's mask is ORed in. */
static inline void spnc_product_fills(const spnc_net *g, int64_t n, int64_t col0, int mode, uint64_t an,
                                      const uint64_t *mb, uint64_t seed, int64_t row, double *out_XT,
                                      uint64_t *A)
{
    const int64_t a = g->child_ptr[n], k = g->child_ptr[n + 1] - a;
    int64_t e;
    for (e = 0; e < k; e++) {
        const int64_t c = g->child[a + e];
        if (!g->alias[c]) {
            A[g->pslot[c]] |= an;
        } else if (g->kind[c] >= 2 && out_XT) {   /* an != 0: empty nodes are skipped */
            spnc_leaf_fill(g, c, col0, mode, an, mb, seed, row, out_XT);
        }
    }
}

/* One induced tree per row, as row masks A in the backward plan's slots (set by the caller
 * for the roots). mode 1 (max): each active sum takes the arg-max edge the forward stored in
 * G (and, with edge_acc, adds the row's weight to that edge's count). mode 0 (sampling):
 * each active sum draws an edge with probability w_c S_c / S_n from the log-domain values
 * W (slot = node) if evidence, else with the plain weight w_c, keyed by (seed, row, node). Leaves mark
 * leaf_active / leaf_resp (stride m) and inline leaves fill their missing variable in
 * out_XT (laid out as XT): the most probable state (mode 1) or a drawn one; mb (n_vars words) is scratch
 * for the masks of the missing entries. row: the block's first row. With visit (descending,
 * spnc._visit.select_visit; only without leaf_active, leaf_resp and node_acc) just the n_visit
 * nodes listed are swept: the leaves sharing a product's slot are not, their product fills
 * for them. Every slot must then be 0 at the start; nodes without rows are skipped, masks
 * are ORed into the children's slots, and an entry with vclear set zeroes its slot after it
 * (the slot's last reader: a later node may own it). */
SPNC_CLONES
static void spnc_select(const spnc_net *g, int64_t col0, int mode, int evidence, const double *W,
                        const uint64_t *G, uint64_t *A, uint64_t seed, int64_t row, const double *row_w,
                        double *edge_acc, double *node_acc, uint8_t *leaf_active, double *leaf_resp,
                        double *out_XT, uint64_t *mb, int64_t n_vars, const int32_t *visit,
                        const uint8_t *vclear, int64_t n_visit)
{
    const int64_t n_steps = visit ? n_visit : g->n_nodes;
    int64_t n, i;
    int j;
    if (out_XT)
        for (n = 0; n < n_vars; n++) {
            const double *restrict x = SPNC_XV(g, g->XT, n, col0);
            uint64_t b = 0;
#ifdef SPNC_X86_512
            if (SPNC_HAS_512()) {
                mb[n] = spnc_nan_bits512(x);
                continue;
            }
#endif
            for (j = 0; j < SPNC_B; j++) b |= (uint64_t)(x[j] != x[j]) << j;
            mb[n] = b;
        }
    for (i = 0; i < n_steps; i++) {
        const int64_t a = g->child_ptr[n = visit ? visit[i] : g->n_nodes - 1 - i], k = g->child_ptr[n + 1] - a;
        const uint64_t an = A[g->pslot[n]];
        int64_t e;
        if (visit) {
            if (!an) continue;
            if (vclear[i]) A[g->pslot[n]] = 0;    /* an is read: no one below reads this slot */
        }
        if (g->kind[n] == 0) {
            if (!visit)
                for (e = 0; e < k; e++)
                    if (g->first[a + e]) A[g->pslot[g->child[a + e]]] = 0;
            if (mode == 1) {
                spnc_arg_rows(g, a, k, G + g->toff[n], an, A, edge_acc, row_w);
            } else {
#ifdef SPNC_X86_512
                if (!evidence && k <= 64 && spnc_few_rows(an) && SPNC_HAS_VBMI2())
                    spnc_draw_few512(g, n, a, k, an, seed, row, A);
                else if (!evidence && k >= 4 && k <= 64 && __builtin_popcountll(an) >= 16 && SPNC_HAS_DQ())
                    spnc_draw512(g, n, a, k, an, seed, row, A);
                else
#endif
                SPNC_FOR_BITS(j, an, {
                    double u = spnc_rand_uniform(seed, row + j, n, 0), cum = 0.0;
                    int64_t pick = -1, last = -1;
                    for (e = 0; e < k; e++) {
                        double p = g->w[a + e];      /* nothing observed: the weight itself, no exp */
                        if (evidence) {
                            p = W[(int64_t)g->child[a + e] * SPNC_B + j] + g->logw[a + e] - W[n * SPNC_B + j];
                            p = spnc_exp_nonpos(p < 0.0 ? p : 0.0);
                        }
                        if (p > 0.0) last = e;
                        cum += p;
                        if (cum >= u) { pick = e; break; }
                    }
                    if (pick < 0) pick = last;
                    if (pick >= 0) A[g->pslot[g->child[a + pick]]] |= 1ULL << j;
                });
            }
        } else if (g->kind[n] == 1) {
            if (visit) spnc_product_fills(g, n, col0, mode, an, mb, seed, row, out_XT, A);
            else spnc_product_masks(g, a, k, an, A);
        } else {
            if (leaf_active) {
                uint8_t *restrict la = leaf_active + g->leaf_slot[n] * g->m + col0;
                for (j = 0; j < SPNC_B; j++) la[j] = (uint8_t)((an >> j) & 1);
            }
            if (leaf_resp) {
                double *restrict lr = leaf_resp + g->leaf_slot[n] * g->m + col0;
                for (j = 0; j < SPNC_B; j++) lr[j] = (double)((an >> j) & 1);
            }
            if (out_XT) spnc_leaf_fill(g, n, col0, mode, an, mb, seed, row, out_XT);
        }
        if (node_acc) {
            double acc = 0.0;
            SPNC_FOR_BITS(j, an, { acc += row_w[j]; });
            node_acc[n] += acc;
        }
    }
}

/* Hard routing of rows to nodes (merging): the max-product selection of spnc_select on the
 * same row masks A, each node's mask written to bits[n * stride] (bit j: row j of the block)
 * and each sum edge's rows counted in edge_acc. G holds the forward's arg-max edges of each
 * sum as bits (spnc_arg_bits). */
SPNC_CLONES
static void spnc_route(const spnc_net *g, const uint64_t *G, uint64_t *A, uint64_t *bits, int64_t stride,
                       double *edge_acc)
{
    int64_t n;
    for (n = g->n_nodes - 1; n >= 0; n--) {
        const int64_t a = g->child_ptr[n], k = g->child_ptr[n + 1] - a;
        const uint64_t an = A[g->pslot[n]];
        int64_t e;
        if (g->kind[n] == 0) {
            for (e = 0; e < k; e++)
                if (g->first[a + e]) A[g->pslot[g->child[a + e]]] = 0;
            spnc_arg_rows(g, a, k, G + g->toff[n], an, A, edge_acc, NULL);
        } else if (g->kind[n] == 1) {
            spnc_product_masks(g, a, k, an, A);
        }
        bits[n * stride] = an;
    }
}

#endif
