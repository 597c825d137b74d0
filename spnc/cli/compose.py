"""spnc-compose: combine model files into a mixture (same variables) or a product
(disjoint variables), and refine a composed model with EM."""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .._text import counted
from ..errors import DataError
from ..learn._params import options_named
from . import _data
from . import add_common, add_data_options, print_json, run_tool

PROG = "spnc-compose"
EXAMPLES = """\
inputs: spnc files (.h5/.hdf5/.json) or foreign ones (.spflow, .spflow.json,
        .deeprob.json, .sparc.json); variables are matched by name when every input
        has names, otherwise by index.

examples:
  spnc-compose mix a.h5 b.deeprob.json -o mix.h5 --data train.csv   weights fitted by EM
  spnc-compose mix a.h5 b.h5 -o mix.h5 --weights 0.3,0.7             weights given
  spnc-compose product left.h5 right.h5 -o joint.h5                  disjoint variables
  spnc-compose em mix.h5 -o refined.h5 --data train.csv --valid valid.csv --max-iter 30
                                 EM on all parameters, early stopping on --valid

exit status: 0 success, 2 bad input (one line "spnc-compose: error: ...")
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0], epilog=EXAMPLES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("how", choices=("mix", "product", "em"), help="mix: a sum node over the "
                   "inputs; product: a product node; em: refine one model with EM on --data")
    p.add_argument("inputs", nargs="+", metavar="IN", help="model files")
    p.add_argument("-o", "--output", required=True, help="output model file (any format spnc writes)")
    p.add_argument("--data", help="mix: data to fit the mixture weights on (EM on the root weights); with "
                   "--weights, only scored (mean LL)")
    p.add_argument("--weights", help="mix: comma-separated weights (instead of --data)")
    p.add_argument("--valid", help="em: validation data (early stopping, best model kept)")
    p.add_argument("--max-iter", type=int, default=30, help="em: at most this many passes (default 30)")
    p.add_argument("--alpha", type=float, default=0.0, help="em: Dirichlet pseudo-count (default 0)")
    p.add_argument("--to", dest="to_format", metavar="FMT", help="output format if not from the extension")
    add_data_options(p)
    add_common(p)
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, _parser(), _run, argv)


def _run(args: argparse.Namespace) -> int:
    from .._atomic import check_writable
    from ..compose import mixture, product
    from ..io import importers
    check_writable(args.output, inputs=(*args.inputs, args.data, args.valid))
    _data.check_stdin(args.data, args.valid)
    _data.check_dataset(args.dataset, args.data, args.valid)
    _data.check_text_options(args, args.data, args.valid)
    if args.how != "em" and args.valid:
        raise DataError("--valid applies to em only (mix fits its weights on --data)")
    if args.how == "em" and args.weights:
        raise DataError("--weights applies to mix only")
    importers.check_save_format(args.output, args.to_format)
    models = [importers.load_any(p, saver=PROG) for p in args.inputs]
    summary: dict = {"how": args.how, "inputs": list(args.inputs)}
    if args.how == "em":
        out = _em(args, models, summary)
    elif args.how == "product":
        if args.data or args.weights:
            raise DataError("--data and --weights apply to mix only")
        out = product(models)
    else:
        X = None
        w = None
        if args.weights is not None:
            try:
                w = [float(t) for t in args.weights.split(",")]
            except ValueError:
                raise DataError(f"--weights {args.weights!r}: not comma-separated numbers") from None
        tab = None
        if args.data:
            X, tab = _read(args.data, args, models[0])
        with _data.rows_of_files(X=tab):
            # given weights are used as they are; --data then only scores the mixture
            out = mixture(models, weights=w, X=X if w is None else None)
        ws = out.weight[out.child_ptr[out.root]:out.child_ptr[out.root + 1]]
        summary["weights"] = [float(x) for x in ws]
        if X is not None:
            summary["mean_ll"] = {path: _mean_ll(m, X, out.var_names, args.n_threads)
                                  for path, m in zip(args.inputs, models)}
            summary["mean_ll"]["mixture"] = _mean_ll(out, X, out.var_names, args.n_threads)
    importers.save_any(out, args.output, args.to_format)
    summary.update(output=args.output, nodes=out.n_nodes, n_vars=out.n_vars)
    em_line = summary.pop("em", None)
    if args.json:
        print_json(summary)
        return 0
    if "weights" in summary:
        print(f"{PROG}: weights " + " ".join(f"{x:.4f}" for x in summary["weights"]))
    for name, v in summary.get("mean_ll", {}).items():
        print(f"{PROG}: {name}: mean LL {v:.4f}")
    if em_line:
        print(em_line)
    print(f"{PROG}: wrote {args.output} ({counted(out.n_nodes, 'node')}, {counted(out.n_vars, 'variable')})")
    return 0


def _em(args: argparse.Namespace, models: list, summary: dict):
    from ..learn import EM
    if len(models) != 1 or not args.data:
        raise DataError("em takes one model and --data")
    m = models[0]
    X, tab = _read(args.data, args, m)
    Xv, vtab = _read(args.valid, args, m) if args.valid else (None, None)
    nt = args.n_threads
    with options_named({"max_iter": "--max-iter", "alpha": "--alpha", "n_threads": "--n-threads"}), \
            _data.rows_of_files(X=tab, X_valid=vtab):
        em = EM(init=m, max_iter=args.max_iter, alpha=args.alpha, n_threads=nt).fit(X, X_valid=Xv)
    out = em.spn_
    ll = {"train": [float(np.mean(s.log_likelihood(X, n_threads=nt))) for s in (m, out)]}
    if Xv is not None:
        ll["valid"] = [float(np.mean(s.log_likelihood(Xv, n_threads=nt))) for s in (m, out)]
    summary.update(em_passes=int(em.n_iter_), mean_ll_before_after=ll)
    summary["em"] = (f"{PROG}: EM {counted(em.n_iter_, 'pass', 'passes')}; train mean LL {ll['train'][0]:.4f} -> {ll['train'][1]:.4f}"
                     + (f"; valid {ll['valid'][0]:.4f} -> {ll['valid'][1]:.4f} (best pass kept)" if Xv is not None
                        else ""))
    return out


def _read(path: str, args: argparse.Namespace, model) -> tuple[np.ndarray, _data.Table]:
    """Rows of ``path`` in ``model``'s variable order (columns matched by name), and their table."""
    tab = _data.read_table(path, dataset=args.dataset, delimiter=args.delimiter, header=args.header,
                           encoding=args.encoding, expect=model.var_names)
    tab = _data.match_columns(tab, model.var_names, model.n_vars, args.by_position)
    return _data.model_rows(model, tab), tab


def _mean_ll(model, X: np.ndarray, names: list[str] | None, n_threads: int | None = None) -> float:
    if names is not None and model.var_names is not None:   # X is in the mixture's column order
        col = {n: j for j, n in enumerate(names)}
        X = X[:, [col[n] for n in model.var_names]]
    return float(np.mean(model.log_likelihood(X, n_threads=n_threads)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
