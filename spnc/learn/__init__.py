"""Learners, as scikit-learn style estimators: ``fit(X)``, ``score_samples(X)``,
``score(X)``, ``sample(n)``; the learned model is the compiled :class:`spnc.SPN` in ``spn_``."""
from .bagging import BaggedSPN  # noqa: F401
from .chowliu import ChowLiuTree  # noqa: F401
from .em import EM  # noqa: F401
from .learnspn import LearnSPN  # noqa: F401
from .merge import Merge  # noqa: F401
from .oslrau import OSLRAU  # noqa: F401
from .prometheus import Prometheus  # noqa: F401
from .treespn import TreeSPN  # noqa: F401

__all__ = ["BaggedSPN", "ChowLiuTree", "EM", "LearnSPN", "Merge", "OSLRAU", "Prometheus", "TreeSPN"]
