"""The top-down selection pass shared by MPE and sampling: each block of rows is swept
up (max-product or sum-product values), then one child of every reached sum is chosen
(the best, or drawn) and the reached leaves complete the row's missing entries."""
from __future__ import annotations

import numpy as np

from . import _data, _infer
from ._buffers import aligned_empty
from ._kinds import MARGINAL, MAX
from ._sweep import Sweep, leaf_states
from ._visit import select_visit
from .errors import DataError


def select(spn, X: np.ndarray, mode: int, seed: int, n_threads: int | None, evidence: bool,
           ll: np.ndarray | None = None, root_value: np.ndarray | None = None, check=None) -> np.ndarray:
    """The completion of ``X`` (rows checked by ``spn``, or by ``check`` here: see
    :class:`Sweep`), MPE or a sample; with ``ll``, also the log-likelihood of each completed
    row (in the same sweep when every leaf is inline); with ``root_value``, the forward value
    of the chosen root (the max-product value)."""
    out = aligned_empty(X.shape)  # every entry is written back, chunk by chunk (rows on lines)
    sw = Sweep(spn, X, mode, n_threads, workspace="select", leaf_matrix=evidence, stage=True,
               check=check)
    fused = ll is not None and not sw.matrix
    ll_states = leaf_states(spn, MARGINAL)[0] if fused else None
    acts = sw.acts()
    none = np.empty((0, 1))
    rlw = spn._root_logw()
    no_active = np.empty((0, 1), dtype=np.uint8)
    visit, clear = (None, None) if sw.matrix else select_visit(sw.graph)   # leaves flagged: visit all
    for r0, r1, XT, L in sw:
        m = sw.width(r0, r1, XT)
        # inline leaves fill their variables in the kernel; the others need the flags
        active = np.zeros((max(spn.n_leaves, 1), m), dtype=np.uint8) if sw.matrix else no_active
        rv = np.empty(m)
        rw = np.zeros(m)
        llc = np.empty(m) if fused else None
        if sw.staged:      # each block is completed in place and written to out
            _infer.select(sw.graph, sw.states, XT, L, spn.roots, rlw, mode, evidence, seed, r0, rv,
                          active, rw, none, none, none, sw.n_threads, sw.ws, acts, None, ll_states, llc,
                          rows=sw.rows(r0, r1), out_rows=out[r0:r1], visit=visit, clear=clear, check=sw.cells)
            sw.check_cells(r0, r1)
        else:
            # XT is this chunk's own transposed copy and the kernel reads a block's missing
            # entries before it fills them: with inline leaves only, fill it in place
            outT = XT.copy() if sw.matrix else XT
            _infer.select(sw.graph, sw.states, XT, L, spn.roots, rlw, mode, evidence, seed, r0, rv, active,
                          rw, none, none, none, sw.n_threads, sw.ws, acts, outT, ll_states, llc, visit=visit, clear=clear)
            active[:, r1 - r0:] = 0      # padding: nothing to complete
            for table in sw.matrix:
                table.fill(XT, active, outT, mode, seed, r0)
            _data.transpose_back(outT, out, r0, r1, sw.n_threads)
        if mode == MAX and np.any(rv[: r1 - r0] == -np.inf):
            r = r0 + int(np.flatnonzero(rv[: r1 - r0] == -np.inf)[0])
            raise DataError(f"row {r} has probability zero under the model; no MPE completion exists")
        if root_value is not None:
            root_value[r0:r1] = rv[: r1 - r0]
        if fused:
            ll[r0:r1] = llc[: r1 - r0]
    if ll is not None and not fused:
        ll[:] = spn.log_likelihood(out, n_threads=n_threads)
    return out
