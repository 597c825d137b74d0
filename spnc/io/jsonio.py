"""JSON encoding of the spnc model format, isomorphic to the HDF5 one (formats/spnc-hdf5.md §6).

Group -> object, group attribute -> key ``"@name"``, root attribute -> top-level key, dataset
with a dtype fixed by the format -> plain array, any other dataset -> ``{"dtype", "data"}``.
Floats are written with Python's shortest round-trip ``repr`` and NaN/Infinity are refused,
so a file read back gives the same bits.
"""
from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ..errors import FormatError
from ..leaves import base as leaf_base
from ._spec import (DEFAULT_LIMITS, FIXED, PORTABLE, ROOT_ATTRS, ROOT_ORDER, Group, Limits,
                    err, leaf_param_dtype, np_dtype)
from ._validate import parse_json_strict
from .hdf5 import atomic_write

_INT_LIMITS = {c: (int(np.iinfo(c).min), int(np.iinfo(c).max))
               for c in ("u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8")}


def _plain_dtype(parts: tuple[str, ...]) -> tuple[bool, str | None]:
    """(is the dataset at this path a plain array?, its fixed dtype if known)."""
    if len(parts) == 2 and parts[0] in FIXED and parts[1] in FIXED[parts[0]]:
        return True, FIXED[parts[0]][parts[1]][0]
    if len(parts) == 3 and parts[0] == "leaves" and not parts[1].startswith("x_") \
            and not parts[2].startswith("x_"):
        return True, None
    return False, None


# ---------------------------------------------------------------------------- writing
def _dump(v: Any) -> str:
    try:
        return json.dumps(v, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:
        raise FormatError("NaN or Infinity cannot be written to JSON") from None


def _data_list(a: Any) -> list:
    if isinstance(a, list):
        return a
    a = np.asarray(a)
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    return a.tolist()


def _code(a: Any) -> str:
    if isinstance(a, list):
        return "str"
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return "u1"
    code = f"{a.dtype.kind}{a.dtype.itemsize}"
    if code not in PORTABLE:
        raise FormatError(f"cannot store dtype {a.dtype} in JSON")
    return code


def _emit(node: Group, parts: tuple[str, ...], indent: int, out: list[str]) -> None:
    pad = "  " * (indent + 1)
    items: list[str] = []
    if not parts:
        keys = [k for k in ROOT_ATTRS if k in node.attrs] + \
            sorted(k for k in node.attrs if k not in ROOT_ATTRS)
        items += [f"{pad}{_dump(k)}: {_dump(node.attrs[k])}" for k in keys]
        mkeys = [k for k in ROOT_ORDER if k in node.members] + \
            sorted(k for k in node.members if k not in ROOT_ORDER)
    else:
        items += [f"{pad}{_dump('@' + k)}: {_dump(node.attrs[k])}" for k in sorted(node.attrs)]
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
def _array(v: Any, code: str | None, path: str, leaf: str | None = None) -> Any:
    if not isinstance(v, list):
        raise err(path, f"must be an array, got {type(v).__name__}")
    types = set(map(type, v))
    if code is None:   # leaf-table dataset: dtype from the name and the numbers
        want = getattr(_leaf_cls(leaf), "param_dtypes", None) if leaf else None
        name = path.rsplit("/", 1)[-1]
        if want and name in want and name != "node":
            code = want[name]
        else:
            code = leaf_param_dtype(name, bool(v) and types <= {int})
    if code == "str":
        if not types <= {str}:
            raise err(path, "must be an array of strings")
        return list(v)
    if bool in types:
        raise err(path, "booleans are not numbers in this format")
    if code[0] in "iu":
        if not types <= {int}:
            raise err(path, f"must hold integers ({code}), found {sorted(t.__name__ for t in types)}")
        lo, hi = _INT_LIMITS[code]
        try:
            a = np.array(v, dtype=np_dtype(code))
        except (OverflowError, ValueError, TypeError):
            raise err(path, f"holds integers outside the range of {code} [{lo}, {hi}]") from None
        return a
    if not types <= {int, float}:
        raise err(path, f"must hold numbers, found {sorted(t.__name__ for t in types)}")
    try:
        a = np.array(v, dtype=np.float64)
    except (OverflowError, ValueError, TypeError):
        raise err(path, "holds numbers that do not fit in a double") from None
    if code == "f4":
        with np.errstate(over="ignore"):
            a = a.astype(np.float32)
    if not np.isfinite(a).all():
        raise err(path, "holds numbers that are out of range")
    return a


def _leaf_cls(name: str | None) -> Any:
    try:
        return leaf_base.leaf_type_by_name(name) if name else None
    except FormatError:
        return None


def _attr(v: Any, path: str) -> Any:
    if isinstance(v, dict):
        raise err(path, "attribute values must be strings, numbers or arrays of them")
    if isinstance(v, list) and any(isinstance(x, (list, dict)) for x in v):
        raise err(path, "attribute arrays must be flat")
    return v


def _group(obj: dict, parts: tuple[str, ...], depth: int, limits: Limits) -> Group:
    path = "/" + "/".join(parts)
    if depth > limits.max_depth:
        raise err(path, "objects nested too deeply")
    g = Group()
    for k, v in obj.items():
        if not parts and not isinstance(v, dict):
            g.attrs[k] = _attr(v, f"/@{k}")
            continue
        if parts and k.startswith("@"):
            g.attrs[k[1:]] = _attr(v, f"{path}@{k[1:]}")
            continue
        mp = parts + (k,)
        mpath = "/" + "/".join(mp)
        plain, code = _plain_dtype(mp)
        if plain:
            leaf = mp[1] if mp[0] == "leaves" else None
            g.members[k] = _array(v, code, mpath, leaf)
        elif isinstance(v, dict) and set(v) == {"dtype", "data"} and mp[0] != "leaves":
            dt = v["dtype"]
            if dt not in PORTABLE:
                raise err(mpath, f"dtype {dt!r} is not one of {', '.join(PORTABLE)}")
            g.members[k] = _array(v["data"], dt, mpath)
        elif isinstance(v, dict):
            g.members[k] = _group(v, mp, depth + 1, limits)
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
        data = f.read(limits.max_json_bytes + 1)
    return loads_tree(data, limits, path=os.fspath(path))
