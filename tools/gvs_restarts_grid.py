"""GVS with univariate leaves on one binary set: ``bench_learnspn.py``'s 100-point
"gvs" grid (g_factor x min_instances x alpha) at the given row-clustering restarts.
Every point is fitted on train and scored on valid (one JSON line each); the best
validation LL is refitted and scored once on test.

Usage: python tools/gvs_restarts_grid.py [--set accidents] [--restarts 20]
"""
from __future__ import annotations

import argparse
import itertools
import json
import time

import _bench  # noqa: F401  (threads, import path; before numpy)
import numpy as np
from _bench import DEFAULT_DATA, load
from bench_learnspn import GRIDS
from spnc.learn import LearnSPN

#: bench_learnspn's univariate "gvs" grid without its restarts axis
GRID = {k: GRIDS["gvs"][k] for k in ("g_factor", "min_instances", "alpha")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="accidents")
    ap.add_argument("--restarts", type=int, nargs="+", default=[20])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    tr, va, te = load(DEFAULT_DATA, a.set)
    grid = dict(GRID, n_restarts=a.restarts)
    best, best_ll = None, -np.inf
    for combo in itertools.product(*grid.values()):
        p = dict(zip(grid, combo))
        ll = LearnSPN(splitter="gvs", leaves="univariate", random_state=a.seed, n_threads=1, **p).fit(tr).score(va)
        print(json.dumps({"params": p, "valid": round(ll, 4)}), flush=True)
        if ll > best_ll:
            best, best_ll = p, ll
    t = time.process_time()
    m = LearnSPN(splitter="gvs", leaves="univariate", random_state=a.seed, n_threads=1, **best).fit(tr)
    print(json.dumps({"set": a.set, "chosen": best, "valid": round(best_ll, 4), "test": round(m.score(te), 4),
                      "fit_cpu": round(time.process_time() - t, 1)}), flush=True)


if __name__ == "__main__":
    main()
