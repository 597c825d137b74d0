"""Chow-Liu tree estimator with a scikit-learn-like interface."""
from __future__ import annotations

import os
from typing import Iterator

import numpy as np

from .. import stream as _stream
from .._progress import Progress
from ..data import as_data, storable_names
from ..chowliu import fit_chow_liu, forest_to_tree
from ..graph import SPN, compile as _compile
from ..leaves.cltree import ChowLiuLeaf
from ._params import ARRAY_LIKE, N_THREADS, Interval
from .base import DensityEstimator


class ChowLiuTree(DensityEstimator):
    """Maximum-likelihood tree (or forest) over discrete variables, learned from weighted data.

    Parameters
    ----------
    alpha : Dirichlet smoothing of pair counts and CPTs (>= 0).
    mi_threshold : edges with mutual information (nats) at or below this are dropped.
    cardinality : states per variable; inferred from the training data when None.
    n_threads : OpenMP threads for counting (None: automatic, -1: all cores).

    Attributes (after :meth:`fit`): ``spn_`` (a compiled :class:`spnc.SPN` holding one
    Chow-Liu tree leaf), ``parents_`` (forest parents, -1 at each root), ``cpts_``,
    ``mi_`` (mutual-information matrix), ``cardinality_``, ``n_features_in_``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).integers(0, 2, size=(200, 4))
    >>> model = ChowLiuTree(alpha=1.0).fit(X)
    >>> model.score_samples(X[:2]).shape
    (2,)
    """

    _categorical_only = True      # scikit-learn tags: integer codes only

    _parameter_constraints = {
        "alpha": [Interval(float, 0)],
        "mi_threshold": [Interval(float, 0)],
        "cardinality": [ARRAY_LIKE, None],
        "n_threads": [N_THREADS, None],
    }

    def __init__(self, alpha: float = 0.1, mi_threshold: float = 0.0, cardinality=None,
                 n_threads: int | None = None):
        self.alpha = alpha
        self.mi_threshold = mi_threshold
        self.cardinality = cardinality
        self.n_threads = n_threads

    # ------------------------------------------------------------------ fit / query
    def fit(self, X, y=None, sample_weight=None) -> "ChowLiuTree":
        """Learn the tree structure and CPTs from ``X`` (n, n_vars) integer codes.
        ``sample_weight`` counts rows (a weight of 2 is a row seen twice), and ``alpha`` is
        added to those counts: scale the weights to sum to about n, not to 1."""
        self._no_target(y)
        self._validate_params()
        X, names = as_data(X)
        opened = isinstance(X, (str, os.PathLike)) or callable(X) or \
            (isinstance(X, (list, Iterator)) and _stream.is_streamed(X))
        if opened:      # blocks or a file: DataFrame blocks or the dataset's attribute name the variables
            X = _stream.open_source(X)
        try:
            prog = Progress("chowliu")
            shape = getattr(X, "shape", ())
            if len(shape) == 2:
                prog.update(f"pairwise statistics of {shape[1]} variables over {shape[0]} rows")
            fit = fit_chow_liu(X, self.cardinality, sample_weight, alpha=self.alpha,
                               mi_threshold=self.mi_threshold, n_threads=self.n_threads)
        finally:
            if opened:
                X.close()
        d = len(fit.cardinality)
        par, cpts = forest_to_tree(fit.parents, fit.cpts)
        leaf = ChowLiuLeaf(np.arange(d), par, cpts)
        if names is None and getattr(X, "names", None) is not None:    # blocks or a named dataset
            names = X.names
            storable_names(names)
        self.spn_: SPN = _compile(leaf, cardinality=fit.cardinality, var_names=names)
        prog.close(f"tree over {d} variables")
        self.parents_ = fit.parents
        self.cpts_ = fit.cpts
        self.mi_ = fit.mi
        self.cardinality_ = fit.cardinality
        self.n_features_in_ = d
        return self
