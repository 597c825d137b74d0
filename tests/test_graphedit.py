"""Graph edits of merging (spnc.learn._graphedit): what hash-consing takes as equal."""
from __future__ import annotations

import numpy as np

import spnc
from spnc.learn._graphedit import hash_cons
from spnc.nodes import Product, Sum


def test_hash_cons_adds_repeated_children_and_collapses_copies_across_levels():
    """Sum([A, A']) with A equal to A' is A, one level above A; a product over it equals a
    product over A directly. Weights of repeated children are added before comparing, and
    a sum over two equal sums is that sum."""
    def leafy():
        return Product([spnc.Bernoulli(0, 0.3), spnc.Bernoulli(1, 0.6)])
    A, A2 = leafy(), leafy()
    via_sum = Product([Sum([A, A2], [0.5, 0.5]), spnc.Bernoulli(2, 0.1)])
    direct = Product([leafy(), spnc.Bernoulli(2, 0.1)])
    s1 = Sum([leafy(), leafy(), Product([spnc.Bernoulli(0, 0.9), spnc.Bernoulli(1, 0.6)])], [0.25, 0.25, 0.5])
    s2 = Sum([leafy(), Product([spnc.Bernoulli(0, 0.9), spnc.Bernoulli(1, 0.6)])], [0.5, 0.5])
    top = Sum([Product([Sum([via_sum, direct], [0.4, 0.6]), spnc.Bernoulli(3, 0.5)]),
               Product([Sum([s1, s2], [0.5, 0.5]), Product([spnc.Bernoulli(2, 0.2), spnc.Bernoulli(3, 0.5)])])],
              [0.5, 0.5])
    spn = spnc.compile(top)
    rep = hash_cons(spn)
    # the sum over A and its copy is A, so the product above it is `direct`, one level lower
    deg = np.diff(spn.child_ptr)
    prods = [n for n in range(spn.n_nodes) if spn.kind[n] == 1 and deg[n] == 2
             and 2 in spn.node_scope(n) and len(spn.node_scope(n)) == 3]
    assert len(prods) == 2 and rep[prods[0]] == rep[prods[1]] == min(prods)
    # s1 (two equal children of weight 0.25 each) is s2 (one child of weight 0.5)
    sums = [n for n in range(spn.n_nodes) if spn.kind[n] == 0 and list(spn.node_scope(n)) == [0, 1]]
    # Sum([A, A']) is the product A; s1, s2 and Sum([s1, s2]) are all s1
    assert sorted(spn.kind[rep[sums]].tolist()) == [0, 0, 0, 1]
    assert len({int(rep[n]) for n in sums if spn.kind[rep[n]] == 0}) == 1
