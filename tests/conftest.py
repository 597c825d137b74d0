"""Shared fixtures: random valid SPNs (with DAG sharing) and plain-Python references."""
from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest

import spnc
from spnc.nodes import Product, Sum

import _dask_guard

# the Dask tests' watchdog
pytest_configure, pytest_unconfigure = _dask_guard.pytest_configure, _dask_guard.pytest_unconfigure
pytest_runtest_protocol = _dask_guard.pytest_runtest_protocol

def _data_root() -> Path:
    """tools/_datadir.py's choice: $SPNC_DATA, else shared/data next to this checkout or
    (git worktree) next to the main one."""
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "tools" / "_datadir.py"
    spec = importlib.util.spec_from_file_location("_datadir", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.default_data()


SHARED_DATA = _data_root()


def shared_data(*parts: str) -> Path:
    """Path under the benchmark data (``$SPNC_DATA`` or ../shared/data), skipping the test
    when the data is not there."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared benchmark data not found at {p}")
    return p


def random_spn(rng: np.random.Generator, card: list[int], depth: int = 3, share: float = 0.3,
               leaf: str = "mixed", leaf_factory=None):
    """A random complete and decomposable SPN over variables with the given cardinalities
    (2 = binary, >2 categorical). Sub-networks over a scope are reused with probability
    ``share``, which makes it a DAG. ``leaf_factory(scope)``, if given, is asked for a leaf
    over a whole scope at the bottom of the recursion (None: use the default leaves)."""
    cache: dict[tuple, list] = {}

    def make_leaf(v):
        k = card[v]
        if k == 2 and (leaf == "bernoulli" or (leaf == "mixed" and rng.random() < 0.5)):
            return spnc.Bernoulli(v, float(rng.uniform(0.05, 0.95)))
        if leaf == "indicator" or (leaf == "mixed" and rng.random() < 0.15):
            return Sum([spnc.Indicator(v, s) for s in range(k)], rng.dirichlet(np.ones(k)))
        return spnc.Categorical(v, rng.dirichlet(np.ones(k)))

    def build(scope: tuple, d: int):
        pool = cache.setdefault(scope, [])
        if pool and rng.random() < share:
            return pool[rng.integers(len(pool))]
        custom = leaf_factory(scope) if leaf_factory and (d <= 0 or len(scope) == 1) else None
        if custom is not None:
            node = custom
        elif len(scope) == 1:
            node = make_leaf(scope[0])
        elif d <= 0:
            node = Product([build((v,), 0) for v in scope])
        else:
            k = int(rng.integers(2, 4))
            kids = []
            for _ in range(k):
                perm = list(rng.permutation(scope))
                cut = int(rng.integers(1, len(scope)))
                parts = [tuple(sorted(perm[:cut])), tuple(sorted(perm[cut:]))]
                kids.append(Product([build(p, d - 1) for p in parts]))
            node = Sum(kids, rng.dirichlet(np.ones(k)))
        pool.append(node)
        return node

    return build(tuple(range(len(card))), depth)


def eval_linear(node, x, memo=None, maxprod=False):
    """S_node(x) in the linear domain for a complete assignment x (plain Python)."""
    memo = {} if memo is None else memo
    key = id(node)
    if key in memo:
        return memo[key]
    if isinstance(node, Sum):
        vals = [w * eval_linear(c, x, memo, maxprod) for w, c in zip(node.weights, node.children)]
        v = max(vals) if maxprod else sum(vals)
    elif isinstance(node, Product):
        v = 1.0
        for c in node.children:
            v *= eval_linear(c, x, memo, maxprod)
    elif isinstance(node, spnc.Bernoulli):
        v = node.p if x[node.var] == 1 else 1 - node.p
    elif isinstance(node, spnc.Categorical):
        v = node.probs[int(x[node.var])]
    elif isinstance(node, spnc.Indicator):
        v = float(x[node.var] == node.value)
    else:
        raise TypeError(node)
    memo[key] = v
    return v


def all_states(card: list[int]) -> np.ndarray:
    return np.array(list(itertools.product(*[range(k) for k in card])), dtype=np.float64)


def completions(row: np.ndarray, card: list[int]) -> np.ndarray:
    """All complete assignments consistent with the observed entries of ``row``."""
    choices = [range(k) if np.isnan(x) else [int(x)] for x, k in zip(row, card)]
    return np.array(list(itertools.product(*choices)), dtype=np.float64)


@pytest.fixture(autouse=True)
def _passive_omp(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", os.environ.get("OMP_WAIT_POLICY", "passive"))


def chain_data(rng, n, card, flip=0.25):
    """Noisy chain-structured data, so the true tree is well separated."""
    d = len(card)
    X = np.zeros((n, d), dtype=np.int64)
    X[:, 0] = rng.integers(0, card[0], n)
    for j in range(1, d):
        src = X[:, rng.integers(0, j)] % card[j]
        noise = rng.random(n) < flip
        X[:, j] = np.where(noise, rng.integers(0, card[j], n), src)
    return X


def learned_trees(X: np.ndarray) -> dict:
    """LearnSPN trees of ``X`` for each sum split (observed, latent) and leaf type
    (univariate, chowliu), as the merge tests use them."""
    from spnc.learn import LearnSPN
    return {(split, leaves): LearnSPN(splitter="mi_components", sum_split=split, leaves=leaves, min_instances=15,
                                      mi_threshold=0.001, alpha=1.0, random_state=0).fit(X).spn_
            for split in ("observed", "latent") for leaves in ("univariate", "chowliu")}


def merge_data(seed: int = 0, n: int = 900, d: int = 7):
    """Binary training and validation rows from a random SPN (dependent variables), as the
    merge tests use them."""
    rng = np.random.default_rng(seed)
    gen = spnc.compile(random_spn(rng, [2] * d, depth=3, share=0.0, leaf="bernoulli"))
    X = gen.sample(n, seed=seed)
    return X[: 2 * n // 3], X[2 * n // 3:]


def reference_route(spn, X, V=None, act=None):
    """Plain numpy routing: every node's max-product value (``V``, rows x nodes, when given),
    then top-down, each sum sending a row to its first child maximising log w + value, a
    product to all children; every root gets every row (a mixture: the first root
    maximising value + log weight), or the rows marked in ``act`` (rows x nodes) enter the
    nodes marked there. Returns (activity rows x nodes, rows per sum edge)."""
    from spnc._kinds import MAX
    X = np.asarray(X, dtype=np.float64)
    n, N = X.shape[0], spn.n_nodes
    V = spn.node_log_values(X, mode=MAX) if V is None else V
    if act is not None:
        act = np.array(act, dtype=bool)
    elif spn.combine == "mixture":
        act = np.zeros((n, N), dtype=bool)
        with np.errstate(divide="ignore"):
            lw = np.log(spn.root_weights)
        pick = np.argmax(V[:, spn.roots] + lw, axis=1)
        for i, r in enumerate(spn.roots):
            act[:, r] |= pick == i
    else:
        act = np.zeros((n, N), dtype=bool)
        act[:, spn.roots] = True
    ec = np.zeros(spn.n_edges)
    for node in range(N - 1, -1, -1):
        a, b = spn.child_ptr[node], spn.child_ptr[node + 1]
        ch = spn.child[a:b]
        if spn.kind[node] == 1:
            act[:, ch] |= act[:, [node]]
        elif spn.kind[node] == 0:
            best = np.argmax(V[:, ch] + spn.logw[a:b], axis=1)
            for r in np.flatnonzero(act[:, node]):
                act[r, ch[best[r]]] = True
                ec[a + best[r]] += 1
    return act, ec
