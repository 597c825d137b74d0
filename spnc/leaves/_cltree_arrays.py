"""Array helpers of the Chow-Liu leaf table (:mod:`spnc.leaves.cltree`): breadth-first
orders and per-leaf prefix sums over all trees at once, the per-leaf tree checks that name
a fault, and the cardinality search for tables that were never validated."""
from __future__ import annotations

import numpy as np

from ..errors import StructureError
from ._cltree_order import bfs_order as _bfs
from .base import LeafType, _err

#: CPT rows must sum to 1 within this tolerance
ROW_TOL = 1e-6


def _exclusive_within(x: np.ndarray, ptr: np.ndarray, leaf: np.ndarray) -> np.ndarray:
    """Exclusive prefix sums of ``x`` restarting at every leaf (entries ``ptr[i]:ptr[i+1]``)."""
    c = np.cumsum(x) - x
    return c - c[ptr[leaf]] if len(x) else c


def _bfs_order(fpar: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """Flat variables of every tree parents-first, breadth-first from each root with
    children in scope order (``fpar``: flat parent, -1 at a root; ``ptr``: each leaf's
    first flat variable). Raises on a cycle."""
    out = np.empty(len(fpar), dtype=np.int32)
    bad = _bfs(np.ascontiguousarray(fpar, dtype=np.int32), np.ascontiguousarray(ptr, dtype=np.int64), out)
    if bad >= 0:
        raise StructureError(f"Chow-Liu leaf {bad} of its table: its parent array has a cycle")
    return out


def _topological(p: np.ndarray) -> np.ndarray:
    """Local indices reached from the root, parents first (validation: a cycle leaves some
    out)."""
    children: list[list[int]] = [[] for _ in range(len(p))]
    for j, q in enumerate(p):
        if q >= 0:
            children[int(q)].append(j)
    out = [int(j) for j in np.flatnonzero(p < 0)[:1]]
    k = 0
    while k < len(out):
        out.extend(children[out[k]])
        k += 1
    return np.asarray(out, dtype=np.int32)


def _solve_cards(p: np.ndarray, cpt: np.ndarray, budget: int = 20000) -> np.ndarray | None:
    """Cardinalities consistent with the CPT block sizes and normalised rows, found by a
    bounded depth-first search in scope order. Used only for tables that were never
    validated (validate() records the true cardinalities); None when the search is
    ambiguous-expensive or fails."""
    n, S = len(p), len(cpt)
    if n > 400:
        return None
    csum = np.concatenate([[0.0], np.cumsum(cpt)])
    card = np.zeros(n, dtype=np.int64)
    steps = [0]

    def rows_ok(o: int, rows: int, k: int) -> bool:
        if o + rows * k > S:
            return False
        ends = o + k * np.arange(rows + 1)
        return bool(np.all(np.abs(np.diff(csum[ends]) - 1.0) <= ROW_TOL))

    def row_lengths(o: int) -> list[int]:
        # prefix sums only grow: row lengths whose sum is 1 form one index range
        lo = np.searchsorted(csum, csum[o] + 1.0 - ROW_TOL, side="left")
        hi = np.searchsorted(csum, csum[o] + 1.0 + ROW_TOL, side="right")
        return [int(e - o) for e in range(max(lo, o + 2), hi)]

    def go(j: int, o: int) -> bool:
        steps[0] += 1
        if steps[0] > budget:
            return False
        if j == n:
            return o == S
        for k in ([int(card[j])] if card[j] else row_lengths(o)):
            q = p[j]
            if q < 0 or card[q]:
                rs = [1 if q < 0 else int(card[q])]
            else:  # parent's cardinality not known yet: try row counts 2, 3, ...
                rs = []
                r = 1
                while o + (r + 1) * k <= S and abs(csum[o + (r + 1) * k] - csum[o + r * k] - 1.0) <= ROW_TOL:
                    r += 1
                    rs.append(r)
                    if len(rs) > 64:
                        break
            for r in rs:
                if not rows_ok(o, r, k):
                    continue
                saved = card.copy()
                card[j] = k
                if q >= 0 and not card[q]:
                    card[q] = r
                if go(j + 1, o + r * k):
                    return True
                card[:] = saved
                if steps[0] > budget:
                    return False
        return False

    return card if go(0, 0) else None


def _binary_if_consistent(p: np.ndarray, size: int) -> np.ndarray | None:
    n = len(p)
    return np.full(n, 2, dtype=np.int64) if size == 2 + 4 * (n - 1) else None


def _check_tree(table: LeafType, i: int, p: np.ndarray) -> None:
    n = len(p)
    bad = np.flatnonzero((p < -1) | (p >= n))
    if bad.size:
        raise _err(table, i, f"parent[{bad[0]}] = {p[bad[0]]} is outside -1..{n - 1}")
    roots = np.flatnonzero(p == -1)
    if roots.size != 1:
        raise _err(table, i, f"a tree needs exactly one root (parent -1), found {roots.size}")
    reached = _topological(p)
    if len(reached) != n:
        lost = sorted(set(range(n)) - set(reached.tolist()))
        raise _err(table, i, f"parent array has a cycle through local variable {lost[0]} (not a tree)")
