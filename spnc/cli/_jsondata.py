"""Reading back the JSON data the tools write (``--out s.json``, ``--mpe m.json``):
``{"columns": [names] or null, "data": [[cell, ...], ...]}``, a cell a number, ``null``
(missing) or ``"inf"``/``"-inf"``; the tokens ``NaN`` (missing) and ``Infinity``, as
Python's ``json.dumps`` writes a float NaN and infinity, read as the same values in CSV
text. Positions in errors count from 1, as for .npy files."""
from __future__ import annotations

import json
import math

import numpy as np

from .._text import check_unique, counted
from ..errors import DataError
from ._textlines import MISSING

_SHAPE = 'an object {"columns": [names] or null, "data": [[row], ...]}, as spnc-eval --out FILE.json writes'
_WORDS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def read_json_table(path: str):
    """The table of a JSON data file (see the module docstring)."""
    from ._table import Table
    try:
        with open(path, "rb") as f:
            # every number a float: a huge integer is inf, as in CSV text (int() overflowed)
            obj = json.loads(f.read().decode("utf-8-sig"), parse_int=float)
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: JSON data must be UTF-8 text ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise DataError(f"{path}: JSON nested too deeply to be data ({_SHAPE})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        raise DataError(f"{path}: JSON data must be {_SHAPE}")
    rows, names = obj["data"], obj.get("columns")
    if not rows:
        raise DataError(f"{path}: no data rows")
    width = len(rows[0]) if isinstance(rows[0], list) else -1
    X = np.empty((len(rows), max(width, 0)))
    for r, row in enumerate(rows):
        if not isinstance(row, list):
            raise DataError(f"{path}: row {r + 1} of \"data\" is {json.dumps(row)[:40]}, not a list of values")
        if len(row) != width:
            raise DataError(f"{path}: row {r + 1} of \"data\" has {counted(len(row), 'value')}, row 1 {width}")
        for c, v in enumerate(row):
            if v is None:
                X[r, c] = math.nan
            elif isinstance(v, float):           # NaN (missing) and +-Infinity too
                X[r, c] = v
            elif isinstance(v, str) and v in _WORDS:
                X[r, c] = _WORDS[v]
            else:
                raise DataError(f"{path}: row {r + 1}, column {c + 1}: {_not_a_number(v)}")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(names) != width:
            raise DataError(f"{path}: \"columns\" must be null or a list of {width} names, one per column")
        check_unique(names, lambda nm, i, j: DataError(f"{path}: column name {nm!r} appears twice "
                                                       f"(columns {i + 1} and {j + 1})"))
    return Table(X, names, path)


def _not_a_number(v) -> str:
    """Why the JSON data value ``v`` (not a number, not null) is refused."""
    shown = repr(v)[:40]
    if isinstance(v, str):
        try:
            x = float(v)
        except ValueError:
            x = None
        if v.strip() in MISSING or (x is not None and x != x):
            return f"{shown} is a string: write null for a missing value"
        if x is not None:
            return (f'{shown} is a string: write "inf" or "-inf" for an infinite value' if math.isinf(x) else
                    f"{shown} is a string, not a number: write it without quotes")
    return f"{shown} is not a number (null for missing)"
