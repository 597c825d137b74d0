"""Reading and writing data tables for the console tools (CSV/TSV, .npy, HDF5)."""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from .. import stream
from ..errors import DataError

MISSING = {"", "?", "nan", "NaN", "NAN", "NA", "na"}


def _delimiter(path: str, delimiter: str | None) -> str | None:
    if delimiter is not None:
        return "\t" if delimiter in ("\\t", "tab") else delimiter
    ext = os.path.splitext(path)[1].lower()
    return "\t" if ext in (".tsv", ".tab") else ","


def _cell(tok: str, r: int, c: int, path: str) -> float:
    t = tok.strip()
    if t in MISSING:
        return np.nan
    try:
        return float(t)
    except ValueError:
        raise DataError(f"{path}: row {r + 1}, column {c + 1}: {t[:40]!r} is not a number "
                        "(use NaN, ? or an empty cell for missing values)") from None


def read_text(path: str, delimiter: str | None = None,
              header: bool | None = None) -> tuple[np.ndarray, list[str] | None]:
    """Read a delimited text table; NaN, ? or an empty cell mark a missing value. A first
    line with any non-numeric cell is taken as a header unless ``header`` says otherwise."""
    d = _delimiter(path, delimiter)
    with open(path, encoding="utf-8") as f:
        lines = [ln.rstrip("\r\n") for ln in f]
    lines = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise DataError(f"{path}: no data rows")
    split = (lambda s: s.split(d)) if d != " " else (lambda s: s.split())
    names = None
    first = [t.strip() for t in split(lines[0])]
    if header is None:
        header = any(t not in MISSING and not _isnum(t) for t in first)
    if header:
        names = [t.strip('"') for t in first]
        lines = lines[1:]
    width = len(names) if names else len(first)
    X = np.empty((len(lines), width))
    for r, ln in enumerate(lines):
        toks = split(ln)
        if len(toks) != width:
            raise DataError(f"{path}: row {r + 1 + bool(header)} has {len(toks)} cells, expected {width}")
        X[r] = [_cell(t, r, c, path) for c, t in enumerate(toks)]
    return X, names


def _isnum(t: str) -> bool:
    try:
        float(t)
        return True
    except ValueError:
        return False


def read_table(path: str, *, dataset: str | None = None, delimiter: str | None = None,
               header: bool | None = None) -> tuple[np.ndarray, list[str] | None]:
    """Data matrix (float64, NaN = missing) and column names if the file has them."""
    if not dataset and (stream.split_spec(path)[1] or path.rstrip("/").endswith(".zarr")):
        return stream.load(path), None      # 'file.h5:/path', 'file.zarr[:/path]'
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        try:
            X = np.load(path, allow_pickle=False)
        except ValueError as e:
            raise DataError(f"{path}: cannot read .npy: {e}") from None
        return _matrix(X, path), None
    if ext in (".h5", ".hdf5"):
        import h5py
        if not dataset:
            raise DataError(f"{path}: HDF5 data needs --dataset NAME")
        try:
            with h5py.File(path, "r") as f:
                if dataset not in f or not isinstance(f[dataset], h5py.Dataset):
                    raise DataError(f"{path}: no dataset {dataset!r}")
                ds = f[dataset]
                if ds.dtype.kind not in "iufb" or ds.ndim != 2:
                    raise DataError(f"{path}:{dataset}: need a 2-D numeric dataset, got "
                                    f"{ds.dtype} {ds.shape}")
                return np.asarray(ds[()], dtype=np.float64), None
        except OSError as e:
            raise DataError(f"{path}: cannot read HDF5 data: {e}") from None
    return read_text(path, delimiter, header)


def _matrix(X: np.ndarray, path: str) -> np.ndarray:
    if X.dtype.kind not in "iufb" or X.ndim != 2:
        raise DataError(f"{path}: need a 2-D numeric array, got {X.dtype} {X.shape}")
    return np.asarray(X, dtype=np.float64)


def align_columns(X: np.ndarray, names: list[str] | None, var_names: Sequence[str] | None,
                  n_vars: int, path: str) -> np.ndarray:
    """Reorder header columns to the model's variable order when both have names."""
    if names is not None and var_names is not None and set(var_names) <= set(names):
        idx = [names.index(v) for v in var_names]
        return np.ascontiguousarray(X[:, idx])
    if X.shape[1] != n_vars:
        raise DataError(f"{path}: data has {X.shape[1]} columns, the model has {n_vars} variables")
    return X


def parse_columns(spec: str, var_names: Sequence[str] | None, n_vars: int) -> list[int]:
    """'0,2,5-7' or variable names 'age,income' -> sorted column indices."""
    out: set[int] = set()
    for tok in (t.strip() for t in spec.split(",")):
        if not tok:
            continue
        if var_names is not None and tok in var_names:
            out.add(list(var_names).index(tok))
            continue
        try:
            if "-" in tok[1:]:
                a, b = tok.split("-", 1)
                rng = range(int(a), int(b) + 1)
            else:
                rng = range(int(tok), int(tok) + 1)
        except ValueError:
            raise DataError(f"column {tok!r} is neither a variable name nor an index") from None
        for c in rng:
            if not 0 <= c < n_vars:
                raise DataError(f"column {c} is out of range [0, {n_vars})")
            out.add(c)
    return sorted(out)


def write_table(path: str, X: np.ndarray, names: Sequence[str] | None = None) -> None:
    """Write a matrix or vector as .npy, or as CSV/TSV text (shortest exact float repr)."""
    X = np.asarray(X)
    if os.path.splitext(path)[1].lower() == ".npy":
        np.save(path, X)
        return
    d = _delimiter(path, None)
    with open(path, "w", encoding="utf-8") as f:
        if names is not None and X.ndim == 2:
            f.write(d.join(names) + "\n")
        rows = X.reshape(len(X), -1) if X.ndim else X.reshape(1, 1)
        for row in rows.tolist():
            f.write(d.join("nan" if x != x else repr(x) for x in row) + "\n")
