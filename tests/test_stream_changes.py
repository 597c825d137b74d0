"""Streamed inputs that change or are named awkwardly: a file rewritten between EM's passes,
blocks that differ from pass to pass, ':' inside directory names, files left open, block sizes."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

import spnc
from spnc import stream
from spnc.errors import DataError, ParameterError
from spnc.learn import _em_blocks
from spnc.learn.em import EM

from conftest import random_spn


def _model_and_rows(n=1200):
    spn = spnc.compile(random_spn(np.random.default_rng(1), [2, 3, 2, 4, 2], depth=3))
    return spn, spn.sample(n, seed=1)


def _change_before_pass(monkeypatch, k, change):
    """Run ``change()`` just before EM's ``k``-th pass over the data."""
    calls = []
    real = _em_blocks.estep

    def estep(*a, **kw):
        calls.append(1)
        if len(calls) == k:
            change()
        return real(*a, **kw)
    monkeypatch.setattr(_em_blocks, "estep", estep)


@pytest.mark.parametrize("how", ["npy rewritten", "h5 truncated", "h5 replaced"])
def test_a_file_changed_between_em_passes_is_an_error(tmp_path, monkeypatch, how):
    # was: the later passes read the new rows (or, from a truncated HDF5 file, garbage) and EM
    # returned parameters of neither file; a .npy cut short crashed the process (SIGBUS). A file
    # replaced by another was read on from the old copy: refused too, as the data has changed
    spn, X = _model_and_rows()
    other = spn.sample(len(X), seed=2)
    if how.startswith("npy"):
        path = tmp_path / "x.npy"
        np.save(path, X)
        spec, change = str(path), lambda: np.save(path, other)
    else:
        path = tmp_path / "x.h5"
        with h5py.File(path, "w") as f:
            f["X"] = X
        spec = f"{path}:/X"

        def change():
            if how.endswith("truncated"):
                open(path, "wb").close()
            else:
                with h5py.File(tmp_path / "new.h5", "w") as f:
                    f["X"] = other
                (tmp_path / "new.h5").replace(path)
    _change_before_pass(monkeypatch, 2, change)
    with pytest.raises(DataError, match=r"x\.(npy|h5).*changed, replaced or removed while being read"):
        EM(init=spn, max_iter=3, tol=-np.inf).fit(spec)


def test_a_block_read_while_its_file_changes_is_refused(tmp_path):
    X = np.arange(20.0).reshape(10, 2)
    np.save(tmp_path / "x.npy", X)

    class Rewritten:        # the file changes while the first block is read
        shape = X.shape

        def __getitem__(self, rows):
            np.save(tmp_path / "x.npy", X + 1)
            return X[rows]
    src = stream.ArraySource(Rewritten(), 4, "X", guard=stream.FileGuard(str(tmp_path / "x.npy")))
    with pytest.raises(DataError, match=r"^X: .*x\.npy was changed"):
        next(src.blocks())


def test_an_unchanged_file_is_read_as_before(tmp_path):
    spn, X = _model_and_rows()
    np.save(tmp_path / "x.npy", X)
    kw = dict(init=spn, max_iter=3, tol=-np.inf)
    got, ref = EM(**kw).fit(str(tmp_path / "x.npy")), EM(**kw).fit(X)
    assert np.allclose(got.history_["train"], ref.history_["train"], rtol=1e-12)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["X"] = X
    with h5py.File(tmp_path / "x.h5", "r") as f:      # an open read-only dataset is guarded too
        assert np.array_equal(stream.log_likelihood(spn, f["X"]), spn.log_likelihood(X))


def test_blocks_that_change_between_passes_are_an_error():
    # was: a callable giving fewer rows on a later pass halved EM's objective silently
    spn, X = _model_and_rows(2000)
    calls = []

    def blocks():
        calls.append(1)
        n = len(X) if len(calls) <= 2 else 1000
        return iter([X[i:i + 100] for i in range(0, n, 100)])
    for w in (None, np.ones(len(X))):
        calls.clear()
        with pytest.raises(DataError, match="gave 1000 rows, an earlier one 2000"):
            EM(init=spn, max_iter=3, tol=-np.inf).fit(blocks, sample_weight=w)
    passes = iter([[X], [X, X[:1]]])
    src = stream.open_source(lambda: iter(next(passes)))
    list(src.blocks())
    with pytest.raises(DataError, match="gave more than 2000 rows"):
        list(src.blocks())


def test_colon_in_a_directory_name(tmp_path):
    # was: 'run.h5:2/x.npy' was split into the file 'run.h5' and the dataset '2/x.npy' -- a read
    # failed with "no such file", a write created an HDF5 file 'run.h5' beside the directory
    spn, X = _model_and_rows()
    d = tmp_path / "run.h5:2"
    d.mkdir()
    np.save(d / "x.npy", X)
    with h5py.File(d / "x.h5", "w") as f:
        f["X"] = X
    ref = spn.log_likelihood(X)
    assert np.array_equal(stream.log_likelihood(spn, str(d / "x.npy")), ref)
    assert np.array_equal(stream.log_likelihood(spn, f"{d / 'x.h5'}:/X"), ref)
    assert stream.log_likelihood_to_file(spn, f"{d / 'x.h5'}:/X", str(d / "ll.npy")) == len(X)
    assert np.array_equal(np.load(d / "ll.npy"), ref)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.h5:2"]
    assert stream.split_spec("data.h5:/X") == ("data.h5", "/X")
    assert stream.split_spec(str(tmp_path / "a:b" / "c.H5:g/X")) == (str(tmp_path / "a:b" / "c.H5"), "g/X")


def test_em_closes_the_file_it_opened_when_it_fails(tmp_path):
    # was: the HDF5 file stayed open (and locked against writers) while the error was alive
    spn, X = _model_and_rows()
    X[700, 1] = 7
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["X"] = X
    with pytest.raises(DataError, match=r"X\[700, 1\] = 7") as err:
        EM(init=spn, max_iter=2).fit(f"{tmp_path / 'x.h5'}:/X")
    assert err.value is not None
    with h5py.File(tmp_path / "x.h5", "w"):         # refused while another handle has it open
        pass


@pytest.mark.parametrize("bad", [-5, 0, 2.5, "7", True])
def test_block_rows_must_be_a_positive_whole_number(tmp_path, bad):
    # was: block_rows=-5 read no blocks: log_likelihood_to_file wrote an empty result and
    # returned 0, Chow-Liu said "X has no rows"; 2.5, "7" and True were taken as 2, 7 and 1
    spn, X = _model_and_rows()
    np.save(tmp_path / "x.npy", X)
    from spnc.chowliu_blocks import fit_chow_liu_blocks
    for run in (lambda: stream.log_likelihood_to_file(spn, str(tmp_path / "x.npy"), str(tmp_path / "ll.npy"),
                                                      block_rows=bad),
                lambda: fit_chow_liu_blocks(X, block_rows=bad), lambda: stream.open_source(X, bad)):
        with pytest.raises(ParameterError, match=r"block_rows must be a whole number of rows >= 1"):
            run()
    assert not (tmp_path / "ll.npy").exists()
    assert stream.log_likelihood_to_file(spn, str(tmp_path / "x.npy"), str(tmp_path / "ll.npy"),
                                         block_rows=np.int64(7)) == len(X)


def test_unreadable_npy_files_are_named(tmp_path):
    # was: an empty .npy raised numpy's bare EOFError, a directory named x.npy IsADirectoryError,
    # and a 1-D array "x.npy: cannot read .npy: x.npy must be 2-D" (it was read, and named twice)
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / "dir.npy").mkdir()
    np.save(tmp_path / "flat.npy", np.zeros(4))
    for name, msg in (("empty.npy", "cannot read .npy"), ("dir.npy", "cannot read .npy"),
                      ("flat.npy", r"flat\.npy must be 2-D \(n_rows, n_vars\), got shape \(4,\)$")):
        with pytest.raises(DataError, match=msg) as err:
            stream.open_source(str(tmp_path / name))
        assert str(err.value).startswith(str(tmp_path / name)) and str(err.value).count(name) == 1


@pytest.mark.parametrize("learner", ["LearnSPN", "Prometheus"])
def test_learners_close_the_file_when_sampling_fails(tmp_path, learner):
    # was: an error while reading the structure sample (here: no rows) left the file open
    from spnc.learn import LearnSPN
    from spnc.learn.prometheus import Prometheus
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.create_dataset("E", shape=(0, 4), dtype="u1")
    est = {"LearnSPN": LearnSPN, "Prometheus": Prometheus}[learner](sample_rows=10)
    with pytest.raises(DataError, match=r"x\.h5:/E has no rows") as err:
        est.fit(f"{tmp_path / 'x.h5'}:/E")
    assert err.value is not None
    with h5py.File(tmp_path / "x.h5", "w"):
        pass


def test_an_empty_dataset_is_named(tmp_path):
    # was: "X has no rows", though the caller named a file
    from spnc.chowliu import fit_chow_liu
    from spnc.chowliu_blocks import pairwise_gtest
    spn, _ = _model_and_rows(10)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.create_dataset("E", shape=(0, 5), dtype="u1")
    spec = f"{tmp_path / 'x.h5'}:/E"
    for run in (lambda: EM(init=spn).fit(spec), lambda: fit_chow_liu(spec), lambda: pairwise_gtest(spec),
                lambda: pairwise_gtest(spec, [2] * 5)):
        with pytest.raises(DataError, match=r"x\.h5:/E has no rows"):
            run()
    with pytest.raises(DataError, match="^X has no rows"):
        fit_chow_liu([np.zeros((0, 5))])


def test_no_rows_give_one_column_per_root_of_an_independent_model(tmp_path):
    # was: shape (0,) from an empty file (in memory: (0, roots)), written so to the output too
    rng = np.random.default_rng(1)
    a, b = (random_spn(rng, [2, 3, 2], depth=2) for _ in range(2))
    bag = spnc.compile([a, b], combine="independent")
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.create_dataset("E", shape=(0, 3), dtype="f8")
    spec = f"{tmp_path / 'x.h5'}:/E"
    assert bag.log_likelihood(np.zeros((0, 3))).shape == (0, 2)
    assert stream.log_likelihood(bag, spec).shape == stream.log_likelihood(bag, []).shape == (0, 2)
    assert stream.log_likelihood(spnc.compile(a), spec).shape == (0,)
    for out in ("ll.npy", "ll.h5"):
        assert stream.log_likelihood_to_file(bag, spec, str(tmp_path / out)) == 0
    assert np.load(tmp_path / "ll.npy").shape == (0, 2)
    with h5py.File(tmp_path / "ll.h5") as f:
        assert f["log_likelihood"].shape == (0, 2)


def test_a_swmr_reader_reads_its_rows_while_a_writer_appends(tmp_path):
    # a file opened with swmr=True is meant to be read while another process appends to it:
    # the rows up to the shape taken when reading starts stay as they are (was: refused as
    # "changed while being read" once the writer flushed)
    import subprocess
    import sys
    path = tmp_path / "s.h5"
    X = np.arange(600.0).reshape(200, 3)
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("X", data=X, maxshape=(None, 3), chunks=(50, 3))
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys, h5py\n"
        f"f = h5py.File({str(path)!r}, 'a', libver='latest'); f.swmr_mode = True; d = f['X']\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
        "d.resize((250, 3)); d[200:] = -1.0; d.flush(); f.flush()\n"
        "print('appended', flush=True); sys.stdin.readline(); f.close()\n")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "ready"
        with h5py.File(path, "r", libver="latest", swmr=True) as f:
            blocks = stream.open_source(f["X"], block_rows=50).blocks()
            got = [next(blocks)[1]]
            writer.stdin.write("go\n")
            writer.stdin.flush()
            assert writer.stdout.readline().strip() == "appended"
            got += [b for _, b in blocks]
    finally:
        writer.communicate("done\n", timeout=60)
    assert np.array_equal(np.concatenate(got), X)
