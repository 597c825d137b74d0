"""HDF5 encoding of the spnc model format (formats/spnc-hdf5.md).

Writing goes through a temporary file in the target directory that is fsynced and then
renamed over the target, so a failed save never damages an existing file. Reading walks the
file without following soft/external links, checks every object's type, rank and declared
size, and hands lazy dataset handles to the shared validator, which reads each dataset only
after its declared shape has been checked.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import h5py
import numpy as np

from .._atomic import atomic_write  # noqa: F401  (re-exported for io)
from ..errors import FormatError
from ._spec import DEFAULT_LIMITS, Group, Limits, dtype_code, err, norm_attr

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
#: datasets with at least this many elements are chunked and compressed
COMPRESS_MIN = 4096
CHUNK_BYTES = 1 << 20
#: longest string attribute a writer emits (HDF5 keeps attributes in a 64 KiB header)
MAX_ATTR_BYTES = 60000


def _fixed_str(values: list[str], what: str) -> tuple[np.ndarray, Any]:
    """Fixed-length, NUL-padded UTF-8 strings: no global heap, readable from C/Fortran/MATLAB."""
    enc = [v.encode("utf-8") for v in values]
    if any(b"\x00" in b for b in enc):
        raise err(what, "strings must not contain NUL characters")
    width = max([1] + [len(b) for b in enc])
    dt = h5py.string_dtype("utf-8", width)
    return np.array(enc, dtype=dt), dt


# ---------------------------------------------------------------------------- writing
def _write_attr(obj: Any, name: str, v: Any) -> None:
    if name == "format_version" and isinstance(v, (list, tuple)):
        v = np.asarray(v, dtype=np.uint32)
    v = norm_attr(v)
    if isinstance(v, str):
        data, dt = _fixed_str([v], name)
        if data.itemsize > MAX_ATTR_BYTES:
            raise err(name, f"string attribute longer than {MAX_ATTR_BYTES} bytes")
        obj.attrs.create(name, data[0], dtype=dt)
    elif isinstance(v, list):   # strings, including the empty list
        data, dt = _fixed_str(v, name)
        if data.nbytes > MAX_ATTR_BYTES:
            raise err(name, f"string attribute longer than {MAX_ATTR_BYTES} bytes")
        obj.attrs.create(name, data, shape=(len(v),), dtype=dt)
    else:
        a = np.asarray(v)
        code = dtype_code(a.dtype)
        if code is None or a.ndim > 1:
            raise err(name, f"cannot store attribute of dtype {a.dtype} and shape {a.shape}")
        dt = np.dtype(code).newbyteorder("<") if a.dtype.itemsize > 1 else np.dtype(code)
        obj.attrs.create(name, a.astype(dt), shape=a.shape, dtype=dt)


def _write_dataset(g: h5py.Group, name: str, a: Any) -> None:
    if isinstance(a, list):
        data, dt = _fixed_str(a, name)
        g.create_dataset(name, shape=(len(a),), dtype=dt, data=data if a else None)
        return
    a = np.asarray(a)
    if a.dtype == np.bool_:
        a = a.astype(np.uint8)
    code = dtype_code(a.dtype)
    if code is None or a.ndim != 1:
        raise err(name, f"cannot store array of dtype {a.dtype} and shape {a.shape}")
    dt = np.dtype("<" + code) if a.dtype.itemsize > 1 else np.dtype(code)
    a = np.ascontiguousarray(a, dtype=dt)
    if a.size >= COMPRESS_MIN:
        chunk = max(1, min(a.size, CHUNK_BYTES // a.dtype.itemsize))
        g.create_dataset(name, data=a, chunks=(chunk,), compression="gzip",
                         compression_opts=4, shuffle=True, fletcher32=True)
    elif a.size:
        # small data: one chunk, checksum only, so a flipped byte is still a read error
        g.create_dataset(name, data=a, chunks=(a.size,), fletcher32=True)
    else:
        g.create_dataset(name, data=a)


def _write_group(g: h5py.Group, node: Group) -> None:
    for k, v in node.attrs.items():
        _write_attr(g, k, v)
    for k, m in node.members.items():
        if isinstance(m, Group):
            _write_group(g.create_group(k), m)
        else:
            _write_dataset(g, k, m)


def write_tree(tree: Group, path: str | os.PathLike) -> None:
    """Write a (validated) tree to an HDF5 file atomically."""
    def write(tmp: str) -> None:
        with h5py.File(tmp, "w", libver=("v108", "v110")) as f:
            _write_group(f, tree)
    atomic_write(path, write)


# ---------------------------------------------------------------------------- reading
class H5Data:
    """Lazy handle on one dataset: shape and type are known, data is read on demand."""

    __slots__ = ("ds", "path", "shape", "code", "why")

    def __init__(self, ds: h5py.Dataset, path: str):
        self.ds, self.path = ds, path
        self.shape = ds.shape if ds.shape is not None else ()
        self.code, self.why = _classify(ds.dtype)

    def read(self) -> Any:
        try:
            _check_chunks(self.ds, self.path)
            if self.code == "str":
                raw = self.ds[()] if self.shape[0] else []
                return [_to_str(x, self.path) for x in np.asarray(raw).tolist()]
            return self.ds[()]
        except FormatError:
            raise
        except Exception as e:   # libhdf5/h5py failures on damaged files, of any class
            raise err(self.path, f"cannot read dataset: {_h5msg(e)}") from None


def _check_chunks(ds: h5py.Dataset, path: str) -> None:
    """Check the chunk index before reading: libhdf5 trusts it and can crash (not just fail)
    on a damaged one, e.g. fletcher32 on a chunk whose recorded size is 0."""
    if not ds.shape or not ds.shape[0]:
        return
    did = ds.id
    plist = did.get_create_plist()
    eof = ds.file.id.get_filesize()
    if plist.get_layout() != h5py.h5d.CHUNKED:
        off, size = did.get_offset(), did.get_storage_size()
        if off is not None and off + size > eof:
            raise err(path, "dataset data lies beyond the end of the file")
        return
    nfilt = plist.get_nfilters()
    chunk = plist.get_chunk()[0]
    item = ds.dtype.itemsize
    n = did.get_num_chunks()
    if n > -(-ds.shape[0] // chunk):
        raise err(path, f"chunk index lists {n} chunks for {ds.shape[0]} elements")
    for i in range(n):
        info = did.get_chunk_info(i)
        ok = info.byte_offset is not None and info.size > (4 if nfilt else 0) and \
            info.filter_mask == 0 and info.byte_offset + info.size <= eof
        if ok and not nfilt:
            ok = info.size == chunk * item
        if not ok:
            raise err(path, f"damaged chunk index (chunk {i}: offset {info.byte_offset}, "
                            f"{info.size} bytes)")


def _classify(dt: np.dtype) -> tuple[str | None, str]:
    if h5py.check_dtype(ref=dt) is not None:
        return None, "HDF5 reference"
    if h5py.check_dtype(enum=dt) is not None:
        return None, "enum (booleans are not allowed; use u1)"
    if h5py.check_dtype(vlen=dt) is not None and h5py.check_string_dtype(dt) is None:
        return None, "variable-length sequence"
    sd = h5py.check_string_dtype(dt)
    if sd is not None:
        if sd.length is None:
            return None, "variable-length string; the format uses fixed-length UTF-8"
        return "str", ""
    if dt.names is not None:
        return None, "compound"
    if dt.subdtype is not None:
        return None, "array type"
    code = dtype_code(dt)
    return code, f"dtype {dt}" if code is None else ""


def _name(name: Any, path: str) -> str:
    if isinstance(name, bytes):
        raise err(path, f"member or attribute name {name[:40]!r} is not valid UTF-8")
    if not isinstance(name, str) or not name or "\x00" in name:
        raise err(path, f"invalid member or attribute name {name!r}")
    return name


def _h5msg(e: BaseException) -> str:
    s = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return s[:300]


def _read_attrs(obj: Any, path: str, limits: Limits) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        names = list(obj.attrs.keys())
    except (OSError, RuntimeError, KeyError, ValueError) as e:
        raise err(path, f"cannot list attributes: {_h5msg(e)}") from None
    if len(names) > limits.max_members:
        raise err(path, "too many attributes")
    for name in names:
        name = _name(name, path)
        apath = f"{path}@{name}" if path != "/" else f"/@{name}"
        try:
            aid = h5py.h5a.open(obj.id, name.encode("utf-8"))
            shape, dt = aid.shape, aid.dtype
        except (OSError, RuntimeError, KeyError, ValueError, TypeError) as e:
            raise err(apath, f"cannot open attribute: {_h5msg(e)}") from None
        if shape is None or len(shape) > 1:
            raise err(apath, f"attribute must be a scalar or 1-D, got shape {shape}")
        if shape and shape[0] > limits.max_attr_elements:
            raise err(apath, f"attribute declares {shape[0]} elements, above the limit")
        code, why = _classify(dt)
        if code is None:
            raise err(apath, f"attribute has a non-portable type ({why})")
        if code == "str":
            _check_strpad(aid.get_type(), apath)
        try:
            v = obj.attrs[name]
        except (OSError, RuntimeError, KeyError, ValueError, TypeError, UnicodeDecodeError) as e:
            raise err(apath, f"cannot read attribute: {_h5msg(e)}") from None
        out[name] = _attr_value(v, code, apath)
    return out


def _attr_value(v: Any, code: str, path: str) -> Any:
    if code == "str":
        if isinstance(v, np.ndarray):
            return [_to_str(x, path) for x in v.tolist()]
        return _to_str(v, path)
    a = np.asarray(v)
    a = a.astype(a.dtype.newbyteorder("="), copy=False)
    return a if a.ndim else a[()]


#: HDF5 filter ids allowed by the spec: deflate, shuffle, fletcher32
_FILTERS = {1: "deflate", 2: "shuffle", 3: "fletcher32"}


def _check_storage(ds: h5py.Dataset, path: str) -> None:
    """Refuse filters other than deflate/shuffle/fletcher32 (any layout is fine)."""
    try:
        plist = ds.id.get_create_plist()
        filters = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
    except Exception as e:
        raise err(path, f"cannot inspect dataset filters: {_h5msg(e)}") from None
    for f in filters:
        if f not in _FILTERS:
            raise err(path, f"uses HDF5 filter {f}; only deflate, shuffle and fletcher32 are allowed")


def _check_strpad(tid: Any, path: str) -> None:
    try:
        pad = tid.get_strpad()
    except Exception as e:
        raise err(path, f"cannot inspect string type: {_h5msg(e)}") from None
    if pad not in (h5py.h5t.STR_NULLPAD, h5py.h5t.STR_NULLTERM):
        raise err(path, "strings must be NUL-padded or NUL-terminated (space padding is not allowed)")


def _to_str(x: Any, path: str) -> str:
    if isinstance(x, bytes):
        try:
            x = x.decode("utf-8")
        except UnicodeDecodeError:
            raise err(path, "string is not valid UTF-8") from None
    if not isinstance(x, str):
        raise err(path, "expected a string")
    if "\x00" in x:
        raise err(path, "string holds a NUL character")
    return x


def _walk(g: h5py.Group, path: str, limits: Limits, depth: int, count: list) -> Group:
    if depth > limits.max_depth:
        raise err(path, "groups nested too deeply")
    out = Group(_read_attrs(g, path, limits))
    try:
        names = list(g.keys())
    except (OSError, RuntimeError, KeyError, ValueError) as e:
        raise err(path, f"cannot list members: {_h5msg(e)}") from None
    if len(names) > limits.max_members:
        raise err(path, f"has {len(names)} members, above the limit of {limits.max_members}")
    for name in names:
        name = _name(name, path)
        mpath = f"{path.rstrip('/')}/{name}"
        count[0] += 1
        if count[0] > limits.max_objects:
            raise err(mpath, "file holds too many objects")
        try:
            link = g.get(name, getlink=True)
        except (OSError, RuntimeError, KeyError, ValueError) as e:
            raise err(mpath, f"cannot read link: {_h5msg(e)}") from None
        if isinstance(link, h5py.SoftLink):
            raise err(mpath, f"is a soft link (to {link.path!r}); links are not allowed")
        if isinstance(link, h5py.ExternalLink):
            raise err(mpath, f"is an external link (to {link.filename!r}); links are not allowed")
        if not isinstance(link, h5py.HardLink):
            raise err(mpath, "is a user-defined link; links are not allowed")
        try:
            obj = g[name]
        except (OSError, RuntimeError, KeyError, ValueError) as e:
            raise err(mpath, f"cannot open object: {_h5msg(e)}") from None
        if isinstance(obj, h5py.Group):
            out.members[name] = _walk(obj, mpath, limits, depth + 1, count)
        elif isinstance(obj, h5py.Dataset):
            try:
                virtual, external = obj.is_virtual, obj.external
            except (OSError, RuntimeError, ValueError) as e:
                raise err(mpath, f"cannot inspect dataset: {_h5msg(e)}") from None
            if virtual:
                raise err(mpath, "is a virtual dataset; not allowed")
            if external:
                raise err(mpath, "stores its data in external files; not allowed")
            if obj.shape is None:
                raise err(mpath, "has a null dataspace")
            _check_storage(obj, mpath)
            if h5py.check_string_dtype(obj.dtype) is not None:
                _check_strpad(obj.id.get_type(), mpath)
            if _read_attrs(obj, mpath, limits):
                raise err(mpath, "datasets must not carry attributes")
            out.members[name] = H5Data(obj, mpath)
        else:
            raise err(mpath, f"is a {type(obj).__name__}; only groups and datasets are allowed")
    return out


def check_magic(path: str | os.PathLike) -> None:
    """Refuse files that do not start with the HDF5 signature (no user block allowed)."""
    with open(path, "rb") as f:
        head = f.read(8)
    if not head:
        raise err(os.fspath(path), "file is empty")
    if head != HDF5_MAGIC:
        raise err(os.fspath(path), "not an HDF5 file (bad signature)")


@contextmanager
def open_tree(path: str | os.PathLike, limits: Limits = DEFAULT_LIMITS) -> Iterator[Group]:
    """Open an HDF5 model file and yield its tree with lazy datasets (file open meanwhile)."""
    check_magic(path)
    try:
        f = h5py.File(path, "r", locking=False)
    except (OSError, RuntimeError, ValueError) as e:
        raise err(os.fspath(path), f"cannot open HDF5 file: {_h5msg(e)}") from None
    try:
        try:
            tree = _walk(f, "/", limits, 0, [0])
        except FormatError:
            raise
        except (RecursionError, MemoryError):
            raise err(os.fspath(path), "file structure is too large or too deep") from None
        except Exception as e:  # h5py/libhdf5 failures on damaged metadata, of any class
            raise err(os.fspath(path), f"damaged HDF5 file: {_h5msg(e)}") from None
        yield tree
    finally:
        try:
            f.close()
        except Exception:
            pass
