"""spnc-merge: turn a saved model into a smaller graph by merging similar sub-SPNs."""
from __future__ import annotations

import argparse
import time

import numpy as np

from ..errors import DataError, ParameterError
from ..learn._params import options_named
from . import _data
from . import MODEL_HELP, add_common, add_data_options, print_json, run_tool

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

_PARAM_FLAGS = {"epsilon": "--epsilon", "distance": "--distance", "refit": "--refit", "refit_rows": "--refit-rows",
                "max_iter": "--max-iter", "alpha": "--alpha", "max_rounds": "--max-rounds",
                "local_check": "--local-check", "n_threads": "--n-threads"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Merge similar sub-SPNs of a model (Rahman & Gogate): smaller, "
        "faster to evaluate, re-estimated on the pooled training rows; the threshold is chosen "
        "on validation data, and the result is never worse there than the input.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("data", help="training data (re-estimation)")
    p.add_argument("--valid", metavar="FILE", help="validation data (choices; strongly advised)")
    p.add_argument("-o", "--output", required=True, help="merged model (.h5, .hdf5 or .json; written atomically)")
    p.add_argument("--valid-dataset", help="dataset name inside an HDF5 validation file")
    add_data_options(p)
    p.add_argument("--epsilon", type=float, nargs="+", default=None,
                   help="distance threshold(s); several are chosen on --valid (default: 0.001 0.01 0.1 0.2 0.4)")
    p.add_argument("--distance", choices=["manhattan", "kl", "hellinger"], default="manhattan",
                   help="distance between sub-networks, averaged over their variables (default manhattan)")
    p.add_argument("--refit", choices=["counts", "hard_em", "em"], default="counts",
                   help="re-estimation of merged sub-networks: counts, one counting pass (default counts); "
                   "hard_em; or em, soft EM (for models fitted softly: EM-refined, mixtures, other libraries)")
    p.add_argument("--refit-rows", choices=["local", "global"], default="local",
                   help="rows of a refit: local, those that reached the merged nodes, routed below them "
                   "(default); global, every row routed through the whole new model")
    p.add_argument("--max-iter", type=int, default=20, help="hard-EM or EM passes per round (default 20)")
    p.add_argument("--alpha", type=float, default=None,
                   help="Laplace pseudo-count (default: the one the model's learner recorded, else 0.1)")
    p.add_argument("--max-rounds", type=int, default=3,
                   help="search-merge-refit rounds per threshold (default 3)")
    p.add_argument("--no-chowliu-check", action="store_true", help="skip the Chow-Liu sanity check")
    p.add_argument("--local-check", action="store_true",
                   help="merge a node only when that is no worse on the validation rows reaching it")
    add_common(p)
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, _parser(), _run, argv)


def _read(path: str, dataset: str | None, args, model, complete: bool = False) -> tuple[np.ndarray, _data.Table]:
    tab = _data.read_table(path, dataset=dataset, delimiter=args.delimiter, header=args.header,
                           encoding=args.encoding, expect=model.var_names)
    tab = _data.match_columns(tab, model.var_names, model.n_vars, args.by_position)
    return _data.model_rows(model, tab, complete="merging" if complete else None), tab


def _run(args: argparse.Namespace) -> int:
    from .. import io
    from ..io import importers
    from .._atomic import check_writable
    from ..learn.merge import Merge, n_parameters
    check_writable(args.output, inputs=(args.model, args.data, args.valid))
    if _data.output_format(args.output) not in ("hdf5", "json"):
        raise DataError(f"{args.output}: a model is saved as .h5, .hdf5 or .json "
                        "(convert it afterwards with spnc-convert)")
    _data.check_stdin(args.data, args.valid)
    _data.check_dataset(args.dataset, args.data)
    _data.check_dataset(args.valid_dataset, args.valid, flag="--valid-dataset")
    _data.check_text_options(args, args.data, args.valid)
    model = importers.load_any(args.model, saver=PROG)     # native or another library's format
    X, tab = _read(args.data, args.dataset, args, model, complete=True)
    Xv, vtab = (None, None) if args.valid is None else _read(args.valid, args.valid_dataset, args, model)
    eps = args.epsilon if args.epsilon is not None else ([0.1] if Xv is None else None)
    if Xv is None and len(eps) > 1:
        raise DataError("several --epsilon values are chosen on --valid data; give --valid or one --epsilon")
    kw = {} if eps is None else {"epsilon": eps[0] if len(eps) == 1 else list(eps)}
    est = Merge(init=model, distance=args.distance, refit=args.refit, refit_rows=args.refit_rows,
                max_iter=args.max_iter, alpha=args.alpha,
                max_rounds=args.max_rounds, chowliu_check=not args.no_chowliu_check, local_check=args.local_check,
                verbose=0 if (args.quiet or args.json) else 1, n_threads=args.n_threads, **kw)
    t0 = time.perf_counter()
    try:
        with options_named(_PARAM_FLAGS), _data.rows_of_files(X=tab, X_valid=vtab):
            est.fit(X, X_valid=Xv)
    except ParameterError as e:
        flag = _PARAM_FLAGS.get(e.param)
        raise DataError(f"argument {flag}: {e}" if flag and flag not in str(e) else str(e)) from None
    secs = time.perf_counter() - t0
    out = est.spn_
    summary: dict = {"epsilon": est.epsilon_, "merge_seconds": secs}
    for name, m in (("model", model), ("merged", out)):
        sw, allp = n_parameters(m)
        summary[name] = {"nodes": m.n_nodes, "edges": m.n_edges, "sum_weights": sw, "parameters": allp,
                         "train_ll": float(np.mean(m.log_likelihood(X, n_threads=args.n_threads)))}
        if Xv is not None:
            summary[name]["valid_ll"] = float(np.mean(m.log_likelihood(Xv, n_threads=args.n_threads)))
    sw0, sw1 = summary["model"]["sum_weights"], summary["merged"]["sum_weights"]
    # a ratio of sum weights means nothing when either side has none: null in --json
    summary["compression"] = sw0 / sw1 if sw0 and sw1 else None
    if args.json:
        print_json(summary)
    else:
        print(f"{'':8s} {'nodes':>8s} {'edges':>8s} {'sum weights':>12s} {'parameters':>11s} "
              f"{'train LL':>10s}" + (f" {'valid LL':>10s}" if Xv is not None else ""))
        for name in ("model", "merged"):
            r = summary[name]
            print(f"{name:8s} {r['nodes']:8d} {r['edges']:8d} {r['sum_weights']:12d} {r['parameters']:11d} "
                  f"{r['train_ll']:10.4f}" + (f" {r['valid_ll']:10.4f}" if Xv is not None else ""))
        ratio = f"compression {summary['compression']:.2f}x (sum weights)" if summary["compression"] is not None \
            else "no compression ratio (the model has no sum weights)" if not sw0 \
            else "no compression ratio (the merged model has no sum weights)"
        chosen = f"epsilon {est.epsilon_}" if est.epsilon_ is not None else \
            "no similar merge kept (identical sub-networks merged only)"
        print(f"{chosen}, merge {secs:.2f} s, {ratio}")
    io.save(out, args.output)
    if not args.json:
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
