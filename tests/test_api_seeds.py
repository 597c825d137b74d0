"""``random_state`` as a numpy Generator or RandomState, as scikit-learn takes it."""
from __future__ import annotations

import numpy as np
import pytest

from spnc.learn import EM, OSLRAU, BaggedSPN, ChowLiuTree, LearnSPN, Prometheus, TreeSPN
from spnc.errors import ParameterError

RNG = np.random.default_rng(0)
REAL = RNG.normal(size=(300, 4)) + np.repeat(RNG.normal(size=(3, 4)) * 4, 100, axis=0)
CODES = (REAL > 0).astype(np.int64)

LEARNERS = {
    "learnspn": (lambda rs: LearnSPN("correlation", min_instances=30, sample_rows=200, random_state=rs), REAL),
    "prometheus": (lambda rs: Prometheus(min_instances=50, sample_rows=200, random_state=rs), REAL),
    "treespn": (lambda rs: TreeSPN(n_trees=2, max_depth=2, em_max_iter=3, random_state=rs), CODES),
    "oslrau": (lambda rs: OSLRAU(batch_size=10, random_state=rs), REAL),
    "bagged": (lambda rs: BaggedSPN(ChowLiuTree(), n_bags=2, random_state=rs), CODES),
}


def _ll(est, X):
    return est.spn_.log_likelihood(X)


@pytest.mark.parametrize("name", sorted(LEARNERS))
@pytest.mark.parametrize("kind", ["generator", "randomstate"])
def test_a_generator_seeds_the_fit_with_a_draw_from_it(name, kind):
    """Was a ParameterError ("must be an integer >= 0 ..."). A generator gives the fit the
    seed it draws; int and None are read as before."""
    make, X = LEARNERS[name]
    new = (lambda: np.random.default_rng(5)) if kind == "generator" else (lambda: np.random.RandomState(5))
    g = new()
    est = make(g)
    first = _ll(est.fit(X), X)
    assert est.random_state is g and est.get_params()["random_state"] is g
    ref = new()
    seed = int(ref.integers(2**63)) if kind == "generator" else int(ref.randint(2**63 - 1, dtype=np.int64))
    assert np.array_equal(first, _ll(make(seed).fit(X), X))
    again = make(new())
    assert np.array_equal(first, _ll(again.fit(X), X))               # reproducible from the same state
    if name in ("learnspn", "bagged"):                               # whose models depend on the seed
        assert not np.array_equal(first, _ll(est.fit(X), X))         # the generator moved on


def test_a_generator_in_partial_fit_and_a_saved_oslrau():
    g = np.random.default_rng(7)
    est = OSLRAU(batch_size=10, random_state=g).partial_fit(REAL[:150])
    seed = int(np.random.default_rng(7).integers(2**63))
    assert est.spn_.learner["params"]["random_state"] == seed       # the drawn seed, JSON and resumable
    back = OSLRAU.resume(est.spn_).partial_fit(REAL[150:])
    ref = OSLRAU(batch_size=10, random_state=seed).partial_fit(REAL[:150]).partial_fit(REAL[150:])
    assert np.array_equal(_ll(back, REAL), _ll(ref, REAL))


def test_em_takes_a_generator():
    init = LearnSPN("correlation", min_instances=30, random_state=0).fit(REAL).spn_
    a = EM(init=init, variant="online", batch_size=50, max_iter=2, random_state=np.random.default_rng(1)).fit(REAL)
    b = EM(init=init, variant="online", batch_size=50, max_iter=2,
           random_state=int(np.random.default_rng(1).integers(2**63))).fit(REAL)
    assert np.array_equal(_ll(a, REAL), _ll(b, REAL))


def test_other_random_states_are_still_refused():
    with pytest.raises(ParameterError, match=r"random_state must be an integer >= 0 and <= 2\*\*64 - 1, a numpy "
                                             r"Generator or a RandomState or None, got 'x'"):
        LearnSPN(random_state="x").fit(REAL)


def test_clone_keeps_a_generator():
    base = pytest.importorskip("sklearn.base")
    g = np.random.default_rng(3)
    est = LearnSPN("correlation", min_instances=30, random_state=g)
    twin = base.clone(est)
    assert isinstance(twin.random_state, np.random.Generator) and twin.random_state is not g
    assert np.array_equal(_ll(twin.fit(REAL), REAL), _ll(est.fit(REAL), REAL))    # a copy of the same state


@pytest.mark.parametrize("kind", ["generator", "randomstate"])
def test_sample_takes_a_generator(kind):
    """``seed`` of SPN.sample and est.sample took integers only (ParameterError). A generator
    draws the seed, as random_state does: the same rows as that integer, then new ones."""
    est = ChowLiuTree().fit(CODES)
    spn = est.spn_
    new = (lambda: np.random.default_rng(7)) if kind == "generator" else (lambda: np.random.RandomState(7))
    ref = new()
    seed = int(ref.integers(2**63)) if kind == "generator" else int(ref.randint(2**63 - 1, dtype=np.int64))
    g = new()
    first = spn.sample(50, seed=g)
    assert np.array_equal(first, spn.sample(50, seed=seed))
    assert not np.array_equal(first, spn.sample(50, seed=g))          # the generator moved on
    assert np.array_equal(est.sample(50, seed=new()), first)
    ev = np.full((5, CODES.shape[1]), np.nan)
    ev[:, 0] = 1
    assert np.array_equal(spn.sample(evidence=ev, seed=new()), spn.sample(evidence=ev, seed=seed))


@pytest.mark.parametrize("bad", [1.5, "3", -1, 2**64, True])
def test_sample_refuses_other_seeds(bad):
    spn = ChowLiuTree().fit(CODES).spn_
    with pytest.raises(ParameterError, match="seed must be an integer"):
        spn.sample(5, seed=bad)
