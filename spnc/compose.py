"""Composition of models from any learner or file: mixtures over the same variables and
products over disjoint ones.

>>> import numpy as np, spnc
>>> from spnc import Bernoulli, Product
>>> from spnc.learn import LearnSPN
>>> X = np.random.default_rng(0).integers(0, 2, size=(400, 4))
>>> a, b = (LearnSPN(min_instances=k, random_state=0).fit(X).spn_ for k in (20, 100))
>>> m = spnc.mixture([a, b], X=X)               # root weights fitted by EM on X
>>> ll = lambda s: s.log_likelihood(X).mean()
>>> bool(ll(m) >= max(ll(a), ll(b)) - 1e-9)     # the weights' log-likelihood is concave
True
>>> ab = spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)]), var_names=["a", "b"])
>>> cd = spnc.compile(Product([Bernoulli(0, .2), Bernoulli(1, .9)]), var_names=["c", "d"])
>>> spnc.product([ab, cd]).var_names            # variables matched by name if named
['a', 'b', 'c', 'd']

Where every model carries ``var_names`` variables are matched by name (a model's columns
are reordered to the first model's order); otherwise by index, and the result keeps the
names of the models that have them if they agree and name every variable (else a warning
says they are dropped). Shared sub-networks stay shared; the inputs are not modified.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import warnings

from ._kinds import VAR_REAL
from .errors import DataError, ParameterError, ScopeError, StructureError
from .graph import SPN, compile
from .leaves import ChowLiuLeaf, MultivariateGaussian
from .nodes import Leaf, Node, Product, Sum

__all__ = ["mixture", "product"]

_TYPES = {0: "binary", 1: "categorical", 2: "real"}


def _check_models(models: Sequence[Any], what: str) -> list[SPN]:
    models = list(models)
    if not models:
        raise ParameterError("models", f"{what} needs at least one model")
    for i, m in enumerate(models):
        if not isinstance(m, SPN):
            from .learn._params import model_hint
            raise ParameterError("models", f"models[{i}] is a {type(m).__name__}, not a compiled spnc.SPN"
                                           f"{model_hint(m, None)}")
    return models


def _named(models: list[SPN]) -> bool:
    return all(m.var_names is not None for m in models)


def _index_names(models: list[SPN], n_vars: int) -> list[str] | None:
    """Names for variables matched by index, from the models that have them: kept when they
    agree and name every variable, else dropped with a warning."""
    named = [m for m in models if m.var_names is not None]
    if not named:
        return None
    names: list[str | None] = [None] * n_vars
    for m in named:
        for v, n in enumerate(m.var_names):
            if names[v] is not None and names[v] != n:
                warnings.warn(f"variable {v} is {names[v]!r} in one model and {n!r} in another, and not every "
                              "model has var_names to match them by: the result has no var_names",
                              UserWarning, stacklevel=3)
                return None
            names[v] = n
    if None in names:
        warnings.warn(f"variable {names.index(None)} is named by no model (not every model has var_names): "
                      "the result has no var_names", UserWarning, stacklevel=3)
        return None
    return names  # type: ignore[return-value]


def _graph(spn: SPN, perm: np.ndarray | None) -> Node:
    """Construction objects of ``spn`` (a mixture of roots becomes a sum) with variable v
    renamed ``perm[v]``."""
    root = spn.to_nodes()
    if isinstance(root, list):
        if spn.combine != "mixture":
            raise StructureError("a bag of independent models (combine='independent') cannot be composed")
        root = Sum(root, spn.root_weights)
    if perm is None:
        return root
    new: dict[int, Node] = {}
    stack, seen, order = [root], set(), []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        if isinstance(n, (Sum, Product)):
            stack.extend(n.children)
    for n in order:
        if isinstance(n, Leaf):
            new[id(n)] = _move_leaf(n, perm)
    for n in order:
        if isinstance(n, (Sum, Product)):
            n.children = [new.get(id(c), c) for c in n.children]
    return new.get(id(root), root)


def _move_leaf(leaf: Leaf, perm: np.ndarray) -> Leaf:
    if isinstance(leaf, MultivariateGaussian):
        return MultivariateGaussian(perm[leaf.vars], leaf.mean, leaf.cov)
    if isinstance(leaf, ChowLiuLeaf):
        new = perm[leaf.vars]
        order = np.argsort(new)
        pos = np.empty(len(order), dtype=np.int64)
        pos[order] = np.arange(len(order))
        par = [int(pos[p]) if p >= 0 else -1 for p in leaf.parents[order]]
        return ChowLiuLeaf(new[order], par, [leaf.cpts[j] for j in order])
    if hasattr(leaf, "var") and len(leaf.scope) == 1:
        leaf.var = int(perm[leaf.var])
        return leaf
    raise StructureError(f"cannot rename the variables of a {type(leaf).__name__} leaf")


def _card_of(models: list[SPN], perms: list[np.ndarray | None], n_vars: int) -> tuple[np.ndarray, np.ndarray]:
    """Cardinality and type of each output variable. The models that use a variable must
    agree on its cardinality; its type is that of the first model using it (a warning
    says when another calls a 2-state variable otherwise). A variable no model uses keeps
    what the first model declaring it says."""
    card = np.full(n_vars, -1, dtype=np.int64)
    vtype = np.full(n_vars, VAR_REAL, dtype=np.uint8)
    who = np.full(n_vars, -1, dtype=np.int64)
    for k, (m, perm) in enumerate(zip(models, perms)):
        used = m.node_scope(int(m.roots[0]))
        for v in used:
            g = int(v if perm is None else perm[v])
            c, t = int(m.cardinality[v]), int(m.var_type[v])
            name = m.var_names[v] if m.var_names is not None else f"variable {g}"
            if card[g] >= 0 and card[g] != c:
                raise ScopeError(f"{name!r}: cardinality {c} in models[{k}] but {card[g]} in models[{who[g]}]")
            if card[g] >= 0 and vtype[g] != t:
                warnings.warn(f"{name!r} is {_TYPES[t]} in models[{k}] but {_TYPES[vtype[g]]} in "
                              f"models[{who[g]}]; the result keeps {_TYPES[vtype[g]]}", UserWarning, stacklevel=3)
                continue
            card[g], vtype[g], who[g] = c, t, k
    for m, perm in zip(models, perms):      # variables in no leaf of any model
        src = np.arange(m.n_vars)
        g = src if perm is None else np.asarray(perm, dtype=np.int64)
        src, g = src[g < n_vars], g[g < n_vars]
        unset = card[g] < 0
        card[g[unset]], vtype[g[unset]] = m.cardinality[src[unset]], m.var_type[src[unset]]
    vtype[card < 0] = VAR_REAL
    card[card < 0] = 0
    return card, vtype


def mixture(models: Sequence[SPN], weights: Sequence[float] | None = None, X=None, *,
            max_iter: int = 200, tol: float = 1e-9) -> SPN:
    """A sum node over ``models`` (all over the same variables).

    The root weights come from one of: ``weights``, used as given (normalised); the rows
    of ``X``, on which they are fitted by EM on the root weights only (each model's own
    parameters stay fixed); neither, uniform weights. ``X`` is only for fitting the
    weights: giving both is a :class:`~spnc.errors.ParameterError` (score the result on
    ``X`` with its ``log_likelihood``). Returns a new single-root :class:`SPN`."""
    if weights is not None and X is not None:
        raise ParameterError("weights", "mixture: give weights or X, not both: X is the data the weights are "
                                        "fitted on when weights is None (to score a mixture of given weights "
                                        "on X, call its log_likelihood(X))")
    models = _check_models(models, "mixture")
    base = models[0]
    perms: list[np.ndarray | None] = [None]
    if _named(models):
        pos = {n: i for i, n in enumerate(base.var_names)}
        for k, m in enumerate(models[1:], 1):
            if sorted(m.var_names) != sorted(base.var_names):
                extra = sorted(set(m.var_names) ^ set(base.var_names))[:5]
                raise ScopeError(f"models[{k}] has other variables than models[0] (e.g. {extra})")
            perms.append(np.array([pos[n] for n in m.var_names], dtype=np.int64))
        names = list(base.var_names)
    else:
        for k, m in enumerate(models[1:], 1):
            if m.n_vars != base.n_vars:
                raise ScopeError(f"models[{k}] has {m.n_vars} variables, models[0] {base.n_vars}; "
                                 "give the models var_names to match them by name")
            perms.append(None)
        names = _index_names(models, base.n_vars)
    card, vtype = _card_of(models, perms, base.n_vars)
    if weights is not None:
        want = f"weights must be {len(models)} finite non-negative numbers with a positive total"
        try:
            w = np.asarray(weights, dtype=np.float64)
        except (TypeError, ValueError):          # text, ragged lists: not numbers
            raise ParameterError("weights", f"{want}, got {weights!r:.80}") from None
        if w.shape != (len(models),) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.max() > 0:
            raise ParameterError("weights", f"{want}, got {weights!r:.80}")
        w = w / w.max()              # first: a sum of huge weights may overflow
        w = w / w.sum()
    elif X is not None:
        parts = [m if p is None else _relabelled(m, p, card, vtype, names) for m, p in zip(models, perms)]
        w = fit_weights(parts, X, max_iter=max_iter, tol=tol)
    else:
        w = np.full(len(models), 1.0 / len(models))
    root = Sum([_graph(m, p) for m, p in zip(models, perms)], w)
    return compile(root, cardinality=card, var_type=vtype, var_names=names, normalize=False)


def _relabelled(m: SPN, perm: np.ndarray, card: np.ndarray, vtype: np.ndarray, names: list[str] | None) -> SPN:
    return compile(_graph(m, perm), cardinality=card, var_type=vtype, var_names=names, normalize=False)


def fit_weights(models: Sequence[SPN], X, *, max_iter: int = 200, tol: float = 1e-9,
                name: str = "X") -> np.ndarray:
    """Maximum-likelihood mixture weights of fixed ``models`` on the rows of ``X`` (EM on
    the weights: one inference pass per model, then iterations on the n x K matrix);
    errors call the rows ``name``."""
    X = models[0]._check_X(X, name)
    if X.shape[0] == 0:
        raise DataError(f"{name} has no rows")
    L = np.column_stack([m.log_likelihood(X) for m in models])
    if not np.all(np.isfinite(L).any(axis=1)):
        r = int(np.flatnonzero(~np.isfinite(L).any(axis=1))[0])
        raise DataError(f"row {r} of {name} has zero probability under every model")
    K = L.shape[1]
    w = np.full(K, 1.0 / K)
    prev = -np.inf
    for _ in range(max_iter):
        with np.errstate(divide="ignore"):
            a = L + np.log(w)
        m = a.max(axis=1, keepdims=True)
        ll_rows = m[:, 0] + np.log(np.exp(a - m).sum(axis=1))
        ll = float(ll_rows.mean())
        w = np.exp(a - ll_rows[:, None]).mean(axis=0)
        w /= w.sum()
        if ll - prev < tol:
            break
        prev = ll
    return w


def product(models: Sequence[SPN]) -> SPN:
    """A product node over ``models`` with disjoint variables.

    With ``var_names`` on every model, the result's variables are the union of the names
    in the order the models list them; otherwise variable indices are shared and the
    models' scopes must be disjoint."""
    models = _check_models(models, "product")
    if _named(models):
        names: list[str] | None = []
        owner: dict[str, int] = {}
        perms: list[np.ndarray | None] = []
        for k, m in enumerate(models):
            p = []
            for n in m.var_names:
                if n in owner:
                    raise ScopeError(f"variable {n!r} is in models[{owner[n]}] and models[{k}]; "
                                     "a product needs disjoint variables")
                owner[n] = k
                p.append(len(names))
                names.append(n)
            perms.append(np.array(p, dtype=np.int64))
        n_vars = len(names)
    else:
        names, perms = None, [None] * len(models)
        seen: dict[int, int] = {}
        for k, m in enumerate(models):
            for v in m.node_scope(int(m.roots[0])):
                if int(v) in seen:
                    raise ScopeError(f"variable {int(v)} is in models[{seen[int(v)]}] and models[{k}]; "
                                     "a product needs disjoint variables (or var_names to tell them apart)")
                seen[int(v)] = k
        n_vars = max(m.n_vars for m in models)
        names = _index_names(models, n_vars)
    card, vtype = _card_of(models, perms, n_vars)
    root = Product([_graph(m, p) for m, p in zip(models, perms)])
    return compile(root, cardinality=card, var_type=vtype, var_names=names, normalize=False)
