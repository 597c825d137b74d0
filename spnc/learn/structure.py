"""The three pluggable steps of the LearnSPN template (Rahman & Gogate, Alg. 1):

* a :class:`VariableSplitter` partitions the variables of a data slice into groups that
  look independent (a product node);
* an :class:`InstanceSplitter` partitions the rows into similar groups (a sum node), over
  a latent variable (clustering) or an observed one;
* a :class:`BaseModel` fits the distribution that ends the recursion.

Each paper's variant is a choice of the three. New steps subclass these bases and are
registered by name with :func:`register_step`; the template never changes. Instance
splitters live in :mod:`.row_splits` and are re-exported here.
Statistics run in the Cython kernels of ``spnc.learn._learnspn``, ``spnc._counts`` and ``spnc._mi``.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .. import _counts as _CK
from .. import _mi as _MI
from . import _learnspn as _LK
from ..chowliu import fit_chow_liu, forest_to_tree, mutual_information
from ..errors import ParameterError
from ..leaves.cltree import ChowLiuLeaf
from ..leaves.univariate import Bernoulli, Categorical, Gaussian
from ..nodes import Node, Product
from ._params import Constraint, setting
from .row_splits import InstanceSplitter, KMeansSplit, NaiveBayesEM, ObservedSplit, Part  # noqa: F401


# ====================================================================== data
@dataclass(eq=False)
class Slice:
    """Rows and variables of one recursion step. ``depth`` counts the sum nodes above;
    ``decomposed`` is set when variable splitting already failed on exactly this slice."""

    rows: np.ndarray
    vars: np.ndarray
    depth: int = 0
    decomposed: bool = False
    _data: np.ndarray | None = field(default=None, repr=False)


class Context:
    """Training data and settings every step sees. ``X`` is the full training matrix,
    row-major: uint8/int32 codes for discrete data, float64 for continuous data."""

    def __init__(self, X: np.ndarray, cardinality: np.ndarray, continuous: bool, *, alpha: float,
                 min_std: float, rng: np.random.Generator, n_threads: int):
        self.X = X
        self.card = cardinality
        self.continuous = continuous
        self.alpha = float(alpha)
        self.min_std = float(min_std)
        self.rng = rng
        self.n_threads = int(n_threads)
        self.n_total = X.shape[0]

    def data(self, sl: Slice) -> np.ndarray:
        """The slice's rows x variables, C-contiguous (computed once per slice)."""
        if sl._data is None:
            if sl.rows.size == self.n_total and sl.vars.size == self.X.shape[1]:
                sl._data = self.X
            else:
                sl._data = self.X[np.ix_(sl.rows, sl.vars)]
        return sl._data

    def offsets(self, vars: np.ndarray) -> np.ndarray:
        off = np.zeros(vars.size + 1, dtype=np.int64)
        np.cumsum(self.card[vars], out=off[1:])
        return off

    def value_counts(self, sl: Slice) -> tuple[np.ndarray, np.ndarray]:
        """``(counts, off)``: occurrences of every value of every slice variable."""
        off = self.offsets(sl.vars)
        return _CK.value_counts(self.data(sl), off), off

    def gtest(self, sl: Slice, cols: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Pairwise G statistics and degrees of freedom over ``cols`` of the slice."""
        D = self.data(sl)
        vars = sl.vars
        if cols is not None:
            D, vars = np.ascontiguousarray(D[:, cols]), vars[cols]
        off = self.offsets(vars)
        C = _CK.cooc_popcount(_CK.pack_onehot(D, off, int(off[-1])), self.n_threads)
        return _MI.gtest_onehot(C, off, float(D.shape[0]))

    def mutual_information(self, sl: Slice) -> np.ndarray:
        D = self.data(sl)
        return mutual_information(D, self.card[sl.vars], None, self.alpha, self.n_threads)[0]


def components(adjacent: np.ndarray) -> list[np.ndarray]:
    """Connected components of a boolean adjacency matrix, as sorted index arrays ordered
    by their smallest member."""
    labels = _LK.components_dense(np.ascontiguousarray(adjacent, dtype=np.uint8))
    order = np.argsort(labels, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(labels[order])) + 1)


# ====================================================================== variable splitters
class VariableSplitter(abc.ABC):
    """Partition of a slice's variables. ``split`` returns groups of column positions of the
    slice (a single group: no independence found). ``exhaustive`` splitters return groups
    that cannot split further on the same rows; the template re-splits the groups of the
    others until they stop (the same as recursing and merging product chains)."""

    exhaustive = True
    data_kinds = ("discrete",)

    @abc.abstractmethod
    def split(self, ctx: Context, sl: Slice) -> list[np.ndarray]: ...


class GVS(VariableSplitter):
    """Greedy variable splitting (Gens & Domingos; Vergari et al.): variables i, j are
    dependent when their G statistic reaches ``2 * dof * g_factor`` (``dof`` counting the
    values seen in the slice). Growing a group from a random seed variable through
    dependent pairs, then again from a seed among the rest, yields the connected
    components of this dependency graph, which is what is returned."""

    def __init__(self, g_factor: float = 5.0):
        self.g_factor = float(g_factor)

    def dependent(self, ctx: Context, sl: Slice, cols: np.ndarray | None = None) -> np.ndarray:
        G, dof = ctx.gtest(sl, cols)
        dep = G >= 2.0 * dof * self.g_factor + 1e-3
        np.fill_diagonal(dep, False)
        return dep

    def split(self, ctx, sl):
        return components(self.dependent(ctx, sl))


class RGVS(GVS):
    """Random greedy variable splitting: GVS on a random subset of ``max(floor(sqrt(n)), 2)``
    variables splits off the seed's group; the variables left out join one of the two sides
    at random (Bernoulli(0.5)). Linear in the number of variables."""

    exhaustive = False

    def split(self, ctx, sl):
        n = sl.vars.size
        k = max(int(np.sqrt(n)), 2)
        if k >= n:
            groups = components(self.dependent(ctx, sl))
            if len(groups) == 1:
                return groups
            seed = int(ctx.rng.integers(len(groups)))
            rest = np.sort(np.concatenate([g for i, g in enumerate(groups) if i != seed]))
            return [groups[seed], rest]
        sub = np.sort(ctx.rng.choice(n, size=k, replace=False))
        groups = components(self.dependent(ctx, sl, sub))
        if len(groups) == 1:
            return [np.arange(n)]
        seed = int(ctx.rng.integers(len(groups)))
        d1 = sub[groups[seed]]
        d2 = sub[np.concatenate([g for i, g in enumerate(groups) if i != seed])]
        others = np.setdiff1d(np.arange(n), sub)
        if ctx.rng.random() < 0.5:
            d1 = np.concatenate([d1, others])
        else:
            d2 = np.concatenate([d2, others])
        return [np.sort(d1), np.sort(d2)]


class EBVS(VariableSplitter):
    """Entropy-based variable splitting: the variables whose ``alpha``-smoothed entropy (in
    bits) is below ``threshold`` form one group, the others the second."""

    def __init__(self, threshold: float = 0.3, alpha: float = 0.1):
        self.threshold = float(threshold)
        self.alpha = float(alpha)

    def entropies(self, ctx: Context, sl: Slice) -> np.ndarray:
        counts, off = ctx.value_counts(sl)
        card = np.diff(off)
        n = float(sl.rows.size)
        p = (counts + self.alpha) / np.repeat(n + card * self.alpha, card)
        h = -p * np.log2(p, where=p > 0, out=np.zeros_like(p))
        return np.add.reduceat(h, off[:-1])

    def eta(self, ctx: Context, sl: Slice) -> float:
        return self.threshold

    def split(self, ctx, sl):
        low = self.entropies(ctx, sl) < self.eta(ctx, sl)
        if low.all() or not low.any():
            return [np.arange(sl.vars.size)]
        return [np.flatnonzero(low), np.flatnonzero(~low)]


class EBVSAdaptive(EBVS):
    """EBVS-AE: the threshold shrinks with the slice, ``threshold * rows / all rows``
    (floored at float32 epsilon), since entropies shrink on smaller slices."""

    def eta(self, ctx, sl):
        return max(self.threshold * sl.rows.size / ctx.n_total, float(np.finfo(np.float32).eps))


class MIComponents(VariableSplitter):
    """Connected components of the mutual-information graph after pruning edges whose MI
    (nats, ``alpha``-smoothed) is at most ``threshold`` (Rahman & Gogate)."""

    def __init__(self, threshold: float = 0.01):
        self.threshold = float(threshold)

    def split(self, ctx, sl):
        return components(ctx.mutual_information(sl) > self.threshold)


class CorrelationSplitter(VariableSplitter):
    """Continuous data: connected components of the graph linking variables whose absolute
    Pearson correlation on the slice exceeds ``threshold`` (constant columns are
    independent of everything)."""

    data_kinds = ("continuous",)

    def __init__(self, threshold: float = 0.3):
        self.threshold = float(threshold)

    def split(self, ctx, sl):
        D = ctx.data(sl)
        Z = D - D.mean(axis=0)
        sd = np.sqrt(np.einsum("ij,ij->j", Z, Z))
        # constant: spread at the rounding level of the column's own magnitude (any scale)
        ok = sd > 1e-12 * np.sqrt(D.shape[0]) * np.abs(D).max(axis=0)
        Z[:, ok] /= sd[ok]
        R = np.abs(Z.T @ Z)
        R[~ok, :] = 0.0
        R[:, ~ok] = 0.0
        np.fill_diagonal(R, 0.0)
        return components(R > self.threshold)


# ====================================================================== base models
class BaseModel(abc.ABC):
    """Distribution fitted where the recursion stops."""

    data_kinds = ("discrete",)

    @abc.abstractmethod
    def fit(self, ctx: Context, sl: Slice) -> Node: ...


class UnivariateLeaves(BaseModel):
    """Naive factorisation: one smoothed univariate leaf per variable (Bernoulli for binary
    variables, categorical otherwise, Gaussian with a standard-deviation floor for real
    variables)."""

    data_kinds = ("discrete", "continuous")

    def fit(self, ctx, sl):
        if ctx.continuous:
            D = ctx.data(sl)
            mean = D.mean(axis=0)
            std = np.maximum(D.std(axis=0), ctx.min_std)
            leaves = [Gaussian(int(v), float(m), float(s)) for v, m, s in zip(sl.vars, mean, std)]
        else:
            counts, off = ctx.value_counts(sl)
            card = np.diff(off)
            p = (counts + ctx.alpha) / np.repeat(sl.rows.size + card * ctx.alpha, card)
            leaves = [Bernoulli(int(v), float(p[off[i] + 1])) if card[i] == 2
                      else Categorical(int(v), p[off[i]:off[i + 1]])
                      for i, v in enumerate(sl.vars)]
        return leaves[0] if len(leaves) == 1 else Product(leaves)


class ChowLiuLeaves(BaseModel):
    """A Chow-Liu tree over the slice's variables (``alpha``-smoothed), as one leaf.

    ``bic=True`` keeps an edge only when its mutual information pays for its parameter
    under BIC, ``MI > log(n) / (2 n)`` nats for ``n`` rows (one extra free parameter per
    edge for binary pairs, the count used for all data): a small slice gets a forest, down
    to the naive factorisation, instead of a full tree fitted to noise."""

    def __init__(self, bic: bool = False):
        self.bic = bool(bic)

    def fit(self, ctx, sl):
        if sl.vars.size == 1:
            return UnivariateLeaves().fit(ctx, sl)
        n = sl.rows.size
        mi = float(np.log(max(n, 2)) / (2.0 * max(n, 2))) if self.bic else 0.0
        res = fit_chow_liu(ctx.data(sl), ctx.card[sl.vars], alpha=ctx.alpha, mi_threshold=mi,
                           n_threads=ctx.n_threads)
        parents, cpts = forest_to_tree(res.parents, res.cpts)
        return ChowLiuLeaf(sl.vars, parents, cpts)


# ====================================================================== registry
_STEPS: dict[str, dict[str, Callable]] = {"splitter": {}, "sum_split": {}, "leaves": {}}


def register_step(kind: str, name: str, factory: Callable) -> None:
    """Make ``name`` usable as ``LearnSPN(<kind>=name)``. ``kind`` is ``"splitter"``,
    ``"sum_split"`` or ``"leaves"``; ``factory(estimator, continuous)`` returns the step."""
    if kind not in _STEPS:
        raise ValueError(f"unknown step kind {kind!r}; one of {sorted(_STEPS)}")
    _STEPS[kind][name] = factory


_STEP_BASES = {"splitter": VariableSplitter, "sum_split": InstanceSplitter, "leaves": BaseModel}


def step_constraint(kind: str) -> Constraint:
    """Parameter constraint: a registered step name or an instance of the step's base."""
    return Constraint(lambda v: isinstance(v, _STEP_BASES[kind]) or (isinstance(v, str) and v in _STEPS[kind]),
                      f"a registered {kind} name or a {_STEP_BASES[kind].__name__}")


def resolve_step(kind: str, spec, est, continuous: bool):
    """The step object for a name or an instance, checked against the data kind."""
    base = _STEP_BASES[kind]
    if isinstance(spec, base):
        step = spec
    elif isinstance(spec, str) and spec in _STEPS[kind]:
        step = _STEPS[kind][spec](est, continuous)
    else:
        raise ParameterError(kind, f"{setting(kind, spec)} is not known; use one of {sorted(_STEPS[kind])} "
                                   f"or a {base.__name__} instance")
    data_kind = "continuous" if continuous else "discrete"
    if data_kind not in step.data_kinds:
        hint = f"; use {setting('splitter', 'correlation')}" if kind == "splitter" and continuous else ""
        if not continuous and getattr(est, "data_type", None) == "auto":
            hint = (f"; {setting('data_type', 'auto')} reads integer-valued data as discrete: give "
                    f"{setting('data_type', 'continuous')}")
        raise ParameterError(kind, f"{setting(kind, spec)} works on {' or '.join(step.data_kinds)} data, but the "
                                   f"data is {data_kind}{hint}")
    return step


register_step("splitter", "gvs", lambda e, c: GVS(e.g_factor))
register_step("splitter", "rgvs", lambda e, c: RGVS(e.g_factor))
register_step("splitter", "ebvs", lambda e, c: EBVS(e.entropy_threshold, e.alpha))
register_step("splitter", "ebvs_ae", lambda e, c: EBVSAdaptive(e.entropy_threshold, e.alpha))
register_step("splitter", "mi_components", lambda e, c: MIComponents(e.mi_threshold))
register_step("splitter", "correlation", lambda e, c: CorrelationSplitter(e.corr_threshold))
register_step("sum_split", "latent", lambda e, c: (KMeansSplit if c else NaiveBayesEM)(
    e.n_clusters, e.n_restarts, e.n_iter if not c else max(e.n_iter, 100)))
register_step("sum_split", "observed", lambda e, c: ObservedSplit(e.criterion))
register_step("leaves", "univariate", lambda e, c: UnivariateLeaves())
register_step("leaves", "chowliu", lambda e, c: ChowLiuLeaves())
register_step("leaves", "chowliu_bic", lambda e, c: ChowLiuLeaves(bic=True))
