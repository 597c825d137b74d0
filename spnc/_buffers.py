"""Kernel buffers that start on a cache line.

The kernels stream blocks of 64 doubles (512 bytes) through their workspaces. numpy's
buffers start wherever the heap puts them (16-byte alignment), and a buffer 16 bytes off a
64-byte line makes every 64-byte vector load straddle two lines. Where the heap happened to
put a workspace moved one backward pass by up to 25 % between two processes running the
same binary (learnspn-shaped model of 7.6 k edges), so the buffers the kernels stream
through come from :func:`aligned_empty`.
"""
from __future__ import annotations

import numpy as np

LINE = 64           # bytes


def aligned_empty(shape, dtype=np.float64, *, zero: bool = False) -> np.ndarray:
    """A C-contiguous array (uninitialised, or zeros with ``zero``) whose data starts on a
    64-byte boundary; so do its rows when a row is a whole number of lines."""
    try:                 # plain Python here: this runs for every query, however small
        shape = tuple(map(int, shape))
    except TypeError:
        shape = (int(shape),)
    dt = np.dtype(dtype)
    nbytes = dt.itemsize
    for s in shape:
        nbytes *= s
    raw = (np.zeros if zero else np.empty)(nbytes + LINE, dtype=np.uint8)
    off = -raw.ctypes.data % LINE
    return raw[off:off + nbytes].view(dt).reshape(shape)


def whole_lines(n_doubles: int) -> int:
    """``n_doubles`` rounded up to whole cache lines (rows of an aligned buffer stay aligned)."""
    per = LINE // 8
    return -(-int(n_doubles) // per) * per
