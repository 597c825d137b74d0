"""Memory guards: refuse, with one clear error, work whose allocations would exceed a stated
budget instead of letting the OS kill the process.

The budget is ``SPNC_MEMORY_BUDGET`` (bytes, or with a K/M/G/T suffix; default 4G).
"""
from __future__ import annotations

import os

import numpy as np

from .errors import DataError, StructureError

DEFAULT_BUDGET = 4 << 30
#: most variables a model may index (int32 scopes; also bounded by the memory budget)
MAX_VARS = 2**31 - 1
#: the console tools take an integer-valued column as categorical up to this many states
MAX_INFERRED_STATES = 1000


def budget() -> int:
    """The memory budget in bytes."""
    raw = os.environ.get("SPNC_MEMORY_BUDGET", "").strip().upper().removesuffix("B")
    if not raw:
        return DEFAULT_BUDGET
    mult = 1
    if raw[-1] in "KMGT":
        mult = 1024 ** ("KMGT".index(raw[-1]) + 1)
        raw = raw[:-1]
    try:
        return int(float(raw) * mult)
    except ValueError:
        return DEFAULT_BUDGET


def human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.1f} {unit}" if unit != "B" else f"{int(nbytes)} B"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"  # pragma: no cover


def check(nbytes: float, what: str, hint: str = "", error=DataError) -> None:
    """Raise ``error`` if ``nbytes`` exceeds the budget."""
    b = budget()
    if nbytes > b:
        msg = (f"{what} would need {human(nbytes)}, above the memory budget of {human(b)} "
               "(SPNC_MEMORY_BUDGET)")
        raise error(msg + (f"; {hint}" if hint else ""))


def check_n_vars(n_vars: int) -> None:
    """A model over ``n_vars`` variables (the largest variable index + 1)."""
    if n_vars > MAX_VARS:
        raise StructureError(f"variable index {n_vars - 1} is above the limit {MAX_VARS - 1}")
    check(32.0 * n_vars, f"a model over {n_vars} variables (largest variable index {n_vars - 1})",
          "variables are numbered 0, 1, 2, ... by column", error=StructureError)


def check_pairwise(cardinality: np.ndarray, what: str = "pairwise statistics") -> None:
    """Pairwise tables over discrete variables (mutual information, G-tests, Chow-Liu):
    about 48 d^2 bytes (measured: LearnSPN on 2000 binary columns, 45 bytes per pair), plus
    8 (sum of states)^2 for the one-hot co-occurrences of non-binary variables."""
    card = np.asarray(cardinality, dtype=np.float64)
    d, tot = float(card.size), float(card.sum())
    need = 48.0 * d * d + (0.0 if np.all(card <= 2) else 8.0 * tot * tot)
    kmax = int(card.max()) if card.size else 0
    hint = (f"column {int(np.argmax(card))} has {kmax} states: treat wide integer columns as real-valued "
            "(data_type='continuous', or --types r on the command line) or recode them"
            if kmax > MAX_INFERRED_STATES else "use fewer columns")
    check(need, f"{what} over {int(d)} variables with {int(tot)} states in all", hint)
