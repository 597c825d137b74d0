"""Chow-Liu trees: weighted maximum-likelihood tree (or forest) models of discrete data.

:func:`fit_chow_liu` validates its input, counts pairs with the compiled kernels of
:mod:`spnc._counts` (a popcount kernel for unweighted binary data, 8-row subset tables for
weighted binary data, direct pair tables otherwise), takes the maximum spanning forest of
the mutual-information matrix (dense Prim) and estimates smoothed conditional probability
tables (CPTs) from the weighted counts.

Smoothing: with Dirichlet parameter ``alpha`` the pair distribution used for MI is
``(N_ab + alpha) / (W + alpha k_i k_j)`` and each CPT row is
``P(x_j = b | x_parent = a) = (N_ab + alpha) / (N_a + alpha k_j)`` (the root:
``(N_b + alpha) / (W + alpha k)``), where ``N`` are weighted counts and ``W`` the total weight.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from . import _budget
from . import _counts as _K
from . import _mi as _MI
from . import stream as _stream
from ._sweep import cell
from .data import real_array, unmasked
from ._threads import effective_n_threads
from .errors import DataError

#: edges whose mutual information (nats) is at or below this are treated as absent
MI_EPS = 1e-12
#: weighted binary counts walk per-row lists of 1s when sum(row length^2) is below this
#: fraction of n d^2 / 8 (the cost of the 8-row table kernel); measured on the shared sets
_SPARSE_RATIO = 0.8
#: unweighted non-binary data uses one-hot popcounts up to this many indicator columns
#: (memory 8 * n_ind^2 bytes); above it, direct pair tables
_MAX_ONEHOT = 4096
#: below this much work (rows x pairs) the kernels run on one thread


class ChowLiuFit(NamedTuple):
    """Result of :func:`fit_chow_liu`.

    ``parents[j]`` is the parent of variable ``j`` (-1 for a root; a forest has one root per
    component), ``cpts[j]`` has shape ``(cardinality[parents[j]], cardinality[j])`` or
    ``(1, cardinality[j])`` for a root, ``cardinality`` the number of states per variable
    and ``mi`` the (smoothed) mutual-information matrix in nats."""

    parents: np.ndarray
    cpts: list[np.ndarray]
    cardinality: np.ndarray
    mi: np.ndarray


def _finite(v) -> bool:
    """A real number within the float range (a huge int is not: numpy cannot test it)."""
    try:
        return bool(np.isfinite(float(v)))
    except (TypeError, ValueError, OverflowError):
        return False


#: weight totals above this overflow weighted statistics (squares, products of counts)
MAX_WEIGHT_SUM = 1e150

def resolve_threads(n_threads: int | None, work: float) -> int:
    """The thread count for ``work`` (spnc's one policy, :func:`spnc._threads.effective_n_threads`)."""
    if isinstance(n_threads, (bool, np.bool_)) or not isinstance(n_threads, (int, np.integer, type(None))):
        raise ValueError(f"n_threads must be a positive integer, -1 for all cores, or None; got {n_threads!r}")
    return effective_n_threads(None if n_threads is None else int(n_threads), int(work))


def check_cardinality(cardinality, d: int | None = None, name: str = "X") -> np.ndarray:
    """``cardinality`` as int64, one integer >= 2 per column of ``name`` (``d`` of them;
    any number when None), else a :class:`DataError` (the in-memory and streamed checks)."""
    card = np.asarray(cardinality)
    if card.ndim != 1 or (d is not None and card.shape != (d,)) or not np.issubdtype(card.dtype, np.integer) \
            or np.any(card < 2):
        count = "" if d is None else f"{d} "
        raise DataError(f"cardinality must be {count}integers >= 2 (one per column of {name}; a discrete "
                        f"variable has at least 2 states), got {cardinality!r}")
    return card.astype(np.int64)


def check_codes(X, cardinality=None, name: str = "X",
                row0=0) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Validate a matrix of discrete codes; return ``(codes, cardinality, bits)``.

    ``codes`` is C-contiguous uint8 (all cardinalities <= 256) or int32. Without
    ``cardinality`` each variable gets ``max(2, max value + 1)`` states. For uint8/bool
    input with only binary variables ``bits`` holds the packed columns (see
    ``_counts.pack_bits``), else ``None``. Raises :class:`DataError` naming the first bad
    entry (its row counted from ``row0``: where a block ``X`` starts in the whole input, or
    the input row of each row of ``X``)."""
    A = real_array(X, name)
    if A.ndim != 2:
        raise DataError(f"{name} must be 2-D (n_rows, n_vars), got shape {A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise DataError(f"{name} must have at least one row and one column, got shape {A.shape}")
    d = A.shape[1]
    if cardinality is not None:
        card = check_cardinality(cardinality, d, name)
    if A.dtype == np.uint8 or A.dtype == np.bool_:
        codes = np.ascontiguousarray(A).view(np.uint8)
        bits, colmax = _K.pack_bits(codes)
        if cardinality is None:
            card = np.maximum(2, colmax.astype(np.int64) + 1)
        elif np.any(colmax >= card):
            _raise_bad(A, card, name, row0)
        _budget.check_pairwise(card)
        if np.all(card == 2):
            return codes, card, bits
        if card.max() > 256:
            codes = codes.astype(np.int32)
        return codes, card, None
    if cardinality is None:
        big = np.full(d, np.iinfo(np.int64).max // 2, dtype=np.int64)
        _raise_bad(A, big, name, row0)
        card = np.maximum(2, np.asarray(A.max(axis=0), dtype=np.int64) + 1)
    else:
        _raise_bad(A, card, name, row0)
    _budget.check_pairwise(card)
    codes = np.ascontiguousarray(A, dtype=np.uint8 if card.max() <= 256 else np.int32)
    return codes, card, None


def _raise_bad(A: np.ndarray, card: np.ndarray, name: str, row0=0) -> None:
    if A.dtype == np.uint8 or A.dtype == np.bool_:
        k = _K.first_bad_code_u8(np.ascontiguousarray(A).view(np.uint8), card)
    else:
        k = _K.first_bad_code(np.ascontiguousarray(A, dtype=np.float64), card)
    if k >= 0:
        r, c = divmod(k, A.shape[1])
        v = A[r, c].item()
        if v != v:
            why = "is missing (NaN): fitting needs complete data"
        elif card[c] >= np.iinfo(np.int64).max // 4:       # no cardinality given: any code >= 0
            codes = "discrete states are integer codes 0, 1, 2, ..."
            if v >= card[c] and v != np.inf:
                why = (f"is too large a state for discrete column {c} (codes must be below {card[c]:.3g}): "
                       "recode the column, or treat it as real-valued where the learner can")
            elif v in (np.inf, -np.inf):
                why = f"is infinite: {codes}"
            elif v < 0 and v == int(v):      # -1.45 is real-valued data more than a negative code
                why = f"is negative: {codes}"
            else:
                why = f"is not an integer: {codes}"
        else:
            why = f"is not a state 0..{card[c] - 1} of variable {c} (values must be integer codes)"
        raise DataError(f"{cell(name, row0, r, c)} = {v!r} {why}")


def check_weights(sample_weight, n: int, *, positive_total: bool = True) -> np.ndarray | None:
    """Validate non-negative finite real weights, one per row, with a total that weighted
    statistics can hold (and above 0 unless ``positive_total`` is False); ``None`` stays
    ``None``. Every learner and :meth:`SPN.backward` check their weights here."""
    if sample_weight is None:
        return None
    w = np.asarray(unmasked(sample_weight))      # a masked weight is missing (NaN): refused below
    if w.dtype.kind not in "biuf":      # text would be parsed, complex cut to its real part
        raise DataError(f"sample_weight must be numeric, got dtype {w.dtype}")
    w = w.astype(np.float64)
    if w.shape != (n,):
        raise DataError(f"sample_weight must have shape ({n},) (one weight per row), got {w.shape}")
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        raise DataError(f"sample_weight[{bad[0]}] = {float(w[bad[0]])!r}: weights must be finite and non-negative")
    with np.errstate(over="ignore"):
        total = float(w.sum())
    if positive_total and not total > 0:
        raise DataError("sample_weight is zero for every row; nothing to fit")
    if not total <= MAX_WEIGHT_SUM:
        raise DataError(f"sample_weight sums to {total:.3g}, above {MAX_WEIGHT_SUM:g}: weighted statistics "
                        "would overflow; rescale the weights")
    return w


def mutual_information(codes: np.ndarray, card: np.ndarray, w: np.ndarray | None, alpha: float,
                       n_threads: int, bits: np.ndarray | None = None) -> tuple[np.ndarray, float, np.ndarray | None]:
    """MI matrix of validated codes. Returns ``(mi, total_weight, cooc)``, ``cooc`` being
    the binary co-occurrence matrix when the binary kernels ran (else ``None``)."""
    n, d = codes.shape
    if np.all(card == 2) and codes.dtype == np.uint8:
        if w is None or w.min() == w.max():
            scale = 1.0 if w is None else float(w[0])
            if bits is None:
                bits = _K.pack_bits(codes)[0]
            C = _K.cooc_popcount(bits, n_threads)
            if scale != 1.0:
                C *= scale
            total = n * scale
        else:
            C = _weighted_cooc(codes, w, n_threads)
            total = float(w.sum())
        return _MI.mi_from_cooc(C, total, alpha, n_threads), total, C
    off = np.zeros(d + 1, dtype=np.int64)
    np.cumsum(card, out=off[1:])
    if (w is None or w.min() == w.max()) and off[-1] <= _MAX_ONEHOT:
        # unweighted: popcounts over one-hot indicator columns give every pair table
        scale = 1.0 if w is None else float(w[0])
        C = _K.cooc_popcount(_K.pack_onehot(codes, off, int(off[-1])), n_threads)
        if scale != 1.0:
            C *= scale
        return _MI.mi_from_onehot(C, off, card, n * scale, alpha, n_threads), n * scale, None
    ww = np.ones(n) if w is None else w
    XT = np.ascontiguousarray(codes.T)
    return _MI.mi_general(XT, card, ww, float(ww.sum()), alpha, n_threads), float(ww.sum()), None


def _weighted_cooc(codes: np.ndarray, w: np.ndarray, n_threads: int) -> np.ndarray:
    """Weighted binary co-occurrences. Columns that are mostly 1 are complemented, then
    rows are either walked as lists of their 1s (cost ~ sum of squared row lengths) or
    counted 8 rows at a time with subset-sum tables (cost ~ n d^2 / 8), whichever is
    cheaper; the complemented counts are mapped back exactly afterwards."""
    n, d = codes.shape
    flip = (_K.column_counts(codes) * 2 > n).astype(np.uint8)
    ptr, sq = _K.row_lengths(codes, flip)
    if sq >= _SPARSE_RATIO * n * d * d / 8:
        return _K.cooc_weighted(codes, w, n_threads)
    Cy = _K.cooc_sparse(ptr, _K.active_lists(codes, flip, ptr), w, d, n_threads)
    if not flip.any():
        return Cy
    W = float(w.sum())
    my = np.diag(Cy).copy()
    Cy = np.triu(Cy) + np.triu(Cy, 1).T       # symmetric
    f = flip.astype(bool)
    fi, fj = f[:, None], f[None, :]
    C = np.where(fi & fj, W - my[:, None] - my[None, :] + Cy,
                 np.where(fi, my[None, :] - Cy, np.where(fj, my[:, None] - Cy, Cy)))
    np.fill_diagonal(C, np.where(f, W - my, my))
    return np.triu(C)


def _binary_cpts(C: np.ndarray, total: float, parents: np.ndarray, alpha: float) -> list[np.ndarray]:
    """Smoothed CPTs of a binary tree straight from the co-occurrence matrix (vectorised)."""
    d = len(parents)
    diag = np.diag(C)
    j = np.arange(d)
    p = np.where(parents < 0, j, parents)
    c11 = C[np.minimum(p, j), np.maximum(p, j)]
    cp, cj = diag[p], diag
    t = np.stack([total - cp - cj + c11, cj - c11, cp - c11, c11], axis=1).reshape(d, 2, 2)
    root = parents < 0
    t[root, 0, :] = np.stack([total - cj[root], cj[root]], axis=1)
    t = np.maximum(t, 0.0) + alpha
    tot = t.sum(axis=2, keepdims=True)
    cpt = np.where(tot > 0, t / np.where(tot > 0, tot, 1.0), 0.5)
    return [cpt[k, :1].copy() if root[k] else cpt[k] for k in range(d)]


def _tables_direct(codes: np.ndarray, card: np.ndarray, w: np.ndarray | None, parents: np.ndarray,
                   n_threads: int) -> list[np.ndarray]:
    d = len(card)
    rows = np.where(parents < 0, 1, card[np.maximum(parents, 0)])
    off = np.zeros(d + 1, dtype=np.int64)
    np.cumsum(rows * card, out=off[1:])
    ww = np.ones(codes.shape[0]) if w is None else w
    flat = _K.edge_counts(np.ascontiguousarray(codes.T), card, ww, parents.astype(np.int32), off, n_threads)
    return [flat[off[j]:off[j + 1]].reshape(rows[j], card[j]) for j in range(d)]


def cpts_from_counts(tables: Sequence[np.ndarray], alpha: float) -> list[np.ndarray]:
    """Smoothed CPTs from count tables (rows: parent states). A row without counts and
    ``alpha == 0`` becomes uniform."""
    out = []
    for t in tables:
        s = t + alpha
        tot = s.sum(axis=1, keepdims=True)
        cpt = np.where(tot > 0, s / np.where(tot > 0, tot, 1.0), 1.0 / t.shape[1])
        out.append(cpt)
    return out


def fit_chow_liu(X, cardinality=None, sample_weight=None, *, alpha: float = 0.1,
                 mi_threshold: float = 0.0, n_threads: int | None = None) -> ChowLiuFit:
    """Fit a Chow-Liu tree (forest) to discrete data by weighted maximum likelihood.

    Parameters
    ----------
    X : array (n_rows, n_vars) of integer codes ``0..cardinality[j]-1`` (no NaN); or a
        block source (HDF5/Zarr dataset, ``"file.h5:/path"``, iterable of row blocks,
        Dask array), counted block by block (:mod:`spnc.chowliu_blocks`).
    cardinality : states per variable; inferred as ``max(2, max + 1)`` when omitted.
    sample_weight : non-negative weights per row (EM soft counts); zero-weight rows are
        ignored, an all-zero vector is an error.
    alpha : Dirichlet smoothing added to every pair count and CPT entry (>= 0).
    mi_threshold : edges with MI (nats) at or below this are dropped, giving a forest;
        MI below ``MI_EPS`` always counts as zero.
    n_threads : OpenMP threads (None: automatic, -1: all cores).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0, 0, 1], [1, 1, 0], [1, 1, 1], [0, 0, 0]])
    >>> fit = fit_chow_liu(X, alpha=0.0)
    >>> fit.parents.tolist()
    [-1, 0, -1]
    """
    if _stream.is_streamed(X):   # a file, an iterable of blocks or a Dask array
        from .chowliu_blocks import fit_chow_liu_blocks
        return fit_chow_liu_blocks(X, cardinality, sample_weight, alpha=alpha, mi_threshold=mi_threshold,
                                   n_threads=n_threads)
    codes, card, bits = check_codes(X, cardinality)
    n, d = codes.shape
    w = check_weights(sample_weight, n)
    if not (_finite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
    if not (_finite(mi_threshold) and mi_threshold >= 0):
        raise ValueError(f"mi_threshold must be a finite number >= 0, got {mi_threshold!r}")
    if w is not None and np.any(w == 0):
        keep = w > 0
        codes, w, bits = np.ascontiguousarray(codes[keep]), w[keep], None
        n = codes.shape[0]
    nt = resolve_threads(n_threads, float(n) * d * d / 16)
    mi, total, C = mutual_information(codes, card, w, float(alpha), nt, bits)
    parents = _MI.prim_max_forest(mi, max(float(mi_threshold), MI_EPS))
    if C is not None:
        cpts = _binary_cpts(C, total, parents, float(alpha))
    else:
        cpts = cpts_from_counts(_tables_direct(codes, card, w, parents, nt), float(alpha))
    return ChowLiuFit(parents, cpts, card, mi)


def forest_to_tree(parents: np.ndarray, cpts: Sequence[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Hang every extra root of a forest under the first root with identical CPT rows (the
    root's marginal), giving a single tree with the same distribution."""
    parents = np.asarray(parents, dtype=np.int32).copy()
    cpts = [np.asarray(c, dtype=np.float64) for c in cpts]
    roots = np.flatnonzero(parents < 0)
    if roots.size > 1:
        r0 = int(roots[0])
        k0 = cpts[r0].shape[1]
        for r in roots[1:]:
            parents[r] = r0
            cpts[r] = np.repeat(cpts[r].reshape(1, -1), k0, axis=0)
    return parents, cpts


def tree_log_likelihood(X: np.ndarray, parents: np.ndarray, cpts: Sequence[np.ndarray]) -> np.ndarray:
    """log p(x) of complete rows under a tree or forest (plain numpy; for checks)."""
    X = np.asarray(X, dtype=np.int64)
    ll = np.zeros(X.shape[0])
    for j, p in enumerate(parents):
        a = 0 if p < 0 else X[:, p]
        with np.errstate(divide="ignore"):
            ll += np.log(cpts[j][a, X[:, j]])
    return ll
