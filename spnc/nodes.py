"""Construction objects: a person types ``Sum([Product([...]), ...], weights=[...])`` and
:func:`spnc.compile` turns the graph into a compiled :class:`spnc.SPN`. The same object may
appear under several parents; it is compiled once (DAG sharing)."""
from __future__ import annotations

import numbers
from typing import Any, Sequence

import numpy as np

from .errors import StructureError


def real_number(value: Any, what: str) -> float:
    """``value`` as one real number; text (which numpy would parse), booleans and arrays of
    several values are refused with a :class:`StructureError` naming ``what``."""
    v = value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise StructureError(f"{what} must be a real number, got {_shown(value)}")
    return float(v)


def real_array(value: Any, what: str) -> np.ndarray:
    """``value`` (a sequence or array of real numbers) as a new float64 array; text, booleans,
    objects and ragged lists are refused with a :class:`StructureError` naming ``what``."""
    try:
        a = np.asarray(value)
    except ValueError:                  # ragged nesting
        a = None
    if a is None or a.dtype.kind not in "iuf":
        raise StructureError(f"{what} must be real numbers, got {_shown(value)}")
    return a.astype(np.float64)


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}" + ("..." if len(text) > 60 else "")


class Node:
    """Base class of construction objects."""

    __slots__ = ("__weakref__",)


class Sum(Node):
    """Weighted mixture of children over the same scope."""

    __slots__ = ("children", "weights")

    def __init__(self, children: Sequence[Node], weights: Sequence[float] | None = None):
        self.children = list(children)
        if weights is None:
            weights = np.full(len(self.children), 1.0 / max(len(self.children), 1))
        self.weights = real_array(weights, "Sum: weights")

    def __repr__(self) -> str:
        return f"Sum({len(self.children)} children)"


class Product(Node):
    """Factorisation over children with disjoint scopes."""

    __slots__ = ("children",)

    def __init__(self, children: Sequence[Node]):
        self.children = list(children)

    def __repr__(self) -> str:
        return f"Product({len(self.children)} children)"


class Leaf(Node):
    """Base class of leaf construction objects; each leaf module defines one subclass and
    registers its table type, which sets ``_leaf_type``."""

    __slots__ = ()
    _leaf_type = None  # set by spnc.leaves.base.register_leaf

    @property
    def scope(self) -> tuple[int, ...]:
        raise NotImplementedError

    def cardinality_hint(self) -> dict[int, int]:
        """Number of states each scope variable needs (0 for a real variable)."""
        raise NotImplementedError
