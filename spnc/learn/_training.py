"""Training data for the top-down learners (LearnSPN, Prometheus): one matrix, checked,
as discrete codes or as finite reals."""
from __future__ import annotations

import numpy as np

from .. import _budget
from .._kinds import MAX_REAL
from .._sweep import row_number
from ..chowliu import check_codes
from ..data import real_array
from ..errors import DataError, ParameterError
from ._params import setting



def bounded_vars(spn) -> np.ndarray:
    """The variables of leaves whose type bounds its training values (``max_abs_value``:
    Gaussian statistics square them), for :func:`check_real_range`."""
    sc = [s for t in spn.leaf_tables.values() if t.max_abs_value is not None for s in t.scopes]
    return np.unique(np.concatenate(sc)).astype(np.int64) if sc else np.zeros(0, dtype=np.int64)


def check_real_range(F: np.ndarray, row0=0, cols=None) -> None:
    """Refuse real training values whose squares Gaussian statistics cannot hold (rows
    named as :func:`spnc._sweep.row_number` does; ``cols``: only these columns)."""
    cols = np.arange(F.shape[1]) if cols is None else np.asarray(cols, dtype=np.int64)
    if cols.size == 0:
        return
    with np.errstate(invalid="ignore"):     # NaN (missing) passes
        big = np.argwhere(np.abs(F[:, cols]) > MAX_REAL)
    if big.size:
        r, c = big[0][0], cols[big[0][1]]
        raise DataError(f"X[{row_number(row0, r)}, {c}] = {float(F[r, c])!r}: real values must be within "
                        f"+-{MAX_REAL:g} for Gaussian statistics (rescale the column)")


def is_continuous(A: np.ndarray, data_type: str) -> bool:
    """Whether a learner reads ``A`` as real values: ``data_type="continuous"``, or "auto"
    and float data with a non-integer value (NaN and inf are judged by the path taken)."""
    if data_type != "auto" or not np.issubdtype(A.dtype, np.floating):
        return data_type == "continuous"
    with np.errstate(invalid="ignore"):
        return bool(np.any(np.isfinite(A) & (A != np.round(A))))


def prepare(X, data_type: str, cardinality, learner: str, row0=0) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(data, cardinality, continuous)``. ``data_type="auto"``: float data with a
    non-integer value is continuous, anything else discrete codes. Errors name rows as
    :func:`spnc._sweep.row_number` does (``row0``: the input row of each row of a sample)."""
    A = real_array(X)
    if A.ndim != 2 or A.shape[0] == 0 or A.shape[1] == 0:
        raise DataError(f"X must be a non-empty 2-D array (n_rows, n_vars), got shape {A.shape}")
    continuous = is_continuous(A, data_type)
    if not continuous:
        try:
            codes, card, _ = check_codes(A, cardinality, row0=row0)
        except DataError as e:
            # the hint only where reading X as reals could take it: not for NaN or inf (real
            # training data must be finite too), nor with a cardinality (discrete only)
            if data_type != "auto" or not np.issubdtype(A.dtype, np.floating) or cardinality is not None \
                    or not np.isfinite(A).all():
                raise
            # e.g. reals of magnitude above 2**53, all of them integers as floats
            raise DataError(f"{e} ({setting('data_type', 'auto')} read X as discrete codes, every value being a "
                            f"whole number; give {setting('data_type', 'continuous')} for real values)") from None
        return codes, card, False
    if cardinality is not None:
        raise ParameterError("cardinality", f"{learner}: cardinality applies to discrete data only")
    d = A.shape[1]
    _budget.check(48.0 * d * d, f"pairwise statistics over {d} real variables", "use fewer columns")
    F = np.ascontiguousarray(A, dtype=np.float64)
    bad = np.argwhere(~np.isfinite(F))
    if bad.size:
        r, c = bad[0]
        raise DataError(f"X[{row_number(row0, r)}, {c}] = {float(F[r, c])!r}: training data must be finite "
                        "(no NaN or inf)")
    check_real_range(F, row0)
    return F, np.zeros(d, dtype=np.int64), True
