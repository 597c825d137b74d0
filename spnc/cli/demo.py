"""spnc-demo: build a known SPN, learn models from its samples (Chow-Liu tree, LearnSPN with
GVS refined by EM), query, save and reload.

Runs in a few seconds on any machine and needs no data files:

    spnc-demo                       # writes ./spnc-demo.h5
    spnc-demo --out /tmp/m.json --rows 20000 --seed 3
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import spnc
from spnc import Bernoulli, Product, Sum
from spnc._atomic import check_writable
from spnc.cli import add_common, positive_count, run_tool, seed_value


#: the demo's sizes: above them it would run for hours (or build the true model for ever)
MAX_VARS, MAX_ROWS = 2000, 10**7


def ground_truth(n_vars: int, seed: int) -> spnc.SPN:
    """A 3-component mixture of tree-structured sub-networks with shared leaves (a DAG)."""
    rng = np.random.default_rng(seed)
    shared = {v: Bernoulli(v, float(rng.uniform(0.1, 0.9))) for v in range(n_vars)}
    comps = []
    for _ in range(3):
        blocks = np.array_split(rng.permutation(n_vars), 4)
        parts = []
        for b in blocks:
            inner = [Product([Bernoulli(int(v), float(rng.uniform(0.05, 0.95))) if rng.random() < 0.7
                              else shared[int(v)] for v in sorted(b)]) for _ in range(2)]
            parts.append(Sum(inner, rng.dirichlet(np.ones(2))))
        comps.append(Product(parts))
    return spnc.compile(Sum(comps, rng.dirichlet(np.ones(3))))


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="spnc-demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="spnc-demo.h5",
                    help="where to save the learned model (.h5 or .json; default spnc-demo.h5)")
    ap.add_argument("--vars", type=positive_count(MAX_VARS), default=16,
                    help=f"variables of the true model (4 to {MAX_VARS}; default 16)")
    ap.add_argument("--rows", type=positive_count(MAX_ROWS), default=10000,
                    help=f"training rows sampled from the true model (10 to {MAX_ROWS}; default 10000)")
    ap.add_argument("--seed", type=seed_value, default=0, help="random seed (default 0)")
    add_common(ap, threads=False, json_summary=False)
    return ap


def main(argv: list[str] | None = None) -> int:
    return run_tool("spnc-demo", _parser(), _run, argv)


def _run(args: argparse.Namespace) -> int:
    from spnc.learn import EM, ChowLiuTree, LearnSPN
    if spnc.io.format_of(args.out) not in ("hdf5", "json"):
        raise spnc.SpncError(f"--out {args.out}: the model is saved as .h5, .hdf5 or .json")
    check_writable(args.out)
    if args.vars < 4 or args.rows < 10:
        raise spnc.SpncError("--vars needs at least 4 variables and --rows at least 10")

    t0 = time.perf_counter()
    truth = ground_truth(args.vars, args.seed)
    print(f"true model:    {truth!r}")
    train = truth.sample(args.rows, seed=(args.seed + 1) % 2**64)     # seeds stay below 2**64
    test = truth.sample(max(args.rows // 4, 100), seed=(args.seed + 2) % 2**64)
    print(f"data:          {len(train)} train / {len(test)} test rows sampled from it")

    se = lambda x: x.std(ddof=1) / np.sqrt(len(x))  # noqa: E731
    ll_true = truth.log_likelihood(test)
    print(f"test LL:       true model       {ll_true.mean():.4f} ± {se(ll_true):.4f}")
    tree = ChowLiuTree(alpha=0.1).fit(train).spn_
    ll_tree = tree.log_likelihood(test)
    print(f"               Chow-Liu tree    {ll_tree.mean():.4f} ± {se(ll_tree):.4f}   {tree!r}")
    cut = len(train) * 9 // 10
    lspn = LearnSPN(splitter="gvs", min_instances=100, random_state=args.seed).fit(train[:cut])
    ll_lspn = lspn.score_samples(test)
    print(f"               LearnSPN (GVS)   {ll_lspn.mean():.4f} ± {se(ll_lspn):.4f}   "
          f"{lspn.spn_!r}, learned in {lspn.fit_seconds_:.2f} s")
    model = EM(init=lspn.spn_, max_iter=30, alpha=0.1, patience=3).fit(train[:cut], X_valid=train[cut:]).spn_
    ll_model = model.log_likelihood(test)
    print(f"               LearnSPN + EM    {ll_model.mean():.4f} ± {se(ll_model):.4f}   "
          "(EM on weights and leaves, stopped on a validation tenth)")

    q = test[:3].copy()
    q[:, args.vars // 2:] = np.nan
    print(f"marginal LL of the first half of 3 test rows: {np.round(model.log_likelihood(q), 4)}")
    filled, lp = model.mpe(q, log_likelihood=True)
    print(f"MPE completion of row 0: {filled[0].astype(int).tolist()} (log p = {lp[0]:.4f})")
    samples = model.sample(5, seed=args.seed)
    print(f"5 samples, mean per variable: {np.round(samples.mean(0), 1).tolist()}")

    out = Path(args.out)
    spnc.save(model, out)
    again = spnc.load(out)
    same = np.array_equal(again.log_likelihood(test), ll_model)
    print(f"saved to {out} ({out.stat().st_size} bytes); reloaded, log-likelihoods identical: {same}")
    print(f"done in {time.perf_counter() - t0:.2f} s")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
