"""One thread policy for every kernel: :func:`effective_n_threads`.

``n_threads=None`` runs small work on one thread and large work on all cores the process
may use (``OMP_NUM_THREADS`` if set, else the CPU affinity mask); ``-1`` is all of them,
``-2`` all but one, and so on. spnc never sets an environment variable: libgomp's
spin-wait, which makes short parallel kernels crawl on a busy machine, is avoided by the
serial path for small work (``SERIAL_WORK``); users who run many large parallel queries on
a loaded machine may still set ``OMP_WAIT_POLICY=passive`` themselves.
:func:`blas_threads` holds numpy's and scipy's BLAS to a learner's ``n_threads``.
"""
from __future__ import annotations

import contextlib
import os

from .errors import ParameterError

#: below this much work (rows x (edges + nodes)) a query runs on one thread: a parallel
#: region costs tens of microseconds to start, and much more under contention
SERIAL_WORK = 1 << 20
#: below this much work per extra thread, extra threads do not pay
WORK_PER_THREAD = 1 << 19
#: a positive ``n_threads`` above this is clipped to it: more never pays, each thread holds
#: per-thread buffers, and OpenMP runtimes crash creating tens of thousands of threads
MAX_THREADS = max(64, 4 * (os.cpu_count() or 1))


def available_threads() -> int:
    """Threads the process may use: ``OMP_NUM_THREADS`` (first value) if set, else the
    CPUs in the affinity mask."""
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def reduction_groups() -> int:
    """Groups of row blocks per chunk whose partial sums the backward pass adds in group
    order: its totals (EM's counts) then depend on the machine (:func:`available_threads`),
    never on ``n_threads``. Four per thread keep every thread busy up to that many."""
    return 4 * available_threads()


def effective_n_threads(n_threads: int | None, work: int = 0) -> int:
    """The thread count a kernel should use for ``work`` units (rows x graph size).

    ``None``: 1 below ``SERIAL_WORK``, else as many as the work pays for, at most
    :func:`available_threads`. A negative value counts back from all threads (-1 = all).
    A positive value is taken as given, up to ``MAX_THREADS``. 0 and non-integers raise
    :class:`~spnc.errors.ParameterError` (a ``ValueError``)."""
    if n_threads is None:
        if work < SERIAL_WORK:
            return 1
        return max(1, min(available_threads(), int(work // WORK_PER_THREAD)))
    if isinstance(n_threads, bool) or not isinstance(n_threads, int) and not hasattr(n_threads, "__index__"):
        raise ParameterError("n_threads", f"n_threads must be an integer or None, got {n_threads!r}")
    n = int(n_threads)
    if n < 0:
        return max(1, available_threads() + 1 + n)
    if n == 0:
        raise ParameterError("n_threads", "n_threads must be a positive integer, -1 for all cores, or None")
    return min(n, MAX_THREADS)


_blas = None


def blas_threads(n_threads: int | None):
    """A context in which BLAS (the matrix products of numpy and scipy) runs on at most
    ``effective_n_threads(n_threads)`` threads; no limit for ``None``. Uses threadpoolctl,
    which finds the BLAS libraries loaded in the process and sets their thread counts
    through their own APIs."""
    try:
        n = None if n_threads is None else effective_n_threads(n_threads)
    except (TypeError, ValueError):  # the estimator's own check names the parameter
        n = None
    if n is None:
        return contextlib.nullcontext()
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController
        _blas = ThreadpoolController()
    return _blas.limit(limits=n, user_api="blas")
