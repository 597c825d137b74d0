"""Per-call cost of small queries: spnc on batches of K rows, in the same run.

For each set, O-SPNs with univariate (Bernoulli) leaves and with Chow-Liu tree leaves are learned on the
training split; then log-likelihood, marginals (30 % of the values missing) and MPE are
timed on the first K validation rows (CPU time, one thread, best of ``--repeat``). Printed
per query: microseconds per call, and the cost per row relative to the same query on a
large batch (``--large`` rows) measured in the same run, so 1.0 means no per-call cost
shows. Without the shared data a synthetic chain-structured set stands in.

Usage: python tools/bench_small_queries.py [--sets bnetflix] [--batches 1 10 100] [--repeat R]
"""
from __future__ import annotations

import argparse
import time

import _bench  # noqa: F401  (one thread, spnc importable; before numpy)
import numpy as np
from bench_cltree_leaves import synthetic

from spnc.learn import LearnSPN

PARAMS = dict(sum_split="observed", min_instances=10, alpha=1.0, random_state=0, splitter="mi_components",
              mi_threshold=0.001, max_depth=5, criterion="info_gain")


def per_call(f, repeat: int, k: int) -> float:
    """CPU seconds of one call of ``f`` (enough calls per timing to cover about 2,000 rows)."""
    n = max(1, 2000 // max(k, 1))
    return _bench.best_time(lambda: [f() for _ in range(n)], repeat, time.process_time) / n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=_bench.DEFAULT_DATA)
    ap.add_argument("--sets", nargs="+", default=["bnetflix"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 10, 100])
    ap.add_argument("--large", type=int, default=2000, help="rows of the large-batch reference")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    from pathlib import Path
    have = (Path(a.data) / "binary").is_dir()
    print("| set | leaves | nodes | rows | query | us per call | per-row cost / large batch's |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name in (a.sets if have else ["synthetic"]):
        X, Xv = (_bench.load(Path(a.data), name)[:2] if have else (synthetic(), synthetic(3000, seed=1)))
        X, Xv = X.astype(np.float64), Xv.astype(np.float64)
        Xm = np.where(rng.random(Xv.shape) < 0.3, np.nan, Xv)
        for leaves in ("univariate", "chowliu"):
            spn = LearnSPN(leaves=leaves, **PARAMS).fit(X).spn_
            queries = {"log_likelihood": (spn.log_likelihood, Xv), "marginal": (spn.log_likelihood, Xm),
                       "mpe": (spn.mpe, Xm)}
            for q, (f, D) in queries.items():
                big = D[: a.large]
                t_big = per_call(lambda: f(big), a.repeat, len(big)) / len(big)
                for k in a.batches:
                    Dk = np.ascontiguousarray(D[:k])
                    t = per_call(lambda: f(Dk), a.repeat, k)
                    print(f"| {name} | {leaves} | {spn.n_nodes} | {k} | {q} | {1e6 * t:.0f} | "
                          f"{t / (k * t_big):.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
