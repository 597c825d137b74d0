"""Streaming EM, Chow-Liu and LearnSPN (structure on a sample, a counting pass over all
rows) over a file at least twice the memory limit of the process that learns from it.

The learner runs in a subprocess whose whole address space is capped (``RLIMIT_AS``, set
before it imports anything) at ``LIMIT``: its measured size after start-up plus
``HEADROOM``. The HDF5 file (binary data as uint8) holds more than ``2 * LIMIT`` bytes.
The child's baseline is kept small (one BLAS/OpenMP thread, two malloc arenas, only the
modules streaming needs: it builds its model with ``spnc.compile`` and writes plain
``.npz``, since reading and writing model files also loads scipy) so that the file, and
the test's run time, stay modest.

The file is ``R`` copies of a base table ``X0``, each copy with its rows shuffled, so the
in-memory reference fits in this process: the in-memory path on ``X0`` with
``sample_weight=R`` sees the same sums over rows (the statistics are sums, the order of
rows does not matter), and its parameters must equal the streamed ones to the order of
floating-point additions; a skipped or repeated block would change them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest

import spnc
from spnc.chowliu import fit_chow_liu
from spnc.learn.em import EM

resource = pytest.importorskip("resource")
if not os.path.exists("/proc/self/status"):
    pytest.skip("needs /proc to measure the address space", allow_module_level=True)

HEADROOM = 96 << 20        # bytes the learner may use beyond its start-up size (one block + statistics)
N_VARS = 64
BASE_ROWS = 1 << 16        # rows of X0
EM_KW = dict(max_iter=1, tol=-np.inf, alpha=0.5, n_threads=1)   # two passes: E-step, final objective
# LearnSPN: structure on a sample, one hard-EM pass (counts) over all rows
LS_KW = dict(min_instances=2000, sample_rows=20000, refine="hard", refine_iter=1, random_state=0, n_threads=1)
# a small baseline: no BLAS or OpenMP thread pools, few malloc arenas
CHILD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
             "MALLOC_ARENA_MAX": "2"}

CHILD = textwrap.dedent("""
    import resource, sys
    limit = int(sys.argv[1])
    if limit:                                  # the whole address space, from the start
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import json
    import numpy as np
    import spnc
    from spnc.chowliu import fit_chow_liu
    from spnc.learn.em import EM
    from spnc.learn.learnspn import LearnSPN

    spec, model_path, out_em, out_cl, file_bytes, kw, ls_kw = sys.argv[2:]
    kw, ls_kw = json.loads(kw), json.loads(ls_kw)
    m = np.load(model_path)
    init = spnc.compile(spnc.Sum([spnc.Product([spnc.Bernoulli(j, float(q)) for j, q in enumerate(row)])
                                  for row in m["q"]], m["w"].tolist()))
    small = init.sample(500, seed=0).astype(np.uint8)   # warm-up: code paths loaded
    EM(init=init, **kw).fit(small)
    fit_chow_liu(small)
    LearnSPN(**dict(ls_kw, sample_rows=None)).fit(small)

    def vm(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    if not limit:                              # the probe: size after start-up
        print(json.dumps({"vm_peak": vm("VmPeak")}))
        sys.exit(0)
    try:                                       # the data cannot be held in memory
        np.ones(int(file_bytes), dtype=np.uint8)
        print(json.dumps({"error": "the memory limit is not enforced"}))
        sys.exit(0)
    except MemoryError:
        pass
    em = EM(init=init, **kw).fit(spec)
    cl = fit_chow_liu(spec, alpha=0.5)
    ls = LearnSPN(**ls_kw).fit(spec).spn_
    np.savez(out_em, weight=em.spn_.weight, **{f"{k}.{f}": v for k, t in em.spn_.leaf_tables.items()
                                                for f, v in t.to_arrays().items()})
    np.savez(out_cl, parents=cl.parents, mi=cl.mi, cardinality=cl.cardinality, *cl.cpts)
    np.savez(out_em.replace(".npz", "_ls.npz"), kind=ls.kind, child=ls.child, weight=ls.weight,
             **{f"{k}.{f}": v for k, t in ls.leaf_tables.items() for f, v in t.to_arrays().items()})
    # VmPeak / VmHWM: peak address space / resident memory of this program (reset by exec)
    print(json.dumps({"limit": limit, "vm_peak": vm("VmPeak"), "rss_peak": vm("VmHWM"),
                      "history": em.history_["train"].tolist()}))
""")


def _run_child(args: list[str], limit: int) -> dict:
    env = dict(os.environ, **CHILD_ENV)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(spnc.__file__)),
                                         env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", CHILD, str(limit)] + args, capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow          # ~30 s of CPU: four EM passes and a Chow-Liu pass over 500 MB
def test_streaming_em_and_chow_liu_under_memory_limit(tmp_path):
    rng = np.random.default_rng(0)
    p = rng.uniform(0.1, 0.9, size=(2, N_VARS))          # two latent classes
    z = rng.random(BASE_ROWS) < 0.4
    X0 = (rng.random((BASE_ROWS, N_VARS)) < p[z.astype(np.int64)]).astype(np.uint8)
    q, wts = rng.uniform(0.2, 0.8, size=(3, N_VARS)), np.array([0.3, 0.3, 0.4])
    init = spnc.compile(spnc.Sum([spnc.Product([spnc.Bernoulli(j, float(v)) for j, v in enumerate(row)])
                                  for row in q], wts.tolist()))
    np.savez(tmp_path / "init.npz", q=q, w=wts)
    path = tmp_path / "big.h5"
    spec = f"{path}:/X"
    args = [spec, str(tmp_path / "init.npz"), str(tmp_path / "em.npz"), str(tmp_path / "cl.npz"), "0",
            json.dumps(EM_KW), json.dumps(LS_KW)]

    limit = _run_child(args, 0)["vm_peak"] + HEADROOM
    reps = -(-2 * limit // X0.nbytes) + 1
    with h5py.File(path, "w") as f:                      # > 2 x limit bytes, written a copy at a time
        d = f.create_dataset("X", shape=(reps * BASE_ROWS, N_VARS), dtype=np.uint8, chunks=(1 << 14, N_VARS))
        for r in range(reps):
            d[r * BASE_ROWS:(r + 1) * BASE_ROWS] = X0[rng.permutation(BASE_ROWS)]
    file_bytes = os.path.getsize(path)
    assert file_bytes >= 2 * limit
    args[4] = str(file_bytes)
    rep = _run_child(args, limit)
    assert "error" not in rep, rep
    print("memory test:", rep, "file bytes", file_bytes)
    assert rep["limit"] == limit and file_bytes >= 2 * rep["limit"] and rep["vm_peak"] <= rep["limit"]

    w = np.full(BASE_ROWS, float(reps))
    em_ref = EM(init=init, **EM_KW).fit(X0, sample_weight=w)
    ref = em_ref.spn_
    assert np.allclose(rep["history"], em_ref.history_["train"], rtol=1e-10)
    got = np.load(tmp_path / "em.npz")
    assert np.allclose(got["weight"], ref.weight, rtol=1e-9, atol=1e-13)
    for k, t in ref.leaf_tables.items():
        for name, v in t.to_arrays().items():
            assert np.allclose(v, got[f"{k}.{name}"], rtol=1e-9, atol=1e-13)
    # LearnSPN: the structure from the sampled rows, then hard EM on all rows (as X0 weighted)
    from spnc.learn.learnspn import LearnSPN
    from spnc.learn._sample import sample_index
    with h5py.File(path, "r") as f:
        S = f["X"][sample_index(reps * BASE_ROWS, LS_KW["sample_rows"], LS_KW["random_state"])]
    plain = LearnSPN(**dict(LS_KW, sample_rows=None, refine="none")).fit(S).spn_
    ls_ref = EM(init=plain, variant="hard", max_iter=1, alpha=0.1, min_std=1e-2, n_threads=1).fit(
        X0.astype(np.float64), sample_weight=w).spn_
    got = np.load(tmp_path / "em_ls.npz")
    assert np.array_equal(got["kind"], ls_ref.kind) and np.array_equal(got["child"], ls_ref.child)
    assert np.allclose(got["weight"], ls_ref.weight, rtol=1e-9, atol=1e-13)
    for k, t in ls_ref.leaf_tables.items():
        for name, v in t.to_arrays().items():
            assert np.allclose(v, got[f"{k}.{name}"], rtol=1e-9, atol=1e-13)
    cl = np.load(tmp_path / "cl.npz")
    cref = fit_chow_liu(X0, sample_weight=w, alpha=0.5)
    assert np.array_equal(cl["parents"], cref.parents)
    assert np.allclose(cl["mi"], cref.mi, rtol=1e-9, atol=1e-15)
    for j, c in enumerate(cref.cpts):
        assert np.allclose(cl[f"arr_{j}"], c, rtol=1e-12, atol=1e-15)
