/* The backward pass of a block whose forward values are plain doubles, for models that keep
 * every node's value and whose sums are wide (Graph.gather; included by _backward.h).
 *
 * spnc_backward pushes from each sum to its children: per sum edge and row it forms
 * q_s w_e S_c, adds it to the child's slot and to the edge count, four operations and a
 * store. Here each node instead gathers from its sum parents, whose q_s = rho_s / S_s and
 * q_s * wt were kept when they were reached:
 *
 *     rho_c = (pushes of product parents) + S_c * sum_e w_e q_s,
 *     count_e += w_e * sum_rows (q_s wt) S_c,
 *
 * two multiply-adds per sum edge and row, the child's values read once. Products still
 * push (one add per row and edge). Q holds 2 * SPNC_B doubles per sum (by sidx). */
#ifndef SPNC_GATHER_H
#define SPNC_GATHER_H

/* rho (written, or added to when add) = S * sum over the sum-parent edges of w_e q_s;
 * each edge's count is w_e times the sum_j qw_s[j] S[j] kept in sacc's SPNC_EDGE_LANES partial
 * sums (the edges in spar order: read and written in sequence, where edge order would scatter
 * over all edges; w_e is applied by the caller). */
static SPNC_INLINE void spnc_gather_sums(const spnc_net *g, int64_t n, const double *restrict Q,
                                         const double *restrict S, double *restrict rho, int add,
                                         double *restrict sacc)
{
    const int64_t a = g->spar_ptr[n], b = g->spar_ptr[n + 1];
    double acc[SPNC_B];
    int64_t i;
    int j, k;
    for (i = a; i < b; i++) {
        const int64_t e = g->spar_edge[i];
        const double *restrict q = Q + g->sidx[g->spar_node[i]] * 2 * SPNC_B, *restrict qw = q + SPNC_B;
        const double w = g->w[e];
        double l[SPNC_LANES] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        if (i == a)     /* the first term starts the sum (no zeroing of acc) */
            for (j = 0; j < SPNC_B; j += SPNC_LANES)
                for (k = 0; k < SPNC_LANES; k++) {
                    acc[j + k] = w * q[j + k];
                    l[k] += qw[j + k] * S[j + k];
                }
        else
            for (j = 0; j < SPNC_B; j += SPNC_LANES)
                for (k = 0; k < SPNC_LANES; k++) {
                    acc[j + k] += w * q[j + k];
                    l[k] += qw[j + k] * S[j + k];
                }
        spnc_lanes_add(sacc + i * SPNC_EDGE_LANES, l);
    }
    if (add)
        for (j = 0; j < SPNC_B; j++) rho[j] += S[j] * acc[j];
    else
        for (j = 0; j < SPNC_B; j++) rho[j] = S[j] * acc[j];
}

#ifdef SPNC_X86_512
/* spnc_gather_sums in AVX-512 vectors: the block's sum over the parents stays in registers,
 * each edge's count runs in two accumulators and is added to sacc as one vector (see
 * spnc_push512). */
__attribute__((target("avx512f")))
static inline void spnc_gather_sums512(const spnc_net *g, int64_t n, const double *restrict Q,
                                       const double *restrict S, double *restrict rho, int add,
                                       double *restrict sacc)
{
    const int64_t a = g->spar_ptr[n], b = g->spar_ptr[n + 1];
    __m512d acc[SPNC_B / 8], sv[SPNC_B / 8];
    int64_t i;
    int k;
    for (k = 0; k < SPNC_B / 8; k++) sv[k] = _mm512_loadu_pd(S + 8 * k);
    for (i = a; i < b; i++) {
        const double *restrict q = Q + g->sidx[g->spar_node[i]] * 2 * SPNC_B, *restrict qw = q + SPNC_B;
        const __m512d w = _mm512_set1_pd(g->w[g->spar_edge[i]]);
        __m512d l0 = _mm512_setzero_pd(), l1 = _mm512_setzero_pd();
        for (k = 0; k < SPNC_B / 8; k += 2) {
            const __m512d q0 = _mm512_loadu_pd(q + 8 * k), q1 = _mm512_loadu_pd(q + 8 * k + 8);
            acc[k] = i == a ? _mm512_mul_pd(w, q0) : _mm512_fmadd_pd(w, q0, acc[k]);
            acc[k + 1] = i == a ? _mm512_mul_pd(w, q1) : _mm512_fmadd_pd(w, q1, acc[k + 1]);
            l0 = _mm512_fmadd_pd(_mm512_loadu_pd(qw + 8 * k), sv[k], l0);
            l1 = _mm512_fmadd_pd(_mm512_loadu_pd(qw + 8 * k + 8), sv[k + 1], l1);
        }
        double *restrict s4 = sacc + i * SPNC_EDGE_LANES;
        _mm512_storeu_pd(s4, _mm512_add_pd(_mm512_loadu_pd(s4), _mm512_add_pd(l0, l1)));
    }
    for (k = 0; k < SPNC_B / 8; k++) {
        const __m512d v = _mm512_mul_pd(sv[k], acc[k]);
        _mm512_storeu_pd(rho + 8 * k, add ? _mm512_add_pd(_mm512_loadu_pd(rho + 8 * k), v) : v);
    }
}
#endif

/* Same contract as spnc_backward with domain 2 and no shares (W holds every node's plain
 * value), with Q (n_sums * 2 * SPNC_B doubles) as scratch, except that the sum edges' counts
 * go to sacc in spar order, without their weights (the caller adds them to the edges). */
SPNC_CLONES
static void spnc_backward_gather(const spnc_net *g, int64_t col0, double *P, const double *W, double *Q,
                                 const double *wt, double *sacc, double *node_acc,
                                 double *leaf_resp, double *all_post, double *state_acc)
{
    int64_t n;
    int j;
#ifdef SPNC_X86_512
    const int x512 = SPNC_HAS_512();
#endif
    for (n = g->n_nodes - 1; n >= 0; n--) {
        const int64_t ps = g->pslot[n];
        double *restrict pn = P + ps * SPNC_B;
        const double *restrict S = W + n * SPNC_B;
        if (spnc_leaf_idle(g, n, leaf_resp, all_post, state_acc)) continue;
        if (g->spar_ptr[n + 1] > g->spar_ptr[n]) {
#ifdef SPNC_X86_512
            if (x512) spnc_gather_sums512(g, n, Q, S, pn, g->pbase[n], sacc);
            else
#endif
            spnc_gather_sums(g, n, Q, S, pn, g->pbase[n], sacc);
        }
        else if (!g->pbase[n])
            memset(pn, 0, SPNC_B * sizeof(double));
        if (g->kind[n] == 0) {
            double *restrict q = Q + g->sidx[n] * 2 * SPNC_B, *restrict qw = q + SPNC_B;
            for (j = 0; j < SPNC_B; j++) {
                const double r = pn[j] / S[j];   /* both sides computed: vectorises */
                q[j] = pn[j] > 0.0 ? r : 0.0;
                qw[j] = q[j] * wt[j];
            }
        } else if (g->kind[n] == 1) {
            spnc_push_product(g, n, P, pn, g->pfirst);
        } else {
            spnc_leaf_post(g, n, col0, pn, wt, leaf_resp, state_acc);
        }
        spnc_node_done(g, n, col0, pn, wt, node_acc, all_post);
    }
}

#endif
