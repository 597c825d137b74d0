"""Dask backend: statistics that are sums over rows, as map-reduce over the row chunks of a
``dask.array`` (optional extra ``pyspnc[dask]``).

The learners call this for you: ``ChowLiuTree().fit(X)`` and ``EM(init=spn).fit(X)`` take
a Dask array where they take a numpy one, and :func:`log_likelihood` evaluates a model on
one. Work runs on the current ``dask.distributed`` client when there is one (``Client()``
for a local cluster, ``Client("tcp://scheduler:8786")`` for a real one; or pass
``client=``), else on Dask's local scheduler.

Per pass, the compiled model and the other read-only context are scattered once to every
worker (``broadcast=True``); each task reduces one row chunk to small arrays (counts, the
expected counts of EM, log-likelihoods) with the same kernels as the in-memory path; the
partial results are added on the workers in a fixed binary tree over the chunk order, so
the result does not depend on the number of workers or on which finishes first. Only the
totals reach the client, which does the cheap parts (spanning tree, M-step).
"""
from __future__ import annotations

import importlib.util
import uuid
from typing import Any, Callable

import numpy as np

from .errors import DataError
from .stream import add, is_dask


def _require():
    if importlib.util.find_spec("dask") is None:  # pragma: no cover - depends on the environment
        raise ImportError("the Dask backend needs dask: pip install 'pyspnc[dask]'")


def current_client(client=None):
    """``client``, else the default ``dask.distributed`` client if one exists, else None."""
    if client is not None:
        return client
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):
        return None


def check_array(X, name: str = "X"):
    """``X``, a Dask array, if it is 2-D and its chunk sizes are known; else DataError."""
    if X.ndim != 2:
        raise DataError(f"{name} must be 2-D (n_rows, n_vars), got shape {X.shape}")
    if any(s != s for s in X.shape):     # NaN: unknown chunk sizes
        raise DataError(f"{name} is a Dask array whose chunk sizes are unknown (shape {X.shape}, as after "
                        f"boolean indexing); call {name}.compute_chunk_sizes() first")
    return X


def row_chunks(X) -> tuple[list, np.ndarray]:
    """The row chunks of a 2-D Dask array as delayed blocks (whole rows: column chunks are
    merged) and the first row of each."""
    check_array(X)
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    rows = np.asarray(X.chunks[0], dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)
    return list(X.to_delayed()[:, 0]), offs


def _tasks(fn: Callable, X, ctx: Any, client):
    import dask
    blocks, offs = row_chunks(X)
    if client is not None:
        # once per worker; in a list, since scatter would split a dict into its values
        c = client.scatter([ctx], broadcast=True, hash=False)[0]
    else:
        c = dask.delayed(ctx, name=f"spnc-ctx-{uuid.uuid4().hex}", traverse=False)
    f = dask.delayed(fn, pure=False)
    return [f(b, int(r0), c) for b, r0 in zip(blocks, offs)], c   # keep c: it holds the scattered data


def _compute(objs, client):
    import dask
    if client is not None:
        futs = client.compute(objs)
        return client.gather(futs)
    return dask.compute(*objs)


def map_reduce(fn: Callable, X, ctx: Any = None, combine: Callable = add, *, client=None) -> Any:
    """``combine`` of ``fn(block, row0, ctx)`` over the row chunks of the Dask array ``X``,
    added in a binary tree over the chunk order (deterministic)."""
    _require()
    import dask
    cl = current_client(client)
    parts, keep = _tasks(fn, X, ctx, cl)
    if not parts:
        return None
    comb = dask.delayed(combine, pure=False)
    while len(parts) > 1:
        parts = [comb(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    out = _compute(parts, cl)[0]
    del keep
    return out


def _ll_block(block: np.ndarray, r0: int, ctx: tuple) -> np.ndarray:
    spn, n_threads = ctx
    return spn.log_likelihood(block, n_threads=n_threads)


def log_likelihood(spn, X, *, client=None, n_threads: int | None = 1, compute: bool = True):
    """``spn.log_likelihood`` of the rows of the Dask array ``X``, one task per row chunk
    (the model shipped once per worker). ``compute=False`` returns a lazy Dask array
    (compute it with the same client)."""
    _require()
    import dask.array as da
    if not is_dask(X):
        raise DataError("X must be a dask.array (use spnc.stream for files and iterables)")
    cl = current_client(client)
    parts, keep = _tasks(_ll_block, X, (spn, n_threads), cl)
    rows = X.chunks[0]
    if not compute:   # the lazy array's tasks reference the scattered model by key: pin it
        lazy = da.concatenate([da.from_delayed(p, shape=(m,), dtype=np.float64) for p, m in zip(parts, rows)])
        lazy._spnc_context = keep
        return lazy
    out = _compute(parts, cl)
    del keep
    return np.concatenate(out) if out else np.zeros(0)
