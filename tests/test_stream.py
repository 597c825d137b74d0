"""Block sources, outputs written block by block, streaming Chow-Liu and streaming EM:
results equal the in-memory path (exactly for integer counts, else to reduction order)."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

import spnc
from spnc import stream
from spnc.chowliu import fit_chow_liu
from spnc.errors import DataError, ParameterError
from spnc.learn.chowliu import ChowLiuTree
from spnc.learn.em import EM

from conftest import random_spn
from test_em import MODELS, data_for


def _h5(tmp_path, X, name="data.h5", ds="/grp/X"):
    p = tmp_path / name
    with h5py.File(p, "w") as f:
        f.create_dataset(ds, data=X, chunks=(min(len(X), 256), X.shape[1]))
    return f"{p}:{ds}"


def _blocks(X, m):
    return [X[i:i + m] for i in range(0, len(X), m)]


# ---------------------------------------------------------------------- sources
def test_split_spec_and_sources(tmp_path):
    assert stream.split_spec("a/b.h5:/x/y") == ("a/b.h5", "/x/y")
    assert stream.split_spec("c:/data/b.hdf5") == ("c:/data/b.hdf5", None)
    assert stream.split_spec("t.csv") == ("t.csv", None)
    X = np.arange(30.0).reshape(10, 3)
    spec = _h5(tmp_path, X)
    for src in (X, spec, _blocks(X, 4), lambda: iter(_blocks(X, 3))):
        s = stream.open_source(src, block_rows=4)
        got = np.concatenate([b for _, b in s.blocks()])
        again = np.concatenate([b for _, b in s.blocks()])
        s.close()
        assert np.array_equal(got, X) and np.array_equal(again, X)
    once = stream.open_source(iter(_blocks(X, 4)))
    list(once.blocks())
    with pytest.raises(DataError, match="one-shot"):
        list(once.blocks())
    with pytest.raises(DataError, match="no dataset"):
        stream.open_source(str(tmp_path / "data.h5") + ":/nope")
    with pytest.raises(DataError, match="name the dataset"):
        stream.open_source(str(tmp_path / "data.h5"))
    with pytest.raises(DataError, match="columns"):
        list(stream.open_source([X, X[:, :2]]).blocks())
    assert stream.is_streamed(spec) and stream.is_streamed(_blocks(X, 4))
    assert not stream.is_streamed(X) and not stream.is_streamed([[0, 1], [1, 0]])


def test_zarr_source(tmp_path):
    zarr = pytest.importorskip("zarr")
    X = np.random.default_rng(0).integers(0, 2, size=(500, 6)).astype(np.uint8)
    z = zarr.open(str(tmp_path / "d.zarr"), mode="w", shape=X.shape, chunks=(100, 6), dtype="u1")
    z[:] = X
    a = fit_chow_liu(X)
    b = fit_chow_liu(str(tmp_path / "d.zarr"))
    assert np.array_equal(a.parents, b.parents) and np.array_equal(a.mi, b.mi)


@pytest.mark.parametrize("ext", [".npy", ".h5"])
def test_log_likelihood_to_file(tmp_path, ext):
    spn = spnc.compile(random_spn(np.random.default_rng(1), [2, 3, 2, 4], depth=3))
    X = spn.sample(1000, seed=3)
    X[::7, 1] = np.nan
    out = str(tmp_path / ("ll" + ext))
    n = stream.log_likelihood_to_file(spn, _h5(tmp_path, X), out, block_rows=128)
    assert n == 1000
    got = np.load(out) if ext == ".npy" else h5py.File(out, "r")["log_likelihood"][()]
    assert np.array_equal(got, spn.log_likelihood(X))
    assert np.array_equal(stream.log_likelihood(spn, _blocks(X, 300)), spn.log_likelihood(X))
    # an iterable of unknown length, and nothing left behind when a block fails
    stream.log_likelihood_to_file(spn, iter(_blocks(X, 333)), str(tmp_path / "it.npy"))
    assert np.array_equal(np.load(tmp_path / "it.npy"), spn.log_likelihood(X))
    bad = _blocks(X, 400)
    bad[-1] = bad[-1].copy()
    bad[-1][0, 0] = 7.0
    with pytest.raises(DataError):
        stream.log_likelihood_to_file(spn, bad, str(tmp_path / "bad.npy"))
    assert sorted(p.name for p in tmp_path.iterdir() if "bad" in p.name) == []


def test_errors_name_rows_of_the_whole_input(tmp_path):
    from spnc.learn import OSLRAU
    spn = spnc.compile(spnc.Sum([spnc.Product([spnc.Bernoulli(0, 1.0), spnc.Bernoulli(1, p)]) for p in (.3, .6)],
                                [.5, .5]))
    X = np.ones((3000, 2))
    bad = X.copy()
    bad[2345, 1] = 2                               # not a state
    cell = r"X\[2345, 1\] = 2"
    for run in (lambda: stream.log_likelihood(spn, _blocks(bad, 1000)),
                lambda: stream.log_likelihood_to_file(spn, stream.ArraySource(bad, 512), str(tmp_path / "ll.npy")),
                lambda: EM(init=spn, max_iter=1).fit(_blocks(bad, 1000)),
                lambda: fit_chow_liu(_blocks(bad, 1000), [2, 2])):
        with pytest.raises(DataError, match=cell):
            run()
    zero = X.copy()
    zero[2345, 0] = 0                              # probability zero under spn
    for kw in ({}, {"variant": "hard"}):
        with pytest.raises(DataError, match="row 2345 has probability zero"):
            EM(init=spn, max_iter=1, **kw).fit(_blocks(zero, 1000))
    with pytest.raises(DataError, match="row 2345 has probability zero"):
        EM(init=spn, max_iter=1, variant="online", batch_size=100, random_state=0).fit(zero)
    R = np.random.default_rng(0).normal(size=(300, 2))
    R[150, 1] = np.nan
    with pytest.raises(DataError, match=r"X\[150, 1\] = nan"):
        OSLRAU().fit([R[:100], R[100:]])


# ---------------------------------------------------------------------- Chow-Liu
def _same_fit(a, b, exact):
    assert np.array_equal(a.parents, b.parents)
    assert np.array_equal(a.cardinality, b.cardinality)
    eq = np.array_equal if exact else (lambda x, y: np.allclose(x, y, rtol=1e-12, atol=1e-15))
    assert eq(a.mi, b.mi)
    for x, y in zip(a.cpts, b.cpts):
        assert eq(x, y)


def _tree_data(rng, n, card):
    X = np.zeros((n, len(card)), dtype=np.int64)
    X[:, 0] = rng.integers(0, card[0], n)
    for j in range(1, len(card)):
        p = X[:, rng.integers(0, j)]
        X[:, j] = np.where(rng.random(n) < 0.7, p % card[j], rng.integers(0, card[j], n))
    return X


@pytest.mark.parametrize("card", [[2] * 9, [2, 3, 4, 2, 5, 3, 2]])
@pytest.mark.parametrize("weights", [None, "const", "random"])
def test_chow_liu_blocks_equal_in_memory(tmp_path, card, weights):
    rng = np.random.default_rng(len(card))
    X = _tree_data(rng, 3001, card).astype(np.uint8)
    w = None if weights is None else (np.full(3001, 2.5) if weights == "const" else rng.random(3001))
    if weights == "random":
        w[::11] = 0.0
    ref = fit_chow_liu(X, sample_weight=w, alpha=0.5)
    _same_fit(ref, fit_chow_liu(_h5(tmp_path, X), sample_weight=w, alpha=0.5), exact=weights != "random")
    _same_fit(ref, fit_chow_liu(_blocks(X.astype(np.float64), 500), sample_weight=w, alpha=0.5),
              exact=weights != "random")
    _same_fit(fit_chow_liu(X, card, alpha=0.1), fit_chow_liu(_blocks(X, 777), card, alpha=0.1), exact=True)


@pytest.mark.parametrize("card", [[2] * 5, [2, 3, 2, 4]])
def test_empty_blocks_add_nothing(card):
    from spnc.chowliu_blocks import pairwise_gtest
    rng = np.random.default_rng(8)
    X = _tree_data(rng, 900, card).astype(np.uint8)
    w = rng.random(900)
    parts = [X[:0], X[:400], X[:0], X[400:], X[:0]]
    for kw, exact in (({}, True), ({"sample_weight": w}, False), ({"cardinality": card}, True)):
        _same_fit(fit_chow_liu(X, **kw), fit_chow_liu(parts, **kw), exact)
    assert all(np.array_equal(a, b) for a, b in zip(pairwise_gtest(X), pairwise_gtest(parts)))
    with pytest.raises(DataError, match="no rows"):
        fit_chow_liu([X[:0], X[:0]])


def test_chow_liu_tree_estimator_on_file(tmp_path):
    X = _tree_data(np.random.default_rng(5), 2000, [2, 3, 2, 3])
    a = ChowLiuTree(alpha=1.0).fit(X)
    b = ChowLiuTree(alpha=1.0).fit(_h5(tmp_path, X))
    assert np.array_equal(a.score_samples(X), b.score_samples(X))
    with pytest.raises(DataError, match=r"X\[1500, 2\] = -1"):
        Y = X.copy()
        Y[1500, 2] = -1
        fit_chow_liu(_blocks(Y, 1000))
    with pytest.raises(DataError, match="one-shot"):
        fit_chow_liu(iter(_blocks(X, 500)))     # non-binary with inferred cardinality: two passes
    with pytest.raises(DataError, match="sample_weight has 5"):
        fit_chow_liu(_blocks(X, 500), sample_weight=np.ones(5))


# ---------------------------------------------------------------------- EM
@pytest.mark.parametrize("kind", ["discrete", "gaussian", "mvgaussian"])
@pytest.mark.parametrize("variant", ["soft", "hard"])
def test_em_blocks_equal_in_memory(tmp_path, kind, variant):
    init = MODELS[kind](3)
    X = data_for(kind, n=2500, seed=1)
    X[::13, 0] = np.nan
    w = np.random.default_rng(2).random(len(X))
    kw = dict(init=init, max_iter=4, tol=-np.inf, variant=variant, alpha=0.1, batch_size=512)
    ref = EM(**kw).fit(X, sample_weight=w)
    got = EM(**kw).fit(_h5(tmp_path, X), sample_weight=w)
    assert np.allclose(got.history_["train"], ref.history_["train"], rtol=1e-11)
    a, b = ref.spn_, got.spn_
    assert np.allclose(a.weight, b.weight, rtol=1e-9, atol=1e-13)
    for k, t in a.leaf_tables.items():
        for name, v in t.to_arrays().items():
            assert np.allclose(v, b.leaf_tables[k].to_arrays()[name], rtol=1e-9, atol=1e-12), (k, name)


def test_em_blocks_refusals(tmp_path):
    from test_em import cltree_model
    X = data_for("discrete", n=200)
    with pytest.raises(ParameterError, match="batch_size >= the 200 rows"):
        EM(init=MODELS["discrete"](3), variant="online", batch_size=50).fit(_blocks(X, 50))
    with pytest.raises(DataError, match="one-shot"):
        EM(init=MODELS["discrete"](3)).fit(iter(_blocks(X, 50)))
    with pytest.raises(DataError, match="cltree"):
        EM(init=cltree_model(1)).fit(_blocks(data_for("cltree", n=200), 50))


def test_dataframe_blocks_are_matched_by_name(tmp_path):
    # pd.read_csv(..., chunksize=...) gives DataFrame blocks: they were read by position
    pd = pytest.importorskip("pandas")
    X = _tree_data(np.random.default_rng(3), 600, [2, 2, 2, 2]).astype(np.float64)
    cols = ["a", "b", "c", "d"]
    df = pd.DataFrame(X, columns=cols)
    blocks = [df[:250][cols[::-1]], df[250:]]       # another column order, then the model's
    spn = spnc.compile(random_spn(np.random.default_rng(4), [2, 2, 2, 2], depth=2), var_names=cols)
    ref = spn.log_likelihood(X)
    np.testing.assert_array_equal(stream.log_likelihood(spn, blocks), ref)
    stream.log_likelihood_to_file(spn, blocks, str(tmp_path / "ll.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "ll.npy"), ref)
    a, b = (EM(init=spn, max_iter=3, tol=-np.inf).fit(Z).spn_ for Z in (X, blocks))
    assert np.allclose(a.weight, b.weight, rtol=1e-12)
    a, b = (EM(init=spn, max_iter=2).fit(X, X_valid=V) for V in (X, blocks))     # read whole
    np.testing.assert_array_equal(a.history_["valid"], b.history_["valid"])
    # without a model, every block is put in the first block's column order, which names
    # the learned model's variables
    from spnc.learn import LearnSPN
    for learner in (ChowLiuTree(), LearnSPN(min_instances=100, random_state=0)):
        got = learner.fit(blocks)
        assert got.spn_.var_names == cols[::-1]
        np.testing.assert_array_equal(got.score_samples(df), learner.fit(X[:, ::-1]).score_samples(X[:, ::-1]))
    with pytest.raises(DataError, match="block at row 250.*'a'"):
        stream.load([df[:250], df[250:][cols[1:]]])


def test_cli_reads_hdf5_spec(tmp_path):
    from spnc.cli import evaluate, learn
    X = _tree_data(np.random.default_rng(2), 400, [2, 2, 2, 2]).astype(np.float64)
    spec = _h5(tmp_path, X)
    model = str(tmp_path / "m.h5")
    assert learn.main([spec, "--learner", "chowliu", "-o", model, "-q"]) == 0
    assert evaluate.main([model, spec, "--out-ll", str(tmp_path / "ll.npy"), "--quiet"]) == 0
    assert np.allclose(np.load(tmp_path / "ll.npy"), spnc.load(model).log_likelihood(X))
    assert evaluate.main([model, str(tmp_path / "data.h5") + ":/nope", "--quiet"]) == 2


def test_pairwise_gtest_over_blocks_equals_learnspn_test(tmp_path):
    from spnc.chowliu_blocks import pairwise_gtest
    from test_learnspn import ctx_for, full_slice, planted
    X = planted(np.random.default_rng(0), n=3000).astype(np.uint8)
    X[:5, 2] = 2                                     # one ternary variable
    G, dof = ctx_for(X).gtest(full_slice(X))
    for src, card in ((_h5(tmp_path, X), None), (_blocks(X, 700), [2, 2, 3, 2, 2, 2, 2, 2])):
        G2, dof2 = pairwise_gtest(src, card)
        assert np.array_equal(G, G2) and np.array_equal(dof, dof2)
    with pytest.raises(DataError, match=r"X\[0, 2\] = 2"):
        pairwise_gtest(_blocks(X, 700), [2] * 8)
    for bad in ([2.5] * 8, [True] * 8, [[2] * 8]):     # was: 2.5 taken as 2, a 2-D list read on
        with pytest.raises(DataError, match="cardinality must be integers >= 2"):
            pairwise_gtest(_blocks(X, 700), bad)


def test_load_keeps_to_the_memory_budget(tmp_path, monkeypatch):
    X = np.arange(40000, dtype=np.float64).reshape(10000, 4)      # 320 kB
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["X"] = X
    blocks = [X[:5000], X[5000:]]
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "200K")
    for src in (f"{tmp_path / 'x.h5'}:/X", blocks, iter(blocks)):
        with pytest.raises(DataError, match="X_valid in memory .* above the memory budget"):
            stream.load(src, name="X_valid")
    monkeypatch.setenv("SPNC_MEMORY_BUDGET", "400K")
    assert np.array_equal(stream.load(iter(blocks)), X)


def test_output_never_replaces_a_group_or_the_input_by_a_link(tmp_path):
    X = np.random.default_rng(0).integers(0, 2, size=(100, 2)).astype(float)
    spn = spnc.compile(spnc.Product([spnc.Bernoulli(0, .5), spnc.Bernoulli(1, .5)]))
    p = tmp_path / "data.h5"
    with h5py.File(p, "w") as f:
        f["grp/X"] = X
        f["grp/labels"] = np.arange(100)
        f["train"] = h5py.SoftLink("/grp/X")
    for src, out, why in ((f"{p}:/grp/X", f"{p}:/grp", "is a group"), (f"{p}:/train", f"{p}:/grp/X", "input data"),
                          # was: h5py's TypeError "Incompatible object (Dataset) already exists"
                          (f"{p}:/grp/X", f"{p}:/grp/labels/ll", r"grp/labels/ll: cannot create a dataset")):
        with pytest.raises(DataError, match=why):
            stream.log_likelihood_to_file(spn, src, out)
        with h5py.File(p) as f:
            assert np.array_equal(f["grp/X"][:], X) and "grp/labels" in f
    assert sorted(x.name for x in tmp_path.iterdir()) == ["data.h5"]      # no temporary file left


def test_output_into_a_file_open_for_writing_is_refused(tmp_path, monkeypatch):
    # was: the file was replaced by a copy, and what the open handle wrote afterwards was lost
    X = np.random.default_rng(0).integers(0, 2, size=(20, 2)).astype(float)
    spn = spnc.compile(spnc.Product([spnc.Bernoulli(0, .5), spnc.Bernoulli(1, .5)]))
    p = tmp_path / "data.h5"
    with h5py.File(p, "w") as f:
        f["X"] = X
    with h5py.File(p, "a") as f:
        for src in (f["X"], f"{p}:/X"):
            with pytest.raises(DataError, match="open for writing in this process"):
                stream.log_likelihood_to_file(spn, src, f"{p}:/ll")
        f["after"] = np.arange(3)                # the handle still writes to the file
    with h5py.File(p, "a", locking=False), pytest.raises(DataError, match="open for writing"):
        stream.log_likelihood_to_file(spn, X, f"{p}:/ll")      # opened otherwise than h5py's default
    monkeypatch.chdir(tmp_path)
    with h5py.File("data.h5", "a"):                            # by a name relative to another directory
        monkeypatch.chdir(tmp_path.parent)
        with pytest.raises(DataError, match="open for writing"):
            stream.log_likelihood_to_file(spn, X, f"{p}:/ll")
    with h5py.File(p) as f:
        assert sorted(f) == ["X", "after"]
    with h5py.File(p, "r") as f:                 # open read-only: nothing to lose
        assert stream.log_likelihood_to_file(spn, f["X"], f"{p}:/ll") == 20
    with h5py.File(p) as f:
        assert sorted(f) == ["X", "after", "ll"] and np.allclose(f["ll"][:], spn.log_likelihood(X))


def test_map_to_file_refuses_blocks_of_other_row_shapes(tmp_path):
    # was: a corrupt .npy (its header counting rows of the first shape) and, in HDF5, the
    # narrower rows broadcast over the dataset's columns, both reported as written
    X = np.arange(20.0).reshape(10, 2)
    for out in (tmp_path / "o.npy", f"{tmp_path / 'o.h5'}:/r"):
        with pytest.raises(DataError, match=r"the block at row 4 has rows of shape \(1,\), the rows before it \(2,\)"):
            stream.map_to_file(lambda b: b if b[0, 0] == 0 else b[:, :1], X, str(out), block_rows=4)
    with pytest.raises(DataError, match="rows are written from an array, got a scalar"):
        stream.map_to_file(lambda b: b.sum(), X, str(tmp_path / "o.npy"), block_rows=4)
    assert list(tmp_path.iterdir()) == []


def test_a_replaced_output_keeps_its_permissions(tmp_path):
    X = np.zeros((10, 1))
    spn = spnc.compile(spnc.Bernoulli(0, .5))
    for out in (tmp_path / "x.h5", tmp_path / "x.npy"):
        stream.log_likelihood_to_file(spn, X, str(out))
        out.chmod(0o600)
        stream.log_likelihood_to_file(spn, X, str(out))
        assert out.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("card", [[1, 2, 2, 2], [2.5] * 4, [[2, 2], [2, 2]]])
def test_cardinality_checked_alike_in_memory_and_streamed(card):
    # one check (spnc.chowliu.check_cardinality) for fit_chow_liu, the streamed Chow-Liu fit
    # and pairwise_gtest: was two copies with two wordings
    from spnc.chowliu_blocks import fit_chow_liu_blocks, pairwise_gtest
    X = np.random.default_rng(0).integers(0, 2, (50, 4))
    pattern = (r"^cardinality must be (4 )?integers >= 2 \(one per column of X; a discrete variable has "
               r"at least 2 states\), got ")
    for fit in (lambda: fit_chow_liu(X, card), lambda: fit_chow_liu_blocks([X], card),
                lambda: pairwise_gtest([X], card)):
        with pytest.raises(DataError, match=pattern):
            fit()
