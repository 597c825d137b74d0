"""oSLRAU's online choices: prequential scoring, one-pass selection, the paper's variance
floor, the size cap and the automatic batch size."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import DataError, ParameterError
from spnc.learn import OSLRAU
from spnc.learn.oslrau import AUTO_CANDIDATES, auto_batch_size

from test_oslrau import correlated


@pytest.mark.parametrize("floor", ["always", "creation"])
def test_prequential_score_is_test_then_train(floor):
    X = correlated(400, d=4, seed=3)
    m = OSLRAU(batch_size=8, min_merge_points=20, variance_floor=floor, random_state=0)
    ref = OSLRAU(batch_size=8, min_merge_points=20, variance_floor=floor, random_state=0)
    total = 0.0
    for r0 in range(0, len(X), 8):          # score each batch with the compiled model first
        ref._start(X.shape[1])
        total += ref.spn_.log_likelihood(X[r0:r0 + 8]).sum()
        ref.partial_fit(X[r0:r0 + 8])
    m.fit(X)
    assert m.n_seen_ == len(X) and len(m.spn_.kind) == len(ref.spn_.kind)
    np.testing.assert_allclose(m.prequential_ll_, total / len(X), rtol=1e-10)


def test_paper_floor_applies_at_creation_only():
    X = correlated(600, d=4, seed=4)
    X[:, 3] = np.round(X[:, 3])               # a few repeated values: variances may shrink
    m = OSLRAU(batch_size=4, min_merge_points=20, variance_floor="creation", min_var=0.05, random_state=0).fit(X)
    a = OSLRAU(batch_size=4, min_merge_points=20, min_var=0.05, random_state=0).fit(X)
    assert m.spn_.n_nodes != a.spn_.n_nodes or not np.allclose(m.score_samples(X), a.score_samples(X))
    ll = m.score_samples(X)
    assert np.all(np.isfinite(ll))


def test_select_keeps_the_best_candidate_in_one_pass(tmp_path):
    X = correlated(800, d=4, seed=5)
    sel = OSLRAU(batch_size=4, min_merge_points=20, select="auto", random_state=0).fit(X)
    rec = sel.selection_
    assert rec["candidates"] == [dict(c) for c in AUTO_CANDIDATES]
    assert rec["selected"] == int(np.argmax(rec["prequential_ll"]))
    alone = OSLRAU(batch_size=4, min_merge_points=20, random_state=0,
                   **AUTO_CANDIDATES[rec["selected"]]).fit(X)
    assert sel.prequential_ll_ == pytest.approx(alone.prequential_ll_, rel=1e-12)
    np.testing.assert_array_equal(sel.score_samples(X), alone.score_samples(X))
    assert sel.get_params()["select"] == "auto"          # parameters are not rewritten
    path = tmp_path / "sel.h5"
    spnc.save(sel.spn_, path)
    back = OSLRAU.resume(path)
    assert back.selection_["selected"] == rec["selected"]
    more = correlated(100, d=4, seed=6)
    np.testing.assert_array_equal(back.partial_fit(more).score_samples(X), alone.partial_fit(more).score_samples(X))
    np.testing.assert_array_equal(sel.partial_fit(more).score_samples(X), alone.score_samples(X))


def test_partial_fit_before_fit_refuses_select():
    with pytest.raises(ParameterError, match="select.*fit"):      # it would run the base settings
        OSLRAU(select="auto").partial_fit(correlated(50))


def test_select_refuses_unknown_settings():
    with pytest.raises(ParameterError, match="select"):
        OSLRAU(select=[{"bogus": 1}]).fit(correlated(50))
    with pytest.raises(ParameterError, match=r"^OSLRAU: select\[1\] = \{'correlation_threshold': 5\}: OSLRAU: "
                                             r"correlation_threshold must be"):
        OSLRAU(select=[{}, {"correlation_threshold": 5}]).fit(correlated(50))


def test_size_cap_stops_structure_learning():
    X = correlated(3000, d=6, seed=7)
    free = OSLRAU(batch_size=2, min_merge_points=10, max_nodes=None, random_state=0).fit(X)
    capped = OSLRAU(batch_size=2, min_merge_points=10, max_nodes=60, random_state=0).fit(X)
    assert free.spn_.n_nodes > 100
    assert capped.spn_.n_nodes <= 60 + 4 * X.shape[1]      # one call's merges may overshoot a little
    assert capped.n_seen_ == len(X)


def test_auto_batch_size():
    assert [auto_batch_size(n) for n in (0, 4095, 4096, 8191, 8192, 10**6)] == [1, 1, 2, 2, 4, 256]
    X = correlated(5000, d=3, seed=8)
    auto = OSLRAU(min_merge_points=30, random_state=0).fit(X)
    manual = OSLRAU(batch_size=1, min_merge_points=30, random_state=0).partial_fit(X[:4096])
    manual.set_params(batch_size=2).partial_fit(X[4096:])
    np.testing.assert_array_equal(auto.score_samples(X), manual.score_samples(X))


def test_fit_needs_rows():
    with pytest.raises(DataError, match="no rows"):
        OSLRAU().fit(np.zeros((0, 3)))
    with pytest.raises(DataError):
        OSLRAU().fit([])


@pytest.mark.parametrize("after, leader_wins", [(1000, False), (2000, True)])
def test_race_keeps_exactly_what_the_leader_gives_alone(after, leader_wins):
    X = correlated(3000, d=4, seed=9)
    X[:, 3] = np.round(X[:, 3], 1)                 # repeated values: the floors differ
    kw = dict(batch_size=4, min_merge_points=20, select="auto", random_state=0)
    full = OSLRAU(race_after=None, **kw).fit(X)
    race = OSLRAU(race_after=after, **kw).fit(X)
    rec, frec = race.selection_, full.selection_
    assert rec["decided_at"] == after and frec["decided_at"] is None
    # the scores at the decision point are those of each candidate alone on those points
    at = [OSLRAU(batch_size=4, min_merge_points=20, random_state=0, **c).fit(X[:after]).prequential_ll_
          for c in AUTO_CANDIDATES]
    assert rec["prequential_ll_at_decision"] == at
    assert rec["selected"] == int(np.argmax(at))
    assert [s is not None for s in rec["prequential_ll"]] == [i == rec["selected"] for i in range(4)]
    alone = OSLRAU(batch_size=4, min_merge_points=20, random_state=0,
                   **AUTO_CANDIDATES[rec["selected"]]).fit(X)
    for key in ("kind", "count", "mean", "cov", "child"):
        np.testing.assert_array_equal(race.spn_.learner["arrays"][key], alone.spn_.learner["arrays"][key])
    np.testing.assert_array_equal(race.score_samples(X), alone.score_samples(X))
    assert (frec["selected"] == rec["selected"]) == leader_wins
    if leader_wins:                                # same model as the full contest's
        np.testing.assert_array_equal(race.score_samples(X), full.score_samples(X))
        assert race.prequential_ll_ == full.prequential_ll_


def test_race_with_auto_batches_and_chunks_is_recorded(tmp_path):
    X = correlated(6000, d=3, seed=10)
    m = OSLRAU(min_merge_points=30, select=[{}, {"spaced_merges": True}], race_after=4500,
               random_state=0).fit(X)
    assert m.selection_["decided_at"] == 4608        # rounded up to 256 rows (batch "auto")
    alone = OSLRAU(min_merge_points=30, random_state=0,
                   **m.selection_["candidates"][m.selection_["selected"]]).fit(X)
    np.testing.assert_array_equal(m.score_samples(X), alone.score_samples(X))
    path = tmp_path / "race.h5"
    spnc.save(m.spn_, path)
    back = OSLRAU.resume(path)
    assert back.selection_["decided_at"] == 4608 and back.get_params()["race_after"] == 4500
    chunks = OSLRAU(batch_size=10, select="auto", race_after=25, random_state=0).fit(
        [X[i:i + 20] for i in range(0, 200, 20)])
    assert chunks.selection_["decided_at"] == 40      # iterables: at the end of a chunk


@pytest.mark.filterwarnings("ignore::spnc.ScaleWarning")       # min_var=0.5: a floor above a column's spread
def test_refit_without_select_forgets_the_earlier_choice():
    X = correlated(600, d=4, seed=8)
    est = OSLRAU(batch_size=4, min_merge_points=20, select=[{"min_var": 0.5}, {"min_var": 1e-6}],
                 race_after=None, random_state=0).fit(X)
    other = 0.5 if est.selection_["selected"] == 1 else 1e-6
    est.set_params(select=None, min_var=other).fit(X)
    alone = OSLRAU(batch_size=4, min_merge_points=20, min_var=other, race_after=None, random_state=0).fit(X)
    np.testing.assert_array_equal(est.score_samples(X), alone.score_samples(X))
    assert not hasattr(est, "selection_") and est.spn_.learner["params"]["min_var"] == other
