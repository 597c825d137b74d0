"""Write the peer-library fixtures of tests/data/peers/ with the real libraries.

Run inside a peer venv (built by ../shared/tools/peer-venvs.sh), never with spnc:

    /tmp/peers/spflow/bin/python  tools/make_peer_fixtures.py make spflow  tests/data/peers
    /tmp/peers/deeprob/bin/python tools/make_peer_fixtures.py make deeprob tests/data/peers
    /tmp/peers/sparc/bin/python   tools/make_peer_fixtures.py make sparc   tests/data/peers

``make`` learns or builds small models with the library, saves them with the library's own
writer, reads each file back with the library's reader (where it has one) and records the
log-likelihoods the library computes on a few rows, with and without missing values, in
``<model file>.ll.json``. ``eval LIB MODEL ROWS.json`` reads a model file with the library
and prints its log-likelihoods as JSON (the tests use it on files spnc exported).
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


def read_rows(path: str) -> np.ndarray:
    with open(path) as f:
        rows = json.load(f)
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

    # unmappable leaves, written by SPFlow itself
    p = prod(Poisson(mean=2.0, scope=[0]), Bernoulli(p=0.5, scope=[1]))
    assign_ids(p)
    rebuild_scopes_bottom_up(p)
    with open(os.path.join(out, "spflow_poisson.spflow"), "w") as f:
        f.write(spn_to_str_equation(p) + "\n")
    with open(os.path.join(out, "spflow_poisson.spflow.json"), "w") as f:
        f.write(to_JSON(p) + "\n")
    from spn.structure.leaves.cltree.CLTree import create_cltree_leaf
    import spn.structure.leaves.cltree.Text  # noqa: F401  (registers CLTREE text output)
    from spn.structure.leaves.cltree.Text import add_cltree_text_support
    add_cltree_text_support()
    clt = create_cltree_leaf(Xb[:200, :3], None, [0, 1, 2])
    with open(os.path.join(out, "spflow_cltree.spflow"), "w") as f:
        f.write(spn_to_str_equation(clt) + "\n")


def spflow_eval(model: str, rows: np.ndarray) -> list[float]:
    from spn.algorithms.Inference import log_likelihood
    from spn.io.Text import str_to_spn
    with open(model) as f:
        spn = str_to_spn(f.read().strip())
    return log_likelihood(spn, rows).ravel().tolist()


LIBS = {"spflow": (spflow_make, spflow_eval)}


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "make" and argv[1] in LIBS:
        os.makedirs(argv[2], exist_ok=True)
        LIBS[argv[1]][0](argv[2])
        return 0
    if len(argv) == 4 and argv[0] == "eval" and argv[1] in LIBS:
        print(json.dumps(LIBS[argv[1]][1](argv[2], read_rows(argv[3]))))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
