"""Binary columns next to real ones: LearnSPN learns the structure on real values, then
each Gaussian leaf of a binary column becomes a Bernoulli leaf.

The Gaussian leaf's mean over the rows that reached it is the fraction of ones there, i.e.
the Bernoulli maximum-likelihood estimate. It is clipped to [1/(n+2), 1 - 1/(n+2)] for n
training rows so that no state gets probability 0 (the leaf's own row count is not in the
model, so a leaf that saw few rows is not smoothed more than one that saw many)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..graph import compile as _compile
from ..leaves import Bernoulli, Gaussian
from ..nodes import Product, Sum


def bernoulli_for_binary(spn, binary: Sequence[int], n_train: int):
    """A copy of ``spn`` whose Gaussian leaves on the ``binary`` columns are Bernoulli."""
    binary = set(int(v) for v in binary)
    if not binary:
        return spn
    lo = 1.0 / (n_train + 2.0)
    root = spn.to_nodes()
    roots = root if isinstance(root, list) else [root]
    swap: dict[int, object] = {}
    seen: set[int] = set()
    stack = list(roots)
    while stack:                               # iterative: depth is unlimited
        obj = stack.pop()
        if id(obj) in seen or not isinstance(obj, (Sum, Product)):
            continue
        seen.add(id(obj))
        for i, c in enumerate(obj.children):
            if isinstance(c, Gaussian) and int(c.var) in binary:
                new = swap.get(id(c))
                if new is None:
                    new = swap[id(c)] = Bernoulli(int(c.var), float(np.clip(c.mean, lo, 1.0 - lo)))
                obj.children[i] = new
            else:
                stack.append(c)
    roots = [swap.get(id(r), r) if isinstance(r, Gaussian) and int(r.var) in binary else r for r in roots]
    kw = dict(n_vars=spn.n_vars, var_names=spn.var_names)
    if spn.combine == "single":
        out = _compile(roots[0], **kw)
    else:
        out = _compile(roots, combine=spn.combine, root_weights=spn.root_weights, **kw)
    out.learner = dict(spn.learner)      # per-node stats do not survive the new node order
    return out
