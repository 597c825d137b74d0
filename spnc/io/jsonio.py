"""JSON encoding of the spnc model format, isomorphic to the HDF5 one (formats/spnc-hdf5.md §6).

Group -> object, group attribute -> key ``"@name"``, root attribute -> top-level key, dataset
with a dtype fixed by the format -> plain array, any other dataset -> ``{"dtype", "data"}``.
Floats are written with Python's shortest round-trip ``repr`` and NaN/Infinity are refused,
so a file read back gives the same bits.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any

import numpy as np

from ..errors import FormatError
from ._spec import (DEFAULT_LIMITS, FIXED, GROUP_ATTRS, LEAF_DTYPES, PORTABLE, ROOT_ATTRS,
                    ROOT_ORDER, Group, Limits, err, leaf_param_dtype, norm_attr, np_dtype, read_at_most)
from ._validate import parse_json_strict
from .hdf5 import atomic_write

_INT_LIMITS = {c: (int(np.iinfo(c).min), int(np.iinfo(c).max))
               for c in ("u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8")}
#: integers of larger magnitude are written as decimal strings (spec J5)
SAFE_INT = 2**53 - 1
F4_MAX = float(np.finfo(np.float32).max)
_BIG_RE = re.compile(r"^-?[1-9][0-9]{15,19}$")
_FIXED_ATTRS = {**{k: kind for k, (kind, _) in ROOT_ATTRS.items()},
                **{f"{g}@{k}": kind for g, d in GROUP_ATTRS.items() for k, (kind, _) in d.items()}}


def _plain_dtype(parts: tuple[str, ...]) -> tuple[bool, str | None]:
    """(is the dataset at this path a plain array?, its fixed dtype if known)."""
    if len(parts) == 2 and parts[0] in FIXED and parts[1] in FIXED[parts[0]]:
        return True, FIXED[parts[0]][parts[1]][0]
    if len(parts) == 3 and parts[0] == "leaves" and parts[1] in LEAF_DTYPES:
        if parts[2] == "node":
            return True, "i8"
        return True, LEAF_DTYPES[parts[1]].get(parts[2])
    return False, None


def _fixed_attr(parts: tuple[str, ...], name: str) -> str | None:
    key = name if not parts else f"{'/'.join(parts)}@{name}"
    return _FIXED_ATTRS.get(key)


# ---------------------------------------------------------------------------- writing
def _dump(v: Any) -> str:
    try:
        return json.dumps(v, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        raise FormatError("NaN or Infinity cannot be written to JSON") from None


def _data_list(a: Any) -> Any:
    if isinstance(a, (list, str)):
        return a
    a = np.asarray(a)
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    v = a.tolist()
    if a.dtype.kind in "iu" and a.size and (a.max() > SAFE_INT or a.min() < -SAFE_INT):
        big = (lambda x: str(x) if abs(x) > SAFE_INT else x)
        v = [big(x) for x in v] if a.ndim else big(v)
    return v


def _code(a: Any) -> str:
    if isinstance(a, (list, str)):
        return "str"
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return "u1"
    code = f"{a.dtype.kind}{a.dtype.itemsize}"
    if code not in PORTABLE:
        raise FormatError(f"cannot store dtype {a.dtype} in JSON")
    return code


def _attr_json(parts: tuple[str, ...], name: str, v: Any) -> str:
    v = norm_attr(v)
    if isinstance(v, (str, list)):
        return _dump(v)
    if _fixed_attr(parts, name) == "version":
        return _dump(_data_list(v))
    return f'{{"dtype": {_dump(_code(v))}, "data": {_dump(_data_list(v))}}}'


def _emit(node: Group, parts: tuple[str, ...], indent: int, out: list[str]) -> None:
    pad = "  " * (indent + 1)
    items: list[str] = []
    if not parts:
        keys = [k for k in ROOT_ATTRS if k in node.attrs] + \
            sorted(k for k in node.attrs if k not in ROOT_ATTRS)
        items += [f"{pad}{_dump(k if k in ROOT_ATTRS else '@' + k)}: {_attr_json(parts, k, node.attrs[k])}"
                  for k in keys]
        mkeys = [k for k in ROOT_ORDER if k in node.members] + \
            sorted(k for k in node.members if k not in ROOT_ORDER)
    else:
        items += [f"{pad}{_dump('@' + k)}: {_attr_json(parts, k, node.attrs[k])}"
                  for k in sorted(node.attrs)]
        mkeys = _member_order(parts, node)
    for k in mkeys:
        m = node.members[k]
        if isinstance(m, Group):
            sub: list[str] = []
            _emit(m, parts + (k,), indent + 1, sub)
            items.append(f"{pad}{_dump(k)}: {''.join(sub)}")
        elif _plain_dtype(parts + (k,))[0]:
            items.append(f"{pad}{_dump(k)}: {_dump(_data_list(m))}")
        else:
            items.append(f'{pad}{_dump(k)}: {{"dtype": {_dump(_code(m))}, '
                         f'"data": {_dump(_data_list(m))}}}')
    if not items:
        out.append("{}")
        return
    out.append("{\n" + ",\n".join(items) + "\n" + "  " * indent + "}")


def _member_order(parts: tuple[str, ...], node: Group) -> list[str]:
    """Canonical member order: the spec's order for fixed groups, ``node`` first in leaf
    tables, otherwise sorted by name."""
    if len(parts) == 1 and parts[0] in FIXED:
        first = [k for k in FIXED[parts[0]] if k in node.members]
    elif len(parts) == 2 and parts[0] == "leaves":
        first = ["node"] if "node" in node.members else []
    else:
        first = []
    return first + sorted(k for k in node.members if k not in first)


def dumps_tree(tree: Group) -> str:
    """JSON text of a (validated) tree."""
    out: list[str] = []
    _emit(tree, (), 0, out)
    return "".join(out) + "\n"


def write_tree(tree: Group, path: str | os.PathLike) -> None:
    """Write a (validated) tree to a JSON file atomically."""
    text = dumps_tree(tree).encode("utf-8")

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(text)
    atomic_write(path, write)


# ---------------------------------------------------------------------------- reading
def _int(x: Any, path: str) -> int:
    """An integer token, an integral number (``2.0``) or a decimal string beyond 2^53 - 1."""
    if isinstance(x, bool) or x is None:
        raise err(path, "booleans and null are not numbers in this format")
    if isinstance(x, int):
        if abs(x) > SAFE_INT:
            raise err(path, f"integer {x} is beyond 2^53 - 1 and must be written as a string")
        return x
    if isinstance(x, float):
        if not (x == x and abs(x) <= SAFE_INT and x == int(x)):
            raise err(path, f"must hold integers, found {x!r}")
        return int(x)
    if isinstance(x, str):
        if not _BIG_RE.match(x) or abs(int(x)) <= SAFE_INT:
            raise err(path, f"string {x[:30]!r} is not an integer beyond 2^53 - 1")
        return int(x)
    raise err(path, f"must hold integers, found {type(x).__name__}")


def _real(x: Any, path: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise err(path, f"must hold numbers, found {type(x).__name__}")
    try:
        return float(x)
    except OverflowError:
        raise err(path, "holds numbers that do not fit in a double") from None


def _texts(vals: list, path: str) -> None:
    """JSON escapes can spell unpaired surrogates (``"\\ud800"``), which are not UTF-8 text (§2)."""
    for i, x in enumerate(vals):
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:
            where = path if len(vals) == 1 else f"{path}[{i}]"
            raise err(where, f"string {x!r} holds an unpaired surrogate escape: not UTF-8 text") from None


def _array(v: Any, code: str, path: str, scalar: bool = False) -> Any:
    """Decode a JSON array (or one value if ``scalar``) of dtype ``code``."""
    if scalar:
        vals = [v]
    elif not isinstance(v, list):
        raise err(path, f"must be an array, got {type(v).__name__}")
    else:
        vals = v
    if code == "str":
        if not all(isinstance(x, str) for x in vals):
            raise err(path, "must hold strings")
        _texts(vals, path)
        return vals[0] if scalar else list(vals)
    if code[0] in "iu":
        ints = [_int(x, path) for x in vals]
        lo, hi = _INT_LIMITS[code]
        if ints and (min(ints) < lo or max(ints) > hi):
            raise err(path, f"holds integers outside the range of {code} [{lo}, {hi}]")
        a = np.array(ints, dtype=np_dtype(code))
    else:
        a = np.array([_real(x, path) for x in vals], dtype=np.float64)
        if code == "f4":
            if (np.abs(a) > F4_MAX).any():
                raise err(path, f"holds numbers beyond the f4 range (±{F4_MAX!r})")
            a = a.astype(np.float32)
        if not np.isfinite(a).all():
            raise err(path, "holds numbers that are out of range")
    return a[0] if scalar else a


def _legacy_leaf_array(v: Any, path: str) -> Any:
    """1.0 rule for plain arrays of non-standard leaf tables: dtype from the tokens."""
    if not isinstance(v, list):
        raise err(path, f"must be an array, got {type(v).__name__}")
    name = path.rsplit("/", 1)[-1]
    ints = bool(v) and all(type(x) is int for x in v)
    return _array(v, leaf_param_dtype(name, ints), path)


def _typed(v: dict, path: str, attr: bool) -> Any:
    dt = v["dtype"]
    if dt not in PORTABLE:
        raise err(path, f"dtype {dt!r} is not one of {', '.join(PORTABLE)}")
    data = v["data"]
    if attr and not isinstance(data, list):
        return _array(data, dt, path, scalar=True)
    return _array(data, dt, path)


def _attr(v: Any, path: str, fixed: str | None) -> Any:
    if isinstance(v, dict):
        if fixed is None and set(v) == {"dtype", "data"}:
            return _typed(v, path, True)
        raise err(path, "attribute values are strings, arrays of strings or typed numbers")
    if isinstance(v, str):
        _texts([v], path)
        return v
    if isinstance(v, list):
        if any(isinstance(x, (list, dict)) for x in v):
            raise err(path, "attribute arrays must be flat")
        if fixed == "version":
            return _array(v, "u4", path)
        if all(isinstance(x, str) for x in v):
            _texts(v, path)
            return list(v)
        if fixed is not None:
            raise err(path, "must be an array of strings")
        ints = all(type(x) is int for x in v)        # 1.0 plain numeric form
        return _array(v, "i8" if ints else "f8", path)
    if fixed is None and not isinstance(v, bool) and isinstance(v, (int, float)):
        return _array(v, "i8" if type(v) is int else "f8", path, scalar=True)
    raise err(path, f"unsupported attribute value {type(v).__name__}")


def _group(obj: dict, parts: tuple[str, ...], depth: int, limits: Limits,
           count: list | None = None) -> Group:
    path = "/" + "/".join(parts)
    count = [0] if count is None else count
    if depth > limits.max_depth:
        raise err(path, "objects nested too deeply")
    g = Group()
    for k, v in obj.items():
        if k.startswith("@") or (not parts and not isinstance(v, dict)):
            name = k[1:] if k.startswith("@") else k
            apath = f"{path}@{name}" if parts else f"/@{name}"
            g.attrs[name] = _attr(v, apath, _fixed_attr(parts, name))
            continue
        mp = parts + (k,)
        mpath = "/" + "/".join(mp)
        count[0] += 1
        if count[0] > limits.max_objects:
            raise err(mpath, f"file holds more than {limits.max_objects} groups and datasets")
        plain, code = _plain_dtype(mp)
        if isinstance(v, dict) and set(v) == {"dtype", "data"}:
            if plain and code is not None:
                raise err(mpath, "datasets with a dtype fixed by the format are plain arrays")
            g.members[k] = _typed(v, mpath, False)
        elif plain and code is not None:
            g.members[k] = _array(v, code, mpath)
        elif isinstance(v, dict):
            g.members[k] = _group(v, mp, depth + 1, limits, count)
        elif isinstance(v, list) and len(mp) == 3 and mp[0] == "leaves":
            g.members[k] = _legacy_leaf_array(v, mpath)
        elif isinstance(v, list):
            raise err(mpath, 'datasets here need an explicit type: {"dtype": ..., "data": [...]}')
        else:
            raise err(mpath, f"unexpected {type(v).__name__} value")
    return g


def loads_tree(text: str | bytes, limits: Limits = DEFAULT_LIMITS, *, path: str = "") -> Group:
    """Parse JSON text into a tree (types decoded, not yet validated)."""
    if isinstance(text, bytes):
        if len(text) > limits.max_json_bytes:
            raise err(path, "JSON file is larger than the limit")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise err(path, f"not UTF-8 text: {e}") from None
    if not text.strip():
        raise err(path, "file is empty")
    obj = parse_json_strict(text, path)
    if not isinstance(obj, dict):
        raise err(path, "top level must be a JSON object")
    return _group(obj, (), 0, limits)


def read_tree(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS) -> Group:
    """Read a JSON model file into a tree (not yet validated)."""
    size = os.path.getsize(path)
    if size > limits.max_json_bytes:
        raise err(os.fspath(path), f"JSON file of {size} bytes is larger than the limit")
    with open(path, "rb") as f:
        data = read_at_most(f, limits.max_json_bytes)
    return loads_tree(data, limits, path=os.fspath(path))
