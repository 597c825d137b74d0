"""LearnSPN: top-down structure learning (Gens & Domingos; Rahman & Gogate, Alg. 1) as one
template whose variable splitter, instance splitter and base model are pluggable
(:mod:`spnc.learn.structure`). GVS, RGVS, EBVS, EBVS-AE (Vergari et al.), L-SPNs and
O-SPNs with Chow-Liu tree leaves are configurations of :class:`LearnSPN`."""
from __future__ import annotations

import time

import numpy as np

from ..chowliu import resolve_threads
from .._progress import Progress
from .._sweep import cell, row_number
from ..data import as_data, is_frame, with_names
from ..errors import DataError, ParameterError
from ..graph import SPN, compile as _compile
from ..nodes import Node, Product, Sum
from ._auto import AUTO, auto_names, fit_auto
from ._params import ARRAY_LIKE, BOOL, MIN_STD, N_THREADS, RANDOM_STATE, Interval, Options, SeedLike, setting
from ._sample import close, refine_mode, refine_params, structure_rows
from ._scale import column_std, warn_small
from ._training import prepare
from .base import DensityEstimator
from .structure import Context, Slice, UnivariateLeaves, resolve_step, step_constraint


class _Progress:
    """Step timings (``step_seconds_``) and node/row counters, reported through the shared
    progress helper (stderr when ``progress=True``, else the ``spnc`` logger)."""

    def __init__(self, enabled: bool, total_rows: int):
        self.report = Progress("learnspn", enabled=True if enabled else None)
        self.nodes = 0
        self.rows = 0
        self.total = total_rows
        self.seconds = {"variable_split": 0.0, "instance_split": 0.0, "base_models": 0.0}

    def timed(self, step: str, fn, *args):
        """``fn(*args)``, its time added to ``seconds[step]``."""
        t = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.seconds[step] += time.perf_counter() - t

    def step(self, rows: int, nodes: int = 1) -> None:
        self.nodes += nodes
        self.rows += rows
        if self.report.active:
            self.report.update(self._text())

    def done(self) -> None:
        self.report.close(self._text())

    def _text(self) -> str:
        return f"{self.nodes} nodes built, {self.rows / max(self.total, 1):.1f}x the training rows processed"


def learn_structure(ctx: Context, splitter, sum_split, base, *, min_instances: int,
                    max_depth: int | None, progress: _Progress) -> Node:
    """Run the template on all rows and variables of ``ctx``; returns the root object.

    Explicit stack (no recursion limit): each task fills one slot of its parent's
    children list. Base case: one variable (univariate leaf), fewer than
    ``min_instances`` rows or ``max_depth`` sum nodes above (base model). Otherwise try
    a product over the splitter's groups, else a sum over the instance splitter's parts
    (a failed row split also ends in the base model)."""
    leaf1 = UnivariateLeaves()
    X = ctx.X
    holder: list = [None]
    stack = [(Slice(np.arange(X.shape[0], dtype=np.int64), np.arange(X.shape[1], dtype=np.int64)), holder, 0)]
    while stack:
        sl, slot, pos = stack.pop()
        nr, nv = sl.rows.size, sl.vars.size
        progress.step(nr)
        if nv == 1:
            slot[pos] = progress.timed("base_models", leaf1.fit, ctx, sl)
            continue
        if nr < min_instances or (max_depth is not None and sl.depth >= max_depth):
            slot[pos] = progress.timed("base_models", base.fit, ctx, sl)
            continue
        groups = None if sl.decomposed else progress.timed("variable_split", _decompose, ctx, splitter, sl)
        if groups is not None and len(groups) > 1:
            node = Product([None] * len(groups))
            for i, g in enumerate(groups):
                child = Slice(sl.rows, sl.vars[g], sl.depth, decomposed=True)
                if g.size == nv:
                    child._data = sl._data
                stack.append((child, node.children, i))
            slot[pos] = node
            continue
        parts = progress.timed("instance_split", sum_split.split, ctx, sl)
        if parts is None:
            slot[pos] = progress.timed("base_models", base.fit, ctx, sl)
            continue
        node = Sum([None] * len(parts), [p.weight for p in parts])
        for i, p in enumerate(parts):
            child = Slice(p.rows, p.vars, sl.depth + 1)
            if p.node is not None:
                node.children[i] = p.node
            elif p.indicator is None:
                stack.append((child, node.children, i))
            else:
                prod = Product([p.indicator, None])
                node.children[i] = prod
                stack.append((child, prod.children, 1))
        slot[pos] = node
        sl._data = None            # the parent's slice is no longer needed
    progress.done()
    return simplify(holder[0])


def _decompose(ctx: Context, splitter, sl: Slice) -> list[np.ndarray]:
    """Groups of column positions; a non-exhaustive splitter is applied again to each
    group (same rows) until none splits further."""
    groups = splitter.split(ctx, sl)
    if splitter.exhaustive or len(groups) == 1:
        return groups
    final, queue = [], list(groups)
    while queue:
        g = queue.pop()
        if g.size == 1:
            final.append(g)
            continue
        sub = splitter.split(ctx, Slice(sl.rows, sl.vars[g], sl.depth))
        if len(sub) == 1:
            final.append(g)
        else:
            queue.extend(g[s] for s in sub)
    final.sort(key=lambda g: g[0])
    return final


def simplify(root: Node) -> Node:
    """Splice sums into parent sums (weights multiplied) and products into parent
    products; keeps the distribution, removes layers. The tree is walked once, bottom-up."""
    order, stack = [], [root]
    while stack:
        n = stack.pop()
        if isinstance(n, (Sum, Product)):
            order.append(n)
            stack.extend(n.children)
    for n in reversed(order):          # children before parents
        if isinstance(n, Sum):
            if any(isinstance(c, Sum) for c in n.children):
                ch, w = [], []
                for c, wc in zip(n.children, n.weights):
                    if isinstance(c, Sum):
                        ch.extend(c.children)
                        w.extend(wc * c.weights / c.weights.sum())
                    else:
                        ch.append(c)
                        w.append(wc)
                n.children, n.weights = ch, np.asarray(w, dtype=np.float64)
        elif any(isinstance(c, Product) for c in n.children):
            ch = []
            for c in n.children:
                ch.extend(c.children if isinstance(c, Product) else [c])
            n.children = ch
    if isinstance(root, (Sum, Product)) and len(root.children) == 1:
        return root.children[0]
    return root


class LearnSPN(DensityEstimator):
    """Top-down structure learner for discrete or continuous data.

    Parameters
    ----------
    splitter : variable splitting, ``"gvs"``, ``"rgvs"``, ``"ebvs"``, ``"ebvs_ae"``,
        ``"mi_components"`` (discrete) or ``"correlation"`` (continuous), or a
        :class:`~spnc.learn.structure.VariableSplitter`.
    sum_split : ``"latent"`` (L-SPN: hard-EM naive-Bayes clustering, k-means for real
        data), ``"observed"`` (O-SPN: condition on one variable), or an
        :class:`~spnc.learn.structure.InstanceSplitter`.
    leaves : base model, ``"univariate"`` (naive factorisation), ``"bernoulli"`` (the same,
        insisting on 0/1 data), ``"chowliu"`` (Chow-Liu tree leaves), ``"chowliu_bic"``
        (Chow-Liu forests whose edges must pay for themselves under BIC), or a
        :class:`~spnc.learn.structure.BaseModel`.
    g_factor : GVS/RGVS threshold rho: dependent when ``G >= 2 * dof * g_factor``. The
        default ``"auto"`` picks 5, 10 or 20 on held-out training rows (about 3x the fit
        time): no single value is good on every data set (accidents at ``min_instances=200``:
        -34.3 with 5, -30.3 when chosen).
    entropy_threshold : EBVS/EBVS-AE threshold eta, in bits.
    mi_threshold : mutual-information pruning threshold beta (nats) of ``"mi_components"``.
    corr_threshold : absolute correlation above which real variables are dependent.
    alpha : Laplace smoothing of leaves, tables, entropies and clustering.
    min_instances : mu; slices with fewer rows end in the base model.
    ``min_instances``, ``alpha``, ``g_factor``, ``entropy_threshold`` and ``corr_threshold``
    may be ``"auto"``: chosen from ``_auto_candidates`` on a held-out tenth of the training
    rows, then refitted on all of them (``auto_params_`` tells the choice, ``auto_scores_``
    each candidate's held-out score).
    max_depth : at most this many sum nodes on a path (None: unlimited); deeper slices end
        in the base model (the depth h of Rahman & Gogate).
    n_clusters, n_restarts, n_iter : row clustering (defaults: 2 clusters, 3 restarts, 15
        rounds; k-means uses at least 100 rounds).
    criterion : ``"info_gain"`` or ``"mi_score"``, how O-SPNs choose the variable.
    min_std : standard-deviation floor of Gaussian leaves.
    data_type : ``"auto"`` (integer-valued data is discrete), ``"discrete"`` or
        ``"continuous"``.
    cardinality : states per discrete variable (None: inferred from the training data;
        give it when a structure sample may miss a state).
    sample_rows : learn the structure on a uniform sample of this many rows (None: all
        rows); the parameters are then refined on all rows (``refine``).
    refine : parameter passes over all rows after the structure search: ``"auto"``
        (``"em"`` when the structure saw a sample, else ``"none"``), ``"em"`` (soft EM),
        ``"hard"`` (hard EM; one pass re-counts weights and leaves from the rows each
        reaches) or ``"none"``.
    refine_iter : passes of the refinement (with ``X_valid`` the best is kept).
    random_state : seed (int) for the sample, restarts and random choices; equal seeds give
        equal models. A numpy ``Generator`` or ``RandomState`` gives each fit a seed drawn
        from it (as do the other learners' ``random_state``).
    progress : print nodes built and rows processed to stderr while fitting.
    n_threads : OpenMP threads of the kernels (None: automatic, -1: all cores).

    Attributes after :meth:`fit`: ``spn_`` (compiled :class:`spnc.SPN`, carrying the
    learner's name and parameters), ``fit_seconds_``, ``step_seconds_`` (seconds spent in
    variable splitting, instance splitting and base models), ``cardinality_``,
    ``n_features_in_``, ``n_structure_rows_`` (rows the structure search saw).

    ``X`` may be larger than memory: a file spec ``"data.h5:/X"`` (or Zarr, ``.npy``), an
    h5py dataset, an iterable of row blocks or a Dask array. The structure search reads
    ``sample_rows`` rows (all rows when None) into memory; the refinement streams all rows
    block by block (on a Dask array, as tasks over its chunks). The model equals the one
    learned from the same rows as a numpy array, up to the order of additions.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).integers(0, 2, size=(500, 6))
    >>> model = LearnSPN(splitter="gvs", min_instances=50, random_state=0).fit(X)
    >>> float(np.exp(model.score_samples(X[:1]))[0]) > 0
    True
    """

    _parameter_constraints = {
        "splitter": [step_constraint("splitter")],
        "sum_split": [step_constraint("sum_split")],
        "leaves": [step_constraint("leaves"), Options("bernoulli")],
        "g_factor": [Interval(float, 0), AUTO],
        "entropy_threshold": [Interval(float, 0), AUTO],
        "mi_threshold": [Interval(float, 0)],
        "corr_threshold": [Interval(float, 0), AUTO],
        "alpha": [Interval(float, 0), AUTO],
        "min_instances": [Interval(int, 1), AUTO],
        "max_depth": [Interval(int, 0), None],
        "n_clusters": [Interval(int, 2)],
        "n_restarts": [Interval(int, 1)],
        "n_iter": [Interval(int, 1)],
        "criterion": [Options("info_gain", "mi_score")],
        "min_std": [MIN_STD],
        "data_type": [Options("auto", "discrete", "continuous")],
        "cardinality": [ARRAY_LIKE, None],
        "sample_rows": [Interval(int, 1), None],
        "refine": [Options("auto", "none", "em", "hard")],
        "refine_iter": [Interval(int, 1)],
        "random_state": [RANDOM_STATE, None],
        "progress": [BOOL],
        "n_threads": [N_THREADS, None],
    }

    #: candidates of the parameters that may be ``"auto"`` (:mod:`spnc.learn._auto`)
    _auto_candidates = {"min_instances": [10, 50, 200], "alpha": [0.1, 1.0], "g_factor": [5.0, 10.0, 20.0],
                        "entropy_threshold": [0.05, 0.1, 0.3], "corr_threshold": [0.1, 0.3, 0.5]}

    def __init__(self, splitter="gvs", sum_split="latent", leaves="univariate", *,
                 g_factor: float | str = "auto", entropy_threshold: float = 0.3, mi_threshold: float = 0.01,
                 corr_threshold: float = 0.3, alpha: float = 0.1, min_instances: int = 50,
                 max_depth: int | None = None, n_clusters: int = 2, n_restarts: int = 3, n_iter: int = 15,
                 criterion: str = "info_gain", min_std: float = 1e-2, data_type: str = "auto",
                 cardinality=None, sample_rows: int | None = None, refine: str = "auto",
                 refine_iter: int = 5, random_state: SeedLike = None, progress: bool = False,
                 n_threads: int | None = None):
        self.splitter = splitter
        self.sum_split = sum_split
        self.leaves = leaves
        self.g_factor = g_factor
        self.entropy_threshold = entropy_threshold
        self.mi_threshold = mi_threshold
        self.corr_threshold = corr_threshold
        self.alpha = alpha
        self.min_instances = min_instances
        self.max_depth = max_depth
        self.n_clusters = n_clusters
        self.n_restarts = n_restarts
        self.n_iter = n_iter
        self.criterion = criterion
        self.min_std = min_std
        self.data_type = data_type
        self.cardinality = cardinality
        self.sample_rows = sample_rows
        self.refine = refine
        self.refine_iter = refine_iter
        self.random_state = random_state
        self.progress = progress
        self.n_threads = n_threads

    def _prepare(self, X, row0=0, names=None) -> tuple[np.ndarray, np.ndarray, bool]:
        A = np.asarray(X)
        data, card, continuous = prepare(A, self.data_type, self.cardinality, "LearnSPN", row0)
        if continuous:
            warn_small(column_std(data), float(self.min_std), "min_std", "LearnSPN", names=names)
        if self.leaves == "bernoulli" and (continuous or np.any(card != 2)):
            bad = np.argwhere((A != 0) & (A != 1))
            if not bad.size:
                c = int(np.flatnonzero(card != 2)[0])
                raise DataError(f"{setting('leaves', 'bernoulli')} needs binary variables, but cardinality[{c}] "
                                f"is {int(card[c])}; use {setting('leaves', 'univariate')}")
            r, c = bad[0]
            raise DataError(f"{setting('leaves', 'bernoulli')} needs 0/1 data, but column {c} has value "
                            f"{A[r, c].item()!r} (row {row_number(row0, int(r))}); use "
                            f"{setting('leaves', 'univariate')} for categorical or real data")
        return data, card, continuous

    def _auto_unused(self) -> set[str]:
        """``"auto"`` parameters the configuration never reads (no fits spent on them)."""
        used = {"gvs": "g_factor", "rgvs": "g_factor", "ebvs": "entropy_threshold",
                "ebvs_ae": "entropy_threshold", "correlation": "corr_threshold"}.get(self.splitter)
        return {"g_factor", "entropy_threshold", "corr_threshold"} - ({used} if isinstance(self.splitter, str) else set())

    def _uses_valid(self, n_rows: int) -> bool:
        """X_valid picks among refinement passes, which ``refine="auto"`` runs only when the
        structure is learned on a sample."""
        sampled = self.sample_rows is not None and int(self.sample_rows) < n_rows
        return self.refine != "none" and (self.refine != "auto" or sampled)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, X_valid=None) -> "LearnSPN":
        """Learn structure and parameters from the rows of ``X`` (no missing values);
        ``X_valid`` (optional) picks the best refinement pass (without one it is ignored,
        with a warning)."""
        self._no_target(y)
        self._validate_params()
        given = X
        X, names = as_data(X)
        rows = structure_rows(X, self.sample_rows, self.random_state, "LearnSPN")
        try:
            if not self._uses_valid(rows.n_rows):
                X_valid = self._unused_valid(X_valid, "refine='none': no refinement passes to choose among"
                                             if self.refine == "none" else "refine='auto' refines only a "
                                             "structure learned on a sample (sample_rows), so no passes to "
                                             "choose among")
            names = names if names is not None else getattr(rows.full, "names", None)    # DataFrame blocks
            X_valid = self._valid_rows(X_valid, names)      # the training columns' order
            self._check_valid(X_valid, n_cols=X.shape[1] if getattr(X, "ndim", 0) == 2 else None)
            if auto_names(self):
                # the data's own errors first: a bad value must not depend on which rows the
                # candidates hold out (nor surface as a candidate's failure)
                _, card, continuous = self._prepare(rows.data, rows.ids, names)
                # a one-shot iterator was read whole into rows.data: the final fit reads the
                # same rows from there, still as streamed blocks
                # a DataFrame again as one: the final model has its names and matches a
                # DataFrame X_valid by name, naming the frame's own cell in its errors
                again = given if is_frame(given) else X if getattr(rows.full, "reiterable", True) else [rows.data]
                fixed = {} if continuous or self.cardinality is not None else {"cardinality": card.tolist()}
                fit_auto(self, again, sample=rows.data, fixed=fixed, ids=rows.ids, X_valid=X_valid)
                self.spn_ = with_names(self.spn_, names)
            else:
                self._fit(rows, names, X_valid)
        finally:
            close(rows, X)
        self._check_valid(X_valid, self.spn_)
        return self

    def _fit(self, rows, names, X_valid) -> "LearnSPN":
        data, card, continuous = self._prepare(rows.data, rows.ids, names)
        leaves = "univariate" if self.leaves == "bernoulli" else self.leaves
        try:
            splitter = resolve_step("splitter", self.splitter, self, continuous)
            sum_split = resolve_step("sum_split", self.sum_split, self, continuous)
            base = resolve_step("leaves", leaves, self, continuous)
        except ParameterError as e:
            if not continuous or self.data_type != "auto":
                raise
            r, c = (int(v) for v in np.argwhere(data != np.round(data))[0])   # what made the data real
            raise ParameterError(e.param, f"{e} (data_type='auto' reads X as real-valued: "
                                          f"{cell('X', rows.ids, r, c)} = {float(data[r, c])!r} is not a whole "
                                          "number)") from None
        n, d = data.shape
        ctx = Context(data, card, continuous, alpha=self.alpha, min_std=self.min_std,
                      rng=np.random.default_rng(self.random_state),
                      n_threads=resolve_threads(self.n_threads, float(n) * d * 64))
        t0 = time.perf_counter()
        progress = _Progress(bool(self.progress), n)
        root = learn_structure(ctx, splitter, sum_split, base, min_instances=int(self.min_instances),
                               max_depth=None if self.max_depth is None else int(self.max_depth),
                               progress=progress)
        spn = _compile(root, n_vars=d, cardinality=card, var_names=names)
        mode = refine_mode(self.refine, rows, continuous, "em" if rows.sampled else "none")
        if mode != "none":
            spn = refine_params(spn, rows, mode, n_iter=self.refine_iter,
                                alpha=0.0 if continuous else float(self.alpha), min_std=self.min_std,
                                random_state=self.random_state, n_threads=self.n_threads,
                                verbose=False, X_valid=X_valid)
        self.fit_seconds_ = time.perf_counter() - t0
        self.step_seconds_ = dict(progress.seconds)
        spn.learner = {"name": "learnspn", "version": "1", "params": self._json_params(),
                       "fit_seconds": float(self.fit_seconds_), "n_train": int(rows.n_rows)}
        self.spn_: SPN = spn
        self.cardinality_ = card
        self.n_features_in_ = d
        self.n_structure_rows_ = int(n)
        return self
