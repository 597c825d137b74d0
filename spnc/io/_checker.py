"""Dataset, attribute and free-group checks shared by the file validator (spec §7)."""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from .._validation import kind_name as _kind_name  # noqa: F401  (one naming of kinds)
from ..errors import FormatError
from ._spec import (NAME_RE, PORTABLE, Group, Limits, dtype_code, err,
                    norm_attr, np_dtype)


def parse_json_strict(text: str, path: str) -> Any:
    """json.loads refusing NaN/Infinity and duplicate keys."""
    def bad_constant(tok: str) -> Any:
        raise err(path, f"{tok} is not allowed (not valid JSON)")

    def pairs(kv: list) -> dict:
        d: dict = {}
        for k, v in kv:
            if k in d:
                raise err(path, f"duplicate key {k!r}")
            d[k] = v
        return d
    try:
        return json.loads(text, parse_constant=bad_constant, object_pairs_hook=pairs)
    except FormatError:
        raise
    except RecursionError:
        raise err(path, "JSON nested too deeply") from None
    except ValueError as e:   # JSONDecodeError, int conversion limits
        raise err(path, f"invalid JSON: {e}") from None


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _fmt(v: Any) -> str:
    return repr(v.item()) if isinstance(v, np.generic) else repr(v)


class _Checker:
    def __init__(self, limits: Limits):
        self.limits = limits
        self.total = 0

    # ---- datasets ---------------------------------------------------------------------
    def info(self, obj: Any, path: str) -> tuple[tuple, str | None, str]:
        if isinstance(obj, Group):
            raise err(path, "is a group, expected a dataset")
        if isinstance(obj, list):
            return (len(obj),), "str", ""
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind == "O":
                return obj.shape, None, "object dtype"
            return obj.shape, dtype_code(obj.dtype), f"dtype {obj.dtype}"
        return tuple(obj.shape), obj.code, obj.why

    def dataset(self, g: Group, gpath: str, name: str, code: str | None, *,
                length: int | None = None, why: str = "", required: bool = True) -> Any:
        """Check and read one 1-D dataset; ``code=None`` accepts any portable dtype."""
        path = f"{gpath}/{name}"
        if name not in g.members:
            if required:
                raise err(path, "required dataset is missing")
            return None
        obj = g.members[name]
        shape, dc, desc = self.info(obj, path)
        if len(shape) != 1:
            raise err(path, f"must be a 1-D dataset, got shape {shape}")
        if dc is None or dc not in PORTABLE:
            raise err(path, f"has a non-portable type ({desc or 'unknown'})")
        if code is not None and dc != code:
            raise err(path, f"has dtype {dc}, expected {code}")
        n = int(shape[0])
        if n > self.limits.max_elements:
            raise err(path, f"declares {n} elements, above the limit of {self.limits.max_elements}")
        if length is not None and n != length:
            raise err(path, f"has length {n}, expected {length}{why}")
        self.total += n
        if self.total > self.limits.max_total_elements:
            raise err(path, f"file declares more than {self.limits.max_total_elements} elements in total")
        if isinstance(obj, list):
            data: Any = obj
        elif isinstance(obj, np.ndarray):
            data = obj
        else:
            data = obj.read()
        if dc == "str":
            data = list(data)
            if not all(isinstance(s, str) for s in data):
                raise err(path, "string dataset holds non-string values")
            if any("\x00" in s for s in data):        # §2: UTF-8 without NUL (HDF5 could not hold it)
                raise err(path, "string holds a NUL character")
            return data
        data = np.ascontiguousarray(data, dtype=np_dtype(dc))
        if data.shape != (n,):
            raise err(path, f"read shape {data.shape} differs from declared ({n},)")
        return data

    def shape_of(self, g: Group, gpath: str, name: str) -> int:
        path = f"{gpath}/{name}"
        if name not in g.members:
            raise err(path, "required dataset is missing")
        shape, _, _ = self.info(g.members[name], path)
        if len(shape) != 1:
            raise err(path, f"must be a 1-D dataset, got shape {shape}")
        return int(shape[0])

    # ---- value checks -----------------------------------------------------------------
    @staticmethod
    def in_range(a: np.ndarray, path: str, lo: int, hi: int, what: str = "") -> None:
        if a.size == 0:
            return
        bad = (a < lo) | (a >= hi)
        if bad.any():
            i = _first(bad)
            raise err("", f"{path}[{i}] = {int(a[i])} is out of range [{lo}, {hi}){what}")

    def ptr(self, p: np.ndarray, path: str, flat_len: int, flat_path: str) -> None:
        if p.size == 0:
            raise err(path, "pointer array is empty (must have length n + 1)")
        if p[0] != 0:
            raise err("", f"{path}[0] = {int(p[0])}, expected 0")
        d = np.diff(p)
        if (d < 0).any():
            i = _first(d < 0)
            raise err("", f"{path}[{i + 1}] = {int(p[i + 1])} is smaller than {path}[{i}] = {int(p[i])}")
        if p[-1] != flat_len:
            raise err("", f"{path}[{p.size - 1}] = {int(p[-1])} does not match the length "
                          f"{flat_len} of {flat_path}")

    @staticmethod
    def finite(a: np.ndarray, path: str) -> None:
        bad = ~np.isfinite(a)
        if bad.any():
            i = _first(bad)
            raise err("", f"{path}[{i}] = {_fmt(a[i])} is not finite")

    def str_storage(self, vals: list[str], apath: str) -> None:
        if len(vals) > self.limits.max_attr_elements:
            raise err(apath, "attribute has too many elements")
        width = max([1] + [len(x.encode("utf-8")) for x in vals])
        if width * max(len(vals), 1) > self.limits.max_attr_bytes:
            raise err(apath, f"string attribute needs more than {self.limits.max_attr_bytes} bytes")
        if any("\x00" in x for x in vals):
            raise err(apath, "string holds a NUL character")

    def attr(self, attrs: dict, path: str, name: str, kind: str, required: bool) -> Any:
        apath = f"{path}@{name}" if path != "/" else f"/@{name}"
        if name not in attrs:
            if required:
                raise err(apath, "required attribute is missing")
            return None
        v = attrs[name]
        if kind == "str":
            if not isinstance(v, str):
                raise err(apath, f"must be a string, got {type(v).__name__}")
            self.str_storage([v], apath)
        elif kind == "strs":
            if not (isinstance(v, list) and all(isinstance(s, str) for s in v)):
                raise err(apath, "must be a list of strings")
            self.str_storage(v, apath)
        elif kind == "version":
            try:
                v = norm_attr(v)
            except FormatError:
                v = None
            if not (isinstance(v, np.ndarray) and v.shape == (3,) and dtype_code(v.dtype) in
                    ("u4", "u1", "u2", "u8", "i1", "i2", "i4", "i8") and (v >= 0).all()):
                raise err(apath, f"must be three non-negative integers (u4[3]), got {v!r}")
            if dtype_code(v.dtype) != "u4" and v[0] == 1:
                raise err(apath, f"must have dtype u4, got {dtype_code(v.dtype)}")
            v = v.astype(np.uint32)
        return v

    def free_attrs(self, attrs: dict, path: str) -> dict:
        out = {}
        for k, v in attrs.items():
            apath = f"{path}@{k}" if path != "/" else f"/@{k}"
            if not NAME_RE.match(k):
                raise err(apath, "invalid attribute name")
            try:
                v = norm_attr(v)
            except FormatError as e:
                raise err(apath, str(e)) from None
            if isinstance(v, str):
                self.str_storage([v], apath)
            elif isinstance(v, list):
                self.str_storage(v, apath)
            else:
                a = np.asarray(v)
                if a.ndim > 1 or dtype_code(a.dtype) is None:
                    raise err(apath, f"unsupported attribute of dtype {a.dtype} and shape {a.shape}")
                if a.size > self.limits.max_attr_elements:
                    raise err(apath, "attribute has too many elements")
                if a.dtype.kind == "f" and not np.isfinite(a).all():
                    raise err(apath, "holds a value that is not finite")
                v = a.astype(a.dtype.newbyteorder("="), copy=False)
                v = v if v.ndim else v[()]
            out[k] = v
        return out

    def free_group(self, g: Any, path: str, depth: int, allow_groups: bool) -> Group:
        """A group whose datasets may have any portable dtype (stats, learner, x_*)."""
        if not isinstance(g, Group):
            raise err(path, "must be a group")
        if depth > self.limits.max_depth:
            raise err(path, "groups nested too deeply")
        if len(g.members) > self.limits.max_members:
            raise err(path, f"has {len(g.members)} members, above the limit")
        out = Group(self.free_attrs(g.attrs, path))
        for name, m in g.members.items():
            mpath = f"{path}/{name}"
            if not NAME_RE.match(name) or name in ("dtype", "data"):
                raise err(mpath, "invalid or reserved member name")
            if isinstance(m, Group):
                if not allow_groups:
                    raise err(mpath, "sub-groups are not allowed here")
                out.members[name] = self.free_group(m, mpath, depth + 1, True)
            else:
                out.members[name] = self.free_dataset(g, path, name)
        return out

    def free_dataset(self, g: Group, gpath: str, name: str) -> Any:
        """A dataset of any portable dtype (finite if real)."""
        mpath = f"{gpath}/{name}"
        if not NAME_RE.match(name) or name in ("dtype", "data"):
            raise err(mpath, "invalid or reserved member name")
        a = self.dataset(g, gpath, name, None)
        if not isinstance(a, list) and a.dtype.kind == "f":
            self.finite(a, mpath)
        return a
