"""Chow-Liu trees from data read block by block (files, iterables, Dask arrays).

Pairwise counts are sums over rows, so each block is reduced to a co-occurrence matrix
and the blocks are added; the tree and the CPTs come from the totals with the same
kernels as :func:`spnc.chowliu.fit_chow_liu`, whose parameters this reproduces (exactly
for unweighted data, whose counts are integers; to the order of floating-point additions
for weighted data).

Binary data: one pass (popcounts of packed columns, or weighted co-occurrences). Other
discrete data: counts of one-hot indicator pairs, which hold every pair table and every
tree-edge table; a second pass is needed only when the cardinality is inferred and the
first pass meets a non-binary column. Memory: one block plus the (indicators)^2 matrix.
"""
from __future__ import annotations

import numpy as np

from . import chowliu as _cl
from . import stream as _stream
from .errors import DataError

#: at most this many one-hot indicator columns (the count matrix takes 8 * n^2 bytes)
MAX_INDICATORS = 4096
#: weighted one-hot counting: rows per dense product (rows x indicators doubles <= 32 MB)
_DENSE_VALUES = 1 << 22


def _codes(block: np.ndarray, r0: int, card):
    return _cl.check_codes(block, card, row0=r0)


def _weights(ctx: dict, r0: int, m: int) -> np.ndarray | None:
    w = ctx["w"]
    if w is None:
        return None
    if r0 + m > len(w):
        raise DataError(f"sample_weight has {len(w)} entries but the data has more rows")
    return w[r0:r0 + m]


def _block(block: np.ndarray, r0: int, ctx: dict):
    """Validated codes of a block with its zero-weight rows dropped, and their weights."""
    codes, card, bits = _codes(block, r0, ctx["card"])
    wb = _weights(ctx, r0, codes.shape[0])
    if wb is not None and not np.all(wb > 0):
        keep = wb > 0
        codes, wb, bits = np.ascontiguousarray(codes[keep]), wb[keep], None
    return codes, card, bits, wb, block.shape[0]


def _binary_block(block: np.ndarray, r0: int, ctx: dict):
    """(card, C or None, total weight, kept rows, rows): co-occurrences when the block is binary;
    None for a block without rows (it adds nothing)."""
    if len(block) == 0:
        return None
    codes, card, bits, wb, raw = _block(block, r0, ctx)
    m = codes.shape[0]
    total = float(m) if wb is None else float(wb.sum())
    if not (np.all(card == 2) and codes.dtype == np.uint8):
        return card, None, total, m, raw
    nt = _cl.resolve_threads(ctx["n_threads"], float(m) * len(card) ** 2 / 16)
    if m == 0:
        C = np.zeros((len(card), len(card)))
    elif ctx["const"]:
        C = _cl._K.cooc_popcount(_cl._K.pack_bits(codes)[0] if bits is None else bits, nt)
    else:
        C = _cl._weighted_cooc(codes, wb, nt)
    return card, C, total, m, raw


def _combine_binary(a, b):
    if a is None or b is None:
        return b if a is None else a
    C = None if a[1] is None or b[1] is None else a[1] + b[1]
    return np.maximum(a[0], b[0]), C, a[2] + b[2], a[3] + b[3], a[4] + b[4]


def _onehot_block(block: np.ndarray, r0: int, ctx: dict):
    """(C, total weight, kept rows, rows): one-hot co-occurrences (upper triangle, indicator layout
    ``off``) of one block; None for a block without rows."""
    if len(block) == 0:
        return None
    codes, card, _, wb, raw = _block(block, r0, ctx)
    off, n_ind = ctx["off"], int(ctx["off"][-1])
    m = codes.shape[0]
    total = float(m) if wb is None else float(wb.sum())
    nt = _cl.resolve_threads(ctx["n_threads"], float(m) * len(card) ** 2 / 16)
    if ctx["const"]:
        C = _cl._K.cooc_popcount(_cl._K.pack_onehot(codes, off, n_ind), nt) if m else np.zeros((n_ind, n_ind))
        return C, total, m, raw
    C = np.zeros((n_ind, n_ind))
    step = max(64, _DENSE_VALUES // max(n_ind, 1))
    cols = off[:-1][None, :]
    for s in range(0, m, step):
        c = codes[s:s + step].astype(np.int64) + cols
        H = np.zeros((len(c), n_ind))
        np.put_along_axis(H, c, 1.0, axis=1)
        C += (H * wb[s:s + step, None]).T @ H
    return np.triu(C), total, m, raw


def _onehot_tables(C: np.ndarray, off: np.ndarray, card: np.ndarray, parents: np.ndarray) -> list[np.ndarray]:
    """Tree-edge count tables (parent state x child state) read from one-hot counts."""
    out = []
    for j, p in enumerate(parents):
        a, kj = off[j], card[j]
        if p < 0:
            out.append(np.diag(C)[a:a + kj].reshape(1, kj).copy())
        elif p < j:
            out.append(C[off[p]:off[p] + card[p], a:a + kj].copy())
        else:
            out.append(C[a:a + kj, off[p]:off[p] + card[p]].T.copy())
    return out


def _check_rows(n: int, raw: int, w: np.ndarray | None) -> None:
    if w is not None and raw != len(w):
        raise DataError(f"sample_weight has {len(w)} entries, the data has {raw} rows")
    if n == 0:
        raise DataError("X has no rows with positive weight; nothing to fit")


def fit_chow_liu_blocks(X, cardinality=None, sample_weight=None, *, alpha: float = 0.1,
                        mi_threshold: float = 0.0, n_threads: int | None = None, client=None,
                        block_rows: int | None = None) -> _cl.ChowLiuFit:
    """:func:`spnc.chowliu.fit_chow_liu` over a block source or a Dask array (``X`` as
    in :mod:`spnc.stream`); ``sample_weight`` is an in-memory array, one weight per row."""
    if not (_cl._finite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
    if not (_cl._finite(mi_threshold) and mi_threshold >= 0):
        raise ValueError(f"mi_threshold must be a finite number >= 0, got {mi_threshold!r}")
    w = None
    if sample_weight is not None:
        w = np.asarray(sample_weight)
        if w.ndim != 1:
            raise DataError(f"sample_weight must be 1-D (one weight per row), got shape {w.shape}")
        w = _cl.check_weights(w, len(w))
    card = None if cardinality is None else _cl.check_cardinality(cardinality)
    wp = None if w is None else w[w > 0]
    const = w is None or wp.min() == wp.max()
    scale = 1.0 if w is None else float(wp[0])
    ctx = {"card": card, "w": w, "const": const, "n_threads": n_threads}
    run = dict(client=client, block_rows=block_rows)
    src = _stream.open_rows(X, block_rows)
    try:
        C = None
        if card is None or np.all(card == 2):
            res = _stream.map_reduce(_binary_block, src, ctx, _combine_binary, **run)
            if res is None:
                raise DataError(f"{_stream.label(src)} has no rows; nothing to fit")
            card, C, total, n, raw = res
            _check_rows(n, raw, w)
            if C is not None:
                if const:
                    C, total = C * scale if scale != 1.0 else C, n * scale
                nt = _cl.resolve_threads(n_threads, float(len(card)) ** 2)
                mi = _cl._MI.mi_from_cooc(C, total, float(alpha), nt)
                parents = _cl._MI.prim_max_forest(mi, max(float(mi_threshold), _cl.MI_EPS))
                return _cl.ChowLiuFit(parents, _cl._binary_cpts(C, total, parents, float(alpha)), card, mi)
            if not _stream.is_dask(src) and not src.reiterable:
                raise DataError("non-binary data needs a second pass, but X is a one-shot iterator; pass the "
                                "cardinality, a list of blocks or a callable returning a fresh iterator")
        off = np.zeros(len(card) + 1, dtype=np.int64)
        np.cumsum(card, out=off[1:])
        if off[-1] > MAX_INDICATORS:
            raise DataError(f"streaming Chow-Liu counts one-hot indicator pairs: {int(off[-1])} indicators "
                            f"(sum of cardinalities) exceed {MAX_INDICATORS}")
        res = _stream.map_reduce(_onehot_block, src, dict(ctx, card=card, off=off), **run)
        if res is None:
            raise DataError(f"{_stream.label(src)} has no rows; nothing to fit")
        C, total, n, raw = res
        _check_rows(n, raw, w)
        if const:
            C, total = C * scale if scale != 1.0 else C, n * scale
        nt = _cl.resolve_threads(n_threads, float(len(card)) ** 2)
        mi = _cl._MI.mi_from_onehot(C, off, card, total, float(alpha), nt)
        parents = _cl._MI.prim_max_forest(mi, max(float(mi_threshold), _cl.MI_EPS))
        cpts = _cl.cpts_from_counts(_onehot_tables(C, off, card, parents), float(alpha))
        return _cl.ChowLiuFit(parents, cpts, card, mi)
    finally:
        if src is not X:
            src.close()


def _card_block(block: np.ndarray, r0: int, ctx) -> np.ndarray | None:
    return None if len(block) == 0 else _codes(block, r0, None)[1]


def _max(a, b):
    return b if a is None else a if b is None else np.maximum(a, b)


def pairwise_gtest(X, cardinality=None, *, n_threads: int | None = None, client=None,
                   block_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(G, dof)``: pairwise G statistics and degrees of freedom of the variables of ``X``
    (a block source or a Dask array) over all its rows — LearnSPN's independence test
    (:meth:`spnc.learn.structure.Context.gtest`) on the whole data. One-hot pair counts are
    summed over blocks (over Dask chunks on the workers); only the counts reach the caller.
    Without ``cardinality`` a first pass finds it."""
    src = _stream.open_rows(X, block_rows)
    run = dict(client=client, block_rows=block_rows)
    try:
        if cardinality is None:
            card = _stream.map_reduce(_card_block, src, None, _max, **run)
            if card is None:
                raise DataError(f"{_stream.label(src)} has no rows")
            if not _stream.is_dask(src) and not src.reiterable:
                raise DataError("pairwise_gtest needs two passes without cardinality, but X is a one-shot iterator")
        else:
            card = _cl.check_cardinality(cardinality)
        off = np.zeros(len(card) + 1, dtype=np.int64)
        np.cumsum(card, out=off[1:])
        if off[-1] > MAX_INDICATORS:
            raise DataError(f"pairwise_gtest counts one-hot indicator pairs: {int(off[-1])} indicators "
                            f"(sum of cardinalities) exceed {MAX_INDICATORS}")
        ctx = {"card": card, "w": None, "const": True, "n_threads": n_threads, "off": off}
        res = _stream.map_reduce(_onehot_block, src, ctx, **run)
        if res is None:
            raise DataError(f"{_stream.label(src)} has no rows")
        C, _, n, _ = res
        return _cl._MI.gtest_onehot(np.ascontiguousarray(C), off, float(n))
    finally:
        if src is not X:
            src.close()
