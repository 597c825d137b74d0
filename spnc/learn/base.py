"""What every spnc estimator shares: scikit-learn style parameters and the queries that
delegate to the learned model ``spn_``."""
from __future__ import annotations

import contextvars
import functools
import inspect
import os
from typing import Any

import numpy as np

from .._sources import ArraySource, is_streamed, open_source, record_columns
from .._sweep import cell
from .._text import counted
from .._threads import blas_threads
from .._warn import warn_user
from ..data import as_data, attr_names, is_frame, refuse_1d, unmasked
from ..errors import DataError, NotFittedError, ParameterError
from ..graph import SPN
from ._params import GENERATORS, SeedLike, json_value, seed_of, validate_params


@functools.lru_cache(maxsize=None)
def _init_parameters(init) -> tuple[str, ...]:
    """The named parameters of an ``__init__`` (cached: learners read their settings often,
    and ``inspect.signature`` is slow)."""
    sig = inspect.signature(init)
    return tuple(p.name for p in sig.parameters.values()
                 if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))


def _with_blas_threads(fit):
    """``fit`` with BLAS held to the estimator's ``n_threads``, so that one thread means
    one thread in the learners' matrix products too."""
    @functools.wraps(fit)
    def limited(self, *args, **kwargs):
        with blas_threads(self.n_threads):
            return fit(self, *args, **kwargs)
    return limited


def _shape(X) -> tuple | None:
    """``np.shape(X)``, or None for ragged rows (refused with their row by the later check)."""
    try:
        return np.asarray(X).shape
    except ValueError:
        return None


def _ndim(X) -> int:
    shape = _shape(X)
    return 2 if shape is None else len(shape)


def check_observed(Xv: np.ndarray, name: str = "X_valid") -> None:
    """Refuse validation rows without one observed value: every model gives them
    probability 1, so a choice made on them would return the first candidate unexamined."""
    if Xv.shape[0] == 0:
        raise DataError(f"{name} has no rows")
    if Xv.size and np.isnan(Xv).all():
        raise DataError(f"{name} has no observed value (every entry is NaN): every model scores such rows "
                        "log p = 0, so validation cannot compare models")


def refuse_unscored(ll: np.ndarray, what: str, remedy: str) -> None:
    """Raise for validation rows of probability 0 under every candidate (``ll``: the
    log-likelihoods of one of them): all scores are -inf and would choose blindly."""
    zero = np.flatnonzero(ll == -np.inf)
    where = f"{cell('X_valid', 0, int(zero[0]))} has" if zero.size else "X_valid rows have"
    raise DataError(f"{where} probability zero under {what}, so validation cannot choose; {remedy}")


#: ids of the estimators whose ``fit`` is running in this context (see :func:`_fresh_fit`)
_FITTING: contextvars.ContextVar = contextvars.ContextVar("spnc_fitting", default=frozenset())


def _enter_fit(est) -> contextvars.Token | None:
    """Mark ``est`` as in ``fit``; None when it already was (a nested fit)."""
    running = _FITTING.get()
    return None if id(est) in running else _FITTING.set(running | {id(est)})


def _forget_fitted(est) -> None:
    for k in [k for k in vars(est) if k.endswith("_") and not k.startswith("__")]:
        del est.__dict__[k]


def _leave_fit(token: contextvars.Token) -> None:
    _FITTING.reset(token)


def _input_names(X, est, seen: list[str]) -> list[str] | None:
    """The column names the training data ``X`` of ``est`` has, in its own column order
    (None: it has none): a DataFrame's, a dataset's ``columns`` attribute (HDF5, Zarr, as
    a spec string or a block source), the first block's of a list of DataFrame blocks.
    Blocks from a callable or iterator are read once only: their first DataFrame block's,
    ``seen`` as the fit read it, or else the learned model's, unless it had them from a
    named ``init``."""
    if is_frame(X):
        return [str(c) for c in X.columns]
    if isinstance(X, (list, tuple)) and X and all(is_frame(b) for b in X):
        return [str(c) for c in X[0].columns]
    if isinstance(X, (str, os.PathLike)):
        try:
            with open_source(X) as src:
                return src.names
        except DataError:       # the file changed since the fit read it: no names claimed
            return None
    A = X.A if isinstance(X, ArraySource) else X
    if getattr(A, "attrs", None) is not None:
        return attr_names(A)
    if seen and is_streamed(X):
        return list(seen)
    spn = getattr(est, "spn_", None)
    if is_streamed(X) and not isinstance(X, (list, tuple)) and spn is not None \
            and getattr(getattr(est, "init", None), "var_names", None) is None:
        return spn.var_names
    return None


def _drawn_seed(est):
    """``(the estimator's random_state, swapped)``: a numpy generator given as
    ``random_state`` is replaced, for the duration of the fit, by the seed drawn from it
    (:func:`~spnc.learn._params.seed_of`), so that every use of it in the fit, nested fits
    and the recorded parameters see one integer."""
    rs = est.__dict__.get("random_state")
    if not isinstance(rs, GENERATORS):
        return rs, False
    est.random_state = seed_of(rs)
    return rs, True


def _fresh_fit(fit):
    """``fit`` that starts by forgetting every fitted (``*_``) attribute of an earlier fit,
    so that a refit, even one that fails, leaves nothing stale (such as a choice made for
    "auto" parameters), and records the training data's column names, a DataFrame's or a
    named stream's (:func:`_input_names`), as ``feature_names_in_`` (scikit-learn's
    convention). Only the outermost ``fit`` of an estimator forgets: a subclass's ``fit``
    calling ``super().fit`` keeps what it set before the call. (The wrapper refers to
    module functions only: a class defined in a function is pickled by value, wrapper
    included, to Dask workers.)"""
    @functools.wraps(fit)
    def fresh(self, *args, **kwargs):
        token = _enter_fit(self)
        if token is None:               # a nested fit of the same estimator
            return fit(self, *args, **kwargs)
        rs, swapped = _drawn_seed(self)
        try:
            _forget_fitted(self)
            refuse_1d(args[0] if args else kwargs.get("X"))
            with record_columns() as seen:
                out = fit(self, *args, **kwargs)
        finally:
            _leave_fit(token)
            if swapped:
                self.random_state = rs
        names = _input_names(args[0] if args else kwargs.get("X"), self, seen)
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        return out
    return fresh


class DensityEstimator:
    """Base class of learners. Subclasses take their hyper-parameters as keyword arguments
    of ``__init__`` (stored under the same names, nothing else), declare one constraint
    per parameter in ``_parameter_constraints`` (checked by ``fit`` through
    :meth:`_validate_params`) and set ``spn_`` and other ``*_`` attributes in ``fit``.
    A starting model, where a learner takes one, is the parameter ``init``."""

    _parameter_constraints: dict[str, list] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        names, table = set(cls._param_names()), set(cls._parameter_constraints)
        if names != table:
            raise TypeError(f"{cls.__name__}._parameter_constraints must cover exactly the parameters "
                            f"of __init__: missing {sorted(names - table)}, extra {sorted(table - names)}")
        trailing = sorted(n for n in names if n.endswith("_"))
        if trailing:         # fit drops `*_` attributes: such a parameter would be lost
            raise TypeError(f"{cls.__name__}: parameter names must not end in '_' (fitted attributes do): "
                            f"{trailing}")
        if "fit" in cls.__dict__:
            cls.fit = _fresh_fit(cls.__dict__["fit"])
        if "n_threads" in names:
            for name in ("fit", "partial_fit"):
                if name in cls.__dict__:
                    setattr(cls, name, _with_blas_threads(cls.__dict__[name]))

    def _validate_params(self) -> None:
        validate_params(self)

    def _json_params(self, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
        """The hyper-parameters as JSON values, for ``spn_.learner["params"]``."""
        return {k: json_value(v) for k, v in self.get_params(deep=False).items() if k not in exclude}

    #: scikit-learn tags: ``fit`` accepts NaN (missing values); data must be category codes
    _allow_nan = False
    _categorical_only = False

    def __sklearn_tags__(self):
        # called by scikit-learn only, so it is installed; spnc itself does not need it
        from sklearn.utils import InputTags, Tags, TargetTags
        inputs = InputTags(allow_nan=self._allow_nan, categorical=self._categorical_only)
        return Tags(estimator_type="density_estimator", target_tags=TargetTags(required=False),
                    input_tags=inputs)

    @classmethod
    def _param_names(cls) -> list[str]:
        return list(_init_parameters(cls.__init__))

    def _no_target(self, y) -> None:
        """Density estimators take no target: a 2-D ``y`` is validation rows passed by
        position, which would otherwise be ignored without a word."""
        if y is not None and _ndim(y) == 2:
            raise DataError(f"{type(self).__name__}.fit got a 2-D y, but density estimators take no "
                            "target; pass validation rows as X_valid=...")

    def _uses_valid(self, n_rows: int) -> bool:
        """Whether ``fit`` on ``n_rows`` training rows reads ``X_valid`` in this
        configuration (learners whose ``fit`` takes it and may not read it override)."""
        return True

    def _unused_valid(self, X_valid, why: str) -> None:
        """``X_valid`` that this configuration does not read: accepted unchecked, with a
        warning (scikit-learn's convention for an unused argument). Returns None, the
        validation rows the fit then has."""
        if X_valid is not None:
            warn_user(f"{type(self).__name__}.fit: X_valid is not used ({why}); it is ignored")
        return None

    def _valid_rows(self, X_valid, names):
        """A DataFrame ``X_valid`` after training rows without names: its rows by position,
        with one warning (not one per later check of it). After named training rows it
        stays a frame: the named model matches it by name, and its errors name the
        frame's own cells."""
        self._positional_valid(X_valid, names is not None)
        if not is_frame(X_valid) or names is not None:
            return X_valid
        warn_user(f"X_valid has feature names, but X has none: {type(self).__name__}.fit takes its DataFrame "
                  "columns by position")
        return as_data(X_valid, None, "X_valid", model_names=False)[0]

    def _positional_valid(self, X_valid, named: bool) -> None:
        """Warn, as a query would, when the training columns have names and ``X_valid`` is an
        array without them: its columns are taken by position. Said by the outermost fit only."""
        rows = isinstance(X_valid, np.ndarray) or (isinstance(X_valid, (list, tuple)) and not is_streamed(X_valid))
        if named and rows and len(_FITTING.get()) <= 1:       # (a list of blocks: DataFrame blocks have names)
            warn_user(f"X_valid does not have valid feature names, but X has: {type(self).__name__}.fit takes "
                      "its columns by position")

    @staticmethod
    def _check_valid(X_valid, spn: SPN | None = None, n_cols: int | None = None) -> None:
        """Refuse validation rows that cannot be scored: before learning, a 2-D array with
        another number of columns than ``n_cols`` (DataFrames are matched by name later);
        after it, anything ``spn`` refuses, and no rows."""
        if X_valid is None:
            return
        if spn is None:
            X_valid = unmasked(X_valid)     # masked cells are missing: not observed
            shape = _shape(X_valid) if isinstance(X_valid, (np.ndarray, list, tuple)) else None
            if shape is not None and len(shape) == 2 and n_cols is not None and shape[1] != n_cols:
                raise DataError(f"X_valid has {counted(shape[1], 'column')}, the training data {n_cols}")
            if isinstance(X_valid, np.ndarray) and X_valid.dtype.kind == "f":
                check_observed(X_valid)         # before the learning, not after it
            return
        from ..stream import is_streamed
        if not is_streamed(X_valid) and spn._check_X(X_valid, "X_valid").shape[0] == 0:
            raise DataError("X_valid has no rows")

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters; with ``deep``, also ``name__sub`` for the parameters
        of parameters that are estimators (scikit-learn's convention)."""
        out = {k: getattr(self, k) for k in self._param_names()}
        if deep:
            for k, v in list(out.items()):
                if hasattr(v, "get_params") and not isinstance(v, type):
                    out.update((f"{k}__{s}", x) for s, x in v.get_params(deep=True).items())
        return out

    def set_params(self, **params: Any):
        """Set constructor parameters; ``name__sub`` sets ``sub`` of the estimator
        ``name``."""
        valid = self._param_names()
        nested: dict[str, dict[str, Any]] = {}
        for k, v in params.items():
            head, sep, rest = k.partition("__")
            if head not in valid:
                raise ParameterError(k, f"invalid parameter {k!r} for {type(self).__name__}; valid: {valid}")
            if sep:
                nested.setdefault(head, {})[rest] = v
            else:
                setattr(self, k, v)
        for head, sub in nested.items():
            est = getattr(self, head)
            if not hasattr(est, "set_params"):
                raise ParameterError(head, f"{type(self).__name__}: {head} is not an estimator; cannot set "
                                           f"{', '.join(map(repr, sub))} of it")
            est.set_params(**sub)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in self.get_params(deep=False).items()) + ")"

    def _model(self) -> SPN:
        if not hasattr(self, "spn_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")
        return self.spn_

    def _query_rows(self, X, spn: SPN):
        """``X`` for a query of ``spn``, warned about as scikit-learn does: a DataFrame for a
        model without variable names (taken by position), or anything else for an
        estimator fitted on a DataFrame (taken by position too)."""
        if is_frame(X):
            if spn.var_names is None:
                warn_user(f"X has feature names, but {type(self).__name__} was fitted without feature names: "
                          "the DataFrame's columns are taken by position")
                return as_data(X, None, "X", model_names=False)[0]     # said once, not again by the SPN
        elif getattr(self, "feature_names_in_", None) is not None and attr_names(X) is None:
            warn_user(f"X does not have valid feature names, but {type(self).__name__} was fitted with feature "
                      "names: its columns are taken by position")
        return X

    def score_samples(self, X, *, n_threads: int | None = None) -> np.ndarray:
        """log p(x) per row of ``X``; NaN entries are marginalised out. A DataFrame's
        columns are matched to the model's variable names."""
        spn = self._model()
        return spn.log_likelihood(self._query_rows(X, spn), n_threads=n_threads)

    def score(self, X, y=None) -> float:
        """Mean log-likelihood of the rows of ``X``."""
        ll = self.score_samples(X)
        if ll.size == 0:
            raise DataError("X has no rows to score")
        return float(np.mean(ll))

    def sample(self, n: int, seed: SeedLike = None) -> np.ndarray:
        """Draw ``n`` rows from the learned model, reproducible for a given integer ``seed``
        (a numpy ``Generator`` or ``RandomState`` draws one)."""
        return self._model().sample(n, seed=seed)      # not int(n): 1.5 would draw 1 row
