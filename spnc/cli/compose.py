"""spnc-compose: combine model files into a mixture (same variables) or a product
(disjoint variables)."""
from __future__ import annotations

import argparse
import sys

import numpy as np

from ..errors import DataError
from . import _data
from . import run_tool

PROG = "spnc-compose"
EXAMPLES = """\
inputs: spnc files (.h5/.hdf5/.json) or foreign ones (.spflow, .spflow.json,
        .deeprob.json, .sparc.json); variables are matched by name when every input
        has names, otherwise by index.

examples:
  spnc-compose mix a.h5 b.deeprob.json -o mix.h5 --data train.csv   weights fitted by EM
  spnc-compose mix a.h5 b.h5 -o mix.h5 --weights 0.3,0.7             weights given
  spnc-compose product left.h5 right.h5 -o joint.h5                  disjoint variables

exit status: 0 success, 2 bad input (one line "spnc-compose: error: ...")
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0], epilog=EXAMPLES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("how", choices=("mix", "product"), help="mix: a sum node over the inputs; "
                   "product: a product node")
    p.add_argument("inputs", nargs="+", metavar="IN", help="model files")
    p.add_argument("-o", "--output", required=True, help="output model file (any format spnc writes)")
    p.add_argument("--data", help="mix: data to fit the mixture weights on (EM on the root weights)")
    p.add_argument("--dataset", help="HDF5 data: the dataset name")
    p.add_argument("--weights", help="mix: comma-separated weights (instead of --data)")
    p.add_argument("--to", dest="to_format", metavar="FMT", help="output format if not from the extension")
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, _parser(), _run, argv)


def _run(args: argparse.Namespace) -> int:
    from ..compose import mixture, product
    from ..io import importers
    models = [importers.load_any(p) for p in args.inputs]
    if args.how == "product":
        if args.data or args.weights:
            raise DataError("--data and --weights apply to mix only")
        out = product(models)
    else:
        X = None
        w = None
        if args.weights:
            try:
                w = [float(t) for t in args.weights.split(",")]
            except ValueError:
                raise DataError(f"--weights {args.weights!r}: not comma-separated numbers") from None
        if args.data:
            X, names = _data.read_table(args.data, dataset=args.dataset)
            X = _data.align_columns(X, names, models[0].var_names, models[0].n_vars, args.data)
        out = mixture(models, weights=w, X=X)
        ws = out.weight[out.child_ptr[out.root]:out.child_ptr[out.root + 1]]
        print(f"{PROG}: weights " + " ".join(f"{x:.4f}" for x in ws))
        if X is not None:
            for path, m in zip(args.inputs, models):
                print(f"{PROG}: {path}: mean LL {_mean_ll(m, X, out.var_names):.4f}")
            print(f"{PROG}: mixture: mean LL {_mean_ll(out, X, out.var_names):.4f}")
    importers.save_any(out, args.output, args.to_format)
    print(f"{PROG}: wrote {args.output} ({out.n_nodes} nodes, {out.n_vars} variables)")
    return 0


def _mean_ll(model, X: np.ndarray, names: list[str] | None) -> float:
    if names is not None and model.var_names is not None:   # X is in the mixture's column order
        X = X[:, [names.index(n) for n in model.var_names]]
    return float(np.mean(model.log_likelihood(X)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
