"""Compilation: construction objects (:mod:`spnc.nodes`) to an :class:`spnc.SPN`, and back."""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

from . import _budget
from ._kinds import PRODUCT, SUM, WEIGHT_TOL, is_internal
from .errors import StructureError
from .graph import SPN
from .nodes import Leaf, Node, Product, Sum


def compile(root: Node | Sequence[Node], n_vars: int | None = None, cardinality=None,
            var_names: Sequence[str] | None = None, *, normalize: bool = False,
            root_weights=None, combine: str | None = None, var_type=None) -> SPN:
    """Compile construction objects into an :class:`SPN`.

    Walks the graph once (no recursion), keeping shared objects shared. Sum weights must
    be non-negative and add up to 1 within ``WEIGHT_TOL`` (``normalize=True`` rescales any
    positive total instead).
    Variable cardinalities are inferred from the discrete leaves unless given
    (``cardinality[v] == 0`` marks a real variable). ``var_type`` (per variable 0 binary,
    1 categorical, 2 real, as :attr:`SPN.var_type`) tells a 2-state categorical variable
    from a binary one; by default it follows the cardinality. Several roots make an ensemble:
    ``combine='mixture'`` with ``root_weights`` (the default when they are given), or
    ``'independent'`` (the default without them: queries give one column per root).

    Variables that no leaf uses (below the largest one used, or up to ``n_vars`` or the
    length of ``cardinality``) are allowed. The model has no distribution over such a
    variable: it is real-valued unless ``cardinality`` says otherwise, its values are
    checked and then ignored by every query, and ``mpe`` and ``sample`` leave it missing
    (NaN). When ``n_vars`` is given, a ``UserWarning`` names them, as this is more often
    a mistake than meant.
    """
    roots = list(root) if isinstance(root, (list, tuple)) else [root]
    if not roots:
        raise StructureError("nothing to compile: no root")
    index: dict[int, int] = {}
    order: list[Node] = []
    state: dict[int, int] = {}  # 1 = on the stack, 2 = done
    for r in roots:
        if not isinstance(r, Node):
            raise StructureError(f"root must be a spnc node (Sum, Product or a leaf), got {type(r).__name__}")
        stack = [(r, False)]
        while stack:
            obj, expanded = stack.pop()
            key = id(obj)
            if expanded:
                state[key] = 2
                index[key] = len(order)
                order.append(obj)
                continue
            st = state.get(key)
            if st == 2:
                continue
            if st == 1:
                raise StructureError(f"cycle: {obj!r} is its own descendant")
            if not isinstance(obj, Node):
                raise StructureError(f"child must be a spnc node, got {type(obj).__name__}: {obj!r}")
            state[key] = 1
            stack.append((obj, True))
            if isinstance(obj, (Sum, Product)):
                if not obj.children:
                    raise StructureError(f"{obj!r} (node {len(order)}) has no children")
                for c in reversed(obj.children):
                    if state.get(id(c)) == 1:
                        raise StructureError(f"cycle: {c!r} is its own descendant")
                    if state.get(id(c)) != 2:
                        stack.append((c, False))
            elif not isinstance(obj, Leaf):
                raise StructureError(f"unknown node class {type(obj).__name__}")
    N = len(order)
    kind = np.empty(N, dtype=np.uint8)
    deg = np.zeros(N, dtype=np.int64)
    by_type: dict[type, list[int]] = {}
    for i, obj in enumerate(order):
        if isinstance(obj, Sum):
            kind[i] = SUM
            deg[i] = len(obj.children)
            if len(obj.weights) != len(obj.children):
                raise StructureError(f"node {i}: {len(obj.weights)} weights for {len(obj.children)} children")
        elif isinstance(obj, Product):
            kind[i] = PRODUCT
            deg[i] = len(obj.children)
        else:
            lt = type(obj)._leaf_type
            if lt is None:
                raise StructureError(f"node {i}: leaf class {type(obj).__name__} is not registered")
            kind[i] = lt.code
            by_type.setdefault(lt, []).append(i)
    ptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(deg, out=ptr[1:])
    child = np.empty(ptr[-1], dtype=np.int64)
    weight = np.ones(ptr[-1], dtype=np.float64)
    for i in np.flatnonzero(is_internal(kind)):
        obj = order[i]
        a, b = ptr[i], ptr[i + 1]
        child[a:b] = [index[id(c)] for c in obj.children]
        if kind[i] == SUM:
            w = np.asarray(obj.weights, dtype=np.float64)
            if np.any(~np.isfinite(w)) or np.any(w < 0):
                raise StructureError(f"node {i}: sum weights must be finite and non-negative, got {w}")
            tot = w.sum()
            if tot <= 0:
                raise StructureError(f"node {i}: sum weights add up to {tot}, cannot normalise")
            if not normalize and abs(tot - 1.0) > WEIGHT_TOL:
                raise StructureError(f"node {i}: sum weights {w.tolist()} add up to {float(tot):.6g}, not 1 "
                                     "(rescale them, or compile(..., normalize=True))")
            # weights within the tolerance are used as given (as the format reads them);
            # normalize=True rescales them (exactly-normalised input stays bit for bit)
            weight[a:b] = w / tot if normalize and abs(tot - 1.0) > 1e-12 else w
    tables = {lt.name: lt.from_nodes(np.asarray(ids, dtype=np.int64), [order[j] for j in ids])
              for lt, ids in by_type.items()}
    all_vars = [int(v) for ids in by_type.values() for j in ids for v in order[j].scope]
    told = n_vars is not None        # a cardinality declares its variables on purpose
    if n_vars is None:
        n_vars = (max(all_vars) + 1) if all_vars else 0
        if cardinality is not None:
            n_vars = len(cardinality)
    _budget.check_n_vars(int(n_vars))
    unused = np.setdiff1d(np.arange(int(n_vars)), np.asarray(all_vars, dtype=np.int64))
    if told and unused.size:
        shown = ", ".join(map(str, unused[:8].tolist())) + (", ..." if unused.size > 8 else "")
        warnings.warn(f"compile: {unused.size} of the {int(n_vars)} variables ({shown}) are in no leaf: the model "
                      "has no distribution over them (queries ignore their values; mpe and sample leave them "
                      "NaN)", UserWarning, stacklevel=2)
    if cardinality is None:
        card = np.full(n_vars, -1, dtype=np.int64)
        for ids in by_type.values():
            for j in ids:
                for v, k in order[j].cardinality_hint().items():
                    if not 0 <= v < n_vars:
                        raise StructureError(f"node {j}: variable {v} is outside 0..{n_vars - 1}")
                    if card[v] != -1 and (card[v] == 0) != (k == 0):
                        raise StructureError(f"variable {v} has both discrete and real-valued leaves")
                    card[v] = max(card[v], k)
        card[card == -1] = 0
        cardinality = card
    roots_idx = [index[id(r)] for r in roots]
    if combine is None:
        combine = "single" if len(roots) == 1 else ("mixture" if root_weights is not None else "independent")
    if root_weights is not None:
        rw = np.asarray(root_weights, dtype=np.float64)
        if rw.shape != (len(roots),) or np.any(~np.isfinite(rw)) or np.any(rw < 0) or rw.sum() <= 0:
            raise StructureError("root_weights must be one finite non-negative weight per root, with a positive total")
        if not normalize and abs(rw.sum() - 1.0) > WEIGHT_TOL:
            raise StructureError(f"root_weights add up to {rw.sum()!r}, not 1 (or pass normalize=True)")
        root_weights = rw / rw.sum() if normalize and abs(rw.sum() - 1.0) > 1e-12 else rw
    return SPN.from_arrays(kind, ptr, child, weight, tables, cardinality, var_type=var_type, var_names=var_names,
                           roots=roots_idx, root_weights=root_weights, combine=combine)


def to_nodes(spn: SPN) -> Node | list[Node]:
    """Construction objects equal to ``spn`` (shared nodes stay shared): the root, or a
    list of roots for multi-root models."""
    objs: list[Node | None] = [None] * spn.n_nodes
    for table in spn.leaf_tables.values():
        for i, n in enumerate(table.node):
            objs[n] = table.to_node(i)
    for n in np.flatnonzero(is_internal(spn.kind)):
        ch = [objs[c] for c in spn.children(n)]
        if spn.kind[n] == SUM:
            objs[n] = Sum(ch, spn.weight[spn.child_ptr[n]:spn.child_ptr[n + 1]])
        else:
            objs[n] = Product(ch)
    if spn.combine == "single":
        return objs[spn.root]
    return [objs[r] for r in spn.roots]
