"""Accidents GVS (univariate leaves) around the chosen point: valid LL decides, test LL recorded."""
import json, sys, time
from pathlib import Path
import numpy as np
DEFAULT_DATA = Path("/work/shared/data")


def load(root, name):
    return tuple(np.loadtxt(root / "binary" / f"{name}.{s}.data", delimiter=",", dtype=np.uint8)
                 for s in ("train", "valid", "test"))


from spnc.learn import LearnSPN

tr, va, te = load(DEFAULT_DATA, "accidents")
base = dict(splitter="gvs", leaves="univariate", g_factor=10, min_instances=20, alpha=0.1, n_restarts=3)
variants = [dict(json.loads(a)) for a in sys.argv[1:]] or [{}]
for v in variants:
    p = dict(base, random_state=0, n_threads=1, **v)
    t = time.process_time()
    m = LearnSPN(**p).fit(tr)
    print(json.dumps({"variant": v, "valid": round(m.score(va), 4), "test": round(m.score(te), 4),
                      "cpu": round(time.process_time() - t, 1)}), flush=True)
