"""The conformance suite (formats/conformance): spnc accepts and refuses exactly what the
manifest says, matches the expected log-likelihoods, refuses out-of-domain rows, converts
every valid file HDF5 -> JSON -> HDF5 bit-identically, and regenerating the suite gives the
same expected values."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import spnc.io as sio
from spnc.errors import DataError, FormatError
from spnc.io import jsonio

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "formats" / "conformance"
MANIFEST = json.loads((SUITE / "manifest.json").read_text())["files"]
VALID = [e for e in MANIFEST if e["expect"] == "accept"]
INVALID = [e for e in MANIFEST if e["expect"] == "refuse"]


def load_quiet(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sio.load(path)


def read_rows(rows: list) -> np.ndarray:
    dec = {None: np.nan, "inf": np.inf, "-inf": -np.inf}
    return np.array([[dec[x] if x is None or isinstance(x, str) else x for x in r] for r in rows],
                    dtype=np.float64).reshape(len(rows), -1)


@pytest.mark.parametrize("entry", INVALID, ids=[e["file"] for e in INVALID])
def test_invalid_files_are_refused(entry):
    with pytest.raises(FormatError) as ei:
        load_quiet(SUITE / entry["file"])
    assert str(ei.value) and "\n" not in str(ei.value)


@pytest.mark.parametrize("entry", VALID, ids=[e["file"] for e in VALID])
def test_valid_files_give_expected_log_likelihoods(entry):
    m = load_quiet(SUITE / entry["file"])
    side = json.loads((SUITE / entry["data"]).read_text())
    X = read_rows(side["rows"])
    want = read_rows(side["log_likelihood"]) if isinstance(side["log_likelihood"][0], list) \
        else read_rows([side["log_likelihood"]])[0]
    got = np.asarray(m.log_likelihood(X))
    assert got.shape == want.shape
    fin = np.isfinite(want)
    assert (got[~fin] == want[~fin]).all()
    assert (np.abs(got[fin] - want[fin]) <= 1e-12 * np.maximum(1, np.abs(want[fin]))).all()
    for r in read_rows(side["invalid_rows"]):          # out-of-domain values: refused
        with pytest.raises(DataError):
            m.log_likelihood(r[None, :])


def test_every_rule_has_an_invalid_file():
    spec = (ROOT / "formats" / "spnc-hdf5.md").read_text()
    import re
    rules = set(re.findall(r"\*\*([CVTLGPXHJ]\d+)\*\*", spec))
    rules |= {f"P{i}" for i in range(4, 10)} | {f"J{i}" for i in range(1, 6)}
    covered = {e["rule"] for e in INVALID}
    assert rules - covered <= {"J2"}, sorted(rules - covered)   # J2: every refusal is J3/J4's


@pytest.mark.parametrize("entry", [e for e in VALID if e["file"].endswith(".h5")],
                         ids=[e["file"] for e in VALID if e["file"].endswith(".h5")])
def test_hdf5_json_hdf5_is_bit_identical(tmp_path, entry):
    """Every group, dataset, attribute, dtype (attributes included) and float bit survives."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v1 = sio.read_validated(SUITE / entry["file"])
        text = jsonio.dumps_tree(v1.tree)
        v2 = sio.validate_tree(jsonio.loads_tree(text))
        assert sio.trees_equal(v1.tree, v2.tree)
        sio.write_tree(v2.tree, tmp_path / "back.h5")
        v3 = sio.read_validated(tmp_path / "back.h5")
    assert sio.trees_equal(v1.tree, v3.tree)
    assert jsonio.dumps_tree(v3.tree) == text
    assert text == (SUITE / entry["file"]).with_suffix(".json").read_text()


def test_valid_json_files_match_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "formats" / "spnc-model.schema.json").read_text())
    val = jsonschema.Draft202012Validator(schema)
    for e in VALID:
        if e["file"].endswith(".json"):
            val.validate(json.loads((SUITE / e["file"]).read_text()))
    for e in INVALID:   # the JSON cases the schema can see (J1 files do not parse)
        if e["file"].endswith(".json") and e["rule"] != "J1":
            assert not val.is_valid(json.loads((SUITE / e["file"]).read_text())), e["file"]


def test_regenerating_gives_identical_expected_values(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, str(SUITE / "make_suite.py"), str(tmp_path)], check=True,
                   env=env, capture_output=True, timeout=300)
    assert (tmp_path / "manifest.json").read_text() == (SUITE / "manifest.json").read_text()
    for e in VALID:
        a = (SUITE / e["data"]).read_text()
        assert (tmp_path / e["data"]).read_text() == a, e["data"]
    for e in VALID:     # the models too (their trees; HDF5 bytes may differ by library version)
        if e["file"].endswith(".json"):
            assert (tmp_path / e["file"]).read_text() == (SUITE / e["file"]).read_text()
