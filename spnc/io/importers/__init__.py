"""Model files of other SPN libraries, read and written by spnc itself (the other library
is never imported).

=================  ==========================================  ===========================
format             files                                       library
=================  ==========================================  ===========================
``spflow-text``    ``*.spflow``, ``*.spflow.txt``              SPFlow 0.0.x equation text
``spflow-json``    ``*.spflow.json``                           SPFlow 0.0.x ``to_JSON``
``deeprob-json``   ``*.deeprob.json``                          DeeProb-kit ``save_spn_json``
``sparc-json``     ``*.sparc.json``, ``*.gcw.json``            sparc-pc ``gcw-circuit-v1``
=================  ==========================================  ===========================

>>> import os, tempfile, numpy as np, spnc
>>> from spnc.io import importers
>>> model = spnc.compile(spnc.Sum([spnc.Bernoulli(0, .2), spnc.Bernoulli(0, .7)], [.4, .6]))
>>> tmp = tempfile.TemporaryDirectory(); d = tmp.name
>>> importers.save(model, os.path.join(d, "model.deeprob.json"))       # format from the extension
>>> importers.save(model, os.path.join(d, "model.txt"), fmt="spflow-text")   # or named
>>> spn = importers.load(os.path.join(d, "model.deeprob.json"))
>>> bool(np.allclose(spn.log_likelihood([[0], [1]]), model.log_likelihood([[0], [1]])))
True
>>> tmp.cleanup()

The JSON formats keep spnc's variable names, types and count (:mod:`._variables`);
SPFlow's text cannot, and :func:`save` warns naming what is lost.
Every problem with a file is a :class:`spnc.FormatError` naming the node and its type.
A new format registers a :class:`Format` with :func:`register`.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..._kinds import VAR_CATEGORICAL
from ...errors import FormatError
from ...graph import SPN
from ._common import read_bytes
from . import deeprob as _deeprob, sparc as _sparc, spflow_json as _spj, spflow_text as _spt


@dataclass(frozen=True)
class Format:
    """A foreign model format: its name, file suffixes and text reader/writer."""
    name: str
    suffixes: tuple[str, ...]
    loads: Callable[[bytes | str, str], SPN]
    dumps: Callable[[SPN], str]
    library: str
    #: whether files keep spnc's declaration of the variables (names, types, count)
    keeps_variables: bool = False


_FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    if fmt.name in _FORMATS:
        raise ValueError(f"format {fmt.name!r} is already registered")
    _FORMATS[fmt.name] = fmt
    return fmt


for _f in (
    Format(_spt.TEXT, (".spflow", ".spflow.txt"), _spt.loads_text, _spt.dumps_text,
           "SPFlow 0.0.x (spn.io.Text.spn_to_str_equation / str_to_spn)"),
    Format(_spj.JSON, (".spflow.json",), _spj.loads_json, _spj.dumps_json,
           "SPFlow 0.0.x (spn.io.Text.to_JSON; SPFlow cannot read it back)", True),
    Format(_deeprob.NAME, (".deeprob.json",), _deeprob.loads, _deeprob.dumps,
           "DeeProb-kit (deeprob.spn.structure.io.save_spn_json / load_spn_json)", True),
    Format(_sparc.NAME, (".sparc.json", ".gcw.json"), _sparc.loads, _sparc.dumps,
           "sparc-pc (sparc.io.serializer.CircuitSerializer, gcw-circuit-v1)", True),
):
    register(_f)


def formats() -> dict[str, Format]:
    """The registered foreign formats by name."""
    return dict(_FORMATS)


def format_for(path: str | os.PathLike, fmt: str | None = None) -> Format | None:
    """The foreign format named ``fmt``, or the one whose suffix ``path`` ends with
    (longest suffix wins); None if neither names a foreign format."""
    if fmt is not None:
        if fmt not in _FORMATS:
            raise FormatError(f"unknown format {fmt!r}; foreign formats: {', '.join(sorted(_FORMATS))}")
        return _FORMATS[fmt]
    name = os.path.basename(os.fspath(path)).lower()
    best = None
    for f in _FORMATS.values():
        for s in f.suffixes:
            if name.endswith(s) and (best is None or len(s) > len(best[0])):
                best = (s, f)
    return None if best is None else best[1]


def load(path: str | os.PathLike, fmt: str | None = None) -> SPN:
    """Read a foreign model file into a :class:`spnc.SPN`."""
    f = format_for(path, fmt)
    if f is None:
        raise FormatError(f"{os.fspath(path)}: not a foreign model file; name the format "
                          f"({', '.join(sorted(_FORMATS))})")
    return f.loads(read_bytes(path), f"{os.fspath(path)} ({f.name})")


def save(spn: SPN, path: str | os.PathLike, fmt: str | None = None) -> None:
    """Write ``spn`` in a foreign format (atomically: temporary file, then rename)."""
    from ..hdf5 import atomic_write
    f = format_for(path, fmt)
    if f is None:
        raise FormatError(f"{os.fspath(path)}: not a foreign format; name it "
                          f"({', '.join(sorted(_FORMATS))})")
    data = f.dumps(spn).encode("utf-8")
    if not f.keeps_variables:
        lost = _lost_variables(spn)
        if lost:
            warnings.warn(f"{os.fspath(path)}: {f.name} files cannot keep {'; '.join(lost)}",
                          UserWarning, stacklevel=2)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)
    atomic_write(path, write)


def _lost_variables(spn: SPN) -> list[str]:
    """What a file that names variables only by index in leaves loses of ``spn``'s."""
    used = np.zeros(spn.n_vars, dtype=bool)
    used[np.unique(spn.scope)] = True
    out = []
    if spn.var_names is not None:
        out.append("variable names (variables are written V0, V1, ...)")
    top = int(np.flatnonzero(used)[-1]) + 1 if used.any() else 0
    if top < spn.n_vars:
        out.append(f"the variable count: variables {top}..{spn.n_vars - 1} are in no leaf, so a "
                   f"reader sees {top} variables")
    gaps = np.flatnonzero(~used[:top] & (spn.cardinality[:top] != 0))
    if gaps.size:
        out.append(f"the type of discrete variables in no leaf ({', '.join(map(str, gaps[:10]))}): read back "
                   "as real-valued")
    cat2 = np.flatnonzero(used & (spn.var_type == VAR_CATEGORICAL) & (spn.cardinality == 2))
    if cat2.size:
        out.append(f"2-state categorical variables ({', '.join(map(str, cat2[:10]))}): read back as binary")
    return out


NATIVE = ("hdf5", "json")


def read_validated_any(path: str | os.PathLike, fmt: str | None = None):
    """A validated spnc file tree from a native file, or from a foreign one (converted,
    with ``source_format`` recorded). Used by ``spnc-convert``."""
    from .. import read_validated, tree_from_model, validate_tree
    if os.fspath(path) == "-":      # the tools' name for standard input, which holds data only
        raise FormatError("-: a model is read from its file, not from standard input; give the model's path")
    f = None if fmt in NATIVE else format_for(path, fmt)
    if f is None:
        return read_validated(path, fmt=fmt)
    return validate_tree(tree_from_model(load(path, f.name), provenance={"source_format": f.name}))


def write_tree_any(v, path: str | os.PathLike, fmt: str | None = None) -> None:
    """Write a validated tree natively, or convert it to a foreign format."""
    from .. import write_tree
    from .._model import model_from_validated
    f = None if fmt in NATIVE else format_for(path, fmt)
    if f is None:
        write_tree(v.tree, path, fmt=fmt)
    else:
        save(model_from_validated(v), path, f.name)


def load_any(path: str | os.PathLike, fmt: str | None = None, saver: str | None = None) -> SPN:
    """A model from any file spnc reads: .h5/.hdf5/.json or a foreign format. With ``saver``
    (what will write the model out), warn as :func:`spnc.load` does about what the model
    leaves out of a native file."""
    from .. import warn_dropped
    from .._model import model_from_validated
    v = read_validated_any(path, fmt)
    model = model_from_validated(v)
    if saver is not None:
        warn_dropped(path, v, saver)
    return model


def check_save_format(path: str | os.PathLike, fmt: str | None = None) -> None:
    """Raise :class:`FormatError` now if :func:`save_any` could not write ``path`` (unknown
    format or extension), before any work is done."""
    from .. import format_of
    if (None if fmt in NATIVE else format_for(path, fmt)) is None:
        format_of(path, fmt)


def save_any(spn: SPN, path: str | os.PathLike, fmt: str | None = None) -> None:
    """Save natively (.h5/.hdf5/.json) or in a foreign format, by extension or ``fmt``."""
    from .. import save as native_save
    f = None if fmt in NATIVE else format_for(path, fmt)
    if f is None:
        native_save(spn, path, fmt=fmt)
    else:
        save(spn, path, f.name)


__all__ = ["Format", "register", "formats", "format_for", "load", "save", "load_any", "save_any", "check_save_format",
           "read_validated_any", "write_tree_any"]
