"""formats/reference_reader.py (plain h5py + numpy, written from the spec) and spnc agree on
every file of the conformance suite (both encodings) and on random models; version rules both ways."""
from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import spnc
import spnc.io as sio
from spnc.errors import FormatError
from spnc.leaves.cltree import ChowLiuLeaf

from conftest import random_spn

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "formats" / "conformance"
FILES = json.loads((SUITE / "manifest.json").read_text())["files"]
spec = importlib.util.spec_from_file_location("reference_reader", ROOT / "formats" / "reference_reader.py")
rr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rr)


def close(a, b) -> bool:
    """Same value to 1e-12 relative (absolute below 1); -inf only where the other is -inf."""
    a, b = np.asarray(a), np.asarray(b)
    fin = np.isfinite(b)
    return a.shape == b.shape and (np.isfinite(a) == fin).all() and (a[~fin] == b[~fin]).all() \
        and (np.abs(a[fin] - b[fin]) <= 1e-12 * np.maximum(1, np.abs(b[fin]))).all()


def outcome(fn, *args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "accept", fn(*args)
    except (FormatError, rr.Refused):
        return "refuse", None


def test_reader_is_standalone():
    src = (ROOT / "formats" / "reference_reader.py").read_text()
    imports = [ln for ln in src.splitlines() if ln.startswith(("import ", "from "))]
    assert imports and all("spnc" not in ln for ln in imports), imports


@pytest.mark.parametrize("entry", FILES, ids=[e["file"] for e in FILES])
def test_agrees_with_spnc_on_every_file(entry):
    path = SUITE / entry["file"]
    ours, ref = outcome(sio.load, path), outcome(rr.Model, path)
    assert ours[0] == ref[0] == entry["expect"]
    # version rules: a 1.0 reader on 1.1 files does what §10 says (manifest "reader_1_0")
    assert outcome(rr.Model, path, (1, 0))[0] == entry["reader_1_0"]
    if ref[0] == "accept":
        side = json.loads((SUITE / entry["data"]).read_text())
        dec = {None: np.nan, "inf": np.inf, "-inf": -np.inf}
        X = np.array([[dec[x] if x is None or isinstance(x, str) else x for x in r] for r in side["rows"]])
        a, b = ref[1].log_likelihood(X), ours[1].log_likelihood(X)
        assert close(a, b)
        if entry["reader_1_0"] == "accept":
            assert close(rr.Model(path, (1, 0)).log_likelihood(X), b)
        for r in side["invalid_rows"]:
            row = np.array([[dec[x] if isinstance(x, str) else x for x in r]])
            with pytest.raises(rr.Refused):
                ref[1].log_likelihood(row)


@pytest.mark.parametrize("seed", range(6))
def test_random_models_agree(tmp_path, seed):
    rng = np.random.default_rng(seed)
    card = [int(k) for k in rng.integers(2, 5, 6)]

    def clt(scope):
        if len(scope) < 2 or rng.random() < 0.6:
            return None
        par = [-1] + [int(rng.integers(0, j)) for j in range(1, len(scope))]
        cpts = [rng.dirichlet(np.ones(card[v]), size=1 if p < 0 else card[scope[p]])
                for v, p in zip(scope, par)]
        return ChowLiuLeaf(list(scope), par, cpts)
    m = spnc.compile(random_spn(rng, card, depth=3, leaf_factory=clt), cardinality=card)
    sio.save(m, tmp_path / "m.h5")
    X = np.array([[rng.integers(0, k) for k in card] for _ in range(50)], dtype=float)
    X[rng.random(X.shape) < 0.3] = np.nan
    assert close(rr.Model(tmp_path / "m.h5").log_likelihood(X), m.log_likelihood(X))


def test_spnc_reads_1_0_files_and_1_0_reader_reads_spnc_files(tmp_path):
    """Both directions of §10 on files spnc writes today."""
    m = spnc.compile(spnc.Sum([spnc.Product([spnc.Bernoulli(0, 0.3), spnc.Gaussian(1, 0.0, 1.0)]),
                               spnc.Product([spnc.Bernoulli(0, 0.6), spnc.Gaussian(1, 2.0, 0.5)])], [0.4, 0.6]))
    sio.save(m, tmp_path / "new.h5")
    X = np.array([[0, 0.5], [1, np.nan], [np.nan, -1.0]])
    assert close(rr.Model(tmp_path / "new.h5", (1, 0)).log_likelihood(X), m.log_likelihood(X))
    old = sio.read_validated(tmp_path / "new.h5").tree
    del old.attrs["content_hash"]
    old.attrs["format_version"] = np.array([1, 0, 0], dtype=np.uint32)
    sio.write_tree(sio.validate_tree(old).tree, tmp_path / "old.h5")
    assert close(sio.load(tmp_path / "old.h5").log_likelihood(X), m.log_likelihood(X))
    assert close(rr.Model(tmp_path / "old.h5").log_likelihood(X), m.log_likelihood(X))


@pytest.mark.parametrize("ext", [".h5", ".json"])
def test_learner_reports_are_an_extension_strict_readers_accept(tmp_path, ext):
    """What a learner reports besides its parameters (n_train, Merge's epsilon, ...) goes to
    /learner@x_spnc_info: a strict 1.1 reader (and a 1.0 one) accepts the file, spnc reads
    the entries back, and a value that is not a JSON object only warns."""
    from spnc.io._hash import content_hash
    from spnc.io._model import model_from_validated
    rng = np.random.default_rng(3)
    m = spnc.compile(random_spn(rng, [2, 3, 2], depth=2), cardinality=[2, 3, 2])
    m.learner = {"name": "mine", "params": {"alpha": 1.0}, "n_train": 12, "epsilon": None,
                 "bag_params": [{"max_depth": 4}, {}], "sizes": np.array([3, 1])}
    p = tmp_path / f"m{ext}"
    sio.save(m, p)
    X = rng.integers(0, 2, size=(20, 3)).astype(float)
    for version in ((1, 1), (1, 0)):
        assert close(rr.Model(p, version).log_likelihood(X), m.log_likelihood(X))
    back = sio.load(p).learner
    assert {k: back[k] for k in ("n_train", "epsilon", "bag_params", "sizes")} == \
        {"n_train": 12, "epsilon": None, "bag_params": [{"max_depth": 4}, {}], "sizes": [3, 1]}
    t = sio.read_validated(p).tree
    t.members["learner"].attrs["x_spnc_info"] = "[1, 2]"
    t.attrs["content_hash"] = content_hash(t)
    with pytest.warns(UserWarning, match="not a JSON object"):
        back = model_from_validated(sio.validate_tree(t)).learner
    assert "n_train" not in back and back["name"] == "mine"
