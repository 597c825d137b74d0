"""oSLRAU learner: counting kernel against a plain-Python Alg. 1, validity after every
batch, the toy experiment of Sec. 4.1, structure_until, input kinds, and exact resume."""
from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import spnc
from spnc.errors import DataError, FormatError

pytest.importorskip("spnc.learn._oslrau", reason="spnc.learn._oslrau is not built (add it to setup.py MODULES)")
from spnc._kinds import LEAF, PRODUCT, SUM  # noqa: E402
from spnc.learn.oslrau import OSLRAU  # noqa: E402

from conftest import shared_data  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def correlated(n: int, d: int = 5, seed: int = 0) -> np.ndarray:
    """Two clusters with correlated first variables and an independent last one."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2, n)
    base = rng.normal(size=(n, 1))
    X = rng.normal(size=(n, d)) * 0.5
    X[:, : d - 1] += base + 3.0 * z[:, None]
    return X


def toy(n: int, seed: int = 0) -> np.ndarray:
    """Sec. 4.1: a 4-component mixture over (x1, x2) times an independent x3."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 4, n)
    return np.c_[rng.normal(1 + 10 * c, 1.0), rng.normal(2 + 10 * c, np.sqrt(2.0)),
                 rng.normal(3.0, np.sqrt(3.0), n)]


def assert_same_model(a: OSLRAU, b: OSLRAU) -> None:
    sa, sb = a.spn_, b.spn_
    for k in ("kind", "child_ptr", "child", "weight"):
        np.testing.assert_array_equal(getattr(sa, k), getattr(sb, k))
    for name in sa.leaf_tables:
        for k, v in sa.leaf_tables[name].to_arrays().items():
            np.testing.assert_array_equal(v, sb.leaf_tables[name].to_arrays()[k])
    la, lb = sa.learner, sb.learner
    assert la["params"] == lb["params"]
    for k in la["arrays"]:
        np.testing.assert_array_equal(la["arrays"][k], lb["arrays"][k])
    np.testing.assert_array_equal(sa.stats["count"], sb.stats["count"])


# ---------------------------------------------------------------------- counting kernel
def reference_step(m: OSLRAU, rows: np.ndarray) -> None:
    """Alg. 1 on the learner's current tree, node by node in Python (Eq. 3-4 as printed;
    a leaf's count starts at 1, a product's at 0)."""
    kids, kind = {n: m._kids(n) for n in range(len(m._kind))}, m._kind
    cache: dict[int, np.ndarray] = {}

    def value(n: int) -> np.ndarray:
        if n in cache:
            return cache[n]
        if kind[n] == LEAF:
            mu, cov = m._node_stats(n)
            x = rows[:, m._node_scope(n)] - mu
            C = cov + m.min_var * np.eye(len(mu))
            L = np.linalg.cholesky(C)
            z = np.linalg.solve(L, x.T)
            v = -0.5 * (z * z).sum(0) - np.log(np.diag(L)).sum() - 0.5 * len(mu) * np.log(2 * np.pi)
        elif kind[n] == PRODUCT:
            v = sum(value(c) for c in kids[n])
        else:
            w = np.array([m._count[c] + 1.0 for c in kids[n]])
            V = np.array([value(c) for c in kids[n]]) + np.log(w / w.sum())[:, None]
            v = np.logaddexp.reduce(V, axis=0)
        cache[n] = v
        return v

    def update(n: int, idx: np.ndarray) -> None:
        if len(idx) == 0:
            return
        if kind[n] != SUM:
            mu, cov = m._node_stats(n)
            x = rows[np.ix_(idx, m._node_scope(n))]
            w = m._count[n] if (m._count[n] > 0 or kind[n] == PRODUCT) else 1.0
            k = len(idx)
            mu_new = (w * mu + x.sum(0)) / (w + k)
            dx = x - mu
            cov_new = (w * cov + dx.T @ dx) / (w + k) - np.outer(mu_new - mu, mu_new - mu)
            mu[:] = mu_new
            cov[:] = cov_new
        m._count[n] += len(idx)
        if kind[n] == PRODUCT:
            for c in kids[n]:
                update(c, idx)
        elif kind[n] == SUM:
            best = np.argmax(np.array([value(c) for c in kids[n]])[:, idx], axis=0)
            for j, c in enumerate(kids[n]):
                update(c, idx[best == j])

    value(m._root)
    update(m._root, np.arange(len(rows)))


def test_kernel_matches_python_reference():
    X = correlated(900, d=5, seed=1)
    m = OSLRAU(batch_size=5, max_leaf_vars=2, min_merge_points=20, random_state=0)
    m.partial_fit(X[:600])                      # grow some structure first
    kinds = set(m.spn_.kind.tolist())
    assert {spnc.graph.SUM, 4} <= kinds
    m.structure_until = m.n_seen_               # parameters only from here on
    ref = OSLRAU.resume(m.spn_)
    before = len(m._kind)
    for r0 in range(600, 900, 5):
        reference_step(ref, X[r0:r0 + 5])
    m.partial_fit(X[600:])
    assert len(m._kind) == before
    np.testing.assert_array_equal(m._count, ref._count)
    np.testing.assert_allclose(m._mean, ref._mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(m._cov, ref._cov, rtol=1e-7, atol=1e-10)


def _tie_counts(seed: int, m: int = 2000) -> np.ndarray:
    """A sum over two identical leaves sees one batch: every row is a tie."""
    from spnc.learn import _oslrau
    X = np.random.default_rng(0).normal(size=(m, 1))
    count = np.zeros(3)
    _oslrau.run(X, 0, m, np.array([0, 1, 2], np.int32), np.array([2, 2, 0], np.int8),
                np.zeros(3, np.int64), np.array([0, 0, 2], np.int64), np.array([0, 1], np.int32),
                np.arange(4, dtype=np.int64), np.zeros(3, np.int32), count, np.zeros(3),
                np.array([0, 1, 2, 2], np.int64), np.ones(2), np.zeros(3, np.int32), 1e-6, seed, 0,
                False, -1, 0, 10.0, True, 0.1, np.empty((3, m)), np.empty((3, m), np.uint8),
                np.empty(9, np.int32), np.empty(3))
    return count


def test_ties_are_broken_at_random_and_reproducibly():
    a, b, c = _tie_counts(1), _tie_counts(1), _tie_counts(2)
    np.testing.assert_array_equal(a, b)
    assert a[2] == 2000 and a[0] + a[1] == 2000
    assert 850 < a[0] < 1150
    assert not np.array_equal(a, c)


def test_sum_weights_are_smoothed_count_ratios():
    m = OSLRAU(batch_size=4, max_leaf_vars=2, min_merge_points=20, random_state=3).fit(correlated(800))
    spn = m.spn_
    count = spn.stats["count"]
    for n in np.flatnonzero(spn.kind == spnc.graph.SUM):
        ch = spn.children(n)
        assert count[n] == count[ch].sum()
        np.testing.assert_allclose(spn.weight[spn.child_ptr[n]:spn.child_ptr[n + 1]],
                                   (count[ch] + 1) / (count[n] + len(ch)), rtol=1e-12)
    root = spn.root
    assert count[root] == 800


# ---------------------------------------------------------------------- structure
@pytest.mark.parametrize("cap", [1, 2])
def test_valid_after_every_batch(cap):
    """Every structure change keeps the SPN complete and decomposable (the SPN validator
    runs on each compile); both merge kinds and the simplifications are exercised."""
    X = correlated(1200, d=5, seed=2)
    m = OSLRAU(batch_size=3, max_leaf_vars=cap, min_merge_points=15, random_state=1)
    seen_sizes = set()
    for r0 in range(0, len(X), 3):
        m.partial_fit(X[r0:r0 + 3])
        spn = m.spn_                            # from_arrays validates structure and parameters
        seen_sizes.add(spn.n_nodes)
        assert np.all(np.isfinite(spn.log_likelihood(X[r0:r0 + 3])))
    deg = np.diff(spn.child_ptr)                # no single-child products, no sum under sum
    assert np.all(deg[spn.kind == spnc.graph.PRODUCT] >= 2)
    par = np.repeat(np.arange(spn.n_nodes), deg)
    assert not np.any((spn.kind[par] == spnc.graph.SUM) & (spn.kind[spn.child] == spnc.graph.SUM))
    assert len(seen_sizes) > 3
    if cap == 2:
        assert "mvgaussian" in spn.leaf_tables and len(spn.leaf_tables["mvgaussian"]) > 0
    assert np.sum(spn.kind == spnc.graph.SUM) > 0


def test_merge_batch_is_passed_down_the_new_mixture():
    """Alg. 2-3: the product absorbs the batch, finds the pair, and the batch then goes
    down the new mixture (not down the two old children). With one row, the new factored
    component is centred on that row, so the row lands there: that component and its
    leaves count 1, each leaf keeps the row as mean and halves the product's variance
    (its initial parameters weigh one point), and the old children miss the row."""
    X = correlated(400, d=3, seed=3)
    m = OSLRAU(batch_size=1, max_leaf_vars=1, min_merge_points=10, spaced_merges=False,
               random_state=0)
    for i, x in enumerate(X):
        before = OSLRAU.resume(m.spn_) if i else None
        m.partial_fit(x[None])
        if np.any(m.spn_.kind == spnc.graph.SUM):
            break
    root = m._root
    assert m._kind[root] == PRODUCT and m._count[root] == i + 1
    mix = [c for c in m._kids(root) if m._kind[c] == SUM]
    assert len(mix) == 1
    p1, p2 = m._kids(mix[0])
    assert m._count[mix[0]] == i + 1 and m._count[p2] == 1 and m._count[p1] == i
    a, b = m._kids(p1)
    assert m._count[a] == m._count[b] == i
    pvar = np.diag(m._node_stats(root)[1])
    joint = m._node_scope(p2)
    for j, leaf in enumerate(m._kids(p2)):
        mu, var = m._node_stats(leaf)
        assert m._count[leaf] == 1
        np.testing.assert_allclose(mu, x[joint[j]:joint[j] + 1], rtol=1e-12)
        np.testing.assert_allclose(var[0, 0], pvar[joint[j]] / 2, rtol=1e-12)
    for leaf in (a, b):                                   # untouched by the merge row
        np.testing.assert_array_equal(m._node_stats(leaf)[0], before._node_stats(leaf)[0])


def test_products_start_from_the_data_alone():
    """Alg. 5 gives a new product count 0 and no prior: its running moments are those of
    the rows that reached it (the root product: all rows), while leaves start at count 1."""
    X = correlated(50, seed=9)
    m = OSLRAU(batch_size=1, structure_until=0, random_state=0).fit(X)
    mu, cov = m._node_stats(m._root)
    np.testing.assert_allclose(mu, X.mean(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cov, np.cov(X.T, bias=True), rtol=1e-9, atol=1e-12)
    one = OSLRAU(batch_size=1, structure_until=0, random_state=0).fit(X[:1])
    leaf = one._kids(one._root)[0]
    lmu, lvar = one._node_stats(leaf)
    x = X[0, 0]
    assert one._count[leaf] == 1
    np.testing.assert_allclose(lmu[0], x / 2, rtol=1e-12)                  # N(0, 1) weighs one
    np.testing.assert_allclose(lvar[0, 0], (1 + x * x) / 2 - x * x / 4, rtol=1e-12)


def test_leaf_factor_cache_is_exact():
    """The kernel's cached leaf factors give the same learner as factors recomputed at
    every batch (the cache is dropped before each one here)."""
    X = correlated(600, d=5, seed=12)
    kw = dict(batch_size=3, max_leaf_vars=2, random_state=4)
    a = OSLRAU(**kw).fit(X)
    b = OSLRAU(**kw)
    for r0 in range(0, len(X), 3):
        if r0:
            b._g["fresh"].view[:] = 0
        b.partial_fit(X[r0:r0 + 3])
    assert_same_model(a, b)


def test_toy_x3_stays_factorised():
    """Sec. 4.1: x3 stays a separate factor while components grow over (x1, x2)."""
    m = OSLRAU(batch_size=1, max_leaf_vars=1, min_merge_points=128, random_state=0)
    m.fit(toy(500))
    small = m.spn_
    m.partial_fit(toy(2000, seed=1))
    spn = m.spn_
    assert spn.kind[spn.root] == spnc.graph.PRODUCT
    scopes = sorted(spn.node_scope(c).tolist() for c in spn.children(spn.root))
    assert scopes == [[0, 1], [2]]
    mix = [c for c in spn.children(spn.root) if spn.node_scope(c).tolist() == [0, 1]][0]
    assert spn.kind[mix] == spnc.graph.SUM
    assert len(spn.children(mix)) >= 3
    assert spn.n_nodes > small.n_nodes


def test_structure_until_freezes_structure_not_parameters():
    X = correlated(1500, seed=4)
    m = OSLRAU(batch_size=5, max_leaf_vars=2, min_merge_points=15, structure_until=500, random_state=0)
    m.fit(X[:500])
    n0, kind0, counts0 = m.spn_.n_nodes, m.spn_.kind.copy(), m.spn_.stats["count"].copy()
    m.partial_fit(X[500:])
    assert m.spn_.n_nodes == n0
    np.testing.assert_array_equal(m.spn_.kind, kind0)
    assert m.spn_.stats["count"][m.spn_.root] == 1500
    assert np.all(m.spn_.stats["count"] >= counts0)


def test_fit_inputs_agree(tmp_path):
    X = correlated(700, seed=5)
    kw = dict(batch_size=7, max_leaf_vars=2, min_merge_points=14, random_state=2)
    a = OSLRAU(**kw).fit(X)
    b = OSLRAU(**kw).fit(iter([X[:350], X[350:]]))
    assert_same_model(a, b)
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["X"] = X
    with h5py.File(tmp_path / "x.h5", "r") as f:
        c = OSLRAU(**kw).fit(f["X"])
    assert_same_model(a, c)


def test_queries_and_errors():
    X = correlated(300, seed=6)
    m = OSLRAU(batch_size=10, random_state=0)
    with pytest.raises(AttributeError):
        m.spn_
    m.fit(X)
    assert m.n_features_in_ == 5 and m.n_seen_ == 300
    assert m.score_samples(X[:4]).shape == (4,)
    assert np.isfinite(m.score(X))
    S = m.sample(50, seed=1)
    assert S.shape == (50, 5) and np.all(np.isfinite(S))
    with pytest.raises(DataError):
        m.partial_fit(np.full((2, 5), np.nan))
    with pytest.raises(DataError):
        m.partial_fit(np.zeros((2, 4)))
    with pytest.raises(ValueError):
        OSLRAU(batch_size=0).fit(X)
    with pytest.raises(FormatError):
        OSLRAU.resume(spnc.compile(spnc.Gaussian(0, 0.0, 1.0)))
    assert "correlation_threshold=0.1" in repr(OSLRAU())


# ---------------------------------------------------------------------- resume
@pytest.mark.parametrize("batch", [1, 8])
def test_resume_is_exact(batch):
    X = correlated(1000, seed=7)
    kw = dict(batch_size=batch, max_leaf_vars=2, min_merge_points=12, random_state=11)
    full = OSLRAU(**kw).fit(X)
    half = OSLRAU(**kw).partial_fit(X[:496])
    spn = pickle.loads(pickle.dumps(half.spn_))     # only the exported model survives
    del half
    resumed = OSLRAU.resume(spn)
    resumed.partial_fit(X[496:])
    assert_same_model(full, resumed)
    np.testing.assert_array_equal(full.score_samples(X[:50]), resumed.score_samples(X[:50]))


def test_partial_fit_takes_dataframe_columns_by_name():
    pd = pytest.importorskip("pandas")
    X = correlated(800, d=3, seed=9) * [1.0, 10.0, 100.0]
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    kw = dict(batch_size=8, min_merge_points=20, random_state=0)
    ref = OSLRAU(**kw).partial_fit(df[:400]).partial_fit(df[400:])
    got = OSLRAU(**kw).partial_fit(df[:400])
    back = OSLRAU.resume(got.spn_)                   # the names survive a resume
    for m in (got, back):
        m.partial_fit(df[400:][["c", "a", "b"]])
        assert m.spn_.var_names == ["a", "b", "c"]
        np.testing.assert_array_equal(m.score_samples(df), ref.score_samples(df))
    with pytest.raises(DataError, match="'c' is not among"):
        got.partial_fit(df[["a", "b"]].assign(z=1.0))


def test_resume_through_a_file_in_a_subprocess(tmp_path):
    if not (hasattr(spnc, "save") and hasattr(spnc, "load")):
        pytest.skip("spnc.save / spnc.load not available yet")
    X = correlated(600, seed=8)
    np.save(tmp_path / "X.npy", X)
    kw = dict(batch_size=2, max_leaf_vars=2, min_merge_points=12, random_state=5)
    full = OSLRAU(**kw).fit(X)
    spnc.save(OSLRAU(**kw).partial_fit(X[:300]).spn_, str(tmp_path / "half.h5"))
    code = ("import sys, numpy as np, spnc; from spnc.learn.oslrau import OSLRAU; "
            f"X = np.load(r'{tmp_path / 'X.npy'}'); m = OSLRAU.resume(r'{tmp_path / 'half.h5'}'); "
            f"m.partial_fit(X[300:]); spnc.save(m.spn_, r'{tmp_path / 'done.h5'}')")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    done = OSLRAU.resume(str(tmp_path / "done.h5"))
    assert_same_model(full, done)


def test_resume_names_the_file_and_the_learner_it_records(tmp_path):
    """Another learner's file: the message names the file and the learner recorded there
    (and the one it started from), or says that none is recorded."""
    from spnc.learn import Merge
    X = correlated(200, seed=2)
    merged = Merge(init=OSLRAU(batch_size=8, random_state=0).fit(X).spn_, epsilon=0.1).fit(X).spn_
    bare = spnc.compile(spnc.Gaussian(0, 0.0, 1.0))
    for model, want in ((merged, r"was made by the learner 'merge' \(applied to a model by 'oslrau'\)"),
                        (bare, r"records no learner")):
        path = tmp_path / "other.json"
        spnc.save(model, path)
        with pytest.raises(FormatError, match=re.escape(str(path)) + " " + want):
            OSLRAU.resume(path)
        with pytest.raises(FormatError, match="the model " + want):
            OSLRAU.resume(model)


def test_fit_on_dataframe_batches_matches_columns_by_name():
    pd = pytest.importorskip("pandas")
    X = correlated(400, seed=9)
    cols = [f"x{i}" for i in range(5)]
    df = pd.DataFrame(X, columns=cols)
    kw = dict(batch_size=8, max_leaf_vars=2, min_merge_points=12, random_state=3)
    b = OSLRAU(**kw).fit(X)
    batches = OSLRAU(**kw).fit([df[:200], df[200:][cols[::-1]]])       # the second batch reordered
    assert batches.spn_.var_names == cols and list(batches.feature_names_in_) == cols
    np.testing.assert_array_equal(batches.score_samples(df[:50]), b.score_samples(X[:50]))


# ---------------------------------------------------------------------- real data
def test_quake_fold_beats_factorised_model():
    d = shared_data("continuous", "qu")
    folds = [np.loadtxt(d / f"qu.{k}.data", delimiter=",", ndmin=2) for k in range(1, 11)]
    train, test = np.vstack(folds[1:]), folds[0]
    m = OSLRAU(batch_size=1, random_state=0).fit(train)
    flat = OSLRAU(batch_size=1, structure_until=0, random_state=0).fit(train)
    assert m.score(test) > flat.score(test) + 0.5


def test_stats_hold_running_moments_per_compiled_node():
    m = OSLRAU(batch_size=4, max_leaf_vars=2, min_merge_points=20, random_state=3).fit(correlated(600))
    spn = m.spn_
    st = spn.stats
    assert st["count"].dtype == np.float64 and st["count"].shape == (spn.n_nodes,)
    X = correlated(600)
    r = spn.root
    if spn.kind[r] == spnc.graph.PRODUCT:      # the root product saw every row: exact moments
        mu = st["mean"][st["mean_ptr"][r]:st["mean_ptr"][r + 1]]
        np.testing.assert_allclose(mu, X.mean(0), rtol=1e-9, atol=1e-12)
    for n in range(spn.n_nodes):
        s = len(spn.node_scope(n)) if spn.kind[n] != spnc.graph.SUM else 0
        assert st["mean_ptr"][n + 1] - st["mean_ptr"][n] == s
        assert st["cov_ptr"][n + 1] - st["cov_ptr"][n] == s * s
