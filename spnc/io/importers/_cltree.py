"""Binary Chow-Liu trees as DeeProb-kit and SPFlow store them: a parent list and 2 x 2
blocks of log-probabilities per variable, read into spnc's ``{"parents", "cpts"}``."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import FormatError
from ._common import integer, reals


def binary_tree_leaf(tree: Any, factors: Any, n: int, names: tuple[str, str],
                     factor_by_parent: bool) -> dict:
    """A binary Chow-Liu leaf's ``{"parents", "cpts"}`` from a parent list (scope positions,
    -1 for the one root) and ``n`` 2 x 2 blocks of log-probabilities. With
    ``factor_by_parent`` block ``[i][l][k]`` is ``log P(x_i = k | parent = l)``, else
    ``[i][k][l]``. The root's block holds its prior in both parent rows (the libraries look
    it up with the last scope variable as "parent"): different rows are refused."""
    tname, fname = names
    if not isinstance(tree, list) or len(tree) != n:
        raise FormatError(f"{tname} must list one parent per scope variable ({n})")
    par = [integer(t, f"{tname}[{i}]", -1, n - 1) for i, t in enumerate(tree)]
    if par.count(-1) != 1:
        raise FormatError(f"{tname} must have exactly one root (-1), found {par.count(-1)}")
    for i in range(n):          # every variable must reach the root without a cycle
        j, steps = i, 0
        while par[j] != -1:
            j, steps = par[j], steps + 1
            if steps > n:
                raise FormatError(f"{tname} has a cycle through position {i}")
    if not isinstance(factors, list) or len(factors) != n:
        raise FormatError(f"{fname} must have shape ({n}, 2, 2)")
    cpts = []
    for i, blk in enumerate(factors):
        if not isinstance(blk, list) or len(blk) != 2:
            raise FormatError(f"{fname}[{i}] must be 2 x 2")
        rows = [reals(r, f"{fname}[{i}][{k}]", 2) for k, r in enumerate(blk)]
        if any(len(r) != 2 for r in rows):
            raise FormatError(f"{fname}[{i}] must be 2 x 2")
        with np.errstate(over="ignore"):
            c = np.exp(np.array(rows))
        if not factor_by_parent:
            c = c.T                                   # rows: parent state, columns: x_i
        if not np.all(np.isfinite(c)):
            raise FormatError(f"{fname}[{i}] holds log-probabilities too large to be probabilities")
        if par[i] == -1 and not np.array_equal(c[0], c[1]):
            raise FormatError(f"{fname}[{i}] is the root's block, whose prior must be the same for "
                              f"both parent states; got {c[0].tolist()} and {c[1].tolist()}")
        cpts.append(c[:1] if par[i] == -1 else c)
    return {"parents": par, "cpts": cpts}
