"""spnc-eval: evaluate a saved model on a data file (log-likelihood, MPE, samples)."""
from __future__ import annotations

import argparse
import math
import os
import sys

import numpy as np

from ..errors import DataError, SpncError
from .. import _budget as budget, stream
from .._atomic import check_writable
from .._progress import Progress
from .._text import counted
from . import _data, _evalstream
from . import MODEL_HELP, add_common, add_data_options, finite, positive_count, print_json, run_tool, seed_value

PROG = "spnc-eval"
EXAMPLES = """\
data: CSV/TSV, .npy, HDF5 (--dataset NAME), Parquet, or - for CSV on stdin. NaN, ? or an
      empty cell = missing. A header is read only when every cell of the first row is a
      name (or with --header); its names must match the model's variables (in any order)
      unless --by-position. Errors name the file, line and column (docs/cli.md).

examples:
  spnc-eval model.h5 test.csv                      mean and standard error of log p(x)
  spnc-eval model.h5 test.csv --out-ll ll.txt      also write one log-likelihood per row
  spnc-eval model.json data.h5 --dataset /test     data from an HDF5 dataset
  spnc-eval model.h5 test.csv --query 0,1 --evidence 2-5   log p(X0,X1 | X2..X5)
  spnc-eval model.h5 partial.csv --mpe completed.csv       fill missing values (MPE)
  spnc-eval model.h5 --sample 1000 --out samples.npy --seed 7
  spnc-eval model.h5 --sample 10 | head -3         samples as CSV on stdout
  spnc-eval model.h5 --sample 100 --evidence ev.csv   conditional samples: one evidence
                                                   row (NaN = free) or 100 of them
  spnc-eval model.h5 test.csv --json               summary as JSON on stdout

outputs (.npy, .csv, .tsv, .txt, .json, or - for stdout) are written atomically and
never over an input file.

exit status: 0 success, 2 bad input (one line "spnc-eval: error: ..."), 128+N on signal N
"""

#: the most samples one run draws (memory is checked against SPNC_MEMORY_BUDGET too)
MAX_SAMPLES = 10**9


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Evaluate an spnc model on data: mean and standard error of "
        "the log-likelihood, per-row values, MPE completions or samples.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("data", nargs="?", help="data file (.csv, .tsv, .txt, .npy, .h5, .parquet, .json; - = stdin)")
    add_data_options(p)
    p.add_argument("--query", help="columns to score (names or indices, e.g. 0,2,5-7)")
    p.add_argument("--evidence", help="with DATA: columns to condition on, scores log p(query | "
                   "evidence); with --sample: an evidence FILE to sample conditionally on")
    p.add_argument("--out-ll", metavar="FILE", help="write per-row log-likelihoods")
    p.add_argument("--mpe", metavar="OUT", help="write the data with missing values filled by MPE")
    p.add_argument("--sample", type=positive_count(MAX_SAMPLES), metavar="N", help="draw N samples")
    p.add_argument("--out", metavar="FILE", help="where --sample writes (default - = CSV on stdout)")
    p.add_argument("--seed", type=seed_value, default=None, help="random seed for --sample")
    p.add_argument("--chunk-rows", type=int, default=100_000, help="rows per block: HDF5, Zarr and .npy "
                   "data are read and evaluated this many rows at a time (default 100000)")
    add_common(p)
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, _parser(), _run, argv)


def _check_args(args: argparse.Namespace) -> None:
    if args.data is None and args.sample is None:
        raise SpncError("give a DATA file, or --sample N")
    if args.chunk_rows < 1:
        raise SpncError("--chunk-rows must be positive")
    if args.n_threads == 0:
        raise SpncError("--n-threads must be a positive number, or -1 for all cores")
    if args.out is not None and args.sample is None:
        raise SpncError("--out is where --sample writes; give --sample N (or use --out-ll / --mpe)")
    if args.sample is not None and args.out is None:
        args.out = "-"
    if args.sample is not None and args.data is not None:
        raise SpncError("give DATA to evaluate or --sample N to draw samples, not both "
                        "(conditional samples: --sample N --evidence FILE)")
    if args.sample is not None and args.query is not None:
        raise SpncError("--query applies to DATA, not to --sample")
    outs = [(f, v) for f, v in (("--out-ll", args.out_ll), ("--mpe", args.mpe), ("--out", args.out))
            if v is not None]
    if args.json and any(v == "-" for _, v in outs):
        raise SpncError("--json prints the summary on stdout; write the data to a file (--out FILE)")
    if sum(v == "-" for _, v in outs) > 1:
        raise SpncError("only one output can go to standard output (-)")
    if args.sample is not None and args.evidence is not None and args.evidence != "-" \
            and not os.path.exists(stream.split_spec(args.evidence)[0]):
        raise SpncError(f"--evidence {args.evidence}: no such file; with --sample, --evidence is a FILE of "
                        "evidence rows (NaN = sampled), not a list of columns")
    inputs = (args.model, args.data, args.evidence if args.sample is not None else None)
    _data.check_dataset(args.dataset, *inputs[1:])
    _data.check_text_options(args, *inputs[1:])
    if [args.data, inputs[2]].count("-") > 1:
        raise SpncError("only one input can be read from standard input (-)")
    seen: dict[str, str] = {}
    for flag, path in outs:
        _data.check_output_name(path, flag)
        check_writable(path, inputs=inputs)
        key = os.path.abspath(path)
        if path != "-" and key in seen:
            raise SpncError(f"{flag} and {seen[key]} name the same file {path}")
        seen[key] = flag


def _run(args: argparse.Namespace) -> int:
    from ..io import importers
    _check_args(args)
    model = importers.load_any(args.model)     # native or another library's format
    names = model.var_names
    read = dict(dataset=args.dataset, delimiter=args.delimiter, header=args.header, encoding=args.encoding,
                expect=names)
    summary: dict = {"model": args.model}
    pending: list = []        # outputs of data in memory, written once every query has run
    if args.data is not None and _evalstream.streamable(args.data, args.dataset):
        summary.update(_run_blocks(model, args))
    elif args.data is not None:
        tab = _data.match_columns(_data.read_table(args.data, **read), names, model.n_vars, args.by_position)
        X = _data.model_rows(model, tab)
        ll = _loglik(model, X, args, where=tab.where, names=tab.names)
        if args.mpe:          # before the summary: a run that fails reports nothing
            _check_mpe_rows(model, X, ll, args, tab.where)
            filled = _chunked(lambda Z: model.mpe(Z, n_threads=args.n_threads)[0], X, args)
            pending.append((args.mpe, filled, names if names is not None else tab.names))   # the file's own
        summary["data"] = args.data
        summary.update(_report(ll, X, args))
        if args.out_ll:
            pending.append((args.out_ll, ll, None))
        if args.mpe:
            summary["mpe"] = args.mpe
    if args.sample is not None:
        ev, cols = None, names
        if args.evidence is not None:
            etab = _data.match_columns(_data.read_table(args.evidence, **read), names, model.n_vars,
                                       args.by_position)
            ev = _data.model_rows(model, etab)
            _check_evidence_rows(model, ev, etab, args)
            cols = names if names is not None else etab.names
            if len(ev) == 1:
                ev = np.repeat(ev, args.sample, axis=0)
            elif len(ev) != args.sample:
                raise DataError(f"{etab.path}: {len(ev)} evidence rows for --sample {args.sample} "
                                "(give one row, or one per sample)")
        budget.check(8.0 * args.sample * max(model.n_vars, 1) * 3, f"--sample {args.sample}",
                     "draw fewer samples per run")
        S = model.sample(args.sample, evidence=ev, seed=args.seed, n_threads=args.n_threads) if ev is not None \
            else model.sample(args.sample, seed=args.seed, n_threads=args.n_threads)
        pending.append((args.out, S, cols))
        summary.update(samples=args.sample, out=args.out)
    for path, A, cols in pending:
        _data.write_table(path, A, cols)
    if args.sample is not None and args.out != "-" and not args.json:
        _say(args, f"wrote {counted(args.sample, 'sample')} to {args.out}")
    if args.json:
        print_json(summary)
    return 0


def _run_blocks(model, args: argparse.Namespace) -> dict:
    """Log-likelihoods (and MPE completions) of an HDF5/Zarr/.npy data file, ``--chunk-rows``
    rows at a time, written to the outputs block by block."""
    src, fnames, label = _evalstream.open_data(args.data, args.dataset, args.chunk_rows)
    try:
        order, cnames = _evalstream.column_order(fnames, src.n_cols, model.var_names, model.n_vars,
                                                 args.by_position, label)

        def step(block: np.ndarray, r0: int):
            B = np.asarray(block, dtype=np.float64)
            tab = _data.Table(B if order is None else B[:, order], cnames, label, file_cols=order)
            X = _data.model_rows(model, tab, r0)
            where = lambda i: tab.where(r0 + i)     # noqa: E731  (rows of the file, not of the block)
            res = {"ll": _loglik(model, X, args, run=lambda fn, Z, a: fn(Z), where=where, names=cnames)}
            if args.mpe:
                _check_mpe_rows(model, X, res["ll"], args, where)
                res["mpe"] = model.mpe(X, n_threads=args.n_threads)[0]
            return X, res
        outs = [(args.out_ll, None, "ll")] if args.out_ll else []
        if args.mpe:
            outs.append((args.mpe, model.var_names if model.var_names is not None else cnames, "mpe"))
        stats = _evalstream.run_blocks(src, outs, step)
    finally:
        src.close()
    out = {"data": args.data}
    out.update(_print_report(stats.n, stats.miss, stats.columns(), args))
    if args.mpe:
        out["mpe"] = args.mpe
    return out


def _check_mpe_rows(model, X: np.ndarray, ll: np.ndarray, args: argparse.Namespace, where) -> None:
    """MPE's evidence checks naming rows of the data file (``where(i)``: row ``i`` of X in
    the file), not of a chunk (``ll``: log p of X's observed values, unless a query was given)."""
    if args.query is not None or args.evidence is not None:
        ll = _chunked(lambda Z: model.log_likelihood(Z, n_threads=args.n_threads), X, args)
    if np.ndim(ll) == 1:        # else the model has several roots, which mpe refuses
        _refuse_evidence(model, X, ll, where, "X", "has probability zero under the model; no MPE completion exists")


def _check_evidence_rows(model, ev: np.ndarray, etab, args: argparse.Namespace) -> None:
    """``model.sample``'s evidence checks, before the rows are repeated, naming the line of
    the evidence file (the model would name a 0-based row of the repeated array)."""
    if model.combine != "single" or not len(ev):
        return              # sample refuses several roots itself
    ll = _chunked(lambda Z: model.log_likelihood(Z, n_threads=args.n_threads), ev, args)
    _refuse_evidence(model, ev, ll, etab.where, "evidence", "the evidence has probability zero under the model")


def _refuse_evidence(model, X: np.ndarray, ll: np.ndarray, where, name: str, zero_msg: str) -> None:
    """The checks MPE and sampling make of their evidence rows (probability zero, then
    :func:`spnc._conditional.check_evidence_range`), naming the file's rows by ``where``."""
    from .._conditional import check_evidence_range
    zero = np.flatnonzero(ll == -np.inf)
    if zero.size:
        raise DataError(f"{where(int(zero[0]))}: {zero_msg}")
    check_evidence_range(model, X, ll, name, where=where)


def _chunked(fn, X: np.ndarray, args: argparse.Namespace) -> np.ndarray:
    n, step = len(X), args.chunk_rows
    prog = Progress("", total=n, unit=" rows")
    parts = []
    for r0 in range(0, n, step):
        parts.append(fn(X[r0:r0 + step]))
        prog.update(done=min(r0 + step, n))
    if not parts:
        return fn(X)
    return np.concatenate(parts, axis=0)
def _loglik(model, X: np.ndarray, args: argparse.Namespace, run=None, where=None, names=None) -> np.ndarray:
    """Per-row log p(x), or log p(query | evidence) with --query/--evidence (columns named
    by the model's variables or, for a model without names, by the file's header)."""
    nt = args.n_threads
    names = model.var_names if model.var_names is not None else names
    run = run or _chunked
    if args.query is None and args.evidence is None:
        return run(lambda Z: model.log_likelihood(Z, n_threads=nt), X, args)
    V = model.n_vars
    try:
        ev = _data.parse_columns(args.evidence, names, V) if args.evidence else []
    except DataError as e:
        if not os.path.isfile(args.evidence):
            raise
        raise DataError(f"--evidence: {e}; {args.evidence} is a file, but with DATA --evidence names the columns "
                        "to condition on (e.g. --evidence 2-5): an evidence file goes with --sample N") from None
    if args.query is not None:
        q = _data.parse_columns(args.query, names, V)
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
    joint = run(lambda Z: model.log_likelihood(Z, n_threads=nt), Xq, args)
    if not ev:
        return joint
    Xe = np.where(keep_e, X, np.nan)
    from .._conditional import log_conditional
    return log_conditional(joint, run(lambda Z: model.log_likelihood(Z, n_threads=nt), Xe, args), where=where)


def _report(ll: np.ndarray, X: np.ndarray, args: argparse.Namespace) -> dict:
    n = len(ll)
    miss = int(np.isnan(X).any(axis=1).sum()) if X.size else 0
    cols = []
    for v in ll.reshape(n, -1).T:
        zero = int(np.sum(v == -np.inf))
        mean = float(np.mean(v)) if n else float("nan")
        se = float(np.std(v, ddof=1) / math.sqrt(n)) if n > 1 and np.isfinite(mean) else float("nan")
        cols.append((mean, se, zero))
    return _print_report(n, miss, cols, args)


def _print_report(n: int, miss: int, cols: list[tuple[float, float, int]], args: argparse.Namespace) -> dict:
    """The summary (``cols``: mean, standard error and zero-probability rows per root),
    printed unless ``--json``; returns it for the JSON output."""
    out: dict = {"rows": n, "rows_with_missing": miss, "log_likelihood": []}
    if not args.json:
        _say(args, f"rows: {n} ({miss} with missing values)")
    for j, (mean, se, zero) in enumerate(cols):
        tag = "" if len(cols) == 1 else f" [root {j}]"
        out["log_likelihood"].append({"mean": finite(mean), "stderr": finite(se), "zero_probability_rows": zero})
        if args.json:
            continue
        if n == 0:
            _say(args, f"mean log-likelihood{tag}: nan (no rows)")
            continue
        extra = f"; {counted(zero, 'row has', 'rows have')} probability 0" if zero else ""
        spread = f" +- {se:.6f} (standard error)" if math.isfinite(se) else " (no standard error)"
        _say(args, f"mean log-likelihood{tag}: {mean:.6f}{spread}{extra}")
    return out


def _say(args: argparse.Namespace, line: str) -> None:
    """A summary line: on stdout, unless an output (``-``) writes its data there; then on
    stderr, or nowhere with ``-q`` (stderr holds only errors then)."""
    data_out = [args.out_ll, args.mpe] + ([args.out] if args.sample is not None else [])
    if "-" not in data_out:
        print(line)
    elif not args.quiet:
        print(line, file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
