"""Random DAG-shaped SPNs over every leaf type, and a plain-Python log-domain reference.

The reference evaluates the construction objects row by row: each leaf is marginalised
(or maximised) over its own missing variables in closed form or by enumeration, then sums
and products combine the children, which is exact for a complete and decomposable model.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

import spnc
from spnc.nodes import Product, Sum

NEG = -math.inf


def _lse(vals):
    m = max(vals)
    if m == NEG:
        return NEG
    return m + math.log(sum(math.exp(v - m) for v in vals))


def _log(p: float) -> float:
    return math.log(p) if p > 0 else NEG


def _mvn(x, mean, cov, vars_, mode):
    xs = np.array([x[v] for v in vars_])
    o = ~np.isnan(xs)
    val = 0.0
    if o.any():
        d = xs[o] - mean[o]
        S = cov[np.ix_(o, o)]
        _, logdet = np.linalg.slogdet(S)
        val = -0.5 * (o.sum() * math.log(2 * math.pi) + logdet + d @ np.linalg.solve(S, d))
    if mode == "max" and (~o).any():
        m = ~o
        C = cov[np.ix_(m, m)]
        if o.any():
            C = C - cov[np.ix_(m, o)] @ np.linalg.solve(cov[np.ix_(o, o)], cov[np.ix_(o, m)])
        val += -0.5 * (m.sum() * math.log(2 * math.pi) + np.linalg.slogdet(C)[1])
    return float(val)


def _cltree(x, leaf, mode):
    vars_ = [int(v) for v in leaf.vars]
    choices = [range(c.shape[1]) if np.isnan(x[v]) else [int(x[v])] for v, c in zip(vars_, leaf.cpts)]
    vals = []
    for s in itertools.product(*choices):
        lp = 0.0
        for j, p in enumerate(leaf.parents):
            lp += _log(leaf.cpts[j][0 if p < 0 else s[p], s[j]])
        vals.append(lp)
    return max(vals) if mode == "max" else _lse(vals)


def leaf_value(leaf, x, mode):
    """log of the leaf's value on row x (NaN = missing), marginal ("sum") or max ("max")."""
    if isinstance(leaf, spnc.MultivariateGaussian):
        return _mvn(x, leaf.mean, leaf.cov, leaf.vars, mode)
    if isinstance(leaf, spnc.ChowLiuLeaf):
        return _cltree(x, leaf, mode)
    v = x[leaf.var]
    if isinstance(leaf, spnc.Gaussian):
        if np.isnan(v):
            return 0.0 if mode == "sum" else -math.log(leaf.std) - 0.5 * math.log(2 * math.pi)
        z = (v - leaf.mean) / leaf.std
        return -math.log(leaf.std) - 0.5 * math.log(2 * math.pi) - 0.5 * z * z
    if isinstance(leaf, spnc.Indicator):
        return 0.0 if np.isnan(v) or v == leaf.value else NEG
    probs = [1 - leaf.p, leaf.p] if isinstance(leaf, spnc.Bernoulli) else list(leaf.probs)
    if np.isnan(v):
        return 0.0 if mode == "sum" else _log(max(probs))
    return _log(probs[int(v)])


def ref_value(node, x, mode="sum", memo=None):
    """log S_node(x), memoised over shared nodes."""
    memo = {} if memo is None else memo
    k = id(node)
    if k not in memo:
        if isinstance(node, Sum):
            vals = [_log(w) + ref_value(c, x, mode, memo) for w, c in zip(node.weights, node.children)]
            memo[k] = max(vals) if mode == "max" else _lse(vals)
        elif isinstance(node, Product):
            vals = [ref_value(c, x, mode, memo) for c in node.children]
            memo[k] = NEG if NEG in vals else sum(vals)
        else:
            memo[k] = leaf_value(node, x, mode)
    return memo[k]


# ---------------------------------------------------------------- random models
def _weights(rng, k, extreme):
    w = rng.dirichlet(np.ones(k))
    if extreme and k >= 2:
        kind = rng.integers(4)
        if kind == 0:      # a zero weight
            w[rng.integers(k)] = 0.0
        elif kind == 1:    # a tiny weight next to 1 - tiny
            w = np.zeros(k)
            w[0], w[1] = 1e-300, 1.0
        elif kind == 2:    # 1 - 1e-16 and the rest
            w = np.full(k, 1e-16 / (k - 1))
            w[rng.integers(k)] = 1.0 - 1e-16
        return w / w.sum() if abs(w.sum() - 1) > 1e-12 else w
    return w


def _probs(rng, k, extreme):
    p = rng.dirichlet(np.ones(k))
    if extreme and rng.random() < 0.3:     # one sure state and a tiny (or subnormal) one
        p = np.zeros(k)
        p[rng.integers(k)] = 1.0
        p[rng.integers(k)] += float(rng.choice([1e-300, 1e-200, 5e-324]))
        return p
    if extreme and k > 2 and rng.random() < 0.7:
        p[rng.choice(k, size=rng.integers(1, k), replace=False)] = 0.0   # zero-probability states
        if p.sum() == 0:
            p[0] = 1.0
        p = p / p.sum()
    return p


def random_model(rng, card, *, depth=3, share=0.4, extreme=False, multi=False):
    """(construction roots, compile kwargs): a random complete, decomposable DAG over
    variables with cardinalities ``card`` (0 = real), every leaf type used where it fits."""
    pool: dict[tuple, list] = {}

    def leaf(v):
        k = card[v]
        r = rng.random()
        if k == 0:
            return spnc.Gaussian(v, float(rng.normal(0, 2)), float(rng.uniform(0.3, 2.0)))
        if k == 2 and r < 0.4:
            p = float(rng.choice([0.0, 1.0, 1e-300, 1 - 1e-16, rng.uniform()])) if extreme \
                else float(rng.uniform(0.05, 0.95))
            return spnc.Bernoulli(v, p)
        if r < 0.6:
            return spnc.Categorical(v, _probs(rng, k, extreme))
        if r < 0.8:     # a sum of indicators, or a lone indicator next to another leaf
            s = int(rng.integers(k))
            return Sum([spnc.Indicator(v, j) for j in range(k)], _probs(rng, k, extreme)) if rng.random() < 0.7 \
                else Sum([spnc.Indicator(v, s), spnc.Categorical(v, _probs(rng, k, extreme))], [0.5, 0.5])
        return spnc.Categorical(v, _probs(rng, k, extreme))

    def multivariate(scope):
        if all(card[v] == 0 for v in scope):
            d = len(scope)
            A = rng.normal(size=(d, d))
            return spnc.MultivariateGaussian(list(scope), rng.normal(size=d), A @ A.T + 0.5 * np.eye(d))
        if all(card[v] > 0 for v in scope):
            parents = [-1] + [int(rng.integers(j)) for j in range(1, len(scope))]
            cpts = [np.array([_probs(rng, card[scope[0]], extreme)])]
            for j in range(1, len(scope)):
                cpts.append(np.array([_probs(rng, card[scope[j]], extreme) for _ in range(card[scope[parents[j]]])]))
            return spnc.ChowLiuLeaf(list(scope), parents, cpts)
        return None

    def build(scope, d):
        got = pool.setdefault(scope, [])
        if got and rng.random() < share:
            return got[rng.integers(len(got))]
        if len(scope) == 1:
            node = leaf(scope[0])
        elif d <= 0 or rng.random() < 0.15:
            node = multivariate(scope) if rng.random() < 0.5 else None
            if node is None:
                cut = int(rng.integers(1, len(scope)))
                node = Product([build(scope[:cut], 0), build(scope[cut:], 0)])
        else:
            kids = []
            for _ in range(int(rng.integers(1, 4))):
                perm = list(rng.permutation(scope))
                cut = int(rng.integers(1, len(scope)))
                parts = sorted({tuple(sorted(perm[:cut])), tuple(sorted(perm[cut:]))})
                kids.append(Product([build(p, d - 1) for p in parts]))
            node = Sum(kids, _weights(rng, len(kids), extreme))
        if rng.random() < 0.1:      # chains of one-child nodes
            node = Product([node]) if rng.random() < 0.5 else Sum([node], [1.0])
        got.append(node)
        return node

    scope = tuple(range(len(card)))
    if not multi:
        return [build(scope, depth)], {}
    roots = list({id(r): r for r in (build(scope, depth) for _ in range(int(rng.integers(2, 4))))}.values())
    if len(roots) == 1:
        return roots, {}
    if rng.random() < 0.5:
        return roots, {"combine": "independent"}
    return roots, {"root_weights": _weights(rng, len(roots), extreme), "combine": "mixture"}


def ref_multi(roots, kw, x, mode="sum"):
    """The reference value of a (possibly multi-root) model on row x."""
    memo: dict = {}
    vals = [ref_value(r, x, mode, memo) for r in roots]
    if kw.get("combine") == "independent":
        return vals
    if kw.get("combine") == "mixture":
        t = [_log(w) + v for w, v in zip(kw["root_weights"], vals)]
        return max(t) if mode == "max" else _lse(t)
    return vals[0]


def random_rows(rng, card, n, miss):
    """n rows of valid values (discrete states, reals near the leaves) with a share
    ``miss`` of NaNs."""
    X = np.empty((n, len(card)))
    for v, k in enumerate(card):
        X[:, v] = rng.normal(0, 2.5, n) if k == 0 else rng.integers(0, k, n)
    X[rng.random(X.shape) < miss] = np.nan
    return X


def post_order(roots):
    """The nodes in compile's order (children before parents, first child first)."""
    seen, order = set(), []
    for r in roots:
        stack = [(r, False)]
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            if id(n) in seen:
                continue
            seen.add(id(n))
            stack.append((n, True))
            for c in reversed(getattr(n, "children", [])):
                if id(c) not in seen:
                    stack.append((c, False))
    return order


def ref_posteriors(roots, kw, x):
    """(log S, rho per node in post order, expected count per (sum, child position)) of a
    single-root or mixture model on row x, by a top-down pass in the log domain."""
    order = post_order(roots)
    memo: dict = {}
    val = {id(n): ref_value(n, x, "sum", memo) for n in order}
    d = {id(n): NEG for n in order}
    rw = kw.get("root_weights", [1.0])
    for w, r in zip(rw, roots):
        d[id(r)] = _lse([d[id(r)], _log(w)])
    logS = ref_multi(roots, kw, x)
    edge = {}
    for n in reversed(order):
        if isinstance(n, Sum):
            for j, (w, c) in enumerate(zip(n.weights, n.children)):
                t = d[id(n)] + _log(w)
                d[id(c)] = _lse([d[id(c)], t])
                edge[(id(n), j)] = math.exp(t + val[id(c)] - logS) if logS > NEG else 0.0
        elif isinstance(n, Product):
            for j, c in enumerate(n.children):
                others = [val[id(o)] for k, o in enumerate(n.children) if k != j]
                t = d[id(n)] + (NEG if NEG in others else sum(others))
                d[id(c)] = _lse([d[id(c)], t])
    rho = [math.exp(d[id(n)] + val[id(n)] - logS) if logS > NEG and val[id(n)] > NEG and d[id(n)] > NEG else 0.0
           for n in order]
    return logS, np.array(rho), edge, order
