"""Console tools: text data files as a new user brings them (docs/cli.md, data files):
each reads to the same numbers, or is one clear error."""
from __future__ import annotations

import codecs
import warnings

import numpy as np
import pytest

from spnc.cli._table import read_text
from spnc.errors import DataError

WANT = [[0.5, 1250, -0.75], [1, 0.001, np.nan]]


@pytest.mark.parametrize("name, raw", [
    ("bom.csv", codecs.BOM_UTF8 + b"a,b,c\n0.5,1250,-0.75\n1,0.001,\n"),
    ("u16.csv", "a,b,c\r\n0.5,1250,-0.75\r\n1,0.001,\r\n".encode("utf-16")),
    ("crlf.csv", b"a,b,c\r\n0.5,1250,-0.75\r\n1,0.001,NaN\r\n"),
    ("cr.csv", b"a,b,c\r0.5,1250,-0.75\r1,0.001,?\r"),
    ("quoted.csv", b'"a","b","c"\n"0.5","1250","-0.75"\n"1","0.001",""\n'),
    ("sci.csv", b"a,b,c\n5e-1,1.25E+3,-7.5e-1\n+1,1e-3,nan\n"),
    ("blanks.csv", b"a , b ,c\n 0.5 , 1250,\t-0.75\n1 ,0.001 , \n"),
    ("semi.csv", b"sep=;\na;b;c\n.5;1250.;-.75\n1;0.001;NA\n"),
    ("bomc.csv", codecs.BOM_UTF8 + b"# a,b,c\n0.5,1250,-0.75\n1,0.001,\n"),
])
def test_common_spellings_read_to_the_same_numbers(tmp_path, name, raw):
    p = tmp_path / name
    p.write_bytes(raw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tab = read_text(str(p), expect=["a", "b", "c"])       # as spnc-eval reads it for a model
    assert tab.names == ["a", "b", "c"]
    np.testing.assert_array_equal(tab.X, WANT)


def test_a_data_line_ending_in_a_delimiter_says_so(tmp_path):
    # 'line 2 has 4 cells, the header has 3' left the user to find the empty fourth cell
    p = tmp_path / "x.tsv"
    p.write_text("a\tb\tc\n1\t2\t3\t\n")
    with pytest.raises(DataError, match=r"x\.tsv: line 2 has 4 cells, the header has 3 \(its last cell is empty: "
                                        r"does the line end with a delimiter\? Remove it\)$"):
        read_text(str(p))
    p.write_text("a\tb\tc\n1\t2\t3\t4\n")
    with pytest.raises(DataError, match=r"line 2 has 4 cells, the header has 3$"):
        read_text(str(p))


@pytest.mark.parametrize("encoding, raw", [
    ("utf-8", codecs.BOM_UTF8 + b"a,b\n1,0\n"),
    ("UTF8", codecs.BOM_UTF8 + b"a,b\n1,0\n"),
    ("utf-16-le", codecs.BOM_UTF16_LE + "a,b\n1,0\n".encode("utf-16-le")),
    ("utf-16-be", codecs.BOM_UTF16_BE + "a,b\n1,0\n".encode("utf-16-be")),
    ("utf-16", codecs.BOM_UTF16_BE + "a,b\n1,0\n".encode("utf-16-be")),
    ("utf-16-le", "a,b\n1,0\n".encode("utf-16-le")),
    ("utf-32-le", codecs.BOM_UTF32_LE + "a,b\n1,0\n".encode("utf-32-le")),
])
def test_a_given_encoding_drops_the_byte_order_mark(tmp_path, encoding, raw):
    # with --encoding utf-8 (or utf-16-le) the mark was read as the first name's first
    # character, '\ufeffa': no match with the model's 'a', and stored by spnc-learn
    p = tmp_path / "x.csv"
    p.write_bytes(raw)
    tab = read_text(str(p), encoding=encoding)
    assert tab.names == ["a", "b"] and tab.X.tolist() == [[1, 0]]


@pytest.mark.parametrize("encoding, codec", [("utf-16", "utf-16"), ("UTF16", "utf-16"), ("utf-32", "utf-32")])
def test_utf16_without_a_byte_order_mark_is_an_error_not_a_traceback(tmp_path, capsys, encoding, codec):
    # the stream decoder raised UnicodeError('UTF-16 stream does not start with BOM')
    from spnc.cli import learn
    p = tmp_path / "x.csv"
    p.write_bytes("a,b\n1,0\n0,1\n".encode(codec + "-le"))
    assert learn.main([str(p), "-o", str(tmp_path / "m.h5"), "-q", "--encoding", encoding]) == 2
    assert capsys.readouterr().err == (f"spnc-learn: error: {p}: does not start with a byte-order mark, which "
                                       f"--encoding {encoding} needs: give --encoding {codec}-le (as Windows "
                                       f"writes it) or {codec}-be\n")


@pytest.mark.parametrize("text, why", [
    # a number with a thousands separator in a comma file spreads over two cells
    ("a,b,c\n1,2,3\n1,234,2,3\n", "line 3 has 4 cells, the header has 3 (a thousands separator, as in 1,234? write "
                                  "numbers without one, 1234)"),
    ("a,b,c\n1,2,3\n-12,500.5,2,3\n", "line 3 has 4 cells, the header has 3 (a thousands separator, as in "
                                      "-12,500.5? write numbers without one, -12500.5)"),
    ("a,b,c\n1,0,1,1\n", "line 2 has 4 cells, the header has 3"),
    ("a;b;c\n1,234;2;3\n", "line 2 has 2 cells, the header has 1 (the header seems to use ';' as delimiter: give "
                          "--delimiter ';')"),
])
def test_a_line_of_more_cells_than_the_header_says_why(tmp_path, text, why):
    p = tmp_path / "x.csv"
    p.write_text(text)
    with pytest.raises(DataError) as e:
        read_text(str(p))
    assert str(e.value) == f"{p}: {why}"
