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
   leaves in them, structure included) are re-estimated on the union of the rows now
   reaching them by hard EM (``refit="hard_em"``, at most ``max_iter`` passes) or one
   counting pass (``refit="counts"``), every other parameter frozen. Rows are routed by
   the model itself (:mod:`.routing`), so models from any learner or file can be merged.
4. **Sanity check.** A kept sub-network that is worse on its validation rows than a
   Chow-Liu tree learned on its training rows is replaced by the tree.
5. Identical sub-networks are merged (hash-consing) and the round repeats until nothing
   merges or ``max_rounds``.

The threshold is chosen on validation: each ``epsilon`` of the grid gives a model, and the
best on ``X_valid`` wins, the identical-merge-only model (same distribution as ``init``)
included — so merging never lowers the validation log-likelihood.
"""
from __future__ import annotations

import time

import numpy as np

from ..chowliu import fit_chow_liu, forest_to_tree
from ..errors import DataError, StructureError
from .._kinds import MARGINAL, MAX
from .._threads import effective_n_threads
from ..graph import SPN, compile as _compile
from ..leaves.cltree import ChowLiuLeaf, CLTreeLeafType
from ..nodes import Sum
from . import routing as _routing
from ._graphedit import descendants, hash_cons, rebuild
from ._leafcache import LeafCache
from ._params import ARRAY_LIKE, BOOL, N_THREADS, Constraint, Instance, Interval, Options
from .base import DensityEstimator
from ._refit import hard_refit
from ._similarity import Pairs, indicator_evidence, n_parameters, node_marginals  # noqa: F401
from .em import EM

DISTANCES = ("manhattan", "kl", "hellinger")
#: node values on the validation rows kept per model, at most (float64: 64 MB)
VALUES_KEPT = 8 << 20


# ====================================================================== one round
class _Round:
    """Candidate search, merging and refit of one round on model ``spn``."""

    def __init__(self, est: "Merge", X: np.ndarray, Xv: np.ndarray | None, alpha: float):
        self.est, self.X, self.Xv, self.alpha = est, X, Xv, alpha
        self.nt = est.n_threads
        # leaf values kept between the passes over the same rows (most leaves never change)
        nt = effective_n_threads(est.n_threads, 1 << 30)
        self.cache = LeafCache(X, MAX, n_threads=nt)
        self.vcache0 = None if Xv is None else LeafCache(Xv, MARGINAL, max_bytes=256 << 20, n_threads=nt)
        self.vcache = self.vcache0 if Xv is None or self.vcache0.complete else \
            LeafCache(Xv, MAX, max_bytes=256 << 20, n_threads=nt)
        self.evidence, self.ecache, self.nt1 = None, None, nt     # indicator evidence of the marginals
        self._dist = None
        self._seen = (None, {})         # (model, its validation routing and node values)

    def _valid(self, spn: SPN) -> dict:
        """What was computed on the validation rows for ``spn`` (the last model asked
        about: a round that merges nothing, and the next threshold, ask again)."""
        if self._seen[0] is not spn:
            self._seen = (spn, {})
        return self._seen[1]

    def valid_routing(self, spn: SPN):
        """The validation rows' routing through ``spn``."""
        memo = self._valid(spn)
        if "R" not in memo:
            memo["R"] = _routing.route(spn, self.Xv, n_threads=self.nt, cache=self.vcache)
        return memo["R"]

    def valid_values(self, spn: SPN, nodes) -> np.ndarray:
        """``log S_n`` of the validation rows for ``nodes``; every node's at once, kept,
        while that is at most VALUES_KEPT values."""
        memo = self._valid(spn)
        if "V" not in memo and spn.n_nodes * self.Xv.shape[0] <= VALUES_KEPT:
            memo["V"] = _routing.node_values(spn, self.Xv, np.arange(spn.n_nodes), n_threads=self.nt,
                                             cache=self.vcache0)
        if "V" in memo:
            return memo["V"][:, np.asarray(nodes, dtype=np.int64)]
        return _routing.node_values(spn, self.Xv, nodes, n_threads=self.nt, cache=self.vcache0)

    def distances(self, spn: SPN) -> Pairs:
        """The candidate pairs of ``spn`` and their mean-field distances (:class:`Pairs`).
        Kept for the last model: a threshold that merged nothing hands the next one the same
        model."""
        if self._dist is not None and self._dist[0] is spn:
            return self._dist[1]
        if self.evidence is None:
            self.evidence = indicator_evidence(spn)
            self.ecache = LeafCache(self.evidence[0], MARGINAL, max_bytes=256 << 20, n_threads=self.nt1,
                                    evidence_off=self.evidence[1])
        P, off = node_marginals(spn, self.nt, self.evidence, self.ecache)
        skip = np.zeros(spn.n_nodes, dtype=bool)
        ind = spn.leaf_tables.get("indicator")
        if ind is not None:
            skip[ind.node] = True       # structure, not parameters
        out = Pairs(spn, P, off, self.est.distance, skip)
        self._dist = (spn, out)
        return out

    def clusters(self, spn: SPN, eps: float, train_rows) -> list[np.ndarray]:
        """Clusters of nodes to merge; ``train_rows()`` gives the rows reaching each node
        (called only when some pair is within ``eps``), which orders the leaders."""
        count = None
        out = []
        pairs = self.distances(spn)
        for g in np.flatnonzero(pairs.gmin <= eps):
            m = pairs.members[pairs.gptr[g]:pairs.gptr[g + 1]]
            close = pairs.matrix(g) <= eps
            np.fill_diagonal(close, True)
            if count is None:
                count = train_rows()
            free = np.ones(len(m), dtype=bool)
            for i in np.argsort(-count[m], kind="stable"):
                if not free[i]:
                    continue
                mem = np.flatnonzero(free & close[i])
                free[mem] = False
                if mem.size > 1:
                    out.append(m[mem])
        return out

    def keep_best(self, spn: SPN, clusters, count: np.ndarray, Rv) -> np.ndarray:
        """``rep`` redirecting every cluster to its member best on the validation rows
        that reached the cluster (most rows without validation data)."""
        rep = np.arange(spn.n_nodes, dtype=np.int64)
        Lv = None
        if Rv is not None and clusters:
            cols = np.unique(np.concatenate(clusters))
            Lv = self.valid_values(spn, cols)
        for c in clusters:
            best = c[int(np.argmax(count[c]))]
            if Rv is not None:
                rows = [_routing.rows_of(Rv, int(n)) for n in c]
                allr = np.unique(np.concatenate(rows))
                j = np.searchsorted(cols, c)
                if allr.size:
                    best = c[int(np.argmax(Lv[np.ix_(allr, j)].sum(axis=0)))]
                if self.est.local_check:    # a member joins only if the kept one fits its rows as well
                    jb = j[list(c).index(best)]
                    ok = np.array([Lv[r, jb].sum() >= Lv[r, jm].sum() - 1e-9 * abs(Lv[r, jm].sum())
                                   for r, jm in zip(rows, j)])
                    c = c[ok]
            rep[c] = best
        return rep

    def refit(self, spn: SPN, kept: list[int]):
        """The model with the kept sub-networks re-estimated, and the training routing the
        last closed-form refit used (None after soft EM)."""
        if not kept:
            return spn, None
        free = descendants(spn, kept)
        if self.est.refit == "em":
            if np.isinf(spn.log_likelihood(self.X, n_threads=self.nt)).any():
                # a kept member may give probability 0 to rows its partner explained;
                # one smoothed counting pass first, so EM can use every row
                spn = hard_refit(spn, self.X, free, alpha=self.alpha, max_iter=1, n_threads=self.nt,
                                 cache=self.cache)[0]
            return EM(init=spn, max_iter=int(self.est.max_iter), alpha=self.alpha, freeze=np.flatnonzero(~free),
                      n_threads=self.nt).fit(self.X, X_valid=self.Xv).spn_, None
        it = 1 if self.est.refit == "counts" else int(self.est.max_iter)
        return hard_refit(spn, self.X, free, alpha=self.alpha, max_iter=it, n_threads=self.nt, cache=self.cache)

    def chowliu_check(self, spn: SPN, kept: list[int], R=None) -> dict:
        """Kept nodes a Chow-Liu tree beats on their validation rows -> the tree (learned
        on the training rows the refit gave the node, ``R``, when given)."""
        cand = [n for n in kept if spn.kind[n] < 2 and spn.scope_ptr[n + 1] - spn.scope_ptr[n] >= 2
                and np.all(spn.cardinality[spn.node_scope(n)] > 0)]
        if self.Xv is None or not cand:
            return {}
        if R is None:
            R = _routing.route(spn, self.X, n_threads=self.nt, cache=self.cache)
        Rv = self.valid_routing(spn)
        Lv = self.valid_values(spn, cand)
        out = {}
        for j, n in enumerate(cand):
            rows, vrows = _routing.rows_of(R, n), _routing.rows_of(Rv, n)
            if rows.size < 2 or vrows.size == 0:
                continue
            s = spn.node_scope(n)
            fit = fit_chow_liu(self.X[np.ix_(rows, s)].astype(np.int64), spn.cardinality[s], alpha=self.alpha,
                               n_threads=1)
            parents, cpts = forest_to_tree(fit.parents, fit.cpts)
            leaf = ChowLiuLeaf(s.astype(np.int64), parents, cpts)
            # the one-leaf model, built without re-validating the fitted tree
            tree = SPN.from_arrays(np.full(1, CLTreeLeafType.code, np.uint8), np.zeros(2, np.int64),
                                   np.zeros(0, np.int64), np.zeros(0),
                                   {"cltree": CLTreeLeafType.from_nodes(np.zeros(1, np.int64), [leaf])},
                                   spn.cardinality, validate=False)
            if tree.log_likelihood(self.Xv[vrows]).sum() > Lv[vrows, j].sum():
                out[int(n)] = leaf
        return out

    def run(self, spn: SPN, eps: float, train_rows) -> tuple[SPN, int]:
        """One round: returns the new model and the number of nodes merged away;
        ``train_rows()`` returns the training routing of ``spn`` (used without validation
        data)."""
        cache: list = []

        def counts():       # validation routing when there is validation data (cheaper)
            if not cache:
                if self.Xv is not None:
                    cache.append(self.valid_routing(spn))
                    cache.append(np.asarray(cache[0].sum(axis=0)).ravel())
                else:
                    cache.append(None)
                    cache.append(np.asarray(train_rows().sum(axis=0)).ravel())
            return cache[1]
        clusters = self.clusters(spn, eps, counts)
        if not clusters:
            return spn, 0
        rep = self.keep_best(spn, clusters, counts(), cache[0])
        moved = np.flatnonzero(rep != np.arange(spn.n_nodes))
        if not moved.size:
            return spn, 0
        obs = _routing.observed_sums(spn)
        made: list[int] = []
        new, keep = rebuild(spn, rep, obs_var=obs, learner=spn.learner, stats={}, created=made)
        kept = sorted({keep[int(k)] for k in np.unique(rep[moved]) if int(k) in keep} | set(made))
        new, R = self.refit(new, kept)
        if self.est.chowliu_check:
            repl = self.chowliu_check(new, kept, R)
            if repl:
                new, _ = rebuild(new, np.arange(new.n_nodes), replace=repl, learner=new.learner, stats={})
        return new, int(moved.size)


def identical_merge(spn: SPN) -> SPN:
    """The model with structurally identical sub-networks of equal parameters shared and
    the exact Fig. 3 simplifications applied: the same distribution, fewer nodes."""
    while True:
        rep = hash_cons(spn)
        if np.all(rep == np.arange(spn.n_nodes)):
            return spn
        spn, _ = rebuild(spn, rep, obs_var=_routing.observed_sums(spn), learner=spn.learner, stats={})


def single_root(spn: SPN) -> SPN:
    """A mixture of roots as one latent sum root (same distribution); others unchanged."""
    if spn.combine == "single":
        return spn
    if spn.combine == "independent":
        raise StructureError("merging needs a single-root or mixture model, not combine='independent'")
    roots = spn.to_nodes()
    return _compile(Sum(roots, spn.root_weights), n_vars=spn.n_vars, cardinality=spn.cardinality,
                    var_names=spn.var_names)


def _epsilon_ok(v) -> bool:
    if isinstance(v, (list, tuple, np.ndarray)):
        return len(v) > 0 and all(_epsilon_ok(x) for x in v)
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
    chowliu_check : replace a merged sub-network by a Chow-Liu tree when the tree is
        better on the validation rows reaching it.
    local_check : with validation data, a cluster member is merged only when the kept
        member's log-likelihood on the member's validation rows is at least its own (the
        paper's greedy validation strategy, evaluated locally). Off by default: with many
        small per-node decisions it fits the validation set (measured on jester: validation
        +0.16, test -0.12 nats).
    routing : None (rows are routed by the model, see :mod:`spnc.learn.routing`) or the
        routing a learner recorded for ``init``: a 0/1 matrix (n_train, init.n_nodes),
        dense or scipy.sparse; it orders the first round's candidates.
    verbose : one line per threshold and round when > 0.
    n_threads : threads of the inference kernels (None: automatic).

    Attributes after :meth:`fit`: ``spn_``, ``epsilon_`` (chosen threshold, None when only
    identical sub-networks were merged), ``history_`` (per threshold visited: validation LL,
    nodes, parameters, merges, seconds), ``n_params_before_``, ``n_params_after_`` (sum
    weights, all parameters), ``merge_seconds_``.

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
        "init": [Instance(SPN, name="a compiled spnc.SPN")],
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
        "verbose": [Interval(int, 0), BOOL],
        "n_threads": [N_THREADS, None],
    }

    def __init__(self, init: SPN | None = None, epsilon=(1e-3, 1e-2, 0.1, 0.2, 0.4), distance: str = "manhattan",
                 refit: str = "counts", max_iter: int = 20, alpha: float | None = None, max_rounds: int = 3,
                 patience: int | None = None, chowliu_check: bool = True, local_check: bool = False, routing=None, verbose: int = 0,
                 n_threads: int | None = None):
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
        self.verbose = verbose
        self.n_threads = n_threads

    def fit(self, X, y=None, X_valid=None) -> "Merge":
        """Merge ``init`` using the training rows ``X`` (re-estimation) and ``X_valid``
        (choices: kept member, Chow-Liu check, threshold). Without ``X_valid`` a single
        ``epsilon`` is required and the member with most training rows is kept."""
        self._no_target(y)
        self._validate_params()
        t0 = time.perf_counter()
        init = self.init
        X = init._check_X(X)
        if X.shape[0] == 0:
            raise DataError("X has no rows")
        if np.isnan(X).any():
            raise DataError("X must be complete (no NaN): merging re-estimates parameters from it")
        Xv = None if X_valid is None else init._check_X(X_valid, "X_valid")
        grid = list(np.atleast_1d(np.asarray(self.epsilon, dtype=np.float64)))
        if Xv is None and len(grid) > 1:
            raise DataError("choosing epsilon from a grid needs X_valid; pass X_valid or one epsilon")
        alpha = self.alpha
        if alpha is None:
            alpha = float((init.learner.get("params") or {}).get("alpha", 0.1) or 0.1)
        base = identical_merge(single_root(init))
        R0 = None
        if self.routing is not None:
            R0 = _routing.as_routing(self.routing, X.shape[0], init.n_nodes)
            if base.n_nodes != init.n_nodes or init.combine != "single":
                R0 = None   # ids changed by identical merging: route by the model
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
                                   (lambda m=model, g=given: g if g is not None else
                                    _routing.route(m, X, n_threads=self.n_threads, cache=rnd.cache)))
                if k:
                    model = identical_merge(model)
                merged += k
                if self.verbose:
                    print(f"[merge] epsilon={eps:g} round {r + 1}: {k} merged, {model.n_nodes} nodes "
                          f"({time.perf_counter() - t1:.2f} s)")
                if k == 0:
                    break
            v = valid_ll(model) if merged else self.history_[-1]["valid_ll"]
            self.history_.append({"epsilon": float(eps), "valid_ll": v, "nodes": model.n_nodes,
                                  "params": n_parameters(model)[0], "merged": merged,
                                  "seconds": time.perf_counter() - t1})
            if Xv is None or v > best_v:
                best, best_v, best_eps = model, v, float(eps)
            worse = worse + 1 if Xv is not None and v < best_v else 0
            if self.patience is not None and worse >= self.patience:
                break
        self.merge_seconds_ = time.perf_counter() - t0
        self.epsilon_ = best_eps
        self.n_params_before_ = n_parameters(init)
        self.n_params_after_ = n_parameters(best)
        params = {k: v for k, v in self.get_params().items() if k not in ("init", "routing")}
        params["epsilon"] = [float(e) for e in grid]
        params["routing"] = "model" if R0 is None else "given"
        params["alpha"] = float(alpha)
        learner = {"name": "merge", "version": "1", "params": params,
                   "init_learner": str(init.learner.get("name", "unknown")),
                   "epsilon": best_eps, "nodes_before": int(init.n_nodes), "nodes_after": int(best.n_nodes),
                   "params_before": list(self.n_params_before_), "params_after": list(self.n_params_after_),
                   "merge_seconds": float(self.merge_seconds_)}
        self.spn_ = SPN.from_arrays(best.kind, best.child_ptr, best.child, best.weight, best.leaf_tables,
                                    best.cardinality, var_type=best.var_type, var_names=best.var_names,
                                    roots=best.roots, root_weights=best.root_weights, combine=best.combine,
                                    learner=learner)
        return self
