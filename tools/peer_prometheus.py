"""spnc's Prometheus next to the Prometheus of SPFlow's legacy source tree, on the same
continuous folds, each learner with its defaults. One JSON line per fold and per set.

    python tools/peer_prometheus.py --legacy-src DIR [--sets qu banknote] [--folds 1 2 3]

The peer is not in any SPFlow release (0.0.41 has no ``spn.structure.prometheus``); it is
in the repository's history, last at commit 9cb6953b (``src/spn/structure/prometheus``:
``data.py``, ``disc.py``, ``nodes.py``). Export those three files into
``DIR/spn/structure/prometheus/`` and point ``--legacy-src`` (or ``SPFLOW_LEGACY_SRC``) at
``DIR``. The peer runs in SPFlow 0.0.41's interpreter (``--peer-python``, default
``/tmp/peers/spflow/bin/python``), which provides the rest of ``spn``, scikit-learn and
networkx; its model comes back as SPFlow text and is scored there with SPFlow's
``log_likelihood``. When the source or the interpreter is missing the script says so
and exits 0.

Protocol: fold K of ``continuous/NAME/NAME.K.data`` is the test set; of the other nine,
the first nine tenths train both learners. spnc also gets the last tenth as ``X_valid``
(it stops the running average on it); the peer has no use for validation data. The peer
is called as its own driver calls it (``prometheus(data, 1)``: univariate leaves,
``maxsize=16``, ``maxprods=8``, one pass of its per-row online update;
``--peer-passes 0`` skips the update), seeded per fold.
Times are wall-clock seconds of one fit, single-threaded, in separate processes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from spnc.learn import Prometheus  # noqa: E402
from _datadir import default_data  # noqa: E402

DATA = default_data()

# Runs in the peer's interpreter: argv = legacy source dir, .npz with tr/te, seed, itermult.
_WORKER = r"""
import contextlib, io, json, sys, time
import numpy as np
import networkx as nx
if not hasattr(nx, "connected_component_subgraphs"):      # removed in networkx 2.4
    nx.connected_component_subgraphs = lambda G: (G.subgraph(c).copy() for c in nx.connected_components(G))
import spn.structure
spn.structure.__path__.append(sys.argv[1] + "/spn/structure")
from spn.structure.prometheus.disc import prometheus
from spn.io.Text import str_to_spn
from spn.algorithms.Inference import log_likelihood
from spn.structure.Base import get_nodes_by_type
sys.setrecursionlimit(100000)
d = np.load(sys.argv[2])
np.random.seed(int(sys.argv[3]))
t = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    text = prometheus(d["tr"], 1, itermult=int(sys.argv[4]))
fit = time.perf_counter() - t
model = str_to_spn(text)
ll = log_likelihood(model, d["te"].astype(np.float64)).ravel()
print(json.dumps({"seconds": fit, "test": float(np.mean(ll)), "nodes": len(get_nodes_by_type(model))}))
"""


def run_peer(python: str, src: str, tr: np.ndarray, te: np.ndarray, seed: int, timeout: float,
             passes: int = 1) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fold.npz")
        np.savez(path, tr=tr, te=te)
        try:
            out = subprocess.run([python, "-c", _WORKER, src, path, str(seed), str(passes)], capture_output=True, text=True,
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"no model within {timeout:.0f} s"}
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="+", default=["qu", "banknote"])
    ap.add_argument("--folds", nargs="+", type=int, default=list(range(1, 11)))
    ap.add_argument("--legacy-src", default=os.environ.get("SPFLOW_LEGACY_SRC"))
    ap.add_argument("--peer-python", default="/tmp/peers/spflow/bin/python")
    ap.add_argument("--peer-passes", type=int, default=1,
                    help="passes of the peer's online update (its itermult; 0: counts only)")
    ap.add_argument("--peer-timeout", type=float, default=600.0, help="seconds per peer fit")
    a = ap.parse_args(argv)
    src = a.legacy_src
    if not src or not (Path(src) / "spn" / "structure" / "prometheus" / "disc.py").is_file():
        print(f"skip: no SPFlow legacy Prometheus source under {src!r} (see --legacy-src)")
        return 0
    if not Path(a.peer_python).is_file():
        print(f"skip: no peer interpreter at {a.peer_python}")
        return 0
    for name in a.sets:
        F = [np.loadtxt(DATA / "continuous" / name / f"{name}.{k}.data", delimiter=",") for k in range(1, 11)]
        per = {"spnc": [], "peer": [], "spnc_s": [], "peer_s": []}
        for k in a.folds:
            train = np.concatenate([f for j, f in enumerate(F) if j != k - 1])
            cut = int(0.9 * len(train))
            tr, va, te = train[:cut], train[cut:], F[k - 1]
            t = time.perf_counter()
            m = Prometheus(random_state=k, n_threads=1).fit(tr, X_valid=va)
            secs = time.perf_counter() - t
            peer = run_peer(a.peer_python, src, tr, te, k, a.peer_timeout, a.peer_passes)
            row = {"set": name, "fold": k, "spnc": m.score(te), "spnc_seconds": secs, "spnc_nodes": m.spn_.n_nodes,
                   "peer": peer}
            print(json.dumps(row), flush=True)
            per["spnc"].append(row["spnc"])
            per["spnc_s"].append(secs)
            if "test" in peer:
                per["peer"].append(peer["test"])
                per["peer_s"].append(peer["seconds"])
        summary = {"set": name, "folds": a.folds, **{key: float(np.mean(v)) if v else None for key, v in per.items()},
                   "peer_folds_ok": len(per["peer"])}
        print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
