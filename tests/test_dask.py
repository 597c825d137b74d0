"""Dask backend on a 4-worker local cluster: Chow-Liu, EM and log-likelihood over a
``dask.array`` equal the in-memory results (skipped without dask[distributed])."""
from __future__ import annotations

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import spnc  # noqa: E402
import spnc.stream  # noqa: E402
from spnc import dask as sd  # noqa: E402
from spnc.chowliu import fit_chow_liu  # noqa: E402
from spnc.learn.chowliu import ChowLiuTree  # noqa: E402
from spnc.learn.em import EM  # noqa: E402

from _dask_guard import process_cluster  # noqa: E402
from conftest import random_spn  # noqa: E402
from test_em import MODELS, data_for  # noqa: E402
from test_stream import _same_fit, _tree_data  # noqa: E402


def test_local_scheduler_without_client():
    # runs first (file order), before the cluster exists: Dask's local scheduler
    assert sd.current_client() is None
    X = _tree_data(np.random.default_rng(6), 1000, [2, 3, 2, 2]).astype(np.uint8)
    _same_fit(fit_chow_liu(X), fit_chow_liu(da.from_array(X, chunks=(300, -1))), exact=True)


def test_zero_row_chunks_add_nothing():
    from spnc.chowliu_blocks import pairwise_gtest
    X = _tree_data(np.random.default_rng(7), 900, [2, 3, 2, 2]).astype(np.uint8)
    D = da.from_array(X, chunks=((300, 0, 600, 0), (4,)))
    _same_fit(fit_chow_liu(X), fit_chow_liu(D), exact=True)
    assert np.array_equal(ChowLiuTree().fit(X).score_samples(X), ChowLiuTree().fit(D).score_samples(X))
    assert all(np.array_equal(a, b) for a, b in zip(pairwise_gtest(X), pairwise_gtest(D)))


def test_unknown_chunk_sizes_are_named():
    from spnc.chowliu_blocks import pairwise_gtest
    from spnc.errors import DataError
    from spnc.learn import LearnSPN
    X = _tree_data(np.random.default_rng(8), 900, [2, 2, 2, 2]).astype(np.float64)
    spn = spnc.compile(random_spn(np.random.default_rng(1), [2, 2, 2, 2], depth=2))
    D = da.from_array(X, chunks=(300, -1))
    U = D[D[:, 0] >= 0]                       # boolean mask: chunk sizes unknown
    for run in (lambda: sd.log_likelihood(spn, U), lambda: EM(init=spn, max_iter=1).fit(U),
                lambda: fit_chow_liu(U), lambda: pairwise_gtest(U),
                lambda: LearnSPN(sample_rows=100).fit(U)):
        with pytest.raises(DataError, match=r"chunk sizes are unknown.*compute_chunk_sizes\(\)"):
            run()
    U.compute_chunk_sizes()
    _same_fit(fit_chow_liu(X), fit_chow_liu(U), exact=True)


def test_dask_dataframes_are_refused_with_the_two_ways_to_pass_them():
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    from spnc.errors import DataError
    from spnc.learn import LearnSPN
    X = _tree_data(np.random.default_rng(9), 300, [2, 2, 2]).astype(np.float64)
    spn = spnc.compile(random_spn(np.random.default_rng(2), [2, 2, 2], depth=2), var_names=["a", "b", "c"])
    D = dd.from_pandas(pd.DataFrame(X, columns=["a", "b", "c"])[["c", "b", "a"]], npartitions=2)
    for run in (lambda: spn.log_likelihood(D),            # was read by position, names ignored
                lambda: EM(init=spn, max_iter=1).fit(D), lambda: ChowLiuTree().fit(D),
                lambda: LearnSPN().fit(D), lambda: spnc.stream.load(D)):
        with pytest.raises(DataError, match=r"Dask DataFrame.*compute\(\).*to_dask_array"):
            run()
    np.testing.assert_array_equal(spn.log_likelihood(D.compute()), spn.log_likelihood(X))


def test_dask_validation_rows(monkeypatch):
    from spnc.errors import DataError
    from spnc.learn import LearnSPN
    from spnc.learn.prometheus import Prometheus
    from test_learnspn import planted
    from test_stream_learners import same_model
    X = planted(np.random.default_rng(0), n=2400).astype(np.uint8)
    D, V = da.from_array(X[:2000], chunks=(700, -1)), X[2000:]
    DV = da.from_array(V, chunks=(150, -1))
    for est in (LearnSPN(min_instances=200, sample_rows=1000, refine_iter=2, random_state=0),
                Prometheus(min_instances=300, sample_rows=1000, refine_iter=2, random_state=0)):
        same_model(type(est)(**est.get_params()).fit(D, X_valid=V).spn_, est.fit(D, X_valid=DV).spn_, exact=True)
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "10K")     # V is 25 KB as float64
    for fit in (lambda: LearnSPN(min_instances=200, sample_rows=1000).fit(D, X_valid=DV),
                lambda: EM(init=est.spn_, max_iter=1).fit(D, X_valid=DV)):
        with pytest.raises(DataError, match="X_valid in memory.*memory budget"):
            fit()


def test_errors_name_rows_of_the_whole_input():
    from spnc.errors import DataError
    spn = spnc.compile(random_spn(np.random.default_rng(1), [2, 2, 2], depth=2))
    X = spn.sample(3000, seed=1)
    X[2345, 2] = 2
    D = da.from_array(X, chunks=(1000, -1))
    for run in (lambda: sd.log_likelihood(spn, D), lambda: EM(init=spn, max_iter=1).fit(D)):
        with pytest.raises(DataError, match=r"^X\[2345, 2\] = 2"):
            run()



def test_the_first_bad_chunk_is_named_whichever_fails_first():
    # chunk 0 arrives late (its block sleeps): its row is still the one named, every run
    import time
    import dask
    from spnc.errors import DataError
    spn = spnc.compile(random_spn(np.random.default_rng(1), [2, 2, 2], depth=2))
    X = spn.sample(2000, seed=1)
    X[17, 1] = -1
    X[1500, 0] = -1

    def late(a):
        time.sleep(0.5)
        return a
    D = da.concatenate([da.from_delayed(dask.delayed(late)(X[:1000]), shape=(1000, 3), dtype=X.dtype),
                        da.from_array(X[1000:], chunks=(1000, -1))])
    for run in (lambda: sd.log_likelihood(spn, D), lambda: EM(init=spn, max_iter=1).fit(D),
                lambda: fit_chow_liu(D)):
        with pytest.raises(DataError, match=r"^X\[17, 1\] = -1"):
            run()

def test_bagging_dask_backend_needs_a_client():
    from spnc.errors import ParameterError
    from spnc.learn import LearnSPN
    from spnc.learn.bagging import BaggedSPN
    with pytest.raises(ParameterError, match="Client"):
        BaggedSPN(LearnSPN(), n_bags=2, backend="dask").fit(np.zeros((30, 3)))


@pytest.fixture(scope="module")
def client():
    # processes: the model really is shipped to other interpreters; one thread per worker.
    # The worker-loss tests kill every worker once; on a loaded machine the restarts can
    # cost a task more than the default 3 tries (KilledWorker, seen once under load)
    with process_cluster(4, **{"distributed.scheduler.allowed-failures": 10}) as c:
        yield c


def test_log_likelihood(client):
    spn = spnc.compile(random_spn(np.random.default_rng(1), [2, 3, 2, 4, 2], depth=3))
    X = spn.sample(5000, seed=1)
    X[::5, 2] = np.nan
    D = da.from_array(X, chunks=(700, 2))      # column chunks are merged
    assert np.array_equal(sd.log_likelihood(spn, D), spn.log_likelihood(X))
    lazy = sd.log_likelihood(spn, D, compute=False)
    assert np.array_equal(lazy.compute(), spn.log_likelihood(X))
    bag = spnc.compile([spn.to_nodes(), spn.to_nodes()], combine="independent")    # one column per root
    lazy = sd.log_likelihood(bag, D, compute=False)
    assert lazy.shape == (len(X), 2) and np.array_equal(lazy.compute(), bag.log_likelihood(X))


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


def test_learnspn_and_prometheus_on_dask_array(client):
    from spnc.learn import LearnSPN
    from spnc.learn.prometheus import Prometheus
    from test_learnspn import planted
    from test_stream_learners import same_model
    X = planted(np.random.default_rng(0), n=3000).astype(np.uint8)
    D = da.from_array(X, chunks=(700, -1))
    for est in (LearnSPN(min_instances=200, sample_rows=1500, refine_iter=2, random_state=0),
                Prometheus(min_instances=300, sample_rows=1500, refine_iter=2, random_state=0)):
        same_model(type(est)(**est.get_params()).fit(X).spn_, est.fit(D).spn_)


def test_pairwise_gtest_on_dask(client):
    from spnc.chowliu_blocks import pairwise_gtest
    from test_learnspn import ctx_for, full_slice
    X = _tree_data(np.random.default_rng(5), 3000, [2, 3, 2, 4, 2]).astype(np.uint8)
    G, dof = ctx_for(X).gtest(full_slice(X))
    G2, dof2 = pairwise_gtest(da.from_array(X, chunks=(500, -1)))
    assert np.array_equal(G, G2) and np.array_equal(dof, dof2)


def test_bagging_and_cross_validation_as_dask_tasks(client, capsys):
    from spnc.learn import LearnSPN
    from spnc.learn.bagging import BaggedSPN
    from test_learnspn import planted
    X = planted(np.random.default_rng(1), n=600).astype(np.float64)
    base = LearnSPN(min_instances=50)
    kw = dict(n_bags=3, param_distributions={"min_instances": [30, 60]}, random_state=3, verbose=1)
    a = BaggedSPN(base, **kw).fit(X)
    here = capsys.readouterr().err.splitlines()
    b = BaggedSPN(base, backend="dask", **kw).fit(X)
    there = capsys.readouterr().err.splitlines()      # one line per bag, as in-process
    assert len(here) == len(there) == 3
    assert sorted(s.split(":")[0] for s in there) == [s.split(":")[0] for s in here] == \
        [f"[bagging] bag {i}/3" for i in (1, 2, 3)]
    assert a.bag_params_ == b.bag_params_
    assert np.array_equal(a.spn_.log_likelihood(X), b.spn_.log_likelihood(X))
    # cross-validation folds: scikit-learn's joblib, on the cluster through joblib's Dask backend
    joblib = pytest.importorskip("joblib")
    model_selection = pytest.importorskip("sklearn.model_selection")
    ref = model_selection.cross_val_score(LearnSPN(min_instances=50, random_state=0), X, cv=3)
    with joblib.parallel_backend("dask"):
        got = model_selection.cross_val_score(LearnSPN(min_instances=50, random_state=0), X, cv=3, n_jobs=-1)
    assert np.array_equal(ref, got)


def test_a_closed_client_is_named(client):
    from spnc.errors import ParameterError
    with distributed.Client(client.scheduler.address, set_as_default=False) as closed:
        pass
    X = np.zeros((10, 2))
    with pytest.raises(ParameterError, match="is closed"):
        sd.log_likelihood(spnc.compile(random_spn(np.random.default_rng(2), [2, 2], depth=1)),
                          da.from_array(X, chunks=(5, -1)), client=closed)
    with pytest.raises(ParameterError, match="is closed"):
        sd.map_reduce(lambda b, r0, ctx: b.sum(), da.from_array(X, chunks=(5, -1)), client=closed)


def test_a_pass_survives_the_loss_of_every_worker(client, tmp_path):
    # the first task kills every worker once (the nannies restart them); the context the
    # tasks share must be recomputed, as plain Dask recomputes the lost chunks
    import os
    import signal
    spn = spnc.compile(random_spn(np.random.default_rng(2), [2, 3, 2, 2], depth=3))
    X = spn.sample(4000, seed=2)
    D = da.from_array(X, chunks=(500, -1))
    pids = list(client.run(os.getpid).values())
    mark = str(tmp_path / "killed")

    def ll_sum(block, r0, ctx):
        if r0 == 0 and not os.path.exists(ctx["mark"]):
            open(ctx["mark"], "w").close()
            for p in sorted(ctx["pids"], key=lambda p: p == os.getpid()):
                os.kill(p, signal.SIGKILL)
        return ctx["spn"].log_likelihood(block, n_threads=1)

    got = sd.map_reduce(ll_sum, D, {"spn": spn, "pids": pids, "mark": mark}, lambda a, b: np.concatenate([a, b]))
    assert os.path.exists(mark)
    assert np.array_equal(got, spn.log_likelihood(X))


def test_bags_survive_the_loss_of_every_worker(client, tmp_path):
    import os
    import signal
    from spnc.learn import LearnSPN
    from spnc.learn.bagging import BaggedSPN
    from test_learnspn import planted

    class KillOnce(LearnSPN):
        def fit(self, X, y=None, X_valid=None):
            if not os.path.exists(self.mark):
                open(self.mark, "w").close()
                for p in sorted(self.pids, key=lambda p: p == os.getpid()):
                    os.kill(p, signal.SIGKILL)
            return super().fit(X, y, X_valid)

    KillOnce.pids, KillOnce.mark = list(client.run(os.getpid).values()), str(tmp_path / "killed")
    X = planted(np.random.default_rng(1), n=400).astype(np.float64)
    kw = dict(n_bags=3, random_state=3)
    got = BaggedSPN(KillOnce(min_instances=50), backend="dask", **kw).fit(X)
    assert os.path.exists(KillOnce.mark)
    ref = BaggedSPN(LearnSPN(min_instances=50), **kw).fit(X)
    assert np.array_equal(got.spn_.log_likelihood(X), ref.spn_.log_likelihood(X))
