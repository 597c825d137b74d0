"""spnc: sum-product networks on flat typed node arrays, with Cython/OpenMP kernels."""
import os as _os

# libgomp's default spin-wait makes short parallel kernels crawl on busy machines; a user's
# own setting wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "passive")

from importlib.metadata import PackageNotFoundError as _PNF, version as _version

try:
    __version__ = _version("pyspnc")
except _PNF:  # running from a source tree
    __version__ = "0.1.0"

from .errors import DataError, FormatError, ParameterError, ScopeError, SpncError, StructureError  # noqa: E402
from .nodes import Leaf, Node, Product, Sum  # noqa: E402
from .leaves import (Bernoulli, Categorical, ChowLiuLeaf, Gaussian, Indicator,  # noqa: E402
                     MultivariateGaussian)
from .graph import SPN, compile  # noqa: E402

__all__ = [
    "SPN", "compile", "Sum", "Product", "Leaf", "Node",
    "Bernoulli", "Categorical", "Gaussian", "MultivariateGaussian", "Indicator", "ChowLiuLeaf",
    "SpncError", "StructureError", "ScopeError", "DataError", "FormatError", "ParameterError",
    "save", "load", "to_dot", "mixture", "product",
]
from .io import load, save, to_dot  # noqa: E402
from .compose import mixture, product  # noqa: E402
