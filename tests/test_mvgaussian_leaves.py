"""Multivariate Gaussian leaf table: the covariances used are the stored lower triangles
mirrored (format §5.2), leaf by leaf, for leaves of mixed sizes."""
import numpy as np

from spnc.leaves import _kernels as K
from spnc.leaves.mvgaussian import MultivariateGaussian, MVGaussianLeaves, floored_cov, floored_covs


def test_lower_triangle_is_mirrored_per_leaf():
    rng = np.random.default_rng(0)
    leaves = []
    for d in [1, 3, 2, 3, 4, 1, 2]:
        A = rng.normal(size=(d, d))
        leaves.append(MultivariateGaussian(rng.permutation(10)[:d], rng.normal(size=d), A @ A.T + np.eye(d)))
    t = MVGaussianLeaves.from_nodes(np.arange(len(leaves)), leaves)
    p = t.params
    want = p["cov"].copy()
    stored = p["cov"].copy()
    for i, d in enumerate(np.diff(t.var_ptr).tolist()):
        stored[p["cov_ptr"][i]:p["cov_ptr"][i + 1]].reshape(d, d)[np.triu_indices(d, 1)] = 99.0
    p["cov"] = stored
    got = t._lower_cov()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(p["cov"], stored)      # the stored parameters are untouched


def test_em_stats_match_per_leaf_weighted_moments():
    """The stacked statistics (one group per scope size, NaN rows left out, two chunks,
    a recentre in between) give each leaf its weighted mean and ridged covariance, and
    ``score`` the weighted log-likelihood minus the ridge's trace term."""
    rng = np.random.default_rng(3)
    sizes = [1, 3, 2, 3, 1, 2]
    leaves = [MultivariateGaussian(rng.choice(5, k, replace=False), np.zeros(k), np.eye(k)) for k in sizes]
    t = MVGaussianLeaves.from_nodes(np.arange(len(leaves)), leaves)
    t.slot = np.array([4, 0, 5, 1, 3, 2])
    X = rng.normal(size=(40, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    R = rng.random((6, 40))
    rw = rng.random(40) + 0.5
    st = t.em_stats(min_std=0.1)
    s = st.zero()
    st.accumulate(s, X[:25].T, R[:, :25], rw[:25])
    st.recentre(s, s["center"] + rng.normal(size=s["center"].shape))
    st.accumulate(s, X[25:].T, R[:, 25:], rw[25:])
    new = st.fit(s)
    got = st.score(new, s)
    p = new
    for i, leaf in enumerate(leaves):
        x = X[:, t.scopes[i]]
        w = np.where(np.isnan(x).any(1), 0.0, R[t.slot[i]] * rw)
        x = np.nan_to_num(x)
        mu = w @ x / w.sum()
        C = ((x - mu) * w[:, None]).T @ (x - mu) / w.sum() + 0.01 * np.eye(len(mu))
        np.testing.assert_allclose(p["mean"][p["mean_ptr"][i]:p["mean_ptr"][i + 1]], mu, atol=1e-10)
        np.testing.assert_allclose(p["cov"][p["cov_ptr"][i]:p["cov_ptr"][i + 1]].reshape(C.shape), C, atol=1e-10)
        diff = x - mu
        ll = -0.5 * (len(mu) * np.log(2 * np.pi) + np.linalg.slogdet(C)[1]
                     + np.einsum("nk,kj,nj->n", diff, np.linalg.inv(C), diff))
        ref = w @ ll - 0.5 * w.sum() * 0.01 * np.trace(np.linalg.inv(C))
        np.testing.assert_allclose(got[i], ref, rtol=1e-9)


def test_an_in_place_covariance_edit_takes_effect():
    import spnc
    from scipy.stats import multivariate_normal
    spn = spnc.compile(MultivariateGaussian([0, 1], [0.0, 0.0], [[1.0, 0.5], [0.5, 1.0]]))
    X = np.array([[0.3, -0.2], [0.3, np.nan]])
    spn.log_likelihood(X)                                             # factors the covariance
    spn.leaf_tables["mvgaussian"].params["cov"][:] = [4.0, 1.0, 1.0, 2.0]
    want = [multivariate_normal.logpdf([0.3, -0.2], [0, 0], [[4, 1], [1, 2]]), multivariate_normal.logpdf(0.3, 0, 4)]
    np.testing.assert_allclose(spn.log_likelihood(X), want, rtol=1e-12)


def _kernel_pd(c: np.ndarray) -> bool:
    d = c.shape[0]
    return K.cholesky_all(np.array([d], dtype=np.int64), np.array([0, d * d], dtype=np.int64),
                          np.ascontiguousarray(c).ravel(), np.empty(d * d)) < 0


def test_floored_cov_is_positive_definite_at_any_scale():
    """A rank-one covariance of scale 1e40: the absolute floor alone is lost to rounding."""
    x = np.random.default_rng(1).normal(size=(2, 3))
    for scale in (1.0, 1e20, 1e140):
        raw = np.cov(x * scale, rowvar=False, bias=True)
        assert _kernel_pd(floored_cov(raw, 1e-4))
    good = np.array([[2.0, 0.5], [0.5, 1.0]])
    np.testing.assert_array_equal(floored_cov(good, 1e-4), good + 1e-4 * np.eye(2))
    stack = np.stack([good, np.cov(x[:, :2] * 1e20, rowvar=False, bias=True)])
    out = floored_covs(stack, 1e-4)
    np.testing.assert_array_equal(out[0], good + 1e-4 * np.eye(2))
    assert _kernel_pd(out[1])


def test_floored_cov_of_a_zero_covariance_with_an_underflowed_floor():
    """min_std=1e-300 squares to 0: one row's covariance (all zero) still needs a ridge."""
    assert _kernel_pd(floored_cov(np.zeros((3, 3)), 1e-300 ** 2))
