"""Valid but unusual models through the life cycle: very wide or deep graphs, variables
no leaf uses, odd variable names, in the learners, the file formats and the console tools."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import Bernoulli, DataError, Product, Sum
from spnc.learn import Merge


# ---------------------------------------------------------------- Merge and the memory budget
def test_merge_refuses_pairwise_distances_above_the_budget(monkeypatch):
    """A sum of 400 children over one scope has 79 800 candidate pairs: above a 1 MiB
    budget Merge says so before allocating (a sum of 10^5 children asked numpy for 37 GiB
    and died with MemoryError)."""
    rng = np.random.default_rng(0)
    spn = spnc.compile(Sum([Product([Bernoulli(0, float(p)), Bernoulli(1, float(q))])
                            for p, q in rng.uniform(0.1, 0.9, (400, 2))], np.full(400, 1 / 400)))
    X = spn.sample(50, seed=0)
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "1M")
    with pytest.raises(DataError, match=r"pairwise distances \(400 nodes of one scope"):
        Merge(init=spn, epsilon=0.1).fit(X)
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "64M")
    assert Merge(init=spn, epsilon=0.1).fit(X).spn_.n_nodes < spn.n_nodes


def test_merge_refuses_node_marginals_above_the_budget(monkeypatch):
    """Node marginals take (states x variables) indicator rows and every node's value on
    them: 600 rows x (300 variables + 302 nodes) is above 1 MiB."""
    spn = spnc.compile(Sum([Product([Bernoulli(v, 0.3) for v in range(300)]),
                            Product([Bernoulli(v, 0.6) for v in range(300)])], [0.5, 0.5]))
    X = spn.sample(20, seed=0)
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "1M")
    with pytest.raises(DataError, match="single-variable marginals of 603 nodes"):
        Merge(init=spn, epsilon=0.1).fit(X)
