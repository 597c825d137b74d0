"""A merge round's cluster search against its plain definition (the leader pass over each
group's distance matrix)."""
from __future__ import annotations

import numpy as np
import pytest

from spnc.learn._merge_round import _Round
from spnc.learn._similarity import Pairs


def _pairs(rng, sizes) -> Pairs:
    """Pairs of groups of the given sizes over distinct node ids, distances drawn from a
    few values (ties), with some infinite and NaN ones."""
    p = object.__new__(Pairs)
    p.members = rng.permutation(int(sum(sizes)) + 5)[: int(sum(sizes))].astype(np.int64)
    p.gptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    npairs = np.array([s * (s - 1) // 2 for s in sizes])
    p.pptr = np.concatenate([[0], np.cumsum(npairs)]).astype(np.int64)
    d = rng.choice([0.0, 0.01, 0.02, 0.05, 0.1, 0.3, np.inf, np.nan], size=int(npairs.sum()))
    p.dist = d
    p.gmin = np.fmin.reduceat(d, p.pptr[:-1]) if len(sizes) else np.zeros(0)
    return p


def _clusters_by_matrix(pairs: Pairs, eps: float, count: np.ndarray) -> list:
    out = []
    for g in np.flatnonzero(pairs.gmin <= eps):
        m = pairs.members[pairs.gptr[g]:pairs.gptr[g + 1]]
        close = pairs.matrix(g) <= eps
        np.fill_diagonal(close, True)
        free = close.sum(axis=1) > 1
        for i in np.argsort(-count[m], kind="stable"):
            if free[i]:
                mem = np.flatnonzero(free & close[i])
                free[mem] = False
                if mem.size > 1:
                    out.append(m[mem])
    return out


@pytest.mark.parametrize("seed", range(4))
def test_clusters_are_the_leader_pass_over_each_distance_matrix(seed):
    """Groups of 2 to 100 members (bit sets up to 64, arrays beyond), tied counts and
    distances, infinite and NaN ones: the clusters of the matrix loop, in its order."""
    rng = np.random.default_rng(seed)
    pairs = _pairs(rng, rng.choice([2, 3, 5, 17, 63, 64, 65, 100], size=12))
    count = rng.integers(0, 4, size=int(pairs.members.max()) + 1)
    rnd = object.__new__(_Round)
    rnd.distances = lambda spn: pairs
    for eps in (0.0, 0.01, 0.05, 0.3, np.inf):
        for g in range(len(pairs.gptr) - 1):
            want = pairs.matrix(g) <= eps
            np.fill_diagonal(want, True)
            assert np.array_equal(pairs.close(g, eps), want)
        got = rnd.clusters(None, eps, lambda: count)
        want = _clusters_by_matrix(pairs, eps, count)
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
        assert len(want) or eps == 0.0
