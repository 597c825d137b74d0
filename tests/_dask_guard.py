"""Dask test support (a pytest plugin, loaded by conftest.py): a watchdog that ends a stuck
Dask test module, and a process cluster whose shutdown is bounded.

The watchdog covers each test of a ``test_dask*`` module with its fixtures' setup and
teardown (where the module's cluster starts and stops). A stuck call there, be it a
Python wait on distributed's event loop or a C-level futex wait, has the stacks of all
threads written to stderr and the process ended, so a run fails loudly instead of using
up CI's budget. SIGALRM cannot do this: its handler runs only when the main thread
returns to Python, and an exception raised at an arbitrary point inside distributed can
leave a lock held, which hangs a later call."""
from __future__ import annotations

import contextlib
import faulthandler
import os
import sys

import pytest

#: seconds one Dask test, with its setup and teardown, may take (``$SPNC_DASK_TEST_TIMEOUT``)
DEFAULT_TIMEOUT = 300.0
#: seconds for closing a client or a cluster before giving up on a clean shutdown
CLOSE_TIMEOUT = 60


def _timeout() -> float:
    return float(os.environ.get("SPNC_DASK_TEST_TIMEOUT", DEFAULT_TIMEOUT))


_stderr: list[int] = []     # a copy of the real stderr: fd 2 is captured while tests run


def pytest_configure(config):
    _stderr.append(os.dup(sys.__stderr__.fileno()))


def pytest_unconfigure(config):
    while _stderr:
        os.close(_stderr.pop())


@pytest.hookimpl(hookwrapper=True)     # the old-style wrapper: pytest 7 has no wrapper=True
def pytest_runtest_protocol(item, nextitem):
    if not os.path.basename(item.nodeid.split("::")[0]).startswith("test_dask") or not _stderr:
        yield
        return
    faulthandler.dump_traceback_later(_timeout(), exit=True, file=_stderr[-1])
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@contextlib.contextmanager
def process_cluster(n_workers: int, **config):
    """A client of a LocalCluster of ``n_workers`` one-thread worker processes, under the
    Dask ``config``; both are closed on exit within :data:`CLOSE_TIMEOUT` seconds each."""
    import dask
    import distributed
    with dask.config.set(config):
        cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                           dashboard_address=":0", silence_logs=50)
        try:
            client = distributed.Client(cluster)
            try:
                yield client
            finally:
                client.close(timeout=CLOSE_TIMEOUT)
        finally:
            cluster.close(timeout=CLOSE_TIMEOUT)
