"""spnc: sum-product networks on flat typed node arrays, with Cython/OpenMP kernels."""
from importlib.metadata import PackageNotFoundError as _PNF, version as _version

try:
    __version__ = _version("pyspnc")
except _PNF:  # running from a source tree
    __version__ = "0.1.0"

from importlib.util import find_spec as _find_spec  # noqa: E402

if _find_spec("spnc._graph") is None:  # a source tree without its build, e.g. the cwd
    raise ImportError(
        f"spnc's compiled extensions are missing from {__path__[0]}: this is a source tree "
        "that was not built in place (Python imports it because it is the current directory). "
        "Run from another directory, or install with `pip install -e .` to build it here.")

from .errors import (DataError, FormatError, NotFittedError, ParameterError, ScaleWarning,  # noqa: E402
                     ScopeError, SpncError, StructureError)
from .nodes import Leaf, Node, Product, Sum  # noqa: E402
from .leaves import (Bernoulli, Categorical, ChowLiuLeaf, Gaussian, Indicator,  # noqa: E402
                     MultivariateGaussian)
from .graph import SPN, compile  # noqa: E402

__all__ = [
    "SPN", "compile", "Sum", "Product", "Leaf", "Node",
    "Bernoulli", "Categorical", "Gaussian", "MultivariateGaussian", "Indicator", "ChowLiuLeaf",
    "SpncError", "StructureError", "ScopeError", "DataError", "FormatError", "ParameterError",
    "NotFittedError", "ScaleWarning",
    "save", "load", "to_dot", "mixture", "product",
]
from .io import load, save, to_dot  # noqa: E402
from .compose import mixture, product  # noqa: E402
