"""Gaussian leaves at extreme scales: sampling near the float maximum, EM statistics that
neither overflow nor warn, and the bound on real training data EM shares with the learners."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import spnc
import spnc.io
from spnc import Gaussian, Sum
from spnc.errors import DataError
from spnc.learn.em import EM

pytestmark = pytest.mark.filterwarnings("error")


def test_samples_near_the_float_maximum_are_finite():
    s = spnc.compile(Gaussian(0, 0.0, 1.5e308)).sample(64, seed=0)
    assert np.isfinite(s).all()
    mv = spnc.compile(spnc.MultivariateGaussian([0, 1], [1.7e308, 0.0], [[1e300, 0], [0, 1]]))
    assert np.isfinite(mv.sample(64, seed=0)).all()


def test_eval_reads_back_the_samples_it_wrote(tmp_path):
    from spnc.cli import evaluate
    m = tmp_path / "m.h5"
    spnc.io.save(spnc.compile(Gaussian(0, 0.0, 1.5e308)), m)
    out = tmp_path / "s.csv"
    assert evaluate.main([str(m), "--sample", "16", "--seed", "0", "--out", str(out), "-q"]) in (0, None)
    assert evaluate.main([str(m), str(out), "-q", "--out-ll", str(tmp_path / "ll.npy")]) in (0, None)
    assert np.isfinite(np.load(tmp_path / "ll.npy")).all()


def _mix(m0, s0, m1, s1):
    return spnc.compile(Sum([Gaussian(0, m0, s0), Gaussian(0, m1, s1)], [.5, .5]))


def test_em_refuses_data_beyond_the_gaussian_bound():
    X = np.random.default_rng(0).normal(0, 1e200, (100, 1))
    with pytest.raises(DataError, match=r"X\[0, 0\].*1e\+150"):
        EM(init=_mix(0, 1e200, 1e200, 1e200), max_iter=5).fit(X)
    blocks = [X[:50], X[50:]]
    with pytest.raises(DataError, match=r"X\[0, 0\].*1e\+150"):
        EM(init=_mix(0, 1e200, 1e200, 1e200), max_iter=5).fit(blocks)
    # a Bernoulli column next to it is not bounded, nor is a missing value
    spn = spnc.compile(spnc.Product([Gaussian(0, 0, 1), spnc.Bernoulli(1, .5)]))
    Xm = np.array([[0.5, 1.0], [np.nan, 0.0], [3.0, np.nan]])
    EM(init=spn, max_iter=2).fit(Xm)


@pytest.mark.parametrize("variant", ["soft", "hard", "online"])
def test_em_with_huge_leaf_parameters_learns_without_warnings(variant):
    X = np.random.default_rng(1).normal(0, 1e140, (200, 1))
    em = EM(init=_mix(0, 1e200, 1e200, 1e200), max_iter=4, variant=variant).fit(X)
    h = em.history_["train"]
    assert np.isfinite(h).all() and h[-1] > h[0] + 100      # from std 1e200 to about 1e140
    p = em.spn_.leaf_tables["gaussian"].params
    assert np.isfinite(p["mean"]).all() and np.isfinite(p["std"]).all()


def test_em_with_tiny_std_and_tiny_floor():
    X = np.random.default_rng(2).normal(0, 1, (100, 1))
    em = EM(init=_mix(0, 1e-300, 1, 1), max_iter=4).fit(X)
    assert np.isfinite(em.history_["train"]).all()
    # min_std ** 2 underflows to 0: a constant column still gets std = min_std, not a refusal
    em = EM(init=_mix(0, 1, 1, 1), max_iter=3, min_std=1e-200).fit(np.zeros((20, 1)))
    std = em.spn_.leaf_tables["gaussian"].params["std"]
    assert np.all(std == 1e-200)


def test_em_tiny_scale_matches_scipy():
    X = np.random.default_rng(3).normal(2e-150, 1e-150, (300, 1))
    em = EM(init=_mix(0, 1e-150, 3e-150, 1e-150), max_iter=30, min_std=1e-170).fit(X)
    assert em.history_["train"][-1] > em.history_["train"][0]
    p = em.spn_.leaf_tables["gaussian"].params
    root = em.spn_.roots[0]
    w = em.spn_.weight[em.spn_.child_ptr[root]:em.spn_.child_ptr[root + 1]]
    ref = np.logaddexp(np.log(w[0]) + stats.norm.logpdf(X[:, 0], p["mean"][0], p["std"][0]),
                       np.log(w[1]) + stats.norm.logpdf(X[:, 0], p["mean"][1], p["std"][1]))
    np.testing.assert_allclose(em.spn_.log_likelihood(X), ref, rtol=1e-10)


def test_gaussian_score_matches_scipy():
    from spnc.leaves.univariate import _GaussianStats
    rng = np.random.default_rng(4)
    x, r = rng.normal(3, 2, 50), rng.uniform(0.1, 1, 50)
    table = spnc.compile(Gaussian(0, 1.0, 1.5)).leaf_tables["gaussian"]
    h = _GaussianStats(table, 0.0, 1e-3, 1)
    s = h.zero()
    s["w"][:] = r.sum()
    s["sd"][:] = np.sum(r * (x - s["center"]))
    s["sdd"][:] = np.sum(r * (x - s["center"]) ** 2)
    for mean, std in [(1.0, 1.5), (3.0, 2.0), (-4.0, 0.5)]:
        want = np.sum(r * stats.norm.logpdf(x, mean, std))
        got = h.score({"mean": np.array([mean]), "std": np.array([std])}, s)
        np.testing.assert_allclose(got, [want], rtol=1e-12)


@pytest.mark.parametrize("streamed", [False, True])
def test_em_m_step_exact_when_data_are_far_from_the_leaf(streamed):
    # moments centred on the old mean 0 lost the spread of data around 1e9 (std 50 after
    # one pass, not 0.98); at 1e-150 a leaf at mean 1 collapsed to mean 0 and the std floor
    X = np.random.default_rng(5).normal(1e9, 1, (1000, 1))
    em = EM(init=spnc.compile(Gaussian(0, 0, 1e9)), max_iter=1).fit([X[:500], X[500:]] if streamed else X)
    p = em.spn_.leaf_tables["gaussian"].params
    np.testing.assert_allclose([p["mean"][0], p["std"][0]], [X.mean(), X.std()], rtol=1e-9)
    Y = np.random.default_rng(6).normal(0, 1e-150, (100, 1))
    em = EM(init=_mix(0, 1, 1, 1), max_iter=3, min_std=1e-160).fit([Y[:50], Y[50:]] if streamed else Y)
    std = em.spn_.leaf_tables["gaussian"].params["std"]
    np.testing.assert_allclose(std, Y.std(), rtol=1e-6)


def test_em_multivariate_m_step_exact_when_data_are_far_from_the_leaf():
    X = np.random.default_rng(7).normal(1e9, 1, (1000, 2))
    init = spnc.compile(spnc.MultivariateGaussian([0, 1], [0, 0], np.eye(2) * 1e18))
    em = EM(init=init, max_iter=1, min_std=1e-9).fit(X)
    cov = em.spn_.leaf_tables["mvgaussian"].params["cov"].reshape(2, 2)
    np.testing.assert_allclose(cov, np.cov(X.T, bias=True), rtol=1e-6, atol=1e-9)


def test_online_em_is_shift_invariant():
    X = np.random.default_rng(8).normal(0, 1, (1000, 1))
    kw = dict(max_iter=3, variant="online", batch_size=100, random_state=0)
    far = EM(init=spnc.compile(Gaussian(0, 0, 1e9)), **kw).fit(X + 1e9).spn_.leaf_tables["gaussian"].params
    near = EM(init=spnc.compile(Gaussian(0, 0, 1)), **kw).fit(X).spn_.leaf_tables["gaussian"].params
    np.testing.assert_allclose(far["std"], near["std"], rtol=1e-6)


@pytest.mark.parametrize("mean, std, x", [(1e308, 1e308, -1e308), (-1.5e308, 1e308, 1.5e308),
                                          (0, 1e-300, 1e-300), (0, 1e300, -1e300), (0, 5e-324, 0)])
def test_gaussian_log_density_at_the_float_extremes(mean, std, x):
    m = spnc.compile(Gaussian(0, mean, std))
    want = stats.norm.logpdf(x / std - mean / std) - np.log(std)
    np.testing.assert_allclose(m.log_likelihood(np.array([[x]])), [want], rtol=1e-12)


@pytest.mark.parametrize("scale", [1e-20, 1e-150])
@pytest.mark.parametrize("learner", ["learnspn", "prometheus"])
def test_structure_learners_do_not_depend_on_the_data_scale(scale, learner):
    from spnc.learn import LearnSPN, Prometheus
    X = np.random.default_rng(9).normal(size=(200, 10))
    X[:, 1] += X[:, 0]
    X[:, 5] -= X[:, 4]
    X[:, 7] += 2 * X[:, 6]
    X[:, 3] = 2.5                      # a constant column stays constant at every scale

    def fit(s):
        if learner == "learnspn":
            est = LearnSPN(splitter="correlation", data_type="continuous", min_std=1e-2 * s, random_state=0)
        else:
            est = Prometheus(data_type="continuous", min_std=1e-2 * s, random_state=0)
        return est.fit(X * s).spn_

    a, b = fit(1.0), fit(scale)
    assert a.n_nodes == b.n_nodes      # at 1e-20 every column looked constant: LearnSPN split none
    np.testing.assert_allclose(b.log_likelihood(X * scale) + 10 * np.log(scale), a.log_likelihood(X), rtol=1e-6)


def test_constant_data_do_not_redo_every_pass(monkeypatch):
    # a leaf a few ulps off constant data has variance 0 and an offset of rounding size:
    # recentring cannot help, so no pass is redone
    calls = []
    real = EM._estep
    monkeypatch.setattr(EM, "_estep", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    init = _mix(7.000000000000001, 1, 7.0, 2)
    EM(init=init, max_iter=5, tol=-np.inf).fit(np.full((50, 1), 7.0))
    assert len(calls) == 6              # five passes and the final objective
    calls.clear()
    mv = spnc.compile(spnc.MultivariateGaussian([0, 1], [7.000000000000001, 3.0], np.eye(2)))
    EM(init=mv, max_iter=5, tol=-np.inf).fit(np.tile([7.0, 3.0], (50, 1)))
    assert len(calls) == 6


def test_weighted_fit_floors_the_std_not_the_variance():
    t = _mix(0, 1, 1, 1).leaf_tables["gaussian"]
    t.weighted_fit(np.full((10, 1), 3.0), np.full((10, 2), 0.5), min_std=1e-200)
    assert np.all(t.params["std"] == 1e-200)        # was 0: min_std ** 2 underflowed


def _heavy_far_data():
    """Much weight near +1e150 seen from a leaf at -1e150: sums of squared offsets
    (~4e300 a unit of weight) overflow unless EM takes a smaller unit of weight."""
    rng = np.random.default_rng(0)
    X = (0.99e150 + 1e147 * rng.normal(size=2000))[:, None]
    w = np.full(2000, 1e6)
    z = X[:, 0] / 1e150         # expected moments, computed at unit scale
    return X, w, 1e150 * z.mean(), 1e150 * z.std()


@pytest.mark.parametrize("variant", ["soft", "hard", "online"])
@pytest.mark.parametrize("streamed", [False, True])
def test_em_fits_heavy_weight_near_the_gaussian_bound(variant, streamed):
    X, w, mean, std = _heavy_far_data()
    data = [X[:700], X[700:]] if streamed else X
    for spn in (spnc.compile(Gaussian(0, -1e150, 1e149)),
                spnc.compile(spnc.MultivariateGaussian([0], [-1e150], [[1e298]]))):
        em = EM(init=spn, max_iter=1, variant=variant, batch_size=5000).fit(data, sample_weight=w)
        (t,) = em.spn_.leaf_tables.values()
        p = t.params
        got_std = p["std"][0] if "std" in p else np.sqrt(p["cov"][0])
        assert p["mean"][0] == pytest.approx(mean, rel=1e-12)
        assert got_std == pytest.approx(std, rel=1e-9)


@pytest.mark.parametrize("seed", [1, 3])
def test_online_em_scales_a_light_batch_without_overflow(seed):
    # a batch of the two light rows at +-1e150 stands for all the weight (4e8 / 2 times its
    # own): scaled, its sum of squares (2e300) overflows unless its unit of weight shrinks
    X = np.array([[1e150], [-1e150], [0.0]])
    em = EM(init=spnc.compile(Gaussian(0, 0.0, 1e149)), max_iter=1, variant="online", batch_size=2,
            random_state=seed).fit(X, sample_weight=np.array([1.0, 1.0, 4e8]))
    p = em.spn_.leaf_tables["gaussian"].params
    assert np.isfinite(p["std"][0]) and p["std"][0] > 1e149


def test_gaussian_weighted_fit_with_heavy_weight_near_the_bound():
    X, w, mean, std = _heavy_far_data()
    for t in (spnc.compile(Gaussian(0, -1e150, 1e149)).leaf_tables["gaussian"],
              spnc.compile(spnc.MultivariateGaussian([0], [-1e150], [[1e298]])).leaf_tables["mvgaussian"]):
        t.weighted_fit(X, w[:, None] * 1e100, min_std=1e-3, min_var=1e-6)
        got_std = t.params["std"][0] if "std" in t.params else np.sqrt(t.params["cov"][0])
        assert t.params["mean"][0] == pytest.approx(mean, rel=1e-12)
        assert got_std == pytest.approx(std, rel=1e-9)


def test_overflowed_statistics_warn_naming_the_leaf():
    spn = spnc.compile(Sum([Gaussian(3, 0.0, 1.0), Gaussian(3, 1.0, 1.0)], [.5, .5]))
    t = spn.leaf_tables["gaussian"]
    h = t.em_stats()
    s = h.zero()
    s["w"][:] = 10.0
    s["sdd"][1] = np.inf
    with pytest.warns(UserWarning, match=rf"node {int(t.node[1])} \(gaussian leaf on variables \[3\]\).*overflowed"):
        new = h.fit(s)
    assert new["mean"][1] == 1.0 and new["std"][1] == 1.0
