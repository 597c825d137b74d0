"""Construction objects of the univariate leaves (their tables are in
:mod:`spnc.leaves.univariate`)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import StructureError
from ..nodes import Leaf, real_array, real_number

# ---------------------------------------------------------------- construction objects


class _Univariate(Leaf):
    __slots__ = ("var",)

    def __init__(self, var: int):
        if isinstance(var, (bool, np.bool_)) or not isinstance(var, (int, np.integer)) or var < 0:
            raise StructureError(f"{type(self).__name__}: variable index must be a non-negative integer, got {var!r}")
        self.var = int(var)

    @property
    def scope(self) -> tuple[int, ...]:
        return (self.var,)


class Bernoulli(_Univariate):
    """P(X_var = 1) = p."""

    __slots__ = ("p",)

    def __init__(self, var: int, p: float):
        super().__init__(var)
        self.p = real_number(p, "Bernoulli: p")

    def cardinality_hint(self) -> dict[int, int]:
        return {self.var: 2}

    def __repr__(self) -> str:
        return f"Bernoulli({self.var}, p={self.p!r})"


class Categorical(_Univariate):
    """P(X_var = s) = probs[s], s = 0..k-1."""

    __slots__ = ("probs",)

    def __init__(self, var: int, probs: Sequence[float]):
        super().__init__(var)
        self.probs = real_array(probs, "Categorical: probs").ravel()

    def cardinality_hint(self) -> dict[int, int]:
        return {self.var: len(self.probs)}

    def __repr__(self) -> str:
        return f"Categorical({self.var}, probs={self.probs.tolist()!r})"


class Gaussian(_Univariate):
    """Normal density N(mean, std^2) on a real variable."""

    __slots__ = ("mean", "std")

    def __init__(self, var: int, mean: float, std: float):
        super().__init__(var)
        self.mean = real_number(mean, "Gaussian: mean")
        self.std = real_number(std, "Gaussian: std")

    def cardinality_hint(self) -> dict[int, int]:
        return {self.var: 0}

    def __repr__(self) -> str:
        return f"Gaussian({self.var}, mean={self.mean!r}, std={self.std!r})"


class Indicator(_Univariate):
    """[X_var == value] on a discrete variable."""

    __slots__ = ("value",)

    def __init__(self, var: int, value: int):
        super().__init__(var)
        if not real_number(value, "Indicator: value").is_integer() or value < 0:
            raise StructureError(f"Indicator: value must be a non-negative integer, got {value!r}")
        self.value = int(value)

    def cardinality_hint(self) -> dict[int, int]:
        return {self.var: max(2, self.value + 1)}

    def __repr__(self) -> str:
        return f"Indicator({self.var}, value={self.value})"
