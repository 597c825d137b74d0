"""One round of :class:`spnc.learn.Merge` on one model: candidate search, merging, refit
and the Chow-Liu sanity check (see :mod:`spnc.learn.merge` for the algorithm). A round
keeps, between its passes, the leaf values of the training and validation rows and the
validation routing of the last model it saw."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..chowliu import fit_chow_liu, forest_to_tree
from .._kinds import MARGINAL, MAX
from .._threads import effective_n_threads
from ..graph import SPN
from ..leaves.cltree import ChowLiuLeaf, CLTreeLeafType
from . import routing as _routing
from ._carry import Routing, subnetwork
from ._graphedit import descendants, rebuild, replace_by_leaves
from ._leafcache import LeafCache, leaf_values
from ._nodevalues import NodeValues
from ._redirect import redirect
from ._refit import hard_refit, local_refit
from ._routing import sums_over_nodes, union_runs
from ._similarity import Pairs, indicator_evidence, scope_marginals
from .em import EM

if TYPE_CHECKING:
    from .merge import Merge

#: bytes of leaf values kept on the training rows (routing and refits pass over them most),
#: and on the validation rows and the indicator evidence, each
TRAIN_LEAF_BYTES, OTHER_LEAF_BYTES = 1 << 30, 256 << 20
#: most leaves whose validation values are read without a sweep (beyond, numpy's gathers
#: of leaves x rows cost more than a sweep: 1,024 Bernoulli leaves on 1,000 rows 8.9 ms,
#: against 2.1 ms; 64 of them 0.27 ms, against 0.73 ms)
LEAF_VALUES_MAX = 128
#: leaf-matrix budget per chunk of the one route of the training rows: its values are read
#: once, so a chunk whose matrix stays in the caches beats the sweeps' default (jester's
#: 512 Chow-Liu leaves on 9,000 rows: 33 ms with 2M values, 25 ms with 512k)
TRAIN_ROUTE_VALUES = 1 << 19



class _Round:
    """Candidate search, merging and refit of one round on model ``spn``."""

    def __init__(self, est: Merge, X: np.ndarray, Xv: np.ndarray | None, alpha: float):
        self.est, self.X, self.Xv, self.alpha = est, X, Xv, alpha
        self.nt = est.n_threads
        # leaf values kept between the passes over the same rows (most leaves never change)
        nt = effective_n_threads(est.n_threads, 1 << 30)
        seen = est.init          # Merge.fit has checked X and Xv against it
        self.cache = LeafCache(X, MAX, max_bytes=TRAIN_LEAF_BYTES, n_threads=nt, checked_by=seen)
        self.vcache0 = None if Xv is None else LeafCache(Xv, MARGINAL, max_bytes=OTHER_LEAF_BYTES, n_threads=nt,
                                                         checked_by=seen)
        self.vcache = self.vcache0 if Xv is None or self.vcache0.complete else \
            LeafCache(Xv, MAX, max_bytes=OTHER_LEAF_BYTES, n_threads=nt, checked_by=seen)
        self.evidence, self.ecache, self.nt1 = None, None, nt     # indicator evidence of the marginals
        self.estore = None              # every node's values on the evidence, kept (NodeValues)
        self._dist = None
        self._vroute = (None, None)     # (model, its validation routing)
        self._troute = (None, None)     # (model, its training routing, routed or carried over)
        self.made_from = None           # (model, old -> new node) of the last round that merged

    def valid_routing(self, spn: SPN):
        """The validation rows' routing through ``spn``, kept for the last model asked
        about (a round that merges nothing, and the next threshold, ask again)."""
        if self._vroute[0] is not spn:
            self._vroute = (spn, _routing.route(spn, self.Xv, n_threads=self.nt, cache=self.vcache))
        return self._vroute[1]

    def train_routing(self, spn: SPN):
        """The training rows' routing of ``spn``: carried over from the model it was made
        from when the round made it (the rows that reached each node, see :meth:`refit`),
        else routed."""
        if self._troute[0] is not spn:
            # routed once per fit when carried over: keeping its leaf values would not pay
            cache = self.cache if self.est.refit_rows == "global" else None
            self._troute = (spn, Routing.of(_routing.route(spn, self.X, n_threads=self.nt, cache=cache,
                                                            chunk_values=TRAIN_ROUTE_VALUES)))
        return self._troute[1]

    def carry(self, old: SPN, new: SPN, target: np.ndarray | None) -> None:
        """Carry the training routing of ``old`` over to ``new``, made from it with old node
        ``n`` becoming ``target[n]`` (-1: dropped; None: unknown, routed when asked)."""
        if self._troute[0] is old and target is not None:
            self._troute = (new, self._troute[1].carry(target, new.n_nodes))
        self.link(old, new, target)

    def link(self, old: SPN, new: SPN, target: np.ndarray | None) -> None:
        """Record that ``new`` was made from ``old`` (as in :meth:`carry`) for the kept node
        values of the marginals (:class:`._nodevalues.NodeValues`)."""
        if self.estore is not None:
            self.estore.link(old, new, target)

    def valid_values(self, spn: SPN, nodes) -> np.ndarray:
        """``log S_n`` of the validation rows for ``nodes``, shape (len(nodes), n_rows).
        (Not kept: the callers ask for different nodes, and every node's values at once
        cost more than the passes they save, measured on O-SPNs and L-SPNs alike; so did
        :class:`._nodevalues.NodeValues` on the validation rows, jester's L-SPNs 6 and 36
        ms a fit slower.) Nodes over a small part of the model are evaluated on that part
        alone (:func:`._carry.subnetwork`: the same values), leaves by
        :func:`._leafcache.leaf_values`."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if 0 < nodes.size <= LEAF_VALUES_MAX and np.all(spn.kind[nodes] >= 2):
            V = leaf_values(spn, nodes, self.vcache0)
            if V is not None:
                return V
        mark = descendants(spn, nodes)
        if nodes.size and 2 * np.count_nonzero(mark) < spn.n_nodes:
            sub, F, _ = subnetwork(spn, nodes, mark)
            new_id = np.cumsum(mark) - 1
            return _routing.node_values(sub, self.Xv, new_id[nodes], n_threads=self.nt, cache=self.vcache0,
                                        by_node=True)
        return _routing.node_values(spn, self.Xv, nodes, n_threads=self.nt, cache=self.vcache0, by_node=True)

    def distances(self, spn: SPN) -> Pairs:
        """The candidate pairs of ``spn`` and their mean-field distances (:class:`Pairs`).
        Kept for the last model: a threshold that merged nothing hands the next one the same
        model."""
        if self._dist is not None and self._dist[0] is spn:
            return self._dist[1]
        if self.evidence is None:
            self.evidence = indicator_evidence(spn)
            self.ecache = LeafCache(self.evidence[0], MARGINAL, max_bytes=OTHER_LEAF_BYTES, n_threads=self.nt1,
                                    evidence_off=self.evidence[1])
            self.estore = NodeValues(self.ecache, n_threads=self.nt1, max_bytes=OTHER_LEAF_BYTES)
        P, off = scope_marginals(spn, self.nt, self.evidence, self.ecache, self.estore)
        skip = np.zeros(spn.n_nodes, dtype=bool)
        ind = spn.leaf_tables.get("indicator")
        if ind is not None:
            skip[ind.node] = True       # structure, not parameters
        out = Pairs(spn, P, off, self.est.distance, skip, None if self._dist is None else self._dist[1].memo)
        self._dist = (spn, out)
        return out

    def clusters(self, spn: SPN, eps: float, train_rows) -> list[np.ndarray]:
        """Clusters of nodes to merge; ``train_rows()`` gives the rows reaching each node
        (called only when some pair is within ``eps``), which orders the leaders."""
        out: list = []
        pairs = self.distances(spn)
        groups = np.flatnonzero(pairs.gmin <= eps)
        if not groups.size:
            return out
        count = train_rows()
        one_i, one_j = pairs.single_pairs(groups, eps)
        single = groups[one_i >= 0]
        if single.size:         # the memory check of the largest matrix those groups skip
            size = pairs.gptr[single + 1] - pairs.gptr[single]
            g = int(single[np.argmax(size)])
            pairs._budget(17.0 * float(size.max()) ** 2, g, "a matrix of its close pairs")
        for g, i, j in zip(groups.tolist(), one_i.tolist(), one_j.tolist()):
            m = pairs.members[pairs.gptr[g]:pairs.gptr[g + 1]]
            if i >= 0:          # one close pair: its two members are the group's one cluster
                out.append(m[[i, j]])
                continue
            close = pairs.close(g, eps)
            # a member close to no other leads a cluster of itself: no one else takes it
            free = close.sum(axis=1) > 1
            _leaders(m, close, free, np.argsort(-count[m], kind="stable"), out)
        return out

    def keep_best(self, spn: SPN, clusters, count: np.ndarray, Rv) -> np.ndarray:
        """``rep`` redirecting every cluster to its member best on the validation rows
        that reached the cluster (most rows without validation data, or when none reached
        it); with ``local_check`` a member joins only if the kept one fits the member's own
        validation rows as well. All clusters at once (:func:`._routing.sums_over_nodes`)."""
        rep = np.arange(spn.n_nodes, dtype=np.int64)
        if not clusters:
            return rep
        M = np.concatenate(clusters)
        size = np.array([len(c) for c in clusters])
        g = np.repeat(np.arange(len(clusters)), size)
        starts = np.concatenate([[0], np.cumsum(size)[:-1]])
        key = count[M].astype(np.float64)
        ok = np.ones(len(M), dtype=bool)
        if Rv is not None:
            cols = np.unique(M)
            j = np.searchsorted(cols, M)
            Lv = self.valid_values(spn, cols)
            # each cluster's rows: the union of its members' rows, increasing (one bit set)
            ptr, idx = _routing.rows_of_many(Rv, M)
            lens, union = union_runs(ptr[np.append(starts, len(M))], idx, Rv.shape[0])
            uptr = np.zeros(len(clusters) + 1, dtype=np.int64)
            np.cumsum(lens, out=uptr[1:])
            tot = sums_over_nodes(Lv, uptr[g], uptr[g + 1], union, j)
            key = np.where((lens > 0)[g], tot, key)
        best = _first_max(key, starts, g)
        if Rv is not None and self.est.local_check:
            Rm = Rv[:, M]
            a, b, rows = Rm.indptr[:-1].astype(np.int64), Rm.indptr[1:].astype(np.int64), Rm.indices.astype(np.int32)
            mine = sums_over_nodes(Lv, a, b, rows, j)
            kept = sums_over_nodes(Lv, a, b, rows, j[best][g])
            ok = kept >= mine - 1e-9 * np.abs(mine)
        rep[M[ok]] = M[best[g[ok]]]
        return rep

    def refit(self, spn: SPN, kept: list[int], D=None):
        """The model with the kept sub-networks re-estimated, and the training routing the
        last closed-form refit used (None after soft EM). ``D``: the training routing
        carried over from the model ``spn`` was made from (``refit_rows="local"``): each kept
        sub-network is re-estimated on the rows that reached it there, routed below it
        alone (:func:`._refit.local_refit`); else every row is routed through ``spn``."""
        if not kept:
            return spn, D
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
        if D is not None:
            deg = np.diff(spn.child_ptr)
            parent = np.repeat(np.arange(spn.n_nodes), deg)
            head = np.zeros(spn.n_nodes, dtype=bool)
            head[kept] = True
            head[spn.child[free[spn.child] & ~free[parent]]] = True      # reached from outside too
            head[spn.roots] = True
            return local_refit(spn, self.X, D, free, np.flatnonzero(head & free), alpha=self.alpha, max_iter=it,
                               n_threads=self.nt, codes=self.cache.codes, codes_by_var=self.cache.codes_by_var)
        return hard_refit(spn, self.X, free, alpha=self.alpha, max_iter=it, n_threads=self.nt, cache=self.cache)

    def chowliu_check(self, spn: SPN, kept: list[int], R=None) -> dict:
        """Kept nodes a Chow-Liu tree fits at least as well on their validation rows (up to
        a relative 1e-9: rounding must not decide a tie, and a tie goes to the one leaf)
        -> the tree, learned on the training rows the refit gave the node (``R``, when
        given)."""
        cand = [n for n in kept if spn.kind[n] < 2 and spn.scope_ptr[n + 1] - spn.scope_ptr[n] >= 2
                and np.all(spn.cardinality[spn.node_scope(n)] > 0)]
        if self.Xv is None or not cand:
            return {}
        if R is None:
            R = _routing.route(spn, self.X, n_threads=self.nt, cache=self.cache)
        Rv = self.valid_routing(spn)
        Lv = self.valid_values(spn, cand)
        made: dict[int, tuple] = {}
        for j, n in enumerate(cand):
            rows, vrows = _routing.rows_of(R, n), _routing.rows_of(Rv, n)
            if rows.size < 2 or vrows.size == 0:
                continue
            s = spn.node_scope(n)
            fit = fit_chow_liu(self.cache.codes[np.ix_(rows, s)], spn.cardinality[s], alpha=self.alpha, n_threads=1)
            parents, cpts = forest_to_tree(fit.parents, fit.cpts)
            made[int(n)] = (j, vrows, ChowLiuLeaf(s.astype(np.int64), parents, cpts))
        if not made:
            return {}
        # the trees in one pass over the validation rows of their nodes; each is judged
        # on its node's rows
        table = CLTreeLeafType.from_nodes(np.arange(len(made), dtype=np.int64), [m[2] for m in made.values()])
        union = np.unique(np.concatenate([m[1] for m in made.values()]))
        V = self.vcache0.evaluate(table, union)
        out = {}
        for i, (n, (j, vrows, leaf)) in enumerate(made.items()):
            tree, node = V[i, np.searchsorted(union, vrows)].sum(), Lv[j, vrows].sum()
            if tree >= node - 1e-9 * abs(node):        # equal up to rounding: the one leaf
                out[n] = leaf
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
                    R = train_rows()
                    cache.append(R.counts() if isinstance(R, Routing) else np.asarray(R.sum(axis=0)).ravel())
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
        new, keep = redirect(spn, rep, obs_var=obs, learner=spn.learner, stats={}, created=made)
        kept = sorted({keep[int(k)] for k in np.unique(rep[moved]) if int(k) in keep} | set(made))
        D = None
        target = None if made else redirect_target(keep, rep, moved, spn.n_nodes)
        if self.est.refit_rows == "local" and self.est.refit != "em" and target is not None:
            D = self.train_routing(spn).carry(target, new.n_nodes)
        new, R = self.refit(new, kept, D)
        if self.est.chowliu_check:
            repl = self.chowliu_check(new, kept, R)
            if repl:
                ids: list = []
                fast = replace_by_leaves(new, repl, learner=new.learner, ids=ids)
                if fast is None:
                    new, R = rebuild(new, np.arange(new.n_nodes), replace=repl, learner=new.learner, stats={})[0], None
                    target = None
                else:
                    if isinstance(R, Routing):
                        R = R.carry(ids[0], fast.n_nodes)
                    if target is not None:
                        target = np.where(target >= 0, ids[0][np.maximum(target, 0)], -1)
                    new = fast
        if D is not None and R is not None:
            self._troute = (new, R)
        self.made_from = None if target is None else (spn, target)
        self.link(spn, new, target)
        return new, int(moved.size)


def redirect_target(keep: dict, rep: np.ndarray, moved: np.ndarray, n_nodes: int) -> np.ndarray:
    """Old node -> new node after :func:`._redirect.redirect` (``keep`` its map of kept
    nodes; a redirected node becomes what its representative became; -1: dropped)."""
    target = np.full(n_nodes, -1, dtype=np.int64)
    if keep:
        target[np.fromiter(keep, dtype=np.int64, count=len(keep))] = np.fromiter(keep.values(), dtype=np.int64,
                                                                                 count=len(keep))
    target[moved] = target[rep[moved]]
    return target


def _leaders(m: np.ndarray, close: np.ndarray, free: np.ndarray, order: np.ndarray, out: list) -> None:
    """:meth:`_Round.clusters`' leader pass over one group, with each row of ``close``
    and the free members as the bits of one Python integer: the same clusters as the
    pass over the boolean arrays."""
    if len(m) <= 64:
        bit = np.left_shift(np.uint64(1), np.arange(len(m), dtype=np.uint64))
        row = np.bitwise_or.reduce(np.where(close, bit, np.uint64(0)), axis=1).tolist().__getitem__
    else:                                # rows made as leaders reach them (most never do)
        packed = np.packbits(close, axis=1, bitorder="little")

        def row(i: int) -> int:
            return int.from_bytes(packed[i].tobytes(), "little")
    left = int.from_bytes(np.packbits(free, bitorder="little").tobytes(), "little")
    for i in order.tolist():
        if not left >> i & 1:
            continue
        mem = left & row(i)
        left &= ~mem
        if mem & (mem - 1):              # two members or more, in increasing order
            idx = []
            while mem:
                low = mem & -mem
                idx.append(low.bit_length() - 1)
                mem ^= low
            out.append(m[idx])


def _first_max(key: np.ndarray, starts: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Per group of consecutive entries (``g``, starting at ``starts``), the index of its
    first maximum of ``key``."""
    top = key == np.maximum.reduceat(key, starts)[g]
    idx = np.flatnonzero(top)
    return idx[np.unique(g[idx], return_index=True)[1]]
