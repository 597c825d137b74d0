#!/usr/bin/env python
"""Inference throughput of spnc against plain-numpy evaluations of the same model.

Prints rows/s and edge-evaluations/s (and per core, next to the exp and multiply-add rates
of one core measured in the same run) for log-likelihood, marginals (30 % missing), MPE,
the backward pass, one EM iteration (E-step and M-step on a model as an M-step returns
it, so what is derived from its parameters is rebuilt, as in EM's fit) and sampling, on 1 and 2 threads (always both rows),
with each query's cost relative to a log-likelihood pass and the ratio against (a) a node-by-node numpy
evaluation (one vectorised numpy call per node over all rows) and (b) a layer-by-layer
numpy evaluation (all nodes of one depth at once over blocks of rows), both measured in
the same run. Per model a floor line gives the operations per row any exact pass needs and
the smallest MPE, backward and EM-step / log-likelihood ratios they allow at the arithmetic
pipes' peak (see operations, print_floor). Times are medians of repeats, taken in rounds over all queries (see
time_rounds); the machine is shared, trust the ratios.

    python tools/bench_inference.py                 # default sizes
    python tools/bench_inference.py --edges 1e5 --rows 20000 --quick
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

# threads sleep at barriers instead of spinning, so CPU time counts work, not waiting (a
# parallel region here lasts tens of milliseconds; waking costs microseconds). The peers run
# with the caller's environment: their many short parallel regions would pay for waking.
PEER_ENV = dict(os.environ)
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np  # noqa: E402

import spnc  # noqa: E402
from spnc._kinds import LEAF, PRODUCT, SUM  # noqa: E402
from spnc.leaves.univariate import BernoulliLeaves  # noqa: E402
from _datadir import default_data  # noqa: E402
from _machine import cpu_model, vector_isa  # noqa: E402


def random_model(n_vars: int, target_edges: int, seed: int = 0) -> spnc.SPN:
    """A random region-graph SPN over binary variables (arrays built directly, no objects).

    Each region (a set of variables) has K sum nodes; a region is split in two and every
    pair of child-region sums gives a product, so K grows the model quadratically."""
    rng = np.random.default_rng(seed)
    K = 2
    while True:
        est = _estimate_edges(n_vars, K)
        if est >= target_edges or K > 512:
            break
        K += 1
    kind, children, weights, bern = [], [], [], []

    def add(k, ch=(), w=()):
        kind.append(k)
        children.append(list(ch))
        weights.append(list(w))
        return len(kind) - 1

    def region(vs, k):
        if len(vs) == 1:
            ids = []
            for _ in range(k):
                ids.append(add(2))
                bern.append((ids[-1], vs[0], rng.uniform(0.05, 0.95)))
            return ids
        perm = rng.permutation(vs)
        half = len(vs) // 2
        left, right = region(sorted(perm[:half]), k), region(sorted(perm[half:]), k)
        prods = [add(1, (a, b), (1.0, 1.0)) for a in left for b in right]
        sums = []
        for _ in range(k):
            w = rng.dirichlet(np.ones(len(prods)))
            sums.append(add(0, prods, w))
        return sums

    top = region(list(range(n_vars)), K)
    add(0, top, rng.dirichlet(np.ones(len(top))))
    return _assemble(kind, children, weights, bern, n_vars)


def learnspn_like(n_vars: int, target_edges: int, seed: int = 0) -> spnc.SPN:
    """A tree shaped like LearnSPN output: sums of 2-5 clusters, products splitting the
    scope in 2-4 blocks, univariate Bernoulli leaves; repeated until the edge budget."""
    rng = np.random.default_rng(seed)
    kind, children, weights, bern = [], [], [], []
    budget = [target_edges]

    def add(k, ch=(), w=()):
        kind.append(k)
        children.append(list(ch))
        weights.append(list(w))
        budget[0] -= len(ch)
        return len(kind) - 1

    def build(vs, is_sum):  # recursion depth ~ log(n_vars) levels x 2
        if len(vs) == 1:
            ids = add(2)
            bern.append((ids, vs[0], rng.uniform(0.05, 0.95)))
            return ids
        if is_sum:
            k = int(rng.integers(2, 6)) if budget[0] > 0 else 1
            kids = [build(vs, False) for _ in range(k)]
            return add(0, kids, rng.dirichlet(np.ones(k))) if k > 1 else kids[0]
        parts = np.array_split(rng.permutation(vs), min(len(vs), int(rng.integers(2, 5))))
        return add(1, [build(sorted(p), True) for p in parts], [1.0] * len(parts))

    build(list(range(n_vars)), True)
    return _assemble(kind, children, weights, bern, n_vars)


def _assemble(kind, children, weights, bern, n_vars):
    kind = np.array(kind, dtype=np.uint8)
    ptr = np.zeros(len(kind) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in children], out=ptr[1:])
    child = np.concatenate([np.array(c, dtype=np.int64) for c in children])
    weight = np.concatenate([np.array(w, dtype=np.float64) for w in weights])
    b = np.array(bern)
    table = BernoulliLeaves(b[:, 0].astype(np.int64), [np.array([int(v)]) for v in b[:, 1]], {"p": b[:, 2].copy()})
    return spnc.SPN.from_arrays(kind, ptr, child, weight, {"bernoulli": table}, np.full(n_vars, 2))


def _estimate_edges(n_vars, K):
    if n_vars == 1:
        return 0
    h = n_vars // 2
    return _estimate_edges(h, K) + _estimate_edges(n_vars - h, K) + 2 * K * K + K * K * K


# ---------------------------------------------------------------------- numpy references
def numpy_node_by_node(spn: spnc.SPN, X: np.ndarray) -> np.ndarray:
    """One numpy call per node, vectorised over all rows (log domain)."""
    N = spn.n_nodes
    vals = [None] * N
    t = spn.leaf_tables["bernoulli"]
    p = t.params["p"]
    for i, n in enumerate(t.node):
        x = X[:, t.var[i]]
        vals[n] = np.where(np.isnan(x), 0.0, np.where(x == 1, np.log(p[i]), np.log1p(-p[i])))
    lw = spn.logw
    for n in np.flatnonzero(spn.kind < LEAF):
        a, b = spn.child_ptr[n], spn.child_ptr[n + 1]
        ch = spn.child[a:b]
        if spn.kind[n] == PRODUCT:
            v = vals[ch[0]].copy()
            for c in ch[1:]:
                v += vals[c]
        else:
            stack = np.stack([vals[c] for c in ch]) + lw[a:b, None]
            m = stack.max(0)
            v = m + np.log(np.exp(stack - m).sum(0))
        vals[n] = v
    return vals[N - 1]


class NumpyLayered:
    """All nodes of one depth evaluated together over blocks of rows (log domain)."""

    def __init__(self, spn: spnc.SPN):
        N = spn.n_nodes
        depth = np.zeros(N, dtype=np.int64)
        for n in np.flatnonzero(spn.kind < LEAF):  # set-up only, not timed
            depth[n] = depth[spn.children(n)].max() + 1
        self.spn, self.layers = spn, []
        for d in range(1, depth.max() + 1):
            nodes = np.flatnonzero(depth == d)
            for k in (0, 1):
                sel = nodes[spn.kind[nodes] == k]
                if sel.size == 0:
                    continue
                deg = spn.child_ptr[sel + 1] - spn.child_ptr[sel]
                edges = np.concatenate([np.arange(spn.child_ptr[n], spn.child_ptr[n + 1]) for n in sel])
                starts = np.concatenate([[0], np.cumsum(deg)[:-1]])
                self.layers.append((k, sel, spn.child[edges], spn.logw[edges][:, None], starts, np.repeat(np.arange(sel.size), deg)))
        t = spn.leaf_tables["bernoulli"]
        self.leaf = (t.node, t.var, np.log(t.params["p"]), np.log1p(-t.params["p"]))

    def __call__(self, X: np.ndarray, block: int = 1024) -> np.ndarray:
        out = np.empty(len(X))
        node, var, lp, l1p = self.leaf
        for r0 in range(0, len(X), block):
            xb = X[r0:r0 + block].T
            V = np.empty((self.spn.n_nodes, xb.shape[1]))
            x = xb[var]
            V[node] = np.where(np.isnan(x), 0.0, np.where(x == 1, lp[:, None], l1p[:, None]))
            for k, sel, ch, lw, starts, seg in self.layers:
                C = V[ch]
                if k == 1:
                    V[sel] = np.add.reduceat(C, starts, axis=0)
                else:
                    C += lw
                    m = np.maximum.reduceat(C, starts, axis=0)
                    V[sel] = m + np.log(np.add.reduceat(np.exp(C - m[seg]), starts, axis=0))
            out[r0:r0 + block] = V[-1]
        return out


def peer_rates(spn: spnc.SPN, X: np.ndarray, peers: str) -> dict[str, dict]:
    """rows/s of the same model in SPFlow and sparc-pc, each in its own venv (subprocess).
    Peers whose venv is missing are skipped; results are checked against spnc's."""
    import json
    import subprocess
    import tempfile
    out = {}
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        mpath, dpath = os.path.join(tmp, "m.json"), os.path.join(tmp, "x.npy")
        spnc.save(spn, mpath)
        np.save(dpath, X)
        for lib in ("sparc", "spflow"):
            py = os.path.join(peers, lib, "bin", "python")
            if not os.path.exists(py):
                continue
            r = subprocess.run([py, os.path.join(here, "peer_eval.py"), lib, mpath, dpath],
                               capture_output=True, text=True, timeout=1800, env=PEER_ENV)
            if r.returncode:
                print(f"   ({lib} failed: {r.stderr.strip().splitlines()[-1] if r.stderr else r.returncode})")
                continue
            d = json.loads(r.stdout.strip().splitlines()[-1])
            ok = np.allclose(d["ll_head"], spn.log_likelihood(X[:50]), atol=1e-8)
            Xm = X.copy()     # the peer's marginal query: the same mask as peer_eval.py's
            Xm[np.random.default_rng(0).random(X.shape) < 0.3] = np.nan
            mok = (bool(np.allclose(d["marginal_ll_head"], spn.log_likelihood(Xm[:50]), atol=1e-8))
                   if isinstance(d["marginal_ll_head"], list) else d["marginal_ll_head"])
            out[lib] = dict(d, agrees=bool(ok), marginal_agrees=mok)
    return out


CPU_TIME = {}


def timeit(f, repeat=3):
    """Median wall time of ``repeat`` calls; the median process CPU time (all threads) is
    left in ``CPU_TIME["last"]``."""
    ts, cs = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    CPU_TIME["last"] = statistics.median(cs)
    CPU_TIME["min"] = min(cs)
    return statistics.median(ts)


def time_rounds(calls: dict, repeat: int, per_round: int = 2) -> dict:
    """{key: (median wall time, median CPU time, min CPU time)} of ``repeat`` rounds of each
    of ``calls``; a round runs each call once untimed (its caches warm), then ``per_round``
    times timed, back to back. A machine that changes speed for seconds at a time then
    shifts every query alike, where all of one query's repeats in a row could land in one
    slow spell and the next query's in a fast one."""
    wall: dict = {k: [] for k in calls}
    cpu: dict = {k: [] for k in calls}
    for _ in range(repeat):
        for k, f in calls.items():
            f()
            for _ in range(per_round):
                t0, c0 = time.perf_counter(), time.process_time()
                f()
                wall[k].append(time.perf_counter() - t0)
                cpu[k].append(time.process_time() - c0)
    return {k: (statistics.median(wall[k]), statistics.median(cpu[k]), min(cpu[k])) for k in calls}


def ref_time(f, repeat):
    """Median of ``repeat`` calls of a reference, as for spnc's queries, unless one call
    takes over 2 s (the references on the largest models): then that one call. A single
    call of a fast reference varies by up to 2x from run to run."""
    t = timeit(f, 1)
    return t if t > 2.0 or repeat <= 1 else timeit(f, repeat)


def learned_plants(data: str, cache: str | None) -> spnc.SPN | None:
    """A LearnSPN model of the plants training set (the learned-shape case of issue 12),
    read from ``cache`` if that file exists, else learned (and saved there)."""
    if cache and os.path.exists(cache):
        return spnc.load(cache)
    path = os.path.join(data, "binary", "plants.train.data")
    if not os.path.exists(path):
        print(f"   (plants data not found at {path}: learned model skipped)")
        return None
    from spnc.learn import LearnSPN
    X = np.loadtxt(path, delimiter=",")
    spn = LearnSPN(random_state=0).fit(X).spn_
    if cache:
        spnc.save(spn, cache)
    return spn


def operations(spn: spnc.SPN) -> dict[str, int]:
    """Arithmetic operations per row any exact pass needs (leaf reads not counted, a
    multiply-add counted as one): ``forward``, one per sum edge (w_e S_c added to the sum) and k - 1 per
    product of k children; ``mpe``, the forward's with two per sum edge (the weighted term,
    then the running maximum: no instruction fuses the two), arg-max and top-down pass free;
    ``backward`` (after a forward), two per sum edge (w_e q_s to the child's posterior,
    q_s S_c to the edge's count) and one per sum (q_s times the row weight); ``em``, the
    backward's and one per leaf (its posterior added to a state count), M-step free."""
    deg = np.diff(spn.child_ptr)
    sums, prods = spn.kind == SUM, spn.kind == PRODUCT
    sum_edges, prod_ops = int(deg[sums].sum()), int((deg[prods] - 1).sum())
    bwd = 2 * sum_edges + int(sums.sum())
    return {"forward": sum_edges + prod_ops, "mpe": 2 * sum_edges + prod_ops, "backward": bwd,
            "em": bwd + spn.n_leaves}


def print_floor(spn: spnc.SPN, ll_rows_per_s: float, peak: float) -> None:
    """What the arithmetic pipes allow: the share of their peak today's log-likelihood pass
    uses, and the smallest MPE, backward and EM-step / log-likelihood ratios any kernel
    could reach, with today's forward and with a forward at the peak (the backward and the
    EM step run a forward first; MPE's forward replaces it)."""
    ops = operations(spn)
    fwd, t_ll = ops["forward"], 1.0 / ll_rows_per_s
    ideal = f"MPE {ops['mpe'] / fwd:.2f}, backward {1 + ops['backward'] / fwd:.2f}, EM step {1 + ops['em'] / fwd:.2f}"
    print(f"{'':>9} {'':>7} floor      operations per row: forward {fwd}, MPE {ops['mpe']}, backward {ops['backward']}, "
          f"EM {ops['em']}; the log-likelihood pass uses {fwd / peak / t_ll:.0%} of the peak; / loglik >= "
          f"backward {1 + ops['backward'] / peak / t_ll:.2f}, EM step {1 + ops['em'] / peak / t_ll:.2f} with this "
          f"forward; >= {ideal} with a forward at the peak")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--edges", type=float, nargs="*", default=[1e2, 4e3, 1e5, 1e6])
    ap.add_argument("--vars", type=int, default=64)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--shape", choices=["learnspn", "region", "plants"], nargs="*",
                    default=["plants", "learnspn", "region"],
                    help="plants: LearnSPN on the shared plants set; learnspn: small fan-out trees like "
                         "learned models; region: wide region-graph sums")
    ap.add_argument("--data", default=str(default_data()))
    ap.add_argument("--plants-model", default=None, help="HDF5 file caching the learned plants model")
    ap.add_argument("--peers", default="/tmp/peers",
                    help="folder of ../shared/tools/peer-venvs.sh venvs (skipped when missing)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats, skip the slow references on 1e6 edges")
    ap.add_argument("--cpu-time", action="store_true",
                    help="one-thread figures from process CPU time (min of --repeat), which other jobs on a "
                         "shared machine disturb far less than wall-clock time; two-thread figures stay wall clock")
    ap.add_argument("--repeat", type=int, default=None, help="timed calls per query (default 3, 1 with --quick)")
    args = ap.parse_args(argv)
    rep = args.repeat or (1 if args.quick else 3)
    from spnc import _infer, _probe
    from spnc._threads import available_threads
    from spnc.learn import EM
    avail = available_threads()
    # best of several short probes: a probe the OS preempts on a shared machine reads low
    exp_rate = max(_probe.probe("exp") for _ in range(7))
    fma_rate = max(_probe.probe("fma") for _ in range(7))
    peak_rate = max(_probe.probe("peak") for _ in range(7))
    print(f"cpu: {cpu_model()} ({vector_isa()})")
    print(f"spnc {spnc.__version__}  OpenMP={_infer.HAVE_OPENMP}  threads available={avail}  block={_infer.BLOCK}"
          f"  OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}  load average {os.getloadavg()[0]:.2f}")
    print(f"limits of one core, measured now: exp {exp_rate:.3g}/s, multiply-add {fma_rate:.3g}/s streamed "
          f"(a load and a store each), {peak_rate:.3g}/s in registers (the multiply pipes' peak)")
    print(f"{'edges':>9} {'nodes':>7} {'query':<10} {'thr':>3} {'rows/s':>11} {'edge-evals/s':>13} "
          f"{'per core':>9} {'vs node-numpy':>14} {'vs layer-numpy':>15} {'vs loglik':>10} {'2 thr/1':>8} {'cpu 1/2':>8}")
    print("(2 thr/1: wall-clock speed-up; cpu 1/2: CPU seconds of one thread over those of two, all threads"
          " summed: 1.0 means the second thread adds no work, so a wall-clock 2 thr/1 below that is the"
          " machine's load, not the kernel)")
    rng = np.random.default_rng(1)
    cases = []
    for shape in args.shape:
        if shape == "plants":
            cases.append((shape, None))
        else:
            cases += [(shape, t) for t in args.edges]
    for shape, target in cases:
        if shape == "plants":
            spn = learned_plants(args.data, args.plants_model)
            if spn is None:
                continue
        elif shape == "region":
            spn = random_model(args.vars, int(target))
        else:
            spn = learnspn_like(max(16, int(target) // 60), int(target))
        print(f"-- {shape}: {spn!r}")
        X = (rng.random((args.rows, spn.n_vars)) < 0.5).astype(float)
        n = args.rows
        Xm = X.copy()
        Xm[rng.random(X.shape) < 0.3] = np.nan
        nref = min(n, 10000)
        ref_node = ref_layer = None
        if not (args.quick and spn.n_edges > 3e5):
            t = ref_time(lambda: numpy_node_by_node(spn, X[:nref]), rep)
            ref_node = nref / (CPU_TIME["min"] if args.cpu_time else t)
            lay = NumpyLayered(spn)
            t = ref_time(lambda: lay(X[:nref]), rep)
            ref_layer = nref / (CPU_TIME["min"] if args.cpu_time else t)
            got = spn.log_likelihood(X[:200])
            assert np.allclose(got, numpy_node_by_node(spn, X[:200]), atol=1e-9)
            assert np.allclose(got, lay(X[:200]), atol=1e-9)
        em = EM(init=spn, check_leaves=False)
        em._setup(spn)
        ones = np.ones(n)

        def em_step(nt):  # one E-step (backward pass + leaf statistics) and one M-step, on a model
            em.n_threads = nt   # as an M-step leaves it (same parameters, nothing derived from them kept)
            em.rejected_ = 0
            cur = spn._reparameterised(spn.weight, spn.leaf_tables, spn.root_weights)
            em._mstep(cur, em._estep(cur, X, ones, hard=False), X, ones)
        queries = {
            "loglik": lambda nt: spn.log_likelihood(X, n_threads=nt),
            "marginal": lambda nt: spn.log_likelihood(Xm, n_threads=nt),
            "mpe": lambda nt: spn.mpe(Xm, n_threads=nt),
            "backward": lambda nt: spn.backward(X, n_threads=nt),
            "em-step": em_step,
            "sample": lambda nt: spn.sample(n, seed=1, n_threads=nt),
        }
        times = {}
        for nt in (1, 2):  # two threads always run (and say so) even where fewer are available
            times.update(time_rounds({(q, nt): (lambda f=f, nt=nt: f(nt)) for q, f in queries.items()}, rep))
        base, cpu = {}, {}
        for name in queries:
            for nt in (1, 2):
                wall, cmed, cmin = times[(name, nt)]
                t = cmin if args.cpu_time and nt == 1 else wall
                cpu[(name, nt)] = cmed
                rps = n / t
                base[(name, nt)] = rps
                r1 = f"{rps / ref_node:13.1f}x" if ref_node and name == "loglik" else f"{'':>14}"
                r2 = f"{rps / ref_layer:14.1f}x" if ref_layer and name == "loglik" else f"{'':>15}"
                rl = f"{base[('loglik', nt)] / rps:9.2f}x" if name != "loglik" else f"{'':>10}"
                sp = f"{rps / base[(name, 1)]:7.2f}x" if nt == 2 else f"{'':>8}"
                if nt == 2:
                    sp += f" {cpu[(name, 1)] / max(cpu[(name, 2)], 1e-9):7.2f}x"
                note = "" if nt <= avail else "  (more threads than available)"
                print(f"{spn.n_edges:>9} {spn.n_nodes:>7} {name:<10} {nt:>3} {rps:11.3g} {rps * spn.n_edges:13.3g} "
                      f"{rps * spn.n_edges / nt:9.3g} {r1} {r2} {rl} {sp}{note}")
        if spn.n_edges <= 20000 and os.path.isdir(args.peers):
            for lib, d in peer_rates(spn, X[:20000], args.peers).items():
                print(f"{'':>9} {'':>7} {lib:<10} {1:>3} {d['rows_per_s']:11.3g} {d['rows_per_s'] * spn.n_edges:13.3g}"
                      f"   marginal rows/s {d['marginal_rows_per_s'] or float('nan'):.3g}   LL agrees with spnc: {d['agrees']}"
                      f"   marginal agrees: {d['marginal_agrees']}")
                if d.get("sample_rows_per_s"):
                    print(f"{'':>9} {'':>7} {lib + '-samp':<10} {1:>3} {d['sample_rows_per_s']:11.3g}"
                          f"   spnc samples {base[('sample', 1)] / d['sample_rows_per_s']:.2f}x as fast")
        print_floor(spn, base[("loglik", 1)], peak_rate)
        if ref_node:
            print(f"{'':>9} {'':>7} {'numpy-node':<10} {1:>3} {ref_node:11.3g} {ref_node * spn.n_edges:13.3g}")
            print(f"{'':>9} {'':>7} {'numpy-layer':<10} {1:>3} {ref_layer:11.3g} {ref_layer * spn.n_edges:13.3g}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
