"""The one vocabulary of node kinds, query modes, variable types and tolerances.

Python mirror of ``spnc/_kinds.pxd`` (kept equal by ``tests/test_core_validation.py``)."""
from __future__ import annotations

import numpy as np

#: node kinds (``SPN.kind``); every code >= LEAF names a registered leaf type
SUM, PRODUCT, LEAF = 0, 1, 2
#: query modes: sum-product (marginals) and max-product (MPE)
MARGINAL, MAX = 0, 1
#: variable types (``SPN.var_type``)
VAR_BINARY, VAR_CATEGORICAL, VAR_REAL = 0, 1, 2
#: how several roots combine (``SPN.combine``)
COMBINE = ("single", "mixture", "independent")
#: sum weights must add up to 1 within this tolerance
WEIGHT_TOL = 1e-6
#: the largest |x| of a real value whose square Gaussian statistics can hold with room to
#: add many (training data of Gaussian leaves is bounded by it)
MAX_REAL = 1e150


def is_leaf(kind: np.ndarray | int) -> np.ndarray | bool:
    """True where ``kind`` is a leaf code."""
    return np.asarray(kind) >= LEAF


def is_internal(kind: np.ndarray | int) -> np.ndarray | bool:
    """True where ``kind`` is a sum or a product."""
    return np.asarray(kind) < LEAF
