"""Trees vs graphs: merging similar sub-SPNs on the shared binary sets (Rahman & Gogate,
"Merging strategies for sum-product networks", Tables 2 and 3).

Part 1 (Table 2). For each set, kind (L-SPN: ``sum_split="latent"``, O-SPN:
``"observed"``) and base model (Chow-Liu or univariate leaves), the tree is chosen on
validation from a grid (the paper's product-split threshold beta and depth h with
``splitter="mi_components"``, min_instances 10, Laplace 1; plus GVS trees for L-SPNs; both
O-SPN variable heuristics), then ``Merge`` (default threshold grid, chosen on validation)
turns it into a graph. Reported: test LL of tree and graph, sum weights |T| and |G| (the
paper's parameter count) and all parameters, compression |T|/|G|, tree learning and merge
seconds, and test-set evaluation seconds of both models measured in the same run (best of
three, one thread). ``--em`` adds soft EM on the merged graph (validation early stopping).

Part 2 (Table 3). ``BaggedSPN`` of L-SPNs (Chow-Liu leaves) with random search over the
same grid, ``--bags`` bags (the paper: 40), bags weighted by training likelihood under one
latent sum, then merged as a whole. ``--base treespn`` bags :class:`TreeSPN` instead
(L-SPNs too: clustering sums, independence products, Chow-Liu leaves, then EM), with random
search over Desana & Schnörr's grid (``TREE_DIST``, or its larger models with ``--tree-grid
large``); each bag's EM stops on the rows its bootstrap sample missed (``oob_valid``), so
``X_valid`` is used only for the bag weights (``--weights valid``), the merge and the choice
between the two grids. ``--bag-leaves univariate`` bags the paper's L-SPNs with univariate
leaves.

Usage: python tools/bench_merge.py [--sets ...] [--kinds lspn ospn] [--leaves chowliu univariate]
       [--bags N] [--base lspn|treespn] [--weights W] [--no-table2] [--em] [--json FILE] [--out FILE]
"""
from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import _bench  # noqa: E402  (threads, import path; before numpy)
import numpy as np  # noqa: E402
from _bench import DEFAULT_DATA, SETS  # noqa: E402
from spnc.learn import EM, BaggedSPN, LearnSPN, Merge, TreeSPN  # noqa: E402
from spnc.learn.merge import n_parameters  # noqa: E402
from spnc.learn.treespn import g_factor_for  # noqa: E402

# Rahman & Gogate, Table 2 (L-SPN / O-SPN): T-LL, G-LL, |T|, |G|, T-time, G-time
PAPER2 = {
    "lspn": {"nltcs": (-6.03, -6.04, 5498, 3988, 5.37, 396.69), "plants": (-12.80, -12.69, 65132, 47802, 68.44, 17775.76),
             "baudio": (-40.11, -40.02, 12798, 10804, 68.30, 1995.94), "jester": (-53.12, -52.97, 12798, 10002, 39.09, 20.89),
             "bnetflix": (-56.71, -56.64, 12798, 11604, 62.64, 2287.78),
             "accidents": (-30.09, -30.01, 14206, 13322, 58.23, 2089.49)},
    "ospn": {"nltcs": (-6.04, -6.05, 1406, 1152, 0.98, 4.69), "plants": (-13.83, -13.49, 86530, 36960, 9.56, 14.12),
             "baudio": (-42.06, -42.06, 6142, 6142, 10.74, 3.90), "jester": (-55.38, -55.36, 6142, 4996, 6.51, 2.39),
             "bnetflix": (-58.64, -58.64, 6142, 6142, 19.95, 2.35),
             "accidents": (-30.83, -30.83, 6846, 6846, 14.13, 3.90)},
}
# Table 3, bagged L-SPN T-LL, G-LL
PAPER3 = {"nltcs": (-6.01, -6.00), "plants": (-12.31, -12.03), "baudio": (-39.57, -39.49),
          "jester": (-52.65, -52.47), "bnetflix": (-55.92, -55.84), "accidents": (-29.41, -29.32)}
BETAS = [0.001, 0.0015, 0.01, 0.5]          # the paper's grids (random search of the bags)
DEPTHS = [4, 5, 6, 7, 10]
SMALL = ([0.001, 0.01], [5, 7, 10])         # tree grid unless --full-grid (time on 2 shared cores)
# --base treespn: Desana & Schnörr's p values, their smaller tree counts and depths (time),
# and the two smoothings bench_treespn.py chooses between, drawn per bag
TREE_DIST = {"g_factor": [g_factor_for(p) for p in (0.1, 0.01, 0.001)], "n_trees": [5, 20], "max_depth": [2, 4],
             "tree_alpha": [10.0, 0.1], "em_alpha": [0.1, 1.0]}
# --tree-grid large: the grid's larger models (deeper, more trees per sum node)
TREE_DIST_LARGE = dict(TREE_DIST, n_trees=[20, 30], max_depth=[4, 6])


def load(root: Path, name: str):
    return _bench.load(root, name, dtype=np.float64)


def grid(kind: str, leaves: str, quick: bool, full: bool = False):
    base = dict(sum_split="latent" if kind == "lspn" else "observed", leaves=leaves, min_instances=10,
                alpha=1.0, random_state=0)
    betas, depths = ([0.001], [5]) if quick else (BETAS, DEPTHS) if full else SMALL
    crits = ["info_gain"] if kind == "lspn" or quick else ["info_gain", "mi_score"]
    out = [dict(base, splitter="mi_components", mi_threshold=b, max_depth=h, criterion=c)
           for b, h, c in itertools.product(betas, depths, crits)]
    if kind == "lspn" and not quick:
        out += [dict(base, splitter="gvs", g_factor=5.0, min_instances=m) for m in (10, 200)]
    return out


def eval_seconds(spn, X) -> float:
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        spn.log_likelihood(X, n_threads=1)
        best = min(best, time.perf_counter() - t)
    return best


def mean_ll(spn, X) -> float:
    return float(np.mean(spn.log_likelihood(X, n_threads=1)))


def table2_row(name, kind, leaves, X, Xv, Xt, quick, em, full=False, merge_kw=None):
    best = None
    for p in grid(kind, leaves, quick, full):
        t = time.perf_counter()
        est = LearnSPN(**p).fit(X)
        secs = time.perf_counter() - t
        v = mean_ll(est.spn_, Xv)
        if best is None or v > best[0]:
            best = (v, est.spn_, p, secs)
    v_tree, tree, params, t_secs = best
    t = time.perf_counter()
    m = Merge(init=tree, **(merge_kw or {})).fit(X, X_valid=Xv)
    g_secs = time.perf_counter() - t
    graph = m.spn_
    tw, tp = n_parameters(tree)
    gw, gp = n_parameters(graph)
    row = {"set": name, "kind": kind, "leaves": leaves,
           "chosen": {k: v for k, v in params.items() if k in ("splitter", "mi_threshold", "max_depth", "criterion",
                                                                  "min_instances")},
           "t_valid": v_tree, "t_test": mean_ll(tree, Xt), "g_valid": mean_ll(graph, Xv), "g_test": mean_ll(graph, Xt),
           "T": tw, "G": gw, "T_all": tp, "G_all": gp, "t_nodes": tree.n_nodes, "g_nodes": graph.n_nodes,
           "t_time": t_secs, "g_time": g_secs, "epsilon": m.epsilon_,
           "t_eval": eval_seconds(tree, Xt), "g_eval": eval_seconds(graph, Xt)}
    if em:
        t = time.perf_counter()
        e = EM(init=graph, max_iter=30, patience=3, alpha=1.0).fit(X, X_valid=Xv)
        row.update(em_test=mean_ll(e.spn_, Xt), em_valid=mean_ll(e.spn_, Xv), em_time=time.perf_counter() - t)
    return row


def table3_row(name, X, Xv, Xt, bags, jobs, quick, merge_kw=None, weights="train", kind="lspn", grid="small",
               leaves="chowliu"):
    if kind == "treespn":
        base, dist = TreeSPN(em_max_iter=10, patience=2), TREE_DIST_LARGE if grid == "large" else TREE_DIST
    else:
        base = LearnSPN(splitter="mi_components", sum_split="latent", leaves=leaves, min_instances=10, alpha=1.0)
        dist = {"mi_threshold": BETAS, "max_depth": DEPTHS}
    t = time.perf_counter()
    b = BaggedSPN(base, n_bags=bags, param_distributions=dist, weights=weights, n_jobs=jobs,
                  oob_valid=kind == "treespn", random_state=0).fit(X, X_valid=Xv)
    b_secs = time.perf_counter() - t
    ens = b.spn_
    t = time.perf_counter()
    m = Merge(init=ens, **(merge_kw or {})).fit(X, X_valid=Xv)
    g_secs = time.perf_counter() - t
    label = f"lspn ({leaves})" if kind == "lspn" else f"{kind} ({grid})"
    return {"set": name, "base": label, "bags": bags, "weights": weights, "t_test": mean_ll(ens, Xt),
            "g_test": mean_ll(m.spn_, Xt),
            "t_valid": mean_ll(ens, Xv), "g_valid": mean_ll(m.spn_, Xv), "T": n_parameters(ens)[0],
            "G": n_parameters(m.spn_)[0], "t_nodes": ens.n_nodes, "g_nodes": m.spn_.n_nodes,
            "bag_time": b_secs, "g_time": g_secs, "epsilon": m.epsilon_,
            "t_eval": eval_seconds(ens, Xt), "g_eval": eval_seconds(m.spn_, Xt)}


def report(rows2, rows3) -> str:
    out = []
    if rows2:
        out += ["| set | kind | leaves | T-LL | G-LL | paper G-LL | valid T / G | \\|T\\| | \\|G\\| | CR | all params T / G "
                "| T-time s | G-time s | paper G-time s | G-time x below paper | eval s T / G | chosen |",
                "|" + "---|" * 17]
        for r in rows2:
            p = PAPER2[r["kind"]][r["set"]]
            em = f" (EM {r['em_test']:.3f})" if "em_test" in r else ""
            out.append(f"| {r['set']} | {r['kind']} | {r['leaves']} | {r['t_test']:.3f} | **{r['g_test']:.3f}**{em} | "
                       f"{p[1]:.2f} | {r['t_valid']:.3f} / {r['g_valid']:.3f} | {r['T']} | {r['G']} | "
                       f"{r['T'] / max(r['G'], 1):.2f} | {r['T_all']} / {r['G_all']} | {r['t_time']:.2f} | "
                       f"{r['g_time']:.2f} | {p[5]:.2f} | {p[5] / max(r['g_time'], 1e-9):.1f} | "
                       f"{r['t_eval']:.3f} / {r['g_eval']:.3f} | "
                       + ", ".join(f"{k}={v}" for k, v in r["chosen"].items()) + f", eps={r['epsilon']} |")
    if rows3:
        out += ["", "| set | base | bags | bagged T-LL | bagged G-LL | paper T / G | valid T / G | \\|T\\| | \\|G\\| | nodes T / G "
                "| bagging s | merge s | eval s T / G | eps |", "|" + "---|" * 14]
        for r in rows3:
            p = PAPER3[r["set"]]
            out.append(f"| {r['set']} | {r.get('base', 'lspn')} | {r['bags']} | {r['t_test']:.3f} | **{r['g_test']:.3f}** | {p[0]:.2f} / {p[1]:.2f} | "
                       f"{r['t_valid']:.3f} / {r['g_valid']:.3f} | {r['T']} | {r['G']} | {r['t_nodes']} / {r['g_nodes']} | "
                       f"{r['bag_time']:.1f} | {r['g_time']:.1f} | {r['t_eval']:.3f} / {r['g_eval']:.3f} | "
                       f"{r['epsilon']} |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", nargs="+", default=SETS)
    ap.add_argument("--kinds", nargs="+", default=["lspn", "ospn"], choices=["lspn", "ospn"])
    ap.add_argument("--leaves", nargs="+", default=["chowliu", "univariate"], choices=["chowliu", "univariate"])
    ap.add_argument("--bags", type=int, default=10, help="bags of Table 3 (0: skip; the paper uses 40)")
    ap.add_argument("--jobs", type=int, default=2, help="processes for the bags")
    ap.add_argument("--no-table2", action="store_true")
    ap.add_argument("--em", action="store_true", help="also soft EM on each merged graph")
    ap.add_argument("--quick", action="store_true", help="one tree configuration (smoke run)")
    ap.add_argument("--full-grid", action="store_true", help="the paper's full beta x h grid for the trees")
    ap.add_argument("--refit", choices=["counts", "hard_em", "em"], default="counts", help="Merge(refit=...)")
    ap.add_argument("--weights", choices=["train", "uniform", "valid"], default="train",
                    help="BaggedSPN(weights=...): the paper weights bags by training likelihood")
    ap.add_argument("--local-check", action="store_true", help="Merge(local_check=True)")
    ap.add_argument("--base", choices=["lspn", "treespn"], default="lspn", help="the bags' learner (Table 3)")
    ap.add_argument("--tree-grid", choices=["small", "large"], default="small",
                    help="--base treespn: the bags' distribution (TREE_DIST or TREE_DIST_LARGE)")
    ap.add_argument("--bag-leaves", choices=["chowliu", "univariate"], default="chowliu",
                    help="--base lspn: the bags' leaves")
    ap.add_argument("--merge-patience", type=int, default=None, help="Merge(patience=...)")
    ap.add_argument("--json", type=Path, default=None, help="append rows as JSON lines here")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown tables here")
    args = ap.parse_args()
    rows2, rows3 = [], []
    merge_kw = {"refit": args.refit, "local_check": args.local_check, "patience": args.merge_patience}
    if args.refit == "em":
        merge_kw["max_iter"] = 5
    for name in args.sets:
        X, Xv, Xt = load(args.data, name)
        todo = [] if args.no_table2 else list(itertools.product(args.kinds, args.leaves))
        for kind, leaves in todo:
            r = table2_row(name, kind, leaves, X, Xv, Xt, args.quick, args.em, args.full_grid, merge_kw)
            rows2.append(r)
            print(json.dumps(r), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({"table": 2, **r}) + "\n")
        if args.bags > 0:
            r = table3_row(name, X, Xv, Xt, args.bags, args.jobs, args.quick, merge_kw, args.weights, args.base,
                           args.tree_grid, args.bag_leaves)
            rows3.append(r)
            print(json.dumps(r), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({"table": 3, **r}) + "\n")
    text = report(rows2, rows3)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
