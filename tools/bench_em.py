#!/usr/bin/env python
"""Cost of one EM iteration against one log-likelihood evaluation of the same data.

Builds a benchmark model from tools/bench_inference.py (random region graph or a
LearnSPN-shaped tree, Bernoulli leaves), draws binary rows from it, and times, in the same
run: ``log_likelihood`` (one forward pass), ``backward`` (the kernel the E-step calls, with
and without leaf responsibilities), and one soft EM iteration split into E-step (streamed
over row blocks, leaf statistics accumulated per block) and M-step (weights, leaf refits,
Eq. 12 check, new validated SPN). Times are medians of repeats; the machine is shared, so
trust the ratios printed at the end more than the seconds.

    python tools/bench_em.py                              # 1e5 rows, ~1e5-edge random model
    python tools/bench_em.py --model learnspn --rows 20000 --repeats 1
    python tools/bench_em.py --data nltcs msnbc     # EM quality on ../shared/data/binary sets

With ``--data``, each named data set is fitted from two initial models: a random
LearnSPN-shaped SPN with Bernoulli leaves, and a mixture of 8 Chow-Liu trees each fitted on a
random 1/8 of the training rows (EM then is the mixture-of-trees EM, structure refit per
step). Soft EM with validation early stopping; mean test log-likelihood before and after.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np  # noqa: E402

from bench_inference import learnspn_like, random_model  # noqa: E402
from spnc.learn.em import EM  # noqa: E402
from _datadir import default_data  # noqa: E402


def timed(fn, repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


DATA = str(default_data() / "binary")


def clt_mixture(X: np.ndarray, k: int, seed: int):
    import spnc
    from spnc.learn import ChowLiuTree
    rng = np.random.default_rng(seed)
    parts = np.array_split(rng.permutation(len(X)), k)
    leaves = []
    for p in parts:
        t = ChowLiuTree(alpha=1.0, cardinality=[2] * X.shape[1]).fit(X[p])
        leaves.append(t.spn_.leaf_tables["cltree"].to_node(0))
    return spnc.compile(spnc.Sum(leaves, np.ones(k) / k), cardinality=[2] * X.shape[1])


def quality(names, max_iter: int) -> None:
    print(f"{'data':10s} {'init':12s} {'test before':>12s} {'test after':>11s} {'iters':>5s} {'time s':>7s}")
    for name in names:
        path = os.path.join(DATA, name)
        if not os.path.exists(path + ".train.data"):
            print(f"{name}: not found under {DATA}")
            continue
        tr, va, te = (np.loadtxt(f"{path}.{s}.data", delimiter=",") for s in ("train", "valid", "test"))
        inits = {"random-spn": learnspn_like(tr.shape[1], 20 * tr.shape[1], seed=0),
                 "clt-mix-8": clt_mixture(tr, 8, 0)}
        for label, init in inits.items():
            t0 = time.perf_counter()
            em = EM(init=init, max_iter=max_iter, alpha=0.1, patience=3, tol=1e-5).fit(tr, X_valid=va)
            dt = time.perf_counter() - t0
            print(f"{name:10s} {label:12s} {init.log_likelihood(te).mean():12.4f} {em.score(te):11.4f} "
                  f"{em.n_iter_:5d} {dt:7.1f}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("random", "learnspn"), default="random")
    ap.add_argument("--edges", type=float, default=1e5)
    ap.add_argument("--vars", type=int, default=50)
    ap.add_argument("--rows", type=float, default=1e5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="kernel threads (default: automatic)")
    ap.add_argument("--block", type=int, default=4096, help="E-step rows per block")
    ap.add_argument("--hard", action="store_true", help="also time one hard-EM E-step")
    ap.add_argument("--data", nargs="*", help="run the EM quality experiment on these binary data sets")
    ap.add_argument("--max-iter", type=int, default=30)
    a = ap.parse_args(argv)
    if a.data:
        quality(a.data, a.max_iter)
        return 0
    make = random_model if a.model == "random" else learnspn_like
    spn = make(a.vars, int(a.edges), seed=0)
    X = spn.sample(int(a.rows), seed=1)
    print(f"model: {a.model} {spn}")
    print(f"data: {X.shape[0]} rows x {X.shape[1]} binary vars, threads={a.threads or 'auto'}, "
          f"block={a.block}, repeats={a.repeats}")
    nt = a.threads
    t_ll = timed(lambda: spn.log_likelihood(X, n_threads=nt), a.repeats)
    t_bw = timed(lambda: spn.backward(X[: a.block * 4], n_threads=nt), a.repeats) * X.shape[0] / (a.block * 4)
    em = EM(batch_size=a.block, n_threads=nt, weight_floor=1e-10)
    em._setup(spn)
    em.rejected_ = 0
    w = np.ones(X.shape[0])
    est = {}

    def estep():
        est["e"] = em._estep(spn, X, w, hard=False)

    t_e = timed(estep, a.repeats)
    t_m = timed(lambda: em._mstep(spn, est["e"], X, w), a.repeats)
    print(f"log_likelihood            {t_ll:9.3f} s")
    print(f"backward (no resp, est.)  {t_bw:9.3f} s   {t_bw / t_ll:5.2f} x log_likelihood")
    print(f"EM E-step (streamed)      {t_e:9.3f} s   {t_e / t_ll:5.2f} x")
    print(f"EM M-step                 {t_m:9.3f} s   {t_m / t_ll:5.2f} x")
    print(f"one EM iteration          {t_e + t_m:9.3f} s   {(t_e + t_m) / t_ll:5.2f} x log_likelihood "
          f"(target <= 3)")
    if a.hard:
        rows = min(X.shape[0], 4096)
        t_h = timed(lambda: em._estep(spn, X[:rows], w[:rows], hard=True), 1) * X.shape[0] / rows
        print(f"hard E-step (est.)        {t_h:9.3f} s   {t_h / t_ll:5.2f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
