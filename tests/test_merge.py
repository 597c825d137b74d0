"""Merging similar sub-SPNs (spnc.learn.Merge) and routing (bagged ensembles: test_bagging.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import spnc
from spnc import ParameterError
from spnc.learn import BaggedSPN, LearnSPN, Merge
from spnc.learn.merge import identical_merge, node_marginals
from spnc.learn.routing import observed_sums, route, rows_of
from spnc.nodes import Product, Sum

from conftest import all_states, learned_trees, merge_data, random_spn, shared_data


@pytest.fixture(scope="module")
def trees():
    X, Xv = merge_data()
    return X, Xv, learned_trees(X)


def _brute_ll(spn, card):
    S = all_states(card)
    return spn.log_likelihood(S)


# ---------------------------------------------------------------- marginals and distances
def test_node_marginals_match_brute_force():
    rng = np.random.default_rng(1)
    card = [2, 3, 2]
    root = random_spn(rng, card, depth=2, share=0.3)
    spn = spnc.compile(root)
    P, off = node_marginals(spn)
    S = all_states(card)
    vals = np.exp(spn.node_log_values(S))          # (states, nodes), complete rows
    for n in range(spn.n_nodes):
        for v in spn.node_scope(n):
            # P_n(X_v = k) = sum over states of the node's scope with X_v = k; count each
            # assignment of the scope once (other variables are fixed to 0)
            others = [u for u in range(len(card)) if u not in spn.node_scope(n)]
            keep = np.all(S[:, others] == 0, axis=1) if others else np.ones(len(S), bool)
            for k in range(card[v]):
                want = vals[keep & (S[:, v] == k), n].sum()
                assert P[n, off[v] + k] == pytest.approx(want, rel=1e-9, abs=1e-12)


# ---------------------------------------------------------------- identical merging
def test_identical_merge_shares_copies_and_keeps_the_distribution():
    def sub(p):
        return Sum([Product([spnc.Bernoulli(1, p), spnc.Bernoulli(2, .3)]),
                    Product([spnc.Bernoulli(1, .9), spnc.Bernoulli(2, .6)])], [.4, .6])
    # observed sum on X0 whose two branches are equal copies -> Fig. 3(a) product
    root = Sum([Product([spnc.Indicator(0, 0), sub(.2)]), Product([spnc.Indicator(0, 1), sub(.2)])], [.3, .7])
    top = Sum([Product([spnc.Bernoulli(3, .5), root]), Product([spnc.Bernoulli(3, .5), root])], [.5, .5])
    spn = spnc.compile(top)
    out = identical_merge(spn)
    card = [2, 2, 2, 2]
    assert np.allclose(_brute_ll(out, card), _brute_ll(spn, card), atol=1e-12)
    assert out.n_nodes < spn.n_nodes
    assert "indicator" not in out.leaf_tables or len(out.leaf_tables["indicator"]) == 0
    assert out.leaf_tables["bernoulli"].params["p"].tolist().count(0.7) == 1    # P(X0=1) leaf


def test_identical_merge_on_random_dags_is_exact():
    for seed in range(5):
        rng = np.random.default_rng(seed)
        card = [2, 3, 2, 2]
        spn = spnc.compile(random_spn(rng, card, depth=3, share=0.5))
        # duplicate the model under a root sum: every node has an equal copy
        both = spnc.compile(Sum([spn.to_nodes(), spnc.compile(random_spn(np.random.default_rng(seed), card, depth=3,
                                                                           share=0.5)).to_nodes()], [.5, .5]))
        out = identical_merge(both)
        assert np.allclose(_brute_ll(out, card), _brute_ll(both, card), atol=1e-10)
        assert out.n_nodes <= spn.n_nodes


# ---------------------------------------------------------------- routing
def test_routing_follows_observed_values_and_one_child_per_sum(trees):
    X, _, models = trees
    spn = models["observed", "chowliu"]
    obs = observed_sums(spn)
    assert (obs >= 0).any()
    R = route(spn, X)
    ind = spn.leaf_tables["indicator"]
    for i, n in enumerate(ind.node):
        r = rows_of(R, int(n))
        assert np.all(X[r, ind.var[i]] == ind.params["value"][i])
    dense = R.toarray()
    for s in np.flatnonzero(spn.kind == 0):
        ch = spn.children(s)
        reached = dense[:, s]
        assert np.array_equal(dense[reached][:, ch].sum(axis=1), np.ones(reached.sum()))


# ---------------------------------------------------------------- Merge
@pytest.mark.parametrize("split", ["observed", "latent"])
@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
def test_merge_is_valid_and_never_worse_on_validation(trees, split, leaves, tmp_path):
    X, Xv, models = trees
    tree = models[split, leaves]
    m = Merge(init=tree, epsilon=[0.01, 0.1, 0.3]).fit(X, X_valid=Xv)
    g = m.spn_
    assert g.log_likelihood(Xv).mean() >= tree.log_likelihood(Xv).mean() - 1e-9
    assert g.n_nodes <= tree.n_nodes
    assert m.n_params_after_[0] <= m.n_params_before_[0]
    # valid SPN: rebuilding from its arrays runs every check (order, scopes, weights)
    spnc.SPN.from_arrays(g.kind, g.child_ptr, g.child, g.weight, g.leaf_tables, g.cardinality)
    assert g.learner["name"] == "merge" and g.learner["nodes_before"] == tree.n_nodes
    for ext in ("h5", "json"):
        p = tmp_path / f"g.{ext}"
        spnc.save(g, p)
        back = spnc.load(p)
        assert back.n_nodes == g.n_nodes and back.n_edges == g.n_edges
        assert np.allclose(back.log_likelihood(Xv), g.log_likelihood(Xv))


def test_merge_compresses_an_ospn_and_creates_sharing(trees):
    X, Xv, models = trees
    tree = models["observed", "univariate"]
    g = Merge(init=tree, epsilon=0.3, local_check=False, chowliu_check=False).fit(X, X_valid=Xv).spn_
    assert g.n_nodes < identical_merge(tree).n_nodes
    parents = np.bincount(g.child, minlength=g.n_nodes)
    assert parents.max() >= 2            # a DAG, not a tree


@pytest.mark.parametrize("distance", ["kl", "hellinger"])
@pytest.mark.parametrize("refit", ["counts", "hard_em", "em"])
def test_merge_options(trees, distance, refit):
    X, Xv, models = trees
    tree = models["latent", "chowliu"]
    m = Merge(init=tree, epsilon=[0.05, 0.5], distance=distance, refit=refit).fit(X, X_valid=Xv)
    assert m.spn_.log_likelihood(Xv).mean() >= tree.log_likelihood(Xv).mean() - 1e-9
    assert len(m.history_) == 3


def test_merge_without_validation_needs_one_epsilon(trees):
    X, _, models = trees
    with pytest.raises(spnc.DataError, match="X_valid"):
        Merge(init=models["latent", "univariate"]).fit(X)
    m = Merge(init=models["latent", "univariate"], epsilon=0.2).fit(X)
    assert m.epsilon_ == 0.2


@pytest.mark.parametrize("param, value", [("distance", "euclid"), ("refit", "soft"), ("epsilon", -1.0),
                                          ("epsilon", []), ("max_rounds", 0), ("patience", 0), ("init", None)])
def test_merge_bad_parameters(trees, param, value):
    X, _, models = trees
    est = Merge(init=models["latent", "univariate"]).set_params(**{param: value})
    with pytest.raises(ParameterError, match=rf"Merge: {param} must be"):
        est.fit(X)


def test_merge_accepts_recorded_routing(trees):
    X, Xv, models = trees
    tree = identical_merge(models["observed", "univariate"])
    R = route(tree, X)
    a = Merge(init=tree, epsilon=0.2, routing=R).fit(X)
    b = Merge(init=tree, epsilon=0.2).fit(X)
    assert a.spn_.learner["params"]["routing"] == "given"
    assert a.spn_.n_nodes == b.spn_.n_nodes       # the model's own routing of a tree is the learner's
    # with validation rows, their routing orders the candidates: the given one is unused, and said so
    with pytest.warns(UserWarning, match="given routing is not used: X_valid"):
        c = Merge(init=tree, epsilon=0.2, routing=R).fit(X, X_valid=Xv)
    assert c.spn_.learner["params"]["routing"] == "model"
    with pytest.raises(spnc.DataError, match="routing must have shape"):
        Merge(init=tree, epsilon=0.2, routing=np.zeros((3, 3))).fit(X, X_valid=Xv)
    # a mixture of roots gets a new sum root: the warning says so, not "identical merging"
    roots = [tree.to_nodes(), models["observed", "univariate"].to_nodes()]
    mix = spnc.compile(roots, combine="mixture", root_weights=[.5, .5], cardinality=tree.cardinality)
    with pytest.warns(UserWarning, match="given routing is not used: a mixture of roots"):
        Merge(init=mix, epsilon=0.2, routing=np.zeros((X.shape[0], mix.n_nodes))).fit(X)


HAND_JSON = {
    "format": "spnc-model", "format_version": [1, 0, 0], "required_features": [],
    "variables": {"type": [0, 0, 0], "cardinality": [2, 2, 2]},
    "nodes": {"@kind_names": ["sum", "product", "bernoulli", "categorical", "gaussian", "mvgaussian", "cltree",
                              "indicator"],
              # 0..3 Bernoulli(X1), Bernoulli(X2) twice with near-equal parameters; 4,5 indicators X0
              "kind": [2, 2, 2, 2, 7, 7, 1, 1, 0],
              "scope_ptr": [0, 1, 2, 3, 4, 5, 6, 9, 12, 15],
              "scope": [1, 2, 1, 2, 0, 0, 0, 1, 2, 0, 1, 2, 0, 1, 2]},
    "edges": {"ptr": [0, 0, 0, 0, 0, 0, 0, 3, 6, 8],
              "child": [4, 0, 1, 5, 2, 3, 6, 7],
              "weight": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.4, 0.6]},
    "roots": {"@combine": "single", "node": [8]},
    "leaves": {"bernoulli": {"node": [0, 1, 2, 3], "p": [0.20, 0.80, 0.24, 0.76]},
               "indicator": {"node": [4, 5], "value": [0, 1]}},
}


def test_hand_written_json_model_merges_and_refines(tmp_path):
    p = tmp_path / "hand.json"
    p.write_text(json.dumps(HAND_JSON))
    spn = spnc.load(p)
    assert spn.learner == {}
    rng = np.random.default_rng(3)
    n = 3000
    X = np.column_stack([rng.random(n) < .6, rng.random(n) < .31, rng.random(n) < .7]).astype(float)
    m = Merge(init=spn, epsilon=[0.01, 0.1]).fit(X[:2000], X_valid=X[2000:])
    g = m.spn_
    # both branches of the observed sum merged: X0 independent of the rest, Fig. 3(a)
    assert g.n_nodes < spn.n_nodes and "indicator" not in {k for k, t in g.leaf_tables.items() if len(t)}
    assert m.epsilon_ == 0.1
    assert g.log_likelihood(X[2000:]).mean() > spn.log_likelihood(X[2000:]).mean()
    card = [2, 2, 2]
    assert np.exp(_brute_ll(g, card)).sum() == pytest.approx(1.0)
    p0 = np.exp(g.log_likelihood(np.array([[1.0, np.nan, np.nan]])))[0]
    assert p0 == pytest.approx(X[:2000, 0].mean(), abs=1e-3)      # refit on the merged rows


def test_estimators_clone_with_scikit_learn(trees):
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    _, _, models = trees
    m = Merge(init=models["latent", "univariate"], epsilon=[0.1, 0.2], distance="kl")
    c = clone(m)
    assert c.get_params()["distance"] == "kl" and c.init is not None
    b = clone(BaggedSPN(LearnSPN(min_instances=20), n_bags=2, merge=Merge()))
    assert b.n_bags == 2 and isinstance(b.base_learner, LearnSPN)


@pytest.mark.slow
def test_soft_em_refit_explains_every_training_row():
    """Merging an O-SPN hard can leave a kept member that gives probability 0 to rows its
    partner explained (nltcs, threshold 0.4); the EM refit smooths by counting first
    instead of failing."""
    d = shared_data("binary", "nltcs.train.data").parent
    X, Xv = (np.loadtxt(d / f"nltcs.{s}.data", delimiter=",") for s in ("train", "valid"))
    tree = LearnSPN(sum_split="observed", leaves="chowliu", min_instances=10, alpha=1.0, random_state=0,
                    splitter="mi_components", mi_threshold=0.001, max_depth=5, criterion="info_gain").fit(X).spn_
    m = Merge(init=tree, epsilon=[0.2, 0.4], refit="em", max_iter=3).fit(X, X_valid=Xv)
    assert np.isfinite(m.spn_.log_likelihood(X)).all()
    assert m.spn_.log_likelihood(Xv).mean() >= tree.log_likelihood(Xv).mean() - 1e-9


@pytest.mark.parametrize("off", ["leaf cache", "validation routing"])
@pytest.mark.parametrize("split", ["observed", "latent"])
def test_merge_with_what_it_keeps_is_identical_to_evaluating_every_pass(trees, split, off, monkeypatch):
    """The leaf values kept between passes, and the validation routing kept per model,
    change no bit of the result."""
    from spnc.learn import _merge_round
    from spnc.learn._leafcache import LeafCache
    X, Xv, models = trees
    tree = models[split, "chowliu"]
    kw = dict(init=tree, epsilon=[0.01, 0.1, 0.3], local_check=split == "observed")
    a = Merge(**kw).fit(X, X_valid=Xv).spn_
    if off == "leaf cache":
        monkeypatch.setattr(LeafCache, "usable", lambda self, spn, X: False)
    else:
        monkeypatch.setattr(_merge_round._Round, "valid_routing",
                            lambda self, spn: route(spn, self.Xv, n_threads=self.nt, cache=self.vcache))
    b = Merge(**kw).fit(X, X_valid=Xv).spn_
    assert a.n_nodes == b.n_nodes and np.array_equal(a.child, b.child) and np.array_equal(a.weight, b.weight)
    ta, tb = a.leaf_tables["cltree"], b.leaf_tables["cltree"]
    assert all(np.array_equal(ta.to_arrays()[k], tb.to_arrays()[k]) for k in ta.to_arrays())
    assert np.array_equal(a.log_likelihood(Xv), b.log_likelihood(Xv))


def test_a_round_keeps_the_validation_routing_of_the_last_model_only(trees):
    from spnc.learn._merge_round import _Round
    X, Xv, models = trees
    a, b = models["observed", "chowliu"], models["latent", "chowliu"]
    rnd = _Round(Merge(init=a), X, Xv, 1.0)
    for m in (a, b, a):
        got = rnd.valid_routing(m)
        assert got.shape == (len(Xv), m.n_nodes) and (got != route(m, Xv)).nnz == 0
        assert rnd.valid_routing(m) is got


def test_merge_patience_stops_the_threshold_path_where_validation_falls(trees):
    X, Xv, models = trees
    tree = models["latent", "univariate"]
    grid = [0.001, 0.01, 0.1, 0.3, 0.6]
    full = Merge(init=tree, epsilon=grid).fit(X, X_valid=Xv)
    short = Merge(init=tree, epsilon=grid, patience=1).fit(X, X_valid=Xv)
    h = full.history_
    best = np.maximum.accumulate([r["valid_ll"] for r in h])
    stop = next((i for i in range(1, len(h)) if h[i]["valid_ll"] < best[i - 1]), len(h) - 1)
    assert len(short.history_) == stop + 1
    assert [r["valid_ll"] for r in short.history_] == [r["valid_ll"] for r in h[: stop + 1]]
    if max(r["valid_ll"] for r in h[: stop + 1]) == max(r["valid_ll"] for r in h):
        assert short.epsilon_ == full.epsilon_
        assert np.array_equal(short.spn_.log_likelihood(Xv), full.spn_.log_likelihood(Xv))


def test_leaf_table_gather_equals_packing_construction_objects(trees):
    _, _, models = trees
    for key in (("latent", "chowliu"), ("observed", "univariate")):
        spn = models[key]
        for t in spn.leaf_tables.values():
            if len(t) < 3:
                continue
            L = len(t)
            idx = np.arange(L)[::-1][: L // 2 + 1]
            other = np.setdiff1d(np.arange(L), idx)[:2]
            node_ids = np.arange(len(idx) + len(other)) + 100
            pos = np.arange(len(idx))
            got = type(t).gather(node_ids, [(t, idx, pos), (t, other, np.arange(len(other)) + len(idx))])
            want = type(t).from_nodes(node_ids, [t.to_node(int(i)) for i in np.concatenate([idx, other])])
            assert np.array_equal(got.node, want.node)
            assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(got.scopes, want.scopes))
            assert np.array_equal(got.slot, want.slot)
            if hasattr(want, "var"):
                assert got.var.dtype == want.var.dtype and np.array_equal(got.var, want.var)
            ga, wa = got.to_arrays(), want.to_arrays()
            assert sorted(ga) == sorted(wa)
            for k in ga:
                assert ga[k].dtype == wa[k].dtype and np.array_equal(ga[k], wa[k]), (t.name, k)


def test_univariate_gather_equals_a_table_made_from_its_leaves():
    """Univariate tables gather without deriving each leaf's variable again: every type,
    leaves from two tables, the same table as one made from the leaves themselves."""
    from spnc.leaves.univariate import Bernoulli, Categorical, Gaussian, Indicator
    makers = {"bernoulli": lambda v: Bernoulli(v, 0.1 * (v + 1)),
              "categorical": lambda v: Categorical(v, [0.4, 0.6] if v % 2 else [0.2, 0.3, 0.5]),
              "gaussian": lambda v: Gaussian(v, v - 1.5, 0.5 + v),
              "indicator": lambda v: Indicator(v, v % 2)}
    for make in makers.values():
        leaves_a, leaves_b = [make(v) for v in (3, 0, 2, 1)], [make(v) for v in (1, 4)]
        lt = type(leaves_a[0])._leaf_type
        a, b = lt.from_nodes(np.arange(4), leaves_a), lt.from_nodes(np.arange(2), leaves_b)
        got = lt.gather(np.array([5, 7, 9, 11]), [(a, np.array([2, 0]), np.array([3, 1])),
                                                   (b, np.array([1, 0]), np.array([0, 2]))])
        want = lt.from_nodes(np.array([5, 7, 9, 11]), [leaves_b[1], leaves_a[0], leaves_b[0], leaves_a[2]])
        assert type(got) is type(want) and np.array_equal(got.node, want.node)
        assert got.var.dtype == want.var.dtype and np.array_equal(got.var, want.var)
        assert np.array_equal(got.slot, want.slot)
        assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(got.scopes, want.scopes))
        ga, wa = got.to_arrays(), want.to_arrays()
        assert sorted(ga) == sorted(wa) and all(np.array_equal(ga[k], wa[k]) for k in ga)


@pytest.mark.parametrize("split", ["observed", "latent"])
@pytest.mark.parametrize("leaves", ["univariate", "chowliu"])
def test_replacing_nodes_by_leaves_equals_rebuild(trees, split, leaves):
    """The Chow-Liu check's replacements by array operations give rebuild's model: the
    same arrays, order and leaf tables, nested and shared replaced nodes included."""
    from spnc.chowliu import fit_chow_liu, forest_to_tree
    from spnc.learn._graphedit import rebuild, replace_by_leaves
    from spnc.leaves.cltree import ChowLiuLeaf
    X, _, out = trees
    spn = identical_merge(out[split, leaves])
    inner = [n for n in range(spn.n_nodes - 1) if spn.kind[n] < 2]
    rng = np.random.default_rng(len(inner))
    for k in (1, 3, len(inner) // 2):
        repl = {}
        for n in rng.choice(inner, size=min(k, len(inner)), replace=False).tolist():
            s = spn.node_scope(n)
            fit = fit_chow_liu(X[:, s].astype(np.int64), spn.cardinality[s], alpha=1.0)
            repl[n] = ChowLiuLeaf(s.astype(np.int64), *forest_to_tree(fit.parents, fit.cpts))
        got = replace_by_leaves(spn, repl, learner=spn.learner)
        want = rebuild(spn, np.arange(spn.n_nodes), replace=repl, learner=spn.learner, stats={})[0]
        for a in ("kind", "child_ptr", "child", "weight", "roots"):
            assert np.array_equal(getattr(got, a), getattr(want, a)), a
        assert list(got.leaf_tables) == list(want.leaf_tables)
        for name, t in want.leaf_tables.items():
            g = got.leaf_tables[name]
            assert np.array_equal(g.node, t.node) and sorted(g.params) == sorted(t.params)
            assert all(np.array_equal(g.params[p], t.params[p]) for p in t.params)
        assert np.allclose(got.log_likelihood(X[:50]), want.log_likelihood(X[:50]), rtol=0, atol=0)


def test_merge_keeps_a_recorded_alpha_of_zero_and_saves_numpy_params(trees, tmp_path):
    X, Xv, models = trees
    tree = models["observed", "univariate"]
    tree0 = spnc.SPN.from_arrays(tree.kind, tree.child_ptr, tree.child, tree.weight, tree.leaf_tables,
                                 tree.cardinality, learner={"name": "x", "params": {"alpha": 0.0}})
    a = Merge(init=tree0, epsilon=0.2).fit(X, X_valid=Xv)
    assert a.spn_.learner["params"]["alpha"] == 0.0
    b = Merge(init=tree0, epsilon=0.2, alpha=0.0).fit(X, X_valid=Xv)
    np.testing.assert_array_equal(a.spn_.log_likelihood(Xv), b.spn_.log_likelihood(Xv))
    m = Merge(init=tree, epsilon=0.2, max_rounds=np.int64(2), n_threads=np.int64(1)).fit(X, X_valid=Xv)
    spnc.save(m.spn_, tmp_path / "m.json")
    assert spnc.load(tmp_path / "m.json").learner["params"]["max_rounds"] == 2
    with pytest.raises(spnc.DataError, match="X_valid has no rows"):
        Merge(init=tree, epsilon=0.2).fit(X, X_valid=X[:0])



def test_epsilon_is_none_when_only_identical_subnetworks_merged():
    """``epsilon_`` is None when the threshold merged nothing, with or without X_valid
    (without it, the threshold was reported as chosen)."""
    X = np.random.default_rng(0).integers(0, 2, (300, 4))
    tree = LearnSPN(min_instances=20, random_state=0).fit(X).spn_
    for Xv in (None, X):
        m = Merge(init=tree, epsilon=0.0).fit(X, X_valid=Xv)
        assert m.history_[-1]["merged"] == 0
        assert m.epsilon_ is None and m.spn_.learner["epsilon"] is None


def test_single_root_keeps_variable_types_and_the_learner_record():
    from spnc.learn.merge import as_mixture, single_root
    roots = [Product([spnc.Categorical(0, [p, 1 - p]), spnc.Gaussian(1, m, 1.0)]) for p, m in ((0.2, 0.0), (0.7, 2.0))]
    mix = spnc.compile(roots, root_weights=[0.4, 0.6], var_names=["c", "g"], var_type=[1, 2])
    mix.learner = {"name": "by-hand", "params": {"alpha": 0.5}}
    one = single_root(mix)
    assert one.combine == "single" and one.var_type.tolist() == [1, 2] and one.var_names == ["c", "g"]
    assert one.learner == mix.learner
    X = np.array([[0.0, 0.5], [1.0, np.nan], [np.nan, 3.0]])
    np.testing.assert_allclose(one.log_likelihood(X), mix.log_likelihood(X), atol=1e-12)
    back = as_mixture(one)
    assert back.combine == "mixture" and back.var_type.tolist() == [1, 2] and back.learner == mix.learner


def test_a_model_with_a_variable_in_no_leaf_is_merged_and_bagged_without_a_warning():
    # compile warns of variables in no leaf when its caller counts them (n_vars): single_root
    # and BaggedSPN's ensemble passed the model's own n_vars, so merging or bagging such a
    # model (imported, or composed) warned "compile: 1 of the 3 variables ..." of the user's
    # model, from inside the library
    import warnings
    from spnc.learn import EM
    m = spnc.compile([Product([spnc.Bernoulli(0, .3), spnc.Bernoulli(2, .4)]),
                      Product([spnc.Bernoulli(0, .7), spnc.Bernoulli(2, .5)])], root_weights=[.5, .5],
                     cardinality=[2, 2, 2])
    X = (np.random.default_rng(0).random((200, 3)) < 0.5).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        merged = Merge(init=m, epsilon=0.05).fit(X).spn_
        bagged = BaggedSPN(EM(init=m, max_iter=2), n_bags=2, random_state=0).fit(X).spn_
    for out in (merged, bagged):
        assert out.n_vars == 3 and list(out.cardinality) == [2, 2, 2]
