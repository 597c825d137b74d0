"""The AVX-512 paths of the sweeps against the generic loops, switched together by
``_infer.dq_paths``: the register lookup of inline leaves (every query gives the same
bits either way, on leaves of 2 to 9 states, up to 7 taking the lookup, in the plain,
scaled and log-domain sweeps, with missing values) and the 8-row draws of sampling (the
same draws)."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import _graph, _infer
from spnc.learn import EM
from spnc.nodes import Product, Sum

from conftest import all_states, eval_linear, random_spn

CARDS = [[2, 2, 2, 2, 2], [3, 3, 4, 5, 2], [7, 8, 2, 6], [9, 3, 7, 2]]


@pytest.fixture
def generic_too():
    """Yields a function running a query with the lookup, then with the generic loops."""
    if not _infer.dq_paths():
        pytest.skip("this CPU has no AVX-512 lookup: only the generic loops run")

    def both(f):
        try:
            a = f()
            _infer.dq_paths(False)
            assert not _infer.dq_paths()
            return a, f()
        finally:
            _infer.dq_paths(True)
    return both


def _rows(rng, card, n=600, missing=0.3):
    X = np.stack([rng.integers(0, k, n) for k in card], 1).astype(float)
    X[rng.random(X.shape) < missing] = np.nan
    return X


def _same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    elif isinstance(a, tuple):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("card", CARDS)
def test_every_query_has_the_same_bits_with_and_without_the_lookup(generic_too, seed, card):
    rng = np.random.default_rng(seed)
    root = random_spn(rng, card, depth=3)
    spn = spnc.compile(root, cardinality=card)
    X, Xm = all_states(card), _rows(rng, card)
    full = np.stack([eval_linear(root, x) for x in X])
    ll, _ = generic_too(lambda: spn.log_likelihood(X))
    np.testing.assert_allclose(ll, np.log(full), rtol=1e-12)
    for nt in (1, 2):
        _same(*generic_too(lambda: spn.log_likelihood(Xm, n_threads=nt)))
        _same(*generic_too(lambda: spn.mpe(Xm, log_likelihood=True, n_threads=nt)))
        _same(*generic_too(lambda: spn.backward(Xm, leaf_responsibilities=True, n_threads=nt)))
        _same(*generic_too(lambda: spn.sample(evidence=Xm, seed=4, n_threads=nt)))
        _same(*generic_too(lambda: spn.sample(900, seed=4, n_threads=nt)))
    _same(*generic_too(lambda: EM(init=spn, max_iter=2, random_state=0).fit(Xm).spn_.log_likelihood(X)))
    # the scaled sweep (plain doubles off) reads the leaves through its own lookup
    spn._compiled = _graph.Graph(spn.kind, spn.child_ptr, spn.child, spn.logw, spn.leaf_slot, spn.roots,
                                 spn.n_leaves, spn.weight, plain=False)
    _same(*generic_too(lambda: spn.log_likelihood(Xm)))
    _same(*generic_too(lambda: spn.backward(Xm)))


def _draws_match(generic_too, spn: spnc.SPN, card: list[int], n: int) -> None:
    """spn's samples are the same draws with and without the vector paths (1 and 2 threads),
    and the frequencies of 60 000 of them match its probabilities (three variables)."""
    for nt in (1, 2):
        a, b = generic_too(lambda: spn.sample(n, seed=9, n_threads=nt))
        np.testing.assert_array_equal(a, b)
    S = spn.sample(60000, seed=1)
    p = np.exp(spn.log_likelihood(all_states(card)))
    code = (S[:, 0] * card[1] + S[:, 1]) * card[2] + S[:, 2]
    freq = np.bincount(code.astype(int), minlength=len(p)) / len(S)
    assert np.abs(freq - p).max() < 0.01


@pytest.mark.parametrize("k", [4, 12, 70])
def test_wide_sums_and_many_state_leaves_draw_the_same_samples(generic_too, k):
    """Sums of k edges (some of weight 0) and leaves of up to 12 states: the 8-row draws
    pick the edge and state the row-by-row loop picks, and their frequencies match."""
    rng = np.random.default_rng(k)
    card = [12, 2, 5]
    w = rng.dirichlet(np.ones(k))
    w[::5] = 0.0
    kids = [Product([spnc.Categorical(0, rng.dirichlet(np.ones(12))), spnc.Bernoulli(1, float(rng.uniform(.1, .9))),
                     spnc.Categorical(2, rng.dirichlet(np.ones(5)))]) for _ in range(k)]
    _draws_match(generic_too, spnc.compile(Sum(kids, w / w.sum()), cardinality=card), card, 4000)


@pytest.mark.parametrize("k", [2, 3, 9])
def test_sparse_rows_draw_the_same_samples(generic_too, k):
    """Inner sums and leaves reached by 4-15 rows of a block draw those rows packed into
    one or two vectors: the same draws as the row-by-row loop, right frequencies."""
    rng = np.random.default_rng(k)
    card = [2, 3, 4]

    def inner(v):
        return Sum([Product([spnc.Categorical(v, rng.dirichlet(np.ones(card[v]))),
                             spnc.Categorical(2, rng.dirichlet(np.ones(4)))]) for _ in range(k)],
                   rng.dirichlet(np.ones(k)))
    kids = [Product([inner(0), spnc.Categorical(1, rng.dirichlet(np.ones(3)))]) for _ in range(12)]
    _draws_match(generic_too, spnc.compile(Sum(kids, rng.dirichlet(np.ones(12))), cardinality=card), card, 3000)
