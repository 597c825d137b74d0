"""Tabular inputs for estimators and queries: numpy arrays and pandas DataFrames.

:func:`as_data` is the one place where a DataFrame becomes an array: its column names are
kept (learners store them in the model as ``var_names``) and, for a model that has
``var_names``, a DataFrame's columns are matched to them by name. pandas is optional: it is
never imported here; a DataFrame is recognised by its attributes.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ._text import check_unique, counted, lookalike_hint
from .errors import DataError

_INT64_MAX = np.iinfo(np.int64).max


def is_frame(X: Any) -> bool:
    """Whether ``X`` looks like a pandas (or compatible) DataFrame."""
    if (type(X).__module__ or "").startswith("polars"):      # not its LazyFrame: no schema resolved
        return type(X).__name__ == "DataFrame"
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "to_numpy") and getattr(X, "ndim", 2) == 2


def unmasked(X: Any) -> Any:
    """A numpy masked array as float64 with NaN (missing) in its masked cells, anything
    else as it is: ``np.asarray`` would drop the mask and read the hidden values."""
    if isinstance(X, np.ma.MaskedArray):
        return np.ma.asarray(X, dtype=np.float64).filled(np.nan)
    return X


def refuse_sparse(X: Any, name: str = "X") -> None:
    """A scipy.sparse matrix would become a 0-d object array: say how to pass it."""
    if hasattr(X, "tocsr") and hasattr(X, "nnz"):
        raise DataError(f"{name} is a sparse matrix; spnc reads dense rows (pass its .toarray(), or "
                        "blocks of it)")


def refuse_dask_frame(X: Any, name: str = "X") -> None:
    """A Dask DataFrame is neither a pandas DataFrame (numpy would read it by position,
    whatever its column names) nor a Dask array: say how to pass it."""
    if (type(X).__module__ or "").startswith("dask") and hasattr(X, "columns"):
        raise DataError(f"{name} is a Dask DataFrame: pass {name}.compute() (a pandas DataFrame, "
                        f"columns matched by name) or {name}.to_dask_array(lengths=True) (read in "
                        "chunks, columns taken in order)")


def refuse_polars(X: Any, name: str = "X") -> None:
    """A polars DataFrame looks like a pandas one to :func:`is_frame`, but its dtypes and
    indexing are not pandas': say how to pass it rather than misread it."""
    if not (type(X).__module__ or "").startswith("polars"):
        return
    kind = type(X).__name__
    if kind in ("DataFrame", "LazyFrame"):
        how = "df.collect().to_pandas() or df.collect().to_numpy()" if kind == "LazyFrame" else \
            "df.to_pandas() (needs pyarrow) or df.to_numpy()"
        raise DataError(f"{name} is a polars {kind}; spnc reads pandas DataFrames (columns matched by name) "
                        f"and arrays (columns taken in order): convert it with {how}")


def refuse_1d(X: Any, name: str = "X") -> None:
    """A 1-D ``X`` given to a fit, which cannot tell one feature from one sample: say how to
    reshape it, as scikit-learn does (a Series is refused by :func:`as_data`, with its own hint)."""
    if is_frame(X) or hasattr(X, "to_frame") or isinstance(X, (str, bytes)) or callable(X):
        return
    if getattr(getattr(X, "dtype", None), "names", None):      # a record array: its own message
        return
    shape = getattr(X, "shape", None)
    if shape is None and isinstance(X, (list, tuple)):
        try:
            a = np.asarray(X)
        except (TypeError, ValueError):     # ragged rows: refused with their row later
            return
        # a list of matrices or other objects is refused, as it is, by the later checks
        shape = a.shape if a.dtype.kind in "biuf" else None
    if shape is None or len(shape) != 1:
        return
    a = f"{name}.reshape" if hasattr(X, "reshape") else f"np.asarray({name}).reshape"
    raise DataError(f"{name} must be 2-D (n_rows, n_vars), got a 1-D array of shape {tuple(shape)}: reshape it "
                    f"with {a}(-1, 1) if it holds a single feature, or {a}(1, -1) if it holds a single sample")


def storable_names(cols: Sequence[str], name: str = "X") -> None:
    """Refuse column names a model file cannot store (they name a learned model's
    variables): empty, longer than the format's limit, with NUL or a lone surrogate."""
    from ._validation import MAX_NAME_BYTES
    for c in cols:
        try:
            size = len(c.encode("utf-8"))
        except UnicodeEncodeError:
            raise DataError(f"{name}: column name {c!r} is not valid Unicode text (a lone surrogate); "
                            "model files store variable names as UTF-8") from None
        if not 0 < size <= MAX_NAME_BYTES or "\x00" in c:
            raise DataError(f"{name}: column name {c[:40]!r} cannot name a variable: model files store "
                            f"names of 1 to {MAX_NAME_BYTES} bytes without NUL (rename the column)")


def _column_hint(dt) -> str:
    """How to make a column of dtype ``dt`` numeric: a category's codes and labels differ,
    and an object column of numbers needs converting, not encoding."""
    if str(dt) == "category":
        return (" (pass its codes, df[c].cat.codes: positions in its categories, -1 for missing; or its "
                "labels, df[c].astype(float), when they are numbers)")
    if str(dt) == "object":
        return (" (Python objects: convert numbers with pd.to_numeric(df[c]), None becoming missing; "
                "encode text categories as integer codes 0, 1, 2, ...)")
    if str(dt) == "str" or "string" in str(dt):      # pandas' text dtypes, as read_csv gives a text column
        return (" (text: convert numbers written as text with pd.to_numeric(df[c]), missing values becoming "
                "NaN; encode text categories as integer codes 0, 1, 2, ...)")
    return " (encode categories as integer codes 0, 1, 2, ...)"


def as_data(X: Any, var_names: Sequence[str] | None = None, name: str = "X",
            dtype: Any = None, model_names: bool = True) -> tuple[Any, list[str] | None]:
    """``(array, column names)`` for a DataFrame (or a dataset whose ``columns`` attribute
    names them, see :func:`attr_names`), ``(X, None)`` for anything else.

    DataFrame columns must be numeric or boolean (missing values become NaN). With
    ``var_names`` (a model's variables) the columns are taken by name in the model's order;
    a missing variable or a column that is no variable is an error naming them (the CLI's
    rule, docs/cli.md). Integer columns stay integer (learners treat
    integer data as discrete) unless some column is real or has missing values. Without
    ``var_names`` the names are checked for storage as a learned model's ``var_names``,
    unless ``model_names`` is False (a query of a model without names)."""
    refuse_dask_frame(X, name)
    refuse_polars(X, name)
    if not is_frame(X):
        if getattr(X, "ndim", 0) == 1 and hasattr(X, "to_frame") and hasattr(X, "index"):
            # X[None, :] (the hint for a 1-D array) would drop the labels and take it by position
            raise DataError(f"{name} is a pandas Series; pass rows as a DataFrame, e.g. one row as "
                            f"df.iloc[[i]] or s.to_frame().T, so that its labels name the variables")
        X = unmasked(X)         # masked cells are missing values, not their data
        refuse_sparse(X, name)
        names = attr_names(X, name) if var_names is None and model_names else None
        if names is not None:
            storable_names(names, name)
        if var_names is not None and len(getattr(X, "shape", ())) == 2:
            # an HDF5/Zarr dataset naming its columns: by name, as a DataFrame and the streamed queries take it
            order = dataset_order(X, X.shape[1], var_names, name)
            if order is not None:
                X = np.asarray(X)[:, order]
        return (X if dtype is None else np.asarray(X, dtype=dtype)), names
    cols = [str(c) for c in X.columns]
    check_unique(cols, lambda dup, i, j: DataError(f"{name}: column name {dup!r} appears twice"))
    if list(X.columns) != cols:                  # names are strings from here on (0 -> "0")
        X = X.set_axis(cols, axis=1)
    if var_names is not None:
        check_same_names(cols, var_names, name)
        X = X[list(var_names)]
        cols = list(var_names)
    elif model_names:
        storable_names(cols, name)
    kinds = []
    for c, dt in zip(cols, X.dtypes):
        k = getattr(dt, "kind", "O")
        if k not in "biuf":
            raise DataError(f"{name}: column {c!r} has dtype {dt}, not numeric{_column_hint(dt)}")
        if k != "f" and getattr(dt, "na_value", None) is not None and bool(X[c].isna().any()):
            k = "f"              # pandas nullable Int64/boolean with <NA>: missing values become NaN
        if k == "u" and getattr(dt, "itemsize", 8) >= 8 and X[c].max() > _INT64_MAX:
            k = "f"              # would wrap to a negative int64: a float keeps sign and magnitude
        kinds.append(k)
    if dtype is None:
        dtype = np.int64 if all(k in "biu" for k in kinds) else np.float64
    try:
        A = X.to_numpy(dtype=dtype, na_value=np.nan) if dtype == np.float64 else X.to_numpy(dtype=dtype)
    except (TypeError, ValueError) as e:
        raise DataError(f"{name}: cannot convert the DataFrame to numbers: {e}") from None
    return np.ascontiguousarray(A), cols


def check_same_names(cols: Sequence[str], var_names: Sequence[str], name: str,
                     what: str = "the DataFrame's columns", drop: str = "select df[model.var_names]") -> None:
    """Refuse columns ``cols`` that are not the model's ``var_names`` in some order, naming
    the variables missing and the columns unknown."""
    have, want = set(cols), set(var_names)
    missing = [v for v in var_names if v not in have]
    extra = [c for c in cols if c not in want]
    if extra and not missing:
        raise DataError(f"{name}: column{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra[:5]))} "
                        f"{'are' if len(extra) > 1 else 'is'} not among the model's variables ({drop} to "
                        "drop them)")
    if missing:
        raise DataError(f"{name}: the model's variable{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(map(repr, missing[:5]))} {'are' if len(missing) > 1 else 'is'} not among {what}"
                        + (f" (unmatched columns: {', '.join(map(repr, extra[:5]))})" if extra else "")
                        + lookalike_hint(missing, extra))


def stored_names(raw, n_cols: int, where: str) -> list[str] | None:
    """Column names stored with a dataset (its ``columns`` or ``var_names`` attribute,
    ``raw``), or None without one; a list of the wrong length or with a repeated name is an
    error, not a reason to take the columns in order."""
    if raw is None:
        return None
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in np.atleast_1d(np.asarray(raw)).tolist()]
    if len(names) != n_cols:
        raise DataError(f"{where}: its column names attribute has {counted(len(names), 'name')} for "
                        f"{counted(n_cols, 'column')}")
    check_unique(names, lambda dup, i, j: DataError(f"{where}: column name {dup!r} appears twice in its column "
                                                    "names attribute"))
    return names


def attr_names(A: Any, name: str = "X") -> list[str] | None:
    """The column names an HDF5 or Zarr dataset stores in its ``columns`` (or
    ``var_names``) attribute, as the console tools write them; None for arrays without."""
    attrs = getattr(A, "attrs", None)
    if attrs is None or not hasattr(attrs, "get") or len(getattr(A, "shape", ())) != 2:
        return None
    return stored_names(attrs.get("columns", attrs.get("var_names")), A.shape[1], name)


def dataset_order(A: Any, n_cols: int | None, var_names: Sequence[str] | None, name: str) -> np.ndarray | None:
    """The columns of a dataset ``A`` (HDF5, Zarr) in the order of a model's ``var_names``
    when its ``columns``/``var_names`` attribute names them, as the console tools read
    it (None: in order). A name list that is not the model's variables is an error."""
    attrs = getattr(A, "attrs", None)
    raw = None if var_names is None or attrs is None else attrs.get("columns", attrs.get("var_names"))
    cols = stored_names(raw, n_cols, name)
    if cols is None:
        return None
    check_same_names(cols, list(var_names), name, "its column names attribute", "read its rows as an array")
    order = np.array([cols.index(v) for v in var_names], dtype=np.int64)
    return None if np.array_equal(order, np.arange(len(order))) else order


def column_names(X: Any) -> list[str] | None:
    """The names of the columns of ``X``: a DataFrame's, or those an HDF5/Zarr dataset
    stores (:func:`attr_names`); None for anything else."""
    if is_frame(X):
        return [str(k) for k in X.columns]
    return attr_names(X)


def frame_column(X: Any, var_names: Sequence[str] | None, c: int) -> int:
    """The column of ``X`` that holds the model's variable ``c``: the columns of a
    DataFrame or of a dataset naming them were matched to ``var_names`` by name (see
    :func:`as_data`), so its own position; for anything else ``c``."""
    cols = None if var_names is None else column_names(X)
    if cols is None:
        return c
    return next((j for j, k in enumerate(cols) if k == var_names[c]), c)


def _ragged(X: Any) -> str:
    """Which row of a list of rows is not as long as the first ('' if none is found)."""
    if not isinstance(X, (list, tuple)) or not X:
        return ""
    sizes = [len(r) if isinstance(r, (list, tuple, np.ndarray)) else -1 for r in X]
    r = next((i for i, s in enumerate(sizes) if s != sizes[0]), None)
    if r is None:
        return ""
    what = lambda s: "a single value" if s < 0 else f"{s} values"     # noqa: E731
    return f"row {r} has {what(sizes[r])}, row 0 {what(sizes[0])}"


def real_array(X: Any, name: str = "X", dtype: Any = None) -> np.ndarray:
    """``X`` as a numpy array of real numbers: its own integer, boolean or float dtype, or
    converted to ``dtype``; a :class:`DataError` naming ``name`` for ragged rows, complex
    values, text or Python objects. A list is read as numpy reads it before any
    conversion, so that text or ``None`` in it is refused as in an array, not parsed."""
    refuse_sparse(X, name)
    kind = getattr(getattr(X, "dtype", None), "kind", "")
    if kind == "c":
        raise DataError(f"{name} has complex values; spnc's variables are real")
    fields = getattr(getattr(X, "dtype", None), "names", None)
    if fields:                       # np.genfromtxt(..., names=True): its dtype would fill the message
        shown = ", ".join(map(repr, fields[:5])) + (", ..." if len(fields) > 5 else "")
        raise DataError(f"{name} is a structured (record) array with {counted(len(fields), 'field')} ({shown}); "
                        f"spnc reads 2-D arrays of numbers: pass pd.DataFrame({name}) (fields become named "
                        f"columns) or numpy.lib.recfunctions.structured_to_unstructured({name})")
    if kind in "MmUSV" and kind:     # numpy would cast dates and text to numbers without a word
        raise DataError(f"{name} must be numeric (real numbers), got dtype {X.dtype}")
    try:
        A = np.asarray(unmasked(X))
    except (TypeError, ValueError) as e:         # ragged rows
        raise DataError(f"{name} must be a numeric 2-D array: {_ragged(X) or e}") from None
    if A.dtype.kind == "c":
        raise DataError(f"{name} has complex values; spnc's variables are real")
    if A.dtype.kind == "O":
        obj = A[()] if A.ndim == 0 else None
        if hasattr(obj, "blocks") and hasattr(obj, "n_cols"):     # a source of spnc.stream.open_source
            raise DataError(f"{name} is a block source ({type(obj).__name__}); this call needs rows in memory: read "
                            "them with spnc.stream.load, or use the spnc.stream functions that stream")
        what = f"a {type(obj).__name__}, not an array of rows" if A.ndim == 0 else \
            "Python objects (dtype object: None, text, big integers, ...)"
        raise DataError(f"{name} holds {what}; pass numbers, with NaN (not None) for missing values")
    if A.dtype.kind not in "biuf":
        raise DataError(f"{name} must be numeric (real numbers), got dtype {A.dtype}")
    if A.dtype.kind == "f" and A.dtype.itemsize > 8:
        _refuse_beyond_float64(A, name)
    return A if dtype is None else A.astype(dtype, copy=False)


def _refuse_beyond_float64(A: np.ndarray, name: str) -> None:
    """A finite value of a wider float (np.longdouble) that float64, in which spnc
    computes, can only hold as infinity is an error naming its cell."""
    with np.errstate(over="ignore"):
        big = np.isinf(A.astype(np.float64)) & np.isfinite(A)
    if big.any():
        idx = tuple(int(i) for i in np.argwhere(big)[0])
        v = np.format_float_scientific(A[idx], precision=6, trim="-")     # not float(): inf
        raise DataError(f"{name}[{', '.join(map(str, idx))}] = {v} is beyond the range of float64 "
                        f"(about ±{np.finfo(np.float64).max:.4g}), in which spnc computes; rescale the data")


def with_names(spn, names: Sequence[str] | None):
    """``spn`` carrying ``names`` as its variable names (unchanged when ``names`` is None)."""
    if names is None or spn is None or list(names) == list(spn.var_names or []):
        return spn
    if len(names) != spn.n_vars:
        raise DataError(f"{counted(len(names), 'column name')} for a model over {counted(spn.n_vars, 'variable')}")
    from .graph import SPN
    return SPN.from_arrays(spn.kind, spn.child_ptr, spn.child, spn.weight, spn.leaf_tables,
                           spn.cardinality, var_type=spn.var_type, var_names=list(names), roots=spn.roots,
                           root_weights=spn.root_weights, combine=spn.combine, stats=spn.stats,
                           learner=spn.learner)
