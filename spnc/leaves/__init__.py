"""Leaf types. Each module registers its table type with :func:`base.register_leaf`;
importing it is all it takes to make a new leaf type known to the core, the files and the CLI."""
from .base import LeafType, leaf_type_by_code, leaf_type_by_name, leaf_types, register_leaf  # noqa: F401
from .univariate import Bernoulli, Categorical, Gaussian, Indicator  # noqa: F401
from .mvgaussian import MultivariateGaussian  # noqa: F401
from .cltree import ChowLiuLeaf  # noqa: F401
