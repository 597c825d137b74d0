"""Constants of the spnc model format v1 (formats/spnc-hdf5.md) and the in-memory tree that
both encodings (HDF5, JSON) are read into and written from.

A file is a tree of :class:`Group` objects. A group has ``attrs`` (str, int, float, or a
1-D list of ints / strs) and ``members`` (name -> :class:`Group` or dataset). A dataset is a
1-D numpy array with a portable dtype, or a ``list[str]`` for UTF-8 string datasets.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Union

import numpy as np

from ..errors import FormatError
from .._validation import MAX_NAME_BYTES

FORMAT = "spnc-model"
VERSION = (1, 1, 0)

#: node kind codes fixed by the format; leaf codes (>= 2) come from the leaf registry
SUM, PRODUCT = 0, 1
#: leaf types defined by the format; other registered types need a "leaf:<name>" feature
BUILTIN_LEAVES = {"bernoulli": 2, "categorical": 3, "gaussian": 4, "mvgaussian": 5,
                  "cltree": 6, "indicator": 7}
#: parameter datasets (and dtypes) of the standard leaf tables (spec §5.1)
LEAF_DTYPES: dict[str, dict[str, str]] = {
    "bernoulli": {"p": "f8"},
    "categorical": {"prob_ptr": "i8", "prob": "f8"},
    "gaussian": {"mean": "f8", "std": "f8"},
    "mvgaussian": {"mean_ptr": "i8", "mean": "f8", "cov_ptr": "i8", "cov": "f8"},
    "cltree": {"parent_ptr": "i8", "parent": "i4", "cpt_ptr": "i8", "cpt": "f8"},
    "indicator": {"value": "i4"},
}
#: kind codes: 8..127 reserved for later standard types, 128..255 file-local vendor types
VENDOR_CODES = range(128, 256)
VENDOR_NAME_RE = re.compile(r"^x_[a-z0-9]+_[a-z0-9_]+$")
FEATURE_RE = re.compile(r"^leaf:[a-z0-9_]+$")
#: normalisation tolerance tau of spec §5.2
TOL = 1e-6
VAR_BINARY, VAR_CATEGORICAL, VAR_REAL = 0, 1, 2
COMBINE = ("single", "mixture", "independent")

#: dtypes a dataset may have (little-endian on disk); "str" is UTF-8 text
PORTABLE = ("u1", "u2", "u4", "u8", "i1", "i2", "i4", "i8", "f4", "f8", "str")

#: datasets whose dtype the format fixes: group -> name -> (dtype, required)
FIXED: dict[str, dict[str, tuple[str, bool]]] = {
    "variables": {"type": ("u1", True), "cardinality": ("i4", True), "name": ("str", False)},
    "nodes": {"kind": ("u1", True), "scope_ptr": ("i8", True), "scope": ("i4", True)},
    "edges": {"ptr": ("i8", True), "child": ("i8", True), "weight": ("f8", True)},
    "roots": {"node": ("i8", True), "weight": ("f8", False)},
    "fallback": {"node": ("i8", True), "target": ("i8", True)},
}
#: attributes of known groups: group -> name -> (kind, required); kind "str" | "strs"
GROUP_ATTRS: dict[str, dict[str, tuple[str, bool]]] = {
    "nodes": {"kind_names": ("strs", True)},
    "roots": {"combine": ("str", True)},
    "learner": {"name": ("str", True), "version": ("str", False), "params": ("str", False)},
}
#: root attributes: name -> (kind, required)
ROOT_ATTRS: dict[str, tuple[str, bool]] = {
    "format": ("str", True), "format_version": ("version", True),
    "required_features": ("strs", True), "optional_features": ("strs", False),
    "content_hash": ("str", False), "creator": ("str", False),
    "created": ("str", False), "model_uuid": ("str", False), "source_format": ("str", False),
}
#: canonical order of root members (others: sorted, after these)
ROOT_ORDER = ("variables", "nodes", "edges", "roots", "leaves", "fallback", "stats", "learner")
#: root attributes and members added by format 1.1 (errors in a 1.0 file)
NEW_IN_1_1 = {"optional_features", "content_hash", "fallback"}
#: root attributes the content hash skips (provenance, and the hash itself)
HASH_SKIP = ("content_hash", "creator", "created", "model_uuid", "source_format")
REQUIRED_GROUPS = ("variables", "nodes", "edges", "roots", "leaves")
#: groups whose datasets have free dtypes (stored with their dtype in JSON)
FREE_GROUPS = ("stats", "learner")

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")


@dataclasses.dataclass(frozen=True)
class Limits:
    """Sizes a reader accepts; checked from declared shapes before any data is read."""

    max_nodes: int = 2**31 - 2
    max_vars: int = 2**24
    max_elements: int = 2**28          # per dataset
    max_total_elements: int = 2**29    # all datasets of one file
    max_members: int = 4096            # per group
    max_objects: int = 16384           # groups and datasets in one file
    max_depth: int = 8                 # group nesting (x_ extensions)
    max_attr_elements: int = 4096
    max_attr_bytes: int = 60000        # storage of one string attribute
    max_name_bytes: int = MAX_NAME_BYTES   # one variable name
    max_json_bytes: int = 2**32
    weight_tol: float = TOL


DEFAULT_LIMITS = Limits()

Dataset = Union[np.ndarray, list]


class Group:
    """One HDF5 group / JSON object: attributes plus named members."""

    __slots__ = ("attrs", "members")

    def __init__(self, attrs: dict[str, Any] | None = None,
                 members: dict[str, Any] | None = None):
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.members: dict[str, Any] = dict(members or {})

    def __repr__(self) -> str:
        return f"Group(attrs={sorted(self.attrs)}, members={list(self.members)})"


def dtype_code(dt: np.dtype) -> str | None:
    """Portable dtype code of a numpy dtype (any byte order), or None."""
    dt = np.dtype(dt)
    if dt.names is not None or dt.subdtype is not None:
        return None
    if dt.kind in "iuf" and dt.itemsize in (1, 2, 4, 8):
        code = f"{dt.kind}{dt.itemsize}"
        return code if code in PORTABLE else None
    return None


def np_dtype(code: str) -> np.dtype:
    """Native numpy dtype for a numeric code."""
    return np.dtype(code).newbyteorder("=")


def leaf_param_dtype(name: str, values_are_int: bool) -> str:
    """Dtype rule for leaf-table datasets: node and *_ptr are i8, other integers i4, reals f8."""
    if name == "node" or name.endswith("_ptr"):
        return "i8"
    return "i4" if values_are_int else "f8"


def err(path: str, msg: str) -> FormatError:
    return FormatError(f"{path}: {msg}" if path else msg)


def trees_equal(a: Any, b: Any) -> bool:
    """Exact comparison of two trees (dtypes, bits of floats, attribute values)."""
    if isinstance(a, Group) or isinstance(b, Group):
        if not (isinstance(a, Group) and isinstance(b, Group)):
            return False
        if set(a.attrs) != set(b.attrs) or set(a.members) != set(b.members):
            return False
        return (all(_attr_equal(a.attrs[k], b.attrs[k]) for k in a.attrs)
                and all(trees_equal(a.members[k], b.members[k]) for k in a.members))
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and a == b
    a, b = np.asarray(a), np.asarray(b)
    return (a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=") and a.shape == b.shape
            and a.tobytes() == b.astype(a.dtype).tobytes())


def norm_attr(v: Any) -> Any:
    """An attribute value in tree form: ``str``, ``list[str]``, a numpy scalar or a 1-D numpy
    array (numbers keep their dtype). Python ints/floats get the 1.0 defaults i8/f8."""
    if isinstance(v, (str, np.generic)) or (isinstance(v, np.ndarray) and v.dtype.kind != "O"):
        return v
    if isinstance(v, bool):
        raise FormatError("boolean attributes are not portable; use u1")
    if isinstance(v, int):
        return np.int64(v)
    if isinstance(v, float):
        return np.float64(v)
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, str) for x in v):
            return list(v)
        if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in v):
            raise FormatError(f"attribute list mixes types or holds {sorted({type(x).__name__ for x in v})}")
        return np.asarray(v, dtype=np.int64 if all(isinstance(x, int) for x in v) else np.float64)
    raise FormatError(f"unsupported attribute value {type(v).__name__}")


def _attr_equal(x: Any, y: Any) -> bool:
    try:
        x, y = norm_attr(x), norm_attr(y)
    except FormatError:
        return False
    if isinstance(x, (str, list)) or isinstance(y, (str, list)):
        return type(x) is type(y) and x == y
    if isinstance(x, np.ndarray) != isinstance(y, np.ndarray):
        return False
    x, y = np.asarray(x), np.asarray(y)
    return (x.dtype.newbyteorder("=") == y.dtype.newbyteorder("=") and x.shape == y.shape
            and x.tobytes() == y.astype(x.dtype).tobytes())


def read_at_most(f: Any, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes of the binary file ``f``, read in pieces: a single
    ``f.read(limit + 1)`` allocates that much at once (4 GiB for a JSON model), which fails
    under an address-space limit (``ulimit -v``) even for a tiny file."""
    parts: list[bytes] = []
    total = 0
    while total <= limit:
        b = f.read(min(1 << 24, limit + 1 - total))
        if not b:
            break
        parts.append(b)
        total += len(b)
    return b"".join(parts)
