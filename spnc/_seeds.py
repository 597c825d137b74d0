"""Seeds: what a ``seed`` or ``random_state`` may be, and the integer a run uses."""
from __future__ import annotations

from typing import Union

import numpy as np

#: numpy random generators a seed may be, besides an integer
GENERATORS = (np.random.Generator, np.random.RandomState)
#: what ``seed`` / ``random_state`` take (the type hint)
SeedLike = Union[int, np.random.Generator, np.random.RandomState, None]


def seed_of(seed):
    """The integer seed (or None) a run uses: an integer or None as it is, a numpy
    ``Generator`` or ``RandomState`` drawing one (advancing it: two runs given the same
    generator differ, reproducibly, as in scikit-learn)."""
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**63))
    if isinstance(seed, np.random.RandomState):
        return int(seed.randint(2**63 - 1, dtype=np.int64))
    return seed
