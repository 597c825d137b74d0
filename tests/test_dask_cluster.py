"""spnc.dask on a 2-worker process cluster against the in-memory path on the same rows:
uneven chunks (a last chunk of one row, column chunks), dtypes, missing values, mixtures,
EM on discrete and Gaussian leaves; and what is refused (skipped without distributed)."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import spnc  # noqa: E402
from spnc import dask as sd  # noqa: E402
from spnc.chowliu import fit_chow_liu  # noqa: E402
from spnc.errors import DataError, ParameterError  # noqa: E402
from spnc.learn.em import EM  # noqa: E402

from _dask_guard import process_cluster  # noqa: E402
from conftest import random_spn  # noqa: E402
from test_em import MODELS, data_for  # noqa: E402
from test_stream import _same_fit, _tree_data  # noqa: E402

UNEVEN = ((7, 600, 393, 1),)        # 1001 rows: a chunk of 7 rows first, a chunk of 1 row last


@pytest.fixture(scope="module")
def client():
    with process_cluster(2) as c:     # a stuck call ends the run: tests/_dask_guard.py
        yield c


def test_log_likelihood_on_uneven_chunks_and_dtypes(client):
    rng = np.random.default_rng(1)
    a, b = (random_spn(rng, [2, 3, 2, 4, 2], depth=3) for _ in range(2))
    spn = spnc.compile(a)
    mix = spnc.compile([a, b], combine="mixture", root_weights=[0.3, 0.7])
    X = spn.sample(1001, seed=1)
    X[::9, 1] = np.nan
    X[4] = np.nan
    for chunks in (UNEVEN + (-1,), UNEVEN + ((2, 3),), ((1000, 1), (1,) * 5)):
        D = da.from_array(X, chunks=chunks)
        for m in (spn, mix):
            assert np.array_equal(sd.log_likelihood(m, D), m.log_likelihood(X))
        assert np.array_equal(sd.log_likelihood(mix, D, compute=False).compute(), mix.log_likelihood(X))
    Y = np.nan_to_num(X)
    for Z in (Y.astype(np.int8), Y.astype(np.float32), Y.astype(np.uint8), Y > 0):
        assert np.array_equal(sd.log_likelihood(spn, da.from_array(Z, chunks=UNEVEN + (-1,))), spn.log_likelihood(Z))


def test_chow_liu_counts_on_uneven_chunks(client):
    X = _tree_data(np.random.default_rng(3), 1001, [2, 3, 2, 4, 2])
    for Z in (X.astype(np.uint8), X.astype(np.float32), (X > 0)):
        _same_fit(fit_chow_liu(Z), fit_chow_liu(da.from_array(Z, chunks=UNEVEN + ((2, 3),))), exact=True)


@pytest.mark.parametrize("kind", ["discrete", "gaussian", "mvgaussian", "mixture"])
def test_em_on_uneven_chunks(client, kind):
    if kind == "mixture":
        a, b = MODELS["discrete"](3), MODELS["discrete"](4)
        init = spnc.compile([a.to_nodes(), b.to_nodes()], combine="mixture", root_weights=[0.4, 0.6])
        X = data_for("discrete", n=1001, seed=1)
    else:
        init, X = MODELS[kind](3), data_for(kind, n=1001, seed=1)
    X[::11, 0] = np.nan
    for variant in ("soft", "hard"):
        kw = dict(init=init, max_iter=3, tol=-np.inf, variant=variant, alpha=0.1, n_threads=1)
        ref, got = EM(**kw).fit(X), EM(**kw).fit(da.from_array(X, chunks=UNEVEN + (-1,)))
        np.testing.assert_allclose(got.history_["train"], ref.history_["train"], rtol=1e-12)
        np.testing.assert_allclose(got.spn_.weight, ref.spn_.weight, rtol=1e-12, atol=1e-14)
        if kind == "mixture":
            np.testing.assert_allclose(got.spn_.root_weights, ref.spn_.root_weights, rtol=1e-12)
        for k, t in ref.spn_.leaf_tables.items():
            for name, v in t.to_arrays().items():
                np.testing.assert_allclose(got.spn_.leaf_tables[k].to_arrays()[name], v, rtol=1e-11, atol=1e-13)


def test_dask_dataframes_are_refused_by_spnc_dask(client):
    # was: "X must be a dask.array" (log_likelihood) and a TypeError from Dask (map_reduce)
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    spn = spnc.compile(random_spn(np.random.default_rng(2), [2, 2, 2], depth=2))
    D = dd.from_pandas(pd.DataFrame(spn.sample(50, seed=1), columns=list("abc")), npartitions=2)
    for run in (lambda: sd.log_likelihood(spn, D), lambda: sd.log_likelihood(spn, D, compute=False),
                lambda: sd.map_reduce(lambda b, r0, ctx: b.sum(), D)):
        with pytest.raises(DataError, match=r"Dask DataFrame.*compute\(\).*to_dask_array"):
            run()


def _close_when(mark: str, client) -> None:
    """Close ``client`` once the file ``mark`` exists (a task has started), or after 60 s."""
    end = time.monotonic() + 60
    while not os.path.exists(mark) and time.monotonic() < end:
        time.sleep(0.01)
    client.close()


def test_a_client_closed_during_a_pass_is_named(client, tmp_path):
    # was: distributed's FutureCancelledError "... cancelled for reason: unknown"
    X = np.zeros((40, 2))
    mark = str(tmp_path / "started")

    def slow(block, r0, ctx):
        if r0 == 0:
            open(ctx, "w").close()
        time.sleep(0.5)
        return block.sum()

    with distributed.Client(client.scheduler.address, set_as_default=False) as own:
        t = threading.Thread(target=_close_when, args=(mark, own))
        t.start()
        try:
            with pytest.raises(ParameterError, match="client was closed while computing slow"):
                sd.map_reduce(slow, da.from_array(X, chunks=(5, -1)), mark, client=own)
        finally:
            t.join()


def test_a_client_closed_between_em_passes_is_named(client, monkeypatch):
    # was: later passes silently ran on Dask's local scheduler, and data persisted on the
    # closed cluster failed with Dask's "Missing dependency"
    import spnc.stream as st
    spn = MODELS["discrete"](7)
    X = data_for("discrete", 400, seed=3)
    passes = []
    original = st.map_reduce

    with distributed.Client(client.scheduler.address, set_as_default=True) as own:
        def closing_after_first(*a, **k):
            out = original(*a, **k)
            passes.append(k.get("client"))
            if len(passes) == 1:
                own.close()
            return out

        monkeypatch.setattr(st, "map_reduce", closing_after_first)
        D = da.from_array(X, chunks=(100, -1)).persist()
        with pytest.raises(ParameterError, match="client .* the fit started on was closed between its passes"):
            EM(init=spn, max_iter=3, tol=-np.inf).fit(D)
    assert passes == [own]


def test_map_reduce_takes_partials_and_callable_objects(client):
    # was: AttributeError "'functools.partial' object has no attribute '__name__'" (the task keys)
    import functools

    def scaled(block, r0, ctx, k=1):
        return float(block.sum()) * k

    class Rows:
        def __call__(self, block, r0, ctx):
            return len(block)
    D = da.from_array(np.ones((1001, 3)), chunks=UNEVEN + (-1,))
    assert sd.map_reduce(functools.partial(scaled, k=2), D) == 6006.0
    assert sd.map_reduce(Rows(), D) == 1001


def test_a_client_closed_during_bagging_is_named(client, tmp_path):
    # was: distributed's CommClosedError "Stream is closed"
    from spnc.learn import LearnSPN
    from spnc.learn.bagging import BaggedSPN
    from test_learnspn import planted

    class Slow(LearnSPN):
        def fit(self, X, y=None, X_valid=None):
            open(self.mark, "w").close()
            time.sleep(0.5)
            return super().fit(X, y, X_valid)

    Slow.mark = mark = str(tmp_path / "started")
    own = distributed.Client(client.scheduler.address, set_as_default=False)
    t = threading.Thread(target=_close_when, args=(mark, own))
    t.start()
    try:
        with own.as_current(), pytest.raises(ParameterError, match="client was closed while computing the 6 bags"):
            BaggedSPN(Slow(min_instances=50), n_bags=6, random_state=0, backend="dask").fit(
                planted(np.random.default_rng(1), n=300).astype(np.float64))
    finally:
        t.join()
        own.close()


def _bag_tasks(dask_scheduler) -> list[str]:
    return [str(k) for k in dask_scheduler.tasks if str(k).startswith("spnc-bag-")]


def test_the_first_failed_bag_stops_the_others(client, tmp_path):
    # was: the error reached the caller while the other bags went on starting and running
    # to the end, and their tasks and the rows stayed on the cluster (the error, kept in
    # the failed future's state, held the frame that held the futures)
    from spnc.learn import LearnSPN
    from spnc.learn.bagging import BaggedSPN
    from test_learnspn import planted

    class FailFirst(LearnSPN):
        def fit(self, X, y=None, X_valid=None):
            open(os.path.join(self.log, f"started-{self.random_state}"), "w").close()
            try:
                os.close(os.open(os.path.join(self.log, "failed"), os.O_CREAT | os.O_EXCL))
            except FileExistsError:     # not the first bag to start: a slow one
                time.sleep(2.0)
                open(os.path.join(self.log, f"done-{self.random_state}"), "w").close()
                return super().fit(X, y, X_valid)
            raise DataError("the first bag to start fails")

    FailFirst.log = log = str(tmp_path)
    X = planted(np.random.default_rng(1), n=200).astype(np.float64)
    kw = dict(n_bags=8, random_state=0, backend="dask")
    with client.as_current():
        with pytest.raises(DataError, match=r"^BaggedSPN, bag [1-8] of 8: the first bag to start fails"):
            BaggedSPN(FailFirst(min_instances=50, g_factor=5.0), **kw).fit(X)
        assert not any(f.startswith("done") for f in os.listdir(log))     # not waiting for the running one
        end = time.monotonic() + 10
        while client.run_on_scheduler(_bag_tasks) and time.monotonic() < end:
            time.sleep(0.05)
        assert client.run_on_scheduler(_bag_tasks) == []      # waiting bags cancelled, rows released
        time.sleep(2.5)         # a running bag cannot be stopped: one per worker ends unseen
        started = [f for f in os.listdir(log) if f.startswith("started")]
        assert len(started) <= 2, started       # the failed bag and one that had started
        # the client stays usable
        got = BaggedSPN(LearnSPN(min_instances=50, g_factor=5.0), **{**kw, "n_bags": 2}).fit(X)
    ref = BaggedSPN(LearnSPN(min_instances=50, g_factor=5.0), n_bags=2, random_state=0).fit(X)
    assert np.array_equal(got.spn_.log_likelihood(X), ref.spn_.log_likelihood(X))
