"""spnc-eval over data files read block by block (HDF5 datasets, Zarr arrays, .npy files):
``--chunk-rows`` rows at a time are checked, evaluated and appended to the outputs, and the
summary comes from running sums, so memory does not grow with the number of rows. JSON
outputs are the exception: they are one document, gathered in memory."""
from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import Callable

import numpy as np

from .. import _rowfile, stream
from .._atomic import atomic_write
from .._progress import Progress
from ..errors import DataError
from . import _data, write_stdout
from ..data import stored_names
from ._table import Table


def streamable(path: str | None, dataset: str | None) -> bool:
    """Whether ``path`` names data that can be read block by block."""
    if path is None or path == "-":
        return False
    file, ds = stream.split_spec(path)
    ext = os.path.splitext(file.rstrip("/"))[1].lower()
    return ext in (".zarr", ".npy") or (ext in (".h5", ".hdf5") and bool(ds or dataset))


def open_data(path: str, dataset: str | None, block_rows: int) -> tuple[stream.BlockSource, list | None, str]:
    """The block source, the column names an HDF5 dataset carries, and its label."""
    file, ds = stream.split_spec(path)
    ds = ds or dataset
    if not os.path.exists(file):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), file)
    spec = f"{file}:{ds}" if ds else file
    src = stream.open_source(spec, block_rows)
    names = None
    A = getattr(src, "A", None)
    kind = getattr(getattr(A, "dtype", None), "kind", "f")
    if kind not in "iufb":
        src.close()
        raise DataError(f"{spec}: need a 2-D numeric array, got {A.dtype} {tuple(A.shape)}")
    if A is not None and type(A).__module__.startswith("h5py"):
        try:
            names = stored_names(A.attrs.get("columns", A.attrs.get("var_names")), src.n_cols, spec)
        except DataError:
            src.close()
            raise
    return src, names, spec


class _Stats:
    """Count, mean and sum of squared deviations of each column, added block by block
    (Chan et al.'s pairwise update), and the rows with -inf."""

    def __init__(self):
        self.n = self.miss = 0
        self.mean = self.m2 = self.zero = self.m = None

    def add(self, ll: np.ndarray, X: np.ndarray) -> None:
        cols = ll.reshape(len(ll), -1)
        self.n += len(ll)
        self.miss += int(np.isnan(X).any(axis=1).sum()) if X.size else 0
        fin = np.isfinite(cols)
        m = fin.sum(axis=0).astype(np.float64)
        s = np.where(fin, cols, 0.0).sum(axis=0)
        mean = np.divide(s, m, out=np.zeros_like(s), where=m > 0)
        m2 = np.where(fin, (cols - mean) ** 2, 0.0).sum(axis=0)
        if self.m is None:
            self.m, self.mean, self.m2, self.zero = m, mean, m2, (~fin).sum(axis=0)
            return
        tot = self.m + m
        delta = mean - self.mean
        w = np.divide(m, tot, out=np.zeros_like(tot), where=tot > 0)
        self.m2 = self.m2 + m2 + delta ** 2 * self.m * w
        self.mean = self.mean + delta * w
        self.m, self.zero = tot, self.zero + (~fin).sum(axis=0)

    def columns(self) -> list[tuple[float, float, int]]:
        """``(mean, standard error, rows with probability 0)`` per column."""
        out = []
        for j in range(0 if self.m is None else len(self.m)):
            z = int(self.zero[j])
            if self.n == 0:
                out.append((float("nan"), float("nan"), z))
            elif z:
                out.append((float("-inf"), float("nan"), z))
            else:
                se = float(np.sqrt(self.m2[j] / (self.n - 1)) / np.sqrt(self.n)) if self.n > 1 else float("nan")
                out.append((float(self.mean[j]), se, z))
        return out


class _Out:
    """One output written block by block to ``tmp`` in the format of ``target``'s
    extension (.npy, CSV/TSV/text, or stdout; JSON gathered and written at the end)."""

    def __init__(self, target: str, tmp: str | None, names):
        self.target, self.tmp, self.names, self.n = target, tmp, names, 0
        self.ext = "" if target == "-" else os.path.splitext(target)[1].lower()
        self.parts: list = []
        self.shape1 = None
        self.h = sys.stdout if target == "-" else open(tmp, "w" if self.ext not in (".npy", ".json") else "wb",
                                                       encoding=None if self.ext in (".npy", ".json") else "utf-8")
        if self.ext == ".npy":
            self.h.write(b"\0" * _rowfile.NPY_HEADER)

    def write(self, block: np.ndarray) -> None:
        block = np.asarray(block, dtype=np.float64)
        self.shape1 = block.shape[1:]
        if self.ext == ".json":
            self.parts.append(block)
        elif self.ext == ".npy":
            self.h.write(np.ascontiguousarray(block, dtype="<f8").tobytes())
        else:
            d = "," if self.target == "-" else _data.delimiter_of(self.target, None)
            text = _data._text(block, self.names if self.n == 0 else None, d, "csv")
            if self.target == "-":
                write_stdout(text)
            else:
                self.h.write(text)
        self.n += len(block)

    def close(self) -> None:
        if self.ext == ".npy":
            self.h.seek(0)
            self.h.write(_rowfile.npy_header((self.n,) + (self.shape1 or ())))
        elif self.ext == ".json":
            X = np.concatenate(self.parts) if self.parts else np.zeros(0)
            self.h.write(_data._text(X, self.names, ",", "json").encode("utf-8"))
        if self.target == "-":
            self.h.flush()
        else:
            self.h.close()


def run_blocks(src: stream.BlockSource, outputs: list[tuple[str, list | None, str]],
               step: Callable[[np.ndarray, int], tuple[np.ndarray, dict]]) -> _Stats:
    """For every block, ``step(block, row0)`` gives ``(X, {"ll": ..., other keys})``; each
    output ``(target, column names, key)`` gets the arrays of its key appended (the file
    is written atomically) and the log-likelihoods are summarised. Returns the summary."""
    stats = _Stats()
    prog = Progress("", total=src.n_rows, unit=" rows")

    def loop(tmps: list) -> None:
        outs = [_Out(t, tmp, names) for (t, names, _), tmp in zip(outputs, tmps)]
        try:
            for r0, b in src.blocks():
                X, res = step(b, r0)
                stats.add(res["ll"], X)
                for o, (_, _, key) in zip(outs, outputs):
                    o.write(res[key])
                prog.update(done=r0 + len(b))
            if stats.n == 0:        # inside the writes: an existing output stays as it was
                raise DataError(f"{src.name}: no data rows")
        finally:
            for o in outs:
                with contextlib.suppress(Exception):
                    o.close()

    def nest(i: int, tmps: list) -> None:
        if i == len(outputs):
            return loop(tmps)
        if outputs[i][0] == "-":
            return nest(i + 1, tmps + [None])
        atomic_write(outputs[i][0], lambda tmp: nest(i + 1, tmps + [tmp]))

    nest(0, [])
    if stats.n == 0:
        raise DataError(f"{src.name}: no data rows")
    return stats


def column_order(names: list | None, n_cols: int, var_names, n_vars: int, by_position: bool, label: str):
    """The data columns in the model's variable order (None: as they are), by the rules of
    :func:`_data.match_columns` (applied to a one-row table of column numbers)."""
    probe = Table(np.arange(n_cols, dtype=np.float64)[None, :], names, label)
    got = _data.match_columns(probe, var_names, n_vars, by_position)
    if got is probe:
        return None, names
    return got.X[0].astype(np.int64), got.names
