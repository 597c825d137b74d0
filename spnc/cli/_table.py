"""Reading data tables for the console tools, by the rules in docs/cli.md:

* CSV/TSV text (UTF-8, UTF-8 with BOM, UTF-16 or UTF-32 with BOM; ``--encoding`` for others), .npy,
  HDF5 (``--dataset``), Parquet (pandas + pyarrow), ``-`` = text on stdin;
* a header is taken only when every cell of the first row is a name (not a number and not a
  missing-value mark; not all True/False), or when ``--header`` says so; ``--no-header``
  forces data. A first row mixing numbers and text is a data row, and its text cell an
  error; a comment line of names just before a data row (``# a,b,c``, as np.savetxt writes
  a header) is the header; comment lines after the first row that read as data rows but
  for the ``#`` are named in a warning;
* errors name the file, the line (text files; comment and blank lines count) or row, and
  the column.
"""
from __future__ import annotations

import errno
import io
import itertools
import os
import re
import sys
from dataclasses import dataclass
from typing import NoReturn, Sequence

import numpy as np

from .. import stream
from .._text import check_unique
from .._warn import warn_user
from ..errors import DataError
from ._textlines import (_SHEET_ERRORS, _SHOW, MISSING, RowComments, _Comment, _decode, _isnum, _records,
                         _sep_line)

_INDEX_HINT = (": a column of row labels, as pandas' to_csv writes unless index=False? Drop that column "
               "(spnc would read the labels as data)")
_END_HINT = ": does each line end with a delimiter? Remove the last one of each line"
_CANDIDATES = (",", ";", "\t", "|", " ")


@dataclass
class Table:
    """A data matrix (float64, NaN = missing), its column names if the file had them, and
    where each row came from (for messages)."""
    X: np.ndarray
    names: list[str] | None
    path: str
    lines: np.ndarray | None = None     # 1-based file line of each row (text files)
    file_cols: np.ndarray | None = None     # the file's column of each column (None: the same)

    def where(self, r: int, c: int | None = None) -> str:
        """``path: line L, column C ('name')`` for row ``r`` / column ``c`` (0-based)."""
        pos = f"line {int(self.lines[r])}" if self.lines is not None else f"row {r + 1}"
        if c is None:
            return f"{self.path}: {pos}"
        fc = c if self.file_cols is None else int(self.file_cols[c])   # the file's, not the model's
        col = f"column {fc + 1}" + (f" ({self.names[c]!r})" if self.names else "")
        return f"{self.path}: {pos}, {col}"

    def trailing_hint(self) -> str:
        """A hint when the last column of a text file without header is missing on every
        line, as a delimiter at the end of each line makes it (no name says otherwise)."""
        X = self.X
        if self.lines is None or self.names is not None or X.ndim != 2 or X.shape[1] < 2 \
                or not np.isnan(X[:, -1]).all():
            return ""
        return (f" (column {X.shape[1]} is empty or missing on every line: does each line end with a "
                "delimiter?)")

    def take(self, cols: list[int], names: list[str] | None) -> "Table":
        fc = np.asarray(cols, dtype=np.int64) if self.file_cols is None else self.file_cols[cols]
        return Table(np.ascontiguousarray(self.X[:, cols]), names, self.path, self.lines, fc)


def delimiter_of(path: str, delimiter: str | None) -> str:
    if delimiter is not None:
        if delimiter == "":
            raise DataError("--delimiter must not be empty (give e.g. ',', ';', 'tab' or 'space')")
        return {"\\t": "\t", "tab": "\t", "space": " ", "whitespace": " "}.get(delimiter, delimiter)
    ext = os.path.splitext(path)[1].lower()
    return "\t" if ext in (".tsv", ".tab") else ","


def _delim_hint(cell: str, d: str) -> str:
    c = cell.strip()
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+", c):              # 1,234: thousands, or 1.234 with a decimal comma
        return (f" (a thousands separator or a decimal comma? numbers are read with a decimal point and no "
                f"separators: write {c.replace(',', '')} or {c.replace(',', '.')})" if c.count(",") == 1 else
                f" (thousands separators? numbers are read without them: write {c.replace(',', '')})")
    if re.fullmatch(r"[+-]?(\d{1,3}(\.\d{3})+|\d*),\d+([eE][+-]?\d+)?", c):    # 0,5 and 1.234,5
        return (" (a decimal comma? numbers are read with a decimal point: write "
                f"{c.replace('.', '').replace(',', '.')}, not {c})")
    if d != " " and re.fullmatch(r"[+-]?\d{1,3}([ \u00a0\u202f]\d{3})+([.,]\d+)?", c):     # 1 234,5 (French)
        return (f" (thousands separators{' and a decimal comma' * (',' in c)}? numbers are read with a decimal "
                f"point and no separators: write {''.join(c.split()).replace(',', '.')})")
    for cand in _CANDIDATES:
        if cand != d and cand in cell.strip():
            parts = [p for p in cell.strip().split(cand if cand != " " else None) if p.strip()]
            if len(parts) > 1 and all(p.strip() in MISSING or _isnum(p) for p in parts):
                return f" (the file seems to use {_SHOW.get(cand, repr(cand))} as delimiter: " \
                       f"give --delimiter {_SHOW.get(cand, repr(cand))})"
    return ""


def read_text(path: str, delimiter: str | None = None, header: bool | None = None,
              encoding: str | None = None, expect: Sequence[str] | None = None) -> Table:
    """Read a delimited text table (``path`` ``-`` is stdin). ``expect``: the column names
    the caller's model has; a first row of exactly those names (in any order) is a header
    even when some of them read as numbers, or an error asking for --header or --no-header
    where that row could be data as well."""
    d = delimiter_of(path, delimiter)
    if path == "-":
        raw, label = sys.stdin.buffer.read(), "<stdin>"
    else:
        with open(path, "rb") as f:
            raw = f.read()
        label = path
    enc, n_lines = _decode(raw, label, encoding)
    # decoded as a stream: a whole-file str (4 bytes per character in StringIO) is not kept
    inner_blank: list[int] = []       # a blank line before a row: a missing value of a 1-column file?
    lead: list[tuple[int, "_Comment"]] = []     # the comment lines before the first row
    text = io.TextIOWrapper(io.BytesIO(raw), encoding=enc, newline="")
    d, skip = _sep_line(text, d, delimiter is not None, label)
    later = RowComments()             # comment lines after the first row that read as data rows
    records = _records(text, d, label, inner_blank, lead, skip, later)
    first_rec = next(records, None)
    if first_rec is None:
        _no_rows(label, lead)
    line0, toks0 = first_rec
    first = [t.strip() for t in toks0]
    if expect is not None and any(n != n.strip() for n in expect) and sorted(toks0) == sorted(expect):
        first = list(toks0)        # the model's own names, blanks and all, as the tools write them
    commented = _commented_header(lead, first, expect) if header is None else None
    if commented is not None:          # '# a,b,c' as np.savetxt(header=...) writes it
        line0, first, header = commented[0], commented[1], True
        if expect is None:             # no model's names confirm it: say so (names get stored)
            warn_user(f"{label}: the comment on line {line0} is taken as the header (column names "
                      f"{', '.join(map(repr, first[:3]))}{', ...' if len(first) > 3 else ''}); give "
                      "--no-header to read it as a comment")
        records = itertools.chain([first_rec], records)
    if header is None and expect is not None and _names_of(first, expect):
        if not all(map(_is_name, first)):
            raise DataError(f"{label}: line {line0} holds the model's variable names, some of which read as "
                            "numbers (or missing values) too: give --header to take it as the header, "
                            "--no-header to take it as data")
        header = True
    if header is None and len(first) >= 3 and first == [str(j) for j in range(len(first))]:
        raise DataError(f"{label}: line {line0} reads 0, 1, ..., {len(first) - 1} like a header of "
                        "column numbers: give --header to take it as a header, --no-header as data")
    index_col = len(first) > 1 and not first[0] and all(map(_is_name, first[1:]))
    end_delim = len(first) > 1 and not first[-1] and all(map(_is_name, first[:-1]))
    if header is None and (index_col or end_delim):
        raise DataError(f"{label}: line {line0} is a header but for its empty "
                        + (f"first cell{_INDEX_HINT}" if index_col else f"last cell{_END_HINT}"))
    if header is None:
        header = _names_row(first)
    names = None
    if header:
        names = first
        for c, nm in enumerate(names):
            if not nm:
                raise DataError(f"{label}: line {line0}: header column {c + 1} has no name"
                                + (_INDEX_HINT if index_col and c == 0 else _END_HINT if end_delim else ""))
        check_unique(names, lambda nm, i, j: DataError(f"{label}: line {line0}: column name {nm!r} appears twice "
                                                       f"(columns {i + 1} and {j + 1})"))
        if len(names) == 1:
            hint = _delim_hint(names[0].replace(" ", ""), d) if any(x in names[0] for x in _CANDIDATES) else ""
            if hint:
                raise DataError(f"{label}: line {line0}: the header has one column "
                                f"{names[0][:40]!r}{hint}")
    else:
        records = itertools.chain([first_rec], records)
    width = len(names) if names else len(toks0)
    ref = f"the header has {width}" if names else f"line {line0} has {width}"
    # at most one row per line: fill a preallocated matrix block by block
    X = np.empty((n_lines, width))
    lines = np.empty(len(X), dtype=np.int64)
    n, block, per_block = 0, [], max(1, _BLOCK_CELLS // width)
    empty_from = None
    for ln, toks in records:
        if len(toks) != width:
            hint = _width_hint(toks, width, names, d)
            raise DataError(f"{label}: line {ln} has {len(toks)} cell{'s' * (len(toks) != 1)}, {ref}{hint}")
        if toks[0].strip() or any(map(str.strip, toks)):
            empty_from = None
        elif empty_from is None:               # a run of lines of empty cells, at the end it may stay
            empty_from = (n + len(block), ln)
        block.append(toks)
        lines[n + len(block) - 1] = ln
        if len(block) == per_block:
            X[n:n + len(block)] = _numbers(block, lines[n:n + len(block)], names, label, d, n == 0)
            n, block = n + len(block), []
    if block:
        X[n:n + len(block)] = _numbers(block, lines[n:n + len(block)], names, label, d, n == 0)
        n += len(block)
    if n == 0:
        raise DataError(f"{label}: has a header but no data rows"
                        + (f": {later.what()}" if later.count else ""))
    if width == 1 and inner_blank:
        raise DataError(f"{label}: line {inner_blank[0]} is blank: in a one-column file that may be a missing "
                        "value or nothing; write NaN or ? for a missing value, or delete the line")
    if later.count:
        warn_user(f"{label}: {later.what(skipped=True)}")
    if empty_from is not None and width > 1:
        _empty_tail(label, n - empty_from[0], empty_from[1])
    if n < len(X) // 2:                            # many blank or comment lines: give memory back
        X, lines = X[:n].copy(), lines[:n].copy()
    else:
        X, lines = X[:n], lines[:n]
    return Table(X, names, label, lines)


def _width_hint(toks: list[str], width: int, names: list[str] | None, d: str) -> str:
    """A guess at why a line has ``len(toks)`` cells where ``width`` were expected."""
    hint = _delim_hint(toks[0], d) if len(toks) == 1 else ""
    if not hint and names is not None and width == 1:     # 'a;b' read as one name
        cand = next((c for c in _CANDIDATES[1:] if c != d and c in names[0].strip()), None)
        hint = "" if cand is None else f" (the header seems to use {_SHOW.get(cand, repr(cand))} as " \
            f"delimiter: give --delimiter {_SHOW.get(cand, repr(cand))})"
    if hint:
        return hint
    if len(toks) == width + 1 and not toks[-1].strip():
        return " (its last cell is empty: does the line end with a delimiter? Remove it)"
    if len(toks) > width and d == ",":                         # 1,234 split in two cells
        for a, b in zip(toks, toks[1:]):
            if re.fullmatch(r"\s*[+-]?\d{1,3}", a) and re.fullmatch(r"\d{3}(\.\d*)?\s*", b):
                return (f" (a thousands separator, as in {a.strip()},{b.strip()}? write numbers without one, "
                        f"{a.strip()}{b.strip()})")
    return ""


def _empty_tail(label: str, count: int, line: int) -> None:
    """Warn of the last ``count`` rows, from line ``line``, whose every cell is empty: as a
    spreadsheet writes rows below the data that were once formatted (',,,'), they read as
    rows with every value missing and count in a mean log-likelihood."""
    what = (f"line {line}, the last, has every cell empty: read as a row" if count == 1 else
            f"the last {count} lines (from line {line}) have every cell empty: read as rows")
    one = count == 1
    warn_user(f"{label}: {what} with every value missing (a spreadsheet's empty row{'' if one else 's'}?): "
              f"delete {'it unless it is' if one else 'them unless they are'} data (NaN cells mark a row meant "
              "to be all missing, without this warning)")


def _no_rows(label: str, lead: list[tuple[int, _Comment]]) -> NoReturn:
    """The error for a text file without a data row: empty, or all comments."""
    if not lead:
        raise DataError(f"{label}: no data rows (the file is empty)")
    rows = RowComments()
    for k, com in lead:
        rows.note(k, com, len(com.raw))
    raise DataError(f"{label}: no data rows: every line is blank or a comment (starts with '#')"
                    + (f"; {rows.what()}" if rows.count else ""))


def _commented_header(lead: list[tuple[int, "_Comment"]], first: list[str],
                      expect: Sequence[str] | None) -> tuple[int, list[str]] | None:
    """The comment line just before the first row as ``(line, names)`` when it is the
    header: it holds the model's variable names (``expect``), or it has one name per
    column (at least two) while the first row is data. Else None (a comment). A model's
    names of which the first begins with ``#`` (as spnc-eval writes them) match the line
    as written."""
    if not lead:
        return None
    ln, com = lead[-1]
    cells = com.cells
    if len(cells) != len(first) or _names_row(first) or (expect is not None and _names_of(first, expect)):
        return None                    # the first row is the header (or may be: the rules below)
    if expect is not None:
        for named in (cells, com.raw):
            if _names_of(named, expect):
                return ln, named
    if len(cells) >= 2 and len(set(cells)) == len(cells) and all(map(_is_name, cells)):
        return ln, cells
    return None


def _is_name(cell: str) -> bool:
    """A header cell: neither a number nor a missing-value mark."""
    return cell not in MISSING and not _isnum(cell)


def _names_row(cells: list[str]) -> bool:
    """Whether a first row is a header by its cells: all names, not all booleans (a
    headerless file of True/False cells, as pandas writes a bool column)."""
    return all(map(_is_name, cells)) and not all(c.lower() in ("true", "false") for c in cells)


def _names_of(cells: list[str], names: Sequence[str]) -> bool:
    """Whether ``cells`` (as read) are ``names``, stripped or exactly, in some order."""
    return len(cells) == len(names) and sorted(cells) in (sorted(n.strip() for n in names), sorted(names))


_BLOCK_CELLS = 1 << 18       # cells parsed at once (their Python strings are ~50 bytes each)


def _numbers(rows: list[list[str]], lines: np.ndarray, names: list[str] | None, label: str, d: str,
             first_block: bool) -> np.ndarray:
    """One block of cells as float64 (NaN = missing); the first bad cell is an error."""
    width = len(rows[0])
    flat = ["nan" if t.strip() in MISSING else t for toks in rows for t in toks]
    if "_" not in "".join(flat):        # numpy, as Python, reads '3_2' as 32: a typo or a code, not a number
        try:
            return np.array(flat, dtype=np.float64).reshape(len(rows), width)
        except ValueError:
            pass
    for r, toks in enumerate(rows):               # locate the bad cell
        for c, t in enumerate(toks):
            s = t.strip()
            if s in MISSING:
                continue
            try:
                float(s)
                if "_" not in s:
                    continue
                hint = " (digits joined by '_' are not read as a number)"
            except ValueError:
                hint = _delim_hint(s, d) or (
                    " (a spreadsheet error value: fix its formula, or write NaN for a missing value)"
                    if s in _SHEET_ERRORS else
                    " (a boolean: write 1 and 0, as df.astype(int).to_csv() does for a bool column"
                    + ("; give --header if the row is a header)" if r == 0 and first_block and not names else ")")
                    if s.lower() in ("true", "false") else
                    " (the first row mixes names and numbers: give --header if it is a header)"
                    if r == 0 and first_block and not names else
                    " (use NaN, ? or an empty cell for missing values)")
            col = f"column {c + 1}" + (f" ({names[c]!r})" if names else "")
            raise DataError(f"{label}: line {lines[r]}, {col}: {s[:40]!r} is not a number{hint}")
    # numpy refused a spelling float() accepts
    return np.array([[float(t) if t.strip() not in MISSING else np.nan for t in toks] for toks in rows])


def read_table(path: str, *, dataset: str | None = None, delimiter: str | None = None,
               header: bool | None = None, encoding: str | None = None,
               expect: Sequence[str] | None = None) -> Table:
    """Any supported data file as a :class:`Table` with at least one row and column
    (``expect``: the model's variable names, see :func:`read_text`)."""
    tab = _read_any(path, dataset, delimiter, header, encoding, expect)
    if tab.X.shape[0] == 0:
        raise DataError(f"{tab.path}: no data rows")
    if tab.X.shape[1] == 0:
        raise DataError(f"{tab.path}: no columns")
    return tab


def _read_any(path: str, dataset: str | None, delimiter: str | None, header: bool | None,
              encoding: str | None, expect: Sequence[str] | None = None) -> Table:
    if path != "-":                   # 'file.h5:/path' and Zarr stores (spnc.stream)
        if not dataset:
            path, dataset = stream.split_spec(path)
        if path.rstrip("/").lower().endswith(".zarr"):    # with --dataset too (was read as text)
            return Table(stream.load(f"{path}:{dataset}" if dataset else path), None, path)
    ext = os.path.splitext(path)[1].lower()
    if path != "-" and not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    if ext in (".npy", ".h5", ".hdf5", ".parquet", ".pq"):
        from ._arrayfiles import read_array_file
        return read_array_file(path, ext, dataset)
    if ext == ".json":               # as the tools write data (was read as CSV text)
        from ._jsondata import read_json_table
        return read_json_table(path)
    return read_text(path, delimiter, header, encoding, expect)
