"""Bagged ensembles (spnc.learn.BaggedSPN): one SPN under a latent sum, deterministic
across processes, weights, out-of-bag validation, merging as a whole."""
from __future__ import annotations

import os
import re
import time

import numpy as np
import pytest

import spnc
from spnc import ParameterError
from spnc.learn import OSLRAU, BaggedSPN, ChowLiuTree, LearnSPN, Merge

from conftest import merge_data


@pytest.fixture(scope="module")
def small():
    return merge_data(seed=5, n=450, d=5)


def test_bagged_spn_is_one_spn_and_deterministic_across_n_jobs(small):
    X, Xv = small
    base = LearnSPN(splitter="mi_components", sum_split="latent", leaves="chowliu", min_instances=20)
    pd = {"mi_threshold": [0.001, 0.01], "max_depth": [2, 3, 4]}
    a = BaggedSPN(base, n_bags=3, param_distributions=pd, random_state=7).fit(X)
    b = BaggedSPN(base, n_bags=3, param_distributions=pd, random_state=7, n_jobs=2).fit(X)
    assert a.spn_.combine == "single" and a.spn_.kind[a.spn_.root] == 0
    assert len(a.spn_.children(a.spn_.root)) == 3
    assert a.bag_params_ == b.bag_params_
    assert np.array_equal(a.spn_.log_likelihood(Xv), b.spn_.log_likelihood(Xv))
    assert np.allclose(a.bag_weights_.sum(), 1.0)
    c = BaggedSPN(base, n_bags=3, param_distributions=pd, random_state=8).fit(X)
    assert not np.array_equal(a.spn_.log_likelihood(Xv), c.spn_.log_likelihood(Xv))


def test_bagged_spn_merged_as_a_whole(small):
    X, Xv = small
    base = LearnSPN(splitter="mi_components", sum_split="observed", leaves="univariate", min_instances=20)
    bag = BaggedSPN(base, n_bags=3, param_distributions={"max_depth": [2, 3]}, random_state=1,
                    merge=Merge(epsilon=[0.05, 0.2])).fit(X, X_valid=Xv)
    assert bag.merge_ is not None
    assert bag.spn_.log_likelihood(Xv).mean() >= bag.ensemble_.log_likelihood(Xv).mean() - 1e-9
    assert bag.spn_.n_nodes <= bag.ensemble_.n_nodes


def test_bagged_spn_weights(small):
    X, Xv = small
    base = LearnSPN(splitter="mi_components", sum_split="latent", leaves="chowliu", min_instances=20)
    pd = {"mi_threshold": [0.001, 0.01], "max_depth": [2, 3, 4]}
    fits = {w: BaggedSPN(base, n_bags=3, param_distributions=pd, weights=w, random_state=7)
            .fit(X, X_valid=Xv if w == "valid" else None)
            for w in ("train", "uniform", "valid")}
    assert np.allclose(fits["uniform"].bag_weights_, 1 / 3)
    # the same bags; validation weights are the maximum-likelihood mixture on X_valid
    models = [spnc.compile(c, n_vars=X.shape[1]) for c in fits["train"].ensemble_.to_nodes().children]
    L = np.column_stack([m.log_likelihood(Xv) for m in models])
    mix = lambda w: np.log(np.exp(L) @ w).mean()  # noqa: E731
    best = mix(fits["valid"].bag_weights_)
    assert best >= max(mix(fits["train"].bag_weights_), mix(fits["uniform"].bag_weights_)) - 1e-9
    assert fits["valid"].spn_.log_likelihood(Xv).mean() == pytest.approx(best, abs=1e-9)
    with pytest.raises(spnc.DataError, match="X_valid"):
        BaggedSPN(base, n_bags=2, weights="valid").fit(X)


def test_bagged_spn_out_of_bag_validation(small):
    """With oob_valid each bag is its learner fitted with the rows its sample missed as
    X_valid (TreeSPN: EM stops on them); X_valid of fit never reaches the bags."""
    X, Xv = small
    from spnc.learn import TreeSPN
    base = TreeSPN(n_trees=2, max_depth=2, min_instances=40, em_max_iter=6, patience=1)
    pd = {"em_alpha": [0.1, 1.0]}
    with pytest.warns(UserWarning, match="X_valid is not used"):
        bag = BaggedSPN(base, n_bags=2, param_distributions=pd, oob_valid=True, weights="uniform",
                        random_state=3).fit(X, X_valid=Xv)
    assert bag.spn_.learner["params"]["oob_valid"] is True
    bags = [spnc.compile(c, n_vars=X.shape[1]) for c in bag.ensemble_.to_nodes().children]
    for (params, rows), got in zip(bag._bag_plans(X), bags):
        out = np.setdiff1d(np.arange(len(X)), rows)
        assert 0 < len(out) < len(X)
        want = TreeSPN(**params).fit(X[rows], X_valid=X[out]).spn_
        assert np.allclose(got.log_likelihood(Xv), want.log_likelihood(Xv), rtol=0, atol=1e-10)
    with pytest.raises(ParameterError, match="oob_valid=True needs a base learner whose fit takes X_valid"):
        BaggedSPN(spnc.learn.ChowLiuTree(), n_bags=2, oob_valid=True).fit(X)


def test_bagged_spn_bad_parameters(small):
    X, _ = small
    with pytest.raises(ParameterError, match="param_distributions"):
        BaggedSPN(LearnSPN(), n_bags=2, param_distributions={"bogus": [1]}).fit(X)
    with pytest.raises(ParameterError, match="BaggedSPN: base_learner must be"):
        BaggedSPN(None).fit(X)
    with pytest.raises(ParameterError, match="BaggedSPN: n_jobs must be"):
        BaggedSPN(LearnSPN(), n_jobs=0).fit(X)


@pytest.mark.parametrize("base", [LearnSPN(), ChowLiuTree(), OSLRAU()], ids=lambda b: type(b).__name__)
@pytest.mark.parametrize("n_jobs", [None, 2])
def test_bagged_spn_errors_name_the_row_of_x_not_of_the_sample(base, n_jobs):
    X = np.random.default_rng(0).integers(0, 2, size=(50, 4)).astype(float)
    X[37, 2] = np.inf if isinstance(base, OSLRAU) else np.nan
    with pytest.raises(spnc.errors.DataError) as e:
        BaggedSPN(base, n_bags=2, random_state=0, n_jobs=n_jobs).fit(X)
    assert "X[37, 2]" in str(e.value) and re.search("bag [12] of 2", str(e.value))


class _FailsOnSeven(LearnSPN):
    def fit(self, X, y=None, X_valid=None):
        if self.min_instances == 7:
            raise ValueError("min_instances=7 fails")
        return super().fit(X, y, X_valid)


def test_other_errors_of_a_bag_name_it_in_a_note():
    # was: only a DataError named its bag; any other error of a bag's learner did not
    X = np.random.default_rng(0).integers(0, 2, size=(60, 3)).astype(float)
    bag = BaggedSPN(_FailsOnSeven(g_factor=5.0), n_bags=4, param_distributions={"min_instances": [20, 7]},
                    random_state=1)
    first = [p["min_instances"] for p, _ in bag._bag_plans(X)].index(7)
    with pytest.raises(ValueError, match="min_instances=7 fails") as e:
        bag.fit(X)
    assert e.value.__notes__ == [f"BaggedSPN: raised by bag {first + 1} of 4"]


class _FirstToStartFails(LearnSPN):
    """The first bag to start (in any process) fails; the others take 2 s. Bags log to the
    directory $SPNC_TEST_BAG_LOG."""

    def fit(self, X, y=None, X_valid=None):
        log = os.environ["SPNC_TEST_BAG_LOG"]
        try:
            os.close(os.open(os.path.join(log, "failed"), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            open(os.path.join(log, f"start-{self.random_state}"), "w").close()
            time.sleep(2.0)
            open(os.path.join(log, f"done-{self.random_state}"), "w").close()
            return super().fit(X, y, X_valid)
        raise spnc.errors.DataError("the first bag to start fails")


def test_a_failed_bag_in_a_process_is_raised_without_waiting_for_the_others(tmp_path, monkeypatch):
    # was: the error was raised only after every other bag had been fitted
    monkeypatch.setenv("SPNC_TEST_BAG_LOG", str(tmp_path))     # the spawned processes inherit it
    X = np.random.default_rng(0).integers(0, 2, size=(60, 3)).astype(float)
    with pytest.raises(spnc.errors.DataError, match=r"^BaggedSPN, bag [1-8] of 8: the first bag to start fails"):
        BaggedSPN(_FirstToStartFails(g_factor=5.0), n_bags=8, n_jobs=2, random_state=0).fit(X)
    assert not [f for f in os.listdir(tmp_path) if f.startswith("done")]     # none waited for


def test_bags_queued_in_a_process_pool_do_not_start_after_a_failure(tmp_path, monkeypatch):
    # was: the up to n_jobs + 1 bags already handed to the processes ran to the end after
    # the error, and the interpreter waited for them at exit
    monkeypatch.setenv("SPNC_TEST_BAG_LOG", str(tmp_path))
    X = np.random.default_rng(0).integers(0, 2, size=(60, 3)).astype(float)
    with pytest.raises(spnc.errors.DataError, match="the first bag to start fails"):
        BaggedSPN(_FirstToStartFails(g_factor=5.0), n_bags=8, n_jobs=2, random_state=0).fit(X)
    time.sleep(3.0)     # what still runs ends: at most the bag the other process had started
    assert len([f for f in os.listdir(tmp_path) if f.startswith("start")]) <= 1


def test_bagged_spn_out_of_bag_errors_name_the_row_of_x():
    """A bad value in a bag's out-of-bag validation rows is named by its row of X, not by
    its place among the rows the sample missed."""
    from spnc.learn import TreeSPN
    X = np.random.default_rng(0).integers(0, 2, size=(60, 3)).astype(float)
    bag = BaggedSPN(TreeSPN(), n_bags=1, oob_valid=True, random_state=0)
    missed = np.setdiff1d(np.arange(len(X)), bag._bag_plans(X)[0][1])
    X[missed[3], 1] = np.inf
    with pytest.raises(spnc.errors.DataError, match=rf"bag 1 of 1 \(its X_valid: .*\): X\[{missed[3]}, 1\] = inf"):
        bag.fit(X)


def test_resampled_rows_nest_and_leave_other_data_alone():
    from spnc._sweep import cell, resampled_rows, row_number
    with resampled_rows(np.array([5, 5, 9, 12])):
        assert row_number(0, 2) == 9 and row_number(np.array([3, 0]), 0) == 12
        assert row_number(1, 1, "X_valid") == 2          # not the training rows
        assert cell("X_valid", 1, 1, 0) == "X_valid[2, 0]" and cell("X", 0, 2) == "X row 9"
        with resampled_rows(np.array([3, 3, 1])):
            assert row_number(0, 2) == 5
    assert row_number(0, 2) == 2
    with resampled_rows(np.array([5, 5]), np.array([1, 7])):
        assert row_number(0, 1, "X_valid") == 7 and cell("X_valid", 0, 1, 3) == "X[7, 3]"


@pytest.mark.parametrize("v, why", [(-1, "is negative"), (2.0**63, "too large a state")])
def test_bagged_spn_leaves_bad_codes_to_the_bags_check(v, why):
    X = np.random.default_rng(0).integers(0, 2, size=(40, 3)).astype(float)
    X[:, 1] = v                                   # in every bootstrap sample
    with pytest.raises(spnc.errors.DataError, match=rf"bag 1 of 2: X\[0, 1\] = .* {why}"):
        BaggedSPN(LearnSPN(), n_bags=2, random_state=0).fit(X)
    with pytest.raises(spnc.errors.DataError, match=r"^X must be a non-empty 2-D array .* \(40, 0\)"):
        BaggedSPN(LearnSPN(), n_bags=2).fit(np.zeros((40, 0)))


def test_bagged_spn_names_a_bad_draw_before_fitting():
    X = np.random.default_rng(0).integers(0, 2, size=(40, 3)).astype(float)
    draws = iter([10, -5])
    with pytest.raises(ParameterError, match=r"^BaggedSPN: param_distributions drew min_instances=-5 for bag 2: "
                                             r"LearnSPN: min_instances must be"):
        BaggedSPN(LearnSPN(), n_bags=2, param_distributions={"min_instances": lambda r: next(draws)}).fit(X)


def test_bags_in_processes_inside_a_joblib_worker():
    """GridSearchCV(n_jobs=2) runs fit in loky workers, whose default start method is loky's:
    the bags' spawned processes inherited it and died before fitting."""
    joblib = pytest.importorskip("joblib")
    X = np.random.default_rng(0).integers(0, 2, size=(80, 3)).astype(float)
    est = BaggedSPN(ChowLiuTree(), n_bags=2, n_jobs=2, random_state=0)
    [inner] = joblib.Parallel(n_jobs=2, backend="loky")([joblib.delayed(lambda e: e.fit(X).spn_)(est)])
    here = BaggedSPN(ChowLiuTree(), n_bags=2, random_state=0).fit(X).spn_
    np.testing.assert_array_equal(inner.log_likelihood(X), here.log_likelihood(X))
