"""Dask backend: speed-up with 1, 2 and 4 workers and the overhead per chunk, against the
in-memory single-thread path measured in the same run.

    python tools/bench_scale.py [--rows 1000000] [--chunk 62500] [--workers 1,2,4]

Per task (log-likelihood, Chow-Liu counts, one EM pass) it prints the in-memory time, the
time on a local cluster of k single-threaded worker processes (data persisted on the
workers, so the time is compute plus scheduling, not the transfer from the client), the
ratio in-memory / cluster (the speed-up), and the scheduling overhead per chunk (a no-op
map-reduce over the same chunks). Also the per-row cost that docs/scale.md projects from.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import spnc  # noqa: E402
from spnc import dask as sd  # noqa: E402
from spnc.chowliu import fit_chow_liu  # noqa: E402
from spnc.learn.em import EM  # noqa: E402


def model(n_vars: int, seed: int) -> spnc.SPN:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from conftest import random_spn
    return spnc.compile(random_spn(np.random.default_rng(seed), [2] * n_vars, depth=4, leaf="bernoulli"))


def best(f, reps: int) -> float:
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t.append(time.perf_counter() - t0)
    return min(t)


def _noop(block, r0, ctx):
    return np.zeros(1)


def tasks(init, X):
    em_kw = dict(init=init, max_iter=1, tol=-np.inf, n_threads=1)   # 2 passes: E-step + final objective
    return {
        "log_likelihood": (lambda A: init.log_likelihood(A, n_threads=1),
                           lambda D: sd.log_likelihood(init, D, n_threads=1), 1),
        "chow_liu": (lambda A: fit_chow_liu(A, n_threads=1), lambda D: fit_chow_liu(D, n_threads=1), 1),
        "em_pass": (lambda A: EM(**em_kw).fit(A), lambda D: EM(**em_kw).fit(D), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--vars", type=int, default=32)
    ap.add_argument("--chunk", type=int, default=62_500)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--json", default=None, help="also write the figures here")
    ap.add_argument("--malloc", choices=["dask", "tuned"], default="tuned",
                    help="worker malloc settings: Dask's nanny default (MALLOC_TRIM_THRESHOLD_=65536, which "
                         "makes every multi-MB buffer a fresh mmap) or larger trim/mmap thresholds")
    a = ap.parse_args()
    import dask
    import dask.array as da
    if a.malloc == "tuned":
        dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": 1 << 27,
                         "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": 1 << 26})
    from distributed import Client, LocalCluster
    # the set-up ships the data to the workers once, inside the graph; that is intended here
    warnings.filterwarnings("ignore", message="Sending large graph")

    truth, init = model(a.vars, 0), model(a.vars, 1)
    X = truth.sample(a.rows, seed=0)
    Xu = X.astype(np.uint8)
    n_chunks = -(-a.rows // a.chunk)
    load0 = os.getloadavg()
    print(f"{a.rows} rows x {a.vars} binary variables, {n_chunks} chunks of {a.chunk} rows; "
          f"model {init.n_nodes} nodes, {init.n_edges} edges; {os.cpu_count()} cores; worker malloc: {a.malloc}; "
          f"load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
    T = tasks(init, X)
    ref = {}
    for name, (mem, _, passes) in T.items():
        data = Xu if name == "chow_liu" else X
        ref[name] = best(lambda: mem(data), a.reps) / passes
    out = {"rows": a.rows, "chunk": a.chunk, "ref_s": ref, "cluster": {}}
    print(f"{'task':16} {'in-memory s':>12}" + "".join(f" {k + 'w s':>9} {'x':>6}" for k in a.workers.split(",")))
    rows = {name: f"{name:16} {ref[name]:12.3f}" for name in T}
    for k in (int(v) for v in a.workers.split(",")):
        with LocalCluster(n_workers=k, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=50) as cluster, Client(cluster) as client:
            D = client.persist(da.from_array(X, chunks=(a.chunk, -1)))
            Du = client.persist(da.from_array(Xu, chunks=(a.chunk, -1)))
            client.wait_for_workers(k)
            res = {}
            for name, (_, dsk, passes) in T.items():
                data = Du if name == "chow_liu" else D
                dsk(data)                                  # warm-up: imports on the workers
                res[name] = best(lambda: dsk(data), a.reps) / passes
                rows[name] += f" {res[name]:9.3f} {ref[name] / res[name]:6.2f}"
            sd.map_reduce(_noop, D)
            ov = best(lambda: sd.map_reduce(_noop, D), a.reps) / n_chunks
            res["overhead_per_chunk_s"] = ov
            out["cluster"][k] = res
    for r in rows.values():
        print(r)
    for k, res in out["cluster"].items():
        print(f"{k} worker(s): scheduling overhead per chunk {1e3 * res['overhead_per_chunk_s']:.2f} ms "
              f"(no-op map-reduce over the same {n_chunks} chunks)")
    for name in T:
        print(f"per-row cost in memory, one thread, {name}: {1e9 * ref[name] / a.rows:.1f} ns")
    load1 = os.getloadavg()
    print(f"load average at end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    out["loadavg"] = {"start": list(load0), "end": list(load1)}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
