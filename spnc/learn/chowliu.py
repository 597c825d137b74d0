"""Chow-Liu tree estimator with a scikit-learn-like interface."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..chowliu import fit_chow_liu, forest_to_tree
from ..errors import DataError
from ..graph import SPN, compile as _compile
from ..leaves.cltree import ChowLiuLeaf


class ChowLiuTree:
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

    _PARAMS = ("alpha", "mi_threshold", "cardinality", "n_threads")

    def __init__(self, alpha: float = 0.1, mi_threshold: float = 0.0, cardinality=None,
                 n_threads: int | None = None):
        self.alpha = alpha
        self.mi_threshold = mi_threshold
        self.cardinality = cardinality
        self.n_threads = n_threads

    # ------------------------------------------------------------------ params
    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._PARAMS}

    def set_params(self, **params: Any) -> "ChowLiuTree":
        for k, v in params.items():
            if k not in self._PARAMS:
                raise ValueError(f"invalid parameter {k!r} for ChowLiuTree; valid: {list(self._PARAMS)}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        return "ChowLiuTree(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self._PARAMS) + ")"

    # ------------------------------------------------------------------ fit / query
    def fit(self, X, sample_weight=None) -> "ChowLiuTree":
        """Learn the tree structure and CPTs from ``X`` (n, n_vars) integer codes."""
        fit = fit_chow_liu(X, self.cardinality, sample_weight, alpha=self.alpha,
                           mi_threshold=self.mi_threshold, n_threads=self.n_threads)
        d = len(fit.cardinality)
        par, cpts = forest_to_tree(fit.parents, fit.cpts)
        leaf = ChowLiuLeaf(np.arange(d), par, cpts)
        self.spn_: SPN = _compile(leaf, cardinality=fit.cardinality)
        self.parents_ = fit.parents
        self.cpts_ = fit.cpts
        self.mi_ = fit.mi
        self.cardinality_ = fit.cardinality
        self.n_features_in_ = d
        return self

    def _model(self) -> SPN:
        if not hasattr(self, "spn_"):
            raise AttributeError("this ChowLiuTree is not fitted yet; call fit(X) first")
        return self.spn_

    def score_samples(self, X, *, n_threads: int | None = None) -> np.ndarray:
        """log p(x) per row; NaN entries are summed out exactly."""
        return self._model().log_likelihood(X, n_threads=n_threads)

    def score(self, X, y=None) -> float:
        """Mean log-likelihood of the rows of ``X``."""
        ll = self.score_samples(X)
        if ll.size == 0:
            raise DataError("X has no rows to score")
        return float(np.mean(ll))

    def sample(self, n: int, seed: int | None = None) -> np.ndarray:
        """Draw ``n`` rows (float64 codes), reproducible for a given ``seed``."""
        return self._model().sample(int(n), seed=seed)
