"""log p(query | evidence) from two log-likelihoods, refused where rounding decides it."""
from __future__ import annotations

import numpy as np

from .errors import DataError

#: the largest rounding error a conditional may carry, relative to max(1, |value|)
CONDITIONAL_TOL = 1e-6


def log_conditional(joint: np.ndarray, evidence: np.ndarray) -> np.ndarray:
    """``joint - evidence`` (log p(query, evidence) - log p(evidence)) per row. Raises
    :class:`DataError` for a row whose evidence has probability zero, or whose two
    log-likelihoods are so large (an outlying real value) that rounding them, about 16 ulp
    each, could move the difference by more than ``CONDITIONAL_TOL``."""
    # (n,) or, for independent roots, (n, n_roots): errors name the row
    zero = np.argwhere(np.isneginf(evidence))
    if zero.size:
        raise DataError(f"row {int(zero[0][0])}: the evidence has probability zero; its conditional is "
                        "undefined")
    out = joint - evidence
    with np.errstate(invalid="ignore"):      # an impossible query (joint -inf) is exact
        err = np.where(np.isfinite(joint), 16 * np.finfo(np.float64).eps * (np.abs(joint) + np.abs(evidence)), 0.0)
    bad = np.argwhere(err > CONDITIONAL_TOL * np.maximum(1.0, np.abs(out)))
    if bad.size:
        at = tuple(bad[0])
        raise DataError(f"row {int(at[0])}: log p(query, evidence) = {joint[at]:.6g} and log p(evidence) = "
                        f"{evidence[at]:.6g} are too large for their difference to be accurate (rounding "
                        f"error up to {err[at]:.2g}); an outlying value, or data to rescale")
    return out
