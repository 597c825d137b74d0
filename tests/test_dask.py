"""Dask backend on a 4-worker local cluster: Chow-Liu, EM and log-likelihood over a
``dask.array`` equal the in-memory results (skipped without dask[distributed])."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import spnc  # noqa: E402
from spnc import dask as sd  # noqa: E402
from spnc.chowliu import fit_chow_liu  # noqa: E402
from spnc.learn.chowliu import ChowLiuTree  # noqa: E402
from spnc.learn.em import EM  # noqa: E402

from conftest import random_spn  # noqa: E402
from test_em import MODELS, data_for  # noqa: E402
from test_stream import _same_fit, _tree_data  # noqa: E402


def test_local_scheduler_without_client():
    # runs first (file order), before the cluster exists: Dask's local scheduler
    assert sd.current_client() is None
    X = _tree_data(np.random.default_rng(6), 1000, [2, 3, 2, 2]).astype(np.uint8)
    _same_fit(fit_chow_liu(X), fit_chow_liu(da.from_array(X, chunks=(300, -1))), exact=True)


@pytest.fixture(scope="module")
def client():
    # processes: the model really is shipped to other interpreters; one thread per worker
    with distributed.LocalCluster(n_workers=4, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as c:
        yield c


def test_log_likelihood(client):
    spn = spnc.compile(random_spn(np.random.default_rng(1), [2, 3, 2, 4, 2], depth=3))
    X = spn.sample(5000, seed=1)
    X[::5, 2] = np.nan
    D = da.from_array(X, chunks=(700, 2))      # column chunks are merged
    assert np.array_equal(sd.log_likelihood(spn, D), spn.log_likelihood(X))
    lazy = sd.log_likelihood(spn, D, compute=False)
    assert np.array_equal(lazy.compute(), spn.log_likelihood(X))


@pytest.mark.parametrize("card", [[2] * 8, [2, 3, 4, 2, 3]])
def test_chow_liu(client, card):
    X = _tree_data(np.random.default_rng(3), 4000, card).astype(np.uint8)
    D = da.from_array(X, chunks=(600, -1))
    _same_fit(fit_chow_liu(X, alpha=0.3), fit_chow_liu(D, alpha=0.3), exact=True)
    w = np.random.default_rng(4).random(len(X))
    _same_fit(fit_chow_liu(X, sample_weight=w), fit_chow_liu(D, sample_weight=w), exact=False)
    a, b = ChowLiuTree().fit(X), ChowLiuTree().fit(D)
    assert np.array_equal(a.score_samples(X), b.score_samples(X))


@pytest.mark.parametrize("kind,variant", [("discrete", "soft"), ("gaussian", "soft"), ("discrete", "hard")])
def test_em(client, kind, variant):
    init = MODELS[kind](3)
    X = data_for(kind, n=4000, seed=1)
    kw = dict(init=init, max_iter=3, tol=-np.inf, variant=variant, alpha=0.1, n_threads=1)
    ref = EM(**kw).fit(X)
    got = EM(**kw).fit(da.from_array(X, chunks=(512, -1)))
    assert np.allclose(got.history_["train"], ref.history_["train"], rtol=1e-11)
    assert np.allclose(got.spn_.weight, ref.spn_.weight, rtol=1e-9, atol=1e-13)
    for k, t in ref.spn_.leaf_tables.items():
        for name, v in t.to_arrays().items():
            assert np.allclose(v, got.spn_.leaf_tables[k].to_arrays()[name], rtol=1e-9, atol=1e-12)
