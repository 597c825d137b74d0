"""Portable model files: HDF5 and JSON (formats/spnc-hdf5.md) and DOT drawings.

>>> import os, tempfile, spnc
>>> from spnc import Bernoulli, Product, Sum
>>> model = spnc.compile(Sum([Product([Bernoulli(0, .2), Bernoulli(1, .7)]),
...                           Product([Bernoulli(0, .9), Bernoulli(1, .4)])], [.3, .7]))
>>> tmp = tempfile.TemporaryDirectory()
>>> path = os.path.join(tmp.name, "model.h5")
>>> spnc.io.save(model, path)                # or "model.json"
>>> spnc.io.load(path).n_nodes == model.n_nodes
True
>>> print(spnc.io.to_dot(model, max_nodes=200).splitlines()[0])
digraph spnc {
>>> tmp.cleanup()

Files are untrusted input: every problem raises one :class:`spnc.errors.FormatError` that
names the path inside the file.
"""
from __future__ import annotations

import os
from typing import Any

from ..errors import FormatError

from .. import leaves as _leaves  # noqa: F401  (registers every built-in leaf type)
from .._warn import warn_user
from ._model import dropped_on_load, model_from_validated, tree_from_model
from ._spec import DEFAULT_LIMITS, FORMAT, VERSION, Group, Limits, trees_equal
from ._validate import Validated, validate_tree
from . import hdf5 as _h5
from . import jsonio as _js
from .dot import render, to_dot

__all__ = ["save", "load", "to_dot", "render", "read_validated", "write_tree", "format_of",
           "FORMAT", "VERSION", "Limits", "Group", "trees_equal", "validate_tree",
           "tree_from_model"]

_EXT = {".h5": "hdf5", ".hdf5": "hdf5", ".json": "json", ".dot": "dot", ".gv": "dot"}


def _text_path(path):
    """A bytes path (which open() and h5py take) as text: the checks on names and
    extensions here compare text."""
    return os.fsdecode(path) if isinstance(path, bytes) else path


def format_of(path: str | os.PathLike, fmt: str | None = None) -> str:
    """'hdf5', 'json' or 'dot', from ``fmt`` or the file extension."""
    if fmt is not None:
        if fmt not in ("hdf5", "json", "dot"):
            raise FormatError(f"unknown format {fmt!r}; use 'hdf5', 'json' or 'dot'")
        return fmt
    ext = os.path.splitext(os.fspath(path))[1].lower()
    try:
        return _EXT[ext]
    except KeyError:
        raise FormatError(f"{os.fspath(path)}: unknown extension {ext!r}; use .h5/.hdf5, "
                          ".json or .dot") from None


def read_validated(path: str | os.PathLike, *, fmt: str | None = None,
                   limits: Limits = DEFAULT_LIMITS) -> Validated:
    """Read and check a model file; the result's ``tree`` is fully in memory. Every failure,
    including any libhdf5/h5py error on a damaged file, is a :class:`FormatError` whose
    message starts with the file name."""
    path = _text_path(path)
    name = os.fspath(path)
    try:
        kind = format_of(path, fmt)
    except FormatError as e:
        raise FormatError(f"{e}{_foreign_hint(path, fmt) or _data_hint(path, None)}") from None
    if kind == "dot":
        raise FormatError(f"{name}: DOT files are drawings and cannot be read back")
    try:
        if kind == "hdf5":
            with _h5.open_tree(path, limits) as tree:
                return validate_tree(tree, limits)
        return validate_tree(_js.read_tree(path, limits), limits)
    except FormatError as e:
        msg = str(e)
        msg = msg if msg.startswith(name) else f"{name}: {msg}"
        raise FormatError(msg + (_foreign_hint(path, fmt) or _data_hint(path, kind, limits))) from None
    except (RecursionError, MemoryError):
        raise FormatError(f"{name}: file structure is too large or too deep") from None
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:    # not the file's fault
        raise type(e)(e.errno, e.strerror, name) from None
    except Exception as e:  # noqa: BLE001  (h5py raises OSError, KeyError, RuntimeError, ...)
        raise FormatError(f"{name}: damaged file ({type(e).__name__}: {str(e)[:300]})") from None


def _foreign_hint(path: str | os.PathLike, fmt: str | None) -> str:
    """For a file named like another library's model: how to read it."""
    from .importers import format_for
    f = format_for(path) if fmt is None else None
    return "" if f is None else (f" (the name says {f.name}, another library's format: read it with "
                                 "spnc.io.importers.load)")


_DATA_EXT = (".csv", ".tsv", ".tab", ".txt", ".data", ".npy", ".parquet", ".pq", ".zarr")


def _data_hint(path: str | os.PathLike, kind: str | None, limits: Limits = DEFAULT_LIMITS) -> str:
    """For a data file given where a model is expected (arguments swapped, a dataset
    spec): say so, rather than only what the model format misses. A JSON file beyond the
    size limit is not read (it was refused for its size)."""
    import re
    name = os.fspath(path)
    why = None
    if re.search(r"\.(h5|hdf5|zarr):", name.lower()) or name.lower().rstrip("/").endswith(_DATA_EXT):
        why = "its name is that of data"
    elif kind == "hdf5":
        try:
            import h5py
            with h5py.File(name, "r") as f:
                why = None if "format" in f.attrs else "an HDF5 file without the model format's 'format' attribute"
        except Exception:  # noqa: BLE001  (damaged: the message above says so)
            pass
    elif kind == "json":
        try:
            import json
            if os.path.getsize(name) > limits.max_json_bytes:
                return ""
            with open(name, "rb") as f:
                top = json.loads(f.read())
            why = None if not isinstance(top, dict) or "format" in top else \
                "a JSON file without the model format's 'format' member"
        except Exception:  # noqa: BLE001
            pass
    return "" if why is None else f" (not an spnc model: {why}; a data file given as the model?)"


def write_tree(tree: Group, path: str | os.PathLike, *, fmt: str | None = None) -> None:
    """Write a validated tree as HDF5 or JSON (atomically)."""
    kind = format_of(path, fmt)
    if kind == "hdf5":
        _h5.write_tree(tree, path)
    elif kind == "json":
        _js.write_tree(tree, path)
    else:
        raise FormatError("write DOT with spnc.io.to_dot / render")


def save(model: Any, path: str | os.PathLike, *, fmt: str | None = None,
         provenance: dict[str, str] | None = None) -> None:
    """Save a compiled SPN to ``path`` (.h5/.hdf5 or .json; .dot writes a drawing).

    The file is written to a temporary name in the same directory, flushed to disk and
    renamed over ``path``, so an existing file survives any failure. ``provenance`` adds
    root attributes such as ``{"source_format": "spflow-text"}``."""
    from ..graph import SPN
    path = _text_path(path)
    if not isinstance(model, SPN):
        hint = " (a fitted estimator's model is its spn_)" if hasattr(model, "spn_") else \
            " (compile Node objects with spnc.compile first)"
        raise TypeError(f"spnc.save needs a compiled spnc.SPN, got {type(model).__name__}{hint}")
    kind = format_of(path, fmt)
    if kind == "dot":
        text = to_dot(model).encode("utf-8")

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:
                f.write(text)
        _h5.atomic_write(path, write)
        return
    tree = tree_from_model(model, provenance=provenance)
    v = validate_tree(tree)   # never write a file we would refuse to read
    write_tree(v.tree, path, fmt=kind)


def load(path: str | os.PathLike, *, fmt: str | None = None,
         limits: Limits = DEFAULT_LIMITS) -> Any:
    """Load a model saved by :func:`save` (or any conforming file) as a :class:`spnc.SPN`.
    Refuses a file whose content hash does not match (formats/spnc-hdf5.md §11). Warns when
    the file holds what the model cannot carry (extensions, vendor leaf types replaced by
    their fallbacks), as a later :func:`save` drops it."""
    path = _text_path(path)
    v = read_validated(path, fmt=fmt, limits=limits)
    try:
        model = model_from_validated(v)
    except FormatError as e:
        raise FormatError(f"{os.fspath(path)}: {e}") from None
    warn_dropped(path, v, "spnc.save")
    return model


def warn_dropped(path: str | os.PathLike, v: Validated, saver: str) -> None:
    """Warn that a model read from ``v`` leaves out what ``saver`` will not write back."""
    lost = dropped_on_load(v)
    if lost:
        shown = ", ".join(lost[:8]) + (f" and {len(lost) - 8} more" if len(lost) > 8 else "")
        warn_user(f"{os.fspath(path)}: the loaded model leaves out {shown}; {saver} will not "
                  "write them back (spnc-convert keeps them)")
