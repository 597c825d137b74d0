"""Hard routing of models whose decisions are all observed ones (spnc.learn.routing's bit
path, ``_observed_plan`` / ``observed_route``) against the numpy reference and against the
compiled max-product sweep: rows of probability zero, values no child matches, weights of
zero, shared sub-networks, one-child sums and several roots."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc.learn import routing
from spnc.learn._leafcache import LeafCache
from spnc._kinds import MAX
from spnc.nodes import Product, Sum

from test_routing import reference_route


def _random_ospn(rng, card, zeros=True):
    """Observed sums over random subsets of a variable's values (rows of other values match
    no child), products of an indicator and the rest, leaves that may give a state
    probability 0, weights that may be 0, one-child sums and reused sub-networks."""
    pool: dict[tuple, list] = {}

    def leaf(v):
        k = card[v]
        p = rng.dirichlet(np.ones(k))
        if zeros and rng.random() < 0.3:
            p[rng.integers(k)] = 0.0
            p = p / p.sum()
        return spnc.Bernoulli(v, float(p[1])) if k == 2 and rng.random() < 0.5 else spnc.Categorical(v, p)

    def build(scope):
        got = pool.setdefault(scope, [])
        if got and rng.random() < 0.3:
            return got[rng.integers(len(got))]
        if len(scope) == 1:
            node = leaf(scope[0])
        elif rng.random() < 0.25:
            cut = int(rng.integers(1, len(scope)))
            node = Product([build(scope[:cut]), build(scope[cut:])])
        else:
            v, rest = scope[0], scope[1:]
            k = card[v]
            vals = rng.permutation(k)[: int(rng.integers(2, k + 1))] if zeros else np.arange(k)
            w = rng.dirichlet(np.ones(len(vals)))
            if zeros and rng.random() < 0.3:
                w[rng.integers(len(w))] = 0.0
                w = w / w.sum()
            node = Sum([Product([spnc.Indicator(v, int(s)), build(rest)]) for s in vals], w)
        if rng.random() < 0.15:
            node = Sum([node], [1.0])
        got.append(node)
        return node

    return build(tuple(range(len(card))))


def _kernel_route(spn, X, ec):
    """The same routing by the compiled max-product sweep (the bit path switched off)."""
    old = routing._observed_plan
    routing._observed_plan = lambda spn: None
    try:
        return routing.route(spn, X, edge_counts=ec)
    finally:
        routing._observed_plan = old


@pytest.mark.parametrize("seed", range(12))
def test_bit_routing_equals_reference_and_sweep(seed):
    rng = np.random.default_rng(seed)
    card = [3, 2, 4, 2, 3][: 3 + seed % 3]
    roots = [_random_ospn(rng, card, zeros=seed % 4 != 0) for _ in range(1 + seed % 2)]
    spn = spnc.compile(roots if len(roots) > 1 else roots[0], cardinality=card,
                       combine="independent" if len(roots) > 1 else None)
    assert routing._observed_plan(spn) is not None, "the bit path applies to these models"
    n = [1, 63, 64, 65, 300, 1000][seed % 6]
    X = np.column_stack([rng.integers(0, k, size=n) for k in card]).astype(np.float64)
    ec = np.zeros(spn.n_edges)
    R = routing.route(spn, X, edge_counts=ec)
    want, want_ec = reference_route(spn, X)
    assert np.array_equal(R.toarray(), want)
    assert np.array_equal(ec, want_ec)
    ec2 = np.zeros(spn.n_edges)
    assert (R != _kernel_route(spn, X, ec2)).nnz == 0 and np.array_equal(ec, ec2)
    cache = LeafCache(X, MAX)               # its masks kept between calls, equal results
    for _ in range(2):
        assert (routing.route(spn, X, cache=cache) != R).nnz == 0


def test_bit_path_is_not_taken_where_a_decision_reads_values():
    rng = np.random.default_rng(1)
    a, b = (_random_ospn(rng, [2, 3, 2]) for _ in range(2))
    assert routing._observed_plan(spnc.compile(Sum([a, b], [0.5, 0.5]))) is None      # a latent sum
    mix = spnc.compile([a, b], root_weights=[0.4, 0.6], cardinality=[2, 3, 2])
    assert mix.combine == "mixture" and routing._observed_plan(mix) is None          # a root picked by value
    X = np.array([[0, 2, 1], [1, 0, 0], [1, 1, 1]], dtype=np.float64)
    want, _ = reference_route(mix, X)
    assert np.array_equal(routing.route(mix, X).toarray(), want)


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 1000])
def test_state_masks_match_numpy(n):
    from spnc.learn._routing import state_masks
    rng = np.random.default_rng(n)
    X = rng.integers(0, 4, size=(n, 6)).astype(np.float64)
    var = rng.integers(0, 6, size=9)
    val = rng.integers(0, 4, size=9)
    got = state_masks(X, var, val)
    assert got.shape == (9, -(-n // 64))
    bits = np.unpackbits(got.view(np.uint8), axis=1, bitorder="little")[:, :n].astype(bool)
    assert np.array_equal(bits, (X[:, var] == val).T)
    with pytest.raises(ValueError, match="out of range"):
        state_masks(X, np.array([6]), np.array([0]))


@pytest.mark.parametrize("n", [0, 1, 1000])
def test_column_ranges_match_numpy(n):
    from spnc.learn._routing import column_ranges
    X = np.random.default_rng(n).normal(size=(n, 5)) * 1e200
    lo, hi = column_ranges(X, np.array([1, 3], dtype=np.int64))
    assert lo.shape == hi.shape == (5,) and not lo[[0, 2, 4]].any() and not hi[[0, 2, 4]].any()
    if n:
        assert np.array_equal(lo[[1, 3]], X[:, [1, 3]].min(0)) and np.array_equal(hi[[1, 3]], X[:, [1, 3]].max(0))
    with pytest.raises(ValueError, match="out of range"):
        column_ranges(X, np.array([5], dtype=np.int64))


def test_sums_over_match_numpy_and_refuse_bad_ranges():
    """The kept-member choice's sums of values over row sets (merging)."""
    from spnc.learn._routing import sums_over_nodes
    rng = np.random.default_rng(3)
    V = rng.normal(size=(50, 7))
    VT = np.ascontiguousarray(V.T)
    rows = rng.integers(0, 50, size=120).astype(np.int32)
    a = np.array([0, 10, 10, 60, 0], dtype=np.int64)
    b = np.array([10, 10, 60, 120, 120], dtype=np.int64)
    col = np.array([0, 3, 6, 2, 5], dtype=np.int64)
    want = [V[rows[x:y], c].sum() for x, y, c in zip(a, b, col)]
    assert np.allclose(sums_over_nodes(VT, a, b, rows, col), want, rtol=1e-14, atol=0)
    seq = [float(np.cumsum(V[rows[x:y], c])[-1]) if y > x else 0.0 for x, y, c in zip(a, b, col)]
    assert sums_over_nodes(VT, a, b, rows, col).tolist() == seq          # in row order
    with pytest.raises(ValueError, match="out of bounds"):
        sums_over_nodes(VT, a, b + 1, rows, col)
    with pytest.raises(ValueError, match="row out of range"):
        sums_over_nodes(VT, a, b, np.full(120, 50, dtype=np.int32), col)


def test_bit_path_follows_leaf_parameters_edited_in_place():
    """A leaf state edited to probability zero in place (after a routing) counts."""
    spn = spnc.compile(Sum([Product([spnc.Indicator(0, 0), spnc.Categorical(1, [0.5, 0.5])]),
                            Product([spnc.Indicator(0, 1), spnc.Categorical(1, [0.5, 0.5])])], [0.5, 0.5]))
    X = np.array([[1.0, 1.0], [1.0, 0.0]])     # row 0: zero in its branch -> the first child
    routing.route(spn, X)
    spn.leaf_tables["categorical"].params["prob"][1::2] = 0.0    # P(X1 = 1) = 0 in both branches
    spn.leaf_tables["categorical"].params["prob"][0::2] = 1.0
    want, _ = reference_route(spn, X)
    got = routing.route(spn, X).toarray()
    assert np.array_equal(got, want) and got[0, spn.child[spn.child_ptr[spn.roots[0]]]]


def test_a_row_of_probability_zero_goes_to_the_first_child_whatever_the_batch():
    """Row 0 matches the second child's indicator, but that child's Chow-Liu leaf gives
    it probability zero: it goes to the first child, as max-product routing sends it,
    routed alone (complete rows: the bit path took its observed branch) or beside a row
    with a missing value (the sweep)."""
    from spnc.leaves.cltree import ChowLiuLeaf

    def tree(zero):           # X2 | X1: P(X2 = 1 | X1 = 1) = 0 when zero
        return ChowLiuLeaf([1, 2], [-1, 0], [[[0.5, 0.5]], [[0.5, 0.5], [1.0, 0.0] if zero else [0.5, 0.5]]])
    spn = spnc.compile(Sum([Product([spnc.Indicator(0, 0), tree(False)]),
                            Product([spnc.Indicator(0, 1), tree(True)])], [0.5, 0.5]), cardinality=[2, 2, 2])
    first = spn.child[spn.child_ptr[spn.roots[0]]]
    X = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]])
    assert np.isneginf(spn.log_likelihood(X[:1]))[0]
    for batch in (X[:1], X, np.vstack([X, [[np.nan, 0.0, 0.0]]])):
        got = routing.route(spn, batch).toarray()
        assert np.array_equal(got, reference_route(spn, batch)[0])
        assert got[0, first] and (len(batch) == 1 or not got[1, first])


def test_indicators_in_the_leaf_matrix_still_decide(monkeypatch):
    """Indicators over huge state spaces are evaluated in the leaf matrix: they may give a
    row probability zero, so observed sums read them (the bit path took them as never
    zero and sent every row to the first child)."""
    import spnc.leaves.univariate as univariate
    monkeypatch.setattr(univariate, "_INLINE_STATES", 1)
    spn = spnc.compile(Sum([Product([spnc.Indicator(0, v), spnc.Gaussian(1, float(v), 1.0)]) for v in (0, 1)],
                           [0.5, 0.5]), cardinality=[2, 0])
    assert spn.leaf_tables["indicator"].state_log_probs(spn.cardinality) is None
    X = np.array([[1.0, 0.3], [0.0, 0.1], [1.0, -2.0]])
    for batch in (X, np.vstack([X, [[np.nan, 0.0]]])):
        assert np.array_equal(routing.route(spn, batch).toarray(), reference_route(spn, batch)[0])
    # Gaussian densities are never zero: an O-SPN of them keeps the bit path
    monkeypatch.setattr(univariate, "_INLINE_STATES", 1 << 20)
    spn = spnc.compile(spn.to_nodes(), cardinality=[2, 0])
    assert not routing.decisive_leaves(spn).any() and routing._observed_plan(spn) is not None


def _underflow_case(kind):
    """An O-SPN over [I(X0 = v), density of X1 (, X2)] and rows: row 0 takes the second
    branch but its density is 0 in doubles, row 1 the second branch, row 2 the first."""
    from spnc.leaves.mvgaussian import MultivariateGaussian
    if kind == "mvgaussian":
        dens, card = (lambda: MultivariateGaussian([1, 2], [0.0, 0.0], [[1.0, 0.5], [0.5, 1.0]])), [2, 0, 0]
        X = np.array([[1.0, 1e200, 0.0], [1.0, 0.5, -1.0], [0.0, 2.0, 1.0]])
    else:
        std = 1.0 if kind == "wide" else 1e-160          # narrow: x = 1 is 1e160 deviations away
        dens, card = (lambda: spnc.Gaussian(1, 0.0, std)), [2, 0]
        X = np.array([[1.0, 1e200 if kind == "wide" else 1.0], [1.0, 0.0], [0.0, 0.0]])
    spn = spnc.compile(Sum([Product([spnc.Indicator(0, v), dens()]) for v in (0, 1)], [0.5, 0.5]),
                       cardinality=card)
    return spn, X


@pytest.mark.parametrize("kind", ["wide", "narrow", "mvgaussian"])
def test_a_density_that_underflows_sends_its_row_to_the_first_child_whatever_the_batch(kind):
    """A density far from its mean is 0 in doubles (log-density -inf), so max-product
    routing sends the row to the first child. Alone or among complete rows the bit path
    took Gaussian densities as positive and followed the observed branch; beside a row
    with a NaN the sweep sent the row to the first child."""
    spn, X = _underflow_case(kind)
    first = spn.child[spn.child_ptr[spn.roots[0]]]
    ll = spn.log_likelihood(X)
    assert np.isneginf(ll[0]) and np.isfinite(ll[1:]).all()
    nan = np.full((1, X.shape[1]), np.nan)
    for batch in [X[i:i + 1] for i in range(3)] + [X, np.vstack([X, nan]), np.vstack([nan, X[::-1]])]:
        got = routing.route(spn, batch).toarray()
        assert np.array_equal(got, reference_route(spn, batch)[0])
    got = [routing.route(spn, b).toarray()[0] for b in (X[:1], X, np.vstack([X, nan]))]
    assert all(g[first] for g in got), "row 0 goes to the first child in every batch"
    assert not routing.route(spn, X[1:2]).toarray()[0, first]


def test_densities_keep_the_bit_path_on_rows_where_none_underflows(monkeypatch):
    """The check for underflow reads each column's range once: ordinary rows keep the
    bit path (and a leaf cache's ranges serve later calls)."""
    calls = []
    real = routing._route_observed
    monkeypatch.setattr(routing, "_route_observed", lambda *a: calls.append(1) or real(*a))
    for kind in ("wide", "mvgaussian"):
        spn, X = _underflow_case(kind)
        for rows, bit in ((X[1:], True), (X, False)):
            calls.clear()
            cache = LeafCache(rows, MAX)
            for c in (None, cache, cache):
                got = routing.route(spn, rows, cache=c).toarray()
                assert np.array_equal(got, reference_route(spn, rows)[0])
            assert len(calls) == (3 if bit else 0)


def test_underflow_leaves_match_the_values_on_the_rows():
    """Gaussian: exactly the leaves some row's log-density is -inf for (the kernel's, on
    the columns' ends); multivariate Gaussian: at least those."""
    from spnc.leaves.mvgaussian import MultivariateGaussian, MVGaussianLeaves
    from spnc.leaves.univariate import GaussianLeaves
    rng = np.random.default_rng(5)

    def rows(top):
        return np.column_stack([rng.normal(size=200) * 10.0 ** rng.integers(0, top, size=200) for _ in range(3)])
    gauss = GaussianLeaves.from_nodes(np.arange(60), [spnc.Gaussian(i % 3, rng.normal() * 1e150, 10.0 ** rng.uniform(
        -300, 300)) for i in range(60)])
    mvg = MVGaussianLeaves.from_nodes(np.arange(40), [MultivariateGaussian(
        [0, 1, 2], rng.normal(size=3) * 10.0 ** rng.integers(0, 150), np.diag(10.0 ** rng.uniform(-60, 60, 3)))
        for _ in range(40)])
    for t, X in ((gauss, rows(300)), (mvg, rows(120))):
        out = np.empty((len(t), X.shape[0]))
        t.log_prob(np.ascontiguousarray(X.T), out, MAX, 1)
        zero = ~np.isfinite(out).all(axis=1)
        got = t.underflow_leaves(X.min(axis=0), X.max(axis=0))
        assert 0 < zero.sum() < len(t)
        assert np.array_equal(got, zero) if t is gauss else not (zero & ~got).any() and not got.all()


def test_one_child_sums_decide_nothing_and_keep_the_bit_path(monkeypatch):
    """A sum of one child sends every row to it, on every path: leaves below it are read
    by no decision, so an O-SPN with one-child sums over its densities keeps the bit path
    (decisive_leaves took such a sum as latent and sent the batch through a sweep), and
    its rows' routes equal the sweep's and the reference's alone, among complete rows and
    beside a row with a NaN, a density that underflows included."""
    calls = []
    real = routing._route_observed
    monkeypatch.setattr(routing, "_route_observed", lambda *a: calls.append(1) or real(*a))
    one = lambda node: Sum([node], [1.0])       # noqa: E731
    spn = spnc.compile(one(Sum([Product([spnc.Indicator(0, v), one(spnc.Gaussian(1, float(v), 1.0)),
                                         one(Product([one(spnc.Gaussian(2, 0.0, 2.0)), spnc.Bernoulli(3, 0.3)]))])
                                for v in (0, 1)], [0.4, 0.6])), cardinality=[2, 0, 0, 2])
    assert not routing.decisive_leaves(spn).any() and routing._observed_plan(spn) is not None
    X = np.array([[1.0, 0.5, 1.0, 0.0], [0.0, -1.0, 3.0, 1.0], [1.0, 1e200, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    nan = np.full((1, 4), np.nan)
    for batch, bit in [(X[i:i + 1], i != 2) for i in range(4)] + [(X[[0, 1, 3]], True), (X, False),
                                                                   (np.vstack([X, nan]), False)]:
        calls.clear()
        ec, ec2 = np.zeros(spn.n_edges), np.zeros(spn.n_edges)
        got = routing.route(spn, batch, edge_counts=ec)
        want, want_ec = reference_route(spn, batch)
        assert np.array_equal(got.toarray(), want) and np.array_equal(ec, want_ec)
        assert (got != _kernel_route(spn, batch, ec2)).nnz == 0 and np.array_equal(ec, ec2)
        assert len(calls) == bit
