"""LearnSPN: the kernels against plain numpy, the splitters on planted structure, learned
models against brute-force enumeration, reproducibility, errors and real data."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal

import spnc
from spnc import DataError, ParameterError
from spnc import _counts as CK
from spnc.learn import _learnspn as LK
from spnc.learn import LearnSPN
from spnc.learn.learnspn import simplify
from spnc.learn.structure import (EBVS, GVS, RGVS, Context, EBVSAdaptive, MIComponents, Slice,
                                  VariableSplitter, register_step)
from spnc.nodes import Product, Sum

from conftest import all_states, shared_data

SPLITTERS = ["gvs", "rgvs", "ebvs", "ebvs_ae", "mi_components"]


def planted(rng, n=3000, blocks=((0, 1, 2), (3, 4), (5,), (6, 7))):
    """Binary data: variables in one block copy a shared coin with 10% noise; blocks are
    independent of each other."""
    d = sum(len(b) for b in blocks)
    X = np.zeros((n, d), dtype=np.uint8)
    for b in blocks:
        z = rng.random(n) < rng.uniform(0.3, 0.7)
        for v in b:
            X[:, v] = z ^ (rng.random(n) < 0.1)
    return X


def ctx_for(X, card=None, alpha=0.1, seed=0):
    card = np.maximum(2, X.max(axis=0).astype(np.int64) + 1) if card is None else np.asarray(card, np.int64)
    return Context(np.ascontiguousarray(X), card, False, alpha=alpha, min_std=1e-2,
                   rng=np.random.default_rng(seed), n_threads=1)


def full_slice(X):
    return Slice(np.arange(X.shape[0]), np.arange(X.shape[1]))


# ---------------------------------------------------------------- kernels vs numpy
def ref_gtest(X, card):
    n, d = X.shape
    G = np.zeros((d, d))
    dof = np.zeros((d, d))
    for i in range(d):
        for j in range(i + 1, d):
            t = np.zeros((card[i], card[j]))
            np.add.at(t, (X[:, i], X[:, j]), 1)
            e = t.sum(1, keepdims=True) * t.sum(0, keepdims=True) / n
            m = t > 0
            G[i, j] = G[j, i] = 2 * np.sum(t[m] * np.log(t[m] / e[m]))
            dof[i, j] = dof[j, i] = (np.count_nonzero(t.sum(1)) - 1) * (np.count_nonzero(t.sum(0)) - 1)
    return G, dof


@pytest.mark.parametrize("card", [[2, 2, 2, 2, 2], [3, 2, 4, 5, 2]])
def test_gtest_matches_numpy(card):
    rng = np.random.default_rng(1)
    X = np.stack([rng.integers(0, k, 500) for k in card], axis=1).astype(np.uint8)
    X[:, 3] = np.where(rng.random(500) < 0.7, X[:, 0], X[:, 3]) % card[3]
    X[:, 4] = 0                                      # a constant column
    ctx = ctx_for(X, card)
    G, dof = ctx.gtest(full_slice(X))
    Gr, dofr = ref_gtest(X.astype(np.int64), card)
    np.testing.assert_allclose(G, Gr, rtol=1e-10, atol=1e-9)
    np.testing.assert_array_equal(dof, dofr)


def test_value_counts_matches_bincount():
    rng = np.random.default_rng(2)
    card = np.array([2, 3, 7])
    X = np.stack([rng.integers(0, k, 300) for k in card], axis=1)
    off = np.concatenate([[0], np.cumsum(card)]).astype(np.int64)
    for dt in (np.uint8, np.int32):
        got = CK.value_counts(np.ascontiguousarray(X, dtype=dt), off)
        want = np.concatenate([np.bincount(X[:, j], minlength=k) for j, k in enumerate(card)])
        np.testing.assert_array_equal(got, want)


def nb_tables(X, lab, card, k, alpha):
    n = len(X)
    lw = np.log((np.bincount(lab, minlength=k) + alpha) / (n + k * alpha))
    T = []
    for c in range(k):
        Xc = X[lab == c]
        T.append([np.log((np.bincount(Xc[:, j], minlength=card[j]) + alpha) / (len(Xc) + alpha * card[j]))
                  for j in range(X.shape[1])])
    return lw, T


def test_nb_hard_em_is_a_fixed_point_with_the_reported_likelihood():
    rng = np.random.default_rng(3)
    card = [2, 3, 2, 4, 2]
    X = np.stack([rng.integers(0, k, 400) for k in card], axis=1).astype(np.uint8)
    off = np.concatenate([[0], np.cumsum(card)]).astype(np.int64)
    protos = np.array([[0, 1], [5, 9], [2, 7]], dtype=np.int64)
    lab, ll = LK.nb_hard_em(X, off, np.array(card, np.int64), protos, 200, 0.5, 1)
    lw, T = nb_tables(X, lab, card, 2, 0.5)
    score = np.stack([lw[c] + sum(T[c][j][X[:, j]] for j in range(len(card))) for c in range(2)], axis=1)
    np.testing.assert_array_equal(lab, np.argmax(score, axis=1))          # converged: nobody moves
    assert ll == pytest.approx(score[np.arange(len(X)), lab].sum(), rel=1e-12)
    lab2, ll2 = LK.nb_hard_em(X, off, np.array(card, np.int64), protos, 200, 0.5, 2)
    np.testing.assert_array_equal(lab, lab2)                               # threads do not matter
    assert ll == ll2


def test_nb_hard_em_recovers_two_planted_clusters():
    rng = np.random.default_rng(4)
    z = rng.random(2000) < 0.4
    P = np.where(z[:, None], 0.9, 0.1)
    X = (rng.random((2000, 12)) < P).astype(np.uint8)
    off = np.arange(0, 26, 2, dtype=np.int64)
    lab, _ = LK.nb_hard_em(X, off, np.full(12, 2, np.int64), np.array([[0, 1], [2, 3], [4, 5]]), 15, 0.1, 1)
    agree = np.mean(lab == z)
    assert max(agree, 1 - agree) > 0.99


def test_kmeans_is_a_lloyd_fixed_point():
    rng = np.random.default_rng(5)
    X = np.concatenate([rng.normal(0, 1, (300, 3)), rng.normal(4, 1, (200, 3))])
    lab, inertia = LK.kmeans(X, np.array([[0, 1], [10, 400]], np.int64), 100, 1)
    cent = np.stack([X[lab == c].mean(0) for c in range(2)])
    d2 = ((X[:, None, :] - cent[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(lab, d2.argmin(1))
    assert inertia == pytest.approx(d2.min(1).sum(), rel=1e-10)
    assert np.mean(lab[:300] == lab[0]) > 0.97 and np.mean(lab[300:] != lab[0]) > 0.97


@pytest.mark.parametrize("n,p", [(1, 0.5), (7, 0.0), (30, 0.05), (60, 0.02), (40, 0.5)])
def test_components_match_scipy(n, p):
    from scipy.sparse.csgraph import connected_components
    from spnc.learn.structure import components
    rng = np.random.default_rng(n)
    A = rng.random((n, n)) < p
    A = A | A.T
    k, lab = connected_components(A, directed=False)
    groups = components(A)
    assert len(groups) == k
    assert sorted(np.concatenate(groups).tolist()) == list(range(n))
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)
    for g in groups:
        assert np.all(np.diff(g) > 0) and np.all(lab[g] == lab[g[0]])


# ---------------------------------------------------------------- splitters
def test_gvs_finds_the_planted_blocks():
    X = planted(np.random.default_rng(6))
    groups = GVS(5.0).split(ctx_for(X), full_slice(X))
    assert [g.tolist() for g in groups] == [[0, 1, 2], [3, 4], [5], [6, 7]]


def test_gvs_threshold_is_two_dof_rho():
    rng = np.random.default_rng(7)
    X = planted(rng, blocks=((0, 1),))
    X = np.concatenate([X, rng.integers(0, 2, (len(X), 1)).astype(np.uint8)], axis=1)
    ctx = ctx_for(X)
    G, dof = ctx.gtest(full_slice(X))
    rho_cut = G[0, 1] / (2 * dof[0, 1])
    assert len(GVS(rho_cut * 0.99).split(ctx, full_slice(X))) == 2
    assert len(GVS(rho_cut * 1.01).split(ctx, full_slice(X))) == 3


def test_rgvs_returns_a_partition_and_uses_the_seed():
    X = planted(np.random.default_rng(8), blocks=tuple((i, i + 1) for i in range(0, 20, 2)))
    for seed in range(5):
        groups = RGVS(5.0).split(ctx_for(X, seed=seed), full_slice(X))
        allv = np.sort(np.concatenate(groups))
        np.testing.assert_array_equal(allv, np.arange(20))
        assert 1 <= len(groups) <= 2


def test_ebvs_entropies_and_adaptive_threshold():
    rng = np.random.default_rng(9)
    X = np.stack([rng.random(1000) < p for p in (0.01, 0.5, 0.03, 0.4)], axis=1).astype(np.uint8)
    ctx = ctx_for(X)
    sl = full_slice(X)
    h = EBVS(0.3, 0.1).entropies(ctx, sl)
    p1 = (X.sum(0) + 0.1) / (1000 + 0.2)
    np.testing.assert_allclose(h, -(p1 * np.log2(p1) + (1 - p1) * np.log2(1 - p1)), rtol=1e-12)
    assert [g.tolist() for g in EBVS(0.3, 0.1).split(ctx, sl)] == [[0, 2], [1, 3]]
    half = Slice(np.arange(500), np.arange(4))
    assert EBVSAdaptive(0.3, 0.1).eta(ctx, half) == pytest.approx(0.15)
    assert EBVSAdaptive(0.3, 0.1).eta(ctx, sl) == pytest.approx(0.3)


def test_mi_components_prunes_weak_edges():
    X = planted(np.random.default_rng(10))
    groups = MIComponents(0.01).split(ctx_for(X), full_slice(X))
    assert [g.tolist() for g in groups] == [[0, 1, 2], [3, 4], [5], [6, 7]]


# ---------------------------------------------------------------- learned models
def check_normalised(model, card):
    S = all_states(card)
    total = np.exp(model.score_samples(S)).sum()
    assert total == pytest.approx(1.0, abs=1e-9)


def check_valid(spn):
    """Completeness and decomposability, from the compiled scopes."""
    for n in range(len(spn.kind)):
        if spn.kind[n] > 1:
            continue
        kids = spn.child[spn.child_ptr[n]:spn.child_ptr[n + 1]]
        scopes = [set(spn.scope[spn.scope_ptr[c]:spn.scope_ptr[c + 1]].tolist()) for c in kids]
        if spn.kind[n] == 0:
            assert all(s == scopes[0] for s in scopes), f"sum node {n} is not complete"
        else:
            assert sum(len(s) for s in scopes) == len(set().union(*scopes)), f"product {n} not decomposable"


@pytest.mark.parametrize("splitter", SPLITTERS)
@pytest.mark.parametrize("sum_split,leaves", [("latent", "univariate"), ("latent", "chowliu"),
                                              ("observed", "univariate"), ("observed", "chowliu"),
                                              ("latent", "chowliu_bic")])
def test_every_configuration_is_normalised_and_valid(splitter, sum_split, leaves):
    rng = np.random.default_rng(11)
    X = planted(rng, n=600, blocks=((0, 1, 2), (3, 4, 5, 6, 7)))
    m = LearnSPN(splitter=splitter, sum_split=sum_split, leaves=leaves, min_instances=30,
                 g_factor=1.0, mi_threshold=0.001, entropy_threshold=0.9, max_depth=4, random_state=0).fit(X)
    check_normalised(m, [2] * 8)
    check_valid(m.spn_)
    assert m.spn_.learner["name"] == "learnspn"
    assert m.spn_.learner["params"]["splitter"] == splitter


def test_categorical_data_and_smoothing_cover_unseen_states():
    rng = np.random.default_rng(12)
    card = [3, 2, 4, 3]
    X = np.stack([rng.integers(0, k - 1, 400) for k in card], axis=1)   # top state never seen
    m = LearnSPN(cardinality=card, min_instances=20, random_state=0).fit(X)
    check_normalised(m, card)
    assert np.all(np.isfinite(m.score_samples(all_states(card))))


def test_same_seed_same_model_and_threads_do_not_matter():
    X = planted(np.random.default_rng(13), n=2000)
    a = LearnSPN(splitter="rgvs", random_state=5, min_instances=20, n_threads=1).fit(X).spn_
    b = LearnSPN(splitter="rgvs", random_state=5, min_instances=20, n_threads=2).fit(X).spn_
    for f in ("kind", "child_ptr", "child", "weight", "scope"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


def test_learning_beats_independence_and_chow_liu_leaves_help_on_a_chain():
    rng = np.random.default_rng(14)
    n, d = 4000, 10
    X = np.zeros((n, d), np.uint8)
    X[:, 0] = rng.random(n) < 0.5
    for j in range(1, d):                          # a Markov chain: strong pairwise links
        X[:, j] = X[:, j - 1] ^ (rng.random(n) < 0.15)
    tr, te = X[:3000], X[3000:]
    p = (tr.mean(0) * 3000 + 0.1) / 3000.2
    indep = np.mean(np.sum(np.where(te == 1, np.log(p), np.log1p(-p)), axis=1))
    lspn = LearnSPN(min_instances=50, random_state=0).fit(tr).score(te)
    clt = LearnSPN(leaves="chowliu", min_instances=4000, random_state=0).fit(tr).score(te)
    assert lspn > indep + 1.0
    assert clt > lspn
    # BIC pruning keeps the strong links of the chain, and on 40 rows of independent
    # columns drops the spurious edges a full tree fits to noise
    bic = LearnSPN(leaves="chowliu_bic", min_instances=4000, random_state=0).fit(tr).score(te)
    assert bic > lspn
    noise = (rng.random((2040, 12)) < 0.5).astype(np.uint8)
    full, pruned = (LearnSPN(leaves=lv, min_instances=100, random_state=0).fit(noise[:40]).score(noise[40:])
                    for lv in ("chowliu", "chowliu_bic"))
    assert pruned > full


def test_continuous_data_gives_a_density():
    rng = np.random.default_rng(15)
    cov = np.array([[1.0, 0.8], [0.8, 1.0]])
    X = np.concatenate([rng.multivariate_normal([0, 0], cov, 3000), rng.normal(0, 1, (3000, 1))], axis=1)
    m = LearnSPN(splitter="correlation", min_instances=100, random_state=0).fit(X[:2000])
    assert m.spn_.cardinality.tolist() == [0, 0, 0]
    check_valid(m.spn_)
    # integrates to one over the correlated pair (the third variable marginalised out)
    g = np.linspace(-6, 6, 241)
    A, B = np.meshgrid(g, g, indexing="ij")
    Q = np.stack([A.ravel(), B.ravel(), np.full(A.size, np.nan)], axis=1)
    mass = np.exp(m.score_samples(Q)).sum() * (g[1] - g[0]) ** 2
    assert mass == pytest.approx(1.0, abs=2e-3)
    ref = multivariate_normal([0, 0], cov).logpdf(X[2000:, :2]).mean() + np.mean(
        -0.5 * X[2000:, 2] ** 2 - 0.5 * np.log(2 * np.pi))
    assert m.score(X[2000:]) > ref - 0.3


def test_simplify_splices_chains_and_keeps_the_distribution():
    b = [spnc.Bernoulli(i, 0.2 + 0.1 * i) for i in range(3)]
    b2 = [spnc.Bernoulli(i, 0.7 - 0.1 * i) for i in range(3)]
    inner = Sum([Product([b[0], Product([b[1], b[2]])]), Product(b2)], [0.3, 0.7])
    root = Sum([inner, Product([spnc.Bernoulli(0, 0.5), spnc.Bernoulli(1, 0.5), spnc.Bernoulli(2, 0.5)])],
               [0.6, 0.4])
    S = all_states([2, 2, 2])
    before = spnc.compile(root).log_likelihood(S)
    new = simplify(root)
    assert len(new.children) == 3 and all(len(c.children) == 3 for c in new.children)
    np.testing.assert_allclose(spnc.compile(new).log_likelihood(S), before, rtol=1e-12)


def test_a_new_splitter_plugs_in_by_name():
    class Halves(VariableSplitter):
        def split(self, ctx, sl):
            h = sl.vars.size // 2
            return [np.arange(h), np.arange(h, sl.vars.size)] if h else [np.arange(sl.vars.size)]

    register_step("splitter", "halves", lambda est, continuous: Halves())
    X = planted(np.random.default_rng(16), n=500)
    m = LearnSPN(splitter="halves", random_state=0).fit(X)
    check_normalised(m, [2] * 8)
    m2 = LearnSPN(splitter=Halves(), random_state=0).fit(X)
    np.testing.assert_array_equal(m.spn_.child, m2.spn_.child)


def test_progress_line(capsys):
    X = planted(np.random.default_rng(17), n=500)
    LearnSPN(progress=True, random_state=0).fit(X)
    err = capsys.readouterr().err
    assert "learnspn:" in err and "nodes built" in err and "rows processed" in err


def test_step_seconds_account_for_the_fit():
    m = LearnSPN(random_state=0).fit(planted(np.random.default_rng(19), n=2000))
    st = m.step_seconds_
    assert set(st) == {"variable_split", "instance_split", "base_models"}
    assert all(v > 0 for v in st.values()) and sum(st.values()) <= m.fit_seconds_


def test_estimator_protocol_and_file_roundtrip(tmp_path):
    X = planted(np.random.default_rng(18), n=800)
    m = LearnSPN(splitter="ebvs_ae", min_instances=40, random_state=1)
    assert m.get_params()["splitter"] == "ebvs_ae"
    m.set_params(min_instances=30)
    m.fit(X)
    S = m.sample(200, seed=3)
    assert S.shape == (200, 8) and set(np.unique(S)) <= {0.0, 1.0}
    path = tmp_path / "m.h5"
    spnc.io.save(m.spn_, path)
    back = spnc.io.load(path)
    np.testing.assert_array_equal(back.log_likelihood(X), m.score_samples(X))
    assert back.learner["params"]["min_instances"] == 30


# ---------------------------------------------------------------- errors
def test_clear_errors():
    X = planted(np.random.default_rng(19), n=100)
    with pytest.raises(DataError, match="column 2"):
        Y = X.copy()
        Y[5, 2] = 3
        LearnSPN(leaves="bernoulli").fit(Y)
    with pytest.raises(DataError, match=r"X\[3, 1\]"):
        Y = X.astype(float)
        Y[3, 1] = np.nan
        LearnSPN().fit(Y)
    with pytest.raises(DataError, match="2-D"):
        LearnSPN().fit(X[0])
    with pytest.raises(ParameterError, match="splitter must be .* got 'nope'"):
        LearnSPN(splitter="nope").fit(X)
    with pytest.raises(ValueError, match="correlation"):
        LearnSPN(splitter="gvs").fit(np.random.default_rng(0).normal(size=(50, 3)))
    with pytest.raises(ValueError, match="min_instances"):
        LearnSPN(min_instances=0).fit(X)
    with pytest.raises(ValueError, match="g_factor"):
        LearnSPN(g_factor=float("nan")).fit(X)
    with pytest.raises(DataError, match=r"X\[0, 0\]"):
        F = np.random.default_rng(0).normal(size=(50, 3))
        F[0, 0] = np.inf
        LearnSPN(splitter="correlation", data_type="continuous").fit(F)
    with pytest.raises(ValueError, match="works on discrete"):
        LearnSPN(splitter="correlation", leaves="chowliu").fit(np.random.default_rng(0).normal(size=(50, 3)))


def test_constant_columns_are_fine():
    X = planted(np.random.default_rng(20), n=500)
    X[:, 3] = 1
    m = LearnSPN(random_state=0).fit(X)
    check_normalised(m, [2] * 8)


# ---------------------------------------------------------------- real data
def test_gvs_on_nltcs_reaches_the_published_learnspn_figure():
    root = shared_data("binary")
    tr, te = (np.loadtxt(root / f"nltcs.{s}.data", delimiter=",", dtype=np.uint8) for s in ("train", "test"))
    m = LearnSPN(splitter="gvs", random_state=0).fit(tr)
    assert m.score(te) >= -6.10


def test_gaussian_learnspn_on_banknote_is_a_sane_density():
    root = shared_data("continuous", "banknote")
    folds = [np.loadtxt(root / f"banknote.{k}.data", delimiter=",") for k in range(1, 11)]
    tr = np.concatenate(folds[1:])
    m = LearnSPN(splitter="correlation", random_state=0).fit(tr)
    assert m.score(folds[0]) > -3.5          # a single full-covariance Gaussian gets about -4.4


@pytest.mark.parametrize("scale", [1.0, 1e140])
def test_auto_data_type_says_it_read_whole_floats_as_codes(scale):
    X = np.array([[0.0, 1.0], [1.0, -1.0], [2.0, 0.0]]) * scale
    with pytest.raises(DataError, match=r"X\[\d, 1\] = .* \(data_type='auto' read X as discrete codes, .*"
                                        r"give data_type='continuous' for real values\)$"):
        LearnSPN().fit(X)
    LearnSPN(data_type="continuous", splitter="correlation").fit(X)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_auto_data_type_hint_only_where_reals_could_be_read(bad):
    # NaN and inf are refused by real-valued training too, and a cardinality applies to
    # discrete data only: data_type='continuous' would not help, so no hint to give it
    X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 0.0], [1.0, 1.0]])
    X[2, 1] = bad
    with pytest.raises(DataError, match=r"X\[2, 1\] = .*(missing|infinite)") as e:
        LearnSPN().fit(X)
    assert "data_type" not in str(e.value)
    X[2, 1] = 3.0
    with pytest.raises(DataError, match=r"is not a state 0\.\.1") as e:
        LearnSPN(cardinality=[3, 2]).fit(X)
    assert "data_type" not in str(e.value)
