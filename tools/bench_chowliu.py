"""Benchmark Chow-Liu tree fitting on the shared binary data sets.

For each set: alpha chosen on the validation split, test log-likelihood, and the time of
one fit (counting + MI + spanning tree + CPTs) with spnc's kernels against a plain-numpy
reference (matrix-product pair counts, numpy MI, scipy MST) in the same run, both
single-threaded; then spanning-tree kernels (own Prim vs scipy) and thread scaling.

Usage: OMP_WAIT_POLICY=passive python tools/bench_chowliu.py [--data DIR] [--repeat R]
       [--sets nltcs,plants,...] [--out docs/benchmarks-chowliu.md]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# one BLAS/OpenMP thread unless a test below asks for more (set before numpy loads)
for _v in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np  # noqa: E402
from scipy.sparse.csgraph import breadth_first_order, minimum_spanning_tree  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from spnc import _counts as K  # noqa: E402
from spnc import _mi as MI  # noqa: E402
from spnc.chowliu import MI_EPS, fit_chow_liu, tree_log_likelihood  # noqa: E402
from _datadir import default_data  # noqa: E402

SETS = ["nltcs", "plants", "baudio", "jester", "bnetflix", "accidents"]
TARGET = {"nltcs": -6.76, "plants": -16.53, "baudio": -44.38, "jester": -58.23,
          "bnetflix": -60.25, "accidents": -33.19}
ALPHAS = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0]


def numpy_chow_liu(X: np.ndarray, alpha: float, w: np.ndarray | None = None):
    """Reference: binary Chow-Liu tree with numpy pair counts and scipy's MST."""
    Xf = X.astype(np.float64)
    Xw = Xf if w is None else Xf * w[:, None]
    W = float(len(X)) if w is None else float(w.sum())
    C = Xw.T @ Xf                                    # N11 for every pair
    m = np.diag(C).copy()                            # N1 per variable
    n11 = C
    n10 = m[:, None] - C
    n01 = m[None, :] - C
    n00 = W - m[:, None] - m[None, :] + C
    z = W + 4 * alpha
    t = [(np.maximum(c, 0) + alpha) / z for c in (n00, n01, n10, n11)]
    pa0, pa1 = t[0] + t[1], t[2] + t[3]
    pb0, pb1 = t[0] + t[2], t[1] + t[3]
    with np.errstate(divide="ignore", invalid="ignore"):
        mi = (t[0] * np.log(t[0] / (pa0 * pb0)) + t[1] * np.log(t[1] / (pa0 * pb1))
              + t[2] * np.log(t[2] / (pa1 * pb0)) + t[3] * np.log(t[3] / (pa1 * pb1)))
    mi = np.nan_to_num(mi)
    np.fill_diagonal(mi, 0.0)
    keep = np.triu(mi > MI_EPS, 1)
    cost = np.where(keep, mi.max() - mi + 1.0, 0.0)  # strictly positive costs
    T = minimum_spanning_tree(cost)
    T = T + T.T
    d = X.shape[1]
    parents = np.full(d, -1, dtype=np.int64)
    seen = np.zeros(d, bool)
    for r in range(d):
        if not seen[r]:
            order, pred = breadth_first_order(T, r, directed=False)
            seen[order] = True
            parents[order[1:]] = pred[order[1:]]
    cpts = []
    for j, p in enumerate(parents):
        if p < 0:
            tab = np.array([[W - m[j], m[j]]])
        else:
            c11 = C[p, j]
            tab = np.array([[W - m[p] - m[j] + c11, m[j] - c11], [m[p] - c11, c11]])
        tab = np.maximum(tab, 0) + alpha
        cpts.append(tab / tab.sum(1, keepdims=True))
    return parents, cpts


def best_time(f, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def race(f, g, repeat: int) -> tuple[float, float]:
    """Best times of f and g, run alternately so that load from other jobs hits both."""
    tf, tg = [], []
    for _ in range(repeat):
        tf.append(best_time(f, 1))
        tg.append(best_time(g, 1))
    return min(tf), min(tg)


def load(data: Path, name: str, split: str) -> np.ndarray:
    return np.loadtxt(data / f"{name}.{split}.data", delimiter=",", dtype=np.uint8)


def edges(parents) -> set:
    return {tuple(sorted((int(j), int(p)))) for j, p in enumerate(parents) if p >= 0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(default_data() / "binary"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--out", default=None, help="also write the markdown report here")
    args = ap.parse_args(argv)
    data = Path(args.data)
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say("## Fit time and test log-likelihood (single thread)")
    say()
    say("| set | rows x vars | alpha (valid) | valid LL | test LL | target | spnc fit ms | numpy ref ms | ratio | weighted spnc ms | weighted numpy ms | ratio | same MI as ref |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    mis = {}
    for name in args.sets.split(","):
        if not (data / f"{name}.train.data").exists():
            say(f"| {name} | (missing) |")
            continue
        tr, va, te = (load(data, name, s) for s in ("train", "valid", "test"))
        vals = []
        for a in ALPHAS:
            f = fit_chow_liu(tr, alpha=a, n_threads=1)
            vals.append(tree_log_likelihood(va, f.parents, f.cpts).mean())
        alpha = ALPHAS[int(np.argmax(vals))]
        fit = fit_chow_liu(tr, alpha=alpha, n_threads=1)
        mis[name] = fit.mi
        test_ll = tree_log_likelihood(te, fit.parents, fit.cpts).mean()
        rp, _ = numpy_chow_liu(tr, alpha)
        # identical columns give ties, so compare the trees' total MI, not their edges
        weight = lambda par: sum(fit.mi[a, b] for a, b in edges(par))  # noqa: E731
        same = abs(weight(rp) - weight(fit.parents)) <= 1e-9 * max(1.0, weight(rp))
        t_s, t_n = race(lambda: fit_chow_liu(tr, alpha=alpha, n_threads=1),
                        lambda: numpy_chow_liu(tr, alpha), args.repeat)
        w = np.random.default_rng(0).random(len(tr))
        t_sw, t_nw = race(lambda: fit_chow_liu(tr, sample_weight=w, alpha=alpha, n_threads=1),
                          lambda: numpy_chow_liu(tr, alpha, w), args.repeat)
        passed = test_ll >= TARGET[name]
        ok &= passed and same
        say(f"| {name} | {tr.shape[0]} x {tr.shape[1]} | {alpha} | {max(vals):.4f} | {test_ll:.4f} | "
            f"{TARGET[name]} {'ok' if passed else 'FAIL'} | {t_s * 1e3:.2f} | {t_n * 1e3:.2f} | {t_n / t_s:.1f}x | "
            f"{t_sw * 1e3:.2f} | {t_nw * 1e3:.2f} | {t_nw / t_sw:.1f}x | {same} |")

    say()
    say("## Maximum spanning tree on the MI matrix: own dense Prim vs scipy (Kruskal, positive costs)")
    say()
    say("| matrix | d | Prim ms | scipy ms |")
    say("|---|---|---|---|")
    rng = np.random.default_rng(1)
    A = rng.random((1000, 1000))
    mis["random"] = (A + A.T) / 2
    for name, mi in mis.items():
        t_p = best_time(lambda: MI.prim_max_forest(mi, MI_EPS), args.repeat)

        def sp():
            keep = np.triu(mi > MI_EPS, 1)
            minimum_spanning_tree(np.where(keep, mi.max() - mi + 1.0, 0.0))
        t_q = best_time(sp, args.repeat)
        say(f"| {name} | {mi.shape[0]} | {t_p * 1e3:.3f} | {t_q * 1e3:.3f} |")

    say()
    say("## Thread scaling (2-core machine shared with other jobs; OMP_WAIT_POLICY=passive)")
    say()
    say("| data | weights | 1 thread ms | 2 threads ms |")
    say("|---|---|---|---|")
    cases = []
    for name in ("baudio", "accidents"):
        if (data / f"{name}.train.data").exists():
            cases.append((name, load(data, name, "train")))
    cases.append(("synthetic 10000 x 1000", (rng.random((10000, 1000)) < 0.2).astype(np.uint8)))
    for name, X in cases:
        w = rng.random(len(X))
        for wname, ww in (("none", None), ("random", w)):
            rep = 1 if X.shape[1] >= 1000 else args.repeat
            t1, t2 = race(lambda: fit_chow_liu(X, sample_weight=ww, n_threads=1),
                          lambda: fit_chow_liu(X, sample_weight=ww, n_threads=2), rep)
            say(f"| {name} | {wname} | {t1 * 1e3:.1f} | {t2 * 1e3:.1f} |")
    say()
    say("## Non-binary data (synthetic, uniform codes; 1 thread)")
    say()
    say("| rows x vars, states | weights | spnc fit ms | numpy one-hot counts only ms |")
    say("|---|---|---|---|")
    for n, d, k in ((15000, 100, 3), (15000, 100, 5), (10000, 300, 4)):
        X = rng.integers(0, k, (n, d)).astype(np.uint8)
        w = rng.random(n)

        def onehot_counts(ww=None):
            O = np.zeros((n, d * k))
            O[np.arange(n)[:, None], np.arange(d) * k + X] = 1.0
            return (O if ww is None else O * ww[:, None]).T @ O
        for wname, ww in (("none", None), ("random", w)):
            rep = max(1, args.repeat // 3)
            t_s, t_n = race(lambda: fit_chow_liu(X, sample_weight=ww, n_threads=1),
                            lambda: onehot_counts(ww), rep)
            say(f"| {n} x {d}, {k} | {wname} | {t_s * 1e3:.1f} | {t_n * 1e3:.1f} |")

    say()
    say("## The tree as an SPN leaf: log-likelihood of the test rows (ChowLiuTree.score_samples, 1 thread)")
    say()
    say("| set | rows | complete rows ms | 30% missing ms | numpy (complete) ms |")
    say("|---|---|---|---|---|")
    from spnc.learn.chowliu import ChowLiuTree
    for name in ("plants", "accidents"):
        if not (data / f"{name}.train.data").exists():
            continue
        tr, te = load(data, name, "train"), load(data, name, "test").astype(np.float64)
        m = ChowLiuTree(alpha=0.3).fit(tr)
        te_m = np.where(np.random.default_rng(2).random(te.shape) < 0.3, np.nan, te)
        t_c = best_time(lambda: m.score_samples(te, n_threads=1), args.repeat)
        t_m = best_time(lambda: m.score_samples(te_m, n_threads=1), args.repeat)
        t_r = best_time(lambda: tree_log_likelihood(te, m.parents_, m.cpts_), args.repeat)
        say(f"| {name} | {len(te)} | {t_c * 1e3:.2f} | {t_m * 1e3:.2f} | {t_r * 1e3:.2f} |")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
