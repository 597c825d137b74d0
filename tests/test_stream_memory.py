"""Streaming EM and Chow-Liu over a file at least twice the memory the learner may use:
the learner runs in a subprocess whose address space is capped (``RLIMIT_AS``) at its own
size after start-up plus ``HEADROOM``; the file holds more than twice ``HEADROOM``. The
parameters must equal the in-memory path's."""
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

HEADROOM = 160 << 20          # bytes the learner may allocate beyond its start-up size
N_VARS = 64                   # many columns, small model: many bytes per unit of work
N_ROWS = (2 * HEADROOM + (24 << 20)) // (8 * N_VARS)   # float64 file > 2 x HEADROOM
EM_KW = dict(max_iter=2, tol=-np.inf, alpha=0.5, n_threads=1)

CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import spnc
    from spnc.chowliu import fit_chow_liu
    from spnc.learn.em import EM

    spec, model_path, out_model, out_cl, headroom, file_bytes, kw = sys.argv[1:]
    kw = json.loads(kw)
    init = spnc.load(model_path)
    # warm-up on a few rows: code paths loaded and thread pools started before measuring
    small = init.sample(500, seed=0)
    EM(init=init, **kw).fit(small)
    fit_chow_liu(small)

    def vm(field="VmSize"):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    limit = vm() + int(headroom)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:                                   # the data itself cannot be held in memory
        np.ones(int(file_bytes) // 8)
        print(json.dumps({"error": "the memory limit is not enforced"}))
        sys.exit(0)
    except MemoryError:
        pass
    em = EM(init=init, **kw).fit(spec)
    cl = fit_chow_liu(spec, alpha=0.5)
    spnc.save(em.spn_, out_model)
    np.savez(out_cl, parents=cl.parents, mi=cl.mi, cardinality=cl.cardinality, *cl.cpts)
    # VmPeak / VmHWM: peak address space / resident memory of this program (reset by exec)
    print(json.dumps({"limit": limit, "vm_peak": vm("VmPeak"), "rss_peak": vm("VmHWM"),
                      "headroom": int(headroom)}))
""")


def test_streaming_em_and_chow_liu_under_memory_limit(tmp_path):
    rng = np.random.default_rng(0)
    p = rng.uniform(0.1, 0.9, size=(2, N_VARS))          # two latent classes
    z = rng.random(N_ROWS) < 0.4
    X = (rng.random((N_ROWS, N_VARS)) < p[z.astype(np.int64)]).astype(np.float64)
    init = spnc.compile(spnc.Sum([spnc.Product([spnc.Bernoulli(j, float(q)) for j, q in enumerate(row)])
                                  for row in rng.uniform(0.2, 0.8, size=(3, N_VARS))], [0.3, 0.3, 0.4]))
    spec = f"{tmp_path / 'big.h5'}:/X"
    with h5py.File(tmp_path / "big.h5", "w") as f:
        f.create_dataset("X", data=X, chunks=(1 << 14, N_VARS))
    file_bytes = os.path.getsize(tmp_path / "big.h5")
    assert file_bytes >= 2 * HEADROOM
    spnc.save(init, str(tmp_path / "init.spn.h5"))
    env = dict(os.environ, MALLOC_ARENA_MAX="2", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(spnc.__file__)),
                                         env.get("PYTHONPATH", "")])
    args = [sys.executable, "-c", CHILD, spec, str(tmp_path / "init.spn.h5"), str(tmp_path / "em.spn.h5"),
            str(tmp_path / "cl.npz"), str(HEADROOM), str(file_bytes), json.dumps(EM_KW)]
    run = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    rep = json.loads(run.stdout.strip().splitlines()[-1])
    assert "error" not in rep, rep
    print("memory test:", rep, "file bytes", file_bytes)
    assert file_bytes >= 2 * rep["headroom"] and rep["vm_peak"] <= rep["limit"]

    ref = EM(init=init, **EM_KW).fit(X).spn_
    got = spnc.load(str(tmp_path / "em.spn.h5"))
    assert np.allclose(got.weight, ref.weight, rtol=1e-9, atol=1e-13)
    for k, t in ref.leaf_tables.items():
        for name, v in t.to_arrays().items():
            assert np.allclose(v, got.leaf_tables[k].to_arrays()[name], rtol=1e-9, atol=1e-13)
    cl = np.load(tmp_path / "cl.npz")
    cref = fit_chow_liu(X, alpha=0.5)
    assert np.array_equal(cl["parents"], cref.parents) and np.array_equal(cl["mi"], cref.mi)
    for j, c in enumerate(cref.cpts):
        assert np.array_equal(cl[f"arr_{j}"], c)
