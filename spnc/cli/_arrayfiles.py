"""Reading the tools' data files that hold arrays, not text: ``.npy``, HDF5 datasets
(``--dataset``; a ``columns``/``var_names`` attribute names the columns) and Parquet
(pandas + pyarrow), each as a :class:`~spnc.cli._table.Table` of float64."""
from __future__ import annotations

import numpy as np

from ..data import as_data, stored_names
from ..errors import DataError


def read_array_file(path: str, ext: str, dataset: str | None):
    """The table of an array data file ``path`` of extension ``ext`` (lower case)."""
    from ._table import Table
    if ext == ".npy":
        try:
            X = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise DataError(f"{path}: cannot read .npy: {str(e).splitlines()[0] if str(e) else e}") from None
        return Table(_matrix(X, path), None, path)
    if ext in (".h5", ".hdf5"):
        return _read_hdf5(path, dataset)
    return _read_parquet(path)


def _read_hdf5(path: str, dataset: str | None):
    import h5py
    from ._table import Table
    if not dataset:
        raise DataError(f"{path}: HDF5 data needs --dataset NAME")
    try:
        with h5py.File(path, "r") as f:
            if dataset not in f or not isinstance(f[dataset], h5py.Dataset):
                raise DataError(f"{path}: no dataset {dataset!r}")
            ds = f[dataset]
            if ds.dtype.kind not in "iufb" or ds.ndim != 2:
                raise DataError(f"{path}:{dataset}: need a 2-D numeric dataset, got {ds.dtype} {ds.shape}")
            names = stored_names(ds.attrs.get("columns", ds.attrs.get("var_names")), ds.shape[1],
                                     f"{path}:{dataset}")
            X = np.asarray(ds[()], dtype=np.float64)
    except OSError as e:
        raise DataError(f"{path}: cannot read HDF5 data: {e}") from None
    return Table(X, names, f"{path}:{dataset}")


def _read_parquet(path: str):
    try:
        import pandas as pd
    except ImportError:
        raise DataError(f"{path}: reading Parquet needs pandas and pyarrow "
                        "(pip install pandas pyarrow)") from None
    try:
        df = pd.read_parquet(path)
    except ImportError as e:
        raise DataError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow): {e}") from None
    except Exception as e:  # noqa: BLE001 - the engines raise many types on bad files
        raise DataError(f"{path}: cannot read Parquet: {str(e).splitlines()[0] if str(e) else e}") from None
    from ._table import Table
    # names as read, as from a CSV header: a tool that stores them checks them then
    X, names = as_data(df, name=path, dtype=np.float64, model_names=False)
    return Table(X, names, path)


def _matrix(X: np.ndarray, path: str) -> np.ndarray:
    if X.dtype.kind not in "iufb" or X.ndim != 2:
        raise DataError(f"{path}: need a 2-D numeric array, got {X.dtype} {X.shape}")
    return np.asarray(X, dtype=np.float64)
