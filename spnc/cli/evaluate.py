"""spnc-eval: evaluate a saved model on a data file (log-likelihood, MPE, samples)."""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from ..errors import DataError, SpncError
from . import _data
from . import run_tool

PROG = "spnc-eval"
EXAMPLES = """\
data: CSV/TSV (header optional; NaN, ? or an empty cell = missing), .npy, or HDF5
      with --dataset NAME. Columns follow the model's variables (reordered by name
      when the header and the model both have names).

examples:
  spnc-eval model.h5 test.csv                      mean and standard error of log p(x)
  spnc-eval model.h5 test.csv --out-ll ll.txt      also write one log-likelihood per row
  spnc-eval model.json data.h5 --dataset /test     data from an HDF5 dataset
  spnc-eval model.h5 test.csv --query 0,1 --evidence 2-5   log p(X0,X1 | X2..X5)
  spnc-eval model.h5 partial.csv --mpe completed.csv       fill missing values (MPE)
  spnc-eval model.h5 --sample 1000 --out samples.npy --seed 7

exit status: 0 success, 2 bad input (one line "spnc-eval: error: ...")
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Evaluate an spnc model on data: mean and standard error of "
        "the log-likelihood, per-row values, MPE completions or samples.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model file (.h5, .hdf5 or .json)")
    p.add_argument("data", nargs="?", help="data file (.csv, .tsv, .txt, .npy, .h5)")
    p.add_argument("--dataset", help="dataset name inside an HDF5 data file")
    p.add_argument("--delimiter", help="text delimiter (default: ',' or tab for .tsv)")
    hdr = p.add_mutually_exclusive_group()
    hdr.add_argument("--header", dest="header", action="store_const", const=True, default=None,
                     help="the first text line is a header (default: guessed)")
    hdr.add_argument("--no-header", dest="header", action="store_const", const=False)
    p.add_argument("--query", help="columns to score (names or indices, e.g. 0,2,5-7)")
    p.add_argument("--evidence", help="columns to condition on; scores log p(query | evidence)")
    p.add_argument("--out-ll", metavar="FILE", help="write per-row log-likelihoods (.npy or text)")
    p.add_argument("--mpe", metavar="OUT", help="write the data with missing values filled by MPE")
    p.add_argument("--sample", type=int, metavar="N", help="draw N samples from the model")
    p.add_argument("--out", metavar="FILE", help="where --sample writes (.npy, .csv, .tsv)")
    p.add_argument("--seed", type=int, default=None, help="random seed for --sample")
    p.add_argument("--chunk-rows", type=int, default=100_000, help="rows per batch (progress unit)")
    p.add_argument("--n-threads", type=int, default=None, help="threads for inference")
    p.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, _parser(), _run, argv)


class _Progress:
    def __init__(self, total: int, quiet: bool):
        self.total, self.quiet, self.t0 = total, quiet, time.monotonic()

    def __call__(self, done: int) -> None:
        if not self.quiet:
            pct = 100.0 * done / max(self.total, 1)
            print(f"{PROG}: {done}/{self.total} rows ({pct:.0f}%, "
                  f"{time.monotonic() - self.t0:.1f} s)", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    from .. import io
    if args.data is None and args.sample is None:
        raise SpncError("give a DATA file, or --sample N")
    if args.sample is not None and not args.out:
        raise SpncError("--sample needs --out FILE")
    if args.sample is not None and args.sample < 0:
        raise SpncError("--sample needs N >= 0")
    if args.chunk_rows < 1:
        raise SpncError("--chunk-rows must be positive")
    model = io.load(args.model)
    names = model.var_names
    if args.data is not None:
        X, header = _data.read_table(args.data, dataset=args.dataset, delimiter=args.delimiter,
                                     header=args.header)
        X = _data.align_columns(X, header, names, model.n_vars, args.data)
        ll = _loglik(model, X, args)
        _report(ll, X, args)
        if args.out_ll:
            _data.write_table(args.out_ll, ll)
        if args.mpe:
            filled = _chunked(lambda Z: model.mpe(Z, n_threads=args.n_threads)[0], X, args)
            _data.write_table(args.mpe, filled, names)
    if args.sample is not None:
        S = model.sample(args.sample, seed=args.seed, n_threads=args.n_threads)
        _data.write_table(args.out, S, names)
        print(f"wrote {args.sample} samples to {args.out}")
    return 0


def _chunked(fn, X: np.ndarray, args: argparse.Namespace) -> np.ndarray:
    n, step = len(X), args.chunk_rows
    prog = _Progress(n, args.quiet or n <= step)
    parts = []
    for r0 in range(0, n, step):
        parts.append(fn(X[r0:r0 + step]))
        if n > step:
            prog(min(r0 + step, n))
    if not parts:
        return fn(X)
    return np.concatenate(parts, axis=0)


def _loglik(model, X: np.ndarray, args: argparse.Namespace) -> np.ndarray:
    nt = args.n_threads
    if args.query is None and args.evidence is None:
        return _chunked(lambda Z: model.log_likelihood(Z, n_threads=nt), X, args)
    V = model.n_vars
    ev = _data.parse_columns(args.evidence, model.var_names, V) if args.evidence else []
    if args.query is not None:
        q = _data.parse_columns(args.query, model.var_names, V)
    else:
        q = [c for c in range(V) if c not in ev]
    if set(q) & set(ev):
        raise DataError(f"columns {sorted(set(q) & set(ev))} are both query and evidence")
    if not q:
        raise DataError("no query columns")
    keep_qe = np.zeros(V, dtype=bool)
    keep_qe[q + ev] = True
    keep_e = np.zeros(V, dtype=bool)
    keep_e[ev] = True
    Xq = np.where(keep_qe, X, np.nan)
    joint = _chunked(lambda Z: model.log_likelihood(Z, n_threads=nt), Xq, args)
    if not ev:
        return joint
    Xe = np.where(keep_e, X, np.nan)
    return joint - _chunked(lambda Z: model.log_likelihood(Z, n_threads=nt), Xe, args)


def _report(ll: np.ndarray, X: np.ndarray, args: argparse.Namespace) -> None:
    n = len(ll)
    miss = int(np.isnan(X).any(axis=1).sum()) if X.size else 0
    print(f"rows: {n} ({miss} with missing values)")
    cols = ll.reshape(n, -1)
    for j in range(cols.shape[1]):
        v = cols[:, j]
        tag = "" if cols.shape[1] == 1 else f" [root {j}]"
        if n == 0:
            print(f"mean log-likelihood{tag}: nan (no rows)")
            continue
        zero = int(np.sum(v == -np.inf))
        mean = float(np.mean(v))
        se = float(np.std(v, ddof=1) / math.sqrt(n)) if n > 1 and np.isfinite(mean) else float("nan")
        extra = f"; {zero} rows have probability 0" if zero else ""
        print(f"mean log-likelihood{tag}: {mean:.6f} +- {se:.6f} (standard error){extra}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
