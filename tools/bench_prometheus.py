"""Reproduce Prometheus (Jaini, Ghose & Poupart): continuous Table 1, discrete Table 3, the
low-data Table 4 (abalone) and the sampled variant on 784 binary variables, next to
LearnSPN and oSLRAU measured in the same run on the same folds. One JSON line per row.

    python tools/bench_prometheus.py continuous [--sets abalone qu ...] [--folds 1 2 ...]
    python tools/bench_prometheus.py binary [--sets nltcs plants ...]
    python tools/bench_prometheus.py binary-cv [--sets nltcs] [--folds 1 2 ...]
    python tools/bench_prometheus.py lowdata [--fractions 0.1 0.2 0.4]
    python tools/bench_prometheus.py images [--n 3000]
    python tools/bench_prometheus.py report OUT1.jsonl OUT2.jsonl ... > tables.md

Protocols. Continuous: fold K of ``continuous/NAME/NAME.K.data`` is the test set, the
other nine the training set; hyper-parameters are chosen on the last tenth of the
training set (an inner split: the model trained on the first nine tenths, its EM stopped
on that tenth, is the one tested). Binary: the fixed train/valid/test splits (validation
chooses the settings and stops EM); ``binary-cv`` is the paper's 10-fold CV over the pooled
splits (folds fixed by seed 0, settings chosen on the last tenth of each training set). Low data: a random 10/20/40 %
of the whole set drawn from each training set (seeded by K; inner split as above): the
paper's Table 4 counts fractions of the total data, its 90 % row being the full run. Images: a 784-pixel binary set
drawn from a known mixture of product-of-Bernoulli "digit" templates with local
correlations; sampled and full affinity graphs learn the same data.

Times are wall-clock seconds of one fit (structure + refinement) on a shared 2-core
machine; sizes are nodes, edges, nodes with several parents and per-layer edges / d^2.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from spnc.learn import OSLRAU, LearnSPN, Prometheus  # noqa: E402
from spnc.learn.oslrau import paper_leaf_cap  # noqa: E402
from _datadir import default_data  # noqa: E402

DATA = default_data()
CONT_TARGET = {"abalone": -0.85, "qu": -1.50, "banknote": -1.96, "flowdata": 18.03, "ki": -11.12}
BIN_TARGET = {"nltcs": -6.01, "plants": -12.81, "baudio": -39.80, "jester": -52.80, "bnetflix": -56.47,
              "accidents": -27.91}
LOWDATA_PAPER = {0.1: -1.73, 0.2: -1.32, 0.4: -0.98}
#: validation grids (every combination is fitted)
CONT_GRID = dict(n_clusters=[2, 5, 10], refine=["running_average"], whole_scope=[False, True], min_std=[0.01, 0.1],
                 leaves=["univariate"], min_instances=None)
#: ``leaves`` of the continuous grid: univariate leaves, or full-covariance Gaussian leaves
#: over blocks of up to 4 variables and over every block the recursion stops at
#: (``full``: ``leaf_vars`` = d, so every block that stops recursing, however wide, is one Gaussian)
LEAVES = {"univariate": {}, "multivariate": {"leaf_vars": 4, "base_leaves": "multivariate"},
          "full": {"leaf_vars": None, "base_leaves": "multivariate"}}
FLOW_PASSES = 5
BIN_GRID = dict(max_products=[4], max_depth=[3, 4], n_clusters=[2], min_instances=[200], alpha=[0.1])
BIN_PASSES = 8   # EM passes (stopped on the validation rows)
FIXED = dict(random_state=0, n_threads=1)


def grid(g: dict) -> list[dict]:
    return [dict(zip(g, v)) for v in itertools.product(*g.values())]


def sizes(m: Prometheus) -> dict:
    spn, d = m.spn_, m.n_features_in_
    return {"nodes": spn.n_nodes, "edges": spn.n_edges, "shared": m.n_shared_,
            "layer_edges_over_d2": [round(float(x) / d ** 2, 2) for x in m.layer_edges_]}


def fit_select(tr, va, g: dict, extra: dict) -> tuple[Prometheus, dict, float]:
    """The configuration of ``g`` with the best validation LL (EM stopped on ``va``)."""
    best = (None, None, -np.inf)
    for cfg in grid(g):
        kw = {k: v for k, v in cfg.items() if k != "leaves"}
        kw.update(LEAVES[cfg.get("leaves", "univariate")])
        if "leaf_vars" in kw and kw["leaf_vars"] is None:
            kw["leaf_vars"] = tr.shape[1]
        m = Prometheus(**kw, **extra, **FIXED)
        t = time.perf_counter()
        m.fit(tr, X_valid=va)
        m.wall_ = time.perf_counter() - t
        v = m.score(va)
        print(json.dumps({"grid_point": cfg, "valid": v, "seconds": m.wall_}), file=sys.stderr, flush=True)
        if v > best[2]:
            best = (m, cfg, v)
    return best


def mean_se(x) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def continuous(sets, folds, frac: float = 1.0, peers: bool = True) -> list[dict]:
    rows = []
    for name in sets:
        F = [np.loadtxt(DATA / "continuous" / name / f"{name}.{k}.data", delimiter=",") for k in range(1, 11)]
        d = F[0].shape[1]
        res = {"prometheus": [], "learnspn": [], "oslrau": []}
        secs = {k: [] for k in res}
        info = []
        for k in folds:
            train = np.concatenate([f for j, f in enumerate(F) if j != k - 1])
            if frac < 1.0:     # a random subset: a prefix would be nearly the same rows for every K
                # the paper's Table 4 counts fractions of the whole set (its 90 % row is the full run)
                n_keep = max(20, min(len(train), int(frac * sum(len(f) for f in F))))
                keep = np.random.default_rng(k).permutation(len(train))[:n_keep]
                train = train[np.sort(keep)]
            cut = int(0.9 * len(train))
            tr, va, te = train[:cut], train[cut:], F[k - 1]
            g = dict(CONT_GRID)
            if g["min_instances"] is None:
                g["min_instances"] = [50 if len(tr) < 5000 else 500]
            extra = {"refine_iter": 15}
            if len(tr) > 100_000:       # flowdata: structure on a sample, few passes over all rows
                extra = {"refine_iter": FLOW_PASSES, "sample_rows": 20_000}
            m, cfg, v = fit_select(tr, va, g, extra)
            res["prometheus"].append(m.score(te))
            secs["prometheus"].append(m.wall_)
            info.append({"fold": k, **cfg, "valid": v, "test": res["prometheus"][-1], **sizes(m)})
            print(json.dumps({"fold_of": name, "fraction": frac, **info[-1], "seconds": m.wall_}), flush=True)
            if not peers:
                continue
            best = (None, -np.inf)
            for thr, mu in itertools.product([0.1, 0.3, 0.5], [20, 50, 200]):
                t = time.perf_counter()
                ls = LearnSPN(splitter="correlation", corr_threshold=thr, min_instances=mu, **FIXED).fit(tr)
                ls.wall_ = time.perf_counter() - t
                if ls.score(va) > best[1]:
                    best = (ls, ls.score(va))
            res["learnspn"].append(best[0].score(te))
            secs["learnspn"].append(best[0].wall_)
            if len(tr) <= 20000:            # flowdata: oSLRAU takes ~6 min per fold
                t = time.perf_counter()
                os_ = OSLRAU(max_leaf_vars=paper_leaf_cap(d), batch_size=1 if len(tr) < 5000 else 8,
                             random_state=k).fit(tr)
                secs["oslrau"].append(time.perf_counter() - t)
                res["oslrau"].append(os_.score(te))
        row = {"set": name, "d": d, "folds": list(folds), "fraction": frac, "target": CONT_TARGET.get(name),
               "fits": info}
        for key, v in res.items():
            if v:
                row[key] = mean_se(v)
                row[key + "_seconds"] = float(np.mean(secs[key]))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def binary(sets) -> list[dict]:
    rows = []
    for name in sets:
        tr, va, te = (np.loadtxt(DATA / "binary" / f"{name}.{s}.data", delimiter=",").astype(np.uint8)
                      for s in ("train", "valid", "test"))
        m, cfg, v = fit_select(tr, va, BIN_GRID, {"refine_iter": BIN_PASSES})
        row = {"set": name, "d": tr.shape[1], "target": BIN_TARGET[name], **cfg, "valid": v,
               "prometheus": m.score(te), "prometheus_seconds": m.wall_,
               "structure_seconds": m.structure_seconds_, **sizes(m)}
        t = time.perf_counter()
        ls = LearnSPN(splitter="gvs", min_instances=50, **FIXED).fit(tr)
        row.update(learnspn=ls.score(te), learnspn_seconds=time.perf_counter() - t)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def binary_cv(sets, folds) -> list[dict]:
    """The paper's protocol for Table 3: train, valid and test pooled, shuffled once (seed
    0) and cut into ten folds; fold K is the test set, the last tenth of the other nine
    (in shuffled order) chooses the settings and stops EM, the rest trains."""
    rows = []
    for name in sets:
        X = np.concatenate([np.loadtxt(DATA / "binary" / f"{name}.{s}.data", delimiter=",").astype(np.uint8)
                            for s in ("train", "valid", "test")])
        F = np.array_split(X[np.random.default_rng(0).permutation(len(X))], 10)
        lls, secs, info = [], [], []
        for k in folds:
            train = np.concatenate([f for j, f in enumerate(F) if j != k - 1])
            cut = int(0.9 * len(train))
            m, cfg, v = fit_select(train[:cut], train[cut:], BIN_GRID, {"refine_iter": BIN_PASSES})
            lls.append(m.score(F[k - 1]))
            secs.append(m.wall_)
            info.append({"fold": k, **cfg, "valid": v, "test": lls[-1], "seconds": m.wall_, **sizes(m)})
            print(json.dumps({"cv_fold_of": name, **info[-1]}), flush=True)
        row = {"set": name, "protocol": "10-fold CV, pooled", "d": X.shape[1], "n": len(X), "folds": list(folds),
               "target": BIN_TARGET.get(name), "prometheus_cv": mean_se(lls),
               "prometheus_seconds": float(np.mean(secs)), "fits": info}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def digits(n: int, seed: int = 0, side: int = 28, n_templates: int = 10) -> np.ndarray:
    """Binary 28x28 images: each row picks a template (a random walk of thick strokes),
    its pixels are on with 0.9 inside the strokes and 0.03 outside, then shifted by at
    most one pixel, which correlates neighbouring pixels."""
    rng = np.random.default_rng(seed)
    T = np.zeros((n_templates, side, side))
    for t in range(n_templates):
        y, x = rng.integers(8, 20, size=2)
        for _ in range(60):
            y = int(np.clip(y + rng.integers(-2, 3), 4, side - 5))
            x = int(np.clip(x + rng.integers(-2, 3), 4, side - 5))
            T[t, y - 1:y + 2, x - 1:x + 2] = 1
    z = rng.integers(n_templates, size=n)
    P = np.where(T[z] > 0, 0.9, 0.03)
    img = rng.random(P.shape) < P
    sh = rng.integers(-1, 2, size=(n, 2))
    for dy, dx in itertools.product((-1, 0, 1), repeat=2):
        sel = (sh[:, 0] == dy) & (sh[:, 1] == dx)
        img[sel] = np.roll(img[sel], (dy, dx), axis=(1, 2))
    return img.reshape(n, side * side).astype(np.uint8)


def images(n: int, seeds=(0, 1, 2), variants=(True, False)) -> list[dict]:
    """Sampled and full affinity graphs on the same data and seeds (for one seed both
    variants cluster the top layer alike; the pair sampling has its own stream)."""
    X = digits(n + n // 5 + n // 2)
    tr, va, te = X[:n], X[n:n + n // 5], X[n + n // 5:]
    rows = []
    for sampled in variants:
        lls, secs, st = [], [], []
        for seed in seeds:
            m = Prometheus(sampled=sampled, n_clusters=10, max_products=4, max_depth=2, min_instances=200,
                           refine_iter=5, random_state=seed, n_threads=1)
            t = time.perf_counter()
            m.fit(tr, X_valid=va)
            secs.append(time.perf_counter() - t)
            st.append(m.structure_seconds_)
            lls.append(m.score(te))
            print(json.dumps({"sampled": sampled, "seed": seed, "test": lls[-1], "seconds": secs[-1]}), flush=True)
        row = {"set": "digits784", "n_train": n, "sampled": sampled, "seeds": list(seeds), "test": lls,
               "test_mean": float(np.mean(lls)), "seconds": float(np.mean(secs)),
               "structure_seconds": float(np.mean(st)), "calls": m.n_calls_, "sampled_calls": m.n_sampled_calls_,
               **sizes(m)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if len(rows) < 2:
        return rows
    gap = abs(rows[0]["test_mean"] - rows[1]["test_mean"]) / abs(rows[1]["test_mean"])
    print(json.dumps({"relative_ll_gap": gap}), flush=True)
    return rows


def report(paths) -> None:
    """Markdown tables from the JSON lines of earlier runs."""
    rows = [json.loads(line) for p in paths for line in open(p) if line.startswith("{\"set")]
    fmt = lambda v: "–" if v is None else (f"{v[0]:.3f} ± {v[1]:.3f}" if isinstance(v, list) else f"{v:.3f}")
    cont = [r for r in rows if "fraction" in r]
    if cont:
        print("| set | d | fraction | refine | Prometheus | paper | LearnSPN | oSLRAU | Prometheus s | LearnSPN s |"
              " oSLRAU s | k chosen | edges | shared | layer edges / d^2 (fold 1) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in cont:
            f = r["fits"]
            print(f"| {r['set']} | {r['d']} | {r['fraction']} | {f[0]['refine']} | {fmt(r['prometheus'])} | "
                  f"{r['target'] if r['fraction'] == 1.0 else LOWDATA_PAPER.get(r['fraction'])} | "
                  f"{fmt(r.get('learnspn'))} | {fmt(r.get('oslrau'))} | {r['prometheus_seconds']:.2f} | "
                  f"{r.get('learnspn_seconds', float('nan')):.2f} | {r.get('oslrau_seconds', float('nan')):.2f} | "
                  f"{','.join(str(x['n_clusters']) for x in f)} | {np.mean([x['edges'] for x in f]):.0f} | "
                  f"{np.mean([x['shared'] for x in f]):.0f} | {f[0]['layer_edges_over_d2']} |")
    binr = [r for r in rows if "structure_seconds" in r and "valid" in r]
    if binr:
        print("| set | d | Prometheus test | paper | LearnSPN (GVS, mu=50) | max_depth | Prometheus s | structure s |"
              " LearnSPN s | nodes | edges | shared | layer edges / d^2 |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in binr:
            print(f"| {r['set']} | {r['d']} | {r['prometheus']:.3f} | {r['target']} | {r['learnspn']:.3f} | "
                  f"{r['max_depth']} | {r['prometheus_seconds']:.1f} | {r['structure_seconds']:.1f} | "
                  f"{r['learnspn_seconds']:.1f} | {r['nodes']} | {r['edges']} | {r['shared']} | "
                  f"{r['layer_edges_over_d2']} |")


def main(argv=None) -> int:
    global BIN_PASSES
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["continuous", "binary", "binary-cv", "lowdata", "images", "report"])
    ap.add_argument("files", nargs="*", help="report: JSON-line outputs of earlier runs")
    ap.add_argument("--sets", nargs="+")
    ap.add_argument("--folds", nargs="+", type=int, default=list(range(1, 11)))
    ap.add_argument("--fractions", nargs="+", type=float, default=[0.1, 0.2, 0.4])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--variants", nargs="+", choices=["sampled", "full"], default=["sampled", "full"])
    ap.add_argument("--max-depth", nargs="+", type=int, default=BIN_GRID["max_depth"], help="binary: depths to try")
    ap.add_argument("--max-products", nargs="+", type=int, default=BIN_GRID["max_products"],
                    help="binary: product nodes per chain to try")
    ap.add_argument("--binary-clusters", nargs="+", type=int, default=BIN_GRID["n_clusters"],
                    help="binary, binary-cv: numbers of clusters to try")
    ap.add_argument("--refine", nargs="+", default=CONT_GRID["refine"], help="continuous refinements to try")
    ap.add_argument("--whole-scope", nargs="+", type=int, choices=[0, 1], default=[0, 1],
                    help="continuous: whole_scope values to try (0/1)")
    ap.add_argument("--min-std", nargs="+", type=float, default=CONT_GRID["min_std"],
                    help="continuous: min_std values to try")
    ap.add_argument("--no-peers", action="store_true", help="continuous: Prometheus only")
    ap.add_argument("--clusters", nargs="+", type=int, default=CONT_GRID["n_clusters"],
                    help="continuous: n_clusters values to try")
    ap.add_argument("--leaves", nargs="+", choices=list(LEAVES), default=CONT_GRID["leaves"],
                    help="continuous: leaf kinds to try")
    ap.add_argument("--binary-leaves", nargs="+", choices=["univariate", "multivariate"], default=["univariate"],
                    help="binary, binary-cv: leaf kinds to try (multivariate: Chow-Liu trees over blocks of up "
                         "to 4 variables and where the recursion stops)")
    ap.add_argument("--binary-min-instances", nargs="+", type=int, default=BIN_GRID["min_instances"],
                    help="binary, binary-cv: min_instances values to try")
    ap.add_argument("--binary-alpha", nargs="+", type=float, default=BIN_GRID["alpha"],
                    help="binary, binary-cv: Laplace pseudo-counts to try (leaves, sums, EM)")
    ap.add_argument("--binary-passes", type=int, default=BIN_PASSES,
                    help="binary, binary-cv: EM passes at most (stopped on the validation rows)")
    ap.add_argument("--min-instances", nargs="+", type=int,
                    help="continuous: min_instances values to try (default 50, 500 above 5,000 rows)")
    a = ap.parse_args(argv)
    CONT_GRID.update(leaves=a.leaves, min_instances=a.min_instances, refine=a.refine, whole_scope=[bool(w) for w in a.whole_scope], n_clusters=a.clusters,
                     min_std=a.min_std)
    BIN_GRID.update(max_depth=a.max_depth, max_products=a.max_products, n_clusters=a.binary_clusters,
                    leaves=a.binary_leaves, min_instances=a.binary_min_instances, alpha=a.binary_alpha)
    BIN_PASSES = a.binary_passes
    if a.mode == "continuous":
        continuous(a.sets or list(CONT_TARGET), a.folds, peers=not a.no_peers)
    elif a.mode == "binary":
        binary(a.sets or list(BIN_TARGET))
    elif a.mode == "binary-cv":
        binary_cv(a.sets or ["nltcs"], a.folds)
    elif a.mode == "lowdata":
        for f in a.fractions:
            continuous(a.sets or ["abalone"], a.folds, frac=f, peers=False)
    elif a.mode == "images":
        images(a.n, a.seeds, [v == "sampled" for v in a.variants])
    else:
        report(a.files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
