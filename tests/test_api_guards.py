"""Mistakes in calls to the query and learner API end in a clear error that names what is
wrong (the bugs of a bad-input hunt, session 20)."""
from __future__ import annotations

import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import spnc
from spnc import Bernoulli, Categorical, DataError, ParameterError, Product, Sum
from spnc._kinds import SUM
from spnc.learn import EM, BaggedSPN, ChowLiuTree, LearnSPN, OSLRAU, Prometheus, TreeSPN


@pytest.fixture(scope="module")
def binary():
    return np.random.default_rng(0).integers(0, 2, size=(300, 4)).astype(float)


def test_node_log_values_takes_only_the_two_modes():
    spn = spnc.compile(Sum([Product([Bernoulli(0, .2), Bernoulli(1, .6)]),
                            Product([Bernoulli(0, .7), Bernoulli(1, .1)])], [.4, .6]))
    for mode in (2, 7, -1, True):
        with pytest.raises(ValueError, match="mode must be 0 .* or 1"):
            spn.node_log_values([[0, 1]], mode=mode)


def test_freeze_takes_node_ids_only(binary):
    spn = LearnSPN(min_instances=50, random_state=0).fit(binary).spn_
    for bad in (spn.kind == SUM, [1.5], [[1, 2]]):
        with pytest.raises(ParameterError, match="freeze must be a flat list of node ids"):
            EM(init=spn, max_iter=1, freeze=bad).fit(binary)
    sums = np.flatnonzero(spn.kind == SUM)
    m = EM(init=spn, max_iter=2, freeze=sums).fit(binary)
    assert np.array_equal(m.spn_.weight, spn.weight)


def test_bernoulli_leaves_refuse_real_and_categorical_data(binary):
    real = binary + np.random.default_rng(1).normal(0, .1, binary.shape)
    with pytest.raises(DataError, match=r"needs 0/1 data, but column 0 has value .* \(row 0\)"):
        LearnSPN(leaves="bernoulli").fit(real)
    cat = binary.copy()
    cat[57, 1] = 2
    with pytest.raises(DataError, match=r"column 1 has value 2.0 \(row 57\)"):
        LearnSPN(leaves="bernoulli").fit(cat)
    with pytest.raises(DataError, match=r"cardinality\[1\] is 3"):
        LearnSPN(leaves="bernoulli", cardinality=[2, 3, 2, 2]).fit(binary)


@pytest.mark.parametrize("learner", [LearnSPN(), ChowLiuTree(), Prometheus(), TreeSPN(), OSLRAU(),
                                     BaggedSPN(LearnSPN(), n_bags=1)], ids=lambda e: type(e).__name__)
def test_ragged_or_complex_rows_are_data_errors(learner):
    with pytest.raises(DataError, match="numeric"):
        learner.fit([[0, 1, 0], [1, 0]])
    with pytest.raises(DataError, match="complex"):
        learner.fit(np.array([[0, 1], [1, 0], [1, 1]]) + 0.5j)


@pytest.mark.parametrize("dtype", ["M8[s]", "m8[s]", "U1", "S1"])
def test_dates_and_text_are_refused_not_cast_to_numbers(dtype, tmp_path):
    spn = spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .4)]))
    X = np.zeros((4, 2)).astype(dtype)          # numpy casts each to floats without a word
    with pytest.raises(DataError, match=f"numeric .*got dtype {re.escape(str(np.dtype(dtype)))}"):
        spn.log_likelihood(X)
    np.save(tmp_path / "x.npy", X)
    with pytest.raises(DataError, match="numeric"):
        EM(init=spn, max_iter=1).fit(str(tmp_path / "x.npy"))
    with pytest.raises(DataError, match="numeric"):
        LearnSPN().fit(X)


@pytest.mark.parametrize("learner", [LearnSPN(splitter="correlation"), Prometheus()], ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_missing_real_value_is_named_where_it_is(learner, bad):
    X = np.random.default_rng(0).normal(size=(200, 4))
    X[150, 2] = bad
    with pytest.raises(DataError, match=rf"X\[150, 2\] = {bad!r}: training data must be finite"):
        learner.fit(X)


def test_conditional_of_independent_roots_names_the_row():
    tmp = spnc.compile(Sum([Product([Bernoulli(0, .2), Categorical(1, [.5, .5, 0.])]),
                            Product([Bernoulli(0, .9), Categorical(1, [.1, .1, .8])])], [.5, .5]))
    N = tmp.n_nodes - 1          # without the root: its two children are independent roots
    m = spnc.SPN.from_arrays(tmp.kind[:N], tmp.child_ptr[:N + 1], tmp.child[:tmp.child_ptr[N]],
                             tmp.weight[:tmp.child_ptr[N]], tmp.leaf_tables, tmp.cardinality,
                             roots=tmp.children(tmp.root), combine="independent")
    Xe = np.array([[np.nan, 1.], [np.nan, 1.], [np.nan, 1.], [np.nan, 2.]])     # row 3: p = 0 under root 0
    with pytest.raises(DataError, match="^row 3: the evidence has probability zero"):
        m.conditional(np.array([[1, 1.]] * 3 + [[1, 2.]]), Xe)
    got = m.conditional(np.array([[1, 1.]]), Xe[:1])
    np.testing.assert_allclose(got, m.log_likelihood([[1, 1.]]) - m.log_likelihood(Xe[:1]))


@pytest.mark.parametrize("seed", [2**31, 2**40, np.uint64(2**63 + 5), 2**64 - 1])
def test_seeds_up_to_64_bits(binary, seed):
    a = LearnSPN(min_instances=50, random_state=seed).fit(binary).spn_
    b = LearnSPN(min_instances=50, random_state=seed).fit(binary).spn_
    assert np.array_equal(a.weight, b.weight)
    with pytest.raises(ParameterError, match="random_state"):
        LearnSPN(random_state=2**64).fit(binary)


def test_bagging_refuses_to_draw_what_it_sets(binary):
    for k in ("random_state", "n_threads"):
        with pytest.raises(ParameterError, match=f"sets each bag's {k} itself"):
            BaggedSPN(LearnSPN(), n_bags=2, param_distributions={k: [5]}).fit(binary)


def test_bagging_in_parallel_from_an_unguarded_script(tmp_path):
    # spawned workers run the main script again: without `if __name__ == "__main__":` that
    # fitted the bags again in each worker and broke the pool
    script = tmp_path / "bag.py"
    script.write_text(
        "import numpy as np\n"
        "from spnc.learn import BaggedSPN, LearnSPN\n"
        "X = np.random.default_rng(0).integers(0, 2, size=(300, 5)).astype(float)\n"
        "fit = lambda jobs: BaggedSPN(LearnSPN(min_instances=50), n_bags=3, n_jobs=jobs, random_state=0).fit(X)\n"
        "print(np.array_equal(fit(2).spn_.log_likelihood(X), fit(1).spn_.log_likelihood(X)))\n")
    for how in ([str(script)], ["-m", "bag"]):
        out = subprocess.run([sys.executable, *how], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr[-2000:]
    script.write_text(script.read_text().replace("LearnSPN(min_instances=50)", "Mine(min_instances=50)")
                      .replace("X = np", "class Mine(LearnSPN):\n    pass\nX = np"))
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and 'under `if __name__ == "__main__":`' in out.stderr


def test_backward_refuses_weights_whose_counts_would_overflow():
    spn = spnc.compile(Sum([Bernoulli(0, .3), Bernoulli(0, .8)], [.5, .5]))
    with pytest.raises(DataError, match="sample_weight sums to .* rescale"):
        spn.backward([[0], [1]], sample_weight=[1e308, 1e308])
    out = spn.backward([[0], [1]], sample_weight=[1e100, 1e100])
    assert np.all(np.isfinite(out["edge_counts"]))


def test_variables_in_no_leaf_are_named_at_compile_and_stay_missing():
    root = spnc.Product([spnc.Bernoulli(0, .3), spnc.Bernoulli(1, .6)])
    with pytest.warns(UserWarning, match=r"2 of the 4 variables \(2, 3\) are in no leaf"):
        m = spnc.compile(root, n_vars=4)
    assert m.cardinality.tolist() == [2, 2, 0, 0]
    S = m.sample(5, seed=0)
    assert np.isnan(S[:, 2:]).all() and not np.isnan(S[:, :2]).any()
    filled, _ = m.mpe(np.full((1, 4), np.nan))
    assert np.isnan(filled[0, 2:]).all() and filled[0, :2].tolist() == [0, 1]
    assert m.log_likelihood([[0, 1, 7.5, -3]]) == pytest.approx(np.log(.7 * .6))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spnc.compile(root, n_vars=2)


@pytest.mark.parametrize("make", [lambda: Prometheus(min_std=1e300), lambda: LearnSPN(splitter="correlation",
                                                                                      min_std=1e300)])
def test_a_huge_std_floor_is_refused_by_name(make):
    # its square overflowed inside the Gaussian M-step (OverflowError from a leaf module)
    with pytest.raises(ParameterError, match=r"min_std must be a finite number > 0 and <= 1e\+150, got 1e\+300"):
        make().fit(np.random.default_rng(0).normal(size=(60, 3)))


def test_numpy_scalar_parameters_are_checked_without_warnings():
    # was: RuntimeWarning "overflow encountered in cast" (the bound 1e150 cast to float32)
    X = np.random.default_rng(0).normal(size=(60, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Prometheus(min_std=np.float32(0.1), n_clusters=np.int64(2), random_state=0).fit(X)
    with pytest.raises(ParameterError, match="min_std must be a finite number > 0"):
        Prometheus(min_std=np.float32(0)).fit(X)


def test_numpy_bools_and_strings_are_taken_as_python_ones(binary):
    # was: "progress must be a bool, got np.False_", "variant must be one of 'soft', 'hard',
    # 'online', got np.str_('hard')" (as a grid of numpy arrays gives them)
    init = ChowLiuTree().fit(binary).spn_
    LearnSPN(progress=np.array([False])[0], data_type=np.array(["discrete"])[0]).fit(binary)
    EM(init=init, variant=np.str_("hard"), tol=np.float64(-np.inf), max_iter=2).fit(binary)
    for bad, pattern in ((dict(data_type=True), "data_type must be one of"), (dict(progress=2), "progress must be a bool")):
        with pytest.raises(ParameterError, match=pattern):
            LearnSPN(**bad).fit(binary)
    with pytest.raises(ParameterError, match="tol must be a finite number or -inf, got True"):
        EM(init=init, tol=True).fit(binary)


def test_n_threads_beyond_a_c_int_says_so():
    with pytest.raises(ParameterError, match=r"n_threads must be a non-zero integer .* not supported\)$"):
        ChowLiuTree(n_threads=2**40).fit(np.zeros((3, 2)))


@pytest.mark.parametrize("n", [1.5, "3", -1])
def test_estimator_sample_refuses_a_count_that_is_not_whole(n):
    est = ChowLiuTree().fit(np.array([[0, 1], [1, 0], [1, 1]]))
    with pytest.raises(ValueError, match="whole number"):       # 1.5 drew 1 row, "3" three
        est.sample(n)
    assert est.sample(np.int64(2), seed=0).shape == (2, 2)


def test_assigning_var_names_is_checked_as_on_construction(binary, tmp_path):
    """``spn.var_names = ...`` took anything: a list of the wrong length or with a repeat
    then broke DataFrame queries and saving far from the assignment."""
    spn = ChowLiuTree().fit(binary).spn_
    for bad, msg in ((["a"], "1 name for 4 variables"), ("abcd", "not one string"),
                     (["a", "b", "a", "c"], "duplicate names"), (["a", "", "c", "d"], "empty")):
        with pytest.raises(spnc.StructureError, match=msg):
            spn.var_names = bad
        assert spn.var_names is None
    spn.var_names = [b"w", "x", "y", "z"]         # bytes decoded as on construction
    assert spn.var_names == ["w", "x", "y", "z"]
    spnc.save(spn, tmp_path / "m.h5")
    assert spnc.load(tmp_path / "m.h5").var_names == ["w", "x", "y", "z"]
    spn.var_names = None
    assert spn.var_names is None


def test_conditional_refuses_unequal_row_counts_before_any_pass(binary, monkeypatch):
    """The row counts were compared only after both log-likelihood passes had run."""
    spn = ChowLiuTree().fit(binary).spn_
    ev = np.full_like(binary, np.nan)
    ev[:, 0] = binary[:, 0]
    monkeypatch.setattr(type(spn), "_forward", lambda *a, **k: pytest.fail("a pass ran"))
    with pytest.raises(DataError, match="X_query has 300 rows and X_evidence 299: one evidence row per query row"):
        spn.conditional(binary, ev[:-1])
