"""Each library's LearnSPN with its defaults, on the shared binary sets, in the same run.

Per set, one after the other: SPFlow's ``learn_parametric`` with its defaults (RDC column
split, k-means rows, ``min_instances_slice=200``, seed 17; ``tools/peer_learnspn.py``
documents it), spnc's ``LearnSPN(min_instances=M)`` with every other parameter at its
default (``M`` = SPFlow's 200 unless ``--min-instances`` says otherwise), and spnc's
``LearnSPN()`` exactly as a user gets it. spnc is seeded (``random_state=0``) so the run
can be repeated; nothing is chosen, so the validation split is only reported. Each set's
row is printed and merged into ``--json`` (keyed by set) as soon as it is measured, so a
long peer run can be split with ``--sets``.

    OMP_NUM_THREADS=1 nice -n 5 python tools/bench_defaults.py --peers /tmp/peers \\
        --sets nltcs --json defaults.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _bench  # noqa: F401  (threads, import path; before numpy)
from _bench import DEFAULT_DATA, SETS, load  # noqa: E402
from bench_learnspn import peer_run  # noqa: E402
import spnc  # noqa: E402
from spnc.learn import LearnSPN  # noqa: E402


def spnc_row(model: LearnSPN, tr, va, te) -> dict:
    t = time.perf_counter()
    model.fit(tr)
    fit = time.perf_counter() - t
    return {"fit_seconds": fit, "train_ll": model.score(tr), "valid_ll": model.score(va),
            "test_ll": model.score(te), "n_edges": int(len(model.spn_.child))}


def measure(name: str, a) -> dict:
    tr, va, te = load(a.data, name)
    row = {"set": name, "min_instances": a.min_instances, "spnc_version": getattr(spnc, "__version__", None)}
    py = a.peers / "spflow" / "bin" / "python" if a.peers else None
    if py is not None and py.exists():
        args = ["spflow", str(a.data / "binary"), name, "--min-instances", str(a.min_instances)]
        row["spflow"] = peer_run(py, args)
    else:
        print(f"no SPFlow venv under {a.peers}; spnc only", file=sys.stderr)
    row["spnc_same_min"] = spnc_row(LearnSPN(min_instances=a.min_instances, random_state=0), tr, va, te)
    row["spnc_default"] = spnc_row(LearnSPN(random_state=0), tr, va, te)
    return row


def markdown(rows: dict) -> str:
    """The table of every measured set (in the order of ``SETS``) from the merged JSON."""
    L = ["| set | min_instances | SPFlow test LL | SPFlow s | spnc test LL | spnc s | spnc `LearnSPN()` test LL "
         "| spnc `LearnSPN()` s | spnc - SPFlow |", "|---|---|---|---|---|---|---|---|---|"]
    order = {n: i for i, n in enumerate(SETS)}
    for r in sorted(rows.values(), key=lambda r: (order.get(r["set"], 99), r["min_instances"])):
        p, s, d = r.get("spflow") or {}, r["spnc_same_min"], r["spnc_default"]
        peer = f"{p['test_ll']:.3f} | {p['fit_seconds']:.1f}" if "test_ll" in p else "– | –"
        diff = f"{s['test_ll'] - p['test_ll']:+.3f}" if "test_ll" in p else "–"
        L.append(f"| {r['set']} | {r['min_instances']} | {peer} | {s['test_ll']:.3f} | {s['fit_seconds']:.2f} | "
                 f"{d['test_ll']:.3f} | {d['fit_seconds']:.2f} | {diff} |")
    return "\n".join(L)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--sets", nargs="+", default=SETS)
    ap.add_argument("--peers", type=Path, default=None, help="directory of peer venvs (peer-venvs.sh)")
    ap.add_argument("--min-instances", type=int, default=200, help="shared minimum slice size (SPFlow's default)")
    ap.add_argument("--json", type=Path, default=None, help="merge each set's row into this file")
    ap.add_argument("--markdown", action="store_true", help="print the table of --json and stop")
    a = ap.parse_args(argv)
    if a.markdown:
        print(markdown(json.loads(a.json.read_text())))
        return 0
    if not (a.data / "binary").is_dir():
        print(f"no data under {a.data}; nothing to do", file=sys.stderr)
        return 0
    for name in a.sets:
        row = measure(name, a)
        print(json.dumps(row), flush=True)
        if a.json:
            old = json.loads(a.json.read_text()) if a.json.exists() else {}
            old[f"{name}@{a.min_instances}"] = row
            a.json.write_text(json.dumps(old, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
