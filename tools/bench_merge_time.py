"""Merge time against Rahman & Gogate's G-time column (Table 2), per shared set.

For each set, kind (L-SPN / O-SPN) and leaf type, one tree is learned with the
configuration the validation grid of ``tools/bench_merge.py`` chose (``CHOSEN``; where
that grid was not run, the stated fallback), then merged with ``Merge``'s defaults
(L-SPNs) or ``Merge(local_check=True)`` (O-SPNs, the acceptance rule of that table).
Printed: merge seconds (the whole ``Merge.fit``, threshold path included), the paper's
G-time and the ratio paper / ours (the issue asks for >= 100); CPU seconds of the process
(one thread: the wall time the fit would take alone) are printed beside the wall time,
since the machine is shared. ``--single`` also times
one ``Merge.fit`` at the chosen threshold alone (``epsilon=chosen``, from the tree, not
continuing the path, so its model may differ: its validation LL is printed) and, when no
similar merge won, the identical merge alone (``identical_merge``, what such a fit
returns). ``--epsilon paper`` walks the paper's threshold grid, {0.0001, 0.001, 0.01, 0.1}
(Sec. 5: chosen on validation from it), the like-for-like protocol for its G-time; the
default is ``Merge``'s own grid, which goes on to 0.2 and 0.4 (numbers give any grid).
``--patience P`` passes ``Merge(patience=P)``; ``--repeat R`` keeps the
shortest of R whole fits (by CPU time; the fits are deterministic). Reference measured in the
same run: the seconds of one max-product node-values matrix of the training rows
(``SPN.node_log_values(mode=MAX)``), which the routing built before it became a compiled
pass (a lower bound of the old routing's cost), against one compiled ``route``.

Usage: python tools/bench_merge_time.py [--sets ...] [--kinds lspn ospn] [--leaves ...]
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import _bench  # noqa: E402  (threads, import path; before numpy)
import numpy as np  # noqa: E402
from _bench import DEFAULT_DATA, SETS  # noqa: E402
from bench_merge import PAPER2  # noqa: E402
from spnc._kinds import MAX  # noqa: E402
from spnc.errors import DataError  # noqa: E402
from spnc.learn import LearnSPN, Merge  # noqa: E402
from spnc.learn.merge import identical_merge, n_parameters, single_root  # noqa: E402
from spnc.learn.routing import route  # noqa: E402

GVS = {"splitter": "gvs", "g_factor": 5.0}


def mi(beta, depth, crit="info_gain"):
    return {"splitter": "mi_components", "mi_threshold": beta, "max_depth": depth, "criterion": crit}


#: (set, kind, leaves) -> tree configuration chosen on validation by bench_merge.py
#: (docs/benchmarks-merge.md); missing entries use FALLBACK
CHOSEN = {
    ("nltcs", "lspn", "chowliu"): mi(0.001, 10), ("nltcs", "lspn", "univariate"): mi(0.001, 10),
    ("nltcs", "ospn", "chowliu"): mi(0.001, 5), ("nltcs", "ospn", "univariate"): mi(0.001, 7),
    ("plants", "lspn", "chowliu"): dict(GVS, min_instances=200), ("plants", "lspn", "univariate"): GVS,
    ("plants", "ospn", "chowliu"): mi(0.001, 7), ("plants", "ospn", "univariate"): mi(0.01, 10),
    ("baudio", "lspn", "chowliu"): GVS, ("baudio", "lspn", "univariate"): GVS,
    ("baudio", "ospn", "chowliu"): mi(0.001, 5),
    ("jester", "lspn", "chowliu"): dict(GVS, min_instances=200), ("jester", "lspn", "univariate"): mi(0.001, 7),
    ("jester", "ospn", "chowliu"): mi(0.001, 5), ("jester", "ospn", "univariate"): mi(0.001, 7),
    # session 4 (Table 2 rows for bnetflix and accidents)
    ("bnetflix", "lspn", "chowliu"): mi(0.001, 5), ("bnetflix", "lspn", "univariate"): GVS,
    ("accidents", "lspn", "chowliu"): mi(0.01, 7), ("accidents", "lspn", "univariate"): GVS,
}
FALLBACK = {"lspn": GVS, "ospn": mi(0.001, 5)}
#: the thresholds Rahman & Gogate chose epsilon from on validation (Sec. 5)
PAPER_GRID = (1e-4, 1e-3, 1e-2, 0.1)


def grid_of(words: list[str]):
    """``--epsilon``: None (Merge's default grid), the paper's grid, or the numbers given."""
    if words == ["default"]:
        return None
    if words == ["paper"]:
        return PAPER_GRID
    return tuple(float(w) for w in words)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", nargs="+", default=SETS)
    ap.add_argument("--kinds", nargs="+", default=["lspn", "ospn"], choices=["lspn", "ospn"])
    ap.add_argument("--leaves", nargs="+", default=["chowliu", "univariate"], choices=["chowliu", "univariate"])
    ap.add_argument("--json", default=None, help="append rows as JSON lines here")
    ap.add_argument("--patience", type=int, default=None, help="Merge(patience=...)")
    ap.add_argument("--single", action="store_true", help="also time one merge at the chosen threshold")
    ap.add_argument("--repeat", type=int, default=1, help="whole fits timed; the shortest CPU time is kept")
    ap.add_argument("--epsilon", nargs="+", default=["default"],
                    help="threshold grid: 'default' (Merge's), 'paper' (0.0001 0.001 0.01 0.1) or numbers")
    args = ap.parse_args()
    grid = grid_of(args.epsilon)
    rows = []
    for name in args.sets:
        X, Xv, _ = _bench.load(args.data, name, dtype=np.float64)
        for kind in args.kinds:
            for leaves in args.leaves:
                cfg = CHOSEN.get((name, kind, leaves))
                fallback = cfg is None
                cfg = dict(FALLBACK[kind] if fallback else cfg)
                p = dict(sum_split="latent" if kind == "lspn" else "observed", leaves=leaves, min_instances=10,
                         alpha=1.0, random_state=0)
                p.update(cfg)
                tree = LearnSPN(**p).fit(X).spn_
                kw = dict(local_check=kind == "ospn", patience=args.patience)
                if grid is not None:
                    kw["epsilon"] = grid
                secs = cpu = np.inf
                for _ in range(args.repeat):     # the machine is shared: keep the quietest fit
                    t, c = time.perf_counter(), time.process_time()
                    m = Merge(init=tree, **kw).fit(X, X_valid=Xv)
                    if time.process_time() - c < cpu:
                        secs, cpu = time.perf_counter() - t, time.process_time() - c
                single = {}
                if args.single:
                    t, c = time.perf_counter(), time.process_time()
                    if m.epsilon_ is None:
                        one = identical_merge(single_root(tree))
                    else:
                        one = Merge(init=tree, **dict(kw, epsilon=m.epsilon_)).fit(X, X_valid=Xv).spn_
                    single = {"single_s": time.perf_counter() - t, "single_cpu_s": time.process_time() - c,
                              "single_valid": float(np.mean(one.log_likelihood(Xv))),
                              "path_valid": float(np.mean(m.spn_.log_likelihood(Xv)))}
                try:         # the old routing's matrix; a large tree's is over the memory budget
                    t_ref = _bench.best_time(lambda: tree.node_log_values(X, mode=MAX), 3)
                except DataError:
                    t_ref = float("nan")
                t_route = _bench.best_time(lambda: route(tree, X), 3)
                paper = PAPER2[kind][name][5]
                r = {"set": name, "kind": kind, "leaves": leaves, "tree": cfg, "fallback": fallback,
                     "nodes": tree.n_nodes, "T": n_parameters(tree)[0], "G": n_parameters(m.spn_)[0],
                     "merge_s": secs, "merge_cpu_s": cpu, "paper_s": paper, "x_below_paper": paper / secs, "epsilon": m.epsilon_,
                     "node_values_max_s": t_ref, "route_s": t_route, "load": os.getloadavg()[0],
                     "thresholds": len(m.history_) - 1,
                     "grid": "default" if grid is None else list(grid), **single}
                rows.append(r)
                print(json.dumps(r), flush=True)
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(json.dumps(r) + "\n")
    print("\n| set | kind | leaves | tree | nodes | \\|T\\| / \\|G\\| | merge s wall / CPU (thresholds) | paper G-time s "
          "| x below paper (wall / CPU) | eps | single merge CPU s (x below) | route s / old values matrix s | load |")
    print("|" + "---|" * 13)
    for r in rows:
        tree = ", ".join(f"{k}={v}" for k, v in r["tree"].items()) + (" (fallback)" if r["fallback"] else "")
        print(f"| {r['set']} | {r['kind']} | {r['leaves']} | {tree} | {r['nodes']} | {r['T']} / {r['G']} | "
              f"{r['merge_s']:.2f} / {r['merge_cpu_s']:.2f} ({r['thresholds']}) | {r['paper_s']:.2f} | "
              f"{r['x_below_paper']:.1f} / {r['paper_s'] / r['merge_cpu_s']:.1f} | {r['epsilon']} | "
              + (f"{r['single_cpu_s']:.3f} ({r['paper_s'] / r['single_cpu_s']:.0f}) | " if "single_s" in r else "- | ")
              + f"{r['route_s']:.3f} / {r['node_values_max_s']:.3f} | {r['load']:.1f} |")


if __name__ == "__main__":
    main()
