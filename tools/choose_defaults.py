"""Choose LearnSPN's default hyper-parameters from evidence across the shared binary sets.

Every configuration of a small grid is fitted on each set's training split and scored on
its validation split (never test). Configurations are ranked per set by validation
log-likelihood; the default is the configuration with the best mean rank, which favours
settings that are good everywhere over settings that win one set. Prints one row per
configuration (mean rank, per-set validation LL) and the winner.

``--grid NAME=V1,V2`` replaces a parameter's values. ``--within NAME`` ranks only among
configurations sharing that parameter's value (each set and value is one ranking), so the
winner of the other parameters is the setting that is best whatever a user picks for NAME
(e.g. the ``g_factor`` default that holds up both at ``min_instances`` 50 and 200).

    python tools/choose_defaults.py [--data ../shared/data] [--sets nltcs plants ...]
        [--grid g_factor=5,10,20 min_instances=50,200 alpha=0.1] [--within min_instances]
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from spnc.learn import LearnSPN  # noqa: E402
from _datadir import default_data  # noqa: E402

SETS = ["nltcs", "plants", "baudio", "jester", "bnetflix", "accidents", "mushrooms", "nips"]
GRID = {"min_instances": [10, 50, 200], "alpha": [0.1, 1.0], "g_factor": [5.0, 10.0]}


def _value(text: str):
    """'200' -> 200, '0.1' -> 0.1, 'chowliu' -> 'chowliu'."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=default_data())
    ap.add_argument("--sets", nargs="+", default=SETS)
    ap.add_argument("--grid", nargs="*", default=[], help="NAME=V1,V2 replacing GRID's values")
    ap.add_argument("--within", default=None, help="rank only among configurations sharing this value")
    a = ap.parse_args(argv)
    grid = dict(GRID)
    for item in a.grid:
        k, v = item.split("=")
        grid[k] = [_value(x) for x in v.split(",")]
    keys = list(grid)
    configs = [dict(zip(keys, c)) for c in itertools.product(*grid.values())]
    scores = np.full((len(configs), len(a.sets)), -np.inf)
    for j, name in enumerate(a.sets):
        tr, va = (np.loadtxt(a.data / "binary" / f"{name}.{s}.data", delimiter=",") for s in ("train", "valid"))
        for i, c in enumerate(configs):
            scores[i, j] = LearnSPN(random_state=0, n_threads=1, **c).fit(tr).score(va)
        print(f"{name}: best {configs[int(np.argmax(scores[:, j]))]}", file=sys.stderr, flush=True)
    ranks = (-scores).argsort(axis=0).argsort(axis=0) + 1
    if a.within:     # rank within each group of configurations sharing the held value
        held = np.array([c[a.within] for c in configs])
        for v in np.unique(held):
            g = held == v
            ranks[g] = (-scores[g]).argsort(axis=0).argsort(axis=0) + 1
        others = [k for k in keys if k != a.within]
        combos = sorted({tuple(c[k] for k in others) for c in configs})
        for combo in combos:
            sel = [i for i, c in enumerate(configs) if tuple(c[k] for k in others) == combo]
            print(f"{dict(zip(others, combo))}: mean rank {ranks[sel].mean():.2f} over sets x {a.within}")
    mean_rank = ranks.mean(axis=1)
    print("| " + " | ".join(keys) + " | mean rank | " + " | ".join(a.sets) + " |")
    print("|" + "---|" * (len(keys) + 1 + len(a.sets)))
    for i in np.argsort(mean_rank):
        print("| " + " | ".join(str(configs[i][k]) for k in keys) + f" | {mean_rank[i]:.2f} | "
              + " | ".join(f"{v:.3f}" for v in scores[i]) + " |")
    print(f"\nchosen defaults: {configs[int(np.argmin(mean_rank))]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
