"""EM's E-step over data read block by block (files, iterables of blocks, Dask arrays).

Expected counts are sums over rows: each block runs the in-memory E-step
(:meth:`EM._estep`) and the per-block statistics are added (in block order locally, in a
fixed tree over the chunks on Dask); the M-step then works from the totals as usual. The
parameters equal the in-memory ones to the order of floating-point additions. Leaf types
without streaming statistics (``em_stats`` returning None) need all rows at once and are
refused. The online variant streams only with one batch of all rows per pass
(``batch_size`` at least the number of rows, the running average of Prometheus); smaller
batches are drawn at random and need the data in memory.
"""
from __future__ import annotations

import contextlib
import copy
from typing import Any

import numpy as np

from .. import stream as _stream
from ..chowliu import check_weights
from ..errors import DataError, ParameterError
from ._em_mstep import NOT_ADDED as _NOT_ADDED
from ._scale import block_moments, merge_moments, moments_std, warn_small
from ._training import bounded_vars, check_real_range



def prepare(em, model, X, sample_weight) -> tuple[Any, np.ndarray | None, float]:
    """(source, weights or None, total weight) for :meth:`EM.fit` on a streamed ``X``."""
    for k, t in model.leaf_tables.items():
        if len(t) and _stats_of(em, t) is None:
            raise DataError(f"EM over streamed data needs streaming statistics for every leaf type; "
                            f"leaf type {k!r} has none (load X into memory)")
    src = _stream.open_rows(X, var_names=model.var_names)
    if not _stream.is_dask(src) and not src.reiterable:
        raise DataError("EM makes several passes over X, but X is a one-shot iterator; pass a list of "
                        "blocks, a dataset or a callable returning a fresh iterator")
    n = src.shape[0] if _stream.is_dask(src) else src.n_rows
    if n is None:
        n = sum(b.shape[0] for _, b in src.blocks())
    if n == 0:
        raise DataError(f"{_stream.label(src)} has no rows")
    if em.variant == "online" and int(em.batch_size) < n:
        raise ParameterError("batch_size", f"variant='online' over streamed X takes one batch of all rows per pass "
                                           f"(batch_size >= the {n} rows); smaller batches are drawn at random "
                                           "and need X in memory")
    em._scale_cols = bounded_vars(model)    # the first pass gathers their moments (see estep)
    if sample_weight is None:
        return src, None, float(n)
    w = check_weights(sample_weight, n)
    return src, w, float(w.sum())


@contextlib.contextmanager
def opened(X, model):
    """``X`` for :meth:`EM.fit`, a file or dataset opened as a block source (closed on exit)."""
    if not _stream.is_streamed(X) or _stream.is_dask(X):
        yield X
        return
    src = _stream.open_source(X, var_names=model.var_names)
    try:
        yield src
    finally:
        if src is not X:
            src.close()


def online_batches(X, w, ids, rng, batch_size: int):
    """One pass of online EM: ``(rows, weights, row ids)`` of each mini-batch in a random
    order; a streamed ``X`` is one batch of all its rows (the order plays no part then)."""
    if not isinstance(X, np.ndarray):
        yield X, w, ids
        return
    order = rng.permutation(X.shape[0])
    for b0 in range(0, len(order), batch_size):
        rows = np.sort(order[b0:b0 + batch_size])
        yield X[rows], w[rows], ids[rows]


def mean_ll(em, spn, X, w, wsum: float) -> float:
    """The weighted mean log-likelihood of ``spn`` over ``X`` (in memory or streamed)."""
    if isinstance(X, np.ndarray):
        return float(np.einsum("i,i->", w, spn.log_likelihood(X, n_threads=em.n_threads)) / wsum)
    return em._estep(spn, X, w, hard=False, stats=False)["objective"] / wsum


def _stats_of(em, table):
    from .em import _stats_for
    return _stats_for(table, em.alpha, em.min_std)


def _estep_block(block: np.ndarray, r0: int, ctx: tuple) -> dict:
    em, spn, w, hard, stats = ctx
    Xb = spn._check_X(block, row0=r0)
    check_real_range(Xb, r0, bounded_vars(spn))
    wb = np.ones(Xb.shape[0]) if w is None else w[r0:r0 + Xb.shape[0]]
    if wb.shape[0] != Xb.shape[0]:
        raise DataError(f"sample_weight has {len(w)} entries but X has more rows")
    rows = r0
    if not np.all(wb > 0):          # rows of weight 0 play no part (as in memory)
        rows = r0 + np.flatnonzero(wb > 0)
        Xb, wb = Xb[rows - r0], wb[rows - r0]
    est = em._estep(spn, Xb, wb, hard, stats, rows=rows)
    est["kept"] = {}
    cols = getattr(em, "_scale_cols", None)
    if cols is not None and len(cols):
        est["scale"] = block_moments(Xb[:, cols])
    return est


def add_estep(a: dict | None, b: dict | None) -> dict | None:
    """Sum of two E-step results (leaf centres are the same in both and kept)."""
    if a is None or b is None:
        return b if a is None else a
    leaf = {k: {f: (v if f in _NOT_ADDED else v + b["leaf"][k][f]) for f, v in s.items()}
            for k, s in a["leaf"].items()}
    out = {"objective": a["objective"] + b["objective"], "edge_counts": a["edge_counts"] + b["edge_counts"],
           "node_counts": a["node_counts"] + b["node_counts"], "leaf": leaf, "kept": {}}
    if "scale" in a:
        out["scale"] = merge_moments(a["scale"], b["scale"])
    return out


def fit_client(X):
    """The Dask client a fit over the Dask array ``X`` runs all its passes on (the current
    one when it starts; None for other data or without one)."""
    if not _stream.is_dask(X):
        return None
    from .. import dask as _dask
    return _dask.current_client()


def estep(em, spn, src, w, hard: bool, stats: bool) -> dict:
    """The E-step statistics of ``spn`` over all blocks of ``src`` (a Dask array: on the
    client the fit started on, which must stay open)."""
    client = getattr(em, "_client", None)
    if client is not None and getattr(client, "status", None) in ("closing", "closed"):
        # else Dask falls back to its local scheduler, or fails on data persisted there
        raise ParameterError("client", f"the Dask client {client!r} the fit started on was closed between "
                                       "its passes; keep it open until fit returns")
    cols = em.__dict__.pop("_scale_cols", None)     # the fit's first pass only
    light = copy.copy(em)
    light.init = None          # the starting model stays on the client
    light._client = None       # the client object stays here too
    light._scale_cols = cols
    out = _stream.map_reduce(_estep_block, src, (light, spn, w, hard, stats), add_estep, client=client)
    if out is not None and "scale" in out:     # as an in-memory fit warns (EM.fit)
        warn_small(moments_std(out.pop("scale")), float(em.min_std), "min_std", "EM", cols=cols,
                   names=spn.var_names)
    return out
