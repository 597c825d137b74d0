"""What spnc-learn accepts: complete training data whose columns fit their types and the
chosen learner, and validation/test values that are states the training data has."""
from __future__ import annotations

import argparse

import numpy as np

from ..errors import DataError
from ..learn._training import MAX_REAL
from . import _data


def check_train(tab: _data.Table, args: argparse.Namespace) -> tuple[bool, list[str], list[int]]:
    """Complete, finite data whose columns fit their types. Returns ``(discrete, types,
    binary columns to model with Bernoulli leaves after a real-valued LearnSPN)``."""
    X, names, path = tab.X, tab.names, tab.path
    if X.shape[0] == 0:
        raise DataError(f"{path}: no data rows")
    if X.shape[1] == 0:
        raise DataError(f"{path}: no columns")
    bad = np.argwhere(~np.isfinite(X))
    if bad.size:
        r, c = (int(v) for v in bad[0])
        what = "is missing" if np.isnan(X[r, c]) else f"is {num(X[r, c])}"
        n_bad = len(np.unique(bad[:, 0]))
        raise DataError(f"{tab.where(r, c)} {what}: learning needs complete training data ({n_bad} row"
                        f"{'s' * (n_bad > 1)} with missing or infinite values){tab.trailing_hint()}")
    if args.types is not None:
        types = _data.parse_types(args.types, X.shape[1])
    elif args.learner == "chowliu" or args.data_type == "discrete":
        types = ["b" if t == "b" else "c" for t in _data.infer_types(X)]
    elif args.data_type == "continuous":
        types = ["r"] * X.shape[1]
    else:
        types = _data.infer_types(X)
    try:
        _data.check_types(tab, types)
    except DataError as e:
        if args.learner == "chowliu" and args.types is None:
            raise DataError(str(e).replace("(see --types)", "(--learner chowliu needs discrete data)")) from None
        if args.types is None:
            raise DataError(str(e).replace("(see --types)", "(or give --data-type continuous)")) from None
        raise
    real = [j for j, t in enumerate(types) if t == "r"]
    if real:        # squares of the values must stay finite in Gaussian statistics
        big = np.argwhere(np.abs(X[:, real]) > MAX_REAL)
        if big.size:
            r, c = int(big[0][0]), real[int(big[0][1])]
            raise DataError(f"{tab.where(r, c)} has value {float(X[r, c])!r}: real values must be within "
                            f"+-{MAX_REAL:g} for Gaussian statistics (rescale the column)")
    cat = [j for j, t in enumerate(types) if t == "c"]
    binary = [j for j, t in enumerate(types) if t == "b"]
    col = lambda j: f"column {j + 1}" + (f" ({names[j]!r})" if names else "")  # noqa: E731
    if args.learner == "chowliu" and real:
        raise DataError(f"{path}: {col(real[0])} is real-valued: --learner chowliu needs discrete columns")
    if args.learner == "oslrau":
        if (cat or binary) and args.types is None:
            j = (binary + cat)[0]
            raise DataError(f"{path}: {col(j)} is {_data.TYPE_NAMES[types[j]]} but oSLRAU models every "
                            "column as real (Gaussian): give --types r to accept that")
        return False, types, []
    discrete = not real
    if args.learner == "learnspn" and args.leaves == "bernoulli" and (real or cat):
        for j in real + cat:
            off = np.flatnonzero((X[:, j] != 0) & (X[:, j] != 1))
            if off.size:
                r = int(off[0])
                raise DataError(f"{tab.where(r, j)} has value {num(X[r, j])}: --leaves bernoulli needs 0/1 "
                                "data (use --leaves univariate for categorical data)")
        if real:        # 0/1 values, declared real by --types
            raise DataError(f"{path}: {col(real[0])} is declared real (--types) but --leaves bernoulli "
                            "models 0/1 columns: declare it b or c, or use --leaves univariate")
    if args.learner in ("learnspn", "prometheus") and real and cat:
        raise DataError(f"{path}: {col(cat[0])} is categorical and {col(real[0])} real: "
                        f"{'LearnSPN' if args.learner == 'learnspn' else 'Prometheus'} learns "
                        "all-discrete or all-real data (binary columns may join real ones); give --types "
                        "to declare the categorical columns real")
    return discrete, types, (binary if real else [])


def check_states(tab: _data.Table, card: np.ndarray) -> None:
    """Validation/test values of discrete variables must be states seen in training
    (NaN = missing is fine)."""
    Z = tab.X
    bad = ~np.isnan(Z) & (card[None, :] > 0) & ((Z != np.round(Z)) | (Z < 0) | (Z >= card[None, :]))
    if bad.any():
        r, c = (int(v) for v in np.argwhere(bad)[0])
        raise DataError(f"{tab.where(r, c)} has value {num(Z[r, c])}, not a state of "
                        f"the variable (the training data has states 0..{int(card[c]) - 1})")


def num(v) -> str:
    v = float(v)
    return str(int(v)) if v.is_integer() else repr(v)
