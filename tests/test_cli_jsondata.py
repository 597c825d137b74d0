"""The JSON data the tools write (--out s.json, --mpe m.json) is data they read back; it
was read as CSV text ("'{"columns": ...' is not a number ... give --header")."""
from __future__ import annotations

import json

import numpy as np
import pytest

import spnc
from spnc import Bernoulli, Categorical, Gaussian, Product
from spnc.cli import evaluate, learn


@pytest.fixture()
def model(tmp_path):
    m = spnc.compile(Product([Bernoulli(0, .3), Categorical(1, [.2, .3, .5]), Gaussian(2, 1., 2.)]),
                     var_names=["b", "c", "g"])
    spnc.save(m, tmp_path / "m.h5")
    return m, tmp_path


def test_samples_and_mpe_written_as_json_read_back(model, capsys):
    m, d = model
    assert evaluate.main([str(d / "m.h5"), "--sample", "30", "--seed", "2", "--out", str(d / "s.json"), "-q"]) == 0
    S = m.sample(30, seed=2)
    assert evaluate.main([str(d / "m.h5"), str(d / "s.json"), "--out-ll", str(d / "ll.npy"), "-q"]) == 0
    np.testing.assert_allclose(np.load(d / "ll.npy"), m.log_likelihood(S), rtol=1e-12)
    part = S.copy()
    part[::2, 1] = np.nan                                   # written as null, read as missing
    (d / "p.json").write_text(json.dumps({"columns": ["g", "b", "c"], "data": [
        [None if v != v else v for v in row] for row in part[:, [2, 0, 1]].tolist()]}))
    assert evaluate.main([str(d / "m.h5"), str(d / "p.json"), "--mpe", str(d / "f.json"), "-q"]) == 0
    filled = json.loads((d / "f.json").read_text())
    assert filled["columns"] == ["b", "c", "g"]
    np.testing.assert_array_equal(np.array(filled["data"]), m.mpe(part)[0])
    assert learn.main([str(d / "s.json"), "-o", str(d / "l.h5"), "--types", "b,r,r", "-q"]) == 0
    assert spnc.load(d / "l.h5").var_names == ["b", "c", "g"]
    capsys.readouterr()


@pytest.mark.parametrize("text, why", [
    ("[1, 2]", 'JSON data must be an object {"columns"'),
    ('{"data": [[1, 2], [3]]}', 'row 2 of "data" has 1 value, row 1 2'),
    ('{"data": [[1, "x"]]}', "row 1, column 2: 'x' is not a number"),
    ('{"data": [[true, 1]]}', "row 1, column 1: True is not a number"),
    ('{"data": [[1, 2]], "columns": ["a"]}', '"columns" must be null or a list of 2 names'),
    ('{"data": [[1, 2]], "columns": ["a", "a"]}', "column name 'a' appears twice"),
    ('{"data": []}', "no data rows"),
    ("{nope", "not valid JSON"),
    ("[" * 100_000, "JSON nested too deeply to be data"),
])
def test_bad_json_data_is_one_clear_error(tmp_path, capsys, text, why):
    (tmp_path / "b.json").write_text(text)
    assert learn.main([str(tmp_path / "b.json"), "-o", str(tmp_path / "m.h5"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spnc-learn: error: ") and f"b.json: {why}" in err, err


def test_data_given_as_the_model_is_named_as_such(model, capsys):
    """Swapped arguments ('spnc-eval test.h5 model.h5') said only what the model format
    misses ('/@format: required attribute is missing')."""
    import h5py
    m, d = model
    with h5py.File(d / "x.h5", "w") as f:
        f["X"] = m.sample(5, seed=0)
    assert evaluate.main([str(d / "m.h5"), "--sample", "5", "--out", str(d / "s.json"), "-q"]) == 0
    np.save(d / "x.npy", m.sample(5, seed=0))
    for data in (d / "x.h5", d / "s.json", f"{d / 'x.h5'}:/X", d / "x.npy"):
        assert evaluate.main([str(data), str(d / "m.h5"), "-q"]) == 2
        err = capsys.readouterr().err
        assert "(not an spnc model: " in err and "a data file given as the model?)" in err, err
    with pytest.raises(spnc.FormatError, match="without the model format's 'format' attribute"):
        spnc.load(d / "x.h5")


def test_binary_files_read_as_text_are_named(model, tmp_path, capsys):
    """A gzipped CSV, an HDF5 file named .hdf or an .npy under another name was blamed on
    the text encoding ("contains NUL bytes ... UTF-16 without a byte-order mark?"), and
    --encoding latin-1 then read the compressed bytes as cells."""
    import bz2
    import gzip
    import h5py
    m, d = model
    text = b"b,c,g\n0,1,0.5\n1,2,-1\n"
    (d / "x.csv.gz").write_bytes(gzip.compress(text))
    (d / "x.csv.bz2").write_bytes(bz2.compress(text))
    with h5py.File(d / "x.hdf", "w") as f:
        f["X"] = np.zeros((2, 3))
    with open(d / "x.dat", "wb") as f:
        np.save(f, np.zeros((2, 3)))
    for name, why in (("x.csv.gz", "is gzip-compressed: decompress it first"),
                      ("x.csv.bz2", "is bzip2-compressed"), ("x.hdf", "is an HDF5 file: name it .h5 or .hdf5"),
                      ("x.dat", "is a numpy .npy array: name it .npy")):
        for extra in ([], ["--encoding", "latin-1"]):
            assert evaluate.main([str(d / "m.h5"), str(d / name), "-q"] + extra) == 2
            err = capsys.readouterr().err
            assert f"{name}: {why}" in err, err
    (d / "p.csv").write_text("PAR1,b\n1,2\n")          # text that merely starts like Parquet
    assert learn.main([str(d / "p.csv"), "-o", str(d / "p.h5"), "-q"]) == 0


def test_data_hint_does_not_parse_a_json_file_refused_for_its_size(tmp_path, monkeypatch):
    # the hint for a data file given as the model re-read and parsed the whole JSON file even
    # when it had been refused for being beyond the size limit (gigabytes of JSON records)
    p = tmp_path / "rows.json"
    p.write_text(json.dumps({"rows": [[0, 1]] * 5000}))
    parsed = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda s, *a, **k: (parsed.append(len(s)), real(s, *a, **k))[1])
    with pytest.raises(spnc.FormatError, match="larger than the limit"):
        spnc.io.load(p, limits=spnc.io.Limits(max_json_bytes=1000))
    assert parsed == []
    with pytest.raises(spnc.FormatError, match="a data file given as the model"):
        spnc.io.load(p)


def test_nan_and_infinity_tokens_read_as_in_csv_text(model, capsys):
    """json.dumps writes a float NaN as NaN and infinity as Infinity: the tools said
    "nan is not a number (null for missing)". NaN is missing, as NaN in CSV text;
    Infinity is inf, refused where CSV's inf is. A huge integer was a traceback."""
    m, d = model
    S = m.sample(6, seed=1)
    S[::2, 2] = np.nan
    (d / "n.json").write_text(json.dumps({"columns": ["b", "c", "g"], "data": S.tolist()}))
    assert "NaN" in (d / "n.json").read_text()
    assert evaluate.main([str(d / "m.h5"), str(d / "n.json"), "--out-ll", str(d / "ll.npy"), "-q"]) == 0
    np.testing.assert_allclose(np.load(d / "ll.npy"), m.log_likelihood(S), rtol=1e-12)
    errs = {}
    for name, text in (("i.json", '{"data": [[0, 1, Infinity]]}'), ("i.csv", "0,1,inf\n"),
                       ("h.json", '{"data": [[0, 1, 1' + "0" * 400 + "]]}"),
                       ("g.json", '{"data": [[0, 1, ' + "9" * 5000 + "]]}")):
        (d / name).write_text(text)
        assert evaluate.main([str(d / "m.h5"), str(d / name), "-q"]) == 2
        errs[name] = capsys.readouterr().err
    assert all(e.count("\n") == 1 and "infinite values are not allowed" in e for e in errs.values()), errs
    assert "i.json: row 1, column 3: inf: infinite values are not allowed" in errs["i.json"]
    assert "i.csv: line 1, column 3: inf: infinite values are not allowed" in errs["i.csv"]


@pytest.mark.parametrize("cell, why", [
    ('"NaN"', "'NaN' is a string: write null for a missing value"),
    ('"?"', "'?' is a string: write null for a missing value"),
    ('"Infinity"', """'Infinity' is a string: write "inf" or "-inf" for an infinite value"""),
    ('"1.5"', "'1.5' is a string, not a number: write it without quotes"),
    ('"x"', "'x' is not a number (null for missing)"),
])
def test_a_string_cell_says_what_to_write(tmp_path, capsys, cell, why):
    (tmp_path / "b.json").write_text('{"data": [[1, %s]]}' % cell)
    assert learn.main([str(tmp_path / "b.json"), "-o", str(tmp_path / "m.h5"), "-q"]) == 2
    assert f"b.json: row 1, column 2: {why}\n" in capsys.readouterr().err
