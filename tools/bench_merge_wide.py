"""Table 2 of Rahman & Gogate with a wider tree grid: which tree, merge refit and EM,
chosen on validation only, make the best graph L-SPN.

For each set: L-SPN trees (``sum_split="latent"``) from GVS with ``g_factor`` x
``min_instances`` x Laplace ``alpha`` and from ``mi_components`` with the paper's beta x
depth grid (``min_instances=10``, Laplace 1); the ``--top`` trees best on validation are
merged with ``Merge`` (defaults) under each ``--refits`` choice; the graph best on
validation gets soft EM (``EM(max_iter=30, patience=3)``, validation early stopping, the
pseudo-count from ``--em-alpha`` chosen on validation), kept only if validation improves.
Test LL is printed for every candidate but never used for a choice. One JSON line per
candidate.

Usage: python tools/bench_merge_wide.py --sets accidents --leaves univariate [--top 3]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import time
from pathlib import Path

import _bench  # noqa: E402  (threads, import path; before numpy)
import numpy as np  # noqa: E402
from _bench import DEFAULT_DATA  # noqa: E402
from bench_merge import BETAS, DEPTHS, PAPER2  # noqa: E402
from spnc.learn import EM, LearnSPN, Merge  # noqa: E402
from spnc.learn.merge import n_parameters  # noqa: E402


def configs(gvs_g, gvs_m, gvs_a):
    out = [dict(splitter="gvs", g_factor=g, min_instances=m, alpha=a)
           for g, m, a in itertools.product(gvs_g, gvs_m, gvs_a)]
    out += [dict(splitter="mi_components", mi_threshold=b, max_depth=h, min_instances=10, alpha=1.0)
            for b, h in itertools.product(BETAS, DEPTHS)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", nargs="+", required=True)
    ap.add_argument("--leaves", default="univariate", choices=["univariate", "chowliu"])
    ap.add_argument("--g-factor", nargs="+", type=float, default=[2.0, 5.0, 10.0, 20.0])
    ap.add_argument("--min-instances", nargs="+", type=int, default=[10, 50])
    ap.add_argument("--alpha", nargs="+", type=float, default=[0.1, 1.0])
    ap.add_argument("--top", type=int, default=3, help="trees (best on validation) to merge")
    ap.add_argument("--refits", nargs="+", default=["counts", "hard_em"], choices=["counts", "hard_em", "em"])
    ap.add_argument("--em-alpha", nargs="+", type=float, default=[1.0],
                    help="EM pseudo-counts for the chosen graph (the best on validation is kept)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    mean = lambda s, D: float(np.mean(s.log_likelihood(D, n_threads=1)))  # noqa: E731

    def emit(r):
        r["load"] = os.getloadavg()[0]
        print(json.dumps(r), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(r) + "\n")

    for name in args.sets:
        X, Xv, Xt = _bench.load(args.data, name, dtype=np.float64)
        trees = []
        for c in configs(args.g_factor, args.min_instances, args.alpha):
            t = time.perf_counter()
            s = LearnSPN(sum_split="latent", leaves=args.leaves, random_state=0, **c).fit(X).spn_
            r = dict(set=name, stage="tree", cfg=c, valid=mean(s, Xv), test=mean(s, Xt), nodes=s.n_nodes,
                     T=n_parameters(s)[0], secs=time.perf_counter() - t)
            emit(r)
            trees.append((r["valid"], len(trees), s, c))
        trees.sort(key=lambda z: (-z[0], z[1]))
        best = None
        for _, _, s, c in trees[: args.top]:
            for refit in args.refits:
                t = time.perf_counter()
                m = Merge(init=s, refit=refit, **({"max_iter": 5} if refit == "em" else {})).fit(X, X_valid=Xv)
                g = m.spn_
                r = dict(set=name, stage="merge", cfg=c, refit=refit, eps=m.epsilon_, valid=mean(g, Xv),
                         test=mean(g, Xt), t_test=mean(s, Xt), nodes=g.n_nodes, T=n_parameters(s)[0],
                         G=n_parameters(g)[0], secs=time.perf_counter() - t)
                emit(r)
                if best is None or r["valid"] > best[0]["valid"]:
                    best = (r, g)
        r, g = best
        ems = []
        for a in args.em_alpha:
            t = time.perf_counter()
            e = EM(init=g, max_iter=30, patience=3, alpha=a).fit(X, X_valid=Xv).spn_
            ev = mean(e, Xv)
            emit(dict(set=name, stage="em", cfg=r["cfg"], refit=r["refit"], em_alpha=a, valid=ev, test=mean(e, Xt),
                      kept=ev > r["valid"], secs=time.perf_counter() - t))
            ems.append((ev, a, e))
        ev, a, e = max(ems, key=lambda z: z[0])
        print(f"{name}: chosen {r['cfg']} refit={r['refit']} eps={r['eps']}: graph test {r['test']:.3f} "
              f"(valid {r['valid']:.3f}), after EM (alpha {a}) {mean(e, Xt):.3f}; paper G-LL {PAPER2['lspn'][name][1]}")


if __name__ == "__main__":
    main()
