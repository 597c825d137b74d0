"""Hyper-parameters given as ``"auto"``: chosen on an internal validation split.

An estimator lists candidates in ``_auto_candidates = {name: [values]}``. When ``fit``
finds parameters equal to ``"auto"``, :func:`fit_auto` holds out a random tenth of the
training rows (seeded by ``random_state``), fits one copy per combination of candidates
on the rest, keeps the combination with the best held-out log-likelihood and refits it
on all rows (with fewer than ``MIN_ROWS`` rows nothing can be held out, and the first
candidate of each parameter is used). The test data is never involved; the choice is in
``auto_params_``."""
from __future__ import annotations

import itertools

import numpy as np

from .._sweep import resampled_rows
from ..errors import DataError
from ._params import Options

AUTO = Options("auto")
#: fewer training rows than this: no held-out tenth, the first candidate of each parameter
MIN_ROWS = 20


def auto_names(est) -> list[str]:
    """Parameters of ``est`` set to ``"auto"`` that its configuration uses (an estimator
    may name unused ones in ``_auto_unused()``, e.g. a GVS threshold under EBVS)."""
    unused = est._auto_unused() if hasattr(est, "_auto_unused") else set()
    return [k for k, v in est.get_params(deep=False).items()
            if isinstance(v, str) and v == "auto" and k in getattr(est, "_auto_candidates", {}) and k not in unused]


def fit_auto(est, X, sample=None, fixed: dict | None = None, ids=0, **fit_kwargs):
    """Choose the ``"auto"`` parameters of ``est`` on held-out rows (of ``sample`` when
    given: the rows in memory when ``X`` streams from a file), then fit ``est`` on all of
    ``X`` with them (its parameters keep the value ``"auto"``). ``fixed``: parameters of
    the candidates only (e.g. the whole data's cardinality, so that a state seen only in
    the held-out rows does not fail every candidate). ``ids``: the row of ``X`` of each
    row of ``sample`` (0: ``sample`` is ``X``'s rows in order), for the candidates' errors."""
    names = auto_names(est)
    A = np.asarray(X if sample is None else sample)
    if A.ndim != 2:
        raise DataError(f"X must be a 2-D array of rows, got shape {A.shape}")
    if A.shape[0] < MIN_ROWS:       # too few rows to hold any out: the first candidates
        first = {k: est._auto_candidates[k][0] for k in names}
        return _refit(est, est.get_params(deep=False), first, [(first, float("nan"))], names, X, fit_kwargs)
    rng = np.random.default_rng(getattr(est, "random_state", None))
    order = rng.permutation(A.shape[0])
    hold = max(2, A.shape[0] // 10)
    kept = np.sort(order[hold:])
    train, valid = A[kept], A[np.sort(order[:hold])]
    params = est.get_params(deep=False)
    scores = []
    for combo in itertools.product(*(est._auto_candidates[k] for k in names)):
        choice = dict(zip(names, combo))
        try:
            # errors of a candidate name the rows of X (not of its part), as a fit on X does
            with resampled_rows(kept + ids if np.ndim(ids) == 0 else np.asarray(ids)[kept]):
                score = type(est)(**{**params, **(fixed or {}), **choice}).fit(train).score(valid)
        except DataError:        # e.g. a held-out state unseen in training: this choice loses
            score = -np.inf
        scores.append((choice, float(score)))
    best = max(scores, key=lambda cs: cs[1])[0]
    return _refit(est, params, best, scores, names, X, fit_kwargs)


def _refit(est, params: dict, best: dict, scores: list, names: list[str], X, fit_kwargs: dict):
    final = type(est)(**{**params, **best}).fit(X, **fit_kwargs)
    keep = set(params)
    est.__dict__.update({k: v for k, v in vars(final).items() if k not in keep})
    est.auto_params_ = best
    est.auto_scores_ = scores
    spn = getattr(est, "spn_", None)
    if spn is not None and isinstance(spn.learner.get("params"), dict):
        spn.learner["params"]["auto"] = {"chosen": best, "candidates": {k: list(est._auto_candidates[k])
                                                                         for k in names}}
    return est
