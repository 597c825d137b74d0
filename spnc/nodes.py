"""Construction objects: a person types ``Sum([Product([...]), ...], weights=[...])`` and
:func:`spnc.compile` turns the graph into a compiled :class:`spnc.SPN`. The same object may
appear under several parents; it is compiled once (DAG sharing)."""
from __future__ import annotations

from typing import Sequence

import numpy as np


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
        self.weights = np.asarray(weights, dtype=np.float64).copy()

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
