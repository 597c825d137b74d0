"""From trees to graphs: merging similar sub-SPNs of any model (Rahman & Gogate, "Merging
strategies for sum-product networks: from trees to graphs", Alg. 2 and Sec. 3.2).

One round of :class:`Merge`:

1. **Marginals, one pass.** Every single-variable marginal of every node comes from one
   forward pass over *indicator evidence*: one row per (variable, state), all other
   variables missing, so ``SPN.node_log_values`` returns ``log P_n(X_v = k)`` for all nodes
   at once (:func:`node_marginals`).
2. **Candidates (Alg. 2).** Nodes over discrete variables are grouped by identical scope
   (hashed) and by their *same-scope height* (the longest chain of descendants with the
   same scope), bottom-up by scope size. Within a group the mean-field distance
   ``1/|V| sum_v D(P_a(X_v), P_b(X_v))`` is computed for all pairs at once
   (``D`` = Manhattan, as in the paper, symmetric KL or Hellinger); a leader clustering
   (leaders by the number of training rows reaching them) groups nodes within ``epsilon``
   of their leader. Nodes of one cluster have equal height, so redirecting them to one
   node can never create a cycle; :meth:`spnc.SPN.from_arrays` checks the result anyway.
3. **Merging (Sec. 3.2).** Of each cluster, the member with the best log-likelihood on the
   validation rows that reached any member is kept and the others' parents point to it;
   Fig. 3 simplifications follow (:mod:`._graphedit`). The kept sub-networks (and Chow-Liu
   leaves in them, structure included) are re-estimated on the union of the training rows
   that reached the cluster's members, routed below them alone, by hard EM
   (``refit="hard_em"``, at most ``max_iter`` passes) or one counting pass
   (``refit="counts"``), every other parameter frozen; every other node keeps the rows
   that reached it (:mod:`._carry`; ``refit_rows="global"`` routes every row through the
   whole new model instead). Rows are routed by the model itself (:mod:`.routing`), once
   per fit, so models from any learner or file can be merged.
4. **Sanity check.** A kept sub-network that is not better on its validation rows than a
   Chow-Liu tree learned on its training rows is replaced by the tree (one leaf).
5. Identical sub-networks are merged (hash-consing) and the round repeats until nothing
   merges or ``max_rounds``.

The threshold is chosen on validation: each ``epsilon`` of the grid gives a model, and the
best on ``X_valid`` wins, the identical-merge-only model (same distribution as ``init``)
included — so merging never lowers the validation log-likelihood.
"""
from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from ..data import as_data, frame_column, is_frame, with_names
from ..errors import DataError, StructureError
from .._kinds import SUM
from ..graph import SPN, compile as _compile
from ..nodes import Sum
from ..stream import is_streamed
from . import routing as _routing
from ._hashcons import changed_nodes, hash_cons_changed
from ._merge_round import _Round, redirect_target
from ._redirect import redirect
from ._params import ARRAY_LIKE, BOOL, N_THREADS, Constraint, Instance, Interval, Options, model_hint
from ._similarity import n_parameters, node_marginals, used_vars  # noqa: F401  (node_marginals: public here)
from .base import DensityEstimator, check_observed, refuse_unscored

DISTANCES = ("manhattan", "kl", "hellinger")


def identical_merge(spn: SPN) -> SPN:
    """The model with structurally identical sub-networks of equal parameters shared and
    the exact Fig. 3 simplifications applied: the same distribution, fewer nodes."""
    return _identical_merge(spn)[0]


def _identical_merge(spn: SPN, made_from=None) -> tuple[SPN, np.ndarray | None]:
    """:func:`identical_merge` and the new id of every old node (-1: dropped; None when a
    Fig. 3(a) simplification made nodes, which have no old node). ``made_from``: (a model
    without identical sub-networks, its node -> ``spn``'s node), when ``spn`` was made from
    it: only the nodes that differ are keyed (:mod:`._hashcons`), the same result."""
    target, first = np.arange(spn.n_nodes), True
    while True:
        # every node changed: hash_cons's result, leaves of a column table keyed at once
        changed = np.ones(spn.n_nodes, dtype=bool) if made_from is None else \
            changed_nodes(made_from[0], spn, made_from[1])
        rep = hash_cons_changed(spn, changed)
        moved = np.flatnonzero(rep != np.arange(spn.n_nodes))
        if not moved.size:
            return spn, target
        made: list[int] = []
        new, keep = redirect(spn, rep, obs_var=_routing.observed_sums(spn), learner=spn.learner, stats={},
                             created=made)
        step = redirect_target(keep, rep, moved, spn.n_nodes)
        # (the first step itself, not an equal copy: changed_nodes keeps its answer per object)
        target = None if target is None or made else step if first else \
            np.where(target >= 0, step[np.maximum(target, 0)], -1)
        first = False
        made_from = None if made else (spn, step)
        spn = new


def single_root(spn: SPN) -> SPN:
    """A mixture of roots as one latent sum root (same distribution, variables and learner
    record; per-node ``stats`` are dropped, the nodes being renumbered); others unchanged."""
    if spn.combine == "single":
        return spn
    if spn.combine == "independent":
        raise StructureError("merging needs a single-root or mixture model, not combine='independent'")
    roots = spn.to_nodes()
    # the variables by their cardinality, not n_vars: compile warns of variables in no leaf
    # only when the caller counts them, and these are the model's own
    out = _compile(Sum(roots, spn.root_weights), cardinality=spn.cardinality,
                   var_type=spn.var_type, var_names=spn.var_names)
    out.learner = dict(spn.learner)
    return out


def as_mixture(spn: SPN) -> SPN:
    """:func:`single_root` undone: a last-numbered sum root over several children as a mixture
    of those children (same distribution, one node fewer); anything else unchanged."""
    r, N = int(spn.roots[0]), spn.n_nodes
    a, b = int(spn.child_ptr[N - 1]), int(spn.child_ptr[N])
    if spn.combine != "single" or r != N - 1 or spn.kind[r] != SUM or b - a < 2 \
            or np.isin(spn.child[a:b], spn.child[:a]).any():      # a child shared below stays a child
        return spn
    return SPN.from_arrays(spn.kind[:-1], spn.child_ptr[:-1], spn.child[:a], spn.weight[:a], spn.leaf_tables,
                           spn.cardinality, var_type=spn.var_type, var_names=spn.var_names,
                           roots=spn.child[a:b], root_weights=spn.weight[a:b], combine="mixture",
                           learner=spn.learner)


def _epsilon_ok(v) -> bool:
    """A number >= 0 or a flat, non-empty list of them."""
    if isinstance(v, (list, tuple, np.ndarray)):
        return np.ndim(v) == 1 and len(v) > 0 and all(Interval(float, 0).ok(x) for x in v)
    return Interval(float, 0).ok(v)


# ====================================================================== the estimator
class Merge(DensityEstimator):
    """Turn a model (a tree from any learner, or any valid SPN) into a smaller graph by
    merging similar sub-SPNs (Rahman & Gogate, Alg. 2, Sec. 3.2).

    Parameters
    ----------
    init : the model to merge (a compiled :class:`spnc.SPN`; not modified).
    epsilon : distance threshold, or a grid of thresholds chosen on ``X_valid``. The grid
        is walked upwards as a path (each threshold continues from the previous model) and
        the best model on validation wins. Default: the paper's grid without its two
        smallest values, extended to 0.4 (the local validation check keeps large
        thresholds safe).
    distance : ``"manhattan"`` (the paper's), ``"kl"`` (symmetric) or ``"hellinger"``,
        each averaged over the scope's variables (mean-field approximation).
    refit : ``"counts"`` (one counting pass over the routed rows, closed form) or
        ``"hard_em"`` (route and recount until the routing is stable, at most ``max_iter``
        passes; the paper's choice, slower, equal on the sets measured so far) or ``"em"``
        (soft EM on the kept sub-networks, all else frozen, at most ``max_iter`` passes,
        stopped on ``X_valid``): for models whose parameters were fitted softly (EM,
        mixtures, other libraries), where hard routing re-estimates them badly. Its
        early stopping and the choice of ``epsilon`` use the same ``X_valid``, which can
        then overrate the result (bnetflix L-SPN: validation +0.07, test -0.21).
    max_iter : hard-EM or EM passes per round.
    alpha : Laplace pseudo-count of the refits (None: the ``alpha`` the model's learner
        recorded, else 0.1).
    max_rounds : rounds of search-merge-refit per threshold (until nothing merges).
    patience : stop the threshold path after this many consecutive thresholds whose model
        is worse on ``X_valid`` than the best so far (None: walk the whole grid). The path
        only merges more as it goes, so a model that lost on validation rarely recovers;
        but it can (measured: jester O-SPN with univariate leaves and ``local_check``
        dips at 0.001 and 0.01 and wins at 0.4), so the default walks the whole grid.
    chowliu_check : replace a merged sub-network by a Chow-Liu tree when the tree is at
        least as good on the validation rows reaching it.
    local_check : with validation data, a cluster member is merged only when the kept
        member's log-likelihood on the member's validation rows is at least its own (the
        paper's greedy validation strategy, evaluated locally). Off by default: with many
        small per-node decisions it fits the validation set (measured on jester: validation
        +0.16, test -0.12 nats).
    routing : None (rows are routed by the model, see :mod:`spnc.learn.routing`) or the
        routing a learner recorded for ``init``: a 0/1 matrix (n_train, init.n_nodes),
        dense or scipy.sparse; without ``X_valid`` it orders the first round's candidates
        (with ``X_valid`` the validation rows' routing does, and a warning says the given one
        is unused, as it does when identical merging renumbered the nodes).
    refit_rows : ``"local"`` (a kept sub-network is re-estimated on the union of the
        training rows that reached its cluster's members, routed below it alone, and every
        other node keeps the rows that reached it: the paper's merged dataset, Sec. 3.2,
        with work in proportion to what a round changes) or ``"global"`` (every training
        row routed through the whole new model after every round).
    verbose : one line per threshold and round on stderr when > 0.
    n_threads : threads of the inference kernels (None: automatic).

    Memory: leaf values are kept between the passes over the same rows, up to 1 GiB on
    the training rows and 256 MiB on the validation rows (``_merge_round``); leaves beyond
    that are evaluated again on every pass.

    Attributes after :meth:`fit`: ``spn_``, ``epsilon_`` (chosen threshold, None when only
    identical sub-networks were merged), ``history_`` (per threshold visited: validation LL,
    nodes, parameters, merges, seconds), ``n_params_before_``, ``n_params_after_`` (sum
    weights, all parameters), ``merge_seconds_``, ``n_features_in_``. A DataFrame ``X`` is
    matched to a named ``init`` by column name; an unnamed ``init`` takes its names.

    Examples
    --------
    >>> import numpy as np
    >>> from spnc.learn import LearnSPN, Merge
    >>> X = np.random.default_rng(0).integers(0, 2, size=(400, 5))
    >>> tree = LearnSPN(sum_split="observed", min_instances=20, random_state=0).fit(X).spn_
    >>> m = Merge(init=tree, epsilon=0.05).fit(X[:300], X_valid=X[300:])
    >>> m.spn_.n_nodes <= tree.n_nodes
    True
    """

    _parameter_constraints = {
        "init": [Instance(SPN, name="a compiled spnc.SPN", hint=model_hint)],
        "epsilon": [Constraint(_epsilon_ok, "a number >= 0 or a non-empty list of them")],
        "distance": [Options(*DISTANCES)],
        "refit": [Options("hard_em", "counts", "em")],
        "max_iter": [Interval(int, 1)],
        "alpha": [Interval(float, 0), None],
        "max_rounds": [Interval(int, 1)],
        "patience": [Interval(int, 1), None],
        "chowliu_check": [BOOL],
        "local_check": [BOOL],
        "routing": [ARRAY_LIKE, Constraint(lambda v: hasattr(v, "tocsc"), "a scipy.sparse matrix"), None],
        "refit_rows": [Options("local", "global")],
        "verbose": [Interval(int, 0), BOOL],
        "n_threads": [N_THREADS, None],
    }

    def __init__(self, init: SPN | None = None, epsilon=(1e-3, 1e-2, 0.1, 0.2, 0.4), distance: str = "manhattan",
                 refit: str = "counts", max_iter: int = 20, alpha: float | None = None, max_rounds: int = 3,
                 patience: int | None = None, chowliu_check: bool = True, local_check: bool = False, routing=None,
                 refit_rows: str = "local", verbose: int = 0, n_threads: int | None = None):
        self.init = init
        self.epsilon = epsilon
        self.distance = distance
        self.refit = refit
        self.max_iter = max_iter
        self.alpha = alpha
        self.max_rounds = max_rounds
        self.patience = patience
        self.chowliu_check = chowliu_check
        self.local_check = local_check
        self.routing = routing
        self.refit_rows = refit_rows
        self.verbose = verbose
        self.n_threads = n_threads

    def fit(self, X, y=None, X_valid=None) -> "Merge":
        """Merge ``init`` using the training rows ``X`` (re-estimation) and ``X_valid``
        (choices: kept member, Chow-Liu check, threshold). Without ``X_valid`` a single
        ``epsilon`` is required and the member with most training rows is kept."""
        self._no_target(y)
        self._validate_params()
        t0 = time.perf_counter()
        for name, data in (("X", X), ("X_valid", X_valid)):
            if is_streamed(data):
                raise DataError(f"Merge routes the rows of {name} several times and needs them in memory: "
                                "read them first (spnc.stream.load)")
        init = self.init
        if is_frame(X):     # an unnamed model takes the columns' names; the check matches them by name
            init = with_names(init, as_data(X, init.var_names)[1])
        self._positional_valid(X_valid, is_frame(X))
        frame = X
        X = init._check_X(X)        # (a frame's own coordinates in its errors)
        if X.shape[0] == 0:
            raise DataError("X has no rows")
        if np.isnan(X).any():
            gap = np.isnan(X) & used_vars(init)
            if gap.any():
                r, c = (int(v) for v in np.argwhere(gap)[0])
                var = f"variable {c}" + ("" if init.var_names is None else f" ({init.var_names[c]!r})")
                raise DataError(f"X[{r}, {frame_column(frame, init.var_names, c)}] is missing (NaN), {var}: merging "
                                "re-estimates parameters from X, which must be complete on the variables of the "
                                "model's leaves")
            X = np.where(np.isnan(X), 0.0, X)     # variables in no leaf: every query ignores them
        Xv = None if X_valid is None else init._check_X(X_valid, "X_valid")
        if Xv is not None:
            check_observed(Xv)          # some rows, with some observed value
        grid = list(np.atleast_1d(np.asarray(self.epsilon, dtype=np.float64)))
        if Xv is None and len(grid) > 1:
            raise DataError("choosing epsilon from a grid needs X_valid; pass X_valid or one epsilon")
        alpha = self.alpha
        if alpha is None:       # the learner's (0 included), else 0.1
            alpha = (init.learner.get("params") or {}).get("alpha")
            alpha = 0.1 if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or alpha < 0 else alpha
        alpha = float(alpha)                     # a numpy integer scalar would overflow in counts
        base = identical_merge(single_root(init))
        R0 = None
        if self.routing is not None:
            R0 = _routing.as_routing(self.routing, X.shape[0], init.n_nodes)
            why = ("X_valid is given (its rows' routing orders the candidates)" if Xv is not None else
                   "a mixture of roots is merged under one new sum root, which renumbers the nodes"
                   if init.combine != "single" else
                   "identical merging renumbered the nodes" if base.n_nodes != init.n_nodes else None)
            if why:
                warnings.warn(f"Merge: the given routing is not used: {why}", UserWarning, stacklevel=2)
                R0 = None
        rnd = _Round(self, X, Xv, alpha)

        def valid_ll(m: SPN) -> float:     # the root's value, with the leaf values kept so far
            if Xv is None:
                return np.nan
            return float(np.mean(rnd.valid_values(m, m.roots)))

        self.history_ = [{"epsilon": None, "valid_ll": valid_ll(base), "nodes": base.n_nodes,
                          "params": n_parameters(base)[0], "merged": init.n_nodes - base.n_nodes,
                          "seconds": time.perf_counter() - t0}]
        best, best_v, best_eps = base, self.history_[0]["valid_ll"], None
        model = base
        worse = 0
        for eps in sorted(grid):        # a path: each threshold continues from the previous model
            t1 = time.perf_counter()
            merged = 0
            for r in range(int(self.max_rounds)):
                given = R0 if (model is base and R0 is not None) else None
                model, k = rnd.run(model, float(eps),
                                   (lambda m=model, g=given: g if g is not None else rnd.train_routing(m)))
                if k:
                    old = model
                    model, target = _identical_merge(model, rnd.made_from)
                    if model is not old:
                        rnd.carry(old, model, target)
                merged += k
                if self.verbose:
                    print(f"[merge] epsilon={eps:g} round {r + 1}: {k} merged, {model.n_nodes} nodes "
                          f"({time.perf_counter() - t1:.2f} s)", file=sys.stderr)
                if k == 0:
                    break
            v = valid_ll(model) if merged else self.history_[-1]["valid_ll"]
            self.history_.append({"epsilon": float(eps), "valid_ll": v, "nodes": model.n_nodes,
                                  "params": n_parameters(model)[0], "merged": merged,
                                  "seconds": time.perf_counter() - t1})
            if Xv is None or v > best_v:
                best, best_v = model, v
                best_eps = float(eps) if merged else best_eps     # None: identical merges only
            worse = worse + 1 if Xv is not None and v < best_v else 0
            if self.patience is not None and worse >= self.patience:
                break
        if Xv is not None and best_v == -np.inf:     # else the unmerged model, chosen blindly
            refuse_unscored(rnd.valid_values(base, base.roots), "the model and every merged candidate",
                            "drop such rows, or give them mass in the model")
        if init.combine == "mixture":      # given as a mixture of roots, returned as one
            best = as_mixture(best)
        self.merge_seconds_ = time.perf_counter() - t0
        self.epsilon_ = best_eps
        self.n_params_before_ = n_parameters(init)
        self.n_params_after_ = n_parameters(best)
        params = self._json_params(exclude=("init", "routing"))
        params["epsilon"] = [float(e) for e in grid]
        params["routing"] = "model" if R0 is None else "given"
        params["alpha"] = float(alpha)
        learner = {"name": "merge", "version": "1", "params": params,
                   "init_learner": str(init.learner.get("name", "unknown")),
                   "epsilon": best_eps, "nodes_before": int(init.n_nodes), "nodes_after": int(best.n_nodes),
                   "params_before": list(self.n_params_before_), "params_after": list(self.n_params_after_),
                   "merge_seconds": float(self.merge_seconds_)}
        self.n_features_in_ = init.n_vars
        self.spn_ = SPN.from_arrays(best.kind, best.child_ptr, best.child, best.weight, best.leaf_tables,
                                    best.cardinality, var_type=best.var_type, var_names=best.var_names,
                                    roots=best.roots, root_weights=best.root_weights, combine=best.combine,
                                    learner=learner)
        return self
