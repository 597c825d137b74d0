"""Console tools: text tables as spreadsheets and other programs write them (docs/cli.md,
data files): their error and not-available cells are never read as something else."""
from __future__ import annotations

import numpy as np
import pytest

from spnc.cli._table import read_text


@pytest.mark.parametrize("delim", [",", " "])
def test_a_row_starting_with_a_spreadsheet_na_is_a_row_not_a_comment(tmp_path, delim):
    # Excel writes #N/A for a lookup that found nothing; the line was skipped as a comment
    p = tmp_path / "x.csv"
    p.write_text(delim.join("abc") + "\n" + "\n".join(delim.join(r) for r in
                                                      (["#N/A", "1", "0"], ["0", "1", "1"], ["#NA", "0", "#N/A"])) + "\n")
    tab = read_text(str(p), "space" if delim == " " else delim)
    assert tab.names == ["a", "b", "c"]
    np.testing.assert_array_equal(tab.X, [[np.nan, 1, 0], [0, 1, 1], [np.nan, 0, np.nan]])
    assert tab.lines.tolist() == [2, 3, 4]


def test_a_spreadsheet_error_value_is_named_not_skipped(tmp_path):
    from spnc.errors import DataError
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,0\n#DIV/0!,1\n")
    with pytest.raises(DataError, match=r"line 3, column 1 \('a'\): '#DIV/0!' is not a number \(a spreadsheet"):
        read_text(str(p))
    p.write_text("a,b\n# a comment\n1,0\n#,1\n")           # comments stay comments
    with pytest.warns(UserWarning, match="line 4 starts with '#' but reads as a data row"):
        assert read_text(str(p)).X.tolist() == [[1, 0]]


@pytest.mark.parametrize("sep", [";", ",", "\t", "|"])
def test_a_spreadsheet_sep_line_names_the_delimiter(tmp_path, sep):
    # Excel reads a first line 'sep=;' as the delimiter and writes it into some exports;
    # it was taken as a one-column header, with errors about the data or a trailing delimiter
    p = tmp_path / "x.csv"
    p.write_text(f"sep={sep}\n" + "\n".join(sep.join(r) for r in (["a", "b", "c"], ["1", "0", "?"], ["0", "x", "1"]))
                 + "\n")
    from spnc.errors import DataError
    with pytest.raises(DataError, match=r"x\.csv: line 4, column 2 \('b'\): 'x' is not a number"):
        read_text(str(p))           # line numbers count the sep= line
    p.write_text(p.read_text().replace("x", "1"))
    tab = read_text(str(p))
    assert tab.names == ["a", "b", "c"] and tab.lines.tolist() == [3, 4]
    np.testing.assert_array_equal(tab.X, [[1, 0, np.nan], [0, 1, 1]])
    if sep != ",":                  # a --delimiter that contradicts it is an error
        with pytest.raises(DataError, match=r"line 1 .*sep=.* --delimiter ','"):
            read_text(str(p), ",")


def test_true_and_false_cells_say_to_write_1_and_0(tmp_path):
    from spnc.errors import DataError
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,0\n0,True\n")          # pandas' to_csv of a bool column
    with pytest.raises(DataError, match=r"line 3, column 2 \('b'\): 'True' is not a number \(a boolean: write 1 "
                                        r"and 0"):
        read_text(str(p))


@pytest.mark.parametrize("text", ["True,False\n0,1\n1,0\n", "True\n0\n1\n", "True,False,True\nFalse,True,True\n"])
def test_a_first_row_of_booleans_is_data_not_a_header(tmp_path, capsys, text):
    # a headerless file of True/False cells (pandas' to_csv(header=False) of bool columns):
    # its first row was taken as names, so a row was lost silently ('True,False' above 0/1
    # rows), or the error blamed a name 'True' appearing twice
    from spnc.cli import evaluate, learn
    p = tmp_path / "x.csv"
    p.write_text(text)
    assert learn.main([str(p), "-o", str(tmp_path / "m.h5"), "-q"]) == 2
    assert ("x.csv: line 1, column 1: 'True' is not a number (a boolean: write 1 and 0, as df.astype(int).to_csv() "
            "does for a bool column; give --header if the row is a header)\n") in capsys.readouterr().err
    if "0" in text:
        assert learn.main([str(p), "-o", str(tmp_path / "m.h5"), "-q", "--header"]) == 0
        assert evaluate.main([str(tmp_path / "m.h5"), str(p), "-q"]) == 0     # the model's names: a header
        capsys.readouterr()


@pytest.mark.parametrize("cell, delim, why", [
    # a German spreadsheet's 1.234,5 was told "the file seems to use ',' as delimiter"
    ("1.234,5", ";", "a decimal comma? numbers are read with a decimal point: write 1234.5, not 1.234,5"),
    ("-0,25", ";", "a decimal comma? numbers are read with a decimal point: write -0.25, not -0,25"),
    ('"0,5"', ",", "a decimal comma? numbers are read with a decimal point: write 0.5, not 0,5"),
    # 1,234 was called a decimal comma only; quoted in a comma file, a missing value
    ("1,234", ";", "a thousands separator or a decimal comma? numbers are read with a decimal point and no "
                   "separators: write 1234 or 1.234"),
    ('"1,234"', ",", "a thousands separator or a decimal comma?"),
    ("1,234,567", ";", "thousands separators? numbers are read without them: write 1234567"),
    ("1 234", ";", "thousands separators? numbers are read with a decimal point and no separators: write 1234"),
    ("1\u00a0234,5", ";", "thousands separators and a decimal comma? numbers are read with a decimal point and no "
                          "separators: write 1234.5"),
])
def test_locale_number_formats_say_how_to_write_the_number(tmp_path, cell, delim, why):
    from spnc.errors import DataError
    p = tmp_path / "x.csv"
    p.write_text(f"a{delim}b\n1{delim}2\n{cell}{delim}3\n")
    with pytest.raises(DataError) as e:
        read_text(str(p), delim)
    assert f"is not a number ({why}" in str(e.value), str(e.value)


def test_empty_rows_at_the_end_are_named_in_a_warning(tmp_path, capsys):
    # a spreadsheet writes rows below the data that were once formatted as ',,': they read
    # as rows with every value missing, each of log-likelihood 0, and the mean printed by
    # spnc-eval was silently half the data's
    import warnings

    import spnc
    from spnc import Bernoulli, Product
    from spnc.cli import evaluate
    spnc.save(spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)]), var_names=["a", "b"]), tmp_path / "m.h5")
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,0\n0,1\n,\n,\n")
    assert evaluate.main([str(tmp_path / "m.h5"), str(p)]) == 0
    out, err = capsys.readouterr()
    assert "rows: 4 (2 with missing values)" in out
    assert err == (f"spnc-eval: warning: {p}: the last 2 lines (from line 4) have every cell empty: read as rows "
                   "with every value missing (a spreadsheet's empty rows?): delete them unless they are data (NaN "
                   "cells mark a row meant to be all missing, without this warning)\n")
    p.write_text('a,b\n1,0\n"",\n')
    with pytest.warns(UserWarning, match=r"line 3, the last, has every cell empty: read as a row with every value "
                                         r"missing \(a spreadsheet's empty row\?\): delete it unless it is data"):
        assert read_text(str(p)).X.shape == (2, 2)
    for text in ("a,b\n1,0\n,\n0,1\n", "a,b\n1,0\nNaN,\n", "a,b\n1,0\n?,?\n"):    # within the data; marked
        p.write_text(text)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert np.isnan(read_text(str(p)).X).all(axis=1).sum() == 1
