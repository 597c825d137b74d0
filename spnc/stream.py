"""Rows in blocks with bounded memory: block sources, sums over blocks, outputs written
block by block.

A *block source* delivers the rows of a 2-D table in order, a block of rows at a time:

* an array in memory, an h5py dataset, a Zarr array or a memory-mapped ``.npy`` file
  (anything with ``shape`` and row slicing): blocks of ``block_rows`` rows;
* a spec string ``"file.h5:/path"`` (HDF5), ``"file.zarr"`` / ``"file.zarr:/path"`` (Zarr)
  or ``"file.npy"`` (memory-mapped);
* any iterable of row blocks (arrays of shape (m, d)). A one-shot iterator allows one
  pass only; a list of arrays or a callable returning a fresh iterator allows several
  (each must give the same rows).
  Blocks that are DataFrames (``pd.read_csv(..., chunksize=...)``) are matched by column
  name to the model's variables, or else to the first block's columns;
* a pandas DataFrame: row blocks of it, matched by name as DataFrame blocks are.

Statistics that are sums over rows are computed by :func:`reduce_blocks`: a function maps
each block to a small result (arrays, floats, dicts or tuples of them), and the results
are added in block order. The same block functions run on a Dask cluster
(:mod:`spnc.dask`), where a ``dask.array`` is the source.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._sources import (BLOCK_BYTES, ArraySource, BlockSource, FileGuard, IterableSource,
                       check_block_rows, default_block_rows, is_dask, is_streamed, label, open_rows,
                       open_source, split_spec)
from .data import real_array
from .errors import DataError

__all__ = ["BLOCK_BYTES", "ArraySource", "BlockSource", "FileGuard", "IterableSource", "check_block_rows",
           "default_block_rows", "is_dask", "is_streamed", "label", "open_rows", "open_source", "split_spec",
           "add", "reduce_blocks", "map_reduce", "map_to_file", "log_likelihood_to_file", "ll_columns",
           "block_log_likelihood", "load", "log_likelihood"]


# ------------------------------------------------------------------ sums over blocks
def add(a: Any, b: Any) -> Any:
    """Sum of two block results of the same shape: arrays and floats add, dicts and tuples
    add entry by entry, ``None`` is the neutral element."""
    if a is None:
        return b
    if b is None:
        return a
    if isinstance(a, dict):
        return {k: add(a.get(k), b.get(k)) for k in a.keys() | b.keys()}
    if isinstance(a, (tuple, list)):
        return type(a)(add(x, y) for x, y in zip(a, b))
    return a + b


def reduce_blocks(fn: Callable, source: BlockSource, ctx: Any = None, combine: Callable = add) -> Any:
    """``combine`` over the blocks of ``source`` of ``fn(block, row0, ctx)``, in block order."""
    total = None
    for r0, b in source.blocks():
        total = combine(total, fn(b, r0, ctx))
    return total


def map_reduce(fn: Callable, X, ctx: Any = None, combine: Callable = add, *, client=None,
               block_rows: int | None = None) -> Any:
    """:func:`reduce_blocks` over any source; a Dask array runs on its chunks (locally or on
    ``client``, see :mod:`spnc.dask`)."""
    if is_dask(X):
        from . import dask as _dask
        return _dask.map_reduce(fn, X, ctx, combine, client=client)
    src = open_source(X, block_rows)
    try:
        return reduce_blocks(fn, src, ctx, combine)
    finally:
        if src is not X:
            src.close()


# ------------------------------------------------------------------ outputs to files
def map_to_file(fn: Callable[[np.ndarray], np.ndarray], X, out: str, *, block_rows: int | None = None,
                dataset: str = "result") -> int:
    """Write ``fn(block)`` for every block of ``X`` to ``out`` (``.npy`` or
    ``file.h5[:/dataset]``), atomically; returns the number of rows written."""
    from ._rowfile import write_blocks
    return write_blocks(lambda b, r0: fn(b), X, out, block_rows, dataset)


def log_likelihood_to_file(spn, X, out: str, *, n_threads: int | None = None,
                           block_rows: int | None = None) -> int:
    """``spn.log_likelihood`` of every row of ``X`` (any block source) written block by
    block to ``out`` (``.npy`` or ``file.h5[:/dataset]``, default dataset
    ``log_likelihood``). Memory stays at one block; the file appears only when complete."""
    from ._rowfile import write_blocks
    return write_blocks(lambda b, r0: block_log_likelihood(spn, b, r0, n_threads), X, out, block_rows,
                        "log_likelihood", spn.var_names, ll_columns(spn), query=True)


def ll_columns(spn) -> tuple:
    """The shape of one row's log-likelihood: one column per root for
    ``combine='independent'``, else a scalar."""
    return (len(spn.roots),) if spn.combine == "independent" else ()


def block_log_likelihood(spn, block, row0: int, n_threads: int | None = None) -> np.ndarray:
    """``spn.log_likelihood(block)`` for a block that starts at row ``row0`` of the input:
    an error names the row of the input, not of the block."""
    from ._kinds import MARGINAL
    A, check = spn._check_X(block, row0=row0, defer=True)
    return spn._forward(A, MARGINAL, n_threads, check)


def load(X, dtype=np.float64, name: str = "X", var_names=None, query: bool = False) -> np.ndarray:
    """All rows of a source in one array (for data that fits in memory). A Dask array is
    computed (on the current client, if any), and a source read, once its size fits the
    memory budget (checked before reading when the source knows its rows, else as it is
    read). ``var_names``: a model's variables, to which DataFrame blocks are matched
    (``query``: rows for a model, which warns of DataFrame blocks when it has none)."""
    if is_dask(X):
        return _load_dask(open_rows(X, name=name), dtype, name)
    src = open_source(X, name=name, var_names=var_names, query=query)
    size = np.dtype(dtype).itemsize
    try:
        if src.n_rows is not None and src.n_cols is not None:
            _load_check(src.n_rows, src.n_cols, size, name)
        parts, n = [], 0
        for r0, b in src.blocks():
            n += b.shape[0]
            _load_check(n, b.shape[1] if b.ndim == 2 else 1, size, name)
            # text or complex blocks refused, not parsed or cut to their real part
            where = f"{src.name}: the block at row {r0}" if isinstance(src, IterableSource) else label(src)
            parts.append(real_array(b, where, dtype))
    finally:
        if src is not X:
            src.close()
    if not parts:
        raise DataError(f"{getattr(src, 'name', 'X')}: no rows")
    return np.concatenate(parts)


def _load_check(n: int, d: int, itemsize: int, name: str) -> None:
    from . import _budget
    _budget.check(float(n) * d * itemsize, f"{name} in memory ({n} rows x {d} columns)",
                  "stream it instead, or raise the budget")


def _load_dask(X, dtype, name: str) -> np.ndarray:
    from . import _budget
    n, d = (int(v) for v in X.shape)
    _budget.check(float(n) * d * np.dtype(dtype).itemsize, f"{name} in memory ({n} rows x {d} columns)",
                  "keep it on the cluster (spnc.dask) or raise the budget")
    if n == 0:
        raise DataError(f"{name}: no rows")
    return real_array(X.compute(), name, dtype)


def log_likelihood(spn, X, *, n_threads: int | None = None, client=None) -> np.ndarray:
    """``spn.log_likelihood`` over a block source or Dask array, gathered in memory (one
    float per row)."""
    if is_dask(X):
        from . import dask as _dask
        return _dask.log_likelihood(spn, X, client=client, n_threads=n_threads)
    parts = []
    src = open_source(X, var_names=spn.var_names, query=True)
    try:
        for r0, b in src.blocks():
            parts.append(block_log_likelihood(spn, b, r0, n_threads))
    finally:
        if src is not X:
            src.close()
    return np.concatenate(parts) if parts else np.zeros((0,) + ll_columns(spn))
