"""Corrupt saved models byte by byte: every corruption must be refused with FormatError or
leave the model's content hash valid (no silently changed model, formats/spnc-hdf5.md §11).

    python tools/fuzz_format.py [--cases 10000] [--seed 0] [--files PATTERN ...]

Sources: the example models (as spnc saves them: chunked, fletcher32, HDF5 and JSON) and the
hashed valid models of the conformance suite (contiguous, unchecksummed HDF5). Each case
changes 1-8 random bytes, flips one bit, zeroes a 16-byte run or truncates the file. Cases
run in a child process so that a libhdf5 crash is caught and reported, not fatal. Prints
counts per outcome and the time taken; exits 1 on a crash, another exception or a silently
changed model.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["formats/examples/*.h5", "formats/examples/*.json",
           "formats/conformance/valid/*.h5", "formats/conformance/valid/*.json"]


def sources(patterns: list[str]) -> list[Path]:
    """Files that carry a content hash (saved by a 1.1 writer)."""
    import warnings
    import spnc.io as sio
    warnings.simplefilter("ignore")
    out = []
    for pat in patterns:
        for p in sorted(glob.glob(str(ROOT / pat))):
            try:
                if "content_hash" in sio.read_validated(p).tree.attrs:
                    out.append(Path(p))
            except Exception:
                pass
    return out


def corrupt(src: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(src)
    op = rng.random()
    if op < 0.1:
        return bytes(b[: int(rng.integers(len(b)))])
    if op < 0.3:
        i = int(rng.integers(len(b)))
        b[i] ^= 1 << int(rng.integers(8))
    elif op < 0.4:
        i = int(rng.integers(len(b)))
        b[i:i + 16] = bytes(len(b[i:i + 16]))
    else:
        for _ in range(int(rng.integers(1, 9))):
            b[int(rng.integers(len(b)))] = int(rng.integers(256))
    return bytes(b)


def worker(files: list[str], seed: int, start: int, count: int) -> None:
    """Run cases start..start+count-1; one line per case: '<i> <outcome> <detail>'."""
    import warnings
    import spnc.io as sio
    from spnc.errors import FormatError
    from spnc.io._hash import content_hash
    from spnc.io._model import model_from_validated
    warnings.simplefilter("ignore")
    srcs = [(Path(f), Path(f).read_bytes(), sio.read_validated(f).tree.attrs["content_hash"]) for f in files]
    tmpdir = tempfile.mkdtemp(prefix="fuzz_format_")
    for i in range(start, start + count):
        rng = np.random.default_rng([seed, i])
        path, raw, want = srcs[int(rng.integers(len(srcs)))]
        out = os.path.join(tmpdir, "case" + path.suffix)
        with open(out, "wb") as f:
            f.write(corrupt(raw, rng))
        print(i, "start", path.name, flush=True)
        try:
            v = sio.read_validated(out)
            model_from_validated(v)
            got = content_hash(v.tree)
            res = "same" if got == want and v.tree.attrs.get("content_hash") == want else "CHANGED"
        except FormatError:
            res = "refused"
        except Exception as e:  # noqa: BLE001
            res = f"OTHER {type(e).__name__}: {str(e)[:120]}"
        print(i, res, path.name, flush=True)
    print("done", flush=True)


def run(files: list[Path], cases: int, seed: int, timeout: float = 60.0) -> dict:
    counts: dict[str, int] = {"refused": 0, "same": 0}
    bad: list[str] = []
    i = 0
    while i < cases:
        cmd = [sys.executable, __file__, "--worker", str(seed), str(i), str(cases - i), "--files",
               *map(str, files)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
        last, started = i, time.time()
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split(maxsplit=2)
            if parts[0] == "done":
                break
            k, res = int(parts[0]), parts[1]
            if res == "start":
                last, started = k, time.time()
                continue
            counts[res] = counts.get(res, 0) + 1
            if res not in ("refused", "same"):
                bad.append(line.strip())
            i = k + 1
        rc = proc.wait()
        if i < cases and (rc != 0 or i == last):   # the child died on case `last`
            counts["CRASH"] = counts.get("CRASH", 0) + 1
            bad.append(f"{last} CRASH rc={rc}")
            i = last + 1
        _ = started, timeout
    counts["bad"] = bad  # type: ignore[assignment]
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--files", nargs="*", default=None)
    ap.add_argument("--worker", nargs=3, type=int, metavar=("SEED", "START", "COUNT"))
    a = ap.parse_args(argv)
    if a.worker:
        worker(a.files, *a.worker)
        return 0
    files = [Path(f) for f in a.files] if a.files else sources(DEFAULT)
    t0 = time.time()
    res = run(files, a.cases, a.seed)
    dt = time.time() - t0
    bad = res.pop("bad")
    print(json.dumps({"cases": a.cases, "files": len(files), "seconds": round(dt, 1),
                      "ms_per_case": round(1000 * dt / max(a.cases, 1), 2), **res}))
    for line in bad[:20]:
        print("  ", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
