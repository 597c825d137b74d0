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
    assert read_text(str(p)).X.tolist() == [[1, 0]]
