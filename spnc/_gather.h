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
 * each edge's count gets w_e * sum_j qw_s[j] S[j], in sacc (the edges in spar order: read
 * and written in sequence, where edge order would scatter over all edges). */
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
        sacc[i] += w * spnc_lanes_sum(l);
    }
    if (add)
        for (j = 0; j < SPNC_B; j++) rho[j] += S[j] * acc[j];
    else
        for (j = 0; j < SPNC_B; j++) rho[j] = S[j] * acc[j];
}

/* Same contract as spnc_backward with domain 2 and no shares (W holds every node's plain
 * value), with Q (n_sums * 2 * SPNC_B doubles) as scratch, except that the sum edges' counts
 * go to sacc in spar order (the caller adds them to the edges). */
SPNC_CLONES
static void spnc_backward_gather(const spnc_net *g, int64_t col0, double *P, const double *W, double *Q,
                                 const double *wt, double *sacc, double *node_acc,
                                 double *leaf_resp, double *all_post, double *state_acc)
{
    int64_t n;
    int j;
    for (n = g->n_nodes - 1; n >= 0; n--) {
        const int64_t ps = g->pslot[n];
        double *restrict pn = P + ps * SPNC_B;
        const double *restrict S = W + n * SPNC_B;
        if (spnc_leaf_idle(g, n, leaf_resp, all_post, state_acc)) continue;
        if (g->spar_ptr[n + 1] > g->spar_ptr[n])
            spnc_gather_sums(g, n, Q, S, pn, g->pbase[n], sacc);
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
