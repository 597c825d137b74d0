"""Prometheus (Jaini, Ghose & Poupart): DAG-structured SPNs from maximum-spanning-tree
decompositions, with no correlation threshold; the structure is in
:mod:`spnc.learn._prometheus_build`, parameters start from counts and are refined by EM."""
from __future__ import annotations

import sys
import time

import numpy as np

from ..chowliu import resolve_threads
from ..data import as_data
from ..errors import ParameterError
from ..graph import SPN, compile as _compile
from ._params import ARRAY_LIKE, BOOL, MIN_STD, N_THREADS, RANDOM_STATE, Instance, Interval, Options, SeedLike, setting
from ._prometheus_build import Builder, Settings
from ._sample import close, refine_mode, refine_params, structure_rows
from ._scale import column_std, warn_small
from ._training import prepare
from .base import DensityEstimator
from .structure import Context, InstanceSplitter, resolve_step

#: ``sampled="auto"`` uses the sampled affinity graph for every call on more variables
#: than this (the dense graph costs ``n d^2``; at 784 pixels that is 300k pairs per call)
SAMPLE_ABOVE = 256


class Prometheus(DensityEstimator):
    """Prometheus structure learner for discrete or continuous data (Alg. 1).

    Per call: the rows are clustered (``clustering``); per cluster, the maximum spanning
    tree of the affinity graph is severed weakest edge first and every partition on the
    way becomes a product node; all products go under one sum node weighted by cluster
    size (uniform within a cluster); each block is built once per cluster and shared, so
    the model is a DAG; blocks recurse until one variable (a univariate leaf), at most
    ``leaf_vars`` variables (one multivariate leaf), fewer than ``min_instances`` rows or
    ``max_depth`` sum layers (base leaves).

    Parameters
    ----------
    n_clusters : k of the row clustering.
    clustering : ``"latent"`` (k-means for real data, naive-Bayes hard EM for discrete
        data) or any :class:`~spnc.learn.structure.InstanceSplitter` whose parts keep the
        variables (no indicator parts).
    n_restarts, n_iter : clustering restarts and rounds (k-means uses at least 100 rounds).
    affinity : ``"auto"`` (absolute correlation for real data, mutual information for
        discrete data), ``"correlation"`` or ``"mi"``.
    max_products : products per cluster chain (None: all ``d - 1``, the paper); a cap
        keeps partitions with geometrically spaced block counts from 2 to ``d``. Every
        chain's blocks recurse, so layers grow by about this factor: the full chain
        multiplies the work per layer by up to ``d``.
    sampled : the O(d (log d)^2) variant, an affinity graph of ``d ceil(log2 d)`` sampled
        pairs: True, False, or ``"auto"`` (calls on more than :data:`SAMPLE_ABOVE`
        variables).
    leaf_vars : blocks of at most this many variables end in one multivariate leaf
        (multivariate Gaussian or Chow-Liu tree); 1 gives univariate leaves only.
    base_leaves : what ends the recursion early (rows, depth): ``"univariate"`` leaves or
        one ``"multivariate"`` leaf over the block.
    whole_scope : each cluster also keeps its whole scope, learned again on its rows (one
        more clustering) as one more child of the sum: deeper mixtures where the chain runs
        out of edges (few variables). False is Alg. 1 as printed; ``"auto"`` is True for
        continuous data, where validation chose it in every fold of abalone, banknote and
        qu (``docs/benchmarks-prometheus.md``), and False for discrete data.
    share : the scope table. ``"model"``: every scope that recurses is one sum node in the
        whole model, learned on the union of the rows of the clusters of one layer that
        ask for it and reused by deeper layers (fewest nodes). ``"cluster"``: one table
        per cluster's chain, each block learned on its cluster's rows (more nodes, more
        local fits).
    min_instances : blocks whose cluster has fewer rows end in base leaves.
    max_depth : at most this many sum layers (None: until the rows or variables run out).
    refine : ``"auto"`` (``"running_average"`` for real data, as the paper, ``"em"`` for
        discrete data; the same whether ``X`` is in memory or streamed), ``"em"`` (soft
        EM), ``"running_average"`` (stepwise EM with step 1/t, one step per pass: every
        pass's statistics averaged with all earlier ones), ``"hard"`` (hard EM) or
        ``"none"`` (counts only).
    refine_iter : passes of the refinement; with ``X_valid`` in :meth:`fit` the best
        model on it is kept (the count-based model competes too).
    alpha : Laplace smoothing of discrete leaves and mutual information.
    min_std : standard-deviation floor of Gaussian leaves.
    data_type : ``"auto"``, ``"discrete"`` or ``"continuous"``.
    cardinality : states per discrete variable (None: from the data; give it when a
        structure sample may miss a state).
    sample_rows : learn the structure on a uniform sample of this many rows (None: all
        rows); the refinement runs on all rows.
    random_state, n_threads, verbose : seed, OpenMP threads, progress lines (stderr).

    ``X`` may be larger than memory: a file spec ``"data.h5:/X"`` (or Zarr, ``.npy``), an
    h5py dataset, an iterable of row blocks or a Dask array. The structure search reads
    ``sample_rows`` rows (all rows when None) into memory; the refinement (any of them)
    streams all rows block by block (on a Dask array, as tasks over its chunks) and gives
    the model learned from the same rows as a numpy array, up to the order of additions.

    Attributes after :meth:`fit`: ``spn_`` (carrying the learner's parameters and its layer
    sizes), ``layer_nodes_``, ``layer_edges_`` (per sum layer), ``n_shared_`` (nodes with
    several parents), ``n_structure_rows_`` (rows the structure search saw),
    ``fit_seconds_``, ``structure_seconds_``, ``n_features_in_``, ``cardinality_``,
    ``n_calls_`` (decompositions built), ``n_sampled_calls_`` (those on a sampled graph),
    ``max_call_ratio_`` (largest product edges / scope size² of one decomposition).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(400, 4))
    >>> model = Prometheus(min_instances=100, random_state=0).fit(X)
    >>> model.spn_.n_vars
    4
    """

    _parameter_constraints = {
        "n_clusters": [Interval(int, 1)],
        "clustering": [Options("latent"), Instance(InstanceSplitter, name="an InstanceSplitter")],
        "n_restarts": [Interval(int, 1)],
        "n_iter": [Interval(int, 1)],
        "affinity": [Options("auto", "correlation", "mi")],
        "max_products": [Interval(int, 1), None],
        "sampled": [BOOL, Options("auto")],
        "leaf_vars": [Interval(int, 1)],
        "base_leaves": [Options("univariate", "multivariate")],
        "whole_scope": [BOOL, Options("auto")],
        "share": [Options("model", "cluster")],
        "min_instances": [Interval(int, 1)],
        "max_depth": [Interval(int, 0), None],
        "refine": [Options("auto", "em", "running_average", "hard", "none")],
        "refine_iter": [Interval(int, 1)],
        "alpha": [Interval(float, 0)],
        "min_std": [MIN_STD],
        "data_type": [Options("auto", "discrete", "continuous")],
        "cardinality": [ARRAY_LIKE, None],
        "sample_rows": [Interval(int, 1), None],
        "random_state": [RANDOM_STATE, None],
        "n_threads": [N_THREADS, None],
        "verbose": [Interval(int, 0), BOOL],
    }

    def __init__(self, n_clusters: int = 2, clustering="latent", *, n_restarts: int = 3, n_iter: int = 15,
                 affinity: str = "auto", max_products: int | None = 4, sampled="auto", leaf_vars: int = 1,
                 base_leaves: str = "univariate", whole_scope="auto", share: str = "model",
                 min_instances: int = 100, max_depth: int | None = 4,
                 refine: str = "auto", refine_iter: int = 30, alpha: float = 0.1, min_std: float = 1e-2,
                 data_type: str = "auto", cardinality=None, sample_rows: int | None = None,
                 random_state: SeedLike = None, n_threads: int | None = None, verbose: int = 0):
        self.n_clusters = n_clusters
        self.clustering = clustering
        self.n_restarts = n_restarts
        self.n_iter = n_iter
        self.affinity = affinity
        self.max_products = max_products
        self.sampled = sampled
        self.leaf_vars = leaf_vars
        self.base_leaves = base_leaves
        self.whole_scope = whole_scope
        self.share = share
        self.min_instances = min_instances
        self.max_depth = max_depth
        self.refine = refine
        self.refine_iter = refine_iter
        self.alpha = alpha
        self.min_std = min_std
        self.data_type = data_type
        self.cardinality = cardinality
        self.sample_rows = sample_rows
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose

    def _uses_valid(self, n_rows: int) -> bool:
        return self.refine != "none"      # X_valid picks among the refinement passes

    def fit(self, X, y=None, X_valid=None) -> "Prometheus":
        """Learn structure and parameters from the rows of ``X``; ``X_valid`` (optional)
        picks the best refinement pass (with ``refine="none"`` it is ignored, with a
        warning)."""
        self._no_target(y)
        self._validate_params()
        X, names = as_data(X)
        if self.refine == "none":
            X_valid = self._unused_valid(X_valid, "refine='none' runs no refinement passes to choose among")
        rows = structure_rows(X, self.sample_rows, self.random_state, "Prometheus")
        names = names if names is not None else getattr(rows.full, "names", None)    # DataFrame blocks
        try:
            X_valid = self._valid_rows(X_valid, names)      # the training columns' order
            self._check_valid(X_valid, n_cols=X.shape[1] if getattr(X, "ndim", 0) == 2 else None)
            self._fit(rows, X_valid, names)
        finally:
            close(rows, X)
        self._check_valid(X_valid, self.spn_)
        return self

    def _fit(self, rows, X_valid, names=None) -> "Prometheus":
        data, card, continuous = prepare(rows.data, self.data_type, self.cardinality, "Prometheus", rows.ids)
        if continuous:
            warn_small(column_std(data), float(self.min_std), "min_std", "Prometheus", names=names)
        if self.affinity == "mi" and continuous:
            raise ParameterError("affinity", f"Prometheus: {setting('affinity', 'mi')} needs discrete data; "
                                             f"use {setting('affinity', 'correlation')}")
        n, d = data.shape
        t0 = time.perf_counter()
        ctx = Context(data, card, continuous, alpha=self.alpha, min_std=self.min_std,
                      rng=np.random.default_rng(self.random_state),
                      n_threads=resolve_threads(self.n_threads, float(n) * d * 64))
        splitter = self._splitter(continuous)
        affinity = self.affinity if self.affinity != "auto" else ("correlation" if continuous else "mi")
        sample_above = {True: 1, False: None, "auto": SAMPLE_ABOVE}[self.sampled if self.sampled == "auto"
                                                                   else bool(self.sampled)]
        cfg = Settings(affinity, self.max_products, int(self.leaf_vars), self.base_leaves,
                       int(self.min_instances), self.max_depth, sample_above,
                       continuous if self.whole_scope == "auto" else bool(self.whole_scope),
                       self.share)
        builder = Builder(ctx, splitter, cfg)
        root = builder.build()
        spn = _compile(root, n_vars=d, cardinality=card, var_names=names)
        self.structure_seconds_ = time.perf_counter() - t0
        if self.verbose:
            print(f"[Prometheus] structure: {spn.n_nodes} nodes, {spn.n_edges} edges, "
                  f"{builder.stats.calls} calls, {self.structure_seconds_:.2f} s", file=sys.stderr)
        mode = refine_mode(self.refine, rows, continuous, "running_average" if continuous else "em")
        if mode != "none":
            spn = refine_params(spn, rows, mode, n_iter=self.refine_iter,
                                alpha=0.0 if continuous else float(self.alpha), min_std=self.min_std,
                                random_state=self.random_state, n_threads=self.n_threads,
                                verbose=int(self.verbose) > 1, X_valid=X_valid)
        self.fit_seconds_ = time.perf_counter() - t0
        st = builder.stats
        self.layer_nodes_ = np.asarray(st.layer_nodes, dtype=np.int64)
        self.layer_edges_ = np.asarray(st.layer_edges, dtype=np.int64)
        self.max_call_ratio_ = float(st.max_call_ratio)
        self.n_calls_ = int(st.calls)
        self.n_sampled_calls_ = int(st.sampled_calls)
        self.n_shared_ = int(np.count_nonzero(np.bincount(spn.child, minlength=spn.n_nodes) > 1))
        spn.learner = {"name": "prometheus", "version": "1", "params": self._json_params(),
                       "arrays": {"layer_nodes": self.layer_nodes_, "layer_edges": self.layer_edges_}}
        self.spn_: SPN = spn
        self.cardinality_ = card
        self.n_features_in_ = d
        self.n_structure_rows_ = int(n)
        return self

    def _splitter(self, continuous: bool):
        if self.n_clusters == 1:
            return _NoSplit()
        return resolve_step("sum_split", self.clustering, self, continuous)


class _NoSplit:
    """``n_clusters=1``: no clustering, one decomposition chain per call."""

    def split(self, ctx, sl):
        return None
