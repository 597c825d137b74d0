"""Write the peer-library fixtures of tests/data/peers/ with the real libraries.

Run inside a peer venv (built by ../shared/tools/peer-venvs.sh), never with spnc:

    /tmp/peers/spflow/bin/python  tools/make_peer_fixtures.py make spflow  tests/data/peers
    /tmp/peers/deeprob/bin/python tools/make_peer_fixtures.py make deeprob tests/data/peers
    /tmp/peers/sparc/bin/python   tools/make_peer_fixtures.py make sparc   tests/data/peers
    /tmp/peers/deeprob/bin/python tools/make_peer_fixtures.py make deeprob-nltcs tests/data/peers
    /tmp/peers/spflow/bin/python  tools/make_peer_fixtures.py make spflow-nltcs tests/data/peers

``make`` learns or builds small models with the library, saves them with the library's own
writer, reads each file back with the library's reader (where it has one) and records the
log-likelihoods the library computes on a few rows, with and without missing values, in
``<model file>.ll.json``. ``eval LIB JOBS.json`` reads model files with the library and
prints their log-likelihoods as one JSON list (JOBS.json: ``[{"model": path, "X": rows}]``,
null for a missing value); the tests use it on files spnc exported.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

N_ROWS = 6   # rows kept per fixture, each also with ~1/3 of the values missing


# ------------------------------------------------------------------ data (same for every peer)
def binary_data(n: int = 600, d: int = 8, seed: int = 0) -> np.ndarray:
    """Rows from a random 3-component mixture of independent Bernoullis."""
    rng = np.random.RandomState(seed)
    p = rng.uniform(0.1, 0.9, size=(3, d))
    z = rng.choice(3, size=n, p=[0.5, 0.3, 0.2])
    return (rng.uniform(size=(n, d)) < p[z]).astype(np.float64)


def mixed_data(n: int = 600, seed: int = 1) -> np.ndarray:
    """Columns: binary, binary, categorical (3 states), real, real."""
    rng = np.random.RandomState(seed)
    z = rng.choice(2, size=n)
    b0 = (rng.uniform(size=n) < np.where(z, 0.8, 0.3)).astype(float)
    b1 = (rng.uniform(size=n) < np.where(z, 0.2, 0.6)).astype(float)
    c = np.array([rng.choice(3, p=[0.6, 0.3, 0.1] if zz else [0.2, 0.3, 0.5]) for zz in z], float)
    g0 = rng.normal(np.where(z, 2.0, -1.0), 1.0)
    g1 = rng.normal(np.where(z, 0.5, 0.0) + 0.3 * g0, 0.7)
    return np.column_stack([b0, b1, c, g0, g1])


def with_missing(X: np.ndarray, seed: int = 2) -> np.ndarray:
    rng = np.random.RandomState(seed)
    Y = X.copy()
    Y[rng.uniform(size=X.shape) < 1 / 3] = np.nan
    Y[0, :] = np.nan          # one row fully missing (LL 0)
    return Y


def rows_for(X: np.ndarray) -> np.ndarray:
    return np.vstack([X[-N_ROWS:], with_missing(X[-N_ROWS:])])


def write_ll(path: str, lib: str, version: str, X: np.ndarray, ll: np.ndarray, note: str) -> None:
    doc = {"library": lib, "version": version, "model": os.path.basename(path), "note": note,
           "X": [[None if np.isnan(v) else float(v) for v in row] for row in X],
           "ll": [float(v) for v in np.ravel(ll)]}
    with open(path + ".ll.json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def as_rows(rows: list) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=np.float64)


# ------------------------------------------------------------------ SPFlow 0.0.41
def spflow_make(out: str) -> None:
    from importlib.metadata import version
    from spn.algorithms.Inference import log_likelihood
    from spn.algorithms.LearningWrappers import learn_parametric
    from spn.io.Text import spn_to_str_equation, str_to_spn, to_JSON
    from spn.structure.Base import Context, Product, Sum, assign_ids, rebuild_scopes_bottom_up
    from spn.structure.leaves.parametric.Parametric import Bernoulli, Categorical, Gaussian, Poisson
    ver = version("spflow")

    def save(name: str, spn, X: np.ndarray, note: str) -> None:
        text = spn_to_str_equation(spn)
        path = os.path.join(out, name + ".spflow")
        with open(path, "w") as f:
            f.write(text + "\n")
        back = str_to_spn(open(path).read().strip())          # what SPFlow reads from the file
        R = rows_for(X)
        ll = log_likelihood(back, R).ravel()
        assert np.allclose(ll, log_likelihood(spn, R).ravel(), rtol=0, atol=1e-12)
        write_ll(path, "spflow", ver, R, ll, note + " (file read back with str_to_spn)")
        jpath = os.path.join(out, name + ".spflow.json")
        with open(jpath, "w") as f:
            f.write(to_JSON(spn) + "\n")
        write_ll(jpath, "spflow", ver, R, log_likelihood(spn, R).ravel(),
                 note + " (to_JSON has no reader: LLs of the model that was dumped)")

    Xb = binary_data()
    ctx = Context(parametric_types=[Bernoulli] * Xb.shape[1]).add_domains(Xb[:-N_ROWS])
    spn = learn_parametric(Xb[:-N_ROWS], ctx, min_instances_slice=60, rand_gen=np.random.RandomState(0), cpus=1)
    save("spflow_binary", spn, Xb, "learn_parametric on binary_data(), Bernoulli leaves")

    Xm = mixed_data()
    ctx = Context(parametric_types=[Bernoulli, Bernoulli, Categorical, Gaussian, Gaussian]).add_domains(Xm[:-N_ROWS])
    spn = learn_parametric(Xm[:-N_ROWS], ctx, min_instances_slice=80, rand_gen=np.random.RandomState(0), cpus=1)
    save("spflow_mixed", spn, Xm, "learn_parametric on mixed_data(): Bernoulli, Categorical, Gaussian leaves")

    # hand-built: every mapped leaf type, a sum directly over leaves, nested sums
    def prod(*ch):
        p = Product()
        p.children = list(ch)
        return p

    def mix(ws, *ch):
        s = Sum()
        s.children, s.weights = list(ch), list(ws)
        return s
    inner = mix([0.25, 0.75], Gaussian(mean=-1.5, stdev=0.5, scope=[3]), Gaussian(mean=2.0, stdev=1.25, scope=[3]))
    a = prod(Bernoulli(p=0.1, scope=[0]), Bernoulli(p=0.7, scope=[1]), Categorical(p=[0.2, 0.5, 0.3], scope=[2]),
             inner, Gaussian(mean=0.1, stdev=0.9, scope=[4]))
    b = prod(mix([0.4, 0.6], prod(Bernoulli(p=0.9, scope=[0]), Bernoulli(p=0.35, scope=[1])),
                 prod(Bernoulli(p=0.05, scope=[0]), Bernoulli(p=0.5, scope=[1]))),
             Categorical(p=[0.6, 0.1, 0.3], scope=[2]),
             prod(Gaussian(mean=1.0, stdev=2.0, scope=[3]), Gaussian(mean=-0.3, stdev=0.4, scope=[4])))
    root = mix([0.45, 0.55], a, b)
    assign_ids(root)
    rebuild_scopes_bottom_up(root)
    save("spflow_hand", root, Xm, "hand-built: nested sums, every mapped leaf type")

    # binary Chow-Liu leaves: SPFlow writes them to JSON only (its text has no tree)
    from spn.structure.leaves.cltree.CLTree import create_cltree_leaf
    from spn.structure.leaves.cltree.Inference import add_cltree_inference_support
    add_cltree_inference_support()
    lo, hi = Xb[:-N_ROWS][Xb[:-N_ROWS, 0] == 0], Xb[:-N_ROWS][Xb[:-N_ROWS, 0] == 1]
    kids = [prod(Bernoulli(p=0.02 + 0.96 * k, scope=[0]), create_cltree_leaf(part[:, 1:5], None, [1, 2, 3, 4]),
                 create_cltree_leaf(part[:, 5:], None, [5, 6, 7])) for k, part in enumerate((lo, hi))]
    root = mix([len(lo) / (len(lo) + len(hi)), len(hi) / (len(lo) + len(hi))], *kids)
    assign_ids(root)
    rebuild_scopes_bottom_up(root)
    jpath = os.path.join(out, "spflow_cltree.spflow.json")
    with open(jpath, "w") as f:
        f.write(to_JSON(root) + "\n")
    R = rows_for(Xb)
    write_ll(jpath, "spflow", ver, R, log_likelihood(root, R).ravel(),
             "hand-built sum over CLTree leaves (create_cltree_leaf on binary_data()); to_JSON has no "
             "reader: LLs of the model that was dumped")

    # unmappable leaves, written by SPFlow itself
    p = prod(Poisson(mean=2.0, scope=[0]), Bernoulli(p=0.5, scope=[1]))
    assign_ids(p)
    rebuild_scopes_bottom_up(p)
    with open(os.path.join(out, "spflow_poisson.spflow"), "w") as f:
        f.write(spn_to_str_equation(p) + "\n")
    with open(os.path.join(out, "spflow_poisson.spflow.json"), "w") as f:
        f.write(to_JSON(p) + "\n")
    from spn.structure.leaves.cltree.Text import add_cltree_text_support
    add_cltree_text_support()
    clt = create_cltree_leaf(Xb[:200, :3], None, [0, 1, 2])
    with open(os.path.join(out, "spflow_cltree.spflow"), "w") as f:
        f.write(spn_to_str_equation(clt) + "\n")


def _nltcs(split: str) -> np.ndarray:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _datadir import default_data
    return np.loadtxt(default_data() / "binary" / f"nltcs.{split}.data",
                      delimiter=",")


def spflow_nltcs(out: str) -> None:
    """SPFlow's LearnSPN (learn_parametric, Bernoulli leaves) on NLTCS, for docs/interop.md."""
    from importlib.metadata import version
    from spn.algorithms.Inference import log_likelihood
    from spn.algorithms.LearningWrappers import learn_parametric
    from spn.io.Text import spn_to_str_equation, str_to_spn
    from spn.structure.Base import Context
    from spn.structure.leaves.parametric.Parametric import Bernoulli
    train, test = _nltcs("train"), _nltcs("test")
    ctx = Context(parametric_types=[Bernoulli] * train.shape[1]).add_domains(train)
    spn = learn_parametric(train, ctx, min_instances_slice=200, rand_gen=np.random.RandomState(0), cpus=1)
    path = os.path.join(out, "spflow_nltcs.spflow")
    with open(path, "w") as f:
        f.write(spn_to_str_equation(spn) + "\n")
    R = rows_for(test)
    with open(path) as f:
        back = str_to_spn(f.read().strip())
    write_ll(path, "spflow", version("spflow"), R, log_likelihood(back, R).ravel(),
             "learn_parametric (rdc, kmeans, min_instances_slice=200) on nltcs.train.data; rows from "
             "nltcs.test.data (file read back with str_to_spn)")


def spflow_eval(model: str, rows: np.ndarray) -> list[float]:
    from spn.algorithms.Inference import log_likelihood
    from spn.io.Text import str_to_spn
    with open(model) as f:
        spn = str_to_spn(f.read().strip())
    return log_likelihood(spn, rows).ravel().tolist()


# ------------------------------------------------------------------ DeeProb-kit 1.1.0
def deeprob_make(out: str) -> None:
    from importlib.metadata import version
    from deeprob.spn.algorithms.inference import log_likelihood
    from deeprob.spn.learning.wrappers import learn_estimator
    from deeprob.spn.structure.io import load_spn_json, save_spn_json
    from deeprob.spn.structure.leaf import Bernoulli, Categorical, Gaussian, Uniform
    from deeprob.spn.structure.node import Product, assign_ids
    ver = version("deeprob-kit")

    def save(name: str, spn, X: np.ndarray, note: str) -> None:
        path = os.path.join(out, name + ".deeprob.json")
        save_spn_json(spn, path)
        back = load_spn_json(path)                 # what DeeProb-kit reads from the file
        R = rows_for(X)
        write_ll(path, "deeprob-kit", ver, R, log_likelihood(back, R).ravel(),
                 note + " (file read back with load_spn_json; DeeProb-kit computes in float32)")

    Xb = binary_data()
    kw = dict(split_rows="kmeans", split_cols="gvs", min_rows_slice=60, random_state=0, verbose=False)
    spn = learn_estimator(Xb[:-N_ROWS], [Bernoulli] * Xb.shape[1], method="learnspn", **kw)
    save("deeprob_binary", spn, Xb, "learn_estimator learnspn (kmeans, gvs) on binary_data(), Bernoulli leaves")
    spn = learn_estimator(Xb[:-N_ROWS], [Bernoulli] * Xb.shape[1], method="learnspn",
                          learn_leaf="binary-clt", **dict(kw, min_rows_slice=150))
    save("deeprob_clt", spn, Xb, "learn_estimator learnspn with binary-clt leaves on binary_data()")
    Xm = mixed_data()
    spn = learn_estimator(Xm[:-N_ROWS], [Bernoulli, Bernoulli, Categorical, Gaussian, Gaussian],
                          method="learnspn", **dict(kw, split_cols="rdc", min_rows_slice=80))
    save("deeprob_mixed", spn, Xm, "learn_estimator learnspn (kmeans, rdc) on mixed_data()")
    # unmappable leaf, written by DeeProb-kit itself
    p = Product(children=[Uniform(0, start=0.0, width=2.0), Bernoulli(1, p=0.5)])
    assign_ids(p)
    save_spn_json(p, os.path.join(out, "deeprob_uniform.deeprob.json"))


def deeprob_nltcs(out: str) -> None:
    """LearnSPN with binary Chow-Liu leaves on NLTCS (../shared/data), for docs/interop.md."""
    from importlib.metadata import version
    from deeprob.spn.algorithms.inference import log_likelihood
    from deeprob.spn.learning.wrappers import learn_estimator
    from deeprob.spn.structure.io import load_spn_json, save_spn_json
    from deeprob.spn.structure.leaf import Bernoulli
    train, test = _nltcs("train"), _nltcs("test")
    spn = learn_estimator(train, [Bernoulli] * train.shape[1], method="learnspn", learn_leaf="binary-clt",
                          split_rows="kmeans", split_cols="gvs", min_rows_slice=2000, random_state=0,
                          verbose=False)
    path = os.path.join(out, "deeprob_nltcs.deeprob.json")
    save_spn_json(spn, path)
    R = rows_for(test)
    write_ll(path, "deeprob-kit", version("deeprob-kit"), R, log_likelihood(load_spn_json(path), R).ravel(),
             "learn_estimator learnspn (kmeans, gvs, binary-clt leaves, min_rows_slice=2000) on "
             "nltcs.train.data; rows from nltcs.test.data (DeeProb-kit computes in float32)")


def deeprob_eval(model: str, rows: np.ndarray) -> list[float]:
    from deeprob.spn.algorithms.inference import log_likelihood
    from deeprob.spn.structure.io import load_spn_json
    return log_likelihood(load_spn_json(model), rows).ravel().astype(float).tolist()


# ------------------------------------------------------------------ sparc-pc 0.8.2
def sparc_make(out: str) -> None:
    import sparc
    from sparc import (BernoulliInputNode, CategoricalInputNode, DiscreteLogisticInputNode,
                       GaussianInputNode, IndicatorInputNode, LiteralInputNode, ProductNode, SumNode,
                       CircuitSerializer, log_likelihood)
    from sparc.optim import MLETrainer
    from sparc.structures.distributions import Bernoulli
    from sparc.structures.hclt import HCLT
    ver = sparc.__version__

    def save(name: str, root, X: np.ndarray, note: str) -> None:
        path = os.path.join(out, name + ".sparc.json")
        CircuitSerializer.save(root, path, indent=None)
        back = CircuitSerializer.load(path)
        R = rows_for(X)
        write_ll(path, "sparc-pc", ver, R, np.asarray(log_likelihood(back, R)).ravel(),
                 note + " (file read back with CircuitSerializer.load)")

    Xb = binary_data()
    root = HCLT(Xb[:-N_ROWS], num_latents=3, input_dist=Bernoulli(), seed=0)
    MLETrainer(root, lr=0.05).fit(Xb[:-N_ROWS].astype(np.int64), epochs=20)
    save("sparc_hclt", root, Xb, "HCLT(num_latents=3, Bernoulli inputs) + 20 MLETrainer epochs on binary_data()")

    def disc(shift: float, shared):
        return ProductNode([BernoulliInputNode(0, 0.2 + shift),
                            LiteralInputNode(1, 1) if shift else IndicatorInputNode(1, 0, 2),
                            CategoricalInputNode(2, [0.5 - shift, 0.3, 0.2 + shift]), shared])
    shared = BernoulliInputNode(3, 0.3)
    kids = [disc(0.0, shared), disc(0.25, shared),
            ProductNode([BernoulliInputNode(0, 0.6), BernoulliInputNode(1, 0.4),
                         CategoricalInputNode(2, [0.1, 0.1, 0.8]), BernoulliInputNode(3, 0.9)])]
    Xd = np.column_stack([mixed_data()[:, :3], binary_data()[:, 0]])
    save("sparc_hand", SumNode(kids, [0.2, 0.3, 0.5]), Xd,
         "hand-built: Bernoulli, literal, indicator, categorical leaves, a shared leaf")
    g = [ProductNode([GaussianInputNode(0, -1.0 + s, 0.8 + s / 4), GaussianInputNode(1, s / 2, 1.1)])
         for s in (0.0, 1.0, 3.0)]
    save("sparc_gauss", SumNode(g, [0.25, 0.25, 0.5]), mixed_data()[:, 3:],
         "hand-built: Gaussian leaves (sparc-pc does not mix discrete and continuous leaves)")
    bad = ProductNode([DiscreteLogisticInputNode(0, 1.0, 0.5, 8), BernoulliInputNode(1, 0.5)])
    CircuitSerializer.save(bad, os.path.join(out, "sparc_logistic.sparc.json"), indent=None)


def sparc_eval(model: str, rows: np.ndarray) -> list[float]:
    from sparc import CircuitSerializer, log_likelihood
    return np.asarray(log_likelihood(CircuitSerializer.load(model), rows)).ravel().tolist()


LIBS = {"spflow": (spflow_make, spflow_eval), "deeprob": (deeprob_make, deeprob_eval),
        "deeprob-nltcs": (deeprob_nltcs, deeprob_eval), "spflow-nltcs": (spflow_nltcs, spflow_eval),
        "sparc": (sparc_make, sparc_eval)}


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "make" and argv[1] in LIBS:
        os.makedirs(argv[2], exist_ok=True)
        LIBS[argv[1]][0](argv[2])
        return 0
    if len(argv) == 3 and argv[0] == "eval" and argv[1] in LIBS:
        with open(argv[2]) as f:
            jobs = json.load(f)
        print(json.dumps([LIBS[argv[1]][1](j["model"], as_rows(j["X"])) for j in jobs]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
