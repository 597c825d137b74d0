"""Expectation-maximisation for SPNs with arbitrary leaves (Desana & Schnörr, "Learning
arbitrary sum-product network leaves with expectation-maximization").

One E-step is one forward + backward pass (the kernel behind :meth:`spnc.SPN.backward`) per
chunk of rows of the one sweep engine (:mod:`spnc._sweep`): it gives the expected count of
every sum edge (the paper's beta, Eq. 5) and every leaf's responsibility for every row
(alpha, Eq. 9). Hard EM runs the MPE selection kernel with counts instead. Chunks are
reduced to sufficient statistics at once, so memory does not grow with the number of rows
times the number of nodes or leaves.

The M-step sets sum weights by Eq. 6 (with optional Dirichlet pseudo-counts and a floor,
solved exactly as a constrained maximum, so EM stays monotone) and refits every leaf by
its weighted maximum likelihood (Eq. 10; with ``alpha``, the MAP fit). A leaf update that
lowers the leaf's weighted log-likelihood, plus its log-prior when ``alpha`` > 0 (Eq. 12),
is discarded.

Leaf statistics belong to each leaf type: a table whose ``em_stats()`` returns a
:class:`spnc.leaves.base.LeafStats` is reduced block by block; any other (Chow-Liu trees,
user-registered types) falls back to ``weighted_fit(X, resp)`` on the whole data with the
responsibilities of that table kept for the pass (n x its leaves).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from .. import stream as _stream
from .._kinds import MARGINAL, SUM
from ..chowliu import check_weights
from . import _em_blocks
from ._em_mstep import _copy_private, _mix, align_steps, constrained_weights  # noqa: F401  (tests reach them here)
from ._em_pass import _chunk_passes, _table_scores  # noqa: F401  (tests reach them here)
from .._progress import Progress
from .._sweep import check_posterior_range, leaf_states, row_number
from .._threads import effective_n_threads
from ..data import as_data, is_frame, with_names
from ..errors import DataError, ParameterError, StructureError
from ..graph import SPN
from ..leaves import base as _lb
from ._params import ARRAY_LIKE, BOOL, MIN_STD, N_THREADS, RANDOM_STATE, Instance, Interval, Options, SeedLike, model_hint, pname
from ._scale import column_std, warn_small
from ._training import bounded_vars, check_real_range
from .base import DensityEstimator, check_observed, refuse_unscored

#: relative slack of the Eq. 12 comparison (rounding in the statistics)
_EQ12_RTOL = 1e-9


def _stats_for(table: _lb.LeafType, alpha: float, min_std: float, n_threads: int = 1):
    """The table's streaming EM statistics (:meth:`LeafType.em_stats`), or None."""
    return table.em_stats(float(alpha), float(min_std), int(n_threads))


# ====================================================================== the estimator
class EM(DensityEstimator):
    """EM for the weights and leaf parameters of a fixed SPN structure.

    Parameters
    ----------
    init : the starting model (a compiled :class:`spnc.SPN`, from any learner or file);
        it is not modified.
    max_iter : passes over the data (epochs for ``variant="online"``).
    tol : stop when the mean training objective (see ``history_``) improves by less
        than this.
    variant : ``"soft"`` (posterior responsibilities), ``"hard"`` (each row follows its
        max-product induced tree; monotone in the max-product objective) or ``"online"``
        (stepwise EM over mini-batches: running statistics mixed with step
        ``(t + 1) ** -step_decay``).
    alpha : Dirichlet pseudo-count added to every sum edge and every discrete leaf state.
    weight_floor : lower bound of every sum weight (exact constrained M-step).
    min_std : Gaussian std floor; multivariate Gaussians get ``min_std**2`` on the diagonal
        (more if rounding leaves the covariance not positive definite).
    patience : with validation data, stop after this many passes without a better
        validation log-likelihood and return the best model seen.
    batch_size : rows per mini-batch of the online variant (soft and hard EM read X in the
        sweep engine's chunks and ignore it); over streamed ``X`` only one batch of all
        rows per pass (``batch_size`` >= the rows).
    step_decay : online step exponent, in (0.5, 1].
    freeze : node ids whose parameters stay fixed (sum weights or leaf parameters; a
        mixture's root weights when every root is listed).
    check_leaves : apply the Eq. 12 check to every leaf update.
    random_state : seed of the mini-batch order (online).
    verbose : one line per pass on stderr when > 0.
    n_threads : threads of the inference kernels (None: automatic).

    Attributes after :meth:`fit`: ``spn_`` (a new :class:`spnc.SPN`; the input is untouched),
    ``history_`` (dict of ``train`` / ``valid`` mean log-likelihoods, one entry per pass, the
    first being the initial model; for ``variant="hard"`` the ``train`` entries are its
    objective, the mean max-product value, a lower bound of the log-likelihood),
    ``n_iter_``, ``rejected_`` (leaf updates refused by Eq. 12, summed over passes),
    ``n_features_in_``. A DataFrame ``X`` is matched to a named
    ``init`` by column name; an unnamed ``init`` takes the columns' names in ``spn_``.

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

    _allow_nan = True      # missing values are marginalised out
    _parameter_constraints = {
        "init": [Instance(SPN, name="a compiled spnc.SPN", hint=model_hint)],
        "max_iter": [Interval(int, 1)],
        "tol": [Interval(float), Options(-np.inf)],
        "variant": [Options("soft", "hard", "online")],
        "alpha": [Interval(float, 0)],
        "weight_floor": [Interval(float, 0, 1, closed="left")],
        "min_std": [MIN_STD],
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
                 random_state: SeedLike = None, verbose: int = 0, n_threads: int | None = None):
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
        array: each E-step then streams it (:mod:`spnc.learn._em_blocks`). ``X_valid``
        may be any of these too; it is read into memory once. ``sample_weight`` counts rows
        and ``alpha`` is added to the weighted counts, as in :class:`ChowLiuTree`."""
        self._no_target(y)
        self._validate_params()
        with _em_blocks.opened(X, self.init) as X:      # a file opened here is closed, even on errors
            self._client = _em_blocks.fit_client(X)     # every pass on it (None: in process)
            try:
                return self._fit(X, X_valid, sample_weight)
            finally:
                del self._client

    def _fit(self, X, X_valid, sample_weight) -> "EM":
        model = self.init
        if model.combine == "independent":
            raise StructureError("EM needs a single-root or mixture model, not combine='independent'")
        if is_frame(X):     # an unnamed model takes the columns' names; the check matches them by name
            model = with_names(model, as_data(X, model.var_names)[1])
        self._positional_valid(X_valid, is_frame(X))
        ids = 0         # each kept row's number in the caller's X (for messages); streamed: from 0
        if _stream.is_streamed(X):   # a file, iterable of blocks or Dask array: E-steps block by block
            X, w, wsum = _em_blocks.prepare(self, model, X, sample_weight)
        else:
            X = model._check_X(X)
            if X.shape[0] == 0:
                raise DataError("X has no rows")
            gauss = bounded_vars(model)         # the variables of Gaussian leaves
            check_real_range(X, 0, gauss)
            w = np.ones(X.shape[0]) if sample_weight is None else check_weights(sample_weight, X.shape[0])
            wsum = float(w.sum())
            ids = np.flatnonzero(w > 0)     # rows of weight 0 play no part (even of probability 0)
            if len(ids) < X.shape[0]:
                X, w = X[ids], w[ids]
            warn_small(column_std(X, gauss), float(self.min_std), "min_std", "EM", cols=gauss, names=model.var_names)
        if X_valid is not None and _stream.is_streamed(X_valid):   # read whole, within the memory budget
            X_valid = _stream.load(X_valid, name="X_valid", var_names=model.var_names, query=True)
        Xv = None if X_valid is None else model._check_X(X_valid, "X_valid")
        if Xv is not None:
            check_observed(Xv)          # some rows, with some observed value
        spn = model.copy()
        self._setup(spn)
        hist_t: list[float] = []
        hist_v: list[float] = []
        self.rejected_ = 0
        best, best_v, since = spn, -np.inf, 0
        if Xv is not None:   # the starting point competes too: EM never returns a worse model
            best_v = float(np.mean(spn.log_likelihood(Xv, n_threads=self.n_threads)))
            hist_v.append(best_v)
        counts = np.zeros(spn.n_nodes)
        rng = np.random.default_rng(self.random_state)
        run: dict | None = None
        t_step = 0
        it = 0
        prog = Progress("em")
        for it in range(1, int(self.max_iter) + 1):
            t0 = time.perf_counter()
            if self.variant == "online":
                for Xb, wb, ib in _em_blocks.online_batches(X, w, ids, rng, int(self.batch_size)):
                    est = self._precise(spn, Xb, wb, self._estep(spn, Xb, wb, hard=False, rows=ib), ib)
                    # rows of weight 0 were dropped: every batch weighs > 0, however little
                    scale = 1.0 if wb is None else wsum / float(wb.sum())
                    align_steps(run, est, scale, lambda k: _stats_for(spn.leaf_tables[k], self.alpha, self.min_std))
                    eta = (t_step + 1.0) ** -float(self.step_decay)
                    run = _mix(run, est, eta, scale)
                    t_step += 1
                    spn = self._mstep(spn, run, Xb, wb)
                est = run
                obj = _em_blocks.mean_ll(self, spn, X, w, wsum)
                if it == 1:
                    hist_t.append(_em_blocks.mean_ll(self, model, X, w, wsum))
            else:
                est = self._precise(spn, X, w, self._estep(spn, X, w, hard=self.variant == "hard", rows=ids), ids)
                if spn is best:          # the counts saved are those of the model returned
                    counts = est["node_counts"]
                hist_t.append(est["objective"] / wsum)
                if it > 1 and hist_t[-1] - hist_t[-2] < float(self.tol):
                    if Xv is None:
                        best = spn
                    break
                spn = self._mstep(spn, est, X, w)
                obj = None
            if obj is not None:
                counts = est["node_counts"]     # online: the running statistics
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
                print(f"[EM {self.variant}] pass {it}: train {hist_t[-1]:.6f}{vs} ({time.perf_counter() - t0:.2f} s)",
                      file=sys.stderr)
            else:
                prog.update(f"pass {it}/{int(self.max_iter)}: train {hist_t[-1]:.6f}{vs}")
            if Xv is not None and since >= int(self.patience):
                if self.variant != "online":     # the last pass's training value, as every pass has
                    hist_t.append(self._estep(spn, X, w, hard=self.variant == "hard", stats=False,
                                              rows=ids)["objective"] / wsum)
                break
            if self.variant == "online" and len(hist_t) > 1 and abs(hist_t[-1] - hist_t[-2]) < float(self.tol):
                break
        else:
            if self.variant != "online":  # the objective of the final parameters
                final = self._estep(spn, X, w, hard=self.variant == "hard", stats=False, rows=ids)
                hist_t.append(final["objective"] / wsum)
                if spn is best:
                    counts = final["node_counts"]
        if Xv is not None and best_v == -np.inf:     # else the start would come back untrained
            refuse_unscored(spn.log_likelihood(Xv, n_threads=self.n_threads), "the starting model and every "
                            "EM pass", f"drop such rows, or give the leaves mass on every state "
                                       f"({pname('alpha')} > 0)")
        self.n_iter_ = it
        self.history_ = {"train": np.asarray(hist_t), "valid": np.asarray(hist_v)}
        self.spn_ = self._finish(best, counts)
        if self.spn_.var_names is None and getattr(X, "names", None) is not None:     # DataFrame blocks
            self.spn_ = with_names(self.spn_, X.names)
        self.n_features_in_ = self.spn_.n_vars
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
            f = np.asarray(self.freeze)
            if f.ndim != 1 or (f.size and f.dtype.kind not in "iu"):
                raise ParameterError("freeze", f"freeze must be a flat list of node ids (integers), got "
                                               f"{f.dtype} values of shape {f.shape}")
            f = f.astype(np.int64)
            if f.size and (f.min() < 0 or f.max() >= N):
                raise ParameterError("freeze", f"freeze lists node ids outside 0..{N - 1}")
            frozen[f] = True
        self._frozen = frozen

    def _precise(self, spn: SPN, X, w, est: dict, rows) -> dict:
        """``est``, or the same E-step redone with the moments of Gaussian leaves centred on
        their data's means where centring on the current means lost precision (a leaf's
        data far from its mean relative to their spread: else the M-step's variance is
        rounding noise, one pass from a poor start, at any scale), and in a smaller unit of
        weight where their sums overflowed (much weight near +-MAX_REAL). Twice at most:
        a pass redone for one reason may need the other (each at most once per leaf)."""
        preset: dict = {}
        for _ in range(2):
            again = False
            for k, s in est["leaf"].items():
                h = _stats_for(spn.leaf_tables[k], self.alpha, self.min_std)
                for field, how in (("center", "imprecise"), ("unit", "overflowed")):
                    if field in preset.get(k, {}) or not hasattr(h, how):
                        continue
                    v = getattr(h, how)(s)
                    if v is not None:
                        preset.setdefault(k, {})[field] = v
                        again = True
            if not again:
                break
            self._preset = preset
            try:
                est = self._estep(spn, X, w, hard=self.variant == "hard", rows=rows)
            finally:
                del self._preset
        return est

    # ------------------------------------------------------------------ E-step
    def _estep(self, spn: SPN, X: np.ndarray, w: np.ndarray, hard: bool, stats: bool = True, rows=0) -> dict:
        """Edge counts, node counts, leaf statistics and the objective (sum of weighted
        log-likelihoods; max-product values for hard EM) in one pass over row chunks.
        ``rows``: the input row where ``X`` starts, or of each row of ``X`` (for errors)."""
        if not isinstance(X, np.ndarray):   # a block source or a Dask array
            return _em_blocks.estep(self, spn, X, w, hard, stats)
        nt = effective_n_threads(self.n_threads, X.shape[0] * (spn.n_edges + spn.n_nodes))
        handlers = {k: _stats_for(t, self.alpha, self.min_std, nt) for k, t in spn.leaf_tables.items() if len(t)}
        leaf_stats = {k: h.zero() for k, h in handlers.items() if h is not None}
        for k, fields in getattr(self, "_preset", {}).items():    # a redone pass (_precise)
            if k in leaf_stats:
                leaf_stats[k].update({f: np.array(v, dtype=np.float64) for f, v in fields.items()})
        kept: dict[str, list] = {k: [] for k, h in handlers.items() if h is None}
        acc = {"edge": np.zeros(spn.n_edges), "node": np.zeros(spn.n_nodes)}
        obj = 0.0
        # soft EM: discrete leaves with state tables are counted inside the backward kernel
        inline = leaf_states(spn, MARGINAL)[2] if not hard and stats else {}   # tables swept inline
        by_states = {k for k, h in handlers.items() if hasattr(h, "add_state_counts") and k in inline}
        need_R = stats and any(k not in by_states for k in handlers)
        for r0, XT, R, rw, ll in _chunk_passes(spn, X, w, hard, nt, acc, need_R, bool(by_states)):
            at = rows[r0:] if isinstance(rows, np.ndarray) else rows + r0
            if np.any(ll == -np.inf):
                r = row_number(at, int(np.flatnonzero(ll == -np.inf)[0]))
                hint = "" if self.variant != "online" or self.alpha else \
                    (" (online EM's first mini-batches give states they have not seen probability 0: set "
                     f"{pname('alpha')} > 0)")
                raise DataError(f"row {r} has probability zero under the model; EM cannot use it{hint}")
            check_posterior_range(ll, at)
            # not np.dot: above ~10^4 rows numpy's BLAS wakes its own threads for a dot
            # product (then spins), whatever n_threads says
            obj += float(np.einsum("i,i->", rw[: len(ll)], ll))
            if not need_R:
                continue
            for k, table in spn.leaf_tables.items():
                if not len(table) or k in by_states:
                    continue
                if k in leaf_stats:
                    handlers[k].accumulate(leaf_stats[k], XT, R, rw)
                else:
                    kept[k].append((R[table.slot, : len(ll)] * rw[: len(ll)]).T)
        for k in by_states:
            a, b = acc["spans"][k]
            handlers[k].add_state_counts(leaf_stats[k], acc["states"][a:b])
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
        if spn.combine == "mixture" and not self._frozen[spn.roots].all():
            # a root may also be another root's descendant: its weight counts only the rows
            # it takes as a root, not those its parents pass it (sum edges, product rows)
            par = self._parent
            flow = np.where(spn.kind[par] == SUM, est["edge_counts"], est["node_counts"][par])
            inflow = np.bincount(spn.child, weights=flow, minlength=spn.n_nodes)[spn.roots]
            c = np.maximum(est["node_counts"][spn.roots] - inflow, 0.0) + float(self.alpha)
            nr = constrained_weights(c, np.zeros(len(c), dtype=np.int64), 1, float(self.weight_floor))
            if not np.isnan(nr).any():
                rw = nr
        tables = {}
        for k, table in spn.leaf_tables.items():
            tables[k] = self._refit_table(spn, table, est, X, w) if len(table) else table
        return spn._reparameterised(weight, tables, rw)

    def _refit_table(self, spn: SPN, table: _lb.LeafType, est: dict, X: np.ndarray, w: np.ndarray) -> _lb.LeafType:
        k = table.name
        frozen = self._frozen[table.node]
        if frozen.all():
            return table
        if k in est["leaf"]:
            h = _stats_for(table, self.alpha, self.min_std)
            s = est["leaf"][k]
            params = h.fit(s)
            new = table.with_params(params)
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
                old_s = _table_scores(table, X, resp, self.alpha)
                ok &= _table_scores(new, X, resp, self.alpha) >= old_s - _EQ12_RTOL * np.abs(old_s)
        self.rejected_ += int(np.sum(~ok & ~frozen))
        if ok.all():
            return new
        if not ok.any():
            return table
        idx = np.arange(len(table))
        return type(table).gather(table.node, [(new, idx[ok], idx[ok]), (table, idx[~ok], idx[~ok])])

    def _finish(self, spn: SPN, counts: np.ndarray) -> SPN:
        params = self._json_params(exclude=("init", "freeze"))
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
