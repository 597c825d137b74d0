"""Dask backend: statistics that are sums over rows, as map-reduce over the row chunks of a
``dask.array`` (optional extra ``pyspnc[dask]``).

The learners call this for you: ``ChowLiuTree().fit(X)`` and ``EM(init=spn).fit(X)`` take
a Dask array where they take a numpy one, and :func:`log_likelihood` evaluates a model on
one. Work runs on the current ``dask.distributed`` client when there is one (``Client()``
for a local cluster, ``Client("tcp://scheduler:8786")`` for a real one; or pass
``client=``), else on Dask's local scheduler.

Per pass, the compiled model and the other read-only context are one key of the task
graph, copied once to every worker (:func:`shared`; not scattered data, which Dask cannot
recompute: a pass survives a transient loss of workers as plain Dask computations do);
each task reduces one row chunk to small arrays (counts, the expected counts of EM,
log-likelihoods) with the same kernels as the in-memory path; the
partial results are added on the workers in a fixed binary tree over the chunk order, so
the result does not depend on the number of workers or on which finishes first. Only the
totals reach the client, which does the cheap parts (spanning tree, M-step).
"""
from __future__ import annotations

import contextlib
import importlib.util
import time
import uuid
from typing import Any, Callable

import numpy as np

from .data import refuse_dask_frame
from .errors import DataError, ParameterError, SpncError
from .stream import add, block_log_likelihood, is_dask, ll_columns


def _require():
    if importlib.util.find_spec("dask") is None:  # pragma: no cover - depends on the environment
        raise ImportError("the Dask backend needs dask: pip install 'pyspnc[dask]'")


def current_client(client=None):
    """``client``, else the default ``dask.distributed`` client if one exists, else None."""
    if client is not None:
        if getattr(client, "status", None) in ("closing", "closed"):
            raise ParameterError("client", f"client={client!r} is closed; pass an open dask.distributed "
                                           "Client, or none to use the current one")
        return client
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):
        return None


def check_array(X, name: str = "X"):
    """``X``, a Dask array, if it is 2-D and its chunk sizes are known; else DataError."""
    refuse_dask_frame(X, name)
    if X.ndim != 2:
        raise DataError(f"{name} must be 2-D (n_rows, n_vars), got shape {X.shape}")
    if any(s != s for s in X.shape):     # NaN: unknown chunk sizes
        raise DataError(f"{name} is a Dask array whose chunk sizes are unknown (shape {X.shape}, as after "
                        f"boolean indexing); call {name}.compute_chunk_sizes() first")
    return X


def row_chunks(X) -> tuple[list, np.ndarray]:
    """The row chunks of a 2-D Dask array as delayed blocks (whole rows: column chunks are
    merged) and the first row of each."""
    check_array(X)
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    rows = np.asarray(X.chunks[0], dtype=np.int64)
    offs = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int64)
    return list(X.to_delayed()[:, 0]), offs


def shared(obj: Any, client=None, name: str = "spnc-ctx"):
    """``obj`` as one key of the task graph, for tasks to take as an argument. On ``client``
    it is computed and copied to every worker first (else the scheduler crowds the tasks
    onto its holder). Unlike scattered data, the scheduler recomputes it when the workers
    holding it die, as it recomputes lost chunks."""
    import dask
    d = dask.delayed(obj, name=f"{name}-{uuid.uuid4().hex}", traverse=False)
    if client is None:
        return d
    fut = client.compute(d)
    client.replicate([fut])
    return fut


def _name(fn: Callable) -> str:
    """A function's name for task keys and messages (also of a partial or a callable object)."""
    f = getattr(fn, "func", fn)
    return getattr(f, "__name__", type(f).__name__)


class _Failed:
    """A chunk's spnc error, carried to the end of the pass: the first bad chunk in row
    order is the one reported, whichever worker finished first."""

    def __init__(self, row0: int, error: SpncError):
        self.row0, self.error = row0, error


class _Guarded:
    """``fn(block, row0, ctx)`` returning :class:`_Failed` instead of raising spnc's errors."""

    def __init__(self, fn: Callable):
        self.func = fn

    def __call__(self, block, r0: int, ctx):
        try:
            return self.func(block, r0, ctx)
        except SpncError as e:
            return _Failed(r0, e)


class _GuardedCombine:
    """``combine`` that passes the earlier failure on (its left operand comes first)."""

    def __init__(self, fn: Callable):
        self.func = fn

    def __call__(self, a, b):
        if isinstance(a, _Failed):
            return a
        return b if isinstance(b, _Failed) else self.func(a, b)


def _raise_first(results):
    """``results``, after raising the error of the first failed chunk in row order."""
    bad = [r for r in results if isinstance(r, _Failed)]
    if bad:
        raise min(bad, key=lambda f: f.row0).error
    return results


def _tasks(fn: Callable, X, ctx: Any, client, guard: bool = True) -> list:
    """One task ``fn(block, row0, ctx)`` per row chunk of ``X``, ``ctx`` :func:`shared`;
    with ``guard`` a task's spnc error is returned as :class:`_Failed`, not raised."""
    import dask
    blocks, offs = row_chunks(X)
    ends = np.append(offs[1:], int(X.shape[0]))
    c = shared(ctx, client)
    f = dask.delayed(_Guarded(fn) if guard else fn, pure=False)
    tok = uuid.uuid4().hex
    # keys that say what failed, should a task fail; the chunk number keeps empty chunks apart
    return [f(b, int(r0), c, dask_key_name=f"spnc-{_name(fn)}-chunk-{i}-rows-{r0}:{r1}-{tok}")
            for i, (b, r0, r1) in enumerate(zip(blocks, offs, ends))]


def _compute(objs, client, what: str):
    import dask
    if client is None:
        return dask.compute(*objs)
    try:
        return [_result(f, client) for f in client.compute(objs)]
    except Exception as e:
        raise failed(e, client, what)


def _open(client) -> None:
    if getattr(client, "status", None) in ("closing", "closed"):
        raise RuntimeError("the Dask client was closed")


def _finished(pending: list, client) -> tuple[list, list]:
    """The futures of ``pending`` that are done (at least one, waiting in steps of 20 ms)
    and the others. A client closed meanwhile raises: its futures may never finish, and a
    result awaited from it (``as_completed``, ``gather``, ``result()`` without a timeout)
    would wait forever."""
    while True:
        _open(client)
        done = [f.done() for f in pending]
        if any(done):
            return [f for f, d in zip(pending, done) if d], [f for f, d in zip(pending, done) if not d]
        time.sleep(0.02)


def _result(f, client):
    """``f.result()``, waited for in steps of a second while the client is open."""
    while True:
        _open(client)
        try:
            return f.result(timeout=1.0)
        except TimeoutError:
            if f.status == "error":     # the task's own TimeoutError
                raise


def failed(e: Exception, client, what: str) -> Exception:
    """The exception to raise for ``e`` from a computation on ``client``: spnc's own as it
    is; a ParameterError when the client was closed meanwhile; else ``e`` with a note."""
    if isinstance(e, SpncError):
        return e
    if getattr(client, "status", None) in ("closing", "closed"):
        err = ParameterError("client", f"the Dask client was closed while computing {what}; keep it "
                                       "open until the fit or evaluation returns")
        err.__cause__ = e
        return err
    e.add_note(f"spnc.dask: while computing {what} on {client!r}")    # a failed worker or connection
    return e


def map_reduce(fn: Callable, X, ctx: Any = None, combine: Callable = add, *, client=None) -> Any:
    """``combine`` of ``fn(block, row0, ctx)`` over the row chunks of the Dask array ``X``,
    added in a binary tree over the chunk order (deterministic)."""
    _require()
    import dask
    cl = current_client(client)
    parts = _tasks(fn, X, ctx, cl)
    if not parts:
        return None
    comb = dask.delayed(_GuardedCombine(combine), pure=False)
    while len(parts) > 1:
        parts = [comb(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return _raise_first(_compute(parts, cl, f"{_name(fn)} over the {len(X.chunks[0])} row chunks of X"))[0]


class _UntilFirstFailure:
    """``fn(*args)`` as one of a group of tasks that stops at its first failure. The group
    runs while its Event is set: the client sets it first, the first task to fail clears it
    before its error leaves the worker, and a task that starts after that returns None
    unrun. (Dask cannot interrupt a task that is running.)"""

    def __init__(self, fn: Callable, event: str):
        self.func, self.event = fn, event

    def __call__(self, *args):
        from distributed import Event
        go = Event(self.event)
        if not go.is_set():
            return None
        try:
            return self.func(*args)
        except Exception:
            go.clear()
            raise


def each(fn: Callable, calls: list[tuple], keys: list[str], done: Callable[[int, Any], None], *, client,
         what: str) -> None:
    """``fn(*args)`` for each ``args`` of ``calls`` (Futures among them are passed as their
    values), one task each on ``client`` under the matching key; ``done(i, result)`` as
    each finishes, in any order (``fn`` must not return None). At the first failure (or
    an interrupt) no further task starts, those waiting are cancelled and the error is
    raised at once: tasks already running cannot be interrupted and end unseen."""
    import dask
    from distributed import Event
    go = Event(f"spnc-go-{uuid.uuid4().hex}", client)
    go.set()
    task = dask.delayed(_UntilFirstFailure(fn, go.name), pure=False)
    futs = client.compute([task(*args, dask_key_name=k) for args, k in zip(calls, keys)])
    where = {f.key: i for i, f in enumerate(futs)}
    stopped, ok = [], False
    try:
        pending = list(futs)
        while pending:
            ready, pending = _finished(pending, client)
            for f in ready:
                out = _result(f, client)        # the first error: raised here
                if out is None:                 # stopped by a failure whose error is on its way
                    stopped.append(where[f.key])
                else:
                    done(where[f.key], out)
        ok = not stopped
    except Exception as e:
        raise failed(e, client, what)
    finally:
        if client.status == "running":
            with contextlib.suppress(Exception):   # not to hide the error being raised
                go.clear()      # also forgets it (a cleared Event is the default)
            if not ok:
                # cancelling also drops the futures' states, whose error would otherwise
                # hold this frame (and so the futures) for as long as the client lives
                client.cancel(futs)
    if stopped:     # the failed task was lost with its worker, recomputed, and stopped itself
        raise RuntimeError(f"spnc.dask: tasks {sorted(i + 1 for i in stopped)} of {what} were stopped by a "
                           "failure that was then lost with its worker; run again")


def _ll_block(block: np.ndarray, r0: int, ctx: tuple) -> np.ndarray:
    spn, n_threads = ctx
    return block_log_likelihood(spn, block, r0, n_threads)


def log_likelihood(spn, X, *, client=None, n_threads: int | None = 1, compute: bool = True):
    """``spn.log_likelihood`` of the rows of the Dask array ``X``, one task per row chunk
    (the model shipped once per worker). ``compute=False`` returns a lazy Dask array,
    whose graph holds the model."""
    _require()
    import dask.array as da
    refuse_dask_frame(X)
    if not is_dask(X):
        raise DataError(f"X must be a dask.array, got {type(X).__name__} (use spnc.stream for files and "
                        "iterables)")
    cl = current_client(client)
    rows = X.chunks[0]
    if not compute:     # the graph holds the model: any scheduler can compute it later
        parts = _tasks(_ll_block, X, (spn, n_threads), None, guard=False)
        cols = ll_columns(spn)
        return da.concatenate([da.from_delayed(p, shape=(m,) + cols, dtype=np.float64) for p, m in zip(parts, rows)])
    parts = _tasks(_ll_block, X, (spn, n_threads), cl)
    out = _raise_first(_compute(parts, cl, f"log-likelihoods of the {len(rows)} row chunks of X"))
    return np.concatenate(out) if out else np.zeros((0,) + ll_columns(spn))
