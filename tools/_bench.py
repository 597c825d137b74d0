"""Set-up shared by the benchmarks on the binary sets: one thread per library (timings
are single-threaded unless a script says otherwise), spnc importable from the
repository, and the fixed train/valid/test splits of ``binary/`` under ``$SPNC_DATA`` or
``../shared/data`` (:func:`default_data`).
Import it before numpy."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
from _datadir import default_data, tried  # noqa: E402

DEFAULT_DATA = default_data()
SETS = ["nltcs", "plants", "baudio", "jester", "bnetflix", "accidents"]


def load(root: Path, name: str, dtype=np.uint8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(train, valid, test)`` of the binary set ``name`` under ``root``; exits with a
    message naming the missing file (and where the default looked) when it is absent."""
    files = [Path(root) / "binary" / f"{name}.{s}.data" for s in ("train", "valid", "test")]
    for f in files:
        if not f.is_file():
            sys.exit(f"benchmark data not found: {f}\n({tried()})")
    return tuple(np.loadtxt(f, delimiter=",", dtype=dtype) for f in files)


def best_time(f, repeat: int, clock=time.perf_counter) -> float:
    """The shortest of ``repeat`` timings of ``f()`` by ``clock``."""
    ts = []
    for _ in range(repeat):
        t0 = clock()
        f()
        ts.append(clock() - t0)
    return min(ts)
