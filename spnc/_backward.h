/* The backward sweeps over one block: node posteriors, expected edge and node counts and
 * the leaves' statistics (included by _sweeps.h, which defines spnc_net). spnc_backward
 * pushes from each node to its children in any domain; _gather.h holds the sweep that
 * gathers from sum parents on plain blocks. */
#ifndef SPNC_BACKWARD_H
#define SPNC_BACKWARD_H

/* Row sums over a block in 8 lanes, added in a fixed tree: a dependency chain of SPNC_B adds
 * would cost more than the rest of the backward. */
#define SPNC_LANES 8
static SPNC_INLINE double spnc_lanes_sum(const double *l)
{
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* What sum node n pushes to child c, rho_n w_c S_c / S_n, from node values kept in W
 * (slot = node; no T) in the sweep's domain: 2 plain doubles, 1 scaled (mantissas, then
 * exponents), 0 log; q = rho_n / S_n (plain), rho_n / m_n (scaled), rho_n (log). Plain and
 * scaled round alike, as in the forward, so they agree bit for bit above 2^-1022. */
static SPNC_INLINE void spnc_push_of(double *restrict out, const double *restrict W, int domain, int64_t n,
                                     int64_t c, double lw, double w, double wm, double we,
                                     const double *restrict q)
{
    int j;
    if (domain == 2) {
        const double *restrict cv = W + c * SPNC_B;
        for (j = 0; j < SPNC_B; j++) out[j] = q[j] * w * cv[j];
    } else if (domain == 1) {
        const double *restrict ne = W + n * 2 * SPNC_B + SPNC_B;
        const double *restrict cm = W + c * 2 * SPNC_B, *restrict ce = cm + SPNC_B;
        for (j = 0; j < SPNC_B; j++) {
            double d = ce[j] + we - ne[j];
            out[j] = q[j] * wm * cm[j] * spnc_pow2(d < 1.0 ? d : 1.0);
        }
    } else {
        const double *restrict wn = W + n * SPNC_B, *restrict wc = W + c * SPNC_B;
        for (j = 0; j < SPNC_B; j++) {
            double x = wc[j] + lw - wn[j];   /* NaN where q is 0 and S_n is 0: masked below */
            const double y = q[j] * spnc_exp_nonpos(x > 0.0 ? 0.0 : x);
            out[j] = q[j] > 0.0 ? y : 0.0;
        }
    }
}

/* sum_j p[j] w[j] */
static SPNC_INLINE double spnc_wdot(const double *restrict p, const double *restrict w)
{
    double l[SPNC_LANES] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    int j, i;
    for (j = 0; j < SPNC_B; j += SPNC_LANES)
        for (i = 0; i < SPNC_LANES; i++) l[i] += p[j + i] * w[j + i];
    return spnc_lanes_sum(l);
}

/* Partial sums kept per sum edge (its expected count) across the blocks, one per lane,
 * added up by the caller after the sweep: folding a block's lanes to one number per edge
 * and block was a fifth of the backward kernel on a 1 k-edge region graph, and a fold to
 * fewer lanes goes through memory (a stalled store-to-load forward). */
#define SPNC_EDGE_LANES SPNC_LANES
_Static_assert(SPNC_EDGE_LANES == 8, "spnc._infer._lane_totals adds 8 lanes");

/* The lanes l of one block added to the edge's partial sums acc. */
static SPNC_INLINE void spnc_lanes_add(double *restrict acc, const double *restrict l)
{
    int i;
    for (i = 0; i < SPNC_EDGE_LANES; i++) acc[i] += l[i];
}

/* v = a * s * b (b NULL: 1) to the child's posterior pc (written if first, else added),
 * and sum_j v[j] w[j] (the edge's expected count) to the edge's partial sums acc: one pass,
 * v never stored. The three loops are kept apart on purpose: one loop with the cases as
 * selects inside ran the backward pass 1.6-1.9x slower (GCC does not unswitch it). */
static SPNC_INLINE void spnc_push(double *restrict pc, int first, const double *restrict a, double s,
                                  const double *restrict b, const double *restrict w, double *restrict acc)
{
    double l[SPNC_LANES] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    int j, i;
    if (!b) {
        for (j = 0; j < SPNC_B; j += SPNC_LANES)
            for (i = 0; i < SPNC_LANES; i++) {
                const double v = a[j + i];
                pc[j + i] = first ? v : pc[j + i] + v;
                l[i] += v * w[j + i];
            }
    } else if (first) {
        for (j = 0; j < SPNC_B; j += SPNC_LANES)
            for (i = 0; i < SPNC_LANES; i++) {
                const double v = a[j + i] * s * b[j + i];
                pc[j + i] = v;
                l[i] += v * w[j + i];
            }
    } else {
        for (j = 0; j < SPNC_B; j += SPNC_LANES)
            for (i = 0; i < SPNC_LANES; i++) {
                const double v = a[j + i] * s * b[j + i];
                pc[j + i] += v;
                l[i] += v * w[j + i];
            }
    }
    spnc_lanes_add(acc, l);
}

#ifdef SPNC_X86_512
/* spnc_push in AVX-512 vectors, the edge count in two accumulators (a chain of eight
 * dependent multiply-adds per edge and block bounded the generic form) added to acc as one
 * vector (GCC's generic form adds the lanes one by one). */
__attribute__((target("avx512f")))
static inline void spnc_push512(double *restrict pc, int first, const double *restrict a, double s,
                                const double *restrict b, const double *restrict w, double *restrict acc)
{
    const __m512d sv = _mm512_set1_pd(s);
    __m512d l0 = _mm512_setzero_pd(), l1 = _mm512_setzero_pd();
    int j;
    if (!b) {
        for (j = 0; j < SPNC_B; j += 16) {
            const __m512d v0 = _mm512_loadu_pd(a + j), v1 = _mm512_loadu_pd(a + j + 8);
            _mm512_storeu_pd(pc + j, first ? v0 : _mm512_add_pd(_mm512_loadu_pd(pc + j), v0));
            _mm512_storeu_pd(pc + j + 8, first ? v1 : _mm512_add_pd(_mm512_loadu_pd(pc + j + 8), v1));
            l0 = _mm512_fmadd_pd(v0, _mm512_loadu_pd(w + j), l0);
            l1 = _mm512_fmadd_pd(v1, _mm512_loadu_pd(w + j + 8), l1);
        }
    } else if (first) {
        for (j = 0; j < SPNC_B; j += 16) {
            const __m512d v0 = _mm512_mul_pd(_mm512_mul_pd(_mm512_loadu_pd(a + j), sv), _mm512_loadu_pd(b + j));
            const __m512d v1 = _mm512_mul_pd(_mm512_mul_pd(_mm512_loadu_pd(a + j + 8), sv), _mm512_loadu_pd(b + j + 8));
            _mm512_storeu_pd(pc + j, v0);
            _mm512_storeu_pd(pc + j + 8, v1);
            l0 = _mm512_fmadd_pd(v0, _mm512_loadu_pd(w + j), l0);
            l1 = _mm512_fmadd_pd(v1, _mm512_loadu_pd(w + j + 8), l1);
        }
    } else {
        for (j = 0; j < SPNC_B; j += 16) {
            const __m512d v0 = _mm512_mul_pd(_mm512_mul_pd(_mm512_loadu_pd(a + j), sv), _mm512_loadu_pd(b + j));
            const __m512d v1 = _mm512_mul_pd(_mm512_mul_pd(_mm512_loadu_pd(a + j + 8), sv), _mm512_loadu_pd(b + j + 8));
            _mm512_storeu_pd(pc + j, _mm512_add_pd(_mm512_loadu_pd(pc + j), v0));
            _mm512_storeu_pd(pc + j + 8, _mm512_add_pd(_mm512_loadu_pd(pc + j + 8), v1));
            l0 = _mm512_fmadd_pd(v0, _mm512_loadu_pd(w + j), l0);
            l1 = _mm512_fmadd_pd(v1, _mm512_loadu_pd(w + j + 8), l1);
        }
    }
    _mm512_storeu_pd(acc, _mm512_add_pd(_mm512_loadu_pd(acc), _mm512_add_pd(l0, l1)));
}
#define SPNC_PUSH(x512, ...) ((x512) ? spnc_push512(__VA_ARGS__) : spnc_push(__VA_ARGS__))
#else
#define SPNC_PUSH(x512, ...) spnc_push(__VA_ARGS__)
#endif

/* Partial sums kept per state of an inline leaf (EM's state counts): 4 lanes, so the two
 * states of a binary leaf share one cache line. With 8 lanes per state the 7.6 k leaves of a
 * plants model kept 1 MB of sums per thread, read and written once per block: the counting
 * was bound by that traffic, not by its arithmetic. */
#define SPNC_STATE_LANES 4

#ifdef SPNC_X86_512
/* The state counts of k inline leaves of <= 8 states (variable var[i], states from off[i],
 * nst[i] of them) that share one posterior pn (the leaf children of a product, 2-5 in a
 * LearnSPN model, or one leaf), with pn * wt formed once and kept in registers. A pair of
 * states is summed in 8-row vectors, each state's 8 lanes folded to 4 (lane i + lane i + 4)
 * before they are added to its partial sums; spnc_state_count, the generic form, adds in the
 * same order (bits equal). */
__attribute__((target("avx512f")))
static void spnc_state_run512(const spnc_net *g, int64_t col0, const double *pn, const double *wt,
                              const int32_t *var, const int64_t *off, const int32_t *nst, int64_t k,
                              double *state_acc)
{
    __m512d v[SPNC_B / 8];
    int64_t i;
    int j;
    for (j = 0; j < SPNC_B / 8; j++) v[j] = _mm512_mul_pd(_mm512_loadu_pd(pn + 8 * j), _mm512_loadu_pd(wt + 8 * j));
    for (i = 0; i < k; i++) {
        const double *restrict x = SPNC_XV(g, g->XT, var[i], col0);
        double *restrict sa = state_acc + off[i] * SPNC_STATE_LANES;
        int32_t st = 0;
        if (nst[i] == 2) {
            /* x in {0, 1}: a1 + v x and a0 + (v - v x) add v or +0, as the masked adds do;
               a missing x makes a1 NaN, and the block is then counted with masks below */
            __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
            for (j = 0; j < SPNC_B / 8; j++) {
                const __m512d xv = _mm512_loadu_pd(x + 8 * j);
                a1 = _mm512_fmadd_pd(v[j], xv, a1);
                a0 = _mm512_add_pd(a0, _mm512_fnmadd_pd(v[j], xv, v[j]));
            }
            if (!_mm512_cmp_pd_mask(a1, a1, _CMP_UNORD_Q)) {
                const __m512d f = _mm512_add_pd(_mm512_shuffle_f64x2(a0, a1, 0x44), _mm512_shuffle_f64x2(a0, a1, 0xEE));
                _mm512_storeu_pd(sa, _mm512_add_pd(_mm512_loadu_pd(sa), f));
                continue;
            }
        }
        for (; st < nst[i]; st += 2) {
            const __m512d c0 = _mm512_set1_pd((double)st), c1 = _mm512_set1_pd((double)(st + 1));
            __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
            for (j = 0; j < SPNC_B / 8; j++) {
                const __m512d xv = _mm512_loadu_pd(x + 8 * j);
                a0 = _mm512_mask_add_pd(a0, _mm512_cmp_pd_mask(xv, c0, _CMP_EQ_OQ), a0, v[j]);
                a1 = _mm512_mask_add_pd(a1, _mm512_cmp_pd_mask(xv, c1, _CMP_EQ_OQ), a1, v[j]);
            }
            const __m512d f = _mm512_add_pd(_mm512_shuffle_f64x2(a0, a1, 0x44), _mm512_shuffle_f64x2(a0, a1, 0xEE));
            if (st + 1 < nst[i])
                _mm512_storeu_pd(sa + st * SPNC_STATE_LANES, _mm512_add_pd(_mm512_loadu_pd(sa + st * SPNC_STATE_LANES), f));
            else
                _mm256_storeu_pd(sa + st * SPNC_STATE_LANES,
                                 _mm256_add_pd(_mm256_loadu_pd(sa + st * SPNC_STATE_LANES), _mm512_castpd512_pd256(f)));
        }
    }
}

#endif

/* The state counts of one inline leaf of ns <= 8 states (data x, partial sums sa) from its
 * posterior pn: two states per pass over the rows (both at once when binary), 8 rows as two
 * 4-row vectors (generic vectors of 8 are scalar code on AVX2), folded to 4 lanes. */
static SPNC_INLINE void spnc_state_count(const double *restrict x, double *restrict sa, int32_t ns,
                                         const double *restrict pn, const double *restrict wt)
{
    int32_t st;
    int j;
    for (st = 0; st < ns; st += 2) {
        const spnc_vd s0 = spnc_splat((double)st), s1 = spnc_splat((double)(st + 1));
        const spnc_vd zero = spnc_splat(0.0);
        spnc_vd a0 = zero, b0 = zero, a1 = zero, b1 = zero;
        for (j = 0; j < SPNC_B; j += SPNC_LANES) {
            const spnc_vd va = spnc_ld(pn + j) * spnc_ld(wt + j);
            const spnc_vd vb = spnc_ld(pn + j + SPNC_VL) * spnc_ld(wt + j + SPNC_VL);
            const spnc_vd xa = spnc_ld(x + j), xb = spnc_ld(x + j + SPNC_VL);
            a0 += spnc_blend(xa == s0, va, zero);
            b0 += spnc_blend(xb == s0, vb, zero);
            a1 += spnc_blend(xa == s1, va, zero);
            b1 += spnc_blend(xb == s1, vb, zero);
        }
        spnc_st(sa + st * SPNC_STATE_LANES, spnc_ld(sa + st * SPNC_STATE_LANES) + (a0 + b0));
        if (st + 1 < ns)
            spnc_st(sa + (st + 1) * SPNC_STATE_LANES, spnc_ld(sa + (st + 1) * SPNC_STATE_LANES) + (a1 + b1));
    }
}

/* spnc_state_count of k leaves sharing the posterior pn (arrays as for spnc_state_run512). */
static SPNC_INLINE void spnc_state_counts(const spnc_net *g, int64_t col0, const double *restrict pn,
                                          const double *restrict wt, const int32_t *var, const int64_t *off,
                                          const int32_t *nst, int64_t k, double *state_acc)
{
    int64_t i;
#ifdef SPNC_X86_512
    if (SPNC_HAS_512()) {
        spnc_state_run512(g, col0, pn, wt, var, off, nst, k, state_acc);
        return;
    }
#endif
    for (i = 0; i < k; i++)
        spnc_state_count(SPNC_XV(g, g->XT, var[i], col0), state_acc + off[i] * SPNC_STATE_LANES, nst[i], pn, wt);
}

/* Leaf n's share of the backward pass: its posterior pn to leaf_resp, and with state_acc
 * (inline discrete leaves) its weighted posterior to the count of each observed state.
 * state_acc keeps SPNC_STATE_LANES partial sums per state (state s at s * SPNC_STATE_LANES),
 * added lane by lane over the blocks and summed by the caller at the end: a sum across the
 * lanes per leaf and block took as long as the counting itself. */
static SPNC_INLINE void spnc_leaf_post(const spnc_net *g, int64_t n, int64_t col0, const double *restrict pn,
                                       const double *restrict wt, double *leaf_resp, double *state_acc)
{
    int j;
    if (leaf_resp) memcpy(leaf_resp + g->leaf_slot[n] * g->m + col0, pn, SPNC_B * sizeof(double));
    if (state_acc && g->var[n] >= 0) {
        if (g->nst[n] <= 8) {
            spnc_state_counts(g, col0, pn, wt, g->var + n, g->off + n, g->nst + n, 1, state_acc);
        } else {
            const double *restrict x = SPNC_XV(g, g->XT, g->var[n], col0);
            double *restrict sa = state_acc + g->off[n] * SPNC_STATE_LANES;
            for (j = 0; j < SPNC_B; j++)
                if (x[j] == x[j]) sa[(int64_t)x[j] * SPNC_STATE_LANES + (j & (SPNC_STATE_LANES - 1))] += pn[j] * wt[j];
        }
    }
}

/* Product n passes its posterior pn to each child that has a slot of its own: written where
 * first[e] (the child's first writer), else added. */
static SPNC_INLINE void spnc_push_product(const spnc_net *g, int64_t n, double *P, const double *restrict pn,
                                          const uint8_t *first)
{
    const int64_t a = g->child_ptr[n], k = g->child_ptr[n + 1] - a;
    int64_t e;
    int j;
    for (e = 0; e < k; e++) {
        const int64_t c = g->child[a + e];
        double *restrict pc = P + (int64_t)g->pslot[c] * SPNC_B;
        if (g->alias[c]) continue;
        if (first[a + e]) memcpy(pc, pn, SPNC_B * sizeof(double));
        else for (j = 0; j < SPNC_B; j++) pc[j] += pn[j];
    }
}

/* A leaf sharing its product parent's slot, with nothing asked of it but its expected
 * count (its alias chain's, copied by the caller). */
static SPNC_INLINE int spnc_leaf_idle(const spnc_net *g, int64_t n, const double *leaf_resp,
                                      const double *all_post, const double *state_acc)
{
    return g->kind[n] >= 2 && g->alias[n] && !leaf_resp && !all_post && !(state_acc && g->var[n] >= 0);
}

/* What every node of a backward sweep adds once its posterior pn is complete: its posterior
 * rows when all_post is given, and for a root or parentless node its expected count. Every
 * other node's count is the sum of what its parents pass it (edge counts from sums, counts
 * from products), which the caller adds up after the sweep. */
static SPNC_INLINE void spnc_node_done(const spnc_net *g, int64_t n, int64_t col0, const double *restrict pn,
                                       const double *restrict wt, double *node_acc, double *all_post)
{
    if (g->counted[n]) node_acc[n] += spnc_wdot(pn, wt);
    if (all_post) memcpy(all_post + n * g->m + col0, pn, SPNC_B * sizeof(double));
}

/* The inline leaves a product counts for (spnc._visit.state_runs): visit entry i counts
 * leaves ptr[i]..ptr[i + 1] (their variable, first state, number of states). */
typedef struct {
    const int64_t *ptr;
    const int32_t *var;
    const int64_t *off;
    const int32_t *nst;
} spnc_runs;

/* P holds node posteriors rho_n (the probability that node n is on the row's induced tree)
 * in the backward slots pslot: a node whose only parent is a product shares its slot, so
 * products copy nothing to such children. Parents push to children: rho_c = sum over parents
 * of rho_p (products) or rho_p T_e (sums); the first (highest) parent writes, the others add.
 * Accumulates, weighted by wt: edge_acc[e] (sum edges), node_acc[n]; writes leaf_resp
 * (n_leaves, m) and all_post (N, m) rows when given; state_acc (per state of the inline
 * leaves) gets each observed state's weighted posterior. edge_acc holds SPNC_EDGE_LANES
 * partial sums per edge, node_acc the counts of the counted nodes only (see spnc_node_done).
 * Only the n_visit nodes of visit (descending) are swept; the others must have nothing to do
 * (spnc._visit.backward_visit): in tree-shaped models, most leaves and products. With runs
 * (state counts only), products count the leaves that share their slot, which are not
 * listed (spnc._visit.state_runs). */
SPNC_CLONES
static void spnc_backward(const spnc_net *g, int64_t col0, double *P, const double *T, const double *W,
                          int domain, const double *wt, double *edge_acc, double *node_acc,
                          double *leaf_resp, double *all_post, double *state_acc,
                          const int32_t *visit, int64_t n_visit, const spnc_runs *runs)
{
    int64_t i;
    int j;
#ifdef SPNC_X86_512
    const int x512 = SPNC_HAS_512();
#endif
    for (i = 0; i < n_visit; i++) {
        const int64_t n = visit[i];
        const int64_t a = g->child_ptr[n], k = g->child_ptr[n + 1] - a;
        const int64_t ps = g->pslot[n];
        const double *restrict pn = P + ps * SPNC_B;
        int64_t e;
        if (g->kind[n] == 0) {
            const double *restrict t = T ? T + g->toff[n] * SPNC_B : NULL;
            double q[SPNC_B], v[SPNC_B];
            if (!t && domain) {
                const double *restrict nm = W + n * (domain == 2 ? 1 : 2) * SPNC_B;
                for (j = 0; j < SPNC_B; j++) {
                    const double r = pn[j] / nm[j];   /* both sides computed: vectorises */
                    q[j] = pn[j] > 0.0 ? r : 0.0;
                }
            } else if (!t) {
                memcpy(q, pn, SPNC_B * sizeof(double));
            }
            for (e = 0; e < k; e++) {
                const int64_t c = g->child[a + e];
                double *restrict pc = P + (int64_t)g->pslot[c] * SPNC_B;
                double *restrict acc = edge_acc + (a + e) * SPNC_EDGE_LANES;
                if (t) {
                    SPNC_PUSH(x512, pc, g->first[a + e], pn, 1.0, t + e * SPNC_B, wt, acc);
                } else if (domain == 2) {
                    SPNC_PUSH(x512, pc, g->first[a + e], q, g->w[a + e], W + c * SPNC_B, wt, acc);
                } else {
                    spnc_push_of(v, W, domain, n, c, g->logw[a + e], g->w[a + e], g->wm[a + e], g->we[a + e], q);
                    SPNC_PUSH(x512, pc, g->first[a + e], v, 1.0, NULL, wt, acc);
                }
            }
        } else if (g->kind[n] == 1) {
            spnc_push_product(g, n, P, pn, g->first);
            if (runs && runs->ptr[i + 1] > runs->ptr[i]) {
                const int64_t r = runs->ptr[i];
                spnc_state_counts(g, col0, pn, wt, runs->var + r, runs->off + r, runs->nst + r, runs->ptr[i + 1] - r,
                                  state_acc);
            }
        } else {
            spnc_leaf_post(g, n, col0, pn, wt, leaf_resp, state_acc);
        }
        spnc_node_done(g, n, col0, pn, wt, node_acc, all_post);
    }
}

/* Every uncounted node's expected count from its parents', top-down (cnt holds the counted
 * nodes' own, see spnc_node_done): a node's posterior is the sum of what its parents pass
 * it, so its count is the sum of its sum parents' edge counts and product parents' counts. */
static void spnc_counts_from_parents(const spnc_net *g, const double *edge_cnt, double *cnt)
{
    int64_t n, e;
    for (n = g->n_nodes - 1; n >= 0; n--)
        for (e = g->child_ptr[n]; e < g->child_ptr[n + 1]; e++)
            if (!g->counted[g->child[e]]) cnt[g->child[e]] += g->kind[n] == 0 ? edge_cnt[e] : cnt[n];
}

#include "_gather.h"

#endif
