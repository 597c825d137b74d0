"""EM's passes over rows in memory: the E-step's chunked backward (or hard selection)
pass and the per-leaf scores of Eq. 12 that guard the M-step."""
from __future__ import annotations

import numpy as np

from .. import _infer
from .._buffers import aligned_empty
from .._kinds import MARGINAL, MAX
from .._sweep import CHUNK_VALUES, Sweep
from ..graph import SPN
from ..leaves import base as _lb

#: the roots' posterior in EM's counting passes: 2^600 (exact scaling, undone on the counts)
_SEED = 2.0 ** 600

#: leaf-matrix and responsibility values per chunk: small enough to stay in cache between the
#: backward kernel that writes the responsibilities and the statistics kernels that read them
_CACHE_VALUES = 1 << 18


def _table_scores(table: _lb.LeafType, X: np.ndarray, resp: np.ndarray, alpha: float = 0.0) -> np.ndarray:
    """sum_r resp[r, i] log phi_i(x_r) for each leaf i of ``table`` (Eq. 12), in row blocks,
    plus the table's log-prior of pseudo-count ``alpha`` (what its weighted fit maximises)."""
    out = np.array(table.log_prior(float(alpha)), dtype=np.float64)
    step = 4096
    slot = table.slot
    for r0 in range(0, X.shape[0], step):
        XT = np.ascontiguousarray(X[r0:r0 + step].T)
        L = np.zeros((int(slot.max()) + 1, XT.shape[1]))
        table.log_prob(XT, L, MARGINAL, 1)
        lp = L[slot].T
        r = resp[r0:r0 + step]
        out += np.where(r > 0, r * np.where(r > 0, lp, 0.0), 0.0).sum(0)
    return out


def lane_totals(acc: np.ndarray) -> np.ndarray:
    """(threads, 4 k) partial sums -> (threads, k) totals, lanes added in a fixed tree."""
    lane = acc.reshape(acc.shape[0], -1, _infer.STATE_LANES)
    return (lane[..., 0] + lane[..., 1]) + (lane[..., 2] + lane[..., 3])


def _chunk_passes(spn: SPN, X: np.ndarray, w: np.ndarray, hard: bool, n_threads: int | None, acc: dict,
                  need_R: bool = True, count_states: bool = False):
    """Yield ``(r0, XT, R, rw, ll)`` per chunk of rows: the transposed chunk (n_vars, m; empty
    when no responsibilities are needed: the kernel stages the rows itself), the
    leaf responsibilities in slot layout (n_leaves, m; filled if ``need_R``), row weights
    (m,; 0 on padding) and the objective of the real rows; edge and node counts are added
    to ``acc``, and with ``count_states`` the weighted state counts of the discrete leaves
    (``acc["states"]``, laid out by ``acc["spans"]``). Soft EM runs the backward pass; hard
    EM the max-product selection kernel with counts (each row follows its max-product
    induced tree, first maximum at ties)."""
    sw = Sweep(spn, X, MAX if hard else MARGINAL, n_threads, workspace="select" if hard else "backward",
               budget=_CACHE_VALUES if need_R else CHUNK_VALUES, budget_rows=spn.n_leaves if need_R else None,
               stage=not need_R)
    nt = sw.n_threads
    # counts only: posteriors scaled by 2^600, so that tiny ones stay normal doubles (see
    # _infer.backward); the row weights bound the counts well below overflow
    seed = _SEED if count_states and not need_R and w.size and float(np.max(w)) <= 2.0 ** 300 else 1.0
    n_states = max((b for _, b in sw.spans.values()), default=0)
    # STATE_LANES partial sums per state, added up after the pass (see _infer.backward)
    states = aligned_empty((nt, _infer.STATE_LANES * max(n_states, 1)), zero=True) if count_states else None
    no_resp = np.empty((0, 1))
    rlw = spn._root_logw()
    edge = np.zeros((nt, spn.n_edges))
    node = np.zeros((nt, spn.n_nodes))
    acts = sw.acts() if hard else None
    no_active = np.empty((0, 1), dtype=np.uint8)
    for r0, r1, XT, L in sw:
        m = sw.width(r0, r1, XT)
        rw = aligned_empty(m, zero=True)       # row weights: read with every posterior
        rw[: r1 - r0] = w[r0:r1]
        v = np.empty(m)
        R = aligned_empty((max(spn.n_leaves, 1), m)) if need_R else no_resp
        if hard:
            _infer.select(sw.graph, sw.states, XT, L, spn.roots, rlw, MAX, True, 0, r0, v, no_active,
                          rw, edge, node, R, nt, sw.ws, acts, rows=sw.rows(r0, r1))
        else:
            _infer.backward(sw.graph, sw.states, XT, L, spn.roots, rlw, rw, v, edge, node, R,
                            np.empty((0, m)), nt, sw.ws, states, rows=sw.rows(r0, r1), seed=seed)
        yield r0, XT, R, rw, v[: r1 - r0]
    acc["edge"] += edge.sum(0)
    acc["node"] += node.sum(0)
    if states is not None:
        acc["states"], acc["spans"] = lane_totals(states).sum(0) * (1.0 / seed), sw.spans
