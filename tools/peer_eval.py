"""Evaluate an spnc model in a peer library (run with the peer venv's python; never
imported by spnc). Reads the spnc JSON file with the standard library, rebuilds the model
node for node in the peer's API (Bernoulli leaves only) and prints one JSON line:
{"lib", "rows_per_s", "marginal_rows_per_s", "ll_head"}.

    /tmp/peers/sparc/bin/python tools/peer_eval.py sparc model.json data.npy
"""
import json
import sys
import time

import numpy as np


def load(path):
    d = json.load(open(path))
    kind = d["nodes"]["kind"]
    ptr, child, weight = d["edges"]["ptr"], d["edges"]["child"], d["edges"]["weight"]
    b = d["leaves"]["bernoulli"]
    scope_ptr, scope = d["nodes"]["scope_ptr"], d["nodes"]["scope"]
    leaf = {n: (scope[scope_ptr[n]], p) for n, p in zip(b["node"], b["p"])}
    return kind, ptr, child, weight, leaf


ROOTS = {}


def build(lib, model):
    kind, ptr, child, weight, leaf = model
    objs = [None] * len(kind)
    if lib == "sparc":
        import sparc
        for n, k in enumerate(kind):
            ch = [objs[c] for c in child[ptr[n]:ptr[n + 1]]]
            if k == 0:
                objs[n] = sparc.SumNode(ch, weight[ptr[n]:ptr[n + 1]])
            elif k == 1:
                objs[n] = sparc.ProductNode(ch)
            else:
                objs[n] = sparc.BernoulliInputNode(int(leaf[n][0]), float(leaf[n][1]))
        ROOTS["sparc"] = objs[-1]   # its sampler takes the node graph, not the compiled circuit
        return objs[-1].compile()
    from spn.structure.Base import Product, Sum, assign_ids, rebuild_scopes_bottom_up
    from spn.structure.leaves.parametric.Parametric import Bernoulli
    for n, k in enumerate(kind):
        ch = [objs[c] for c in child[ptr[n]:ptr[n + 1]]]
        if k == 0:
            objs[n] = Sum(weights=list(weight[ptr[n]:ptr[n + 1]]), children=ch)
        elif k == 1:
            objs[n] = Product(children=ch)
        else:
            objs[n] = Bernoulli(p=float(leaf[n][1]), scope=[int(leaf[n][0])])
    root = objs[-1]
    assign_ids(root)
    rebuild_scopes_bottom_up(root)
    return root


def evaluate(lib, circuit, X):
    if lib == "sparc":   # integer codes for complete rows (its fast path); floats with NaN = missing
        if not np.isnan(X).any():
            return circuit.log_likelihood(np.ascontiguousarray(X, dtype=np.int32))
        return circuit.log_likelihood(np.ascontiguousarray(X, dtype=np.float64))
    from spn.algorithms.Inference import log_likelihood
    return log_likelihood(circuit, X)[:, 0]


def timed(f, repeat=3):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2], out


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("sparc", "spflow"):
        print(__doc__.strip() + "\n\nusage: peer_eval.py {sparc,spflow} MODEL.json DATA.npy", file=sys.stderr)
        sys.exit(0 if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help") else 2)
    lib, model_path, data_path = sys.argv[1:4]
    X = np.load(data_path)
    circuit = build(lib, load(model_path))
    t, ll = timed(lambda: evaluate(lib, circuit, X))
    Xm = X.copy()
    Xm[np.random.default_rng(0).random(X.shape) < 0.3] = np.nan
    try:
        tm, mll = timed(lambda: evaluate(lib, circuit, Xm))
        mrate, mhead = len(X) / tm, [float(v) for v in np.asarray(mll)[:50]]
    except Exception as e:  # reported, not hidden: the caller prints why
        mrate, mhead = None, f"{type(e).__name__}: {e}"
    srate = None
    if lib == "sparc":  # unconditional ancestral sampling of as many rows
        import sparc
        ts, _ = timed(lambda: sparc.sample(ROOTS['sparc'], len(X), seed=0))
        srate = len(X) / ts
    print(json.dumps({"lib": lib, "rows_per_s": len(X) / t, "marginal_rows_per_s": mrate, "sample_rows_per_s": srate,
                      "ll_head": [float(v) for v in np.asarray(ll)[:50]], "marginal_ll_head": mhead}))


if __name__ == "__main__":
    main()
