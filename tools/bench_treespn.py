"""EM on learned structures, on the shared binary sets (issue: EM for SPNs with arbitrary leaves).

1. *EM from a LearnSPN initialisation*: the GVS LearnSPN model chosen on validation (its
   parameters read from ``--learnspn-json``, the output of ``bench_learnspn.py --json``, or
   the defaults) is refined by soft EM on weights and Bernoulli leaves, stopping on the
   validation log-likelihood; test LL before and after.
2. *TreeSPN reproduction* (Desana & Schnörr, Sec. 6): depth-limited LearnSPN with
   ``n_trees`` Chow-Liu tree leaves added under every sum node, then EM on weights and
   trees until validation convergence. (n_trees, max_depth) and the G-test factor are
   chosen on validation from a subset of the paper's grid.

Usage: python tools/bench_treespn.py [--sets ...] [--learnspn-json FILE] [--no-treespn]
       [--no-em] [--from-json FILE] [--json FILE] [--out docs/benchmarks-treespn.md]
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import _bench  # noqa: E402,F401  (threads, import path; before numpy)
import numpy as np  # noqa: E402
from _bench import DEFAULT_DATA, SETS, load  # noqa: E402
from spnc._kinds import SUM  # noqa: E402
from spnc.learn import EM, LearnSPN  # noqa: E402
from spnc.learn.treespn import TreeSPN  # noqa: E402

TREESPN = {"nltcs": -6.01, "plants": -12.30, "baudio": -39.76, "jester": -52.59, "bnetflix": -56.12,
           "accidents": -29.86}
# (n_trees, max_depth) from the paper's grid {5, 20, 30} x {2, 4, 6}; g_factor 5.4 and 1.35
# are the G thresholds of p-values 0.001 and 0.1 at one degree of freedom.
SHAPES = [(5, 2), (20, 4), (30, 6)]
G_FACTORS = [5.4]
EM_ALPHAS = [0.1, 1.0]


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


def treespn(root: Path, sets: list[str], seed: int) -> list[dict]:
    rows = []
    for name in sets:
        tr, va, te = load(root, name)
        best = None
        for (k, h), g in itertools.product(SHAPES, G_FACTORS):
            t = time.perf_counter()
            m = TreeSPN(n_trees=k, max_depth=h, g_factor=g, em_alpha=2.0, random_state=seed, n_threads=1).fit(tr, va)
            sec = time.perf_counter() - t
            r = {"set": name, "n_trees": k, "max_depth": h, "g_factor": g, "fit_seconds": sec,
                 "valid_ll": m.score(va), "test_ll": m.score(te),
                 "structure_test_ll": float(m.structure_.log_likelihood(te).mean()),
                 "em_passes": int(m.n_iter_), **model_size(m.spn_)}
            print(json.dumps(r), flush=True)
            rows.append(r)
            if best is None or r["valid_ll"] > best["valid_ll"]:
                best = r
        best["chosen"] = True
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
              f"(n_trees, max_depth) from {SHAPES}, G-test factor {G_FACTORS}, EM pseudo-count 2; the",
              "configuration with the best validation log-likelihood is chosen per set. *before EM* is",
              "the test log-likelihood of the structure with its initial trees and weights.", "",
              "| set | test LL | paper | before EM | n_trees | depth | tree leaves | edges | tree CPT entries | fit s |",
              "|---|---|---|---|---|---|---|---|---|---|"]
        for r in [r for r in tree_rows if r.get("chosen")] or tree_rows:
            L.append(f"| {r['set']} | **{r['test_ll']:.3f}** | {TREESPN.get(r['set'], '–')} | {r['structure_test_ll']:.3f} | "
                     f"{r['n_trees']} | {r['max_depth']} | {r.get('tree_leaves', 0)} | {r['edges']} | "
                     f"{r.get('tree_params', 0)} | {r['fit_seconds']:.0f} |")
        L += ["", "Every configuration tried:", "",
              "| set | n_trees | depth | valid LL | test LL | before EM | EM passes | edges | fit s |",
              "|---|---|---|---|---|---|---|---|---|"]
        for r in tree_rows:
            L.append(f"| {r['set']} | {r['n_trees']} | {r['max_depth']} | {r['valid_ll']:.3f} | {r['test_ll']:.3f} | "
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
    old = json.loads(a.from_json.read_text()) if a.from_json else {}
    em_rows = old.get("em", []) if a.no_em else em_from_learnspn(a.data, a.sets, chosen, a.seed)
    tree_rows = old.get("treespn", []) if a.no_treespn else treespn(a.data, a.sets, a.seed)
    if a.json:
        a.json.write_text(json.dumps({"em": em_rows, "treespn": tree_rows}, indent=1))
    text = markdown(em_rows, tree_rows)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
