#!/usr/bin/env python
"""Queries on a model whose leaves EM pushed to tiny probabilities, against the model EM
started from, in the same run (one thread, CPU time, minimum of repeats).

EM without smoothing (``alpha=0``, the default) drives the probability of a state that a
leaf's rows never show towards 0: on plants, state probabilities down to 1e-30 give some rows
a node value below 2^-1022, which a larger sibling absorbs. The sweeps on plain doubles must
neither fall back to the scaled sweep for such rows nor pay a microcode assist for each
subnormal operand: this prints, per query, the fitted model's time over the start model's
(1.0 is the goal) and the EM fit's time with ``alpha=0`` over ``alpha=0.1``.

    python tools/bench_tiny_probs.py                      # plants (LearnSPN, then EM)
    python tools/bench_tiny_probs.py --data nltcs --em-iters 10 --repeat 9
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from _bench import DEFAULT_DATA, load  # first: one thread, spnc importable
import numpy as np

from spnc.learn import EM, LearnSPN


def cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="plants", help="binary data set (train and test splits)")
    ap.add_argument("--data-dir", default=str(DEFAULT_DATA))
    ap.add_argument("--em-iters", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    train, _, test = (x.astype(np.float64) for x in load(Path(args.data_dir), args.data))
    start = LearnSPN(random_state=0, n_threads=1).fit(train).spn_
    fits = {}
    for alpha in (0.0, 0.1):
        em = EM(init=start, max_iter=args.em_iters, alpha=alpha, tol=0, n_threads=1)
        t0 = time.process_time()
        fits[alpha] = em.fit(train).spn_
        fits[alpha, "s"] = time.process_time() - t0
    tiny = fits[0.0]
    lp = np.concatenate([t.params["p"] for t in tiny.leaf_tables.values() if "p" in t.params] or [np.ones(1)])
    V = tiny.node_log_values(test[:2000])
    print(f"{args.data}: {start}  EM alpha=0, {args.em_iters} iterations: smallest leaf probability "
          f"{lp[lp > 0].min():.3g}, test rows with a node below 2^-1022: "
          f"{np.mean((V < -1022 * np.log(2)).any(1)):.1%}")
    Xm = test.copy()
    Xm[np.random.default_rng(0).random(Xm.shape) < 0.3] = np.nan
    ones = np.ones(len(train))

    def estep(spn):
        em = EM(init=spn, check_leaves=False)
        em._setup(spn)
        em.n_threads, em.rejected_ = 1, 0
        return lambda: em._estep(spn, train, ones, hard=False)
    queries = {"log-likelihood": lambda s: (lambda: s.log_likelihood(test, n_threads=1)),
               "marginal (30 % missing)": lambda s: (lambda: s.log_likelihood(Xm, n_threads=1)),
               "E-step (train)": estep}
    print(f"{'query':26s} {'start ms':>10s} {'EM alpha=0 ms':>14s} {'ratio':>7s}")
    for name, make in queries.items():
        a, b = make(start), make(tiny)
        a(), b()
        ta = tb = float("inf")
        for _ in range(args.repeat):        # interleaved: a slow spell hits both alike
            ta, tb = min(ta, cpu(a)), min(tb, cpu(b))
        print(f"{name:26s} {ta * 1e3:10.2f} {tb * 1e3:14.2f} {tb / ta:7.2f}")
    print(f"EM fit ({args.em_iters} iterations): alpha=0.1 {fits[0.1, 's']:.2f} s, alpha=0 {fits[0.0, 's']:.2f} s, "
          f"ratio {fits[0.0, 's'] / fits[0.1, 's']:.2f}")


if __name__ == "__main__":
    main()
