"""Can EM on the training split raise a TreeSPN's validation log-likelihood?

One TreeSPN structure per set (the chosen grid point of ``bench_treespn.py`` by default),
then one EM step along separate directions, each scored on train and validation:

* ``weights eta``: sum weights only, moved a fraction ``eta`` of the way to their EM
  update (leaves frozen): a damped step, so a first-order gain would show;
* ``leaves alpha``: trees only (structure and CPTs, weighted Chow-Liu), sum weights frozen;
* ``all alpha``: one ordinary EM pass;
* ``weak start``: starting trees smoothed by ``--weak-tree-alpha`` (nearly independent),
  then full EM with validation early stopping, so EM has to build the trees itself.

Test LL is printed but chooses nothing.

Usage: python tools/treespn_em_probe.py --sets jester bnetflix baudio [--json F]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import _bench  # noqa: E402,F401  (threads, import path; before numpy)
import numpy as np  # noqa: E402
from _bench import DEFAULT_DATA, load  # noqa: E402
from spnc._kinds import SUM  # noqa: E402
from spnc.learn import EM  # noqa: E402
from spnc.learn.treespn import TreeSPN, g_factor_for  # noqa: E402

# The chosen grid points of bench_treespn.py (p, n_trees, depth, tree_alpha).
CHOSEN = {"jester": (0.001, 20, 4, 10.0), "bnetflix": (0.001, 20, 4, 0.1), "baudio": (0.001, 20, 4, 0.1),
          "nltcs": (0.001, 5, 4, 10.0), "accidents": (0.1, 20, 2, 0.1), "plants": (0.01, 20, 6, 0.1)}


def probe(name: str, tr, va, te, p, k, h, ta, weak_ta: float, emit) -> None:
    def scored(kind, value, spn, sec):
        emit({"set": name, "probe": kind, "value": value, "valid": float(spn.log_likelihood(va).mean()),
              "train": float(spn.log_likelihood(tr).mean()), "test": float(spn.log_likelihood(te).mean()),
              "seconds": sec})

    def treespn(tree_alpha):
        return TreeSPN(n_trees=k, max_depth=h, g_factor=g_factor_for(p), tree_alpha=tree_alpha, em_max_iter=1,
                       patience=1, random_state=0, n_threads=1).fit(tr).structure_

    t = time.perf_counter()
    s = treespn(ta)
    scored("start", ta, s, time.perf_counter() - t)
    sums, leaves = np.flatnonzero(s.kind == SUM), np.flatnonzero(s.kind != SUM)
    t = time.perf_counter()
    w1 = EM(init=s, max_iter=1, alpha=1.0, freeze=leaves, n_threads=1).fit(tr).spn_.weight
    sec = time.perf_counter() - t     # one EM pass serves all three step sizes
    for eta in (0.1, 0.3, 1.0):
        scored("weights eta", eta, s._reparameterised((1 - eta) * s.weight + eta * w1, s.leaf_tables), sec)
    for a in (0.1, 1.0, 10.0):
        t = time.perf_counter()
        scored("leaves alpha", a, EM(init=s, max_iter=1, alpha=a, freeze=sums, n_threads=1).fit(tr).spn_,
               time.perf_counter() - t)
        t = time.perf_counter()
        scored("all alpha", a, EM(init=s, max_iter=1, alpha=a, n_threads=1).fit(tr).spn_, time.perf_counter() - t)
    w = treespn(weak_ta)
    scored("weak start", weak_ta, w, 0.0)
    for a in (1.0, 3.0, 10.0):
        t = time.perf_counter()
        e = EM(init=w, max_iter=15, alpha=a, patience=2, n_threads=1).fit(tr, X_valid=va)
        scored(f"weak start + EM ({e.n_iter_} passes) alpha", a, e.spn_, time.perf_counter() - t)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", nargs="+", default=["jester", "bnetflix", "baudio"])
    ap.add_argument("--weak-tree-alpha", type=float, default=1000.0)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    rows = []

    def emit(r):
        rows.append(r)
        print(json.dumps(r), flush=True)

    for name in a.sets:
        tr, va, te = load(a.data, name)
        probe(name, tr, va, te, *CHOSEN[name], a.weak_tree_alpha, emit)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    print("\n| set | probe | value | valid | change | train | test |\n|---|---|---|---|---|---|---|")
    start = {}
    for r in rows:
        start.setdefault(r["set"], r["valid"])
        print(f"| {r['set']} | {r['probe']} | {r['value']:g} | {r['valid']:.3f} | {r['valid'] - start[r['set']]:+.3f} "
              f"| {r['train']:.3f} | {r['test']:.3f} |")


if __name__ == "__main__":
    main()
