"""spnc.mixture / spnc.product and spnc-compose."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import spnc
from spnc.cli import compose as cli


def bern_model(ps, names=None, vars_=None):
    vars_ = list(range(len(ps))) if vars_ is None else vars_
    return spnc.compile(spnc.Product([spnc.Bernoulli(v, p) for v, p in zip(vars_, ps)]), var_names=names)


def all_states(n):
    return np.array(list(itertools.product([0.0, 1.0], repeat=n)))


def test_mixture_with_given_weights_is_the_weighted_sum():
    a, b = bern_model([0.2, 0.7]), bern_model([0.9, 0.1])
    m = spnc.mixture([a, b], weights=[1, 3])
    X = np.vstack([all_states(2), [[np.nan, 1.0]]])
    want = np.log(0.25 * np.exp(a.log_likelihood(X)) + 0.75 * np.exp(b.log_likelihood(X)))
    np.testing.assert_allclose(m.log_likelihood(X), want, atol=1e-12)
    assert np.isclose(np.exp(m.log_likelihood(all_states(2))).sum(), 1.0)


def test_mixture_weights_fitted_on_data_are_maximum_likelihood():
    a, b = bern_model([0.2, 0.7, 0.5]), bern_model([0.9, 0.1, 0.3])
    X = np.vstack([a.sample(300, seed=1), b.sample(700, seed=2)])
    m = spnc.mixture([a, b], X=X)
    w = m.weight[m.child_ptr[m.root]:m.child_ptr[m.root + 1]]
    # the EM fixed point is the maximum of the (concave) log-likelihood in w: compare a grid
    la, lb = a.log_likelihood(X), b.log_likelihood(X)
    grid = np.linspace(0.001, 0.999, 999)
    ll = [np.mean(np.logaddexp(np.log(g) + la, np.log(1 - g) + lb)) for g in grid]
    assert abs(w[0] - grid[int(np.argmax(ll))]) < 2e-3
    assert m.log_likelihood(X).mean() >= max(la.mean(), lb.mean())


def test_mixture_matches_variables_by_name():
    a = bern_model([0.2, 0.7], names=["x", "y"])
    b = bern_model([0.7, 0.2], names=["y", "x"])      # the same distribution, columns swapped
    m = spnc.mixture([a, b], weights=[0.5, 0.5])
    assert m.var_names == ["x", "y"]
    X = all_states(2)
    np.testing.assert_allclose(m.log_likelihood(X), a.log_likelihood(X), atol=1e-12)
    with pytest.raises(spnc.ScopeError, match="other variables"):
        spnc.mixture([a, bern_model([0.5, 0.5], names=["x", "z"])])


def test_mixture_renames_multivariate_leaves():
    cl = spnc.ChowLiuLeaf([0, 1, 2], [-1, 0, 1], [[[0.3, 0.7]], [[0.9, 0.1], [0.2, 0.8]], [[0.6, 0.4], [0.1, 0.9]]])
    a = spnc.compile(cl, var_names=["a", "b", "c"])
    b = spnc.compile(cl, var_names=["c", "a", "b"])
    m = spnc.mixture([a, b], weights=[0.5, 0.5])
    X = all_states(3)
    want = np.logaddexp(np.log(0.5) + a.log_likelihood(X), np.log(0.5) + b.log_likelihood(X[:, [2, 0, 1]]))
    np.testing.assert_allclose(m.log_likelihood(X), want, atol=1e-12)
    mv = spnc.MultivariateGaussian([0, 1], [0.0, 1.0], [[1.0, 0.3], [0.3, 2.0]])
    g1, g2 = spnc.compile(mv, var_names=["u", "v"]), spnc.compile(mv, var_names=["v", "u"])
    Y = np.random.default_rng(0).normal(size=(5, 2))
    np.testing.assert_allclose(spnc.mixture([g1, g2], weights=[1, 0]).log_likelihood(Y), g1.log_likelihood(Y))
    np.testing.assert_allclose(spnc.mixture([g1, g2], weights=[0, 1]).log_likelihood(Y),
                               g2.log_likelihood(Y[:, [1, 0]]))


def test_product_over_disjoint_variables():
    a = bern_model([0.2, 0.7], names=["x", "y"])
    b = spnc.compile(spnc.Gaussian(0, 1.0, 2.0), var_names=["z"])
    p = spnc.product([a, b])
    assert p.var_names == ["x", "y", "z"]
    X = np.array([[0.0, 1.0, 0.3], [1.0, np.nan, -2.0]])
    np.testing.assert_allclose(p.log_likelihood(X), a.log_likelihood(X[:, :2]) + b.log_likelihood(X[:, 2:]))
    with pytest.raises(spnc.ScopeError, match="disjoint"):
        spnc.product([a, bern_model([0.5], names=["y"])])
    # without names: variable indices are shared, scopes must be disjoint
    c = bern_model([0.4], vars_=[2])
    q = spnc.product([bern_model([0.2, 0.7]), c])
    assert q.n_vars == 3
    with pytest.raises(spnc.ScopeError, match="disjoint"):
        spnc.product([bern_model([0.2, 0.7]), bern_model([0.5])])


def typed_model(p: float, mean: float, swap: bool = False) -> spnc.SPN:
    """A 2-state categorical variable "c" (not binary) and a real one "g"."""
    c, g = (1, 0) if swap else (0, 1)
    root = spnc.Product([spnc.Categorical(c, [1 - p, p]), spnc.Gaussian(g, mean, 1.5)])
    return spnc.compile(root, var_names=["g", "c"] if swap else ["c", "g"], var_type=[2, 1] if swap else [1, 2])


def test_composition_keeps_variable_types():
    a, b = typed_model(0.3, 0.0), typed_model(0.8, 1.0, swap=True)
    assert a.var_type.tolist() == [1, 2]
    m = spnc.mixture([a, b], weights=[0.5, 0.5])
    assert m.var_names == ["c", "g"] and m.var_type.tolist() == [1, 2]
    X = np.array([[0.0, 0.3], [1.0, -1.0]])
    assert spnc.mixture([a, b], X=X).var_type.tolist() == [1, 2]
    p = spnc.product([a, bern_model([0.4], names=["b"])])
    assert p.var_names == ["c", "g", "b"] and p.var_type.tolist() == [1, 2, 0]
    # a variable no leaf uses keeps its declared cardinality and type
    d = spnc.compile(spnc.Bernoulli(0, 0.4), cardinality=[2, 3], var_names=["x", "y"], var_type=[0, 1])
    q = spnc.product([a, d])
    assert q.cardinality.tolist() == [2, 0, 2, 3] and q.var_type.tolist() == [1, 2, 0, 1]
    # models calling a 2-state variable binary and categorical: the first one wins, with a warning
    binary = spnc.compile(spnc.Product([spnc.Categorical(0, [0.5, 0.5]), spnc.Gaussian(1, 0.0, 1.0)]),
                          var_names=["c", "g"])
    with pytest.warns(UserWarning, match="'c' is binary in models\\[1\\] but categorical"):
        assert spnc.mixture([a, binary]).var_type.tolist() == [1, 2]


def test_names_of_some_models_survive_matching_by_index():
    named, plain = bern_model([0.2, 0.7], names=["x", "y"]), bern_model([0.9, 0.1])
    assert spnc.mixture([plain, named], weights=[0.5, 0.5]).var_names == ["x", "y"]
    with pytest.warns(UserWarning, match="variable 1 is named by no model"):
        assert spnc.product([bern_model([0.3], names=["x"]), bern_model([0.4], vars_=[1])]).var_names is None
    with pytest.warns(UserWarning, match="variable 0 is 'x' in one model and 'z'"):
        assert spnc.mixture([named, plain, bern_model([0.5, 0.5], names=["z", "y"])][::2] + [plain],
                            weights=[1, 1, 1]).var_names is None


def test_shared_structure_stays_shared_and_inputs_are_untouched():
    shared = spnc.Bernoulli(1, 0.3)
    a = spnc.compile(spnc.Sum([spnc.Product([spnc.Bernoulli(0, 0.1), shared]),
                               spnc.Product([spnc.Bernoulli(0, 0.8), shared])], [0.4, 0.6]))
    before = a.weight.copy()
    m = spnc.mixture([a, a], weights=[0.5, 0.5])
    assert m.n_nodes == 2 * a.n_nodes + 1
    np.testing.assert_array_equal(a.weight, before)


def test_bad_arguments():
    a = bern_model([0.2])
    with pytest.raises(spnc.ParameterError):
        spnc.mixture([])
    with pytest.raises(spnc.ParameterError, match="weights"):
        spnc.mixture([a, a], weights=[1, -1])
    with pytest.raises(spnc.ParameterError):
        spnc.product([a, "model.h5"])
    with pytest.raises(spnc.ScopeError, match="variables"):
        spnc.mixture([a, bern_model([0.2, 0.3])])


def test_spnc_compose_command(tmp_path, capsys):
    a = bern_model([0.2, 0.7], names=["x", "y"])
    b = bern_model([0.9, 0.1], names=["y", "x"])
    spnc.save(a, tmp_path / "a.h5")
    from spnc.io import importers
    importers.save(bern_model([0.9, 0.1]), tmp_path / "b.deeprob.json")    # foreign inputs work too
    spnc.save(b, tmp_path / "b.h5")
    X = np.vstack([a.sample(200, seed=1), b.sample(100, seed=2)[:, [1, 0]]])
    np.savetxt(tmp_path / "d.csv", X, delimiter=",", fmt="%d", header="x,y", comments="")
    assert cli.main(["mix", str(tmp_path / "a.h5"), str(tmp_path / "b.h5"), "-o", str(tmp_path / "m.h5"),
                     "--data", str(tmp_path / "d.csv")]) == 0
    out = capsys.readouterr().out
    assert "mixture: mean LL" in out
    m = spnc.load(tmp_path / "m.h5")
    assert m.log_likelihood(X).mean() >= max(a.log_likelihood(X).mean(), b.log_likelihood(X[:, [1, 0]]).mean())
    # one input without names: variables are matched by index, the output written as SPFlow text
    assert cli.main(["mix", str(tmp_path / "a.h5"), str(tmp_path / "b.deeprob.json"), "-o",
                     str(tmp_path / "m2.spflow"), "--weights", "0.5,0.5"]) == 0
    assert "spnc-compose: warning: " in capsys.readouterr().err     # the names the file cannot keep
    m2 = importers.load(tmp_path / "m2.spflow")
    np.testing.assert_allclose(m2.log_likelihood(X), np.logaddexp(
        np.log(0.5) + a.log_likelihood(X), np.log(0.5) + b.log_likelihood(X)), atol=1e-12)
    assert cli.main(["mix", str(tmp_path / "a.h5"), "-o", str(tmp_path / "m3.h5"), "--weights", "x"]) == 2
    assert "--weights" in capsys.readouterr().err
    c = spnc.compile(spnc.Gaussian(0, 0.0, 1.0), var_names=["z"])
    spnc.save(c, tmp_path / "c.json")
    assert cli.main(["product", str(tmp_path / "a.h5"), str(tmp_path / "c.json"), "-o",
                     str(tmp_path / "p.json")]) == 0
    assert spnc.load(tmp_path / "p.json").var_names == ["x", "y", "z"]
    assert cli.main(["product", str(tmp_path / "a.h5"), str(tmp_path / "a.h5"), "-o", str(tmp_path / "q.h5")]) == 2
    # the common options of every tool: --json, -q, --n-threads
    capsys.readouterr()
    assert cli.main(["mix", str(tmp_path / "a.h5"), str(tmp_path / "b.h5"), "-o", str(tmp_path / "j.h5"),
                     "--data", str(tmp_path / "d.csv"), "--json", "-q", "--n-threads", "1"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["nodes"] == spnc.load(tmp_path / "j.h5").n_nodes and "mixture" in got["mean_ll"]
    assert cli.main(["em", str(tmp_path / "a.h5"), "-o", str(tmp_path / "e.h5"), "--data", str(tmp_path / "d.csv"),
                     "--json", "--max-iter", "2"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["em_passes"] >= 1 and len(got["mean_ll_before_after"]["train"]) == 2


def test_spnc_compose_reads_data_as_the_other_tools(tmp_path, capsys):
    """The data options of docs/cli.md: the header error names --header/--no-header,
    which spnc-compose must then take (it refused them), and --delimiter/--by-position."""
    a = spnc.compile(spnc.Product([spnc.Bernoulli(0, 0.2), spnc.Bernoulli(1, 0.7),
                                   spnc.Categorical(2, [0.2, 0.3, 0.5])]))
    spnc.save(a, tmp_path / "a.h5")
    X = np.array([[0, 1, 2], [1, 1, 0], [0, 0, 1]])
    np.savetxt(tmp_path / "d.csv", X, delimiter=",", fmt="%d")       # row 1 reads like a header
    np.savetxt(tmp_path / "d.txt", X, delimiter=";", fmt="%d")
    np.savetxt(tmp_path / "d.tsv", X, delimiter="\t", fmt="%d", header="p\tq\tr", comments="")
    base = ["mix", str(tmp_path / "a.h5"), str(tmp_path / "a.h5"), "-o", str(tmp_path / "m.h5"), "--data"]
    assert cli.main(base + [str(tmp_path / "d.csv")]) == 2
    assert "--no-header" in capsys.readouterr().err
    want = pytest.approx(float(a.log_likelihood(X).mean()))
    assert cli.main(base + [str(tmp_path / "d.csv"), "--no-header", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mean_ll"]["mixture"] == want
    assert cli.main(base + [str(tmp_path / "d.txt"), "--delimiter", ";", "--no-header", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mean_ll"]["mixture"] == want
    assert cli.main(["em", str(tmp_path / "a.h5"), "-o", str(tmp_path / "e.h5"), "--data",
                     str(tmp_path / "d.tsv"), "--by-position", "--max-iter", "1", "-q"]) == 0


def test_spnc_compose_refuses_options_of_another_mode(tmp_path, capsys):
    """--valid (em) given to mix, or --weights (mix) to em, was silently ignored."""
    spnc.save(bern_model([0.2, 0.7]), tmp_path / "a.h5")
    np.savetxt(tmp_path / "d.csv", np.array([[0, 1], [1, 1], [1, 0]]), delimiter=",", fmt="%d")
    a, d = str(tmp_path / "a.h5"), str(tmp_path / "d.csv")
    assert cli.main(["mix", a, a, "-o", str(tmp_path / "m.h5"), "--data", d, "--valid", d]) == 2
    assert "--valid applies to em only" in capsys.readouterr().err
    assert cli.main(["em", a, "-o", str(tmp_path / "e.h5"), "--data", d, "--weights", "1"]) == 2
    assert "--weights applies to mix only" in capsys.readouterr().err
    assert not (tmp_path / "m.h5").exists() and not (tmp_path / "e.h5").exists()


@pytest.mark.filterwarnings("error")     # the sum of the weights overflowed with a RuntimeWarning
def test_huge_or_empty_mixture_weights(tmp_path, capsys):
    a, b = bern_model([0.2, 0.7]), bern_model([0.9, 0.1])
    m = spnc.mixture([a, b], weights=[1e308, 1e308])      # their sum overflowed: 'add up to 0.0'
    np.testing.assert_allclose(m.log_likelihood(all_states(2)), spnc.mixture([a, b]).log_likelihood(all_states(2)))
    spnc.save(a, tmp_path / "a.h5")
    assert cli.main(["mix", str(tmp_path / "a.h5"), str(tmp_path / "a.h5"), "-o", str(tmp_path / "m.h5"),
                     "--weights", ""]) == 2                  # was: equal weights, silently
    assert "--weights '': not comma-separated numbers" in capsys.readouterr().err


def test_mixture_refuses_weights_and_x_together(tmp_path, capsys):
    """X was ignored without a word when weights were given too; the console tool, which
    scores given weights on --data, keeps doing so."""
    a, b = bern_model([0.2, 0.7]), bern_model([0.9, 0.1])
    X = np.vstack([a.sample(50, seed=1), b.sample(50, seed=2)])
    with pytest.raises(spnc.errors.ParameterError, match=r"give weights or X, not both") as e:
        spnc.mixture([a, b], weights=[0.5, 0.5], X=X)
    assert e.value.param == "weights"
    spnc.save(a, tmp_path / "a.h5")
    spnc.save(b, tmp_path / "b.h5")
    np.savetxt(tmp_path / "d.csv", X, delimiter=",", fmt="%d")
    assert cli.main(["mix", str(tmp_path / "a.h5"), str(tmp_path / "b.h5"), "-o", str(tmp_path / "m.h5"),
                     "--data", str(tmp_path / "d.csv"), "--no-header", "--weights", "1,3", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = spnc.mixture([a, b], weights=[1, 3])
    assert got["weights"] == pytest.approx([0.25, 0.75])
    assert got["mean_ll"]["mixture"] == pytest.approx(float(want.log_likelihood(X).mean()))
