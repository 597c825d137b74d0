"""spnc-merge: turn a saved model into a smaller graph by merging similar sub-SPNs."""
from __future__ import annotations

import argparse
import time

import numpy as np

from ..errors import DataError, ParameterError
from . import _data
from . import run_tool

PROG = "spnc-merge"
EXAMPLES = """\
data: as for spnc-eval (CSV/TSV with optional header, .npy, or HDF5 with --dataset);
      complete rows only. MODEL may come from any learner or be written by hand.

examples:
  spnc-merge tree.h5 train.csv --valid valid.csv -o graph.h5
  spnc-merge tree.json train.csv --valid valid.csv -o graph.json --distance hellinger
  spnc-merge tree.h5 train.csv -o graph.h5 --epsilon 0.1          (no validation data)

exit status: 0 success, 2 bad input (one line "spnc-merge: error: ...")
"""

_PARAM_FLAGS = {"epsilon": "--epsilon", "distance": "--distance", "refit": "--refit", "max_iter": "--max-iter",
                "alpha": "--alpha", "max_rounds": "--max-rounds", "n_threads": "--threads"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Merge similar sub-SPNs of a model (Rahman & Gogate): smaller, "
        "faster to evaluate, re-estimated on the pooled training rows; the threshold is chosen "
        "on validation data, and the result is never worse there than the input.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model file (.h5, .hdf5 or .json)")
    p.add_argument("data", help="training data (re-estimation)")
    p.add_argument("--valid", metavar="FILE", help="validation data (choices; strongly advised)")
    p.add_argument("-o", "--output", required=True, help="merged model (.h5, .hdf5 or .json; written atomically)")
    p.add_argument("--dataset", help="dataset name inside HDF5 data files (training)")
    p.add_argument("--valid-dataset", help="dataset name inside an HDF5 validation file")
    p.add_argument("--delimiter", help="text delimiter (default: ',' or tab for .tsv)")
    p.add_argument("--epsilon", type=float, nargs="+", default=None,
                   help="distance threshold(s); several are chosen on --valid (default: 0.001 0.01 0.1 0.2 0.4)")
    p.add_argument("--distance", choices=["manhattan", "kl", "hellinger"], default="manhattan")
    p.add_argument("--refit", choices=["hard_em", "counts"], default="counts")
    p.add_argument("--max-iter", type=int, default=20, help="hard-EM passes per round")
    p.add_argument("--alpha", type=float, default=None, help="Laplace pseudo-count (default: the learner's)")
    p.add_argument("--max-rounds", type=int, default=3)
    p.add_argument("--no-chowliu-check", action="store_true", help="skip the Chow-Liu sanity check")
    p.add_argument("--threads", type=int, default=None, help="threads for inference")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, _parser(), _run, argv)


def _read(path: str, dataset: str | None, args, model) -> np.ndarray:
    X, header = _data.read_table(path, dataset=dataset, delimiter=args.delimiter)
    return _data.align_columns(X, header, model.var_names, model.n_vars, path)


def _run(args: argparse.Namespace) -> int:
    from .. import io
    from ..learn.merge import Merge, n_parameters
    model = io.load(args.model)
    X = _read(args.data, args.dataset, args, model)
    Xv = None if args.valid is None else _read(args.valid, args.valid_dataset, args, model)
    eps = args.epsilon if args.epsilon is not None else ([0.1] if Xv is None else None)
    kw = {} if eps is None else {"epsilon": eps[0] if len(eps) == 1 else list(eps)}
    est = Merge(init=model, distance=args.distance, refit=args.refit, max_iter=args.max_iter, alpha=args.alpha,
                max_rounds=args.max_rounds, chowliu_check=not args.no_chowliu_check,
                verbose=0 if args.quiet else 1, n_threads=args.threads, **kw)
    t0 = time.perf_counter()
    try:
        est.fit(X, X_valid=Xv)
    except ParameterError as e:
        flag = _PARAM_FLAGS.get(e.param)
        raise DataError(f"argument {flag}: {e}" if flag else str(e)) from None
    secs = time.perf_counter() - t0
    out = est.spn_
    rows = [("model", model), ("merged", out)]
    print(f"{'':8s} {'nodes':>8s} {'edges':>8s} {'sum weights':>12s} {'parameters':>11s} "
          f"{'train LL':>10s}" + (f" {'valid LL':>10s}" if Xv is not None else ""))
    for name, m in rows:
        sw, allp = n_parameters(m)
        line = f"{name:8s} {m.n_nodes:8d} {m.n_edges:8d} {sw:12d} {allp:11d} " \
               f"{np.mean(m.log_likelihood(X, n_threads=args.threads)):10.4f}"
        if Xv is not None:
            line += f" {np.mean(m.log_likelihood(Xv, n_threads=args.threads)):10.4f}"
        print(line)
    print(f"epsilon {est.epsilon_}, merge {secs:.2f} s, compression "
          f"{n_parameters(model)[0] / max(n_parameters(out)[0], 1):.2f}x (sum weights)")
    io.save(out, args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
