"""Row blocks written to a ``.npy`` file or to one dataset of an HDF5 file, atomically
(:func:`spnc._atomic.atomic_write`: a temporary file renamed over the output when complete,
keeping the old file's permissions). An existing HDF5 file keeps its other objects: the
temporary file starts as its copy and only the named dataset is replaced."""
from __future__ import annotations

import os
import shutil
from typing import Callable

import numpy as np

from .errors import DataError

#: bytes of the ``.npy`` header, written first as zeros and filled in at the end
NPY_HEADER = 128


def npy_header(shape: tuple) -> bytes:
    """A version-1.0 ``.npy`` header of exactly ``NPY_HEADER`` bytes (float64, C order)."""
    d = "{'descr': '<f8', 'fortran_order': False, 'shape': %r, }" % (tuple(shape),)
    d = d.ljust(NPY_HEADER - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + len(d).to_bytes(2, "little") + d.encode("latin1")


class RowWriter:
    """Rows appended block by block to ``file`` (``.npy``) or to ``file``'s dataset ``ds``
    (``.h5``/``.hdf5``), through the temporary path given to :meth:`open`."""

    def __init__(self, file: str, ds: str):
        self.file, self.ds = file, ds
        self.ext = os.path.splitext(file)[1].lower()
        if self.ext not in (".npy", ".h5", ".hdf5"):
            raise DataError(f"{file}: outputs are written as .npy or .h5/.hdf5")
        self.n, self.shape1, self.h, self.tmp = 0, None, None, None

    def open(self, tmp: str) -> None:
        self.tmp = tmp

    def write(self, block: np.ndarray) -> None:
        block = np.asarray(block, dtype=np.float64)
        if block.ndim == 0:
            raise DataError(f"{self.file}: rows are written from an array, got a scalar (block at row {self.n})")
        if self.h is None:
            self._start(block.shape[1:])
        elif block.shape[1:] != self.shape1:     # .npy bytes would misalign, HDF5 would broadcast
            raise DataError(f"{self.file}: the block at row {self.n} has rows of shape {block.shape[1:]}, the "
                            f"rows before it {self.shape1}; every row written must have one shape")
        if self.ext == ".npy":
            self.h.write(np.ascontiguousarray(block, dtype="<f8").tobytes())
        else:
            self.dset.resize(self.n + len(block), axis=0)
            self.dset[self.n:] = block
        self.n += len(block)

    def _start(self, shape1: tuple) -> None:
        self.shape1 = shape1
        if self.ext == ".npy":
            self.h = open(self.tmp, "wb")
            self.h.write(b"\0" * NPY_HEADER)
            return
        import h5py
        if os.path.exists(self.file):
            shutil.copyfile(self.file, self.tmp)
            try:
                self.h = h5py.File(self.tmp, "a")
            except OSError:
                raise DataError(f"{self.file}: exists and is not an HDF5 file; refusing to replace it "
                                "(choose another output name)") from None
            if self.ds in self.h:
                if not isinstance(self.h[self.ds], h5py.Dataset):
                    raise DataError(f"{self.file}:/{self.ds.strip('/')} is a group; refusing to replace it "
                                    "(name a dataset)")
                del self.h[self.ds]
        else:
            self.h = h5py.File(self.tmp, "w")
        try:
            self.dset = self.h.create_dataset(self.ds, shape=(0,) + shape1, maxshape=(None,) + shape1,
                                              dtype="f8", chunks=True)
        except (TypeError, ValueError) as e:      # e.g. a dataset where the path needs a group
            raise DataError(f"{self.file}:/{self.ds.strip('/')}: cannot create a dataset there ({e})") from None

    def finish(self, shape1: tuple = ()) -> None:
        """Complete the temporary file (when no block came, an empty output of rows of
        shape ``shape1``)."""
        if self.h is None:
            self.write(np.zeros((0,) + tuple(shape1)))
        if self.ext == ".npy":
            self.h.seek(0)
            self.h.write(npy_header((self.n,) + self.shape1))

    def close(self) -> None:
        if self.h is not None:
            self.h.close()
            self.h = None


def refuse_the_input(file: str, ds: str | None, w: RowWriter) -> None:
    """Refuse an output that would replace the data being read (``file``, dataset ``ds``):
    the same ``.npy`` file, or the same dataset of the same HDF5 file, by name or through a
    link."""
    from ._atomic import same_file
    if not os.path.exists(w.file) or not same_file(w.file, file):
        return
    same = w.ext == ".npy" or (ds or "").strip("/") == w.ds.strip("/")
    if not same and ds:
        import h5py
        try:
            with h5py.File(w.file, "r") as h:
                same = w.ds in h and ds in h and h[w.ds] == h[ds]
        except OSError:
            return          # not HDF5: the writer refuses it
    if same:
        raise DataError(f"{w.file}: is also the input data; refusing to overwrite it (choose another "
                        "output name or dataset)")


def refuse_open_for_writing(w: RowWriter) -> None:
    """Refuse, before any work, an HDF5 output that this process holds open for writing
    (:func:`spnc._atomic.refuse_open_for_writing`)."""
    if w.ext != ".npy":
        from ._atomic import refuse_open_for_writing as refuse
        refuse(w.file, DataError)


def write_blocks(fn: Callable[[np.ndarray, int], np.ndarray], X, out: str, block_rows: int | None,
                 dataset: str, var_names=None, empty: tuple = (), query: bool = False) -> int:
    """``fn(block, row0)`` for every block of the source ``X`` written to ``out`` (``.npy``
    or ``file.h5[:/dataset]``) atomically (:func:`spnc.stream.map_to_file`); ``empty``:
    the shape of a row of the output when ``X`` has no rows."""
    from ._atomic import atomic_write
    from .stream import open_source, split_spec
    file, ds = split_spec(out)
    w = RowWriter(file, ds or dataset)
    if isinstance(X, (str, os.PathLike)):
        refuse_the_input(*split_spec(os.fspath(X)), w)
    elif hasattr(getattr(X, "file", None), "filename"):        # an h5py dataset
        refuse_the_input(X.file.filename, X.name, w)
    refuse_open_for_writing(w)
    src = open_source(X, block_rows, var_names=var_names, query=query)

    def write(tmp: str) -> None:
        w.open(tmp)
        try:
            for r0, b in src.blocks():
                w.write(fn(b, r0))
            w.finish(empty)
        finally:
            w.close()
    try:
        atomic_write(file, write)
    finally:
        if src is not X:
            src.close()
    return w.n
