"""spnc's declaration of the variables, kept in foreign JSON files where the format has room
for it.

The foreign formats name variables by index only, so a file says nothing about variables
no leaf uses, about names, or whether a 2-state variable is binary or categorical. spnc
writes ``{"cardinality": [...], "type": [...], "names": [...]}`` under the key
``spnc_variables`` where the other library ignores it (DeeProb-kit: the NetworkX
``graph`` attributes; sparc-pc: the top-level object; SPFlow JSON: the root node's
attributes) and reads it back; ``names`` is left out for unnamed models. SPFlow's text has
no such room.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import FormatError
from ...graph import SPN
from ._common import MAX_VAR, integer, mapping

KEY = "spnc_variables"


@dataclass(frozen=True)
class Declared:
    cardinality: np.ndarray
    var_type: np.ndarray
    names: list[str] | None


def block(spn: SPN) -> dict:
    """The declaration of ``spn``'s variables, as JSON values."""
    out: dict[str, Any] = {"cardinality": [int(c) for c in spn.cardinality],
                           "type": [int(t) for t in spn.var_type]}
    if spn.var_names is not None:
        out["names"] = list(spn.var_names)
    return out


def read(value: Any, where: str) -> Declared | None:
    """The declaration in a file (None when the file has none), checked for shape; the
    builder checks it against the leaves."""
    if value is None:
        return None
    what = f"{where}: {KEY}"
    d = mapping(value, what)
    extra = sorted(set(d) - {"cardinality", "type", "names"})
    if extra or "cardinality" not in d or "type" not in d:
        raise FormatError(f"{what} must hold 'cardinality', 'type' and optionally 'names', got {sorted(d)[:6]}")
    card, vtype = d["cardinality"], d["type"]
    if not isinstance(card, list) or not isinstance(vtype, list) or len(card) != len(vtype) \
            or len(card) > MAX_VAR + 1:
        raise FormatError(f"{what}: 'cardinality' and 'type' must be lists of one entry per variable "
                          f"(at most {MAX_VAR + 1})")
    c = np.array([integer(x, f"{what}: cardinality[{i}]", 0, 2**31 - 1) for i, x in enumerate(card)], np.int64)
    t = np.array([integer(x, f"{what}: type[{i}]", 0, 2) for i, x in enumerate(vtype)], np.uint8)
    names = d.get("names")
    if names is not None:
        if not isinstance(names, list) or len(names) != len(card) or not all(isinstance(n, str) for n in names):
            raise FormatError(f"{what}: 'names' must be a list of {len(card)} strings")
    return Declared(c, t, names)


def settle(declared: Declared | None, need: np.ndarray, used: np.ndarray, names: list[str] | None,
           where: str) -> tuple[np.ndarray, np.ndarray | None, list[str] | None]:
    """Cardinalities, types (None: from the cardinalities) and names of a model read from a
    file. ``need``: the states the leaves need (0: real); ``used``: the variables some leaf
    has; ``names``: those the format itself gave. With spnc's declaration, the declared
    variables once every leaf is checked to fit them. Without it, a variable below the
    largest one used but in no leaf is kept as a real-valued column the model ignores (any
    value accepted), with a warning: the file does not say what it holds."""
    if declared is None:
        if not used.all():
            gaps = np.flatnonzero(~used)
            warnings.warn(f"{where}: variable{'s' if gaps.size > 1 else ''} {', '.join(map(str, gaps[:10]))}"
                          f"{' ...' if gaps.size > 10 else ''} in no leaf: kept as real-valued (any value "
                          "accepted, ignored by the model), as the file does not say what it holds",
                          UserWarning, stacklevel=5)
        return need, None, names
    card = declared.cardinality
    if len(need) > len(card):
        raise FormatError(f"{where}: {KEY} declares {len(card)} variables but a leaf uses variable {len(need) - 1}")
    for v in np.flatnonzero(used):
        if (need[v] == 0) != (card[v] == 0):
            kind = "real-valued" if need[v] == 0 else "discrete"
            raise FormatError(f"{where}: {KEY}: variable {v} has cardinality {card[v]} but {kind} leaves")
        if card[v] < need[v]:
            raise FormatError(f"{where}: {KEY}: variable {v} has cardinality {card[v]} but a leaf "
                              f"needs {need[v]} states")
    return card, declared.var_type, declared.names
