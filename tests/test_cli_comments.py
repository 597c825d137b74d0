"""Console tools: comment lines of text data (docs/cli.md, data files). A line starting
with '#' after the first row that reads as a data row but for the '#' (a first column of
IDs like '#5', or a row commented out) was skipped silently, so the tools scored and
learned on fewer rows than the file holds."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import spnc
from spnc import Bernoulli, Product
from spnc.cli import evaluate, learn
from spnc.cli._table import read_text
from spnc.errors import DataError


@pytest.fixture()
def model(tmp_path):
    spnc.save(spnc.compile(Product([Bernoulli(0, .3), Bernoulli(1, .6)]), var_names=["a", "b"]), tmp_path / "m.h5")
    return str(tmp_path / "m.h5")


def test_rows_starting_with_a_hash_are_named_in_a_warning(tmp_path, model, capsys):
    p = tmp_path / "d.csv"
    p.write_text("a,b\n1,0\n#5,1\n0,1\n#7,?\n")
    assert evaluate.main([model, str(p)]) == 0
    out, err = capsys.readouterr()
    assert "rows: 2 (0 with missing values)" in out
    assert (f"warning: {p}: 2 lines starting with '#' read as data rows but for the '#' (the first: line 3), "
            "and are skipped as comments: remove the '#' to read them (if '#5' is an ID, drop that column") in err
    assert err.count("warning") == 1
    assert learn.main([str(p), "-o", str(tmp_path / "l.h5"), "-q"]) == 0     # -q: no warning
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("text, delim, line", [
    ("a,b\n1,0\n# 1,1\n", None, 3),               # a row commented out
    ("1 0\n# 1 1\n0 1\n", "space", 2),           # '# 1 1' splits on blanks into three cells
    ("x\n1\n#2\n", None, 3),                      # one column
    ("a,b\n#1,0\n0,1\n", None, 2),                # between the header and the first row
    ("a,b\n1,0\n#x12,1\n", None, 3),              # an ID in letters
])
def test_one_commented_out_row_is_read_as_a_comment_with_a_warning(tmp_path, text, delim, line):
    p = tmp_path / "d.csv"
    p.write_text(text)
    with pytest.warns(UserWarning, match=f"line {line} starts with '#' but reads as a data row, and is skipped "
                                         "as a comment: remove the '#' to read it"):
        tab = read_text(str(p), delim)
    assert len(tab.X) == text.count("\n") - 1 - (tab.names is not None)


@pytest.mark.parametrize("text", [
    "# made by a script\n# 2 columns, 3 rows\na,b\n1,0\n0,1\n",        # a leading comment block
    "# a,b\n1,0\n0,1\n",                                                # np.savetxt's commented header
    "# 1,2\n1,0\n0,1\n",                                                # any comment before the first row
    "a,b\n1,0\n# the next rows are from 2024\n0,1\n# end\n",            # comments in words
    "a,b\n1,0\n#,\n#1\n# 1,2,3\n#x,y\n",                # all missing, not as wide as a row, or words
])
def test_other_comments_stay_silent(tmp_path, text):
    p = tmp_path / "d.csv"
    p.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tab = read_text(str(p), expect=["a", "b"] if text.startswith("# a") else None)
    assert tab.X.shape[1] == 2


def test_a_file_whose_rows_all_start_with_a_hash_says_so(tmp_path, model, capsys):
    p = tmp_path / "d.csv"
    p.write_text("a,b\n#1,0\n#2,1\n")
    assert evaluate.main([model, str(p)]) == 2
    assert ("d.csv: has a header but no data rows: 2 lines starting with '#' read as data rows but for the '#' "
            "(the first: line 2): remove the '#'") in capsys.readouterr().err
    p.write_text("#1,0,1\n#2,1,1\n")             # was: "no data rows (the file is empty)"
    with pytest.raises(DataError, match=r"d\.csv: no data rows: every line is blank or a comment \(starts with "
                                        r"'#'\); 2 lines starting with '#' read as data rows .*line 1\)"):
        read_text(str(p))
    p.write_text("# only\n\n# comments\n")
    with pytest.raises(DataError, match=r"no data rows: every line is blank or a comment \(starts with '#'\)$"):
        read_text(str(p))
    p.write_text("\n\n")
    with pytest.raises(DataError, match=r"no data rows \(the file is empty\)"):
        read_text(str(p))


def test_spreadsheet_values_starting_with_a_hash_stay_data(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("a,b\n1,0\n#N/A,1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(read_text(str(p)).X, [[1, 0], [np.nan, 1]])
