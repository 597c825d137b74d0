"""Structure of Prometheus (Jaini, Ghose & Poupart, Alg. 1): cluster the rows; per cluster,
the maximum spanning tree of the variables' affinity graph, severed weakest edge first,
gives a chain of partitions, each a product node; all products of all clusters go under
one sum node (the clustering sum and the decomposition sum collapsed into one); every
block of a cluster's chain is built once and shared by the products that contain it.

The chain is read off Kruskal's algorithm run strongest edge first: the partition after
severing the ``j`` weakest tree edges is the union-find state after the first ``d - 1 - j``
merges, so the ``2d - 1`` possible blocks and the lifetime of each come out of one pass
(:func:`spnc.learn._prometheus.spanning_chain`). The sampled variant gives every variable
``ceil(log2 d)`` random partners, so the graph has ``O(d log d)`` edges and sorting them
dominates: ``O(d (log d)^2)``.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

# ---- private kernels and LearnSPN steps: the one place to repoint when they move -------
from . import _prometheus as _PK
from ..chowliu import mutual_information
from .structure import ChowLiuLeaves, Context, Part, Slice, UnivariateLeaves
# ----------------------------------------------------------------------------------------
from ..errors import ParameterError
from ..leaves import MultivariateGaussian
from ..leaves.mvgaussian import floored_cov
from ..nodes import Node, Product, Sum


@dataclass
class BuildStats:
    """Per sum layer (depth): nodes and edges created there, and the largest
    ``product edges / s^2`` of one call (``s`` its number of variables)."""

    layer_nodes: list = field(default_factory=list)
    layer_edges: list = field(default_factory=list)
    calls: int = 0
    max_call_ratio: float = 0.0
    sampled_calls: int = 0

    def add(self, depth: int, nodes: int, edges: int) -> None:
        while len(self.layer_nodes) <= depth:
            self.layer_nodes.append(0)
            self.layer_edges.append(0)
        self.layer_nodes[depth] += nodes
        self.layer_edges[depth] += edges


@dataclass
class Settings:
    affinity: str                   # "correlation" or "mi"
    max_products: int | None        # per cluster chain; None: all d - 1
    leaf_vars: int                  # scopes this small end in one multivariate leaf (if > 1)
    base_leaves: str                # "univariate" or "multivariate"
    min_instances: int
    max_depth: int | None
    sample_above: int | None        # sampled affinity graph above this many variables
    whole_scope: bool = False       # each cluster's unsevered scope recurses too
    share: str = "model"            # scope table: "model" (one node per scope) or "cluster"


def sampled_pairs(s: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``ceil(log2 s)`` random partners per variable, as unique pairs ``u < v``."""
    q = max(1, math.ceil(math.log2(s)))
    u = np.repeat(np.arange(s, dtype=np.int64), q)
    v = rng.integers(0, s - 1, size=u.size)
    v += v >= u
    key = np.unique(np.minimum(u, v) * s + np.maximum(u, v))
    return key // s, key % s


def _standardised_T(D: np.ndarray) -> np.ndarray:
    """Columns centred and scaled to unit variance, transposed (constant columns: 0)."""
    D = np.asarray(D, dtype=np.float64)
    Z = D - D.mean(axis=0)
    sd = np.sqrt(np.einsum("ij,ij->j", Z, Z) / max(Z.shape[0], 1))
    # constant: spread at the rounding level of the column's own magnitude (any scale)
    ok = sd > 1e-12 * np.abs(D).max(axis=0, initial=0.0)
    Z[:, ok] /= sd[ok]
    Z[:, ~ok] = 0.0
    return np.ascontiguousarray(Z.T)


def affinity_edges(ctx: Context, sl: Slice, kind: str, rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray]:
    """Edges ``(u, v)`` (positions in the slice) of the affinity graph, strongest first;
    ties keep a fixed order, so equal seeds give equal chains. With ``rng`` the graph is
    the sampled one (pairs drawn from ``rng``)."""
    s = sl.vars.size
    D = ctx.data(sl)
    if rng is not None:
        u, v = sampled_pairs(s, rng)
        if kind == "mi":
            XT = np.ascontiguousarray(D.T)
            w = _PK.pair_mutual_information(XT, ctx.card[sl.vars].astype(np.int64), u, v, ctx.alpha, ctx.n_threads)
        else:
            w = _PK.pair_correlation(_standardised_T(D), u, v, ctx.n_threads)
    else:
        if kind == "mi":
            M = mutual_information(D, ctx.card[sl.vars], None, ctx.alpha, ctx.n_threads)[0]
        else:
            ZT = _standardised_T(D)
            M = np.abs(ZT @ ZT.T) / max(D.shape[0], 1)
        u, v = np.triu_indices(s, 1)
        w = M[u, v]
    order = np.argsort(-w, kind="stable")
    return np.ascontiguousarray(u[order], dtype=np.int64), np.ascontiguousarray(v[order], dtype=np.int64)


def chain_partitions(s: int, eu: np.ndarray, ev: np.ndarray, max_products: int | None):
    """The partitions of the severing chain: ``(blocks, members)`` where ``blocks`` lists,
    per kept partition, its block ids, and ``members(b)`` gives a block's positions.
    A forest of ``c`` trees (a sparse graph) starts at ``c`` blocks."""
    _, born, died, order, start, size = _PK.spanning_chain(s, eu, ev)
    merges = born.size - s
    n_blocks = np.arange(max(2, s - merges), s + 1)
    if max_products is not None and n_blocks.size > max_products:
        pick = np.unique(np.rint(np.geomspace(n_blocks[0], s, max_products)).astype(np.int64))
        n_blocks = pick
    parts = []
    for b in n_blocks:
        t = s - int(b)                       # merges done
        parts.append(np.flatnonzero((born <= t) & (t < died)))
    return parts, (lambda blk: order[start[blk]:start[blk] + size[blk]])


class Builder:
    """Runs Alg. 1 breadth first over sum layers with a queue (no recursion limit).
    ``splitter`` clusters rows (an :class:`~spnc.learn.structure.InstanceSplitter`).

    Scope table: with ``share="model"`` a scope that recurses is one sum node for the whole
    model; all requests for it from one layer are collected before it is learned, on the
    union of the requesting clusters' rows, and later layers reuse it. With
    ``share="cluster"`` the table lives in one cluster's chain (learned on that cluster's
    rows). Leaves are always fitted on the requesting cluster's rows."""

    def __init__(self, ctx: Context, splitter, cfg: Settings):
        self.ctx, self.splitter, self.cfg = ctx, splitter, cfg
        self.stats = BuildStats()
        self._uni = UnivariateLeaves()
        self._cl = ChowLiuLeaves()
        self._table: dict[bytes, Sum] = {}
        self._pending: dict[int, list] = {}         # id(sum) -> row arrays not yet learned
        # pairs come from their own stream: both variants cluster alike for one seed
        self._pair_rng = np.random.default_rng(ctx.rng.bit_generator.seed_seq.spawn(1)[0])

    # ---------------------------------------------------------------- leaves
    def _univariate(self, rows: np.ndarray, vars: np.ndarray) -> list[Node]:
        node = self._uni.fit(self.ctx, Slice(rows, vars))
        return list(node.children) if isinstance(node, Product) else [node]

    def _multivariate(self, rows: np.ndarray, vars: np.ndarray) -> Node:
        if vars.size == 1:
            return self._univariate(rows, vars)[0]
        if not self.ctx.continuous:
            return self._cl.fit(self.ctx, Slice(rows, vars))
        D = self.ctx.X[np.ix_(rows, vars)]
        cov = np.atleast_2d(np.cov(D, rowvar=False, bias=True)) if rows.size > 1 else np.zeros((vars.size,) * 2)
        return MultivariateGaussian(vars, D.mean(axis=0), floored_cov(cov, self.ctx.min_std ** 2))

    def _base(self, rows: np.ndarray, vars: np.ndarray) -> Node:
        if self.cfg.base_leaves == "multivariate":
            return self._multivariate(rows, vars)
        leaves = self._univariate(rows, vars)
        return leaves[0] if len(leaves) == 1 else Product(leaves)

    # ---------------------------------------------------------------- build
    def build(self) -> Node:
        X = self.ctx.X
        rows0 = np.arange(X.shape[0], dtype=np.int64)
        vars0 = np.arange(X.shape[1], dtype=np.int64)
        if vars0.size == 1 or rows0.size < self.cfg.min_instances or self.cfg.max_depth == 0:
            return self._base(rows0, vars0)
        root = Sum([])
        queue = deque([(vars0, 0, root)])
        self._pending[id(root)] = [rows0]
        while queue:
            vars, depth, node = queue.popleft()
            got = self._pending.pop(id(node))
            rows = got[0] if len(got) == 1 else np.unique(np.concatenate(got))
            self._expand(rows, vars, depth, node, queue)
        return root

    def _request(self, rows, vars, depth, queue, shared: bool) -> Sum:
        """The sum node learning ``vars`` one layer down, asked for by a cluster's rows."""
        key = vars.tobytes()
        node = self._table.get(key) if shared else None
        if node is None:
            node = Sum([])
            self._pending[id(node)] = []
            queue.append((vars, depth + 1, node))
            if shared:
                self._table[key] = node
        if id(node) in self._pending:                   # not learned yet: add these rows
            self._pending[id(node)].append(rows)
        return node

    def _expand(self, rows, vars, depth, node: Sum, queue) -> None:
        cfg, ctx = self.cfg, self.ctx
        s = vars.size
        parts = self.splitter.split(ctx, Slice(rows, vars, depth))
        if not parts:
            parts = [Part(rows, vars, 1.0)]
        if any(p.indicator is not None or p.node is not None for p in parts):
            raise ParameterError("clustering", "Prometheus: clustering must split rows only; "
                                               f"{type(self.splitter).__name__} gave indicator or finished parts")
        sampled = cfg.sample_above is not None and s > cfg.sample_above
        self.stats.calls += 1
        self.stats.sampled_calls += int(sampled)
        children, weights = [], []
        n_nodes, prod_edges = 1, 0
        for part in parts:
            eu, ev = affinity_edges(ctx, Slice(part.rows, vars, depth), cfg.affinity,
                                    self._pair_rng if sampled else None)
            partitions, members = chain_partitions(s, eu, ev, cfg.max_products)
            uni: list = []
            made: dict[int, list[Node]] = {}        # block id -> its node(s), built once

            def univariate(pos, rows=part.rows, uni=uni):
                if not uni:
                    uni.extend(self._univariate(rows, vars))
                return [uni[int(p)] for p in pos]
            for blocks in partitions:
                prod = []
                for b in blocks:
                    b = int(b)
                    if b not in made:
                        pos = members(b)
                        pos = np.sort(pos)
                        made[b] = univariate(pos) if pos.size == 1 else \
                            self._block(part.rows, vars[pos], pos, depth, queue, univariate)
                    prod.extend(made[b])
                children.append(Product(prod))
                prod_edges += len(prod)
            n_chain = len(partitions)
            if cfg.whole_scope and part.rows.size >= cfg.min_instances and part.rows.size < rows.size and \
                    (cfg.max_depth is None or depth + 1 < cfg.max_depth):
                children.append(self._request(part.rows, vars, depth, queue, shared=False))
                n_chain += 1
            weights.extend([part.weight / n_chain] * n_chain)
            leaves = {id(x) for x in uni} | {id(x) for v in made.values() for x in v if not isinstance(x, Sum)}
            n_nodes += len(partitions) + len(leaves)
        node.children = children
        node.weights = np.asarray(weights, dtype=np.float64)
        n_edges = prod_edges + len(children)
        self.stats.add(depth, n_nodes, n_edges)
        self.stats.max_call_ratio = max(self.stats.max_call_ratio, prod_edges / float(s * s))

    def _block(self, rows, vars, pos, depth, queue, univariate) -> list[Node]:
        """A block of variables as factors of a product: a multivariate leaf, base
        factors (the cluster's univariate leaves, shared), or the scope's sum node, learned
        one layer down."""
        cfg = self.cfg
        if cfg.leaf_vars > 1 and vars.size <= cfg.leaf_vars:
            return [self._multivariate(rows, vars)]
        if rows.size < cfg.min_instances or (cfg.max_depth is not None and depth + 1 >= cfg.max_depth):
            if cfg.base_leaves == "multivariate":
                return [self._multivariate(rows, vars)]
            return univariate(pos)
        return [self._request(rows, vars, depth, queue, shared=cfg.share == "model")]
