"""EM on learned structures, on the shared binary sets (issue: EM for SPNs with arbitrary leaves).

1. *EM from a LearnSPN initialisation*: the GVS LearnSPN model chosen on validation (its
   parameters read from ``--learnspn-json``, the output of ``bench_learnspn.py --json``, or
   the defaults) is refined by soft EM on weights and Bernoulli leaves, stopping on the
   validation log-likelihood; test LL before and after.
2. *TreeSPN reproduction* (Desana & Schnörr, Sec. 6): depth-limited LearnSPN with
   ``n_trees`` Chow-Liu tree leaves added under every sum node, then EM on weights and
   trees until validation convergence. The paper's grid (p in {0.1, 0.01, 0.001}, n_trees
   in {5, 20, 30}, depth in {2, 4, 6}) is searched on validation one axis at a time, or
   whole with ``--full-grid`` (see ``treespn``), then EM's pseudo-count. ``--from-json``
   with ``--sets`` replaces only those sets' rows, so the sets can be run one at a time.

Usage: python tools/bench_treespn.py [--sets ...] [--learnspn-json FILE] [--no-treespn]
       [--no-em] [--full-grid] [--from-json FILE] [--json FILE] [--out docs/benchmarks-treespn.md]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _bench  # noqa: E402,F401  (threads, import path; before numpy)
import numpy as np  # noqa: E402
from _bench import DEFAULT_DATA, SETS, load  # noqa: E402
from spnc._kinds import SUM  # noqa: E402
from spnc.learn import EM, LearnSPN  # noqa: E402
from spnc.learn.treespn import TreeSPN, g_factor_for  # noqa: E402

TREESPN = {"nltcs": -6.01, "plants": -12.30, "baudio": -39.76, "jester": -52.59, "bnetflix": -56.12,
           "accidents": -29.86}
# The paper's grid: independence thresholds p (as GVS g_factors), trees per sum node, depth.
P_VALUES = [0.1, 0.01, 0.001]
N_TREES = [5, 20, 30]
DEPTHS = [2, 4, 6]
EM_ALPHAS = [0.1, 1.0]          # EM from a LearnSPN initialisation
TREE_EM_ALPHAS = [0.1, 1.0, 4.0]  # TreeSPN's EM pseudo-count, chosen on validation
TREE_EM_PASSES = 10             # EM passes per TreeSPN fit (patience 2)
TREE_ALPHAS = [10.0, 0.1]       # smoothing of the starting trees (the first is used while searching)


def model_size(spn) -> dict:
    sums = spn.kind == SUM
    out = {"nodes": int(len(spn.kind)), "edges": int(len(spn.child)),
           "sum_weights": int(np.diff(spn.child_ptr)[sums].sum())}
    t = spn.leaf_tables.get("cltree")
    if t is not None:
        params = t.to_arrays()
        out["tree_leaves"] = int(len(t))
        out["tree_params"] = int(np.asarray(params["cpt"]).size)
    return out


def em_from_learnspn(root: Path, sets: list[str], chosen: dict, seed: int) -> list[dict]:
    rows = []
    for name in sets:
        tr, va, te = load(root, name)
        params = chosen.get(name, {"splitter": "gvs"})
        m = LearnSPN(random_state=seed, n_threads=1, **params).fit(tr)
        before = (m.score(va), m.score(te))
        best = None
        for alpha in EM_ALPHAS:     # the EM pseudo-count is chosen on validation too
            t = time.perf_counter()
            em = EM(init=m.spn_, max_iter=30, alpha=alpha, patience=3, n_threads=1).fit(tr, X_valid=va)
            sec = time.perf_counter() - t
            v = float(em.spn_.log_likelihood(va).mean())
            if best is None or v > best[0]:
                best = (v, float(em.spn_.log_likelihood(te).mean()), alpha, int(em.n_iter_), sec)
        row = {"set": name, "params": params, "valid_before": before[0], "test_before": before[1],
               "valid_after": best[0], "test_after": best[1], "em_alpha": best[2], "em_passes": best[3],
               "em_seconds": best[4], "edges": int(len(m.spn_.child))}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def tree_fit(name, tr, va, te, seed, p, k, h, ta, em_alpha=1.0, stage="") -> tuple[dict, TreeSPN]:
    t = time.perf_counter()
    m = TreeSPN(n_trees=k, max_depth=h, g_factor=g_factor_for(p), tree_alpha=ta, em_alpha=em_alpha,
                em_max_iter=TREE_EM_PASSES, patience=2, random_state=seed, n_threads=1).fit(tr, X_valid=va)
    r = {"set": name, "stage": stage, "p": p, "n_trees": k, "max_depth": h, "tree_alpha": ta, "em_alpha": em_alpha,
         "fit_seconds": time.perf_counter() - t, **scores(m.spn_, m.structure_, va, te),
         "em_passes": int(m.n_iter_),
         **model_size(m.spn_)}
    print(json.dumps(r), flush=True)
    return r, m


def scores(spn, start, va, te) -> dict:
    """Validation/test LL of a model and of its starting point (before EM)."""
    return {"valid_ll": float(spn.log_likelihood(va).mean()), "test_ll": float(spn.log_likelihood(te).mean()),
            "structure_valid_ll": float(start.log_likelihood(va).mean()),
            "structure_test_ll": float(start.log_likelihood(te).mean())}


def treespn(root: Path, sets: list[str], seed: int, done: list[dict] = (), full: bool = False) -> list[dict]:
    """Search of the paper's grid on validation, with starting trees smoothed by
    ``TREE_ALPHAS[0]``: all 27 points (``full``) or one axis at a time (p at 20 trees and
    depth 4; depth at that p; n_trees at that p and depth: 7 points); then the starting
    trees' smoothing; then EM's pseudo-count from the chosen structure. Fits found in
    ``done`` (earlier rows, same seed) are reused, not repeated."""
    rows = []
    for name in sets:
        tr, va, te = load(root, name)
        runs = {(r["p"], r["n_trees"], r["max_depth"], r.get("tree_alpha", 10.0)):
                ({k: v for k, v in r.items() if k != "chosen"}, None)
                for r in done if r["set"] == name and r["stage"] != "em_alpha"}
        rows.extend(r for r, _ in runs.values())

        def run(p, k, h, ta, stage):
            if (p, k, h, ta) not in runs:
                r, m = tree_fit(name, tr, va, te, seed, p, k, h, ta, stage=stage)
                runs[(p, k, h, ta)] = (r, m)
                rows.append(r)
            return runs[(p, k, h, ta)][0]

        def best(keys):
            return max(keys, key=lambda key: runs[key][0]["valid_ll"])

        ta = TREE_ALPHAS[0]
        if full:
            p, k, h, _ = best([(q, j, d, ta) for q in P_VALUES for d in DEPTHS for j in N_TREES
                               if run(q, j, d, ta, "grid")])
        else:
            p = best([(q, 20, 4, ta) for q in P_VALUES if run(q, 20, 4, ta, "p")])[0]
            h = best([(p, 20, d, ta) for d in DEPTHS if run(p, 20, d, ta, "depth")])[2]
            k = best([(p, j, h, ta) for j in N_TREES if run(p, j, h, ta, "n_trees")])[1]
        ta = best([(p, k, h, a) for a in TREE_ALPHAS if run(p, k, h, a, "tree_alpha")])[3]
        r0, m = runs[(p, k, h, ta)]
        if m is None:      # reused row: the structure is refitted (same seed, same model)
            m = tree_fit(name, tr, va, te, seed, p, k, h, ta, stage=r0["stage"])[1]
        cands = [r0]
        for a in TREE_EM_ALPHAS:
            if a == r0["em_alpha"]:
                continue
            t = time.perf_counter()
            em = EM(init=m.structure_, max_iter=TREE_EM_PASSES, alpha=a, patience=2, random_state=seed,
                    n_threads=1).fit(tr, X_valid=va)
            r = dict(r0, stage="em_alpha", em_alpha=a, fit_seconds=time.perf_counter() - t,
                     **scores(em.spn_, m.structure_, va, te), em_passes=int(em.n_iter_), **model_size(em.spn_))
            print(json.dumps(r), flush=True)
            rows.append(r)
            cands.append(r)
        max(cands, key=lambda r: r["valid_ll"])["chosen"] = True
    return rows


def markdown(em_rows: list[dict], tree_rows: list[dict]) -> str:
    L = ["# EM on learned structures: LearnSPN refinement and the TreeSPN reproduction", "",
         "Produced by `python tools/bench_treespn.py` (one thread; choices on the validation split only).", ""]
    if em_rows:
        L += ["## EM from a LearnSPN (GVS) initialisation", "",
              "Soft EM on all weights and leaves (Bernoulli and Chow-Liu tree leaves), patience 3, at most",
              "30 passes, returning the pass with the best validation log-likelihood; the pseudo-count",
              f"`alpha` is chosen on validation from {EM_ALPHAS}.", "",
              "| set | test LL before | test LL after EM | valid before | valid after | EM alpha | passes | EM s |",
              "|---|---|---|---|---|---|---|---|"]
        for r in em_rows:
            L.append(f"| {r['set']} | {r['test_before']:.3f} | **{r['test_after']:.3f}** | {r['valid_before']:.3f} | "
                     f"{r['valid_after']:.3f} | {r.get('em_alpha', 1.0)} | {r['em_passes']} | {r['em_seconds']:.1f} |")
        L.append("")
    if tree_rows:
        L += ["## TreeSPN (Chow-Liu tree leaves under every sum node, then EM)", "",
              "Columns: *test LL* spnc (fixed train/valid/test split, model chosen on validation);",
              "*paper* Desana & Schnörr, Table 1 (TreeSPN column); *before EM* the chosen structure",
              "with its initial trees and weights; *EM gain (valid)* validation LL after EM minus before.", "",
              "| set | test LL | paper | before EM | EM gain (valid) | p | n_trees | depth | tree alpha | EM alpha "
              "| EM passes | tree leaves | edges | tree CPT entries |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in [r for r in tree_rows if r.get("chosen")]:
            L.append(f"| {r['set']} | **{r['test_ll']:.3f}** | {TREESPN.get(r['set'], '–')} | "
                     f"{r['structure_test_ll']:.3f} | {r['valid_ll'] - r['structure_valid_ll']:+.3f} | {r['p']} | "
                     f"{r['n_trees']} | {r['max_depth']} | {r.get('tree_alpha', 10.0)} | {r['em_alpha']} | "
                     f"{r['em_passes']} | {r.get('tree_leaves', 0)} | {r['edges']} | {r.get('tree_params', 0)} |")
        L += ["", "Every configuration tried (in search order; *stage* names the axis searched):", "",
              "| set | stage | p | n_trees | depth | tree alpha | EM alpha | valid LL | valid before EM | test LL | "
              "test before EM | EM passes | edges | s |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in tree_rows:
            L.append(f"| {r['set']} | {r['stage']} | {r['p']} | {r['n_trees']} | {r['max_depth']} | "
                     f"{r.get('tree_alpha', 10.0)} | {r['em_alpha']} | "
                     f"{r['valid_ll']:.3f} | {r['structure_valid_ll']:.3f} | {r['test_ll']:.3f} | "
                     f"{r['structure_test_ll']:.3f} | {r['em_passes']} | {r['edges']} | {r['fit_seconds']:.0f} |")
        L.append("")
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", nargs="+", default=SETS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--learnspn-json", type=Path, default=None)
    ap.add_argument("--no-em", action="store_true")
    ap.add_argument("--no-treespn", action="store_true")
    ap.add_argument("--full-grid", action="store_true", help="all 27 points of the paper's grid")
    ap.add_argument("--from-json", type=Path, default=None, help="reuse the rows of earlier --json runs")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    if not (a.data / "binary").is_dir():
        print(f"no data under {a.data}; nothing to do", file=sys.stderr)
        return 0
    chosen = {}
    if a.learnspn_json:
        for r in json.loads(a.learnspn_json.read_text())["binary"]:
            if r["learner"] == "gvs":
                chosen[r["set"]] = r["params"]
    old = json.loads(a.from_json.read_text()) if a.from_json and a.from_json.exists() else {}
    others = lambda key: [r for r in old.get(key, []) if r["set"] not in a.sets]  # noqa: E731 (rows of other sets)
    em_rows = old.get("em", []) if a.no_em else others("em") + em_from_learnspn(a.data, a.sets, chosen, a.seed)
    tree_rows = (old.get("treespn", []) if a.no_treespn
                 else others("treespn") + treespn(a.data, a.sets, a.seed, old.get("treespn", []), a.full_grid))
    if a.json:
        a.json.write_text(json.dumps({"em": em_rows, "treespn": tree_rows}, indent=1))
    text = markdown(em_rows, tree_rows)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
