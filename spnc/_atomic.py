"""Atomic file output: every file spnc writes goes to a temporary file in the target's
directory, is flushed to disk and renamed over the target, so the target is either its old
content or the complete new one.

Temporary files are named ``.<target name>.<random>.spnc-tmp``. They are removed on any
exception and on SIGTERM/SIGINT/SIGHUP received during the write; only SIGKILL or a power
cut can leave one behind, and such a file (recognisable by the ``.spnc-tmp`` suffix) is safe
to delete.
"""
from __future__ import annotations

import errno
import os
import signal
import tempfile
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from .errors import SpncError

TMP_SUFFIX = ".spnc-tmp"
_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, n))


class Interrupted(BaseException):
    """Raised by the temporary signal handlers so ``finally`` blocks run; a CLI turns it
    into exit status 128 + signal number."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum


def _raise(signum, frame):  # noqa: ARG001
    raise Interrupted(signum)


@contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """Within the block, SIGTERM/SIGINT/SIGHUP raise :class:`Interrupted` (main thread
    only; elsewhere a no-op). Handlers a caller installed itself are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}
    for s in _SIGNALS:
        h = signal.getsignal(s)
        if h in (signal.SIG_DFL, signal.default_int_handler):
            old[s] = h
            signal.signal(s, _raise)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _new_file_mode(path: str) -> int:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        um = os.umask(0)
        os.umask(um)
        return 0o666 & ~um


def refuse_open_for_writing(path: str | os.PathLike, error: type[Exception] = SpncError) -> None:
    """Refuse to replace an existing file that this process holds open for writing through
    h5py (an ``h5py.File`` in mode ``'a'``, ``'r+'`` or ``'w'``): the new file would miss
    what that handle has not flushed, and what it writes afterwards would be lost with the
    old file."""
    import sys
    path = os.fspath(path)
    if "h5py" not in sys.modules or not os.path.exists(path):
        return                  # no h5py handle can be open
    import h5py
    target = os.stat(path)
    for fid in h5py.h5f.get_obj_ids(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE):    # every file open in the process
        if not fid.get_intent() & h5py.h5f.ACC_RDWR:
            continue
        try:        # by the open descriptor: its name may be relative to another directory
            st = os.fstat(fid.get_vfd_handle())
            same = (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino)
        except (OSError, ValueError):       # a driver without a descriptor
            same = same_file(os.fsdecode(fid.name), path)
        if same:
            raise error(f"{path}: is open for writing in this process (an h5py.File in mode 'a', 'r+' or "
                        "'w'); replacing it would lose what that handle writes: close it or open it "
                        "read-only, or write to another file")


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` for a temp file next to ``path``, fsync it and rename it over
    ``path``. On any failure or signal the temp file is removed and ``path`` is untouched.
    A file this process holds open for writing is refused (:func:`refuse_open_for_writing`)."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    if os.path.exists(path) and not os.access(path, os.W_OK):
        # the rename would replace a file its owner protected, where open() would refuse
        raise PermissionError(errno.EACCES, "the file is read-only; spnc does not replace it", path)
    refuse_open_for_writing(path)
    with signals_as_exceptions():
        try:
            fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=TMP_SUFFIX, dir=d)
        except OSError as e:      # name the file asked for, not the temporary one
            raise type(e)(e.errno, f"cannot write to directory {d} ({e.strerror})", path) from None
        os.close(fd)
        try:
            write(tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.chmod(tmp, _new_file_mode(path))
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
    try:
        dfd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def check_writable(path: str | os.PathLike, *, inputs: tuple = ()) -> None:
    """Fail now, before any work, if ``path`` cannot be written atomically: its directory
    is missing or not writable, it is a directory, or it is one of ``inputs``."""
    path = os.fspath(path)
    if path == "-":
        return
    if os.path.isdir(path):
        raise SpncError(f"{path}: is a directory, not a file name")
    from .stream import split_spec
    for src in inputs:
        if src is None or os.fspath(src) == "-":
            continue
        if same_file(path, split_spec(os.fspath(src))[0]):     # 'data.h5:/X' is data.h5
            raise SpncError(f"{path}: is also an input file; refusing to overwrite it "
                            "(choose another output name)")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise SpncError(f"{path}: directory {d} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=TMP_SUFFIX, dir=d)
    except OSError as e:
        raise SpncError(f"{path}: cannot write to directory {d} ({e.strerror or e})") from None
    os.close(fd)
    os.unlink(tmp)


def same_file(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name the same file (following links; False if ``a`` is new)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
