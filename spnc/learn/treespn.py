"""TreeSPN (Desana & Schnörr, Sec. 6): a depth-limited LearnSPN structure in which every sum
node also gets a fixed number of Chow-Liu tree leaves over its scope, then EM on all
weights and all trees (structure and tables) until the validation log-likelihood stops
improving. Built from the LearnSPN template with one extra instance splitter."""
from __future__ import annotations

import numpy as np

from . import _learnspn as _LK
from ..chowliu import fit_chow_liu, forest_to_tree
from ..data import is_frame
from ..leaves.cltree import ChowLiuLeaf
from ._params import ARRAY_LIKE, BOOL, N_THREADS, RANDOM_STATE, Interval, Options, SeedLike
from .base import DensityEstimator
from .em import EM
from .learnspn import LearnSPN
from .structure import InstanceSplitter, NaiveBayesEM, Part, Slice, UnivariateLeaves


def g_factor_for(p_value: float, dof: int = 1) -> float:
    """The GVS ``g_factor`` whose threshold ``2 * dof * g_factor`` is the G-test's critical
    value at ``p_value`` (chi-square with ``dof`` degrees of freedom; binary pairs have one):
    p 0.1, 0.01, 0.001 give 1.353, 3.317, 5.414."""
    from scipy.stats import chi2
    return float(chi2.isf(p_value, dof)) / (2.0 * dof)


class TreeMixtureSplit(InstanceSplitter):
    """The children of ``inner`` plus ``n_trees`` Chow-Liu tree leaves over the slice's
    variables, initialised as a mixture: the rows are split into ``n_trees`` groups
    (``init="clusters"``: naive-Bayes hard EM; ``"random"``: a random partition) and each
    tree is fitted to one group with Dirichlet smoothing ``tree_alpha`` (None: the
    learner's ``alpha``; at least 1e-3, so that every tree gives every row of the slice
    some probability). The trees share ``tree_share`` of the sum's weight, in proportion
    to their groups."""

    def __init__(self, inner: InstanceSplitter, n_trees: int = 5, tree_share: float = 0.5, n_iter: int = 10,
                 init: str = "clusters", tree_alpha: float | None = None):
        self.inner = inner
        self.n_trees = int(n_trees)
        self.tree_share = float(tree_share)
        self.n_iter = int(n_iter)
        self.init = init
        self.tree_alpha = tree_alpha

    def split(self, ctx, sl):
        parts = self.inner.split(ctx, sl)
        n = sl.rows.size
        k = min(self.n_trees, n)
        if k < 1:
            return parts
        D = ctx.data(sl)
        card = ctx.card[sl.vars].astype(np.int64)
        if self.init == "random":     # a random partition: EM has to find the mixture
            labels = ctx.rng.permutation(n) % k
        elif k > 1:
            protos = ctx.rng.choice(n, size=(1, k), replace=False).astype(np.int64)
            labels, _ = _LK.nb_hard_em(D, ctx.offsets(sl.vars), card, protos, self.n_iter, ctx.alpha, 1)
        else:
            labels = np.zeros(n, dtype=np.int32)
        share = self.tree_share if parts else 1.0
        trees = []
        for c in range(k):
            rows = np.flatnonzero(labels == c)
            if rows.size == 0:
                continue
            if sl.vars.size == 1:
                leaf = UnivariateLeaves().fit(ctx, Slice(sl.rows[rows], sl.vars))
            else:
                fit = fit_chow_liu(D[rows], card, alpha=max(ctx.alpha if self.tree_alpha is None else self.tree_alpha, 1e-3), n_threads=1)
                leaf = ChowLiuLeaf(sl.vars, *forest_to_tree(fit.parents, fit.cpts))
            trees.append(Part(sl.rows[rows], sl.vars, share * rows.size / n, node=leaf))
        for p in parts or []:
            p.weight *= 1.0 - share
        return (parts or []) + trees



class TreeSPN(DensityEstimator):
    """LearnSPN (GVS, naive-Bayes clustering) limited to ``max_depth`` sum layers, with
    ``n_trees`` Chow-Liu tree leaves added to every sum node and Chow-Liu leaves at the
    depth limit, refined by soft EM on weights and trees until the validation
    log-likelihood stops improving (``patience`` passes).

    The paper's independence thresholds p = 0.1, 0.01, 0.001 are ``g_factor`` 1.353,
    3.317, 5.414 (:func:`g_factor_for`). The initial trees are fitted to their groups
    with smoothing ``tree_alpha`` (default 10 per CPT entry; None: the learner's
    ``alpha``; values below 1e-3 are raised to it), so the starting model is under-fitted
    and EM, stopped on validation, decides how far the trees sharpen. With many trees per sum node on large sets EM can
    still lower the validation log-likelihood from the first pass (the trees are fitted
    to the rows they are then made responsible for); EM then returns the start.
    ``tree_alpha`` and ``em_alpha`` (EM's pseudo-count) are best chosen on validation
    (``tools/bench_treespn.py``).

    ``min_instances`` (default 50) and ``alpha`` (0.1) are LearnSPN's. Each sum node's rows
    are clustered by naive-Bayes hard EM into 2 groups with ``n_restarts`` (3) restarts of
    at most ``n_iter`` (15) rounds; its trees get ``tree_share`` (0.5) of its weight and
    start from groups found by ``tree_init``: ``"clusters"`` (naive-Bayes hard EM into
    ``n_trees`` groups, the default) or ``"random"`` (a random partition). EM then runs at
    most ``em_max_iter`` (100) passes. ``random_state`` and ``n_threads`` are passed to
    LearnSPN and EM, ``verbose`` to EM.

    ``cardinality``: states per variable (None: from the training data; give it when a
    state may be missing from ``X``, as in a bootstrap sample, but occur in data scored
    later).

    ``fit(X, X_valid=None)``; attributes ``spn_`` (after EM), ``structure_`` (before EM),
    ``history_`` (EM's train/valid log-likelihood, the start first), ``n_iter_`` (EM passes),
    ``n_features_in_``."""

    _categorical_only = True      # scikit-learn tags: integer codes only

    _parameter_constraints = {
        "n_trees": [Interval(int, 1)],
        "max_depth": [Interval(int, 0)],
        "g_factor": [Interval(float, 0)],
        "min_instances": [Interval(int, 1)],
        "alpha": [Interval(float, 0)],
        "tree_share": [Interval(float, 0, 1)],
        "tree_init": [Options("clusters", "random")],
        "tree_alpha": [Interval(float, 0), None],
        "n_restarts": [Interval(int, 1)],
        "n_iter": [Interval(int, 1)],
        "em_max_iter": [Interval(int, 1)],
        "em_alpha": [Interval(float, 0)],
        "patience": [Interval(int, 1)],
        "cardinality": [ARRAY_LIKE, None],
        "random_state": [RANDOM_STATE, None],
        "verbose": [Interval(int, 0), BOOL],
        "n_threads": [N_THREADS, None],
    }

    def __init__(self, n_trees: int = 5, max_depth: int = 4, *, g_factor: float = 5.0, min_instances: int = 50,
                 alpha: float = 0.1, tree_share: float = 0.5, tree_init: str = "clusters",
                 tree_alpha: float | None = 10.0, n_restarts: int = 3, n_iter: int = 15,
                 em_max_iter: int = 100, em_alpha: float = 0.1, patience: int = 3, cardinality=None,
                 random_state: SeedLike = None, verbose: int = 0, n_threads: int | None = None):
        self.n_trees = n_trees
        self.max_depth = max_depth
        self.g_factor = g_factor
        self.min_instances = min_instances
        self.alpha = alpha
        self.tree_share = tree_share
        self.tree_init = tree_init
        self.tree_alpha = tree_alpha
        self.n_restarts = n_restarts
        self.n_iter = n_iter
        self.em_max_iter = em_max_iter
        self.em_alpha = em_alpha
        self.patience = patience
        self.cardinality = cardinality
        self.random_state = random_state
        self.verbose = verbose
        self.n_threads = n_threads

    def fit(self, X, y=None, X_valid=None) -> "TreeSPN":
        """Learn the structure on ``X``, then run EM (stopping on ``X_valid`` when given)."""
        self._validate_params()
        self._no_target(y)
        self._positional_valid(X_valid, is_frame(X))
        split = TreeMixtureSplit(NaiveBayesEM(2, self.n_restarts, self.n_iter), self.n_trees, self.tree_share,
                                 init=self.tree_init, tree_alpha=self.tree_alpha)
        ls = LearnSPN(splitter="gvs", sum_split=split, leaves="chowliu", g_factor=self.g_factor,
                      min_instances=self.min_instances, max_depth=self.max_depth, alpha=self.alpha,
                      data_type="discrete", cardinality=self.cardinality, random_state=self.random_state,
                      n_threads=self.n_threads).fit(X)
        self.structure_ = ls.spn_
        em = EM(init=ls.spn_, max_iter=self.em_max_iter, alpha=self.em_alpha, patience=self.patience, verbose=self.verbose,
                random_state=self.random_state, n_threads=self.n_threads)
        em.fit(X, X_valid=X_valid)
        spn = em.spn_
        learner = dict(spn.learner)
        learner["name"] = "treespn"
        learner["params"] = dict(ls._json_params(), **self._json_params())
        learner["params"]["sum_split"] = f"tree_mixture(n_trees={self.n_trees})"
        spn.learner = learner
        self.spn_ = spn
        self.history_ = em.history_
        self.n_iter_ = em.n_iter_
        self.n_features_in_ = ls.n_features_in_
        return self
