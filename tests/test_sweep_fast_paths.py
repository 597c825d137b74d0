"""The sweep engine's fast paths against their plain references: the linear sweep on plain
doubles against the scaled (mantissa, exponent) sweep (the same bits wherever no value
underflows or overflows, and the scaled sweep's bits where one does: the block is redone;
both are checked against brute force elsewhere), and the tiled transposition of a chunk
against numpy's."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc import _graph
from spnc.nodes import Product, Sum

from conftest import learned_trees, merge_data, random_spn


def _graph_of(spn, plain):
    return _graph.Graph(spn.kind, spn.child_ptr, spn.child, spn.logw, spn.leaf_slot, spn.roots,
                        spn.n_leaves, spn.weight, linear=True, plain=plain)


def _queries(spn, X, plain, shares=None):
    spn._compiled = _graph_of(spn, plain)
    assert spn._compiled.plain is plain
    if shares is not None:      # the backward's forward writes each sum edge's share
        spn._compiled.shares = shares
    bw = spn.backward(X, leaf_responsibilities=True)
    ll = spn.log_likelihood(X)
    return ll, spn.log_likelihood(X, n_threads=2), bw, spn.mpe(X[np.isfinite(ll)])


def _models(seed):
    rng = np.random.default_rng(seed)
    card = [2, 3, 2, 4, 2]
    small = spnc.compile(random_spn(rng, card, share=0.5), cardinality=card)
    d = 1200       # products of 1200 probabilities below 0.2 underflow plain doubles
    p = rng.uniform(0.01, 0.2, size=(2, d))
    wide = spnc.compile(Sum([Product([spnc.Bernoulli(v, p[k, v]) for v in range(d)]) for k in range(2)],
                            [1e-300, 1.0 - 1e-300]))
    # Gaussian densities above 1e300 and below 1e-300 in one product; a wide sum (no shares)
    g = [Product([spnc.Gaussian(0, 0.0, 1e-160), spnc.Gaussian(1, 0.0, 1e-160), spnc.Indicator(2, k % 3)])
         for k in range(6)] + [Product([spnc.Gaussian(0, 5.0, 1.0), spnc.Gaussian(1, -5.0, 2.0),
                                        spnc.Indicator(2, 0)])]
    gauss = spnc.compile(Sum(g, list(rng.dirichlet(np.ones(len(g))))), cardinality=[0, 0, 3])
    return [small, wide, gauss]


@pytest.mark.parametrize("shares", [None, True])
@pytest.mark.parametrize("seed", range(3))
def test_plain_and_scaled_sweeps_agree_bit_for_bit(seed, shares):
    rng = np.random.default_rng(seed)
    for spn in _models(seed):
        if spn.n_vars == 3:
            X = np.column_stack([rng.choice([0.0, 1e-161, 5.0, 50.0], 400), rng.choice([0.0, -5.0, 3e-160], 400),
                                 rng.integers(0, 3, 400).astype(float)])
        else:
            X = spn.sample(400, seed=seed)
        X[rng.random(X.shape) < 0.2] = np.nan
        ll_p, ll2_p, bw_p, mpe_p = _queries(spn, X, True, shares)
        ll_s, ll2_s, bw_s, mpe_s = _queries(spn, X, False, shares)
        assert np.isfinite(ll_s).mean() > 0.5
        np.testing.assert_array_equal(ll_p, ll_s)
        np.testing.assert_array_equal(ll2_p, ll_s)
        np.testing.assert_array_equal(bw_p["log_likelihood"], bw_s["log_likelihood"])
        # posteriors agree bit for bit above 2^-1022; below, both are zero to that precision
        for key in ("edge_counts", "node_counts", "leaf_responsibilities"):
            np.testing.assert_allclose(bw_p[key], bw_s[key], rtol=1e-15, atol=1e-300)
        for a, b in zip(mpe_p, mpe_s):   # completed rows, and their values
            np.testing.assert_array_equal(a, b)


def test_plain_sweep_is_the_default_and_underflow_falls_back():
    """Rows whose plain values would underflow still get the exact log-likelihood, and a
    model whose blocks keep underflowing stops trying plain doubles: sweeps of root values
    (log-likelihoods) and of every node (backward) each by their own tally."""
    from spnc._sweep import graph_of
    d = 1500
    spn = spnc.compile(Product([spnc.Bernoulli(v, 0.3) for v in range(d)]))
    assert graph_of(spn).plain and graph_of(spn).plain_roots
    for _ in range(10):
        assert spn.log_likelihood(np.ones((1, d)))[0] == pytest.approx(d * np.log(0.3), rel=1e-13)
    g = graph_of(spn)
    assert not g.plain_roots and g.roots_falls >= 8 and g.plain and g.plain_falls == 0
    for _ in range(10):
        spn.backward(np.ones((1, d)))
    assert not g.plain and g.plain_falls >= 8
    big = spnc.compile(Product([spnc.Bernoulli(v, 0.3) for v in range(d)]))
    big.log_likelihood(np.ones((5000, d)))          # one sweep spends its whole budget
    assert not graph_of(big).plain_roots
    small = spnc.compile(Product([spnc.Bernoulli(v, 0.3) for v in range(20)]))
    for _ in range(10):
        small.log_likelihood(np.ones((100, 20)))
        small.backward(np.ones((100, 20)))
    assert graph_of(small).plain_roots and graph_of(small).roots_falls == 0
    assert graph_of(small).plain and graph_of(small).plain_falls == 0


@pytest.mark.parametrize("layout", ["C", "F", "strided", "packed", "float32"])
def test_tiled_transpose_matches_numpy(layout):
    from spnc import _data
    rng = np.random.default_rng(0)
    base = rng.normal(size=(203, 2 * 19))
    packed = np.zeros(203, dtype=[("a", "i1"), ("b", "f8", (19,))])   # rows 153 bytes apart
    packed["b"] = base[:, :19]
    X = {"C": base[:, :19].copy(), "F": np.asfortranarray(base[:, :19]), "strided": base[:, ::2],
         "packed": packed["b"], "float32": base[:, :19].astype(np.float32)}[layout]
    for r0, r1 in [(0, 203), (5, 5), (17, 200), (200, 203)]:
        XT = np.full((19, r1 - r0 + 3), 7.0)
        if layout == "float32":
            with pytest.raises(ValueError):
                _data.transpose_into(X, r0, r1, XT)
            continue
        _data.transpose_into(X, r0, r1, XT)
        np.testing.assert_array_equal(XT[:, : r1 - r0], X[r0:r1].T)
        assert (XT[:, r1 - r0:] == 7.0).all()
    with pytest.raises(ValueError):
        _data.transpose_into(base[:, :19].copy(), 0, 204, np.empty((19, 204)))
    spn = spnc.compile(Sum([Product([spnc.Gaussian(v, 0.0, 1.0) for v in range(19)])], [1.0]))
    np.testing.assert_allclose(spn.log_likelihood(X), spn.log_likelihood(np.asarray(X, dtype=np.float64)))


def test_tiled_transpose_back_is_the_inverse():
    from spnc import _data
    rng = np.random.default_rng(1)
    XT = rng.normal(size=(19, 210))
    for r0, r1 in [(0, 203), (5, 5), (17, 200), (200, 203)]:
        out = np.full((203, 19), 7.0)
        _data.transpose_back(XT, out, r0, r1, 2)
        np.testing.assert_array_equal(out[r0:r1], XT[:, : r1 - r0].T)
        assert (out[:r0] == 7.0).all() and (out[r1:] == 7.0).all()
    with pytest.raises(ValueError):
        _data.transpose_back(XT, np.empty((203, 18)), 0, 10)
    with pytest.raises(ValueError):
        _data.transpose_back(XT[:, :5].copy(), np.empty((203, 19)), 0, 10)


@pytest.mark.parametrize("layout", ["C", "F", "strided", "reversed", "packed"])
def test_staged_rows_match_the_transposed_chunk(monkeypatch, layout):
    """Blocks that stage their own rows (every leaf inline) give the bits of the sweep over a
    transposed chunk: partial blocks, widths that are not whole vector tiles, any layout."""
    import spnc._selection
    import spnc.graph
    from spnc._kinds import MARGINAL
    from spnc._sweep import Sweep

    class Unstaged(Sweep):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "stage": False})

    rng = np.random.default_rng(4)
    for card in ([2, 3, 2, 4, 2], [2] * 13, [3] * 19, [2] * 69):   # 13, 19, 69: rows not whole lines
        spn = spnc.compile(random_spn(rng, card, share=0.5), cardinality=card)
        for n in (1, 63, 64, 203):
            base = spn.sample(n, seed=n).repeat(2, axis=1)
            base[rng.random(base.shape) < 0.3] = np.nan
            packed = np.zeros(n, dtype=[("a", "i1"), ("b", "f8", (len(card),))])
            packed["b"] = base[:, ::2]
            X = {"C": base[:, ::2].copy(), "F": np.asfortranarray(base[:, ::2]), "strided": base[:, ::2],
                 "reversed": np.ascontiguousarray(base[:, ::-1])[::-1, ::-2], "packed": packed["b"]}[layout]
            assert Sweep(spn, spn._check_X(X), MARGINAL, 1, stage=True).staged == (layout != "packed")
            got = [spn.log_likelihood(X), *spn.mpe(X, log_likelihood=True), spn.sample(evidence=X, seed=1),
                   spn.backward(X)["edge_counts"]]
            monkeypatch.setattr(spnc.graph, "Sweep", Unstaged)
            monkeypatch.setattr(spnc._selection, "Sweep", Unstaged)     # MPE and sampling
            want = [spn.log_likelihood(X), *spn.mpe(X, log_likelihood=True), spn.sample(evidence=X, seed=1),
                    spn.backward(X)["edge_counts"]]
            monkeypatch.undo()
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)


def test_inline_leaf_states_are_kept_and_follow_in_place_edits():
    """The state tables of the inline leaves are built once per mode and model, and rebuilt
    when a parameter array is edited in place."""
    spn = spnc.compile(Sum([Product([spnc.Bernoulli(0, 0.2), spnc.Categorical(1, [0.5, 0.3, 0.2])]),
                            Product([spnc.Bernoulli(0, 0.9), spnc.Categorical(1, [0.1, 0.1, 0.8])])], [0.4, 0.6]))
    X = np.array([[0.0, 2.0], [1.0, np.nan]])

    def brute():
        p = spn.leaf_tables["bernoulli"].params["p"]
        out = []
        for x0, x1 in X:
            comp = []
            for k in range(2):
                c = spn.leaf_tables["categorical"].params
                lc = 1.0 if np.isnan(x1) else c["prob"][c["prob_ptr"][k] + int(x1)]
                comp.append([0.4, 0.6][k] * (p[k] if x0 == 1 else 1 - p[k]) * lc)
            out.append(np.log(sum(comp)))
        return np.array(out)
    from spnc._sweep import leaf_states
    first = leaf_states(spn, 0)
    assert leaf_states(spn, 0) is first
    np.testing.assert_allclose(spn.log_likelihood(X), brute(), rtol=1e-12)
    spn.leaf_tables["bernoulli"].params["p"][:] = [0.7, 0.05]
    spn.leaf_tables["categorical"].params["prob"][:3] = [0.2, 0.2, 0.6]
    assert leaf_states(spn, 0) is not first
    np.testing.assert_allclose(spn.log_likelihood(X), brute(), rtol=1e-12)


def _flat(v) -> np.ndarray:
    """The numbers of a nest of dicts, tuples and arrays, in order."""
    if isinstance(v, dict):
        return np.concatenate([_flat(v[k]) for k in sorted(v)] or [np.zeros(0)])
    if isinstance(v, (list, tuple)):
        return np.concatenate([_flat(x) for x in v] or [np.zeros(0)])
    return np.asarray(v, dtype=np.float64).ravel()


def _wide_models(seed):
    """DAGs whose sums are wide (no edge shares: the gathering backward sweep), a mixture of
    roots, a sum whose children are sums, and a root that is also a child."""
    rng = np.random.default_rng(seed)
    card = [2, 3, 2, 4, 2, 2]
    dag = spnc.compile(random_spn(rng, card, depth=4, share=0.6), cardinality=card)
    leaves = [[spnc.Bernoulli(v, float(rng.uniform(0.1, 0.9))) for _ in range(3)] for v in range(4)]
    left = [Product([a, b]) for a in leaves[0] for b in leaves[1]]
    right = [Product([a, b]) for a in leaves[2] for b in leaves[3]]
    top_l = [Sum(left, list(rng.dirichlet(np.ones(9)))) for _ in range(3)]
    top_r = [Sum(right, list(rng.dirichlet(np.ones(9)))) for _ in range(3)]
    prods = [Product([a, b]) for a in top_l for b in top_r]
    inner = Sum(prods, list(rng.dirichlet(np.ones(9))))
    region = spnc.compile(Sum([inner, Sum(prods[:4], list(rng.dirichlet(np.ones(4))))], [0.3, 0.7]))
    mixture = spnc.compile([inner, prods[0], prods[5]], root_weights=[0.5, 0.2, 0.3])
    return [(dag, card), (region, [2] * 4), (mixture, [2] * 4)]


@pytest.mark.parametrize("seed", range(3))
def test_gathering_backward_agrees_with_pushing(seed):
    """The backward sweep that gathers from sum parents gives the pushing sweep's posteriors,
    edge and node counts, leaf responsibilities and EM state counts (to rounding), and the
    same bits on one and two threads."""
    from spnc._sweep import graph_of
    from spnc.learn import EM
    rng = np.random.default_rng(seed)
    for spn, card in _wide_models(seed):
        X = rng.integers(0, card, size=(300, len(card))).astype(float)
        X[rng.random(X.shape) < 0.25] = np.nan
        w = rng.uniform(0.2, 3.0, len(X))
        g = graph_of(spn)
        g.shares = False
        runs = {}
        for gather in (True, False):
            g.gather = gather
            runs[gather] = spn.backward(X, sample_weight=w, node_posteriors=True, leaf_responsibilities=True)
            em = EM(init=spn, check_leaves=False)
            em._setup(spn)
            runs[gather]["states"] = em._estep(spn, X, w, hard=False)["leaf"]
        got, want = runs[True], runs[False]
        np.testing.assert_array_equal(got["log_likelihood"], want["log_likelihood"])
        for key in ("edge_counts", "node_counts", "node_posteriors", "leaf_responsibilities"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-12, atol=1e-15, err_msg=key)
        stats = [(_flat(got["states"][k]), _flat(want["states"][k])) for k in want["states"]]
        assert any(a.size for a, _ in stats)
        for a, b in stats:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
        # each sum's edges carry its mass; the sums of node counts match the posteriors
        for n in np.flatnonzero(spn.kind == 0):
            a, b = spn.child_ptr[n], spn.child_ptr[n + 1]
            assert got["edge_counts"][a:b].sum() == pytest.approx(got["node_counts"][n], rel=1e-12)
        g.gather = True
        one, two = spn.backward(X, n_threads=1), spn.backward(X, n_threads=2)
        np.testing.assert_array_equal(one["log_likelihood"], two["log_likelihood"])
        np.testing.assert_allclose(one["edge_counts"], two["edge_counts"], rtol=1e-13)


def test_aliased_nodes_count_as_their_chain_head():
    """The sweeps count only the heads of alias chains (nodes whose only parent is a
    product share its posterior) and skip leaves asked nothing else; every node's count
    still equals the weighted sum of its posteriors, whatever else the pass returns."""
    rng = np.random.default_rng(5)
    card = [2, 3, 2, 2, 4, 2]
    spn = spnc.compile(random_spn(rng, card, depth=4), cardinality=card)
    from spnc._sweep import graph_of
    g = graph_of(spn)
    alias = g.alias_[:spn.n_nodes].astype(bool)
    assert alias[spn.kind >= 2].any() and alias[spn.kind == 0].any()     # leaves and sums
    X = rng.integers(0, card, size=(700, len(card))).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    w = rng.uniform(0.1, 2.0, len(X))
    full = spn.backward(X, sample_weight=w, node_posteriors=True)
    want = w @ full["node_posteriors"]
    for kw in ({}, {"leaf_responsibilities": True}, {"node_posteriors": True}):
        got = spn.backward(X, sample_weight=w, **kw)["node_counts"]
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=str(kw))
        np.testing.assert_array_equal(got[alias], got[g.group_[alias]])


def test_kernel_buffers_start_on_a_cache_line():
    from spnc._buffers import aligned_empty, whole_lines
    from spnc._sweep import Sweep, transposed_chunk
    for shape in [(3, whole_lines(13)), 17, (2, 64)]:
        for zero in (False, True):
            a = aligned_empty(shape, zero=zero)
            assert a.ctypes.data % 64 == 0 and a.flags.c_contiguous
            assert a.shape == ((shape,) if np.ndim(shape) == 0 else shape)
            if zero:
                assert not a.any()
            if a.ndim == 2:
                assert a.strides[0] % 64 == 0
    rng = np.random.default_rng(0)
    spn = spnc.compile(random_spn(rng, [2, 2, 3]), cardinality=[2, 2, 3])
    X = rng.integers(0, 2, size=(100, 3)).astype(float)
    sw = Sweep(spn, X, 0, 2, workspace="backward")
    assert sw.ws.ctypes.data % 64 == 0 and sw.ws.strides[0] % 64 == 0
    assert transposed_chunk(X, 0, 100).ctypes.data % 64 == 0


def test_aligned_empty_takes_every_shape_form_numpy_does():
    """The allocation runs for every query (plain Python, no np.prod): shapes given as
    numpy integers, 0-d arrays, lists and other dtypes keep working."""
    from spnc._buffers import aligned_empty
    for shape, want in [(np.int64(5), (5,)), (np.array(4), (4,)), ([2, 3], (2, 3)),
                        ((np.int32(3), 8), (3, 8)), ((1, 100), (1, 100)), (0, (0,))]:
        a = aligned_empty(shape)
        assert a.shape == want and a.dtype == np.float64 and a.flags.c_contiguous
        assert a.size == 0 or a.ctypes.data % 64 == 0
    b = aligned_empty((3, 5), np.int32, zero=True)
    assert b.dtype == np.int32 and b.shape == (3, 5) and not b.any() and b.ctypes.data % 64 == 0


def test_sums_of_every_width_give_the_same_shares():
    """The backward's forward forms each sum edge's share in kernels specialised by the
    sum's width (2-8 edges on AVX-512): every width from 1 to 12 agrees with the sweep
    that keeps node values instead, to rounding."""
    rng = np.random.default_rng(5)
    kids = [Sum([Product([spnc.Bernoulli(0, float(rng.uniform(0.1, 0.9))), spnc.Bernoulli(1, float(rng.uniform(0.1, 0.9)))])
                 for _ in range(k)], list(rng.dirichlet(np.ones(k)))) if k > 1
            else Product([spnc.Bernoulli(0, 0.3), spnc.Bernoulli(1, 0.6)]) for k in range(1, 13)]
    spn = spnc.compile(Sum(kids, list(rng.dirichlet(np.ones(len(kids))))))
    X = (rng.random((300, 2)) < 0.5).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    out = []
    for shares in (True, False):
        spn._compiled = _graph_of(spn, True)
        spn._compiled.shares = shares
        out.append(spn.backward(X, node_posteriors=True))
    np.testing.assert_array_equal(out[0]["log_likelihood"], out[1]["log_likelihood"])
    for key in ("edge_counts", "node_counts", "node_posteriors"):
        np.testing.assert_allclose(out[0][key], out[1][key], rtol=1e-13, atol=1e-300)


def test_a_small_chunks_matrix_leaves_are_those_of_a_large_one():
    """A chunk of at most COMPACT_ROWS rows (its matrix leaves evaluated on a compact copy
    and only their rows copied back): the values and the routing of the same rows swept in
    a large chunk."""
    from spnc.learn.routing import node_values, route
    X, _ = merge_data(n=3000)
    tree = learned_trees(X[:600])["latent", "chowliu"]
    rows = X[:700]
    big = node_values(tree, X, np.arange(tree.n_nodes), by_node=True)[:, :700]
    small = node_values(tree, rows, np.arange(tree.n_nodes), by_node=True)
    assert np.array_equal(small.view(np.int64), big.view(np.int64))
    assert (route(tree, rows) != route(tree, X)[:700]).nnz == 0
