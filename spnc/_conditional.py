"""log p(query | evidence) from two log-likelihoods, refused where rounding decides it."""
from __future__ import annotations

import numpy as np

from .errors import DataError

#: the largest rounding error a conditional may carry, relative to max(1, |value|)
CONDITIONAL_TOL = 1e-6
#: evidence with |log p| above about this is refused (:func:`check_evidence_range`)
EVIDENCE_LOG_RANGE = CONDITIONAL_TOL / (32 * float(np.finfo(np.float64).eps))


def log_conditional(joint: np.ndarray, evidence: np.ndarray, row0: int = 0, where=None) -> np.ndarray:
    """``joint - evidence`` (log p(query, evidence) - log p(evidence)) per row. Raises
    :class:`DataError` for a row whose evidence has probability zero, or whose two
    log-likelihoods are so large (an outlying real value) that rounding them, about 16 ulp
    each, could move the difference by more than ``CONDITIONAL_TOL`` (``row0``: the number
    of the first row, for the message; ``where(i)``, when given, names row ``i`` instead,
    as the console tools do with file lines)."""
    where = where or (lambda i: f"row {row0 + i}")
    # (n,) or, for independent roots, (n, n_roots): errors name the row
    zero = np.argwhere(np.isneginf(evidence))
    if zero.size:
        raise DataError(f"{where(int(zero[0][0]))}: the evidence has probability zero; its conditional is "
                        "undefined")
    out = joint - evidence
    err, bad = _inexact(joint, evidence, out)
    bad = np.argwhere(bad)
    if bad.size:
        at = tuple(bad[0])
        raise DataError(f"{where(int(at[0]))}: log p(query, evidence) = {joint[at]:.6g} and log p(evidence) = "
                        f"{evidence[at]:.6g} are too large for their difference to be accurate (rounding "
                        f"error up to {err[at]:.2g}); an outlying value, or data to rescale")
    return out


def _inexact(joint: np.ndarray, evidence: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rounding error bound of ``out = joint - evidence`` and where it exceeds
    ``CONDITIONAL_TOL`` relative to max(1, |out|)."""
    with np.errstate(invalid="ignore"):      # an impossible query (joint -inf) is exact
        err = np.where(np.isfinite(joint), 16 * np.finfo(np.float64).eps * (np.abs(joint) + np.abs(evidence)), 0.0)
    return err, err > CONDITIONAL_TOL * np.maximum(1.0, np.abs(out))


def check_evidence_range(spn, X: np.ndarray, ll: np.ndarray, name: str, rows=None, where=None) -> None:
    """Refuse evidence whose log-probability ``ll`` is too large for conditionals given it to
    be accurate: :func:`log_conditional`'s rule with the evidence as its own query (for
    MPE and sampling, which choose branches by such conditionals). ``X``: the evidence
    rows in the model's order; ``rows``: the number in the caller's input of each (default
    0, 1, ...), or ``where(i)`` naming row ``i`` in full. The error names the row and the
    observed variable least probable alone."""
    err, bad = _inexact(ll, ll, np.zeros_like(ll))
    bad = np.flatnonzero(bad)
    if not bad.size:
        return
    i = int(bad[0])
    obs = np.flatnonzero(~np.isnan(X[i]))
    M = np.full((len(obs), X.shape[1]), np.nan)
    M[np.arange(len(obs)), obs] = X[i, obs]
    j = int(obs[np.argmin(spn.log_likelihood(M))])
    var = repr(spn.var_names[j]) if spn.var_names is not None else j
    r = i if rows is None else int(rows[i])
    at = where(i) if where else f"{name} row {r}"
    raise DataError(f"{at}: log p(evidence) = {ll[i]:.6g} is too large for conditionals given it to be "
                    f"accurate (rounding error up to {err[i]:.2g}); variable {var} = {float(X[i, j])!r} lies far "
                    "outside the model's mass (conditional refuses it too): an outlying value, or data to rescale")


def check_mpe_evidence(spn, X: np.ndarray, root_value: np.ndarray, n_threads) -> None:
    """:func:`check_evidence_range` for MPE on ``X``, from its max-product values: log
    p(evidence) >= the value short of the missing variables' density peaks (below 710
    each), so only rows far below -EVIDENCE_LOG_RANGE / 2 need their log-likelihood."""
    far = np.flatnonzero(root_value < -0.5 * EVIDENCE_LOG_RANGE)
    if far.size:
        check_evidence_range(spn, X[far], spn.log_likelihood(X[far], n_threads=n_threads), "X", far)
