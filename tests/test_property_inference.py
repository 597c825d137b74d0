"""Property-based checks of every query against a plain-Python reference, on random
DAG-shaped models over every leaf type (see _property_models): several parents per node,
mixtures and independent roots, mixed discrete and real variables, extreme weights and
zero-probability states; both sweep domains, thread counts and input layouts."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import spnc
from spnc import _graph
from spnc._kinds import MARGINAL, MAX
from spnc.nodes import Sum

from _property_models import post_order, random_model, random_rows, ref_multi, ref_posteriors, ref_value

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

SETTINGS = dict(deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
CARDS = st.lists(st.sampled_from([0, 2, 3, 9]), min_size=1, max_size=5)
DISCRETE = st.lists(st.sampled_from([2, 3, 4]), min_size=1, max_size=4)
TOL = dict(rtol=1e-9, atol=1e-9)


def _compile(roots, kw, card, linear=None):
    spn = spnc.compile(roots if len(roots) > 1 else roots[0], cardinality=card, **kw)
    if linear is not None:      # force one sweep domain
        spn._compiled = _graph.Graph(spn.kind, spn.child_ptr, spn.child, spn.logw, spn.leaf_slot, spn.roots,
                                     spn.n_leaves, spn.weight, linear=linear)
    return spn


def _rows(rng, card, n, miss):
    """Rows with the patterns that matter: all missing, none missing, one variable observed."""
    X = random_rows(rng, card, n, miss)
    X[0] = np.nan
    X[1] = random_rows(rng, card, 1, 0.0)[0]
    X[2, :] = np.nan
    X[2, rng.integers(len(card))] = X[1, 0] if card[0] == 0 else 0.0
    X[2] = np.where(np.isnan(X[2]), np.nan, X[1])
    return X


def _case(seed, card, extreme, multi, linear=None):
    rng = np.random.default_rng(seed)
    roots, kw = random_model(rng, card, extreme=extreme, multi=multi)
    return rng, roots, kw, _compile(roots, kw, card, linear)


@settings(max_examples=40, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), card=CARDS, extreme=st.booleans(), multi=st.booleans(),
       linear=st.sampled_from([None, True, False]))
def test_likelihoods_marginals_and_node_values(seed, card, extreme, multi, linear):
    rng, roots, kw, spn = _case(seed, card, extreme, multi, linear)
    X = _rows(rng, card, 10, 0.4)
    ref = np.array([ref_multi(roots, kw, x) for x in X])
    np.testing.assert_allclose(spn.log_likelihood(X), ref, **TOL)
    order = post_order(roots)
    for mode, name in ((MARGINAL, "sum"), (MAX, "max")):
        nv = spn.node_log_values(X, mode=mode)
        for i, x in enumerate(X):
            memo: dict = {}
            np.testing.assert_allclose(nv[i], [ref_value(n, x, name, memo) for n in order], **TOL)
    # conditionals: query rows extend their evidence rows
    ev = np.where(rng.random(X.shape) < 0.5, np.nan, X)
    q = np.where(np.isnan(ev) & (rng.random(X.shape) < 0.5), X, ev)
    e_ref = np.array([ref_multi(roots, kw, x) for x in ev])
    ok = np.all(np.isfinite(e_ref).reshape(len(X), -1), axis=1)
    q_ref = np.array([ref_multi(roots, kw, x) for x in q[ok]])
    np.testing.assert_allclose(spn.conditional(q[ok], ev[ok]), q_ref - e_ref[ok], **TOL)


@settings(max_examples=40, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), card=CARDS, extreme=st.booleans(), linear=st.sampled_from([True, False]))
def test_mpe_is_a_max_product_completion(seed, card, extreme, linear):
    """MPE's value is the max-product value of the row; the completion keeps the evidence
    and attains it (any of tied completions will do); log_likelihood=True is log p of it.
    Discrete models are also checked by exhaustive search over the completions."""
    rng, roots, kw, spn = _case(seed, card, extreme, False, linear)
    X = _rows(rng, card, 12, 0.5)
    best = np.array([ref_value(roots[0], x, "max") for x in X])
    X, best = X[np.isfinite(best)], best[np.isfinite(best)]
    filled, value = spn.mpe(X)
    filled2, ll = spn.mpe(X, log_likelihood=True)
    assert filled2.tobytes() == filled.tobytes()
    obs = ~np.isnan(X)
    assert np.array_equal(filled[obs], X[obs]) and not np.isnan(filled).any()
    np.testing.assert_allclose(value, best, **TOL)
    np.testing.assert_allclose([ref_value(roots[0], f, "max") for f in filled], best, **TOL)
    np.testing.assert_allclose(ll, [ref_value(roots[0], f) for f in filled], **TOL)
    if all(card):
        for x, b in zip(X, best):
            choices = [range(k) if np.isnan(v) else [int(v)] for v, k in zip(x, card)]
            brute = max(ref_value(roots[0], np.array(c, float), "max") for c in itertools.product(*choices))
            assert brute == pytest.approx(b, rel=1e-9, abs=1e-9)


@settings(max_examples=25, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), card=CARDS, extreme=st.booleans(), multi=st.booleans(),
       linear=st.sampled_from([True, False]))
def test_backward_posteriors_and_weighted_edge_counts(seed, card, extreme, multi, linear):
    rng, roots, kw, spn = _case(seed, card, extreme, multi, linear)
    if kw.get("combine") == "independent":
        roots, kw = roots[:1], {}
        spn = _compile(roots, kw, card, linear)
    X = _rows(rng, card, 8, 0.4)
    X = X[[np.isfinite(ref_multi(roots, kw, x)) for x in X]]
    w = rng.uniform(0.0, 3.0, len(X))
    bw = spn.backward(X, sample_weight=w, node_posteriors=True)
    order = post_order(roots)
    edges = np.zeros(spn.n_edges)
    for i, x in enumerate(X):
        log_p, rho, edge, _ = ref_posteriors(roots, kw, x)
        assert bw["log_likelihood"][i] == pytest.approx(log_p, rel=1e-9, abs=1e-9)
        np.testing.assert_allclose(bw["node_posteriors"][i], rho, rtol=1e-7, atol=1e-9)
        for k, n in enumerate(order):
            if isinstance(n, Sum):
                edges[spn.child_ptr[k]:spn.child_ptr[k + 1]] += w[i] * np.array(
                    [edge[(id(n), j)] for j in range(len(n.children))])
    np.testing.assert_allclose(bw["edge_counts"], edges, rtol=1e-7, atol=1e-9)
    # node counts, formed from the parents' counts after the sweep, are the weighted posteriors
    np.testing.assert_allclose(bw["node_counts"], w @ bw["node_posteriors"], rtol=1e-12, atol=1e-12)


def _frequencies(S, card):
    return np.bincount(np.ravel_multi_index(S.astype(np.int64).T, card), minlength=int(np.prod(card)))


@settings(max_examples=12, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), card=DISCRETE, extreme=st.booleans())
def test_samples_follow_the_joint_and_the_conditional(seed, card, extreme):
    """Frequencies of 20000 draws against the exact probabilities (a chi-square bound),
    impossible states never drawn, evidence kept."""
    from scipy.stats import chisquare
    rng, roots, kw, spn = _case(seed, card, extreme, False)
    allx = np.array(list(itertools.product(*[range(k) for k in card])), dtype=float)
    P = np.exp([ref_value(roots[0], x) for x in allx])
    e = allx[rng.choice(len(allx), p=P / P.sum())].copy()
    e[rng.random(len(card)) < 0.5] = np.nan
    n = 20000
    for S, Q in ((spn.sample(n, seed=seed % 1000), P),
                 (spn.sample(evidence=np.repeat(e[None], n, 0), seed=seed % 1000 + 1),
                  np.where(np.all((allx == e) | np.isnan(e), axis=1), P, 0.0))):
        cnt = _frequencies(S, card)
        assert not cnt[Q == 0].any()
        keep = Q * n > 5
        if keep.sum() > 1:
            exp = Q[keep] / Q[keep].sum() * cnt[keep].sum()
            assert chisquare(cnt[keep], exp).pvalue > 1e-5
    assert np.all(S[:, ~np.isnan(e)] == e[~np.isnan(e)])


@settings(max_examples=12, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), card=CARDS, extreme=st.booleans())
def test_thread_counts_and_sweep_domains_agree(seed, card, extreme):
    """Per-row results are the same bits on 1 and 2 threads (rows over several blocks and
    chunks); the linear and log sweeps agree to rounding."""
    rng, roots, kw, spn = _case(seed, card, extreme, False)
    X = _rows(rng, card, 700, 0.3)
    ll = spn.log_likelihood(X, n_threads=1)
    Xo = X[np.isfinite(ll)]
    runs = []
    for nt in (1, 2):
        runs.append([spn.log_likelihood(X, n_threads=nt), *spn.mpe(Xo, n_threads=nt),
                     spn.mpe(Xo, log_likelihood=True, n_threads=nt)[1],
                     spn.sample(300, seed=5, n_threads=nt), spn.sample(evidence=Xo, seed=6, n_threads=nt),
                     spn.node_log_values(X[:200], n_threads=nt),
                     spn.backward(Xo, leaf_responsibilities=True, n_threads=nt)["leaf_responsibilities"]])
    for a, b in zip(*runs):
        assert a.tobytes() == b.tobytes()
    for linear in (True, False):
        other = _compile(roots, kw, card, linear)
        np.testing.assert_allclose(other.log_likelihood(X), ll, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(other.backward(Xo)["edge_counts"], spn.backward(Xo)["edge_counts"],
                                   rtol=1e-9, atol=1e-9)


@settings(max_examples=12, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), card=CARDS, multi=st.booleans())
def test_input_layouts_and_frames_give_the_same_answers(seed, card, multi):
    pd = pytest.importorskip("pandas")
    rng, roots, kw, spn = _case(seed, card, False, multi)
    names = [f"v{i}" for i in range(len(card))]
    spn = spnc.compile(roots if len(roots) > 1 else roots[0], cardinality=card, var_names=names, **kw)
    X = _rows(rng, card, 150, 0.3)
    base = spn.log_likelihood(X)
    wide = np.repeat(X, 2, axis=1)
    for V in (np.asfortranarray(X), wide[:, ::2], np.repeat(X, 2, axis=0)[::2], X.astype(np.float32)):
        got = spn.log_likelihood(V)
        if V.dtype == np.float32:
            np.testing.assert_array_equal(got, spn.log_likelihood(V.astype(np.float64)))
        else:
            np.testing.assert_array_equal(got, base)
    if all(card):
        Xi = np.nan_to_num(X).astype(np.int64)
        want = spn.log_likelihood(Xi.astype(np.float64))
        for dt in (np.int8, np.uint8, np.int32) + ((bool,) if set(card) == {2} else ()):
            np.testing.assert_array_equal(spn.log_likelihood(Xi.astype(dt)), want)
    perm = rng.permutation(len(card))
    df = pd.DataFrame(X[:, perm], columns=[names[p] for p in perm])
    np.testing.assert_array_equal(spn.log_likelihood(df), base)
    if kw:
        return
    ok = np.isfinite(base)
    f, v = spn.mpe(X[ok])
    fd, vd = spn.mpe(df[ok])
    assert np.array_equal(fd, f[:, perm]) and np.array_equal(vd, v)
    assert np.array_equal(spn.sample(evidence=df[ok], seed=2), spn.sample(evidence=X[ok], seed=2)[:, perm])


@pytest.mark.parametrize("multi", [False, True])
def test_queries_on_no_rows(multi):
    rng, roots, kw, spn = _case(3, [0, 2, 3], False, multi)
    E = np.empty((0, 3))
    assert spn.log_likelihood(E).shape[0] == 0
    assert spn.node_log_values(E).shape == (0, spn.n_nodes)
    assert spn.conditional(E, E).shape[0] == 0
    if not kw:
        assert spn.mpe(E)[0].shape == (0, 3) and spn.mpe(E, log_likelihood=True)[1].shape == (0,)
        assert spn.sample(0, seed=1).shape == (0, 3) and spn.sample(evidence=E, seed=1).shape == (0, 3)
        assert spn.backward(E)["edge_counts"].sum() == 0


@settings(max_examples=60, **SETTINGS)
@given(seed=st.integers(0, 2**32 - 1), card=st.lists(st.sampled_from([2, 3, 5]), min_size=2, max_size=5))
def test_chow_liu_leaves_with_tiny_and_zero_entries(seed, card):
    """One tree leaf whose CPTs mix sure, zero and tiny (down to subnormal) entries:
    marginals, max values, MPE and conditional samples against enumeration."""
    from _property_models import _probs
    rng = np.random.default_rng(seed)
    parents = [-1] + [int(rng.integers(j)) for j in range(1, len(card))]
    cpts = [np.array([_probs(rng, card[j], True) for _ in range(1 if p < 0 else card[p])])
            for j, p in enumerate(parents)]
    leaf = spnc.ChowLiuLeaf(list(range(len(card))), parents, cpts)
    spn = spnc.compile(leaf, cardinality=card)
    allx = np.array(list(itertools.product(*[range(k) for k in card])), dtype=float)
    X = allx[rng.integers(len(allx), size=30)]
    X[rng.random(X.shape) < 0.5] = np.nan
    for mode, name in ((MARGINAL, "sum"), (MAX, "max")):
        np.testing.assert_allclose(spn.node_log_values(X, mode=mode)[:, 0], [ref_value(leaf, x, name) for x in X],
                                   rtol=1e-12, atol=1e-12)
    # single-variable marginals, as learners read them
    var_ptr, var, logm = spn.leaf_tables["cltree"].log_marginals()
    one = np.full((len(logm), len(card)), np.nan)
    one[np.arange(len(logm)), np.repeat(var, [card[v] for v in var])] = np.concatenate([np.arange(card[v]) for v in var])
    np.testing.assert_allclose(logm, [ref_value(leaf, x) for x in one], rtol=1e-12, atol=1e-12)
    best = np.array([ref_value(leaf, x, "max") for x in X])
    X = X[np.isfinite(best)]
    filled, value = spn.mpe(X)
    np.testing.assert_allclose([ref_value(leaf, f, "max") for f in filled], value, rtol=1e-12, atol=1e-12)
    S = spn.sample(evidence=X, seed=1)
    assert np.all(np.isfinite([ref_value(leaf, s) for s in S]))
    assert np.array_equal(S[~np.isnan(X)], X[~np.isnan(X)])
