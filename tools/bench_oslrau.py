"""Reproduce Table 1 of Hsu, Kalra & Poupart (2017) with spnc's oSLRAU: 10-fold CV.

For each dataset the files NAME.1.data .. NAME.10.data (comma-separated floats) are the
folds; each fold in turn is the test set and the other nine, in order K+1..10, 1..K-1,
are streamed once for training. Reports the mean test log-likelihood ± standard error
over the folds and ± standard deviation (what the authors' script prints), training
time, points/s and SPN size, and writes a Markdown table.

    python tools/bench_oslrau.py [--data DIR] [--datasets qu banknote ...] [--folds 1 2 ...]
                                 [--spaced] [--paper-floor] [--select [--race-after N]]
                                 [--defaults [--max-nodes N|none]]
                                 [--min-merge N] [--min-var V] [--out FILE]

``--paper-floor`` floors leaf variances at 1e-4 only when a leaf is created (the authors'
code, ``PAPER_FLOOR``). ``--select`` is ``OSLRAU(select="auto")``: the default and
the paper's floor, each with and without spacing, learn side by side in the same single
pass over the training stream, each scoring every batch before learning from it, and the
best prequential score is kept (time and size are those of the whole selecting pass).
``--race-after N`` (default 100,000, the learner's): after N points only the leader keeps
learning; 0 lets every candidate take the whole stream.

Times are wall-clock and CPU seconds of ``fit`` plus compiling ``spn_`` (one thread)."""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from spnc.learn.oslrau import AUTO_CANDIDATES, OSLRAU, paper_leaf_cap  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _datadir import default_data, tried  # noqa: E402

#: paper settings: mini-batch size per dataset (Sec. 4.2), Table 1 target
SETTINGS = {"flowdata": (256, 14.78), "qu": (1, -1.86), "banknote": (1, -2.04),
            "abalone": (1, -1.12), "ki": (8, -11.15)}
DEFAULT_DATA = default_data() / "continuous"


def load_folds(root: Path, name: str) -> list[np.ndarray]:
    if not (root / name).is_dir():
        sys.exit(f"benchmark data not found: {root / name}\n({tried()})")
    return [np.loadtxt(root / name / f"{name}.{k}.data", delimiter=",", ndmin=2) for k in range(1, 11)]


def run_dataset(root: Path, name: str, seed: int, min_merge: int | None, spaced: bool = False,
                min_var: float = 1e-6, folds_to_run: list[int] | None = None, select: bool = False,
                floor: str = "always", defaults: bool = False, race_after: int | None = 100_000,
                max_train: int | None = None, max_nodes: int | None | str = "default") -> dict:
    bs, target = SETTINGS[name]
    folds = load_folds(root, name)
    d = folds[0].shape[1]
    lls, times, cpus, sizes, npts, chosen = [], [], [], [], [], []
    for k in (folds_to_run or range(10)):
        train = np.vstack(folds[k + 1:] + folds[:k])[:max_train]

        cap_kw = {} if max_nodes == "default" else {"max_nodes": max_nodes}
        model = OSLRAU(random_state=seed + k, **cap_kw) if defaults else OSLRAU(correlation_threshold=0.1, max_leaf_vars=paper_leaf_cap(d), batch_size=bs,
                       min_merge_points=min_merge, spaced_merges=spaced, min_var=min_var, variance_floor=floor,
                       max_nodes=None, select="auto" if select else None, race_after=race_after,
                       random_state=seed + k)
        t0, c0 = time.perf_counter(), time.process_time()
        model.fit(train)
        spn = model.spn_
        chosen.append(model.selection_["selected"] if select else None)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        lls.append(float(np.mean(spn.log_likelihood(folds[k]))))
        sizes.append(spn.n_nodes)
        npts.append(len(train))
        print(f"  {name} fold {k + 1}: test LL {lls[-1]:.3f}, {times[-1]:.2f} s (CPU {cpus[-1]:.2f} s), "
              f"{spn.n_nodes} nodes, prequential LL {model.prequential_ll_:.3f}", file=sys.stderr, flush=True)
        if select:
            rec = model.selection_
            fmt = lambda v: " ".join("-" if x is None else f"{x:.3f}" for x in v)  # noqa: E731
            print(f"    kept {rec['selected']}; decided at {rec['decided_at']} points, prequential there "
                  f"{fmt(rec['prequential_ll_at_decision'] or [])}; final {fmt(rec['prequential_ll'])}",
                  file=sys.stderr, flush=True)
            for n, sc in rec["trace"]:
                print(f"    trace {n} {fmt(sc)}", file=sys.stderr, flush=True)
    sd = lambda a: float(np.std(a, ddof=1)) if len(a) > 1 else float("nan")  # noqa: E731
    se = lambda a: sd(a) / np.sqrt(len(a))  # noqa: E731
    return {"name": name, "d": d, "batch": "auto" if defaults else bs, "cap": paper_leaf_cap(d), "target": target,
            "ll": float(np.mean(lls)), "ll_se": se(lls), "ll_sd": sd(lls), "time": float(np.mean(times)),
            "time_se": se(times), "cpu": float(np.mean(cpus)), "pps": float(np.sum(npts) / np.sum(times)),
            "size": float(np.mean(sizes)), "size_se": se(sizes), "n_train": int(np.mean(npts)),
            "folds": len(lls), "per_fold": lls, "chosen": chosen}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--datasets", nargs="+", default=list(SETTINGS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-merge", type=int, default=None,
                    help="min_merge_points (default: the learner's, max(10, batch size))")
    ap.add_argument("--spaced", action="store_true",
                    help="space a product's tests by min_merge_points * (merges + 1) (spaced_merges=True)")
    ap.add_argument("--folds", type=int, nargs="+", default=None,
                    help="test folds to run (1..10; default all ten)")
    ap.add_argument("--defaults", action="store_true",
                    help="OSLRAU() with every parameter at its default (a user's first run)")
    ap.add_argument("--select", action="store_true",
                    help='OSLRAU(select="auto"): floor and spacing chosen in the same single pass, prequentially')
    ap.add_argument("--race-after", type=int, default=100_000,
                    help="with --select: only the leader keeps learning after this many points (0: no race)")
    ap.add_argument("--max-nodes", default="default",
                    help="with --defaults: max_nodes (none: no cap; default: the learner's default)")
    ap.add_argument("--max-train", type=int, default=None,
                    help="stream only the first N training points of each fold (for traces; not a benchmark)")
    ap.add_argument("--paper-floor", action="store_true",
                    help='floor leaf variances only when a leaf is created (variance_floor="creation")')
    ap.add_argument("--min-var", type=float, default=None,
                    help="leaf variance floor (min_var; default 1e-6, or 1e-4 with --paper-floor)")
    ap.add_argument("--out", type=Path, default=None, help="write a Markdown table here")
    args = ap.parse_args(argv)
    max_nodes = {"default": "default", "none": None}.get(args.max_nodes) if args.max_nodes in ("default", "none") \
        else int(args.max_nodes)
    rows = []
    for name in args.datasets:
        min_var = args.min_var if args.min_var is not None else (1e-4 if args.paper_floor else 1e-6)
        r = run_dataset(args.data, name, args.seed, args.min_merge, args.spaced, min_var,
                        [k - 1 for k in args.folds] if args.folds else None, args.select,
                        "creation" if args.paper_floor else "always", args.defaults,
                        args.race_after or None, args.max_train, max_nodes)
        rows.append(r)
        print(f"{name:9s} d={r['d']} batch={r['batch']} cap={r['cap']}: test LL {r['ll']:.2f} ± {r['ll_se']:.2f} "
              f"(paper {r['target']:.2f}), {r['time']:.3f} s/fold (CPU {r['cpu']:.3f} s), {r['pps']:,.0f} points/s, "
              f"{r['size']:.0f} nodes; per fold " + " ".join(f"{v:.2f}" for v in r["per_fold"])
              + (f"; candidates chosen per fold {r['chosen']} of {list(AUTO_CANDIDATES)}" if args.select else ""),
              flush=True)
    if args.out:
        cmd = "python tools/bench_oslrau.py " + " ".join(argv if argv is not None else sys.argv[1:])
        lines = [
            "| dataset | vars | batch | leaf cap | train points/fold | test LL (mean ± s.e.) | s.d. | folds | "
            "paper (Table 1, mean ± s.d.) | time/fold (s) | CPU/fold (s) | points/s | SPN nodes |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['name']} | {r['d']} | {r['batch']} | {r['cap']} | {r['n_train']:,} | "
                         f"{r['ll']:.2f} ± {r['ll_se']:.2f} | {r['ll_sd']:.2f} | {r['folds']} | {r['target']:.2f} | {r['time']:.3f} ± {r['time_se']:.3f} | {r['cpu']:.3f} | "
                         f"{r['pps']:,.0f} | {r['size']:.0f} ± {r['size_se']:.0f} |")
        args.out.write_text("\n".join(lines) + "\n")
        print(f"\ncommand: {cmd}\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
