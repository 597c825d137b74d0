"""Instance splitters of the LearnSPN template: partitions of a slice's rows into the
children of a sum node (latent clusters, or the values of an observed variable)."""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import _learnspn as _LK
from ..leaves.univariate import Indicator
from ..nodes import Node

if TYPE_CHECKING:
    from .structure import Context, Slice


@dataclass
class Part:
    """One child of a sum node: its rows (training-row indices), variables, weight and an
    optional indicator leaf multiplied in (observed splits). A part with ``node`` set is a
    finished child (for example a tree leaf added to the mixture) and is not learned further."""

    rows: np.ndarray
    vars: np.ndarray
    weight: float
    indicator: Node | None = None
    node: Node | None = None


class InstanceSplitter(abc.ABC):
    """Partition of a slice's rows; ``None`` when no useful split exists."""

    data_kinds = ("discrete",)

    @abc.abstractmethod
    def split(self, ctx: Context, sl: Slice) -> list[Part] | None: ...


def _parts_from_labels(sl: Slice, labels: np.ndarray, k: int) -> list[Part] | None:
    order = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels, minlength=k)
    if np.count_nonzero(sizes) < 2:
        return None
    groups = np.split(sl.rows[order], np.cumsum(sizes)[:-1])
    n = float(sl.rows.size)
    return [Part(g, sl.vars, g.size / n) for g in groups if g.size]


class _Clustering(InstanceSplitter):
    """A latent split into ``n_clusters`` groups: ``_labels`` clusters the slice's rows,
    keeping the best of ``n_restarts`` runs of at most ``n_iter`` rounds."""

    def __init__(self, n_clusters: int = 2, n_restarts: int = 3, n_iter: int = 15):
        self.n_clusters, self.n_restarts, self.n_iter = int(n_clusters), int(n_restarts), int(n_iter)

    def split(self, ctx, sl):
        k = min(self.n_clusters, sl.rows.size)
        return None if k < 2 else _parts_from_labels(sl, self._labels(ctx, sl, k), k)

    @abc.abstractmethod
    def _labels(self, ctx: Context, sl: Slice, k: int) -> np.ndarray: ...


class NaiveBayesEM(_Clustering):
    """Latent split: hard EM for a mixture of ``n_clusters`` naive-Bayes components with
    ``n_restarts`` random restarts of at most ``n_iter`` rounds (Gens & Domingos; Rahman &
    Gogate use 2 clusters, 3 restarts, 15 rounds)."""

    def _labels(self, ctx, sl, k):
        n = sl.rows.size
        protos = np.stack([ctx.rng.choice(n, size=k, replace=False) for _ in range(self.n_restarts)])
        return _LK.nb_hard_em(ctx.data(sl), ctx.offsets(sl.vars), ctx.card[sl.vars].astype(np.int64),
                              protos.astype(np.int64), self.n_iter, ctx.alpha,
                              ctx.n_threads if n * sl.vars.size > 1 << 18 else 1)[0]


class KMeansSplit(_Clustering):
    """Latent split of real rows: k-means (k-means++ seeding, ``n_restarts`` restarts) on the
    slice's columns standardised within the slice."""

    data_kinds = ("continuous",)

    def __init__(self, n_clusters: int = 2, n_restarts: int = 3, n_iter: int = 100):
        super().__init__(n_clusters, n_restarts, n_iter)

    def _labels(self, ctx, sl, k):
        n = sl.rows.size
        D = ctx.data(sl)
        sd = D.std(axis=0)
        Z = np.ascontiguousarray((D - D.mean(axis=0)) / np.where(sd > 0, sd, 1.0))
        seeds = np.empty((self.n_restarts, k), dtype=np.int64)
        for r in range(self.n_restarts):        # k-means++ seeding (k is small)
            seeds[r, 0] = ctx.rng.integers(n)
            d2 = np.sum((Z - Z[seeds[r, 0]]) ** 2, axis=1)
            for c in range(1, k):
                tot = d2.sum()
                seeds[r, c] = ctx.rng.choice(n, p=d2 / tot) if tot > 0 else ctx.rng.integers(n)
                d2 = np.minimum(d2, np.sum((Z - Z[seeds[r, c]]) ** 2, axis=1))
        return _LK.kmeans(Z, seeds, self.n_iter, ctx.n_threads if n * D.shape[1] > 1 << 18 else 1)[0]


class ObservedSplit(InstanceSplitter):
    """O-SPN split on an observed variable V: one child per value v, ``[V = v]`` times a
    sub-model of the other variables learned on the rows with ``V = v``; weights are the
    ``alpha``-smoothed value frequencies. V maximises ``criterion``:

    * ``"info_gain"``: the drop in the summed single-variable entropies of the slice when
      conditioning on V, ``H(V) + sum_j I(V; X_j)``;
    * ``"mi_score"``: ``sum_j I(V; X_j)`` (Rahman & Gogate).

    A value never seen in the slice gets a child fitted to all rows of the slice."""

    def __init__(self, criterion: str = "info_gain"):
        if criterion not in ("info_gain", "mi_score"):
            raise ValueError(f"criterion must be 'info_gain' or 'mi_score', got {criterion!r}")
        self.criterion = criterion

    def split(self, ctx, sl):
        mi = ctx.mutual_information(sl)
        score = mi.sum(axis=1) - np.diag(mi)
        counts, off = ctx.value_counts(sl)
        seen = np.add.reduceat((counts > 0).astype(np.int64), off[:-1])
        if self.criterion == "info_gain":
            score = score + np.diag(mi)       # I(V; V) = H(V)
        score = np.where(seen > 1, score, -np.inf)
        if not np.isfinite(score).any():
            return None
        j = int(np.argmax(score))
        var = int(sl.vars[j])
        col = ctx.data(sl)[:, j]
        rest = np.delete(sl.vars, j)
        k = int(ctx.card[var])
        cnt = counts[off[j]:off[j + 1]]
        w = (cnt + ctx.alpha) / (sl.rows.size + k * ctx.alpha)
        parts = []
        for v in range(k):
            rows = sl.rows[col == v] if cnt[v] > 0 else sl.rows
            if w[v] > 0:
                parts.append(Part(rows, rest, float(w[v]), Indicator(var, v)))
        return parts
