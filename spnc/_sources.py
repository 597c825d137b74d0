"""Block sources: the rows of a table in memory, in a file or from an iterable, a block
at a time (see :mod:`spnc.stream`, which re-exports them)."""
from __future__ import annotations

import contextlib
import contextvars
import os
import re
from typing import Any, Iterable, Iterator

import numpy as np

from ._text import counted
from ._warn import positional_frame
from .data import (as_data, attr_names, dataset_order, is_frame, refuse_dask_frame, refuse_polars, refuse_sparse,
                   unmasked)
from .errors import DataError, ParameterError

#: bytes of input per block when the caller gives no block size (float64 after conversion)
BLOCK_BYTES = 32 << 20


def split_spec(path: str) -> tuple[str, str | None]:
    """``"data.h5:/train"`` -> ``("data.h5", "/train")``; a plain path -> ``(path, None)``.
    Only a ``:`` after an ``.h5``/``.hdf5``/``.zarr`` name separates a dataset (the last
    such, unless it is part of the name of an existing directory, as in ``"run.h5:2/x.npy"``)."""
    low = path.lower()
    cuts = sorted((m.end() - 1 for m in re.finditer(r"\.(h5|hdf5|zarr):", low)), reverse=True)
    for k in cuts:
        j = path.find("/", k + 1)
        if j > k + 1 and os.path.isdir(path[:j]):       # the ':' is inside a directory's name
            continue
        return path[:k], path[k + 1:] or None
    return path, None


#: the first DataFrame block's own columns of a source named "X", while record_columns runs
_FIRST_COLUMNS: contextvars.ContextVar = contextvars.ContextVar("spnc_first_columns", default=None)


@contextlib.contextmanager
def record_columns():
    """Within this block, the columns of the first DataFrame block read from a source named
    "X" (in that block's own order) are appended to the list it yields: a fit over blocks
    read once knows the names its data had after reading them."""
    seen: list[str] = []
    token = _FIRST_COLUMNS.set(seen)
    try:
        yield seen
    finally:
        _FIRST_COLUMNS.reset(token)


def is_streamed(X: Any) -> bool:
    """True for inputs that should be read block by block rather than loaded: block
    sources, spec strings, h5py datasets, Zarr arrays, Dask arrays, iterators, generators
    and callables. Numpy arrays, lists of rows and other array-likes are not."""
    if isinstance(X, (BlockSource, str, os.PathLike)):
        return True
    if isinstance(X, np.ndarray):
        return False
    mod = type(X).__module__ or ""
    if mod.startswith(("h5py", "zarr", "dask")):
        return True
    if callable(X) or isinstance(X, Iterator):
        return True
    return isinstance(X, list) and len(X) > 0 and all(np.ndim(b) == 2 for b in X)


def label(src: Any) -> str:
    """How errors name a source: the file spec it was opened from, else "X"."""
    return getattr(src, "name", None) if isinstance(src, BlockSource) else "X"


def is_dask(X: Any) -> bool:
    return (type(X).__module__ or "").startswith("dask") and hasattr(X, "chunks")


class BlockSource:
    """Rows of a 2-D table in blocks of at most ``block_rows`` rows, in order.

    ``n_rows`` (None when unknown until read), ``n_cols``, ``reiterable`` (several passes
    allowed), ``names`` (the columns' names when the data give them: DataFrame blocks, a
    dataset's ``columns`` attribute; learners store them as ``var_names``) and ``blocks()``
    yielding ``(row0, block)`` with ``block`` a numpy array."""

    n_rows: int | None = None
    names: list[str] | None = None
    n_cols: int | None = None
    reiterable: bool = True
    name: str = "X"

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> "BlockSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class FileGuard:
    """The state of a file being read (device, inode, size, modification time), checked
    before each block: a file rewritten between or during passes is an error, not a silent
    mix of old and new rows (nor, for a memory-mapped ``.npy`` cut short, a crash)."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self.state = self._state()

    def _state(self):
        try:
            s = os.stat(self.path)
        except OSError:
            return None
        return s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns

    def check(self, name: str) -> None:
        if self._state() != self.state:
            same = os.path.abspath(split_spec(name)[0]) == self.path
            raise DataError(f"{name}: {'the file' if same else self.path} was changed, replaced or removed "
                            "while being read; a pass over it would mix old and new rows (EM and other fits "
                            "read it several times): copy the data first, or wait until it is written")


class ArraySource(BlockSource):
    """Row slabs of an array, h5py dataset or Zarr array (only one slab in memory).
    ``guard``: a :class:`FileGuard` of the file the rows are read from."""

    def __init__(self, A, block_rows: int | None = None, name: str = "X", owner=None,
                 guard: FileGuard | None = None):
        shape = tuple(A.shape)
        if len(shape) != 2:
            raise DataError(f"{name} must be 2-D (n_rows, n_vars), got shape {shape}")
        self.A, self.n_rows, self.n_cols, self.name, self._owner = A, shape[0], shape[1], name, owner
        self.block_rows = check_block_rows(block_rows) or default_block_rows(shape[1])
        self._guard = guard
        self.order = None        # the stored columns in a model's variable order (named datasets)

    def blocks(self):
        check = self._guard.check if self._guard is not None else (lambda name: None)
        for r0 in range(0, self.n_rows, self.block_rows):
            check(self.name)        # before: reading a memory-mapped file cut short would crash
            b = np.asarray(unmasked(self.A[r0:r0 + self.block_rows]))
            check(self.name)        # after: the block holds no rows written meanwhile
            yield r0, (b if self.order is None else b[:, self.order])

    def close(self) -> None:
        if self._owner is not None:
            self._owner.close()
            self._owner = None


class IterableSource(BlockSource):
    """Blocks from an iterable of arrays, or from a callable returning a fresh iterable.
    DataFrame blocks are put in the order of ``var_names`` (a model's variables) or else
    of the first block's columns (``names``), matched by name; ``positional``: rows for a
    model without variable names, which takes DataFrame blocks by position (warned once)."""

    def __init__(self, it, name: str = "X", var_names=None, positional: bool = False):
        self._it, self.name, self.positional = it, name, positional
        self.names = None if var_names is None else list(var_names)
        self._model_names = var_names is not None
        self.reiterable = callable(it) or not isinstance(it, Iterator)
        self._used = False

    def blocks(self):
        if self._used and not self.reiterable:
            raise DataError(f"{self.name} is a one-shot iterator and was already read; pass a list of "
                            "blocks, a dataset or a callable returning a fresh iterator for several passes")
        self._used = True
        r0, first = 0, self.n_rows      # rows of an earlier pass: every pass must give as many
        all_frames = True               # every block of this pass so far a DataFrame
        for b in (self._it() if callable(self._it) else self._it):
            all_frames = all_frames and is_frame(b)
            if is_frame(b):
                if r0 and not all_frames and not self.positional and not self._model_names:
                    raise DataError(f"{self.name}: the block at row {r0} is a DataFrame, but the blocks before it "
                                    "are arrays without column names, so which variable each of their columns "
                                    "is cannot be known; give every block as a DataFrame, or every block as an "
                                    "array in one column order")
                warn = self.positional and self.names is None
                seen = _FIRST_COLUMNS.get()
                if seen == [] and self.name == "X":
                    seen.extend(str(c) for c in b.columns)
                # names only: a learner checks them for storage once it has read the blocks
                b, cols = as_data(b, self.names, f"{self.name}: the block at row {r0}", model_names=False)
                if warn:
                    positional_frame(self.name)
                self.names = cols
            refuse_sparse(b, f"{self.name}: the block at row {r0}")
            b = np.asarray(unmasked(b))
            if b.ndim != 2:
                raise DataError(f"{self.name}: every block must be 2-D (rows, n_vars), got shape {b.shape} "
                                f"at row {r0}" + ("; an iterator or callable gives blocks of rows, not single "
                                                  "rows: pass np.array(list(rows)) for those" if b.ndim == 1 else ""))
            if self.n_cols is None:
                self.n_cols = b.shape[1]
            elif b.shape[1] != self.n_cols:
                raise DataError(f"{self.name}: the block at row {r0} has {counted(b.shape[1], 'column')}, "
                                f"the first had {self.n_cols}")
            if first is not None and r0 + b.shape[0] > first:
                self._changed(first, f"more than {first}")
            yield r0, b
            r0 += b.shape[0]
        if first is not None and r0 != first:
            self._changed(first, str(r0))
        self.n_rows = r0

    def _changed(self, first: int, now: str):
        raise DataError(f"{self.name}: this pass over the blocks gave {now} rows, an earlier one {first}; "
                        "a fit reading X several times needs the same rows on every pass")


def check_block_rows(block_rows) -> int | None:
    """``block_rows`` as an int >= 1, or None (the default size); else ParameterError."""
    if block_rows is None:
        return None
    if isinstance(block_rows, (bool, np.bool_)) or not isinstance(block_rows, (int, np.integer)) \
            or block_rows < 1:
        raise ParameterError("block_rows", f"block_rows must be a whole number of rows >= 1 (or None for "
                                           f"blocks of about {BLOCK_BYTES >> 20} MB), got {block_rows!r}")
    return int(block_rows)


def default_block_rows(n_cols: int) -> int:
    return max(1024, BLOCK_BYTES // (8 * max(int(n_cols), 1)) // 64 * 64)


def open_source(X, block_rows: int | None = None, name: str = "X", var_names=None,
                query: bool = False) -> BlockSource:
    """A :class:`BlockSource` over ``X`` (see the module docstring for what ``X`` may be).
    Files opened from a spec string are closed by ``close()`` or a ``with`` block.
    ``var_names``: the model's variables, to which DataFrame blocks are matched
    (``query``: a model's query, warned about when it has none)."""
    if isinstance(X, BlockSource):
        if var_names is not None and isinstance(X, IterableSource) and not X._model_names:
            # opened without the model: its DataFrame blocks go to the model's variables by
            # name from now on, not in the first block's column order
            X.names, X._model_names = list(var_names), True
        return X
    check_block_rows(block_rows)
    if isinstance(X, (str, os.PathLike)):
        return _by_name(_open_path(os.fspath(X), block_rows), var_names)
    refuse_dask_frame(X, name)
    refuse_polars(X, name)
    refuse_sparse(X, name)
    if is_dask(X):
        raise DataError(f"{name} is a Dask array: use spnc.dask (or a learner's fit) to run on its chunks")
    if is_frame(X):     # blocks matched by column name, as everywhere (sliced as an array: by position)
        step = check_block_rows(block_rows) or default_block_rows(X.shape[1])
        src = IterableSource(lambda: (X.iloc[r:r + step] for r in range(0, len(X), step)), name,
                             var_names, positional=query and var_names is None)
        src.n_rows, src.n_cols = X.shape        # known before reading, as for an array
        return src
    if hasattr(X, "shape") and hasattr(X, "__getitem__"):
        # an h5py dataset of a file opened read-only: guard it, unless opened to be read while
        # another process appends (SWMR): its rows up to the shape taken here do not change
        f = getattr(X, "file", None)
        guard = FileGuard(f.filename) if getattr(f, "mode", None) == "r" and not getattr(f, "swmr_mode", False) \
            and os.path.isfile(f.filename) else None
        return _by_name(ArraySource(X, block_rows, name, guard=guard), var_names)
    if callable(X) or isinstance(X, Iterable):
        return IterableSource(X, name, var_names, positional=query and var_names is None)
    raise DataError(f"{name} must be an array, a dataset, a spec 'file.h5:/path' or an iterable of row "
                    f"blocks; got {type(X).__name__}")


def _by_name(src: BlockSource, var_names) -> BlockSource:
    """A dataset whose attribute names its columns gives a model's variables by name
    (:func:`spnc.data.dataset_order`), or, with no model, names the columns for a learner;
    the source is closed if that fails."""
    try:
        src.order = dataset_order(getattr(src, "A", None), src.n_cols, var_names, src.name)
        if var_names is None:
            src.names = attr_names(getattr(src, "A", None), src.name)
    except DataError:
        src.close()
        raise
    return src


def open_rows(X, block_rows: int | None = None, name: str = "X", var_names=None):
    """The rows of ``X`` for a pass: a Dask array as it is (checked by
    :func:`spnc.dask.check_array`), anything else as :func:`open_source`."""
    if is_dask(X):
        from .dask import check_array
        return check_array(X, name)
    return open_source(X, block_rows, name, var_names)


def _open_path(path: str, block_rows: int | None) -> BlockSource:
    file, ds = split_spec(path)
    ext = os.path.splitext(file)[1].lower()
    if not os.path.exists(file):
        raise DataError(f"{file}: no such file or directory")
    if ext == ".npy":
        guard = FileGuard(file)
        try:
            A = np.load(file, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise DataError(f"{file}: cannot read .npy: {getattr(e, 'strerror', None) or e}") from None
        return ArraySource(A, block_rows, path, guard=guard)
    if ext in (".h5", ".hdf5"):
        import h5py
        if not ds:
            raise DataError(f"{file}: name the dataset, as in '{file}:/path/to/data'")
        guard = FileGuard(file)
        try:
            f = h5py.File(file, "r")
        except OSError as e:
            raise DataError(f"{file}: cannot open HDF5 file: {e}") from None
        if ds not in f or not isinstance(f[ds], h5py.Dataset):
            f.close()
            raise DataError(f"{file}: no dataset {ds!r}")
        d = f[ds]
        if d.dtype.kind not in "iufb" or d.ndim != 2:
            what = f"{d.dtype} {d.shape}"       # read before closing the file
            f.close()
            raise DataError(f"{path}: need a 2-D numeric dataset, got {what}")
        return ArraySource(d, block_rows, path, owner=f, guard=guard)
    if ext == ".zarr":
        try:
            import zarr
        except ImportError:
            raise DataError(f"{file}: reading Zarr needs the zarr package (pip install 'pyspnc[zarr]')") from None
        z = zarr.open(file, mode="r")
        if ds:
            z = z[ds]
        if not hasattr(z, "shape") or len(z.shape) != 2:
            raise DataError(f"{path}: need a 2-D Zarr array")
        return ArraySource(z, block_rows, path)
    raise DataError(f"{path}: unknown data file type (streaming reads .h5/.hdf5:/path, .zarr and .npy)")
