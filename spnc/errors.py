"""Exceptions spnc raises on purpose. Each subclasses the builtin callers already catch."""


class SpncError(Exception):
    """Base of every error spnc raises on purpose."""


class StructureError(SpncError, ValueError):
    """Node arrays or construction objects do not describe a valid SPN."""


class ScopeError(StructureError):
    """Completeness or decomposability is violated."""


class DataError(SpncError, ValueError):
    """Input data has the wrong shape, dtype or values."""


class FormatError(SpncError, ValueError):
    """A model file does not follow the spnc format (formats/spnc-hdf5.md)."""


class NotFittedError(SpncError, ValueError, AttributeError):
    """An estimator was queried before ``fit`` (both builtins, as scikit-learn's own)."""


class ParameterError(SpncError, ValueError):
    """An estimator's hyper-parameter is invalid; ``param`` names it."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param

    def __reduce__(self):
        # both arguments, so the error survives pickling (worker processes, joblib, Dask)
        return type(self), (self.param, str(self))


class ScaleWarning(UserWarning):
    """Real training columns vary less than the std floor of Gaussian leaves, which then
    sets their spread (every row gets nearly the same likelihood)."""
