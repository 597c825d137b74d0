"""Learn a LearnSPN model in a peer library and report its fit time and log-likelihoods.

Run with a peer venv's python (built by ``peer-venvs.sh``); spnc never imports this file,
which needs only the standard library, numpy and the peer library. It prints exactly one
JSON line on stdout (everything else goes to stderr):

    {"lib", "name", "splitter", "params", "fit_seconds", "train_ll", "valid_ll", "test_ll",
     "n_nodes", "n_edges", "version"}

Log-likelihoods are mean natural logs per row; ``fit_seconds`` times only the structure
learning call (``time.perf_counter``), not data loading, imports or evaluation. If the
library cannot be imported (or cannot run the requested splitter) the line is
``{"lib": ..., "skipped": reason}`` and the exit status is 0; a failure while learning
prints nothing on stdout, a traceback on stderr, and exits with status 1.

    /tmp/peers/deeprob/bin/python tools/peer_learnspn.py deeprob DATA/binary nltcs \\
        --splitter gvs --min-instances 200
    /tmp/peers/spflow/bin/python tools/peer_learnspn.py spflow DATA/continuous abalone \\
        --continuous --fold 1

Configurations
--------------
spflow (SPFlow 0.0.41, the legacy numpy line): ``spn.algorithms.LearningWrappers.
learn_parametric`` with its defaults, i.e. the library's standard LearnSPN: RDC column
split (threshold 0.3, k=10, s=1/6, sin, no one-hot), K-means row split into 2 clusters
(sklearn KMeans, seed fixed at 17 inside SPFlow, whatever ``--seed`` says),
``min_instances_slice=200`` (a slice with at most that many rows becomes a naive
factorisation), ``min_features_slice=1``, univariate leaves fitted by maximum likelihood
without smoothing (Bernoulli leaves from ``Context(parametric_types=[Bernoulli]*d)`` for
binary data, Gaussian for ``--continuous``), and the library's final pruning. ``--seed``
seeds the RDC random features (SPFlow's own default is 17). Only ``cpus`` differs from
the defaults: 1 instead of -1, so the RDC tests run in one thread like everything else
here; the single-process ``multiprocessing.Pool`` that SPFlow creates on import for naive
factorisations (``max(1, cpu_count - 2)`` workers) is left as it is. This is the
configuration behind the earlier measurement "nltcs ~8 s at test LL -6.42, plants ~745 s
at -13.91". SPFlow has no GVS/EBVS and no Laplace smoothing: ``--splitter`` must be
``rdc`` and ``--alpha``, ``--g-factor``, ``--entropy`` are ignored. A zero-probability
Bernoulli leaf gives SPFlow's ``finfo(float).min`` rather than -inf, as the library does.

deeprob (DeeProb-kit 1.1.0): ``deeprob.spn.learning.wrappers.learn_estimator`` with
``method='learnspn'`` (``learn_spn`` followed by ``prune``), ``learn_leaf='mle'``,
``split_rows='kmeans'`` (sklearn KMeans, 2 clusters, n_init=5; the library has no
hard-EM / naive-Bayes row split), ``split_cols`` = the splitter, ``min_cols_slice=2``,
``random_state=numpy.random.RandomState(seed)``, ``verbose=False``. Bernoulli leaves with
domains ``[0, 1]`` for binary data, Gaussian leaves with (min, max) domains for
``--continuous`` (where gvs/rgvs are reported as skipped: the library's G-test passes
``bins='scott'`` to ``numpy.histogram2d``, which fails; use rdc, ebvs or ebvs_ae). Option
mapping (the exact keyword arguments are echoed in ``params``):

    --min-instances N -> min_rows_slice=N   (a slice with fewer than N rows becomes a leaf;
                                              library default 256)
    --g-factor F      -> split_cols_kwargs={'p': F}        (gvs, rgvs; default 5)
    --entropy E       -> split_cols_kwargs={'e': E, ...}   (ebvs, ebvs_ae; default 0.3)
    --alpha A         -> learn_leaf_kwargs={'alpha': A}, and split_cols_kwargs 'alpha'
                         for ebvs/ebvs_ae (Laplace smoothing of leaves and entropies,
                         as spnc's alpha; default 0.1)
    --rdc-threshold D -> split_cols_kwargs={'d': D}        (rdc; default 0.3)
    ebvs_ae           -> split_cols_kwargs 'size' = number of training rows (required
                         by the library: the threshold shrinks with the slice size)

Data: binary sets are DATA_DIR/NAME.{train,valid,test}.data; with ``--continuous``,
DATA_DIR/NAME/NAME.K.data is the test fold, the other nine are the training set, and
``valid_ll`` is null. ``--seed`` defaults to 17.

Usage: python tools/peer_learnspn.py LIB DATA_DIR NAME [--splitter gvs|rgvs|ebvs|ebvs_ae|rdc]
       [--min-instances N] [--g-factor F] [--entropy E] [--alpha A] [--rdc-threshold D]
       [--seed S] [--continuous --fold K]
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


# ----------------------------------------------------------------------------- data

def read_matrix(path):
    return np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)


def load_data(args):
    """(train, valid or None, test) as float64 arrays."""
    root = Path(args.data_dir)
    if args.continuous:
        folder = root / args.name
        files = sorted(folder.glob(f"{args.name}.*.data"),
                       key=lambda p: int(p.name[len(args.name) + 1:-len(".data")]))
        folds = {int(p.name[len(args.name) + 1:-len(".data")]): p for p in files}
        if args.fold not in folds:
            raise SystemExit(f"no fold {args.fold} under {folder} (have {sorted(folds)})")
        test = read_matrix(folds[args.fold])
        train = np.vstack([read_matrix(p) for k, p in sorted(folds.items()) if k != args.fold])
        return train, None, test
    return tuple(read_matrix(root / f"{args.name}.{part}.data") for part in ("train", "valid", "test"))


def graph_size(root):
    """(nodes, edges) of the DAG below root, each node counted once."""
    seen = {id(root)}
    stack = [root]
    n_edges = 0
    while stack:
        node = stack.pop()
        children = list(getattr(node, "children", None) or [])
        n_edges += len(children)
        for c in children:
            if id(c) not in seen:
                seen.add(id(c))
                stack.append(c)
    return len(seen), n_edges


def mean_ll(values, what):
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    bad = int(np.count_nonzero(~np.isfinite(v)))
    if bad:
        log(f"warning: {bad} of {len(v)} {what} log-likelihoods are not finite")
    return float(np.mean(v))


# ----------------------------------------------------------------------------- SPFlow

def import_spflow():
    import spn  # noqa: F401
    from spn.algorithms.LearningWrappers import learn_parametric
    from spn.algorithms.Inference import log_likelihood
    from spn.structure.Base import Context
    from spn.structure.leaves.parametric.Parametric import Bernoulli, Gaussian
    try:
        from importlib.metadata import version
        ver = version("spflow")
    except Exception:
        ver = None
    return dict(learn=learn_parametric, ll=log_likelihood, Context=Context,
                Bernoulli=Bernoulli, Gaussian=Gaussian, version=ver)


def run_spflow(api, args, train, sets):
    if args.splitter != "rdc":
        return None, f"SPFlow 0.0.41 has no '{args.splitter}' column split (only rdc)"
    for opt in ("g_factor", "entropy", "alpha"):
        if getattr(args, opt) is not None:
            log(f"note: --{opt.replace('_', '-')} has no SPFlow counterpart; ignored")
    leaf = api["Gaussian"] if args.continuous else api["Bernoulli"]
    ctx = api["Context"](parametric_types=[leaf] * train.shape[1]).add_domains(train)
    kwargs = dict(cols="rdc", rows="kmeans",
                  min_instances_slice=200 if args.min_instances is None else args.min_instances,
                  threshold=0.3 if args.rdc_threshold is None else args.rdc_threshold,
                  ohe=False, cpus=1)
    params = dict(kwargs, leaves=leaf.__name__, rand_gen_seed=args.seed, min_features_slice=1,
                  multivariate_leaf=False, cluster_univariate=False, kmeans_seed=17)
    rng = np.random.RandomState(args.seed)
    t0 = time.perf_counter()
    root = api["learn"](train, ctx, rand_gen=rng, **kwargs)
    fit = time.perf_counter() - t0
    lls = {k: (None if X is None else mean_ll(api["ll"](root, X), k)) for k, X in sets.items()}
    return (root, params, fit, lls), None


# ----------------------------------------------------------------------------- DeeProb-kit

def import_deeprob():
    import deeprob
    from deeprob.spn.learning.wrappers import learn_estimator
    from deeprob.spn.algorithms.inference import log_likelihood
    from deeprob.spn.structure.leaf import Bernoulli, Gaussian
    ver = getattr(deeprob, "__version__", None)
    if ver is None:
        try:
            from importlib.metadata import version
            ver = version("deeprob-kit")
        except Exception:
            pass
    return dict(learn=learn_estimator, ll=log_likelihood, Bernoulli=Bernoulli, Gaussian=Gaussian,
                version=ver)


def run_deeprob(api, args, train, sets):
    n, d = train.shape
    if args.continuous and args.splitter in ("gvs", "rgvs"):
        # its G-test calls numpy.histogram2d(x, y, bins='scott'), which numpy rejects
        return None, (f"DeeProb-kit's {args.splitter} G-test cannot bin continuous data "
                      "(numpy.histogram2d does not accept bins='scott')")
    if args.continuous:
        dists = [api["Gaussian"]] * d
        domains = [(float(lo), float(hi)) for lo, hi in zip(train.min(axis=0), train.max(axis=0))]
    else:
        dists = [api["Bernoulli"]] * d
        domains = [[0, 1] for _ in range(d)]  # fixed, so a constant training column stays valid
    alpha = 0.1 if args.alpha is None else args.alpha
    cols = {}
    if args.splitter in ("gvs", "rgvs"):
        cols["p"] = 5.0 if args.g_factor is None else args.g_factor
    elif args.splitter in ("ebvs", "ebvs_ae"):
        cols["e"] = 0.3 if args.entropy is None else args.entropy
        cols["alpha"] = alpha
        if args.splitter == "ebvs_ae":
            cols["size"] = n
    elif args.splitter == "rdc":
        cols["d"] = 0.3 if args.rdc_threshold is None else args.rdc_threshold
    kwargs = dict(method="learnspn", learn_leaf="mle", learn_leaf_kwargs={"alpha": alpha},
                  split_rows="kmeans", split_rows_kwargs={"n": 2},
                  split_cols=args.splitter, split_cols_kwargs=cols,
                  min_rows_slice=256 if args.min_instances is None else args.min_instances,
                  min_cols_slice=2)
    params = dict(kwargs, leaves=dists[0].__name__, random_state=args.seed, verbose=False)
    data = train.astype(np.float32)  # the library's own dtype (leaves and inference are float32)
    rng = np.random.RandomState(args.seed)
    # learn_spn fills learn_leaf_kwargs['random_state'] in place: give it a private copy
    call = dict(kwargs, learn_leaf_kwargs=dict(kwargs["learn_leaf_kwargs"]),
                split_cols_kwargs=dict(cols), split_rows_kwargs=dict(kwargs["split_rows_kwargs"]))
    t0 = time.perf_counter()
    root = api["learn"](data, dists, domains, random_state=rng, verbose=False, **call)
    fit = time.perf_counter() - t0
    lls = {k: (None if X is None else mean_ll(api["ll"](root, X.astype(np.float32)), k))
           for k, X in sets.items()}
    return (root, params, fit, lls), None


LIBS = {"spflow": (import_spflow, run_spflow), "deeprob": (import_deeprob, run_deeprob)}


# ----------------------------------------------------------------------------- main

def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lib", choices=sorted(LIBS))
    ap.add_argument("data_dir")
    ap.add_argument("name")
    ap.add_argument("--splitter", default=None, choices=["gvs", "rgvs", "ebvs", "ebvs_ae", "rdc"],
                    help="column split (default: rdc for spflow, gvs for deeprob)")
    ap.add_argument("--min-instances", type=int, default=None)
    ap.add_argument("--g-factor", type=float, default=None)
    ap.add_argument("--entropy", type=float, default=None)
    ap.add_argument("--alpha", type=float, default=None)
    ap.add_argument("--rdc-threshold", type=float, default=None)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--continuous", action="store_true")
    ap.add_argument("--fold", type=int, default=1)
    a = ap.parse_args(argv)
    if a.splitter is None:
        a.splitter = "rdc" if a.lib == "spflow" else "gvs"
    return a


def main(argv=None):
    args = parse(argv)
    importer, runner = LIBS[args.lib]
    try:
        api = importer()
    except Exception as e:  # ImportError, or a broken dependency raising something else
        emit({"lib": args.lib, "skipped": f"cannot import {args.lib}: {type(e).__name__}: {e}"})
        return 0
    train, valid, test = load_data(args)
    log(f"{args.lib} {api['version']} {args.name}: train {train.shape}, "
        f"valid {None if valid is None else valid.shape}, test {test.shape}, splitter {args.splitter}")
    out, reason = runner(api, args, train, {"train": train, "valid": valid, "test": test})
    if out is None:
        emit({"lib": args.lib, "name": args.name, "splitter": args.splitter, "skipped": reason})
        return 0
    root, params, fit, lls = out
    n_nodes, n_edges = graph_size(root)
    record = {"lib": args.lib, "name": args.name, "splitter": args.splitter, "params": params,
              "fit_seconds": fit, "train_ll": lls["train"], "valid_ll": lls["valid"],
              "test_ll": lls["test"], "n_nodes": n_nodes, "n_edges": n_edges,
              "version": api["version"]}
    if args.continuous:
        record["fold"] = args.fold
    log(f"fit {fit:.3f} s, test LL {lls['test']:.4f}, {n_nodes} nodes, {n_edges} edges, "
        f"threads: OMP={os.environ.get('OMP_NUM_THREADS')}")
    emit(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
