"""Top-down learners (LearnSPN, Prometheus) on data larger than memory: the structure is
learned on rows held in memory — all rows, or a uniform sample of ``sample_rows`` of them —
and the parameters are then re-estimated by EM passes over all rows, which stream from a
file or iterable of blocks, or run on the chunks of a Dask array (:mod:`spnc.learn.em`).

The sample is drawn the same way whatever holds the rows (seeded by ``random_state``, rows
kept in their order), so a learner fitted on ``"data.h5:/X"``, on the same rows as a Dask
array or as a numpy array gives the same model up to the order of floating-point additions
in the parameter passes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import stream as _stream
from ..data import real_array, storable_names
from ..errors import DataError

#: ``refine`` values that run EM, and the EM variant of each
EM_VARIANTS = {"em": "soft", "hard": "hard", "running_average": "online"}


@dataclass
class Rows:
    """Rows for the structure search (``data``, in memory) and the source of all rows for
    the parameter passes (``full``: an array, a block source or a Dask array); ``ids``:
    the input row of each row of a sample (0: ``data`` is all rows, in order)."""
    data: Any
    full: Any
    n_rows: int
    streamed: bool
    ids: Any = 0

    @property
    def sampled(self) -> bool:
        return self.data.shape[0] < self.n_rows


def sample_index(n: int, sample_rows: int | None, random_state) -> np.ndarray | None:
    """Sorted row numbers of a uniform sample of ``sample_rows`` of ``n`` rows without
    replacement (None: all rows)."""
    if sample_rows is None or int(sample_rows) >= n:
        return None
    return np.sort(np.random.default_rng(random_state).choice(n, int(sample_rows), replace=False))


def structure_rows(X, sample_rows: int | None, random_state, learner: str) -> Rows:
    """The rows ``learner`` learns its structure from, and the source of all rows. Numpy
    arrays (and other in-memory tables) are sliced; files, datasets, iterables of blocks
    and Dask arrays are read once, block by block, keeping only the sampled rows."""
    if not _stream.is_streamed(X):
        A = real_array(X)
        if A.ndim != 2:
            raise DataError(f"X must be a non-empty 2-D array (n_rows, n_vars), got shape {A.shape}")
        idx = sample_index(A.shape[0], sample_rows, random_state)
        return Rows(A if idx is None else A[idx], A, A.shape[0], False, 0 if idx is None else idx)
    src = _stream.open_rows(X)
    if _stream.is_dask(src):
        idx = sample_index(src.shape[0], sample_rows, random_state)
        return Rows(np.asarray((src if idx is None else src[idx]).compute()), src, src.shape[0], True,
                    0 if idx is None else idx)
    try:
        return _sample_blocks(src, sample_rows, random_state, learner)
    except BaseException:
        if src is not X:        # opened here: not left open (and locked) while the error lives
            src.close()
        raise


def _sample_blocks(src, sample_rows: int | None, random_state, learner: str) -> Rows:
    """:func:`structure_rows` of a block source, in one pass (two for an iterable of blocks
    of unknown length)."""
    n = src.n_rows
    if n is None and sample_rows is not None:      # an iterable of blocks: count them first
        if not src.reiterable:
            raise DataError(f"{learner}: sample_rows needs the number of rows first, but X is a one-shot "
                            "iterator; pass a list of blocks, a dataset or a callable returning a fresh iterator")
        n = sum(b.shape[0] for _, b in src.blocks())
    idx = None if n is None else sample_index(n, sample_rows, random_state)
    parts = []
    for r0, b in src.blocks():
        if idx is None:
            parts.append(np.array(b))
        else:
            lo, hi = np.searchsorted(idx, [r0, r0 + b.shape[0]])
            if hi > lo:
                parts.append(np.asarray(b)[idx[lo:hi] - r0])
    if not parts:
        raise DataError(f"{learner}: {_stream.label(src)} has no rows")
    data = np.concatenate(parts)
    if getattr(src, "names", None) is not None:     # DataFrame blocks: they will name the model
        storable_names(src.names)
    return Rows(data, src, n if n is not None else data.shape[0], True, 0 if idx is None else idx)


def refine_mode(refine: str, rows: Rows, continuous: bool, default_auto: str) -> str:
    """The parameter pass that ``refine`` asks for (``"auto"``: ``default_auto``), the
    same for ``X`` in memory and streamed."""
    return default_auto if refine == "auto" else refine


def refine_params(spn, rows: Rows, mode: str, *, n_iter: int, alpha: float, min_std: float, random_state,
                  n_threads, verbose: bool, X_valid=None):
    """``spn`` with its parameters re-estimated by ``n_iter`` EM passes over all rows
    (``mode``: ``"em"``, ``"hard"`` or ``"running_average"``); ``X_valid`` keeps the best
    pass on it (the starting model competes too)."""
    from .em import EM, _stats_for
    full = rows.full
    if isinstance(full, _stream.BlockSource) and not full.reiterable:
        full = rows.data               # a one-shot iterator, read whole for the structure
    if _stream.is_streamed(full):      # refused here, not blamed on the sample below
        bad = [k for k, t in spn.leaf_tables.items() if len(t) and _stats_for(t, alpha, min_std) is None]
        if bad:
            raise DataError(f"refine={mode!r} over streamed X needs streaming statistics for every leaf type; "
                            f"leaf type {bad[0]!r} has none: use refine='none' or load X into memory")
    if isinstance(full, np.ndarray):
        full = full.astype(np.float64)
    opts = dict(init=spn, max_iter=int(n_iter), min_std=float(min_std), alpha=float(alpha),
                random_state=random_state, n_threads=n_threads, verbose=verbose, variant=EM_VARIANTS[mode])
    if mode == "running_average":
        # one step per pass: a first batch of a few rows would replace the count-based
        # statistics at step 1 and collapse the leaves it barely reaches
        opts.update(step_decay=1.0, batch_size=max(1, rows.n_rows))
    try:    # EM matches a DataFrame to the model's names and reads a file or blocks whole
        return EM(**opts).fit(full, X_valid=X_valid).spn_
    except DataError as e:
        if not rows.sampled:
            raise
        raise DataError(f"{e} (the structure was learned on a sample of {rows.data.shape[0]} rows; give "
                        "cardinality= when the sample may miss a state)") from None


def close(rows: Rows, X) -> None:
    """Close a source :func:`structure_rows` opened from a spec string."""
    if rows.full is not X and isinstance(rows.full, _stream.BlockSource):
        rows.full.close()
