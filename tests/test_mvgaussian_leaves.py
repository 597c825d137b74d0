"""Multivariate Gaussian leaf table: the covariances used are the stored lower triangles
mirrored (format §5.2), leaf by leaf, for leaves of mixed sizes."""
import numpy as np

from spnc.leaves.mvgaussian import MultivariateGaussian, MVGaussianLeaves


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
