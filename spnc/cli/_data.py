"""Data for the console tools: reading (see ``_table``), matching columns to a model's
variables, column types, and atomic output files (``-`` = stdout)."""
from __future__ import annotations

import csv
import io
import json
import os
import re
from contextlib import contextmanager
from typing import Sequence

import numpy as np

from .. import stream
from .._atomic import atomic_write
from .._budget import MAX_INFERRED_STATES
from .._text import counted, lookalike_hint
from ..errors import DataError
from . import write_stdout
from ._table import MISSING, Table, delimiter_of, read_table  # noqa: F401  (re-exported)

OUT_EXT = (".npy", ".csv", ".tsv", ".txt", ".json")
TYPE_NAMES = {"b": "binary", "c": "categorical", "r": "real"}


def match_columns(tab: Table, var_names: Sequence[str] | None, n_vars: int,
                  by_position: bool = False) -> Table:
    """The table's columns in the model's variable order.

    When both the file and the model have names they must be the same set (any order);
    otherwise, or with ``by_position``, columns are taken by position and their number must
    equal the number of variables."""
    names = tab.names
    if names is not None and var_names is not None and not by_position:
        vn = list(var_names)
        if names == vn:
            return tab
        # a text header's cells are read stripped: model names with spaces around them (as
        # spnc-eval writes them) are matched stripped when that keeps them apart
        plain = {v.strip(): v for v in vn}
        if len(plain) == len(vn) and set(names) != set(vn) and set(names) == set(plain):
            names = [plain[c] for c in names]
            tab = Table(tab.X, names, tab.path, tab.lines)
        have, want = set(names), set(vn)
        missing = [v for v in vn if v not in have]
        extra = [c for c in names if c not in want]
        if missing or extra:
            parts = []
            if missing:
                parts.append("missing " + ", ".join(map(repr, missing[:5])) + (" ..." if len(missing) > 5 else ""))
            if extra:
                parts.append("unknown " + ", ".join(map(repr, extra[:5])) + (" ..." if len(extra) > 5 else ""))
            raise DataError(f"{tab.path}: the header does not match the model's variables ("
                            + "; ".join(parts) + "); give --by-position to use the columns in order"
                            + lookalike_hint(missing, extra))
        col = {c: j for j, c in enumerate(names)}
        return tab.take([col[v] for v in vn], vn)
    if tab.X.shape[1] != n_vars:
        raise DataError(f"{tab.path}: data has {counted(tab.X.shape[1], 'column')}, the model has "
                        f"{counted(n_vars, 'variable')}{tab.trailing_hint()}")
    return tab


def _file_of(path: str) -> str:
    """The lower-cased file (or Zarr store) of a data argument, without ``:/dataset``."""
    return stream.split_spec(path)[0].rstrip("/").lower()


def check_dataset(dataset: str | None, *paths: str | None, flag: str = "--dataset") -> None:
    """Refuse ``--dataset`` when no data file it applies to has datasets (HDF5 or Zarr):
    it would be ignored without a word (docs/cli.md: nothing is guessed silently)."""
    if not dataset:
        return
    given = [p for p in paths if p is not None]
    if any(p != "-" and _file_of(p).endswith((".h5", ".hdf5", ".zarr")) for p in given):
        return
    where = "no data file is given" if not given else \
        f"{', '.join('stdin' if p == '-' else p for p in given)} {'is' if len(given) == 1 else 'are'} not"
    raise DataError(f"{flag} {dataset!r} names a dataset inside an HDF5 (.h5, .hdf5) or Zarr data file, but "
                    f"{where}{' one' if given else ''}; drop {flag}")


_NOT_TEXT = (".npy", ".h5", ".hdf5", ".zarr", ".parquet", ".pq", ".json")


def check_text_options(args, *paths: str | None) -> None:
    """Refuse ``--header``/``--no-header``/``--delimiter``/``--encoding`` when no data file
    they apply to is text (CSV, TSV, stdin): they would be ignored without a word."""
    given = [f"--{'no-' if args.header is False else ''}header"] if getattr(args, "header", None) is not None else []
    given += [f"--{k}" for k in ("delimiter", "encoding") if getattr(args, k, None) is not None]
    files = [p for p in paths if p is not None]
    if not given or any(p == "-" or not _file_of(p).endswith(_NOT_TEXT) for p in files):
        return
    raise DataError(f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} to text data (CSV, TSV), "
                    f"but {', '.join(files) or 'no data file'} {'is' if len(files) == 1 else 'are'} not text "
                    f"(.npy, HDF5, Zarr, Parquet and JSON data say their own layout); drop "
                    f"{'it' if len(given) == 1 else 'them'}")


def check_stdin(*paths: str | None) -> None:
    """Standard input holds one data file: refuse ``-`` for two of them (the second read
    found it empty)."""
    if list(paths).count("-") > 1:
        raise DataError("only one data file can be read from standard input (-)")


def model_rows(model, tab: Table, row0: int = 0, complete: str | None = None) -> np.ndarray:
    """The rows of ``tab`` (in the model's variable order) checked by the model, errors
    pointing at the file, line and column (``row0``: the table's first row in the file).
    With ``complete`` (what needs it), a missing value is an error too."""
    try:
        X = model._check_X(tab.X)
    except DataError as e:
        m = re.match(r"X\[(\d+), (\d+)\] = (.*)", str(e))
        if m:
            raise DataError(f"{tab.where(row0 + int(m.group(1)), int(m.group(2)))}: {m.group(3)}") from None
        raise DataError(f"{tab.path}: {e}") from None
    if complete is not None and X.size and np.isnan(X).any():
        r, c = (int(v) for v in np.argwhere(np.isnan(X))[0])
        raise DataError(f"{tab.where(row0 + r, c)}: missing value; {complete} needs complete data")
    return X


_API_ROW = re.compile(r"^(?:(X|X_valid) row (\d+)|row (\d+) of (X|X_valid)|row (\d+)(?=[: ])"
                      r"|(X|X_valid)\[(\d+), (\d+)\])")


@contextmanager
def rows_of_files(**tabs: Table | None):
    """A :class:`DataError` of the Python API that begins by naming a row of an input
    (``X row 3``, ``X_valid[3, 1]``, ``row 3 of X``, ``row 3:``; numpy's 0-based indices)
    re-raised naming that row as the tools do: the file, its line (text) or 1-based row."""
    try:
        yield
    except DataError as e:
        msg = str(e)
        m = _API_ROW.match(msg)
        if m is None:
            raise
        g = m.groups()
        name, r, c = ((g[0], g[1], None) if g[0] else (g[3], g[2], None) if g[2] else
                      ("X", g[4], None) if g[4] else (g[5], g[6], g[7]))
        tab = tabs.get(name)
        if tab is None or int(r) >= len(tab.X) or (c is not None and int(c) >= tab.X.shape[1]):
            raise
        rest = msg[m.end():]
        if c is not None:
            rest = ":" + rest[2:] if rest.startswith(" = ") else rest
            raise DataError(tab.where(int(r), int(c)) + rest) from None
        raise DataError(tab.where(int(r)) + rest) from None


# ---------------------------------------------------------------------------- types
def infer_types(X: np.ndarray) -> list[str]:
    """Per column: 'b' (only 0/1), 'c' (non-negative integers below MAX_INFERRED_STATES)
    or 'r' (anything else). Missing values are ignored."""
    out = []
    for j in range(X.shape[1]):
        v = X[:, j]
        v = v[~np.isnan(v)]
        if v.size and np.all((v == 0) | (v == 1)):
            out.append("b")
        elif v.size and np.all(np.isfinite(v)) and np.all(v == np.round(v)) and v.min() >= 0 \
                and v.max() < MAX_INFERRED_STATES:
            out.append("c")
        else:
            out.append("r")
    return out


def parse_types(spec: str, d: int) -> list[str]:
    """``--types``: one letter for all columns, or a comma list of d letters (b binary,
    c categorical, r or g real), or those d letters run together ('bbcr')."""
    one = spec.strip().lower()
    if "," not in spec and len(one) > 1 and set(one) <= set("bcrg"):
        one = ",".join(one)          # 'bbcr', as spnc-learn --json reports the types
    toks = [t.strip().lower() for t in one.split(",")] if "," in one else [one]
    toks = ["r" if t in ("g", "real", "gaussian") else t[:1] if t in ("binary", "categorical") else t
            for t in toks]
    for t in toks:
        if t not in TYPE_NAMES:
            raise DataError(f"--types: unknown type {t!r}; use b (binary), c (categorical) or r (real)")
    if len(toks) == 1:
        return toks * d
    if len(toks) != d:
        raise DataError(f"--types gives {counted(len(toks), 'type')} for {counted(d, 'column')}")
    return toks


def describe_types(types: Sequence[str], names: Sequence[str] | None) -> str:
    """``6 binary, 1 real (column 7 'age')``-style summary."""
    parts = []
    for t in ("b", "c", "r"):
        cols = [j for j, x in enumerate(types) if x == t]
        if not cols:
            continue
        s = f"{len(cols)} {TYPE_NAMES[t]}"
        if len(cols) < len(types) and len(cols) <= 4:
            s += " (" + ", ".join(f"column {j + 1}" + (f" {names[j]!r}" if names else "") for j in cols) + ")"
        parts.append(s)
    return ", ".join(parts)


def check_types(tab: Table, types: Sequence[str]) -> None:
    """Values must fit their declared type (NaN = missing is fine)."""
    X = tab.X
    for j, t in enumerate(types):
        if t == "r":
            continue
        v = X[:, j]
        bad = ~np.isnan(v) & ((v != np.round(v)) | (v < 0) | ((v > 1) if t == "b" else False))
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            what = "0 or 1" if t == "b" else "a non-negative integer code"
            raise DataError(f"{tab.where(r, j)} has value {_num(v[r])}, but the column is "
                            f"{TYPE_NAMES[t]}: its values must be {what} (see --types)")


def _num(v) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else repr(v)


# ---------------------------------------------------------------------------- columns
def _column_tokens(spec: str) -> list[str]:
    """The comma-separated tokens of a column list, stripped, a name holding a comma quoted
    as in a CSV header ('"a,b",c'; a quote inside a quoted name is doubled). Blanks around
    a quoted name are dropped as around any other token (as a header's cells are read)."""
    if '"' not in spec:
        return [t.strip() for t in spec.split(",")]
    out, i, n = [], 0, len(spec)
    while True:
        while i < n and spec[i].isspace():
            i += 1
        if i < n and spec[i] == '"':
            parts, j = [], i + 1
            while True:
                k = spec.find('"', j)
                if k < 0:
                    raise DataError(f"column list {spec[:80]!r}: a quote is not closed (quote a name as in a "
                                    'CSV header: "a,b", a quote inside it doubled)')
                parts.append(spec[j:k])
                if not spec.startswith('"', k + 1):
                    break
                parts.append('"')
                j = k + 2
            tok, i = "".join(parts), k + 1
            while i < n and spec[i].isspace():
                i += 1
            if i < n and spec[i] != ",":
                raise DataError(f"column list {spec[:80]!r}: ',' expected after the quoted name {tok!r} (quote "
                                'a name as in a CSV header: "a,b", a quote inside it doubled)')
        else:
            k = spec.find(",", i)
            k = n if k < 0 else k
            tok, i = spec[i:k], k
        out.append(tok.strip())
        if i >= n:
            return out
        i += 1


def parse_columns(spec: str, var_names: Sequence[str] | None, n_vars: int) -> list[int]:
    """'0,2,5-7' or variable names 'age,income' -> sorted column indices; a name holding a
    comma is quoted as in CSV ('"a,b",c'). A token that is a name and also a number (names
    from integer column labels) must mean one column."""
    out: set[int] = set()
    names = list(var_names) if var_names is not None else []
    pos = {n: i for i, n in enumerate(names)}
    plain = {n.strip(): i for i, n in enumerate(names)}       # tokens are stripped, as headers are
    if len(plain) < len(names):
        plain = {}
    for tok in _column_tokens(spec):
        if not tok:
            continue
        i = pos.get(tok, plain.get(tok))
        if i is not None:
            if tok.isdigit() and int(tok) != i and int(tok) < n_vars:
                raise DataError(f"column {tok!r} is the name of variable {i} and the index of variable "
                                f"{int(tok)} ({names[int(tok)]!r}); rename the variables or use ranges "
                                f"({i}-{i} selects variable {i})")
            out.add(i)
            continue
        try:
            if "-" in tok[1:]:
                a, b = tok.split("-", 1)
                rng = range(int(a), int(b) + 1)
            else:
                rng = range(int(tok), int(tok) + 1)
        except ValueError:
            comma = next((n for n in names if "," in n and tok in (p.strip() for p in n.split(","))), None)
            quoted = "" if comma is None else '"' + comma.replace('"', '""') + '"'
            hint = "" if comma is None else \
                f"; to name variable {pos[comma]} ({comma!r}) quote it as in CSV ({quoted}) or give its index"
            raise DataError(f"column {tok!r} is neither a variable name nor an index{hint}") from None
        if not rng:
            raise DataError(f"column range {tok!r} is empty: give the lower index first ({b}-{a})")
        for c in rng:
            if not 0 <= c < n_vars:
                raise DataError(f"column {c} is out of range [0, {n_vars})")
            out.add(c)
    return sorted(out)


# ---------------------------------------------------------------------------- output
def check_output_name(path: str, flag: str) -> None:
    """Output data files: a known extension (or ``-`` for stdout)."""
    if path == "-":
        return
    ext = os.path.splitext(path)[1].lower()
    if ext not in OUT_EXT:
        raise DataError(f"{flag} {path}: unknown extension {ext!r}; use one of "
                        f"{', '.join(OUT_EXT)} (or - for standard output)")


def _text(X: np.ndarray, names: Sequence[str] | None, d: str, fmt: str) -> str:
    if fmt == "json":
        def cell(x: float):
            return None if x != x else (x if np.isfinite(x) else ("inf" if x > 0 else "-inf"))
        if X.ndim == 1:
            return json.dumps([cell(x) for x in X.tolist()]) + "\n"
        obj = {"columns": list(names) if names is not None else None,
               "data": [[cell(x) for x in row] for row in X.tolist()]}
        return json.dumps(obj) + "\n"
    rows = np.asarray(X, dtype=np.float64)
    rows = rows.reshape(len(rows), -1) if rows.ndim else rows.reshape(1, 1)
    # integer-valued columns (discrete samples, MPE states) as integers, others exactly (repr)
    whole = np.all(np.isfinite(rows) & (rows == np.round(rows)) & (np.abs(rows) < 2**53), axis=0)
    fmt = d.join("%d" if w else "%r" for w in whole) + "\n"
    buf = io.StringIO()
    if names is not None and X.ndim == 2:     # quoted where a name holds the delimiter, a quote or a line end
        # csv quotes a name holding a character of its line terminator: "\r" too only with "\r\n"
        head = io.StringIO()
        csv.writer(head, delimiter=d, lineterminator="\r\n").writerow(names)
        buf.write(head.getvalue()[:-2] + "\n")
    if rows.shape[1] == 0:
        buf.write("\n" * len(rows))
        return buf.getvalue()
    cols = [rows[:, j].astype(np.int64).tolist() if w else rows[:, j].tolist() for j, w in enumerate(whole)]
    buf.writelines(fmt % r for r in zip(*cols))
    return buf.getvalue()


def write_table(path: str, X: np.ndarray, names: Sequence[str] | None = None) -> None:
    """Write a matrix or vector atomically as .npy, .json, or CSV/TSV text (shortest exact
    float repr); ``-`` writes CSV to stdout."""
    X = np.asarray(X)
    if path == "-":
        write_stdout(_text(X, names, ",", "csv"))
        return
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:
                np.save(f, X)
    else:
        body = _text(X, names, delimiter_of(path, None), "json" if ext == ".json" else "csv").encode("utf-8")

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:
                f.write(body)
    atomic_write(path, write)


def output_format(path: str) -> str | None:
    """The model format a file name asks for (``"hdf5"``, ``"json"``, ``"dot"``), or None
    for another extension, so a tool that writes models says which ones it writes."""
    from ..errors import FormatError
    from ..io import format_of
    try:
        return format_of(path)
    except FormatError:
        return None
