"""Benchmark the evaluation of Chow-Liu leaves inside an SPN (complete rows).

For each shared binary set: an O-SPN with Chow-Liu leaves is learned on the training split,
then its Chow-Liu leaf table is evaluated on all training rows by spnc's kernel and by a
plain-numpy reference (one fancy-indexed gather per leaf variable, summed per leaf), in the
same run and one thread. Prints both times, their ratio and the largest difference. Without
the shared data a synthetic chain-structured set stands in.

``--validate K`` also times the parameter checks of the table repeated K times
(``CLTreeLeafType.validate``, all leaves at once) against the per-leaf loop that names a
fault (the same method with the all-at-once check disabled), in the same run.
``--batches K ...`` also times whole-model queries on the first K validation rows,
``SPN.log_likelihood`` against the numpy reference of the leaf table alone on the same rows
(a lower bound of the model's work): per-call costs show as the ratio's growth at small K.

Usage: python tools/bench_cltree_leaves.py [--data DIR] [--sets plants accidents] [--repeat R]
       [--batches 1 10 100 1000]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import _bench  # noqa: F401  (one thread, spnc importable; before numpy)
import numpy as np

from spnc import _kinds
from spnc.learn import LearnSPN
from spnc.leaves.cltree import CLTreeLeafType

PARAMS = dict(sum_split="observed", leaves="chowliu", min_instances=10, alpha=1.0, random_state=0,
              splitter="mi_components", mi_threshold=0.001, max_depth=5, criterion="info_gain")


def synthetic(n: int = 20000, d: int = 60, seed: int = 0) -> np.ndarray:
    """Binary rows from a random chain: each variable copies its left neighbour or flips."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, d), dtype=np.uint8)
    X[:, 0] = rng.random(n) < 0.5
    for j in range(1, d):
        X[:, j] = np.where(rng.random(n) < 0.8, X[:, j - 1], rng.random(n) < 0.5)
    return X


def numpy_leaves(P, X: np.ndarray) -> np.ndarray:
    """log p of every leaf (columns in table order) on complete rows ``X``."""
    F = int(P.var_ptr[-1])
    par = np.where(P.fpar >= 0, P.gvar[np.maximum(P.fpar, 0)], -1)
    codes = np.concatenate([X.astype(np.int64), np.zeros((len(X), 1), np.int64)], axis=1)
    idx = P.coff[None, :] + codes[:, par] * P.card[None, :] + codes[:, P.gvar[:F]]
    return np.add.reduceat(P.logcpt[idx], P.var_ptr[:-1], axis=1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=_bench.DEFAULT_DATA)
    ap.add_argument("--sets", nargs="+", default=["plants", "accidents"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batches", nargs="*", type=int, default=[], help="rows per whole-model query")
    ap.add_argument("--validate", type=int, default=0, help="copies of the table whose checks are timed")
    a = ap.parse_args(argv)
    have = (a.data / "binary").is_dir()
    print("| set | rows | leaves | leaf variables | spnc s | numpy s | numpy / spnc | max abs diff |")
    print("|---|---|---|---|---|---|---|---|")
    batches, checks = [], []
    for name in (a.sets if have else ["synthetic"]):
        X = _bench.load(a.data, name)[0] if have else synthetic()
        spn = LearnSPN(**PARAMS).fit(X.astype(np.float64)).spn_
        table = spn.leaf_tables["cltree"]
        P = table._prepared()
        XT = np.ascontiguousarray(X.T, dtype=np.float64)
        out = np.empty((int(table.slot.max()) + 1, X.shape[0]))
        t_spnc = _bench.best_time(lambda: table.log_prob(XT, out, _kinds.MARGINAL, 1), a.repeat, time.process_time)
        ref = None

        def run_numpy():
            nonlocal ref
            ref = numpy_leaves(P, X)
        t_np = _bench.best_time(run_numpy, a.repeat, time.process_time)
        diff = float(np.max(np.abs(out[table.slot].T - ref)))
        print(f"| {name} | {len(X)} | {len(table.node)} | {int(P.var_ptr[-1])} | {t_spnc:.4f} | "
              f"{t_np:.4f} | {t_np / t_spnc:.1f} | {diff:.1e} |", flush=True)
        if a.validate:
            checks.append((name, table, spn.cardinality))
        if a.batches:
            batches.append((name, spn, P, _bench.load(a.data, name)[1] if have else synthetic(2000, seed=1)))
    if checks:
        print("\n| set | leaves | validate, all at once, ms | per-leaf loop ms | loop / all at once |")
        print("|---|---|---|---|---|")
    for name, table, card in checks:
        big = CLTreeLeafType.from_nodes(np.arange(a.validate * len(table)),
                                        [table.to_node(i) for i in range(len(table))] * a.validate)
        t_all = _bench.best_time(lambda: big.validate(card), a.repeat, time.process_time)
        fast, CLTreeLeafType._all_valid = CLTreeLeafType._all_valid, lambda self, c: False
        try:
            t_loop = _bench.best_time(lambda: big.validate(card), a.repeat, time.process_time)
        finally:
            CLTreeLeafType._all_valid = fast
        print(f"| {name} | {len(big)} | {1e3 * t_all:.1f} | {1e3 * t_loop:.1f} | {t_loop / t_all:.1f} |", flush=True)
    if batches:
        print("\n| set | rows per query | log_likelihood ms | numpy leaves ms | spnc / numpy | max abs diff |")
        print("|---|---|---|---|---|---|")
    for name, spn, P, Xv in batches:
        for k in a.batches:
            Xk = np.ascontiguousarray(Xv[:k], dtype=np.float64)
            n_calls = max(1, 2000 // max(k, 1))
            t_spnc = _bench.best_time(lambda: [spn.log_likelihood(Xk) for _ in range(n_calls)], a.repeat,
                                      time.process_time) / n_calls
            t_np = _bench.best_time(lambda: [numpy_leaves(P, Xk) for _ in range(n_calls)], a.repeat,
                                    time.process_time) / n_calls
            one = np.array([spn.log_likelihood(Xk[i:i + 1])[0] for i in range(min(k, 50))])
            diff = float(np.max(np.abs(one - spn.log_likelihood(Xk)[:len(one)])))
            print(f"| {name} | {len(Xk)} | {1e3 * t_spnc:.3f} | {1e3 * t_np:.3f} | {t_spnc / t_np:.1f} | "
                  f"{diff:.1e} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
