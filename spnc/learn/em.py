"""Expectation-maximisation for SPNs with arbitrary leaves (Desana & Schnörr, "Learning
arbitrary sum-product network leaves with expectation-maximization").

One E-step is one forward + backward pass (the kernel behind :meth:`spnc.SPN.backward`) per
chunk of rows: it gives the expected count of every sum edge (the paper's beta, Eq. 5) and
every leaf's responsibility for every row (alpha, Eq. 9). Chunks are reduced to sufficient
statistics at once (kernels in :mod:`spnc._em`; numpy when that module is not built), so
memory does not grow with the number of rows times the number of nodes or leaves.

The M-step sets sum weights by Eq. 6 (with optional Dirichlet pseudo-counts and a floor,
solved exactly as a constrained maximum, so EM stays monotone) and refits every leaf by
its weighted maximum likelihood (Eq. 10). A leaf update that lowers the leaf's weighted
log-likelihood (Eq. 12) is discarded.

Leaf statistics. The built-in leaf types (Bernoulli, categorical, Gaussian, multivariate
Gaussian, indicator) are reduced to sufficient statistics block by block. Any other leaf
type (Chow-Liu trees, user-registered types) falls back to ``weighted_fit(X, resp)`` on
the whole data with the responsibilities of that table kept for the pass (n x its leaves).
A leaf type may opt into streaming by defining ``em_stats(table, options)`` returning an
object with the methods of :class:`_LeafStats`.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from .. import _core
from .. import stream as _stream
from . import _em_blocks
from .._progress import Progress
from ..errors import DataError, ParameterError, StructureError
from ..graph import SPN, SUM, PRODUCT, _n_threads
from ..leaves import base as _lb
from ._params import ARRAY_LIKE, BOOL, N_THREADS, RANDOM_STATE, Instance, Interval, Options
from .base import DensityEstimator

try:  # compiled hard-EM kernel; the numpy top-down pass below is the fallback
    from .. import _em
    if _em.block_size() != _core.BLOCK:
        _em = None
except ImportError:  # pragma: no cover - depends on the build
    _em = None

_LOG2PI = math.log(2.0 * math.pi)
#: relative slack of the Eq. 12 comparison (rounding in the statistics)
_EQ12_RTOL = 1e-9


# ====================================================================== leaf statistics
class _LeafStats:
    """Streaming sufficient statistics of one leaf table (the accumulate/finalise split).

    ``zero()`` -> dict of arrays; ``accumulate(s, XT, R, rw)`` adds one chunk of rows, given
    transposed (``XT`` (n_vars, m)), with ``R`` the leaf responsibilities of all leaves in
    slot layout (n_leaves, m) and ``rw`` the row weights (m,); ``fit(s)`` -> new parameter
    arrays; ``score(params, s)`` -> (L,) the weighted log-likelihood (plus the log prior of
    the pseudo-counts or ridge) of each leaf under ``params``, the quantity Eq. 12 compares."""

    def __init__(self, table: _lb.LeafType, alpha: float, min_std: float, n_threads: int = 1):
        self.t, self.alpha, self.min_std, self.nt = table, float(alpha), float(min_std), int(n_threads)

    def _resp(self, R: np.ndarray, rw: np.ndarray) -> np.ndarray:
        return R[self.t.slot] * rw


def _discrete_counts(t: _lb.LeafType, offset: np.ndarray, counts: np.ndarray, XT, R, rw, nt: int) -> None:
    if _em is not None:
        _em.discrete_counts(R, t.slot, t.var, XT, rw, offset, counts, nt)
        return
    x = XT[t.var]
    obs = ~np.isnan(x)
    idx = offset[:, None] + np.where(obs, x, 0.0).astype(np.int64)
    counts += np.bincount(idx[obs], weights=(R[t.slot] * rw)[obs], minlength=len(counts))


class _BernoulliStats(_LeafStats):
    # count[2 l + x]: weighted rows with x_var = x under leaf l
    def zero(self):
        return {"count": np.zeros(2 * len(self.t))}

    def accumulate(self, s, XT, R, rw):
        if _em is not None and hasattr(_em, "binary_counts"):
            _em.binary_counts(R, self.t.slot, self.t.var, XT, rw, s["count"], self.nt)
            return
        _discrete_counts(self.t, 2 * np.arange(len(self.t), dtype=np.int64), s["count"], XT, R, rw, self.nt)

    def fit(self, s):
        a = self.alpha
        c0, c1 = s["count"][0::2], s["count"][1::2]
        p = self.t.params["p"].astype(np.float64).copy()
        keep = c0 + c1 + 2 * a > 0
        p[keep] = (c1[keep] + a) / (c0[keep] + c1[keep] + 2 * a)
        return {"p": np.clip(p, 0.0, 1.0)}

    def score(self, params, s):
        p, a = params["p"], self.alpha
        return _xlogy(s["count"][1::2] + a, p) + _xlogy(s["count"][0::2] + a, 1.0 - p)


class _CategoricalStats(_LeafStats):
    def zero(self):
        return {"count": np.zeros(len(self.t.params["prob"]))}

    def accumulate(self, s, XT, R, rw):
        _discrete_counts(self.t, np.ascontiguousarray(self.t.params["prob_ptr"][:-1], dtype=np.int64),
                         s["count"], XT, R, rw, self.nt)

    def fit(self, s):
        ptr = self.t.params["prob_ptr"]
        prob = self.t.params["prob"].astype(np.float64).copy()
        c = s["count"] + self.alpha
        tot = np.add.reduceat(c, ptr[:-1]) if len(c) else np.zeros(0)
        keep = np.repeat(tot > 0, np.diff(ptr))
        prob[keep] = (c / np.repeat(np.where(tot > 0, tot, 1.0), np.diff(ptr)))[keep]
        return {"prob_ptr": ptr, "prob": prob}

    def score(self, params, s):
        ptr = self.t.params["prob_ptr"]
        v = _xlogy(s["count"] + self.alpha, params["prob"])
        return np.add.reduceat(v, ptr[:-1]) if len(v) else np.zeros(0)


class _GaussianStats(_LeafStats):
    # statistics are centred on the current mean (numerically stable one-pass moments)
    def zero(self):
        L = len(self.t)
        return {"center": np.array(self.t.params["mean"], dtype=np.float64),
                "w": np.zeros(L), "sd": np.zeros(L), "sdd": np.zeros(L)}

    def recentre(self, s, center):
        """Move the moments to another centre (online EM mixes statistics of several steps)."""
        d = center - s["center"]
        s["sdd"] = s["sdd"] - 2 * d * s["sd"] + s["w"] * d ** 2
        s["sd"] = s["sd"] - s["w"] * d
        s["center"] = np.array(center, dtype=np.float64)

    def accumulate(self, s, XT, R, rw):
        center = np.ascontiguousarray(s["center"])
        if _em is not None:
            _em.gauss_moments(R, self.t.slot, self.t.var, XT, rw, center, s["w"], s["sd"], s["sdd"], self.nt)
            return
        x = XT[self.t.var]
        obs = ~np.isnan(x)
        w = np.where(obs, self._resp(R, rw), 0.0)
        d = np.where(obs, x - center[:, None], 0.0)
        wd = w * d
        s["w"] += w.sum(1)
        s["sd"] += wd.sum(1)
        s["sdd"] += (wd * d).sum(1)

    def fit(self, s):
        m0 = s["center"]
        mean, std = m0.copy(), self.t.params["std"].astype(np.float64).copy()
        k = s["w"] > 0
        delta = s["sd"][k] / s["w"][k]
        var = s["sdd"][k] / s["w"][k] - delta ** 2
        mean[k] = m0[k] + delta
        std[k] = np.sqrt(np.maximum(var, self.min_std ** 2))
        return {"mean": mean, "std": std}

    def score(self, params, s):
        delta = params["mean"] - s["center"]
        sq = s["sdd"] - 2 * delta * s["sd"] + s["w"] * delta ** 2
        var = params["std"] ** 2
        return -0.5 * s["w"] * (_LOG2PI + np.log(var)) - 0.5 * sq / var


class _MVGaussianStats(_LeafStats):
    """Rows with a missing value in the leaf's scope are left out (as in ``weighted_fit``).
    The covariance floor adds ``min_std**2`` to the diagonal (scikit-learn's ``reg_covar``)."""

    def zero(self):
        p = self.t.params
        return {"center": np.array(p["mean"], dtype=np.float64), "w": np.zeros(len(self.t)),
                "sd": np.zeros(len(p["mean"])), "sdd": np.zeros(len(p["cov"]))}

    def recentre(self, s, center):
        """Move the moments to another centre (online EM mixes statistics of several steps)."""
        for i in range(len(self.t)):
            k, a, b, c0, c1, sd, sdd = self._moments(i, s)
            d = center[a:b] - s["center"][a:b]
            S = sdd - np.outer(sd, d) - np.outer(d, sd) + s["w"][i] * np.outer(d, d)
            s["sdd"][c0:c1] = S.ravel()
            s["sd"][a:b] = sd - s["w"][i] * d
        s["center"] = np.array(center, dtype=np.float64)

    def accumulate(self, s, XT, R, rw):
        p = self.t.params
        for i, sc in enumerate(self.t.scopes):
            a, b = p["mean_ptr"][i], p["mean_ptr"][i + 1]
            d = XT[sc] - s["center"][a:b, None]
            ok = ~np.isnan(d).any(0)
            w = R[self.t.slot[i]] * rw
            if not ok.all():
                w = np.where(ok, w, 0.0)
                d = np.where(ok[None, :], d, 0.0)
            wd = d * w
            s["w"][i] += w.sum()
            s["sd"][a:b] += wd.sum(1)
            s["sdd"][p["cov_ptr"][i]:p["cov_ptr"][i + 1]] += (wd @ d.T).ravel()

    def _moments(self, i, s):
        p = self.t.params
        k = len(self.t.scopes[i])
        a, b = p["mean_ptr"][i], p["mean_ptr"][i + 1]
        c0, c1 = p["cov_ptr"][i], p["cov_ptr"][i + 1]
        return k, a, b, c0, c1, s["sd"][a:b], s["sdd"][c0:c1].reshape(k, k)

    def fit(self, s):
        p = self.t.params
        mean, cov = p["mean"].astype(np.float64).copy(), p["cov"].astype(np.float64).copy()
        for i in range(len(self.t)):
            W = s["w"][i]
            if W <= 0:
                continue
            k, a, b, c0, c1, sd, sdd = self._moments(i, s)
            delta = sd / W
            C = sdd / W - np.outer(delta, delta)
            C = 0.5 * (C + C.T) + self.min_std ** 2 * np.eye(k)
            mean[a:b] = s["center"][a:b] + delta
            cov[c0:c1] = C.ravel()
        return {"mean_ptr": p["mean_ptr"], "mean": mean, "cov_ptr": p["cov_ptr"], "cov": cov}

    def score(self, params, s):
        p = self.t.params
        out = np.zeros(len(self.t))
        for i in range(len(self.t)):
            W = s["w"][i]
            if W <= 0:
                continue
            k, a, b, c0, c1, sd, sdd = self._moments(i, s)
            delta = params["mean"][a:b] - s["center"][a:b]
            S = sdd - np.outer(sd, delta) - np.outer(delta, sd) + W * np.outer(delta, delta)
            C = params["cov"][c0:c1].reshape(k, k)
            sign, logdet = np.linalg.slogdet(C)
            if sign <= 0:
                out[i] = -np.inf
                continue
            # the ridge is the exact maximiser of Q - W * min_std**2 * tr(C^-1) / 2: compare that
            S = S + W * self.min_std ** 2 * np.eye(k)
            out[i] = -0.5 * W * (k * _LOG2PI + logdet) - 0.5 * np.trace(np.linalg.solve(C, S))
        return out


class _NoStats(_LeafStats):
    """Leaves without parameters (indicators)."""

    def zero(self):
        return {}

    def accumulate(self, s, XT, R, rw):
        pass

    def fit(self, s):
        return dict(self.t.params)

    def score(self, params, s):
        return np.zeros(len(self.t))


_STATS = {"bernoulli": _BernoulliStats, "categorical": _CategoricalStats, "gaussian": _GaussianStats,
          "mvgaussian": _MVGaussianStats, "indicator": _NoStats}


def _xlogy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, x * np.log(np.where(x > 0, y, 1.0)), 0.0)


def _stats_for(table: _lb.LeafType, alpha: float, min_std: float, n_threads: int = 1):
    hook = getattr(type(table), "em_stats", None)
    if hook is not None:
        return hook(table, {"alpha": alpha, "min_std": min_std, "n_threads": n_threads})
    cls = _STATS.get(table.name)
    return None if cls is None else cls(table, alpha, min_std, n_threads)


# ====================================================================== sum weights
def constrained_weights(counts: np.ndarray, seg: np.ndarray, n_seg: int, floor: float) -> np.ndarray:
    """Maximise sum_i c_i log w_i per segment under sum w = 1 and w_i >= floor.

    The solution is w_i = max(floor, c_i / lambda) (KKT); found by clamping the entries that
    fall below the floor until none does (at most the segment length rounds, usually one).
    Segments with no counts are returned as NaN (the caller keeps the old weights)."""
    deg = np.bincount(seg, minlength=n_seg).astype(np.float64)
    f = np.minimum(floor, 1.0 / np.maximum(deg, 1.0))[seg]
    tot = np.bincount(seg, counts, minlength=n_seg)
    clamp = np.zeros(len(counts), dtype=bool)
    while True:
        free_c = np.where(clamp, 0.0, counts)
        free_tot = np.bincount(seg, free_c, minlength=n_seg)
        n_cl = np.bincount(seg, clamp, minlength=n_seg)
        mass = 1.0 - n_cl * np.minimum(floor, 1.0 / np.maximum(deg, 1.0))
        scale = np.divide(mass, free_tot, out=np.zeros(n_seg), where=free_tot > 0)
        w = np.where(clamp, f, free_c * scale[seg])
        new = ~clamp & (w < f)
        if not new.any():
            break
        clamp |= new
    tw = np.bincount(seg, w, minlength=n_seg)
    w = np.divide(w, tw[seg], out=np.full(len(w), np.nan), where=(tot > 0)[seg] & (tw > 0)[seg])
    return w


# ====================================================================== the estimator
class EM(DensityEstimator):
    """EM for the weights and leaf parameters of a fixed SPN structure.

    Parameters
    ----------
    init : the starting model (a compiled :class:`spnc.SPN`, from any learner or file);
        it is not modified.
    max_iter : passes over the data (epochs for ``variant="online"``).
    tol : stop when the mean training log-likelihood improves by less than this.
    variant : ``"soft"`` (posterior responsibilities), ``"hard"`` (each row follows its
        max-product induced tree; monotone in the max-product objective) or ``"online"``
        (stepwise EM over mini-batches: running statistics mixed with step
        ``(t + 1) ** -step_decay``).
    alpha : Dirichlet pseudo-count added to every sum edge and every discrete leaf state.
    weight_floor : lower bound of every sum weight (exact constrained M-step).
    min_std : Gaussian std floor; multivariate Gaussians get ``min_std**2`` on the diagonal.
    patience : with validation data, stop after this many passes without a better
        validation log-likelihood and return the best model seen.
    batch_size : rows per mini-batch (online) and per E-step block (soft/hard).
    step_decay : online step exponent, in (0.5, 1].
    freeze : node ids whose parameters stay fixed (sum weights or leaf parameters).
    check_leaves : apply the Eq. 12 check to every leaf update.
    random_state : seed of the mini-batch order (online).
    verbose : print one line per pass when > 0.
    n_threads : threads of the inference kernels (None: automatic).

    Attributes after :meth:`fit`: ``spn_`` (a new :class:`spnc.SPN`; the input is untouched),
    ``history_`` (dict of ``train`` / ``valid`` mean log-likelihoods, one entry per pass, the
    first being the initial model), ``n_iter_``, ``rejected_`` (leaf updates refused by
    Eq. 12, summed over passes).

    Examples
    --------
    >>> import numpy as np, spnc
    >>> from spnc.learn.em import EM
    >>> spn = spnc.compile(spnc.Sum([spnc.Bernoulli(0, .3), spnc.Bernoulli(0, .6)], [.5, .5]))
    >>> X = np.array([[0.], [1.], [1.], [1.]])
    >>> em = EM(init=spn, max_iter=5).fit(X)
    >>> bool(em.history_["train"][-1] >= em.history_["train"][0])
    True
    """

    _parameter_constraints = {
        "init": [Instance(SPN, name="a compiled spnc.SPN")],
        "max_iter": [Interval(int, 1)],
        "tol": [Interval(float), Options(-np.inf)],
        "variant": [Options("soft", "hard", "online")],
        "alpha": [Interval(float, 0)],
        "weight_floor": [Interval(float, 0, 1, closed="left")],
        "min_std": [Interval(float, 0, closed="neither")],
        "patience": [Interval(int, 1)],
        "batch_size": [Interval(int, 1)],
        "step_decay": [Interval(float, 0.5, 1, closed="right")],
        "freeze": [ARRAY_LIKE, None],
        "check_leaves": [BOOL],
        "random_state": [RANDOM_STATE, None],
        "verbose": [Interval(int, 0), BOOL],
        "n_threads": [N_THREADS, None],
    }

    def __init__(self, init: SPN | None = None, max_iter: int = 100, tol: float = 1e-6, variant: str = "soft",
                 alpha: float = 0.0,
                 weight_floor: float = 1e-10, min_std: float = 1e-3, patience: int = 5,
                 batch_size: int = 4096, step_decay: float = 0.7, freeze=None, check_leaves: bool = True,
                 random_state: int | None = None, verbose: int = 0, n_threads: int | None = None):
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.variant = variant
        self.alpha = alpha
        self.weight_floor = weight_floor
        self.min_std = min_std
        self.patience = patience
        self.batch_size = batch_size
        self.step_decay = step_decay
        self.freeze = freeze
        self.check_leaves = check_leaves
        self.random_state = random_state
        self.verbose = verbose
        self.n_threads = n_threads

    def fit(self, X, y=None, X_valid=None, sample_weight=None) -> "EM":
        """Run EM from the parameters of ``init`` on the rows of ``X`` (``X_valid``: stop
        early on it and keep the best model). Returns ``self``. ``X`` may also be a block
        source (HDF5/Zarr dataset, ``"file.h5:/path"``, list of row blocks) or a Dask
        array: each E-step then streams it (:mod:`spnc.learn._em_blocks`)."""
        self._validate_params()
        model = self.init
        if model.combine == "independent":
            raise StructureError("EM needs a single-root or mixture model, not combine='independent'")
        if _stream.is_streamed(X):   # a file, iterable of blocks or Dask array: E-steps block by block
            X, w, wsum = _em_blocks.prepare(self, model, X, sample_weight)
        else:
            X = model._check_X(X)
            if X.shape[0] == 0:
                raise DataError("X has no rows")
            w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
            if w.shape != (X.shape[0],) or not np.all(np.isfinite(w)) or np.any(w < 0):
                raise DataError(f"sample_weight must be {X.shape[0]} finite non-negative values")
            wsum = float(w.sum())
        Xv = None if X_valid is None else model._check_X(X_valid, "X_valid")
        spn = model.copy()
        self._setup(spn)
        hist_t: list[float] = []
        hist_v: list[float] = []
        self.rejected_ = 0
        best, best_v, since = spn, -np.inf, 0
        if Xv is not None:   # the starting point competes too: EM never returns a worse model
            best_v = float(np.mean(spn.log_likelihood(Xv, n_threads=self.n_threads)))
        counts = np.zeros(spn.n_nodes)
        rng = np.random.default_rng(self.random_state)
        run: dict | None = None
        t_step = 0
        it = 0
        prog = Progress("em")
        for it in range(1, int(self.max_iter) + 1):
            t0 = time.perf_counter()
            if self.variant == "online":
                order = rng.permutation(X.shape[0])
                for b0 in range(0, len(order), int(self.batch_size)):
                    rows = np.sort(order[b0:b0 + int(self.batch_size)])
                    est = self._estep(spn, X[rows], w[rows], hard=False)
                    if run is not None:
                        for k, st in run["leaf"].items():
                            h = _stats_for(spn.leaf_tables[k], self.alpha, self.min_std)
                            if hasattr(h, "recentre") and k in est["leaf"]:
                                h.recentre(st, est["leaf"][k]["center"])
                    scale = wsum / max(float(w[rows].sum()), 1e-300)
                    eta = (t_step + 1.0) ** -float(self.step_decay)
                    run = _mix(run, est, eta, scale)
                    t_step += 1
                    spn = self._mstep(spn, run, X[rows], w[rows])
                est = run
                obj = float(np.dot(w, spn.log_likelihood(X, n_threads=self.n_threads)) / wsum)
                if it == 1:
                    hist_t.append(float(np.dot(w, model.log_likelihood(X, n_threads=self.n_threads)) / wsum))
            else:
                est = self._estep(spn, X, w, hard=self.variant == "hard")
                hist_t.append(est["objective"] / wsum)
                if it > 1 and hist_t[-1] - hist_t[-2] < float(self.tol):
                    counts = est["node_counts"]
                    if Xv is None:
                        best = spn
                    break
                counts = est["node_counts"]
                spn = self._mstep(spn, est, X, w)
                obj = None
            counts = est["node_counts"]
            if obj is not None:
                hist_t.append(obj)
            if Xv is not None:
                v = float(np.mean(spn.log_likelihood(Xv, n_threads=self.n_threads)))
                hist_v.append(v)
                if v > best_v:
                    best, best_v, since = spn, v, 0
                else:
                    since += 1
            else:
                best = spn
            vs = f" valid {hist_v[-1]:.6f}" if hist_v else ""
            if self.verbose:
                print(f"[EM {self.variant}] pass {it}: train {hist_t[-1]:.6f}{vs} ({time.perf_counter() - t0:.2f} s)")
            else:
                prog.update(f"pass {it}/{int(self.max_iter)}: train {hist_t[-1]:.6f}{vs}")
            if Xv is not None and since >= int(self.patience):
                break
            if self.variant == "online" and len(hist_t) > 1 and abs(hist_t[-1] - hist_t[-2]) < float(self.tol):
                break
        else:
            if self.variant != "online":  # the objective of the final parameters
                hist_t.append(self._estep(spn, X, w, hard=self.variant == "hard", stats=False)["objective"] / wsum)
        self.n_iter_ = it
        self.history_ = {"train": np.asarray(hist_t), "valid": np.asarray(hist_v)}
        self.spn_ = self._finish(best, counts)
        return self

    def _setup(self, spn: SPN) -> None:
        N = spn.n_nodes
        self._parent = np.repeat(np.arange(N), np.diff(spn.child_ptr))
        sums = np.flatnonzero(spn.kind == SUM)
        self._sum_edges = np.flatnonzero(spn.kind[self._parent] == SUM)
        self._seg = np.searchsorted(sums, self._parent[self._sum_edges])
        self._n_sums = len(sums)
        frozen = np.zeros(N, dtype=bool)
        if self.freeze is not None:
            f = np.asarray(self.freeze, dtype=np.int64).ravel()
            if f.size and (f.min() < 0 or f.max() >= N):
                raise ParameterError("freeze", f"freeze lists node ids outside 0..{N - 1}")
            frozen[f] = True
        self._frozen = frozen

    # ------------------------------------------------------------------ E-step
    def _estep(self, spn: SPN, X: np.ndarray, w: np.ndarray, hard: bool, stats: bool = True) -> dict:
        """Edge counts, node counts, leaf statistics and the objective (sum of weighted
        log-likelihoods; max-product values for hard EM) in one pass over row chunks."""
        if not isinstance(X, np.ndarray):   # a block source or a Dask array
            return _em_blocks.estep(self, spn, X, w, hard, stats)
        nt = _n_threads(self.n_threads, X.shape[0] * (spn.n_edges + spn.n_nodes))
        handlers = {k: _stats_for(t, self.alpha, self.min_std, nt) for k, t in spn.leaf_tables.items() if len(t)}
        leaf_stats = {k: h.zero() for k, h in handlers.items() if h is not None}
        kept: dict[str, list] = {k: [] for k, h in handlers.items() if h is None}
        acc = {"edge": np.zeros(spn.n_edges), "node": np.zeros(spn.n_nodes)}
        obj = 0.0
        for r0, XT, R, rw, ll in _chunk_passes(spn, X, w, hard, nt, int(self.batch_size), acc):
            if np.any(ll == -np.inf):
                r = r0 + int(np.flatnonzero(ll == -np.inf)[0])
                raise DataError(f"row {r} has probability zero under the model; EM cannot use it")
            obj += float(np.dot(rw[: len(ll)], ll))
            if not stats:
                continue
            for k, table in spn.leaf_tables.items():
                if not len(table):
                    continue
                if k in leaf_stats:
                    handlers[k].accumulate(leaf_stats[k], XT, R, rw)
                else:
                    kept[k].append((R[table.slot, : len(ll)] * rw[: len(ll)]).T)
        return {"objective": obj, "edge_counts": acc["edge"], "node_counts": acc["node"], "leaf": leaf_stats,
                "kept": {k: np.concatenate(v) if v else None for k, v in kept.items()}}

    # ------------------------------------------------------------------ M-step
    def _mstep(self, spn: SPN, est: dict, X: np.ndarray, w: np.ndarray) -> SPN:
        weight = spn.weight.copy()
        se = self._sum_edges
        if se.size:
            c = est["edge_counts"][se] + float(self.alpha)
            new = constrained_weights(c, self._seg, self._n_sums, float(self.weight_floor))
            upd = ~np.isnan(new) & ~self._frozen[self._parent[se]]
            weight[se[upd]] = new[upd]
        rw = spn.root_weights
        if spn.combine == "mixture":
            c = est["node_counts"][spn.roots] + float(self.alpha)
            nr = constrained_weights(c, np.zeros(len(c), dtype=np.int64), 1, float(self.weight_floor))
            if not np.isnan(nr).any():
                rw = nr
        tables = {}
        for k, table in spn.leaf_tables.items():
            tables[k] = self._refit_table(spn, table, est, X, w) if len(table) else table
        return SPN.from_arrays(spn.kind, spn.child_ptr, spn.child, weight, tables, spn.cardinality,
                               var_type=spn.var_type, var_names=spn.var_names, roots=spn.roots,
                               root_weights=rw, combine=spn.combine, stats=spn.stats, learner=spn.learner)

    def _refit_table(self, spn: SPN, table: _lb.LeafType, est: dict, X: np.ndarray, w: np.ndarray) -> _lb.LeafType:
        k = table.name
        frozen = self._frozen[table.node]
        if frozen.all():
            return table
        if k in est["leaf"]:
            h = _stats_for(table, self.alpha, self.min_std)
            s = est["leaf"][k]
            params = h.fit(s)
            new = type(table).from_arrays(table.node, table.scopes, params)
            ok = ~frozen
            if self.check_leaves:
                old_s, new_s = h.score(table.params, s), h.score(params, s)
                ok &= new_s >= old_s - _EQ12_RTOL * np.abs(old_s)
        else:
            resp = est["kept"].get(k)
            if resp is None:  # online pass: only the current mini-batch is at hand
                return table
            new = type(table).from_arrays(table.node, table.scopes,
                                          {a: np.array(v, copy=True) for a, v in table.to_arrays().items()})
            _copy_private(table, new)
            new.validate(spn.cardinality)
            new.weighted_fit(X, resp, alpha=float(self.alpha), min_std=float(self.min_std),
                             min_var=float(self.min_std) ** 2, n_threads=self.n_threads)
            new.validate(spn.cardinality)
            ok = ~frozen
            if self.check_leaves:
                old_s = _table_scores(table, X, resp)
                ok &= _table_scores(new, X, resp) >= old_s - _EQ12_RTOL * np.abs(old_s)
        self.rejected_ += int(np.sum(~ok & ~frozen))
        if ok.all():
            return new
        if not ok.any():
            return table
        merged = type(table).from_nodes(table.node, [new.to_node(i) if ok[i] else table.to_node(i)
                                                     for i in range(len(table))])
        return merged

    def _finish(self, spn: SPN, counts: np.ndarray) -> SPN:
        params = {k: _jsonable(getattr(self, k)) for k in self._param_names() if k not in ("init", "freeze")}
        params["freeze"] = None if self.freeze is None else np.asarray(self.freeze).ravel().tolist()
        params["n_iter"] = int(self.n_iter_)
        stats = dict(spn.stats)
        stats["count"] = np.asarray(counts, dtype=np.float64)
        learner = {"name": "em", "version": "1", "params": params,
                   "arrays": {"history_train": np.asarray(self.history_["train"], dtype=np.float64),
                              "history_valid": np.asarray(self.history_["valid"], dtype=np.float64)}}
        tables = {k: type(t).from_arrays(t.node, t.scopes, t.to_arrays()) for k, t in spn.leaf_tables.items()}
        for k, t in spn.leaf_tables.items():
            _copy_private(t, tables[k])
        return SPN.from_arrays(spn.kind, spn.child_ptr, spn.child, spn.weight, tables, spn.cardinality,
                               var_type=spn.var_type, var_names=spn.var_names, roots=spn.roots,
                               root_weights=spn.root_weights, combine=spn.combine, stats=stats, learner=learner)


# ====================================================================== helpers
def _mix(run: dict | None, est: dict, eta: float, scale: float) -> dict:
    """Stepwise EM: running statistics <- (1 - eta) running + eta * scale * batch."""
    def comb(a, b):
        return b * scale if a is None else (1.0 - eta) * a + eta * scale * b
    out = {"objective": est["objective"],
           "edge_counts": comb(None if run is None else run["edge_counts"], est["edge_counts"]),
           "node_counts": comb(None if run is None else run["node_counts"], est["node_counts"]),
           "leaf": {}, "kept": est["kept"]}
    for k, s in est["leaf"].items():
        prev = None if run is None else run["leaf"].get(k)
        out["leaf"][k] = {a: (v if a == "center" else comb(None if prev is None else prev[a], v))
                          for a, v in s.items()}
    return out


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else str(float(v))  # JSON has no inf/nan
    return v


def _copy_private(src: _lb.LeafType, dst: _lb.LeafType) -> None:
    # cltree tables keep variable cardinalities outside their arrays
    if hasattr(src, "_card") and getattr(src, "_card", None) is not None:
        dst._card = np.array(src._card, copy=True)


def _table_scores(table: _lb.LeafType, X: np.ndarray, resp: np.ndarray) -> np.ndarray:
    """sum_r resp[r, i] log phi_i(x_r) for each leaf i of ``table`` (Eq. 12), in row blocks."""
    out = np.zeros(len(table))
    step = 4096
    slot = table.slot
    for r0 in range(0, X.shape[0], step):
        XT = np.ascontiguousarray(X[r0:r0 + step].T)
        L = np.zeros((int(slot.max()) + 1, XT.shape[1]))
        table.log_prob(XT, L, _lb.MARGINAL, 1)
        lp = L[slot].T
        r = resp[r0:r0 + step]
        out += np.where(r > 0, r * np.where(r > 0, lp, 0.0), 0.0).sum(0)
    return out


def _hard_pass(spn: SPN, X: np.ndarray, w: np.ndarray, n_threads: int | None, compiled: bool = True):
    """Hard E-step on one block: every row follows its max-product induced tree (first
    maximum at ties). Returns the max-product log-values, edge counts, node counts and 0/1
    leaf responsibilities (m, n_leaves) in slot order."""
    if compiled and _em is not None:
        acc = {"edge": np.zeros(spn.n_edges), "node": np.zeros(spn.n_nodes)}
        nt = _n_threads(n_threads, X.shape[0] * (spn.n_edges + spn.n_nodes))
        parts = [(XT, R, rw, ll) for _, XT, R, rw, ll in _chunk_passes(spn, X, w, True, nt, 0, acc)]
        val = np.concatenate([p[3] for p in parts])
        resp = np.concatenate([p[1][: spn.n_leaves, : len(p[3])].T for p in parts])
        return val, acc["edge"], acc["node"], resp
    V = spn.node_log_values(X, mode=_lb.MAX, n_threads=n_threads).T  # (N, m)
    N, m = V.shape
    ptr, child, logw, kind = spn.child_ptr, spn.child, spn.logw, spn.kind
    active = np.zeros((N, m), dtype=bool)
    if spn.combine == "mixture":
        lw = np.log(spn.root_weights, where=spn.root_weights > 0, out=np.full(len(spn.roots), -np.inf))
        rv = V[spn.roots] + lw[:, None]
        pick = np.argmax(rv, axis=0)
        val = rv[pick, np.arange(m)]
        for i, r in enumerate(spn.roots):
            active[r] |= pick == i
    else:
        val = V[spn.root]
        active[spn.root] = True
    edge = np.zeros(spn.n_edges)
    for n in range(N - 1, -1, -1):
        if kind[n] >= 2 or not active[n].any():
            continue
        a, b = ptr[n], ptr[n + 1]
        ch = child[a:b]
        if kind[n] == PRODUCT:
            active[ch] |= active[n]
            continue
        sel = np.argmax(V[ch] + logw[a:b, None], axis=0)
        for j, c in enumerate(ch):
            on = active[n] & (sel == j)
            active[c] |= on
            edge[a + j] = float(np.dot(on, w))
    node = active.astype(np.float64) @ w
    leaf_nodes = np.empty(spn.n_leaves, dtype=np.int64)
    for t in spn.leaf_tables.values():
        leaf_nodes[t.slot] = t.node
    resp = active[leaf_nodes].T.astype(np.float64)
    return val, edge, node, resp


def _root_logw(spn: SPN) -> np.ndarray:
    if spn.combine == "mixture":
        return np.log(spn.root_weights, where=spn.root_weights > 0, out=np.full(len(spn.roots), -np.inf))
    return np.zeros(1)


#: leaf-matrix and responsibility values per chunk: small enough to stay in cache between the
#: backward kernel that writes the responsibilities and the statistics kernels that read them
_CACHE_VALUES = 1 << 18


def _em_chunks(spn: SPN, X: np.ndarray, nt: int):
    """(r0, r1, XT) like SPN._chunks, but with chunks sized for cache reuse."""
    B = _core.BLOCK
    step = int(min(16384, max(B * nt, _CACHE_VALUES // max(spn.n_leaves, 1) // B * B)))
    n = X.shape[0]
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        m = -(-(r1 - r0) // B) * B
        XT = np.full((spn.n_vars, m), np.nan)
        XT[:, : r1 - r0] = X[r0:r1].T
        yield r0, r1, XT


def _chunk_passes(spn: SPN, X: np.ndarray, w: np.ndarray, hard: bool, nt: int, block: int, acc: dict):
    """Yield ``(r0, XT, R, rw, ll)`` per chunk of rows: the transposed chunk (n_vars, m), the
    leaf responsibilities in slot layout (n_leaves, m), row weights (m,; 0 on padding) and
    the objective of the real rows; edge and node counts are added to ``acc``.

    With the compiled helpers the core kernels are called on the container's own chunks
    (no (rows x leaves) transposes); otherwise the public SPN.backward / a numpy top-down
    pass run on blocks of ``block`` rows."""
    if _em is None:
        step = block if not hard else max(64, min(block, (1 << 22) // max(spn.n_nodes, 1)))
        for r0 in range(0, X.shape[0], step):
            Xb, wb = X[r0:r0 + step], w[r0:r0 + step]
            if hard:
                ll, e, n, resp = _hard_pass(spn, Xb, wb, nt, compiled=False)
            else:
                out = spn.backward(Xb, sample_weight=wb, leaf_responsibilities=True, n_threads=nt)
                ll, e, n, resp = (out["log_likelihood"], out["edge_counts"], out["node_counts"],
                                  out["leaf_responsibilities"])
            acc["edge"] += e
            acc["node"] += n
            yield r0, np.ascontiguousarray(Xb.T), np.ascontiguousarray(resp.T), np.ascontiguousarray(wb), ll
        return
    rlw = _root_logw(spn)
    edge = np.zeros((nt, spn.n_edges))
    node = np.zeros((nt, spn.n_nodes))
    ws = spn._workspace(nt, 1 if hard else 2)
    acts = np.empty((nt, spn.n_nodes * _core.BLOCK), dtype=np.uint8) if hard else None
    empty = None
    for r0, r1, XT in _em_chunks(spn, X, nt):
        m = XT.shape[1]
        L = spn._leaf_matrix(XT, _lb.MAX if hard else _lb.MARGINAL, nt)
        rw = np.zeros(m)
        rw[: r1 - r0] = w[r0:r1]
        v = np.empty(m)
        R = np.empty((max(spn.n_leaves, 1), m))
        if hard:
            _em.hard_backward(*spn._graph(), L, spn.roots, rlw, rw, v, edge, node, R, nt, ws, acts)
        else:
            if empty is None or empty.shape[1] != m:
                empty = np.empty((0, m))
            _core.backward(*spn._graph(), L, spn.roots, rlw, rw, v, edge, node, R, empty, nt, ws, spn._ident)
        yield r0, XT, R, rw, v[: r1 - r0]
    acc["edge"] += edge.sum(0)
    acc["node"] += node.sum(0)
