"""Bagged ensembles of any spnc learner, joined as one SPN (Rahman & Gogate, Sec. 4.4).

Each bag fits a copy of the base learner on a bootstrap sample of the training rows, its
hyper-parameters drawn at random from ``param_distributions`` (random search, as in the
paper). The bags become the children of one latent sum node, weighted by their training
likelihood (the paper) or by EM on validation rows, so the ensemble is a single SPN that can
be saved, queried and merged as a whole (``merge=Merge(...)``). Bags run in parallel
processes, or as tasks on a Dask cluster (``backend="dask"``); every bag's seed, sample and
hyper-parameters come from ``random_state`` alone and bags use one kernel thread each, so
the result is the same for any ``n_jobs`` and either backend.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import inspect
import multiprocessing
import os
import pickle
import sys
import time
import uuid
import warnings
from typing import Any

import numpy as np

from .. import _budget
from .._sweep import resampled_rows
from .._warn import warn_user
from ..compose import fit_weights
from ..data import as_data, column_names, real_array, with_names
from ..errors import DataError, ParameterError, ScaleWarning, StructureError
from ..graph import SPN, compile as _compile
from ..nodes import Sum
from ..stream import is_streamed
from ._params import BOOL, MAX_INT, RANDOM_STATE, Constraint, Instance, Interval, Options, SeedLike, json_value
from ._scale import column_std, learner_floor, warn_small
from ._training import is_continuous
from .base import DensityEstimator, check_observed
from .merge import Merge


def _draw(dist: Any, rng: np.random.Generator) -> Any:
    if hasattr(dist, "rvs"):
        return dist.rvs(random_state=rng)
    if callable(dist):
        return dist(rng)
    if isinstance(dist, (list, tuple, np.ndarray)):
        v = dist[int(rng.integers(len(dist)))]
        return v.item() if isinstance(v, np.generic) else v
    return dist


#: in a worker process of a BaggedSPN pool: the pool's Event, set by the first bag to fail
_STOP = None


def _join_pool(stop) -> None:
    global _STOP
    _STOP = stop


def _fit_bag(cls: type, params: dict, X: np.ndarray, rows: np.ndarray,
             oob: bool = False, bag: tuple[int, int] = (0, 1)) -> tuple[SPN, float, float] | None:
    """One bag (runs in a worker process): the model, its mean training log-likelihood on
    all rows and its fit seconds. ``oob``: the rows the sample missed are the bag's
    ``X_valid``. ``bag``: (index, number of bags), for errors. In a pool, a bag that
    starts once another has failed returns None, unfitted."""
    if _STOP is not None and _STOP.is_set():
        return None
    t0 = time.perf_counter()
    try:
        missed = None
        if oob:
            out = np.ones(X.shape[0], dtype=bool)
            out[rows] = False
            missed = np.flatnonzero(out)
        # BaggedSPN warned of columns below the std floor, once: not every bag again
        with resampled_rows(rows, missed), warnings.catch_warnings():
            warnings.simplefilter("ignore", ScaleWarning)
            if oob:
                est = cls(**params).fit(X[rows], X_valid=X[missed] if missed.size else None)
            else:
                est = cls(**params).fit(X[rows])
        spn = est.spn_
        secs = time.perf_counter() - t0
        ll = float(np.mean(spn.log_likelihood(X, n_threads=1)))
    except DataError as e:
        _stop_pool()
        oob_rows = " (its X_valid: the rows of X its bootstrap sample missed)" if oob else ""
        raise DataError(f"BaggedSPN, bag {bag[0] + 1} of {bag[1]}{oob_rows}: {e}") from e
    except Exception as e:
        _stop_pool()
        e.add_note(f"BaggedSPN: raised by bag {bag[0] + 1} of {bag[1]}")
        raise
    return spn, ll, secs


def _stop_pool() -> None:
    """Set the pool's Event before a failed bag's error leaves the worker: the bags queued
    to this process and the others do not start."""
    if _STOP is not None:
        _STOP.set()


@contextlib.contextmanager
def _stdlib_start_method():
    """Spawned children set the parent's default start method first thing. Inside a worker
    of another pool library (joblib's loky: GridSearchCV(n_jobs=2)) that method is the
    library's, unknown to a fresh interpreter, and every child dies; the default is "spawn"
    while the bags' workers start."""
    method = multiprocessing.get_start_method(allow_none=True)
    if method is None or method in multiprocessing.get_all_start_methods():
        yield
        return
    multiprocessing.set_start_method("spawn", force=True)
    try:
        yield
    finally:
        multiprocessing.set_start_method(method, force=True)


@contextlib.contextmanager
def _main_not_rerun(cls, plans):
    """Spawned workers start by running the parent's main script again, which fits the bags
    again in a script without an ``if __name__ == "__main__":`` guard. When the learner and
    its parameters pickle without reference to the script, the workers need only importable
    code, and the script is hidden from them while they start."""
    main = sys.modules.get("__main__")
    own = pickle.dumps((cls, [p for p, _ in plans]))
    if main is None or b"__main__" in own or not (getattr(main, "__file__", None) or getattr(main, "__spec__", None)):
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)
        if "__spec__" not in saved:
            del main.__spec__


def _report(verbose, i: int, n: int, result: tuple) -> None:
    if verbose:
        print(f"[bagging] bag {i + 1}/{n}: {result[2]:.2f} s, train LL {result[1]:.4f}", file=sys.stderr)


def _fit_bags_dask(cls: type, plans: list, X: np.ndarray, oobs: list[bool], verbose) -> list:
    """The bags as tasks on the current ``dask.distributed`` client, in plan order."""
    from .. import dask as _dask
    client = _dask.current_client()
    if client is None:
        raise ParameterError("backend", "backend='dask' needs a running dask.distributed Client "
                                        "(distributed.Client() for a local cluster, or a scheduler address)")
    Xd = _dask.shared(X, client, "spnc-bag-rows")     # not scattered: recomputable if workers die
    tok = uuid.uuid4().hex
    results: list = [None] * len(plans)

    def done(i: int, result: tuple) -> None:
        results[i] = result
        _report(verbose, i, len(plans), result)

    try:        # the first bag to fail stops the others
        _dask.each(_fit_bag, [(cls, p, Xd, rows, oobs[i], (i, len(plans))) for i, (p, rows) in enumerate(plans)],
                   [f"spnc-bag-{i + 1}-{tok}" for i in range(len(plans))], done, client=client,
                   what=f"the {len(plans)} bags")
    except BaseException:
        if client.status == "running":
            client.cancel([Xd])     # the rows copied to every worker, held by this frame
        raise
    return results


def _is_dist_table(v) -> bool:
    """Names -> a distribution (``rvs``), a callable, a non-empty list or a fixed value."""
    return isinstance(v, dict) and all(isinstance(k, str) for k in v) and \
        not any(isinstance(d, (list, tuple, np.ndarray)) and len(d) == 0 for d in v.values())


class BaggedSPN(DensityEstimator):
    """Bagging with random hyper-parameter search, joined as one SPN under a latent sum.

    Parameters
    ----------
    base_learner : an spnc estimator (e.g. ``LearnSPN(sum_split="latent", leaves="chowliu")``);
        each bag fits a copy of it.
    n_bags : number of bags (the paper uses 40).
    param_distributions : ``{name: values}`` drawn per bag: a list (uniform choice), an
        object with ``rvs`` (scipy.stats), a callable ``f(rng)``, or a constant.
    weights : how the bags are weighted under the root: ``"train"`` (the paper:
        ``w_i ∝ exp(mean training log-likelihood of bag i)`` over all training rows),
        ``"uniform"``, or ``"valid"`` (maximum-likelihood mixture weights on ``X_valid`` by
        EM on the root weights only; bags that overfit their bootstrap sample get little).
    oob_valid : give each bag the training rows its bootstrap sample missed (about 37 %)
        as ``X_valid``, for base learners that stop or choose on validation data (EM,
        :class:`TreeSPN`, a refining LearnSPN); a bag whose learner reads no ``X_valid``
        gets none (with one warning when no bag does). ``X_valid`` of :meth:`fit` is never
        shown to the bags.
    merge : None, or a :class:`Merge` (its ``init`` is replaced by the ensemble) applied
        to the whole ensemble with ``X_valid``.
    n_jobs : worker processes (None or 1: in this process; -1: all cores). They are fresh
        Python processes: a base learner or parameters defined in a script need the script's
        code under ``if __name__ == "__main__":``; spnc's own learners do not.
    backend : ``"processes"`` (``n_jobs`` local processes) or ``"dask"``: one task per bag
        on the current ``dask.distributed`` client (``Client()`` for a local cluster,
        ``Client("tcp://scheduler:8786")`` for a real one), the training rows shipped once
        per worker; ``n_jobs`` is then ignored. The first bag to fail stops the others: no
        bag starts after it, and its error is raised without waiting for those running.
    random_state : seed of the samples, the draws and the bags' own seeds.
    verbose : one line per bag (on stderr, as each finishes) when > 0, with any backend.

    A data error in a bag names the bag and the row of ``X`` (not of its bootstrap sample
    or of its out-of-bag rows); any other error of a bag names it in a note.

    Attributes after :meth:`fit`: ``spn_`` (the ensemble, merged if asked),
    ``ensemble_`` (before merging), ``bag_params_``, ``bag_weights_``, ``bag_seconds_``,
    ``fit_seconds_``, ``merge_`` (the fitted :class:`Merge` or None), ``n_features_in_``.
    """

    _parameter_constraints = {
        "base_learner": [Instance(DensityEstimator, name="an spnc estimator")],
        "n_bags": [Interval(int, 1)],
        "param_distributions": [Constraint(_is_dist_table, "a dict of parameter name -> values (no empty list)"),
                                None],
        "weights": [Options("train", "uniform", "valid")],
        "oob_valid": [BOOL],
        "merge": [Instance(Merge), None],
        "n_jobs": [Interval(int, 1), Constraint(lambda v: v == -1 and not isinstance(v, bool), "-1"), None],
        "backend": [Options("processes", "dask")],
        "random_state": [RANDOM_STATE, None],
        "verbose": [Interval(int, 0), BOOL],
    }

    def __init__(self, base_learner: DensityEstimator | None = None, n_bags: int = 40, param_distributions=None,
                 weights: str = "train", oob_valid: bool = False, merge: Merge | None = None,
                 n_jobs: int | None = None, backend: str = "processes", random_state: SeedLike = None,
                 verbose: int = 0):
        self.base_learner = base_learner
        self.n_bags = n_bags
        self.param_distributions = param_distributions
        self.weights = weights
        self.oob_valid = oob_valid
        self.merge = merge
        self.n_jobs = n_jobs
        self.backend = backend
        self.random_state = random_state
        self.verbose = verbose

    @property
    def _allow_nan(self) -> bool:      # scikit-learn tags: those of the base learner
        return bool(getattr(self.base_learner, "_allow_nan", False))

    @property
    def _categorical_only(self) -> bool:
        return bool(getattr(self.base_learner, "_categorical_only", False))

    def _uses_valid(self, n_rows: int) -> bool:
        return self.weights == "valid" or self.merge is not None

    def _bag_plans(self, X: np.ndarray) -> list[tuple[dict, np.ndarray]]:
        base = self.base_learner
        names = set(base.get_params(deep=False))
        dists = self.param_distributions or {}
        for k in dists:
            if k not in names:
                raise ParameterError("param_distributions", f"BaggedSPN: param_distributions names {k!r}, "
                                                           f"which {type(base).__name__} does not have")
            if k in ("random_state", "n_threads"):
                raise ParameterError("param_distributions", f"BaggedSPN sets each bag's {k} itself (seeds from "
                                                           "its random_state, one thread per bag); remove "
                                                           f"{k!r} from param_distributions")
        n = X.shape[0]
        _budget.check(8.0 * n * int(self.n_bags), f"{int(self.n_bags)} bootstrap samples of {n} rows",
                      "use fewer bags")
        frac = X != np.round(X)                    # NaN counts too: such data is not whole
        # codes only: a bag's own check names a negative or huge value, not a cardinality
        whole = not frac.any() and X.min() >= 0 and X.max() < MAX_INT
        real = bool(np.any(frac & np.isfinite(X)))   # as data_type="auto" decides
        card = np.maximum(2, X.max(axis=0).astype(np.int64) + 1).tolist() if whole else None
        plans = []
        for ss in np.random.SeedSequence(self.random_state).spawn(int(self.n_bags)):
            rng = np.random.default_rng(ss)
            params = dict(base.get_params(deep=False))
            for k in sorted(dists):
                params[k] = _draw(dists[k], rng)
            if "random_state" in names:
                params["random_state"] = int(rng.integers(2**31 - 1))
            if "n_threads" in names:
                params["n_threads"] = 1
            if "data_type" in names and params.get("data_type") == "auto" and real:
                params["data_type"] = "continuous"     # a sample may miss every real value
            if "cardinality" in names and params.get("cardinality") is None and \
                    params.get("data_type") != "continuous" and whole:
                params["cardinality"] = card       # every bag gets the states of all rows
            try:            # a bad draw is refused now, before any bag is fitted, and said to be one
                type(base)(**params)._validate_params()
            except ParameterError as e:
                raise ParameterError("param_distributions", f"BaggedSPN: param_distributions drew "
                                     f"{e.param}={params.get(e.param)!r} for bag {len(plans) + 1}: {e}") from None
            plans.append((params, np.sort(rng.integers(0, n, size=n))))
        return plans

    def _warn_scale(self, X: np.ndarray, names) -> None:
        """Real columns below the std floor of the base learner's Gaussian leaves, said once
        (the bags do not say it again)."""
        floor = learner_floor(self.base_learner)
        if floor is None or not is_continuous(X, getattr(self.base_learner, "data_type", "continuous")):
            return
        warn_small(column_std(X), floor[0], floor[1], f"BaggedSPN ({type(self.base_learner).__name__})",
                   names=names, what=floor[2])

    def fit(self, X, y=None, X_valid=None) -> "BaggedSPN":
        """Fit the bags on bootstrap samples of ``X``; ``X_valid`` is used by ``merge`` and
        by ``weights="valid"`` (otherwise ignored, with a warning)."""
        self._no_target(y)
        self._validate_params()
        if self.weights == "valid" and X_valid is None:
            raise DataError('weights="valid" needs X_valid')
        if self.merge is not None and X_valid is None and np.size(self.merge.epsilon) > 1:
            raise DataError("merge=Merge(...) chooses epsilon from a grid, which needs X_valid; "
                            "pass X_valid or give the Merge one epsilon")
        t0 = time.perf_counter()
        if is_streamed(X):
            raise DataError("BaggedSPN draws bootstrap samples in memory: read the rows first "
                            "(spnc.stream.load) or bag a sample of them")
        X, names = as_data(X)
        X = real_array(X).astype(np.float64)
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise DataError(f"X must be a non-empty 2-D array (n_rows, n_vars), got shape {X.shape}")
        self._warn_scale(X, names)
        if not self._uses_valid(X.shape[0]):
            X_valid = self._unused_valid(X_valid, f"weights={self.weights!r} and no merge")
        frame_valid = None
        self._positional_valid(X_valid, names is not None)
        if names is not None and X_valid is not None and column_names(X_valid) is not None:
            frame_valid = X_valid          # a DataFrame or named dataset; for messages: its cells and names
            X_valid = as_data(X_valid, names, "X_valid")[0]      # the bags' models have no names
        self._check_valid(X_valid, n_cols=X.shape[1])
        plans = self._bag_plans(X)
        cls = type(self.base_learner)
        oob = bool(self.oob_valid)
        if oob and "X_valid" not in inspect.signature(cls.fit).parameters:
            raise ParameterError("oob_valid", f"BaggedSPN: oob_valid=True needs a base learner whose fit takes "
                                              f"X_valid; {cls.__name__}.fit does not")
        if oob:       # bags whose learner would not read out-of-bag rows are not given them
            oobs = [cls(**p)._uses_valid(X.shape[0]) for p, _ in plans]
            if not any(oobs):
                warn_user(f"BaggedSPN: oob_valid=True, but {cls.__name__} does not use X_valid with these "
                          "parameters (see its fit); the bags get no out-of-bag rows")
        else:
            oobs = [False] * len(plans)
        jobs = 1 if self.n_jobs is None else (os.cpu_count() or 1) if self.n_jobs == -1 else int(self.n_jobs)
        results: list = [None] * len(plans)
        if self.backend == "dask":
            results = _fit_bags_dask(cls, plans, X, oobs, self.verbose)
        elif jobs <= 1:
            for i, (p, rows) in enumerate(plans):
                results[i] = _fit_bag(cls, p, X, rows, oobs[i], (i, len(plans)))
                _report(self.verbose, i, len(plans), results[i])
        else:
            ctx = multiprocessing.get_context("spawn")     # OpenMP runtimes are not fork-safe
            stop = ctx.Event()      # the first bag to fail sets it (_fit_bag)
            pool, ok = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_join_pool,
                                              initargs=(stop,)), False
            try:
                with _main_not_rerun(cls, plans), _stdlib_start_method():
                    futs = {pool.submit(_fit_bag, cls, p, X, rows, oobs[i], (i, len(plans))): i
                            for i, (p, rows) in enumerate(plans)}
                for f in cf.as_completed(futs):
                    i = futs[f]
                    results[i] = f.result()
                    if results[i] is not None:      # None: stopped by a failure, raised when its turn comes
                        _report(self.verbose, i, len(plans), results[i])
                ok = True
            except cf.process.BrokenProcessPool as e:
                raise RuntimeError("BaggedSPN: a worker process stopped before its bag was fitted (n_jobs > 1 "
                                   "starts fresh Python processes: if the base learner or its parameters are "
                                   "defined in a script, run the script's code under `if __name__ == "
                                   "\"__main__\":`; or out of memory)") from e
            finally:    # the first failed bag stops the others: no waiting for those running
                if not ok:
                    stop.set()
                pool.shutdown(wait=ok, cancel_futures=not ok)
        models = [r[0] for r in results]
        if self.weights == "valid":
            if frame_valid is not None:
                with_names(models[0], names)._check_X(frame_valid, "X_valid")
            check_observed(models[0]._check_X(X_valid, "X_valid"))
            w = fit_weights(models, X_valid, name="X_valid")
        elif self.weights == "uniform":
            w = np.full(len(models), 1.0 / len(models))
        else:
            lls = np.array([r[1] for r in results])
            if not np.isfinite(lls.max()):
                raise DataError("BaggedSPN: weights='train' weighs bags by exp(mean training log-likelihood), "
                                "but every bag gives some training row probability 0 (a state its sample "
                                "missed?); smooth the bags (alpha > 0) or use weights='uniform' or 'valid'")
            w = np.exp(lls - lls.max())
            w /= w.sum()
        first = models[0]
        card = np.max(np.stack([m.cardinality for m in models]), axis=0)
        roots = [_one_root(m) for m in models]
        # variables by cardinality, not n_vars: no warning of the bags' own variables in no leaf
        ens = _compile(Sum(roots, w) if len(roots) > 1 else roots[0], cardinality=card,
                       var_names=names if names is not None else first.var_names)
        self.bag_params_ = [{k: v for k, v in p.items() if k in (self.param_distributions or {})} for p, _ in plans]
        self.bag_weights_ = w
        self.bag_seconds_ = np.array([r[2] for r in results])
        ens.learner = {"name": "bagged", "version": "1",
                       "params": {"base_learner": type(self.base_learner).__name__, "n_bags": int(self.n_bags),
                                  "random_state": json_value(self.random_state), "weights": self.weights,
                                  "oob_valid": oob,
                                  "merged": self.merge is not None},
                       "bag_params": [{k: json_value(v) for k, v in d.items()} for d in self.bag_params_],
                       "bag_weights": w.tolist()}
        self.ensemble_ = ens
        self.merge_ = None
        spn = ens
        if self.merge is not None:
            params = dict(self.merge.get_params(deep=False))
            params["init"] = ens
            self.merge_ = Merge(**params).fit(X, X_valid=X_valid if frame_valid is None else frame_valid)
            spn = self.merge_.spn_
        self._check_valid(X_valid if frame_valid is None else frame_valid, spn)
        self.spn_ = spn
        self.n_features_in_ = X.shape[1]
        self.fit_seconds_ = time.perf_counter() - t0
        return self


def _one_root(model):
    """A bag's model as one node: a mixture of roots under a sum of its root weights."""
    if model.combine == "independent":
        raise StructureError("BaggedSPN: a bag's model has independent roots (combine='independent'); "
                             "it is not one distribution to weight")
    nodes = model.to_nodes()
    return Sum(nodes, model.root_weights) if model.combine == "mixture" else nodes
