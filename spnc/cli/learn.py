"""spnc-learn: learn an SPN from a data file (LearnSPN, Chow-Liu tree, oSLRAU or
Prometheus), optionally refine it with EM, save it and report log-likelihoods."""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

from .._atomic import check_writable
from .._text import counted
from ..errors import DataError, ParameterError, SpncError
from ..learn._params import options_named
from . import _data
from . import add_common, add_data_options, finite, print_json, run_tool, seed_value
from ._mixed import bernoulli_for_binary
from ._trainchecks import check_states as _check_states, check_train as _check_train

PROG = "spnc-learn"

LEARNERS = ("learnspn", "chowliu", "oslrau", "prometheus")
SPLITTERS = ("gvs", "rgvs", "ebvs", "ebvs_ae", "mi_components", "correlation")
SUM_SPLITS = ("latent", "observed")
LEAVES = ("univariate", "bernoulli", "chowliu")
CRITERIA = ("info_gain", "mi_score")
DATA_TYPES = ("auto", "discrete", "continuous")

EXAMPLES = """\
data: CSV/TSV, .npy, HDF5 (--dataset NAME), Parquet, or - for CSV on stdin. A header is
      read only when every cell of row 1 is a name (or with --header); its names become
      the model's variable names and --valid/--test headers must match them (any order;
      --by-position to override). Column types b(inary)/c(ategorical)/r(eal) are inferred
      and reported, or given with --types. Training data must be complete; validation
      and test data may have missing values (NaN, ? or empty; marginalised). Rules in
      docs/cli.md.

examples:
  spnc-learn train.csv -o model.h5                         LearnSPN (GVS, latent clusters)
  spnc-learn train.csv -o model.h5 --valid v.csv --test t.csv --splitter ebvs --leaves chowliu
  spnc-learn train.csv -o model.json --sum-split observed --criterion mi_score
  spnc-learn train.csv -o tree.h5 --learner chowliu --alpha 1
  spnc-learn data.h5 --dataset /train -o m.h5 --learner oslrau --batch-size 10
  spnc-learn train.csv -o m.h5 --valid v.csv --em 50       EM refinement, early stopping

output: one line each for the learner, the data, fit time, model size and the mean
log-likelihood (+- standard error) on train / valid / test.

the model file is written atomically (never over an input) after checking its directory.

exit status: 0 success, 2 bad input (one line "spnc-learn: error: ..."), 128+N on signal N
"""

# CLI destination -> (estimator parameter, learners that take it)
_OPTIONS = {
    "splitter": ("splitter", ("learnspn",)),
    "sum_split": ("sum_split", ("learnspn",)),
    "leaves": ("leaves", ("learnspn",)),
    "g_factor": ("g_factor", ("learnspn",)),
    "entropy_threshold": ("entropy_threshold", ("learnspn",)),
    "mi_threshold": ("mi_threshold", ("learnspn", "chowliu")),
    "corr_threshold": ("corr_threshold", ("learnspn",)),
    "alpha": ("alpha", ("learnspn", "chowliu")),
    "min_instances": ("min_instances", ("learnspn",)),
    "max_depth": ("max_depth", ("learnspn",)),
    "clusters": ("n_clusters", ("learnspn",)),
    "restarts": ("n_restarts", ("learnspn",)),
    "iterations": ("n_iter", ("learnspn",)),
    "criterion": ("criterion", ("learnspn",)),
    "min_std": ("min_std", ("learnspn",)),
    "data_type": ("data_type", ("learnspn",)),
    "correlation_threshold": ("correlation_threshold", ("oslrau",)),
    "max_leaf_vars": ("max_leaf_vars", ("oslrau",)),
    "batch_size": ("batch_size", ("oslrau",)),
}
# Prometheus takes LearnSPN's clustering, smoothing and stopping flags
for _d in ("alpha", "min_instances", "max_depth", "clusters", "restarts", "iterations", "min_std", "data_type"):
    _OPTIONS[_d] = (_OPTIONS[_d][0], _OPTIONS[_d][1] + ("prometheus",))
_CHOICES = {"splitter": SPLITTERS, "sum_split": SUM_SPLITS, "leaves": LEAVES,
            "criterion": CRITERIA, "data_type": DATA_TYPES}


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Learn a sum-product network from data with LearnSPN, a "
        "Chow-Liu tree, oSLRAU or Prometheus (optionally refined by EM), save it (.h5/.hdf5/.json) and "
        "print its log-likelihood on training, validation and test data.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("train", help="training data (.csv, .tsv, .txt, .npy, .h5, .parquet, .json); no missing values")
    p.add_argument("-o", "--output", required=True, metavar="MODEL",
                   help="where to save the model (.h5, .hdf5 or .json; written atomically)")
    p.add_argument("--valid", metavar="FILE", help="validation data (reported; early stopping of --em)")
    p.add_argument("--test", metavar="FILE", help="test data (reported)")
    add_data_options(p)
    p.add_argument("--types", metavar="SPEC", help="column types: one letter for all or a comma list, "
                   "b binary, c categorical, r real (default: inferred and reported)")
    p.add_argument("--learner", default="learnspn", metavar="NAME",
                   help="learnspn (default), chowliu (discrete data), oslrau (real data) or prometheus")

    g = p.add_argument_group("LearnSPN (--learner learnspn)")
    g.add_argument("--splitter", metavar="NAME", help="variable splitting: " + ", ".join(SPLITTERS)
                   + " (default gvs; correlation for real-valued data)")
    g.add_argument("--sum-split", metavar="NAME", help="row splitting: latent (clustering, "
                   "default) or observed (condition on one variable)")
    g.add_argument("--leaves", metavar="NAME", help="base model: univariate (default), bernoulli "
                   "(0/1 data) or chowliu (Chow-Liu tree leaves)")
    g.add_argument("--g-factor", type=float, metavar="X", help="GVS/RGVS independence threshold "
                   "(default auto: 5, 10 or 20, chosen on held-out training rows)")
    g.add_argument("--entropy-threshold", type=float, metavar="X",
                   help="EBVS/EBVS-AE threshold in bits (default 0.3)")
    g.add_argument("--mi-threshold", type=float, metavar="X", help="mutual-information threshold in nats of "
                   "mi_components and of Chow-Liu edges (default 0.01; chowliu 0)")
    g.add_argument("--corr-threshold", type=float, metavar="X",
                   help="|correlation| of dependent real variables (default 0.3)")
    g.add_argument("--alpha", type=float, metavar="X",
                   help="Laplace smoothing (default 0.1; also used by --em on discrete data)")
    g.add_argument("--min-instances", type=int, metavar="N",
                   help="fewer rows end in the base model (default 50; prometheus 100)")
    g.add_argument("--max-depth", type=int, metavar="N",
                   help="at most this many sum nodes on a path (default: no limit; prometheus 4)")
    g.add_argument("--clusters", type=int, metavar="N", help="clusters per row split (default 2)")
    g.add_argument("--restarts", type=int, metavar="N", help="clustering restarts (default 3)")
    g.add_argument("--iterations", type=int, metavar="N", help="clustering rounds (default 15)")
    g.add_argument("--criterion", metavar="NAME", help="observed splits: info_gain (default) or mi_score")
    g.add_argument("--min-std", type=float, metavar="X",
                   help="std floor of Gaussian leaves (default 0.01; also used by --em)")
    g.add_argument("--data-type", metavar="TYPE", help="auto (default: integer-valued data is "
                   "discrete), discrete or continuous")

    g = p.add_argument_group("oSLRAU (--learner oslrau)")
    g.add_argument("--correlation-threshold", type=float, metavar="X",
                   help="merge children above this |correlation| (default 0.1)")
    g.add_argument("--max-leaf-vars", type=int, metavar="N",
                   help="largest multivariate Gaussian leaf (default: by the paper's rule)")
    g.add_argument("--batch-size", type=int, metavar="N", help="rows per mini-batch (default auto: 1, "
                   "growing with the stream up to 256)")

    g = p.add_argument_group("refinement and running")
    g.add_argument("--em", type=int, metavar="N", help="then run at most N passes of EM on the "
                   "parameters (stops early on --valid)")
    g.add_argument("--seed", type=seed_value, metavar="N", default=None,
                   help="random seed (equal seeds give equal models)")
    g.add_argument("--progress", action="store_true", help="progress on stderr even for short jobs "
                   "(long jobs report every few seconds anyway, unless -q)")
    add_common(g)
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, _parser(), _run, argv)


# ---------------------------------------------------------------------------- checks
def _check_args(args: argparse.Namespace) -> None:
    args.learner = _choice("--learner", args.learner, LEARNERS)
    for dest, (_, learners) in _OPTIONS.items():
        if getattr(args, dest) is not None and args.learner not in learners:
            raise SpncError(f"{_flag(dest)} does not apply to --learner {args.learner} "
                            f"(only to {' and '.join(learners)})")
    for dest, options in _CHOICES.items():
        if getattr(args, dest) is not None:
            setattr(args, dest, _choice(_flag(dest), getattr(args, dest), options))
    if args.em is not None and args.em < 1:
        raise SpncError(f"--em needs N >= 1 passes, got {args.em}")
    if args.n_threads == 0:
        raise SpncError("--n-threads must be a positive number, or -1 for all cores")
    if args.types is not None and args.data_type is not None:
        raise SpncError("give --types or --data-type, not both")
    check_writable(args.output, inputs=(args.train, args.valid, args.test))
    if _data.output_format(args.output) not in ("hdf5", "json"):
        raise SpncError(f"{args.output}: a model is saved as .h5, .hdf5 or .json "
                        "(convert or draw it afterwards with spnc-convert)")
    _data.check_stdin(args.train, args.valid, args.test)
    _data.check_dataset(args.dataset, args.train, args.valid, args.test)
    _data.check_text_options(args, args.train, args.valid, args.test)


def _choice(flag: str, value: str, options: tuple[str, ...]) -> str:
    v = value.strip().lower().replace("-", "_")
    if v not in options:
        raise SpncError(f"unknown {flag} {value!r}; choose one of {', '.join(options)}")
    return v


# ---------------------------------------------------------------------------- learning
def _estimator(args: argparse.Namespace, discrete: bool):
    from ..learn import LearnSPN, ChowLiuTree, OSLRAU
    kw = {param: getattr(args, dest) for dest, (param, learners) in _OPTIONS.items()
          if args.learner in learners and getattr(args, dest) is not None}
    if args.learner == "learnspn":
        kw["data_type"] = "discrete" if discrete else "continuous"
        if args.splitter is None and not discrete:
            kw["splitter"] = "correlation"      # the only splitter for real-valued data
        return LearnSPN(**kw, random_state=args.seed, n_threads=args.n_threads,
                        progress=bool(args.progress and not args.quiet and not args.json))
    if args.learner == "chowliu":
        return ChowLiuTree(**kw, n_threads=args.n_threads)
    if args.learner == "prometheus":
        from ..learn import Prometheus
        kw["data_type"] = "discrete" if discrete else "continuous"
        return Prometheus(**kw, random_state=args.seed, n_threads=args.n_threads)
    return OSLRAU(**kw, random_state=args.seed)


_PARAM_FLAGS = {param: _flag(dest) for dest, (param, _) in _OPTIONS.items()}
_PARAM_FLAGS.update(random_state="--seed", n_threads="--n-threads")
_EM_FLAGS = {"alpha": "--alpha", "min_std": "--min-std", "max_iter": "--em", "random_state": "--seed",
             "n_threads": "--n-threads"}


def _as_data_error(e: ValueError, flags: dict) -> DataError:
    """An estimator's complaint (raised inside :func:`options_named`, so it spells the
    options as typed) as a command-line error that names the option it is about."""
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    flag = flags.get(e.param) if isinstance(e, ParameterError) else None
    if flag is not None and flag not in msg:
        msg = f"argument {flag}: {msg}"
    return DataError(msg)


def _refine(model, est, X: np.ndarray, Xv: np.ndarray | None, args: argparse.Namespace, discrete: bool):
    """EM on the parameters; smoothing and std floor follow the structure learner's (no
    pseudo-counts on real data, as the learners' own refinement)."""
    from ..learn import EM
    kw = {"alpha": 0.0}
    if discrete and getattr(est, "alpha", None) is not None:
        kw["alpha"] = float(est.alpha)
    if getattr(est, "min_std", None) is not None:
        kw["min_std"] = float(est.min_std)
    em = EM(init=model, max_iter=int(args.em), random_state=args.seed, n_threads=args.n_threads, **kw)
    em.fit(X, X_valid=Xv)
    out = em.spn_
    learner = dict(out.learner)
    params = dict(learner.get("params", {}))
    params["structure_learner"] = {"name": model.learner.get("name", args.learner),
                                   "params": model.learner.get("params", {})}
    learner["params"] = params
    out.learner = learner
    return out, em


def _run(args: argparse.Namespace) -> int:
    from .. import io
    from ..data import with_names
    _check_args(args)
    read = dict(dataset=args.dataset, delimiter=args.delimiter, header=args.header, encoding=args.encoding)
    tab = _data.read_table(args.train, **read)
    X, names = tab.X, tab.names
    discrete, types, to_bernoulli = _check_train(tab, args)
    n, d = X.shape
    card = np.maximum(2, X.max(axis=0) + 1).astype(np.int64) if discrete else None
    extra: dict[str, np.ndarray] = {}
    tabs = {"X": tab}                   # for errors of the estimators naming a row
    paths = {"valid": args.valid, "test": args.test}
    for tag, path in paths.items():
        if path is not None:
            z = _data.match_columns(_data.read_table(path, **read, expect=names), names, d, args.by_position)
            _data.check_types(z, types)
            if card is not None:
                _check_states(z, card)
            extra[tag] = z.X
            if tag == "valid":
                tabs["X_valid"] = z
    talk = not args.quiet and not args.json
    if args.progress and talk:
        print(f"{PROG}: learning with {args.learner} from {args.train} ({counted(n, 'row')}, {counted(d, 'variable')})",
              file=sys.stderr, flush=True)

    est = _estimator(args, discrete)
    t0 = time.perf_counter()
    try:
        with options_named(_PARAM_FLAGS), _data.rows_of_files(**tabs):
            est.fit(X)
        model = est.spn_
    except ValueError as e:
        if isinstance(e, SpncError) and not isinstance(e, ParameterError):
            raise
        raise _as_data_error(e, _PARAM_FLAGS) from None
    fit_s = time.perf_counter() - t0
    if not model.learner:           # record which learner made the model and how
        params = {k: v for k, v in est.get_params(deep=False).items()
                  if v is None or isinstance(v, (bool, int, float, str))}
        model.learner = {"name": args.learner, "version": "1", "params": params,
                         "fit_seconds": float(fit_s), "n_train": int(n)}
    model = with_names(bernoulli_for_binary(model, to_bernoulli, n), names)
    em = None
    if args.em is not None:
        if args.progress and talk:
            print(f"{PROG}: EM on the parameters, at most {counted(args.em, 'pass', 'passes')}", file=sys.stderr, flush=True)
        t1 = time.perf_counter()
        try:
            with options_named(_EM_FLAGS), _data.rows_of_files(**tabs):
                model, em = _refine(model, est, X, extra.get("valid"), args, discrete)
        except ValueError as e:
            if isinstance(e, SpncError) and not isinstance(e, ParameterError):
                raise
            raise _as_data_error(e, _EM_FLAGS) from None
        em_s = time.perf_counter() - t1

    lls = {"train": model.log_likelihood(X, n_threads=args.n_threads)}
    for tag, Z in extra.items():
        try:
            lls[tag] = model.log_likelihood(Z, n_threads=args.n_threads)
        except DataError as e:
            raise DataError(f"{paths[tag]}: {e}") from None
    io.save(model, args.output)

    kinds = model.kind
    n_leaves = int(np.sum(kinds >= 2))
    if args.json:
        print_json({"learner": args.learner, "settings": _settings_dict(est, args),
                    "data": {"rows": n, "variables": d, "types": "".join(types),
                             **{tag: len(Z) for tag, Z in extra.items()}},
                    "fit_seconds": fit_s, "em_passes": None if em is None else int(em.n_iter_),
                    "model": {"nodes": model.n_nodes, "edges": model.n_edges, "sums": int(np.sum(kinds == 0)),
                              "products": int(np.sum(kinds == 1)), "leaves": n_leaves},
                    "log_likelihood": {tag: _ll_stats(ll) for tag, ll in lls.items()},
                    "output": args.output})
        return 0
    print(f"learner: {args.learner}" + _settings(est, args))
    print(f"data: {counted(n, 'row')} x {counted(d, 'variable')}" + "".join(f", {tag} {counted(len(Z), 'row')}"
                                                                          for tag, Z in extra.items()))
    print(f"types: {_data.describe_types(types, names)}"
          + ("; binary columns next to real ones get Bernoulli leaves" if to_bernoulli else ""))
    print(f"fit time: {fit_s:.3f} s")
    if em is not None:
        print(f"em: {counted(em.n_iter_, 'pass', 'passes')}, {em_s:.3f} s")
    print(f"model: {counted(model.n_nodes, 'node')}, {counted(model.n_edges, 'edge')} "
          f"({counted(int(np.sum(kinds == 0)), 'sum')}, {counted(int(np.sum(kinds == 1)), 'product')}, "
          f"{counted(n_leaves, 'leaf', 'leaves')})")
    for tag, ll in lls.items():
        print(_ll_line(tag, ll))
    print(f"saved: {args.output}")
    return 0


def _settings_dict(est, args: argparse.Namespace) -> dict:
    if args.learner != "learnspn":
        return {}
    return {"splitter": est.splitter, "sum_split": est.sum_split, "leaves": est.leaves}


def _ll_stats(ll: np.ndarray) -> dict:
    n = len(ll)
    mean = float(np.mean(ll)) if n else float("nan")
    se = float(np.std(ll, ddof=1) / math.sqrt(n)) if n > 1 and np.isfinite(mean) else float("nan")
    return {"rows": n, "mean": finite(mean), "stderr": finite(se), "zero_probability_rows": int(np.sum(ll == -np.inf))}


def _settings(est, args: argparse.Namespace) -> str:
    if args.learner != "learnspn":
        return ""
    return f" (splitter {est.splitter}, sum split {est.sum_split}, leaves {est.leaves})"


def _ll_line(tag: str, ll: np.ndarray) -> str:
    n = len(ll)
    if n == 0:
        return f"{tag} mean log-likelihood: nan (no rows)"
    mean = float(np.mean(ll))
    se = float(np.std(ll, ddof=1) / math.sqrt(n)) if n > 1 and np.isfinite(mean) else float("nan")
    zero = int(np.sum(ll == -np.inf))
    extra = f"; {counted(zero, 'row has', 'rows have')} probability 0" if zero else ""
    rows = counted(n, "row")
    if not math.isfinite(se):       # one row, or a row of probability 0: no standard error
        return f"{tag} mean log-likelihood: {mean:.6f} ({rows}, no standard error){extra}"
    return f"{tag} mean log-likelihood: {mean:.6f} +- {se:.6f} (standard error, {rows}){extra}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
