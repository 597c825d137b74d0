"""A warning, once per fit, for real training columns whose standard deviation is below
the std floor of Gaussian leaves (``min_std``; oSLRAU's ``sqrt(min_var)``): the floor then
sets the spread of every leaf over them, so every row gets nearly the same likelihood
(data of scale 1e-200, or columns of std 1e-6, against a floor of 1e-3). Constant columns
(std 0) are not warned about: the floor loses nothing there."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .._warn import warn_user
from ..errors import ScaleWarning


def column_std(A: np.ndarray, cols=None) -> np.ndarray:
    """The std of each column of ``A`` (of ``cols`` only), NaN (missing) cells left out;
    computed on the deviations scaled by their largest, so that a std of 1e-200 is not
    lost to squares that underflow to 0. Columns whose values differ by rounding only
    (a few ulps) count as constant: std 0."""
    A = np.asarray(A, dtype=np.float64)
    if cols is not None:
        A = A[:, np.asarray(cols, dtype=np.int64)]
    if A.shape[0] == 0 or A.shape[1] == 0:
        return np.zeros(A.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        seen = ~np.isnan(A)
        n = np.maximum(seen.sum(axis=0), 1)
        D = np.where(seen, A - np.nansum(A, axis=0) / n, 0.0)
        top = np.abs(D).max(axis=0)
        scale = np.where(top > 0, top, 1.0)
        std = top * np.sqrt(np.sum((D / scale) ** 2, axis=0) / n)
        flat = _flat(np.where(seen, A, np.inf).min(axis=0), np.where(seen, A, -np.inf).max(axis=0))
    return np.where(flat, 0.0, std)


def _flat(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Columns whose smallest and largest values ``lo``, ``hi`` differ by a few ulps at most:
    constant, their deviations from the rounded mean being rounding, not spread (a column
    with no value, lo = inf and hi = -inf, too)."""
    with np.errstate(invalid="ignore"):
        return ~(hi - lo > 4 * np.finfo(np.float64).eps * np.maximum(np.abs(lo), np.abs(hi)))


def warn_small(std, floor: float, param: str, learner: str, cols=None,
               names: Sequence[str] | None = None, what: str | None = None) -> bool:
    """Warn (:class:`~spnc.errors.ScaleWarning`) when a column's ``std`` is positive and
    below ``floor``, naming the columns (``cols``: the column of each std; ``names``: the
    variables') and the parameter ``param`` (``what``: how the floor reads, default
    ``param=floor``). Said by the outermost fit only (the candidates and bags of a fit
    are fits too). Returns whether it warned."""
    from .base import _FITTING
    std = np.asarray(std, dtype=np.float64)
    cols = np.arange(std.size) if cols is None else np.asarray(cols, dtype=np.int64)
    bad = np.flatnonzero((std > 0) & (std < floor))
    if bad.size == 0 or len(_FITTING.get()) > 1:
        return False
    many = bad.size > 1
    which = ", ".join(f"{int(cols[i])}" + (f" ({names[int(cols[i])]!r})" if names is not None else "")
                      for i in bad[:5]) + (f" and {bad.size - 5} more" if bad.size > 5 else "")
    values = ", ".join(f"{float(std[i]):.3g}" for i in bad[:5]) + (", ..." if bad.size > 5 else "")
    warn_user(f"{learner}: the standard deviation{'s' if many else ''} of X column{'s' if many else ''} {which} "
              f"over the training data ({values}) {'are' if many else 'is'} below {what or f'{param}={floor:g}'}, "
              f"the std floor of Gaussian leaves: the floor, not the data, sets their spread (far below it, every "
              f"row gets nearly the same likelihood). Rescale the column{'s' if many else ''} (e.g. standardise X) "
              f"or give a smaller {param}",
              ScaleWarning)
    return True


def learner_floor(est) -> tuple[float, str, str | None] | None:
    """(std floor, parameter, how it reads) of a learner's Gaussian leaves, None without."""
    if getattr(est, "min_std", None) is not None:
        return float(est.min_std), "min_std", None
    if getattr(est, "min_var", None) is not None:      # oSLRAU: a variance floor (a select's choice, once made)
        sd = float(np.sqrt(getattr(est, "_overrides", {}).get("min_var", est.min_var)))
        return sd, "min_var", f"sqrt(min_var)={sd:g}"
    return None


def block_moments(A: np.ndarray) -> dict:
    """Column moments of one block (NaN cells left out) that :func:`merge_moments` adds up
    over blocks in any grouping: counts, a scale (the largest magnitude), the mean and
    summed squared deviations of the values over it, the smallest and largest values."""
    A = np.asarray(A, dtype=np.float64)
    seen = ~np.isnan(A)
    c = seen.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        top = np.where(seen, np.abs(A), 0.0).max(axis=0, initial=0.0)
        s = np.where(top > 0, top, 1.0)
        B = np.where(seen, A / s, 0.0)
        m = B.sum(axis=0) / np.maximum(c, 1)
        M2 = (np.where(seen, B - m, 0.0) ** 2).sum(axis=0)
    return {"c": c, "s": s, "m": m, "M2": M2, "lo": np.where(seen, A, np.inf).min(axis=0, initial=np.inf),
            "hi": np.where(seen, A, -np.inf).max(axis=0, initial=-np.inf)}


def merge_moments(a: dict, b: dict) -> dict:
    """The moments of two blocks' rows together (Chan et al.'s pairwise update, on a
    common scale)."""
    S = np.maximum(a["s"], b["s"])
    fa, fb = a["s"] / S, b["s"] / S
    ma, mb = a["m"] * fa, b["m"] * fb
    c = a["c"] + b["c"]
    d = mb - ma
    cc = np.maximum(c, 1)
    return {"c": c, "s": S, "m": ma + d * b["c"] / cc,
            "M2": a["M2"] * fa * fa + b["M2"] * fb * fb + d * d * a["c"] * b["c"] / cc,
            "lo": np.minimum(a["lo"], b["lo"]), "hi": np.maximum(a["hi"], b["hi"])}


def moments_std(t: dict) -> np.ndarray:
    """The column std of merged moments, 0 for constant (or empty) columns, as
    :func:`column_std` gives it."""
    std = t["s"] * np.sqrt(t["M2"] / np.maximum(t["c"], 1))
    return np.where(_flat(t["lo"], t["hi"]) | (t["c"] == 0), 0.0, std)


def track(est, A: np.ndarray, fresh: bool, warn: bool) -> None:
    """Add a batch ``A`` to the running column moments of an oSLRAU learner (``fresh``: its
    first batch; :func:`merge_moments`), and with ``warn`` say once what they show
    (:func:`warn_tracked`)."""
    if A.shape[0] == 0:
        return
    st = None if fresh else est.__dict__.get("_scale_stats")
    b = block_moments(A)
    est._scale_stats = dict(b, warned=False) if st is None else dict(merge_moments(st, b), warned=st["warned"])
    if warn:
        warn_tracked(est)


def warn_tracked(est, names: Sequence[str] | None = None) -> None:
    """The warning of :func:`warn_small` for the moments :func:`track` gathered, once."""
    st = est.__dict__.get("_scale_stats")
    floor = learner_floor(est)
    if st is None or st["warned"] or floor is None:
        return
    st["warned"] = warn_small(moments_std(st), floor[0], floor[1], type(est).__name__, names=names, what=floor[2])
