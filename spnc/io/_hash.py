"""Content hash of a file tree (formats/spnc-hdf5.md §11): SHA-256 over canonical records."""
from __future__ import annotations

import hashlib
import struct
from typing import Any

import numpy as np

from ._spec import HASH_SKIP, Group, dtype_code, norm_attr

PREFIX = "sha256:"


def _strings(values: list[str]) -> bytes:
    parts = []
    for s in values:
        b = s.encode("utf-8")
        parts.append(struct.pack("<I", len(b)) + b)
    return b"".join(parts)


def _record(h: Any, tag: bytes, path: str, code: str, n: int, payload: bytes) -> None:
    p = path.encode("utf-8")
    h.update(tag + struct.pack("<I", len(p)) + p + struct.pack("<B", len(code))
             + code.encode("ascii") + struct.pack("<Q", n) + payload)


def _value(v: Any) -> tuple[str, int, bytes]:
    """(dtype code, element count, payload) of a dataset or attribute value."""
    if isinstance(v, str):
        return "str", 1, _strings([v])
    if isinstance(v, list):
        return "str", len(v), _strings(v)
    a = np.asarray(v)
    code = dtype_code(a.dtype)
    if code is None:
        raise ValueError(f"cannot hash dtype {a.dtype}")
    le = a.astype(a.dtype.newbyteorder("<"), copy=False).ravel()
    return code, le.size, le.tobytes()


def _walk(h: Any, g: Group, path: str) -> None:
    _record(h, b"g", path, "", 0, b"")
    at = path if path != "/" else "/"
    for name in sorted(g.attrs, key=lambda k: k.encode("utf-8")):
        if path == "/" and name in HASH_SKIP:
            continue
        v = norm_attr(g.attrs[name])
        code, n, payload = _value(v)
        scalar = isinstance(v, (str, np.generic))
        _record(h, b"s" if scalar else b"a", f"{at}@{name}", code, n, payload)
    for name in sorted(g.members, key=lambda k: k.encode("utf-8")):
        m = g.members[name]
        mpath = f"{path.rstrip('/')}/{name}"
        if isinstance(m, Group):
            _walk(h, m, mpath)
        else:
            code, n, payload = _value(m)
            _record(h, b"d", mpath, code, n, payload)


def content_hash(tree: Group) -> str:
    """``"sha256:<hex>"`` of a fully read tree."""
    h = hashlib.sha256()
    _walk(h, tree, "/")
    return PREFIX + h.hexdigest()
