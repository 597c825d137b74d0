"""oSLRAU: online structure learning with running-average updates (Hsu, Kalra & Poupart,
2017), for real-valued data with Gaussian and multivariate Gaussian leaves.

The learner keeps its own growable tree in flat arrays indexed by node id
(:mod:`._oslrau_store`). Mini-batches are streamed through :func:`spnc.learn._oslrau.run`,
which does the routing and counting for many batches per call without the GIL, scores
each batch before learning from it, and returns when a product shows a correlation above
the threshold; the structure change (Alg. 2-5, :mod:`._oslrau_edit`) is then made in
Python, and streaming resumes. ``spn_`` compiles the tree into a :class:`spnc.SPN` on
demand (:mod:`._oslrau_model`); ``select`` picks settings in the same pass, racing the
candidates until ``race_after`` points (:mod:`._oslrau_select`).

Implementation notes (where the paper leaves a choice, settled as in the authors' code,
github.com/whsu/spn, whose final version reproduces Table 1):

* a batch updates the nodes top-down; a product is tested right after its own statistics
  took the batch (Alg. 2). When it merges two children, those two (and their subtrees)
  skip the batch, which is then passed down the new mixture (Sec. 3.2, Alg. 3): the new
  sum and its first component start from the product's count before the batch;
* a product is tested only once its count before the batch reaches ``min_merge_points``
  (``spaced_merges=True``: ``min_merge_points * (merges + 1)``, an earlier version of the
  authors' code); correlations estimated from a handful of points are noise;
* the new factored component of a mixture (Alg. 5) is centred at the mean of the batch
  rows that reached the product, with the product's variances; it and the new product
  count 0;
* counts: a product's running moments are those of the rows it saw (count 0, no prior,
  Alg. 5); a leaf's initial parameters weigh one point while its count is 0 (Sec. 3.1:
  counts start at 1);
* leaf covariances are evaluated as ``cov + min_var * I`` (``variance_floor="always"``,
  the default, a departure from the paper, which states no floor) or, as in the authors'
  code, floored at ``min_var`` only when a leaf is created (``"creation"``).
"""
from __future__ import annotations

import os
from contextvars import ContextVar
from typing import Iterable

import numpy as np

from . import _oslrau, _scale
from .. import _budget
from .. import stream as _stream
from .._kinds import LEAF, PRODUCT
from .._progress import Progress
from .._sweep import row_number
from .._text import counted
from .._warn import warn_user
from ..data import as_data, attr_names, is_frame, real_array, refuse_1d, with_names
from ..errors import DataError, NotFittedError, ParameterError
from ._training import check_real_range
from ..graph import SPN
from . import _oslrau_model as _model
from ._oslrau_edit import StructureEdits
from ._oslrau_store import _DTYPES, TreeStore
from ._params import ARRAY_LIKE, BOOL, RANDOM_STATE, Interval, Options, SeedLike, seed_of
from .base import DensityEstimator

#: inside fit, whose batches partial_fit sees as arrays (names kept by fit)
_IN_FIT: ContextVar[bool] = ContextVar("oslrau_in_fit", default=False)

#: the authors' code: new leaves' variances floored at 1e-4, later updates unfloored
PAPER_FLOOR = {"variance_floor": "creation", "min_var": 1e-4}
#: ``select="auto"``: the default floor and the paper's, each with and without spacing
AUTO_CANDIDATES = ({}, {"spaced_merges": True}, PAPER_FLOOR, {**PAPER_FLOOR, "spaced_merges": True})


def auto_batch_size(n_seen: int) -> int:
    """``batch_size="auto"``: single points (the paper's setting) for the first 4096
    points, then doubling with every doubling of the stream, up to 256, so that the cost
    per point falls as the network grows."""
    return int(min(256, 2 ** max(0, int(np.log2(max(n_seen, 1) / 2048)))))


def paper_leaf_cap(n_vars: int) -> int:
    """Leaf-size cap of the paper's rule (Sec. 4.3) as set in the authors' experiment
    script: one variable per leaf up to 4 variables, then up to 4 per leaf."""
    return 1 if n_vars <= 4 else min(4, n_vars - 1)


class OSLRAU(DensityEstimator, StructureEdits, TreeStore):
    """Online structure learner for Gaussian SPNs (oSLRAU).

    Parameters
    ----------
    correlation_threshold : merge two children of a product when the largest absolute
        Pearson correlation between their variables reaches this value.
    max_leaf_vars : largest multivariate Gaussian leaf; bigger merges make a mixture.
        None: :func:`paper_leaf_cap` of the number of variables.
    batch_size : rows per mini-batch (one up/down pass each); ``"auto"``:
        :func:`auto_batch_size` of the points seen so far.
    structure_until : stop structure learning after this many points (None: never);
        parameters keep updating.
    min_merge_points : a product is tested at every batch once its count before the batch
        reaches ``min_merge_points``; None: ``max(10, batch_size)`` (the authors'
        ``mergebatch``).
    spaced_merges : True tests a product only once its count reaches
        ``min_merge_points * (merges + 1)`` (fewer, spaced merges; smaller networks).
    min_var : the leaf variance floor (see ``variance_floor``).
    variance_floor : ``"always"`` adds ``min_var`` to leaf variances (covariance
        diagonals) whenever they are evaluated; ``"creation"`` is the authors' code (the
        paper states no floor): a new leaf's variances are raised to ``min_var`` when it
        is created, later updates may shrink them freely (a variance that reaches 0 gets
        the smallest jitter that keeps it positive definite). :data:`PAPER_FLOOR` is the
        authors' setting (``"creation"`` with ``min_var=1e-4``).
    max_nodes : structure learning stops (parameters keep updating) once the network
        has this many nodes, which bounds the cost per point (None: no cap). The default
        20,000 is above what the small benchmark sets reach and keeps a 1.4 M-point
        stream at about 0.2 ms per point (docs/benchmarks-oslrau.md).
    select : choose settings online, in the same single pass: ``"auto"``
        (:data:`AUTO_CANDIDATES`) or a list of dicts of parameter overrides. Every
        candidate learns from the same stream and scores each batch before training on
        it (prequential log-likelihood); the best candidate is kept.
    race_after : with ``select``, a race: once this many points have been seen (rounded
        up to a whole batch; 256 rows with ``batch_size="auto"``), only the candidate with
        the best prequential score so far keeps learning, so the pass costs about one
        learner's run plus ``race_after`` points per dropped candidate. Candidates are
        independent, so the kept model is exactly what the candidate gives alone.
        None: every candidate learns from the whole stream.
    weighted_routing : route by weighted child likelihood instead of the paper's plain
        child likelihood.
    random_state : seed of the tie-breaking hash (None: fresh entropy, recorded).

    Attributes: ``spn_`` (compiled :class:`spnc.SPN`, learner state attached),
    ``n_seen_``, ``n_features_in_``, ``prequential_ll_`` (mean log-likelihood of each
    point before the model learned from it), ``selection_`` (with ``select``: the
    candidates, their prequential scores and the index kept; also saved in the model).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(500, 3))
    >>> model = OSLRAU(batch_size=10, random_state=0).fit(X)
    >>> model.score_samples(X[:2]).shape
    (2,)
    """

    _parameter_constraints = {
        "correlation_threshold": [Interval(float, 0, 1)],
        "max_leaf_vars": [Interval(int, 1), None],
        "batch_size": [Interval(int, 1), Options("auto")],
        "structure_until": [Interval(int, 0), None],
        "min_merge_points": [Interval(int, 1), None],
        "spaced_merges": [BOOL],
        "min_var": [Interval(float, 0, closed="neither")],
        "variance_floor": [Options("always", "creation")],
        "max_nodes": [Interval(int, 1), None],
        "weighted_routing": [BOOL],
        "select": [Options("auto"), ARRAY_LIKE, None],
        "race_after": [Interval(int, 1), None],
        "random_state": [RANDOM_STATE, None],
    }

    def __init__(self, correlation_threshold: float = 0.1, max_leaf_vars: int | None = None,
                 batch_size: int | str = "auto", structure_until: int | None = None,
                 min_merge_points: int | None = None, spaced_merges: bool = False,
                 min_var: float = 1e-6, variance_floor: str = "always", max_nodes: int | None = 20_000,
                 weighted_routing: bool = False, select=None, race_after: int | None = 100_000,
                 random_state: SeedLike = None):
        self.correlation_threshold = correlation_threshold
        self.max_leaf_vars = max_leaf_vars
        self.batch_size = batch_size
        self.structure_until = structure_until
        self.min_merge_points = min_merge_points
        self.spaced_merges = spaced_merges
        self.min_var = min_var
        self.variance_floor = variance_floor
        self.max_nodes = max_nodes
        self.weighted_routing = weighted_routing
        self.select = select
        self.race_after = race_after
        self.random_state = random_state

    def _init_state(self, d: int) -> None:
        """The fully factorised start: a product over d unit Gaussians (count 0)."""
        self._validate_params()
        # the root's covariance, its Cholesky factor and the doubling buffers: ~4 d^2 floats
        _budget.check(32.0 * d * d, f"oSLRAU statistics over {d} real variables", "use fewer columns")
        self._d = d
        self._preq = np.zeros(1)
        seed = seed_of(self.random_state)       # a generator, in partial_fit: a seed drawn from it
        self._seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] if seed is None else seed) \
            & (2**64 - 1)
        self._n_seen = self._n_batches = 0
        self._alloc({k: np.zeros(0, dt) for k, dt in _DTYPES.items()} |
                    {"scope_ptr": np.zeros(1, np.int64), "cov_ptr": np.zeros(1, np.int64),
                     "child_ptr": np.zeros(1, np.int64)})
        leaves = [self._new(LEAF, [v], np.zeros(1), np.ones((1, 1))) for v in range(d)]
        self._root = leaves[0] if d == 1 else self._new(PRODUCT, range(d), np.zeros(d), np.eye(d), leaves)

    # ------------------------------------------------------------------ learning
    def fit(self, X, y=None) -> "OSLRAU":
        """One pass over ``X``: an array (n, d), an h5py dataset or Zarr array, a file spec
        (``"data.h5:/X"``, ``"data.zarr"``, ``"data.npy"``), an iterable of batches (arrays
        or DataFrames) or a callable returning one (called once). Starts from the fully
        factorised model; with ``select``, every candidate takes the same pass and the best
        one is kept."""
        self._no_target(y)
        self._d = None       # unfitted until the pass starts: a refused refit leaves no old model
        if isinstance(X, (str, os.PathLike)):
            src = _stream.open_source(X)
            try:
                return self.fit(src.A)
            finally:
                src.close()
        if isinstance(X, _stream.ArraySource) and X.order is None:     # opened by the caller
            return self.fit(X.A)
        X = X() if callable(X) and not isinstance(X, _stream.BlockSource) else X    # one pass: one call
        self._validate_params()
        for k in ("_overrides", "selection_"):      # a new pass: an earlier select is forgotten
            self.__dict__.pop(k, None)
        X, self._names = as_data(X)
        if self.select is None:
            learners = [self]
        else:
            from ._oslrau_select import Race
            race = Race(self)
            learners = race.learners
        bs = self.batch_size
        unit = 256 if bs == "auto" else int(bs)
        step = max(1, (1 << 16) // unit) * unit
        cut = None
        if self.select is not None and self.race_after is not None:
            cut = -(-int(self.race_after) // unit) * unit    # a whole batch: batches unchanged
        prog = Progress("oslrau", total=X.shape[0] if len(getattr(X, "shape", ())) == 2 else None, unit=" rows")
        inside = _IN_FIT.set(True)       # its batches are arrays by now: no warning about names
        try:
            self._pass(X, step, cut, learners, race if self.select is not None else None, prog)
        finally:
            _IN_FIT.reset(inside)
        if getattr(learners[0], "_d", None) is None or learners[0]._n_seen == 0:
            raise DataError("fit got no rows: oSLRAU needs at least one point to learn from")
        if self._names is None and isinstance(X, _stream.BlockSource):    # its DataFrame blocks
            self._names = X.names
        if self.select is not None:
            race.keep_best()
        _scale.warn_tracked(self if "_scale_stats" in vars(self) else learners[0], self._names)
        return self

    def _pass(self, X, step: int, cut, learners, race, prog) -> None:
        r0, all_frames = 0, True
        for block in _blocks(X, step, cut):
            all_frames = all_frames and is_frame(block)
            if is_frame(block):          # DataFrame batches: by name, in the first one's order
                if r0 and not all_frames and self._names is None:     # as spnc.stream's blocks
                    raise DataError(f"X: the batch at row {r0} is a DataFrame, but the batches before it are "
                                    "arrays without column names; give every batch as a DataFrame, or every "
                                    "batch as an array in one column order")
                block, self._names = as_data(block, self._names, f"X: the batch at row {r0}")
            block = self._check_data(block, r0)      # errors name rows of X, not of the block
            r0 += block.shape[0]
            if self.select is None:
                self.partial_fit(block)
            else:
                race.step(block)
            prog.update(done=learners[0]._n_seen if self.select is None else race.n_seen)

    def _start(self, d: int) -> None:
        if getattr(self, "_d", None) is None:
            self._init_state(d)

    def partial_fit(self, X, y=None) -> "OSLRAU":
        """Stream the rows of ``X`` through the learner in mini-batches of ``batch_size``
        (a last, shorter batch is processed as it is). Each batch is scored before it is
        learned from (``prequential_ll_``). DataFrame columns are taken by name once the
        model has names (the first DataFrame gives them). ``select`` takes effect in
        :meth:`fit` only; a first ``partial_fit`` with it set is refused."""
        if isinstance(X, (str, bytes, os.PathLike, _stream.BlockSource)):
            what = "a block source" if isinstance(X, _stream.BlockSource) else f"a file name ({X!r})"
            raise DataError(f"partial_fit takes one batch of rows in memory, and X is {what}: fit makes a pass over "
                            "a file from scratch; to continue learning over one, give its blocks in turn: "
                            "for _, b in spnc.stream.open_source(X).blocks(): model.partial_fit(b)")
        refuse_1d(X)
        started = getattr(self, "_d", None) is not None
        if not started and self.select is not None:
            raise ParameterError("select", "OSLRAU: select chooses the settings during fit; partial_fit "
                                           "on an unfitted learner would ignore it (call fit first, or "
                                           "set select=None)")
        named = getattr(self, "_names", None) is not None
        # a dataset naming its columns is matched by name, as a DataFrame is (as_data)
        if started and not _IN_FIT.get() and is_frame(X) != named and not (named and attr_names(X) is not None):
            warn_user("X has feature names, but OSLRAU was fitted without feature names: the DataFrame's columns "
                      "are taken by position" if is_frame(X) else "X does not have valid feature names, but OSLRAU "
                      "was fitted with feature names: its columns are taken by position")
        X, names = as_data(X, getattr(self, "_names", None) if started else None)
        if not started and names is not None:
            self._names = names
            self.feature_names_in_ = np.asarray(names, dtype=object)
        X = self._check_data(X)
        self._start(X.shape[1])
        if X.shape[1] != self._d:
            raise DataError(f"X has {counted(X.shape[1], 'column')}, the model has {counted(self._d, 'variable')}")
        _scale.track(self, X, fresh=not started or not self._n_seen, warn=not _IN_FIT.get())
        n = X.shape[0]
        cfg = self._cfg
        thr = float(cfg["correlation_threshold"])
        su_cfg = cfg["structure_until"]
        cap = int(cfg["max_leaf_vars"]) if cfg["max_leaf_vars"] is not None else paper_leaf_cap(self._d)
        start = 0
        while start < n:
            if self._dirty:
                self._rebuild()
            auto = cfg["batch_size"] == "auto"
            bs = auto_batch_size(self._n_seen) if auto else int(cfg["batch_size"])
            # "auto" changes the batch size at 4096 * 2**j points: stop the call there
            end = n if not auto or bs >= 256 else min(n, start + 4096 * bs - self._n_seen)
            minm = float(cfg["min_merge_points"] if cfg["min_merge_points"] is not None else max(10, bs))
            su = int(su_cfg) if su_cfg is not None else np.iinfo(np.int64).max
            if cfg["max_nodes"] is not None and len(self._order) >= int(cfg["max_nodes"]):
                su = min(su, self._n_seen)       # size cap reached: parameters only
            self._workspace(min(bs, end - start))
            nb, nc = self._stream(X[:end], start, bs, self._order, su, minm, thr, self._preq)
            done = min(end, start + nb * bs) - start
            last = (start + (nb - 1) * bs, start + done)
            self._n_batches += nb
            self._n_seen += done
            start += done
            self._spn = None
            if nc:
                # the last batch left correlated children at nc products; the rows that
                # reached each product have not been passed below the two children yet
                rows = X[last[0]:last[1]]
                cand = self._cand[:3 * nc].reshape(nc, 3).tolist()
                reach = [self._active[p, :len(rows)].astype(bool) for p, _, _ in cand]
                for (p, a, b), act in zip(cand, reach):
                    self._merge(p, a, b, rows[act], cap)
                self._dirty = True
        return self

    @property
    def prequential_ll_(self) -> float:
        self._need_fit()
        return float(self._preq[0] / self._n_seen) if self._n_seen else float("nan")

    @property
    def _cfg(self) -> dict:
        """The settings in force: the parameters, with the selected candidate's overrides
        after ``select`` (read at every call, so ``set_params`` between calls applies)."""
        cfg = {k: v for k, v in self.get_params(deep=False).items() if k != "select"}
        cfg.update(getattr(self, "_overrides", {}))
        return cfg

    def _eval_jitter(self) -> float:
        """What is added to leaf variances when they are evaluated."""
        return float(self._cfg["min_var"]) if self._cfg["variance_floor"] == "always" else 0.0

    def _workspace(self, m: int) -> None:
        """Per-node scratch of the kernel (log-likelihoods and routes of a batch), with
        spare rows so that a few new nodes do not reallocate it."""
        ids = self._g["kind"].n
        shape = getattr(self, "_ws_shape", (0, 0))
        if ids > shape[0] or m > shape[1]:
            rows = max(ids + ids // 4 + 64, shape[0])
            cols = max(m, shape[1])
            self._vals = np.empty((rows, cols))
            self._active = np.empty((rows, cols), dtype=np.uint8)
            self._cand = np.empty(3 * rows, dtype=np.int32)
            self._cand_corr = np.empty(rows)
            self._ws_shape = (rows, cols)

    def _stream(self, X: np.ndarray, start: int, bs: int, order: np.ndarray, su: int, minm: float,
                thr: float, score: np.ndarray | None = None) -> tuple[int, int]:
        g = self._g
        return _oslrau.run(X, start, bs, order, g["kind"].view, g["cstart"].view,
                           g["cend"].view, g["child"].view, g["scope_ptr"].view, g["scope"].view,
                           g["count"].view, g["mean"].view, g["cov_ptr"].view, g["cov"].view,
                           g["merges"].view, self._eval_jitter(), self._seed,
                           self._n_batches, bool(self._cfg["weighted_routing"]), su, self._n_seen,
                           minm, bool(self._cfg["spaced_merges"]), thr, self._vals, self._active,
                           self._cand, self._cand_corr, g["chol"].view, g["ldet"].view, g["fresh"].view,
                           score)

    def _check_data(self, X, row0: int = 0) -> np.ndarray:
        A = np.ascontiguousarray(real_array(X, "X", np.float64))
        if A.ndim != 2:
            raise DataError(f"X must be 2-D (n_rows, n_vars), got shape {A.shape}")
        if A.shape[1] == 0:
            raise DataError("X has no columns")
        if A.size and not np.all(np.isfinite(A)):
            r, c = np.argwhere(~np.isfinite(A))[0]
            raise DataError(f"X[{row_number(row0, r)}, {c}] = {A[r, c]}: oSLRAU needs finite values (no NaN or "
                            "inf; no missing data)")
        check_real_range(A, row0)
        return A

    # ------------------------------------------------------------------ queries
    def __sklearn_is_fitted__(self) -> bool:
        """Fitted once ``fit`` or ``partial_fit`` has seen data (the model lives behind
        properties, which scikit-learn's attribute check does not see)."""
        return getattr(self, "_d", None) is not None

    def _need_fit(self) -> None:
        if getattr(self, "_d", None) is None:
            raise NotFittedError("this OSLRAU instance is not fitted yet; call fit or partial_fit first")

    @property
    def n_seen_(self) -> int:
        self._need_fit()
        return self._n_seen

    @property
    def n_features_in_(self) -> int:
        self._need_fit()
        return int(self._d)

    @property
    def spn_(self) -> SPN:
        """The learned model as a compiled :class:`spnc.SPN`. ``stats`` holds per compiled
        node ``count``, ``merges`` and the running moments of products and leaves (CSR:
        ``mean_ptr``/``mean``, ``cov_ptr``/``cov`` row-major); ``learner`` holds the whole
        learner state (settings, seed and batch counter, all arrays) for :meth:`resume`."""
        self._need_fit()
        if self._spn is None:
            self._spn = with_names(self._compile(), getattr(self, "_names", None))
        return self._spn

    def _compile(self) -> SPN:
        return _model.compile_tree(self)

    def _export(self) -> dict:
        return _model.export_state(self)

    @classmethod
    def resume(cls, source) -> "OSLRAU":
        """Rebuild a learner from ``spn_`` of an earlier one (an :class:`spnc.SPN`) or from
        a model file written by :func:`spnc.save`; learning then continues exactly as if
        it had never stopped."""
        return _model.restore(cls, source)


def _blocks(X, step: int, cut: int | None = None):
    """The rows of ``X`` in order: slabs of ``step`` rows of an array or h5py/zarr
    dataset (``step`` and ``cut`` are multiples of the batch size, so slabs change no
    batch; a slab ends at row ``cut``), or the arrays of an iterable of batches."""
    if isinstance(X, _stream.BlockSource):          # opened by the caller: its own blocks
        yield from (b for _, b in X.blocks())
    elif hasattr(X, "shape") and hasattr(X, "__getitem__") and len(X.shape) == 2:
        if X.shape[0] == 0:
            yield np.zeros((0, X.shape[1]))
        bounds = sorted(set(range(0, X.shape[0], step)) | ({cut} if cut and cut < X.shape[0] else set()))
        for r0, r1 in zip(bounds, bounds[1:] + [X.shape[0]]):
            yield X[r0:r1]
    elif isinstance(X, Iterable) and not isinstance(X, (str, bytes)) and not hasattr(X, "shape") \
            and not (isinstance(X, (list, tuple)) and (len(X) == 0 or np.ndim(X[0]) < 2)):
        yield from X
    else:
        yield X
