"""The Chow-Liu tree as an SPN leaf: queries against enumeration, sampling, parameter checks,
files and the weighted refit."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import chisquare

import spnc
from spnc import StructureError
from spnc.chowliu import fit_chow_liu, forest_to_tree, tree_log_likelihood
from spnc.leaves import base as lb
from spnc.leaves.cltree import ChowLiuLeaf, CLTreeLeafType

from conftest import chain_data


def random_tree(rng, card, parents):
    cpts = []
    for j, p in enumerate(parents):
        rows = 1 if p < 0 else card[p]
        cpts.append(rng.dirichlet(np.ones(card[j]), size=rows))
    return cpts


def joint_table(card, parents, cpts):
    allx = np.array(list(itertools.product(*[range(k) for k in card])), dtype=float)
    P = np.exp(tree_log_likelihood(allx.astype(int), parents, cpts))
    return allx, P


@pytest.fixture
def small_tree():
    rng = np.random.default_rng(7)
    card = [2, 3, 2, 2, 3]
    parents = [2, 0, -1, 2, 1]  # root in the middle; parents after children in scope order
    cpts = random_tree(rng, card, parents)
    # a leaf over global variables 1, 2, 4, 5, 6 inside a product with a Bernoulli
    leaf = ChowLiuLeaf([1, 2, 4, 5, 6], parents, cpts)
    spn = spnc.compile(spnc.Product([leaf, spnc.Bernoulli(0, 0.3)]), cardinality=[2, 2, 3, 0, 2, 2, 3])
    allx, P = joint_table(card, parents, cpts)
    return spn, card, allx, P


def embed(x):
    X = np.full((len(x), 7), np.nan)
    X[:, [1, 2, 4, 5, 6]] = x
    X[:, 0] = 1
    return X


def test_leaf_marginals_and_max_by_enumeration(small_tree):
    spn, card, allx, P = small_tree
    assert P.sum() == pytest.approx(1.0)
    for mask in itertools.product([False, True], repeat=5):
        m = np.array(mask)
        Xq = allx.copy()
        Xq[:, m] = np.nan
        same = np.all(allx[:, None, ~m] == allx[None, :, ~m], axis=2)
        ref = np.log(0.3 * (same * P[None, :]).sum(1))
        refmax = np.log(0.3 * (same * P[None, :]).max(1))
        np.testing.assert_allclose(spn.log_likelihood(embed(Xq)), ref, rtol=1e-12)
        np.testing.assert_allclose(spn._forward(embed(Xq), lb.MAX, 1), refmax, rtol=1e-12)


def test_leaf_mixed_batch_by_enumeration(small_tree):
    # complete rows take a shortcut; rows missing some leaf variable, in the same batch, do not
    spn, card, allx, P = small_tree
    rng = np.random.default_rng(5)
    Xq = allx[rng.integers(len(allx), size=400)]
    miss = rng.random(Xq.shape) < 0.15
    Xq = np.where(miss, np.nan, Xq)
    assert 0 < np.all(~miss, axis=1).sum() < len(Xq)
    ref = [np.log(0.3 * P[np.all((allx == x) | np.isnan(x), axis=1)].sum()) for x in Xq]
    for nt in (1, 2):
        np.testing.assert_allclose(spn.log_likelihood(embed(Xq), n_threads=nt), ref, rtol=1e-12)


def test_leaf_mpe_by_enumeration(small_tree):
    spn, card, allx, P = small_tree
    for obs in ([0], [1, 3], [4], [], [0, 2, 4]):
        m = np.ones(5, bool)
        m[obs] = False
        Xq = allx.copy()
        Xq[:, m] = np.nan
        filled, _ = spn.mpe(embed(Xq))
        for x, f in zip(Xq, filled[:, [1, 2, 4, 5, 6]]):
            sel = np.all(allx[:, ~m] == x[~m], axis=1)
            np.testing.assert_array_equal(f, allx[sel][np.argmax(P[sel])])


def test_leaf_sampling_chi_square(small_tree):
    spn, card, allx, P = small_tree
    S = spn.sample(30000, seed=11)[:, [1, 2, 4, 5, 6]].astype(int)
    counts = np.bincount(np.ravel_multi_index(S.T, card), minlength=len(P))
    assert chisquare(counts, P * len(S)).pvalue > 1e-3
    # conditional on x_4 = 1 (local 2, the root) and x_6 = 2 (local 4)
    ev = np.full((30000, 7), np.nan)
    ev[:, 4], ev[:, 6] = 1, 2
    S = spn.sample(evidence=ev, seed=12)[:, [1, 2, 4, 5, 6]].astype(int)
    assert np.all(S[:, 2] == 1) and np.all(S[:, 4] == 2)
    sel = (allx[:, 2] == 1) & (allx[:, 4] == 2)
    counts = np.bincount(np.ravel_multi_index(S.T, card), minlength=len(P))[sel]
    assert counts.sum() == 30000
    assert chisquare(counts, P[sel] / P[sel].sum() * 30000).pvalue > 1e-3
    np.testing.assert_array_equal(spn.sample(50, seed=4), spn.sample(50, seed=4))


def test_leaf_kernels_threads_agree():
    rng = np.random.default_rng(13)
    X = chain_data(rng, 5000, [2, 3, 2, 4, 2, 2, 3, 2])
    fit = fit_chow_liu(X, alpha=1.0)
    par, cpts = forest_to_tree(fit.parents, fit.cpts)
    spn = spnc.compile(ChowLiuLeaf(range(8), par, cpts))
    table = spn.leaf_tables["cltree"]
    XT = np.ascontiguousarray(np.where(rng.random(X.shape) < 0.3, np.nan, X).T)
    outs = []
    for nt in (1, 2):
        for mode in (lb.MARGINAL, lb.MAX):
            out = np.empty((1, XT.shape[1]))
            table.log_prob(XT, out, mode, nt)
            outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(outs[1], outs[3])
    assert np.all(outs[1] <= outs[0])


def test_hub_with_many_observed_children_does_not_underflow():
    """A missing hub whose 121 observed children each send a message of about 1e-3: their
    product (about 1e-325) must not underflow to a zero (log p -inf) before the hub is
    normalised."""
    a, b = np.array([[0.999, 0.001], [0.998, 0.002]]), np.array([[0.998, 0.002], [0.999, 0.001]])
    cpts = [a] * 61 + [b] * 60
    spn = spnc.compile(ChowLiuLeaf(range(122), [-1] + [0] * 121, [[[0.5, 0.5]]] + cpts))
    x = np.ones((1, 122))
    x[0, 0] = np.nan
    per_state = np.log(0.5) + np.sum([np.log(c[:, 1]) for c in cpts], axis=0)
    assert np.logaddexp(*per_state) < -745
    np.testing.assert_allclose(spn.log_likelihood(x), np.logaddexp(*per_state), rtol=1e-12)
    np.testing.assert_allclose(spn.node_log_values(x, mode=lb.MAX)[:, -1], per_state.max(), rtol=1e-12)
    filled, value = spn.mpe(x)
    assert filled[0, 0] == 1 and value[0] == pytest.approx(per_state.max(), rel=1e-12)
    S = spn.sample(evidence=np.repeat(x, 4000, axis=0), seed=3)[:, 0]
    p1 = 1.0 / (1.0 + np.exp(per_state[0] - per_state[1]))     # 2/3
    assert abs(S.mean() - p1) < 5 * np.sqrt(p1 * (1 - p1) / len(S))


def test_complete_rows_sum_the_log_cpts_in_scope_order():
    """On complete rows a leaf's value is its log-CPT entries added in scope order, bit for
    bit (the compiled block loop takes four variables at a time, the CPU's vector width
    rows at a time): leaves of 1 to 11 variables, cardinalities 2 to 4, rows not a
    multiple of the block, both modes and two threads."""
    rng = np.random.default_rng(21)
    card = rng.integers(2, 5, size=12)
    leaves, X = [], np.stack([rng.integers(0, k, size=333) for k in card], axis=1)
    for n in (1, 3, 4, 5, 8, 11):
        scope = np.sort(rng.choice(12, size=n, replace=False))
        fit = fit_chow_liu(X[:, scope], card[scope], alpha=0.5)
        leaves.append(ChowLiuLeaf(scope, *forest_to_tree(fit.parents, fit.cpts)))
    table = CLTreeLeafType.from_nodes(np.arange(len(leaves)), leaves)
    table.slot = np.arange(len(leaves))
    table.validate(card)
    P = table._prepared()
    XT = np.ascontiguousarray(X.T, dtype=np.float64)
    want = np.zeros((len(leaves), X.shape[0]))
    for i in range(len(leaves)):
        acc = np.zeros(X.shape[0])
        for q in range(P.var_ptr[i], P.var_ptr[i + 1]):
            par = X[:, P.gvar[P.fpar[q]]] if P.fpar[q] >= 0 else 0
            acc = acc + P.logcpt[P.coff[q] + par * P.card[q] + X[:, P.gvar[q]]]
        want[i] = acc
    for mode in (lb.MARGINAL, lb.MAX):
        for nt in (1, 2):
            out = np.empty_like(want)
            table.log_prob(XT, out, mode, nt)
            np.testing.assert_array_equal(out, want)


def test_leaf_sees_in_place_parameter_edits(small_tree):
    spn, card, allx, P = small_tree
    X = embed(allx[:3])
    before = spn.log_likelihood(X)
    cpt = spn.leaf_tables["cltree"].params["cpt"]
    cpt[:2] = cpt[1::-1].copy()  # swap the two entries of local variable 0, parent state 0
    assert not np.array_equal(spn.log_likelihood(X), before)


def test_leaf_round_trips(small_tree):
    spn = small_tree[0]
    X = embed(small_tree[2])
    np.testing.assert_array_equal(spn.copy().log_likelihood(X), spn.log_likelihood(X))
    import pickle
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(spn)).log_likelihood(X), spn.log_likelihood(X))
    again = spnc.compile(spn.to_nodes(), cardinality=spn.cardinality)
    np.testing.assert_array_equal(again.log_likelihood(X), spn.log_likelihood(X))


@pytest.mark.parametrize("ext", ["h5", "json"])
def test_leaf_file_round_trip(small_tree, tmp_path, ext):
    if ext == "h5":
        pytest.importorskip("h5py")
    import spnc.io
    spn = small_tree[0]
    X = embed(small_tree[2])
    spnc.io.save(spn, tmp_path / f"clt.{ext}")
    back = spnc.io.load(tmp_path / f"clt.{ext}")
    np.testing.assert_array_equal(back.log_likelihood(X), spn.log_likelihood(X))


def _table(parents, cpts, scope, card):
    leaf = ChowLiuLeaf(scope, parents, cpts)
    t = CLTreeLeafType.from_nodes(np.array([9]), [leaf])
    return t, np.asarray(card)


@pytest.mark.parametrize("parents, cpts, match", [
    ([-1, -1], [[[0.5, 0.5]], [[0.5, 0.5]]], "exactly one root"),
    ([1, 0], [[[0.5, 0.5]] * 2, [[0.5, 0.5]] * 2], "exactly one root"),
    ([-1, 2, 1], [[[0.5, 0.5]], [[0.5, 0.5]] * 2, [[0.5, 0.5]] * 2], "cycle"),
    ([-1, 5], [[[0.5, 0.5]], [[0.5, 0.5]] * 2], "outside -1..1"),
    ([-1, 0], [[[0.5, 0.5]], [[0.5, 0.5]]], "cpt holds"),
    ([-1, 0], [[[0.5, 0.6]], [[0.5, 0.5]] * 2], "row 0 sums to"),
    ([-1, 0], [[[0.5, 0.5]], [[1.5, -0.5]] * 2], "negative"),
])
def test_leaf_validate_rejects(parents, cpts, match):
    scope = list(range(len(parents)))
    t, card = _table(parents, cpts, scope, [2] * len(parents))
    with pytest.raises(StructureError, match=r"node 9 \(cltree leaf\).*" + match):
        t.validate(card)


def test_leaf_validate_names_variable_and_row():
    root = [[0.2, 0.3, 0.5]]
    t, card = _table([-1, 0], [root, [[0.5, 0.5], [0.5, 0.6], [0.5, 0.5]]], [0, 1], [3, 2])
    with pytest.raises(StructureError, match=r"CPT of variable 1, row 1 sums to 1\.1"):
        t.validate(card)
    t, card = _table([-1, 0], [root, [[0.5, 0.5], [0.5, 0.5], [np.nan, 0.5]]], [0, 1], [3, 2])
    with pytest.raises(StructureError, match="CPT of variable 1 has negative or non-finite"):
        t.validate(card)


def test_leaf_rejects_real_variable_and_bad_construction():
    with pytest.raises(StructureError):
        spnc.compile(ChowLiuLeaf([0, 1], [-1, 0], [[[0.5, 0.5]], [[0.5, 0.5]] * 2]), cardinality=[2, 0])
    with pytest.raises(StructureError, match="ascending"):
        ChowLiuLeaf([1, 0], [-1, 0], [[[0.5, 0.5]], [[0.5, 0.5]] * 2])
    with pytest.raises(StructureError, match="CPTs for"):
        ChowLiuLeaf([0, 1], [-1, 0], [[[0.5, 0.5]]])


def test_leaf_weighted_fit_is_the_weighted_chow_liu_fit():
    rng = np.random.default_rng(8)
    X = chain_data(rng, 600, [2, 3, 2, 2])
    fit = fit_chow_liu(X, alpha=1.0)
    par, cpts = forest_to_tree(fit.parents, fit.cpts)
    spn = spnc.compile(ChowLiuLeaf(range(4), par, cpts))
    w = rng.random(600)
    table = spn.leaf_tables["cltree"]
    table.weighted_fit(X.astype(float), w[:, None], alpha=0.5)
    ref = fit_chow_liu(X, sample_weight=w, alpha=0.5)
    rp, rc = forest_to_tree(ref.parents, ref.cpts)
    np.testing.assert_array_equal(table.params["parent"], rp)
    np.testing.assert_allclose(spn.log_likelihood(X.astype(float)), tree_log_likelihood(X, rp, rc), rtol=1e-12)
    table.validate(spn.cardinality)


def test_breadth_first_order_of_many_trees_at_once():
    """The compiled parents-first order equals a breadth-first walk of each tree, and
    refuses a parent array with a cycle, or a parent in another leaf, instead of looping."""
    from spnc.leaves._cltree_arrays import _bfs_order, _topological
    rng = np.random.default_rng(0)
    pars, ptr = [], [0]
    for n in rng.integers(1, 12, size=30):
        p = np.array([-1] + [int(rng.integers(0, j)) for j in range(1, n)])
        perm = rng.permutation(n)          # the root anywhere in the scope
        inv = np.argsort(perm)
        pars.append(np.where(p[inv] < 0, -1, perm[np.maximum(p[inv], 0)]))
        ptr.append(ptr[-1] + n)
    ptr = np.array(ptr)
    fpar = np.concatenate([np.where(p < 0, -1, p + a) for p, a in zip(pars, ptr[:-1])]).astype(np.int32)
    want = np.concatenate([_topological(p) + a for p, a in zip(pars, ptr[:-1])])
    assert np.array_equal(_bfs_order(fpar, ptr), want)
    with pytest.raises(StructureError, match="cycle"):
        _bfs_order(np.array([-1, 2, 1], dtype=np.int32), np.array([0, 3]))
    with pytest.raises(StructureError, match="leaf 0 "):
        _bfs_order(np.array([-1, 3, -1, 0], dtype=np.int32), np.array([0, 2, 4]))
    with pytest.raises(StructureError, match="cycle"):
        _bfs_order(np.array([-1, 7], dtype=np.int32), np.array([0, 2]))


def test_chunk_padding_never_reaches_leaves_as_missing_rows(small_tree, monkeypatch):
    """Chunks are padded to whole blocks. A small chunk's leaves see its real rows only; a
    large chunk's padding copies its last row (an all-missing pad cost tree leaves a message
    pass each). Results are those of the rows in small batches, for every query."""
    spn, card, allx, P = small_tree
    seen = []
    real = CLTreeLeafType.log_prob

    def spy(self, XT, out, mode, n_threads):
        seen.append(XT.copy())
        return real(self, XT, out, mode, n_threads)
    monkeypatch.setattr(CLTreeLeafType, "log_prob", spy)
    X = embed(allx[:3])
    X[2, 4] = np.nan
    ll = spn.log_likelihood(X)
    np.testing.assert_array_equal(seen[-1], X.T)
    np.testing.assert_array_equal(ll, [spn.log_likelihood(X[i:i + 1])[0] for i in range(3)])
    rng = np.random.default_rng(3)
    big = embed(allx[rng.integers(0, len(allx), 1100)])
    big[rng.random(big.shape) < 0.2] = np.nan
    big[-1, 1] = 1.0
    ll = spn.log_likelihood(big)
    XT = seen[-1]
    assert XT.shape[1] > len(big)
    np.testing.assert_array_equal(XT[:, len(big):], np.repeat(big[-1:].T, XT.shape[1] - len(big), axis=1))
    parts = [slice(i, i + 7) for i in range(0, len(big), 7)]
    np.testing.assert_array_equal(ll, np.concatenate([spn.log_likelihood(big[s]) for s in parts]))
    np.testing.assert_array_equal(spn.mpe(big)[0], np.concatenate([spn.mpe(big[s])[0] for s in parts]))
    np.testing.assert_array_equal(spn.sample(evidence=big, seed=5)[:7], spn.sample(evidence=big[:7], seed=5))


def test_all_leaves_check_agrees_with_the_per_leaf_check(monkeypatch):
    """validate() checks every leaf at once and falls back to the per-leaf loop (which
    names the fault) only when something fails: on valid tables and on random corruptions
    of parents and CPTs, the vectorised verdict is the loop's."""
    rng = np.random.default_rng(11)
    card = rng.integers(2, 4, size=12)
    leaves = []
    for i in range(6):
        scope = np.sort(rng.choice(12, size=rng.integers(1, 6), replace=False))
        parents = [-1] + [int(rng.integers(0, j)) for j in range(1, len(scope))]
        perm = rng.permutation(len(scope))          # root anywhere in scope order
        inv = np.argsort(perm)
        parents = [-1 if parents[perm[j]] < 0 else int(inv[parents[perm[j]]]) for j in range(len(scope))]
        leaves.append(ChowLiuLeaf(scope, parents, random_tree(rng, card[scope], parents)))
    base = CLTreeLeafType.from_nodes(np.arange(6) + 20, leaves)

    def loop_verdict(t):
        with monkeypatch.context() as m:
            m.setattr(CLTreeLeafType, "_all_valid", lambda self, c: False)
            try:
                t.validate(card)
                return True
            except StructureError:
                return False
    assert base._all_valid(card) and loop_verdict(base)
    n_bad = 0
    for trial in range(300):
        t = CLTreeLeafType.from_nodes(base.node, [base.to_node(i) for i in range(6)])
        par, cpt = t.params["parent"], t.params["cpt"]
        what = trial % 3
        if what == 0:
            par[rng.integers(len(par))] = rng.integers(-2, 6)
        elif what == 1:
            cpt[rng.integers(len(cpt))] += rng.choice([-0.3, 1e-3, 1e-7, np.nan])
        else:
            card2 = card.copy()
            card2[rng.integers(12)] = rng.integers(1, 5)
            t._card = None
            fast = CLTreeLeafType._all_valid(t, card2)
            with monkeypatch.context() as m:
                m.setattr(CLTreeLeafType, "_all_valid", lambda self, c: False)
                try:
                    t.validate(card2)
                    slow = True
                except StructureError:
                    slow = False
            assert fast == slow
            n_bad += not slow
            continue
        assert t._all_valid(card) == loop_verdict(t)
        n_bad += not loop_verdict(t)
    assert n_bad > 100       # the corruptions do break tables


def test_state_counts_survive_copies_when_cpt_rows_end_in_zeros(tmp_path):
    """Files hold no per-variable state counts; a copy must take them from the model, not
    guess them from CPT sizes (rows ending in zeros made the guess decode 3 states as 2)."""
    import pickle
    cpts = [np.array([[0.5, 0.5]]), np.array([[0.3, 0.7, 0.0], [1.0, 0.0, 0.0]]),
            np.array([[0.4, 0.6, 0.0], [0.2, 0.3, 0.5]])]
    spn = spnc.compile(ChowLiuLeaf([0, 1, 2], np.array([-1, 0, 0]), cpts), cardinality=[2, 3, 3])
    X = np.array(list(itertools.product(range(2), range(3), range(3))), dtype=float)
    want = spn.log_likelihood(X)
    assert np.exp(want).sum() == pytest.approx(1.0)
    spnc.save(spn, tmp_path / "m.h5")
    spnc.save(spn, tmp_path / "m.json")
    for other in (spnc.load(tmp_path / "m.h5"), spnc.load(tmp_path / "m.json"), pickle.loads(pickle.dumps(spn)),
                  spn.copy()):
        np.testing.assert_array_equal(other.log_likelihood(X), want)


def test_tiny_cpt_entries_do_not_underflow_to_false_zeros():
    """Messages of tiny CPT entries against tiny messages underflow in the linear pass: such
    rows are redone in the log domain, so p = 1e-400 stays 1e-400 (it was -inf, and MPE and
    sampling refused the row) and the fill picks the one possible state."""
    tiny = 1e-200
    leaf = ChowLiuLeaf([0, 1], [-1, 0], [[[1 - tiny, 0.0, tiny]], [[1, 0], [0, 1], [1 - tiny, tiny]]])
    spn = spnc.compile(leaf)
    x = np.array([[np.nan, 1.0]])
    ref = 2 * np.log(tiny)
    assert spn.log_likelihood(x)[0] == pytest.approx(ref, rel=1e-14)
    assert spn.node_log_values(x, mode=lb.MAX)[0, 0] == pytest.approx(ref, rel=1e-14)
    filled, lp = spn.mpe(x)
    assert filled.tolist() == [[2.0, 1.0]] and lp[0] == pytest.approx(ref, rel=1e-14)
    assert spn.sample(evidence=np.repeat(x, 20, 0), seed=3).tolist() == [[2.0, 1.0]] * 20
    # the single-variable marginals (merging's evidence rows) keep p = 1e-400 as well
    _, _, logm = spn.leaf_tables["cltree"].log_marginals()
    np.testing.assert_allclose(logm[3:], np.log([1 - tiny, tiny]) + [0, np.log(tiny)], rtol=1e-14)
    # two possible states: samples from the log messages keep their 1 : 3 odds
    odds = spnc.compile(ChowLiuLeaf([0, 1], [-1, 0], [[[1 - 4 * tiny, tiny, 3 * tiny]],
                                                       [[1, 0], [1 - tiny, tiny], [1 - tiny, tiny]]]))
    S = odds.sample(evidence=np.repeat(x, 4000, 0), seed=5)
    assert set(S[:, 0].tolist()) == {1.0, 2.0} and abs(np.mean(S[:, 0] == 2.0) - 0.75) < 0.03
    # a subnormal root entry: its digits are kept in the log domain
    sub = ChowLiuLeaf([0, 1], [-1, 0], [[[1.0, 5e-324]], [[1.0, 0.0], [0.3, 0.7]]])
    got = spnc.compile(sub).log_likelihood(x)[0]
    assert got == pytest.approx(np.log(5e-324) + np.log(0.7), rel=1e-14)
