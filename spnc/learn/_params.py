"""Hyper-parameter constraints: each estimator declares one table
``_parameter_constraints = {name: [constraint, ...]}`` and ``fit`` checks it with
:func:`validate_params`, which raises one :class:`~spnc.errors.ParameterError` naming the
parameter. A value is valid when any constraint of its list accepts it; ``None`` in a list
admits ``None``.

Messages name a parameter with :func:`pname` / :func:`setting`: in Python's spelling
(``splitter='correlation'``), or, inside :func:`options_named` (the console tools), as the
command-line option that sets it (``--splitter correlation``)."""
from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import os
from typing import Any, Callable

import numpy as np

from .._seeds import GENERATORS, SeedLike, seed_of  # noqa: F401  (the learners import them from here)
from ..errors import ParameterError


#: parameter name -> the command-line option that sets it, while a console tool runs
_OPTIONS: contextvars.ContextVar = contextvars.ContextVar("spnc_option_names", default=None)


@contextlib.contextmanager
def options_named(flags: dict[str, str]):
    """Within this block, messages name the parameters in ``flags`` as those options."""
    token = _OPTIONS.set(dict(flags))
    try:
        yield
    finally:
        _OPTIONS.reset(token)


def _flag(name: str) -> str | None:
    flags = _OPTIONS.get()
    return None if flags is None else flags.get(name)


def pname(name: str) -> str:
    """``name`` as the user set it: the parameter, or its command-line option."""
    return _flag(name) or name


def pvalue(v: Any, name: str) -> str:
    """A value of parameter ``name`` as the user wrote it (``repr`` for Python)."""
    if _flag(name) is None:
        return repr(v)
    if isinstance(v, float):
        return f"{v:g}"
    return " ".join(pvalue(x, name) for x in v) if isinstance(v, (list, tuple)) else str(v)


def setting(name: str, v: Any) -> str:
    """``name='value'`` in Python, ``--name value`` on the command line."""
    flag = _flag(name)
    return f"{name}={v!r}" if flag is None else f"{flag} {pvalue(v, name)}"


class Constraint:
    """A named predicate; ``text`` completes "must be ..." (a callable: text for a
    parameter name, for values spelled as the user writes them)."""

    c_int = False      # an integer range (values go to C ints)

    def __init__(self, ok: Callable[[Any], bool], text: str | Callable[[str], str],
                 hint: Callable[[Any], str] | None = None):
        self.ok, self.text, self.hint = ok, text, hint

    def describe(self, name: str) -> str:
        return self.text(name) if callable(self.text) else self.text


#: integer parameters go to C ints in the kernels: larger values are refused here
MAX_INT = 2**31 - 1


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and abs(int(v)) <= MAX_INT


def _is_real(v) -> bool:
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:                        # an int beyond the float range
        return False


def Interval(kind: type, lo=None, hi=None, closed: str = "both") -> Constraint:
    """Integers (``kind=int``) or finite reals (``kind=float``) in ``[lo, hi]``;
    ``closed`` is ``"both"``, ``"left"``, ``"right"`` or ``"neither"``."""
    typed = _is_int if kind is int else _is_real
    lo_in, hi_in = closed in ("both", "left"), closed in ("both", "right")

    def ok(v) -> bool:
        if not typed(v):
            return False
        # a Python number: numpy scalars would cast the bound to their type (1e150 to a
        # float32 overflows, with a RuntimeWarning)
        v = int(v) if kind is int else float(v)
        if lo is not None and (v < lo or (v == lo and not lo_in)):
            return False
        return hi is None or not (v > hi or (v == hi and not hi_in))
    what = "an integer" if kind is int else "a finite number"
    bounds = []
    if lo is not None:
        bounds.append(f"{'>=' if lo_in else '>'} {lo}")
    if hi is not None:
        bounds.append(f"{'<=' if hi_in else '<'} {hi}")
    c = Constraint(ok, what + (" " + " and ".join(bounds) if bounds else ""))
    c.c_int = kind is int
    return c


def _same_kind(v, x) -> bool:
    """Whether ``v`` may equal the option ``x``: strings only match strings, bools bools and
    numbers numbers (``True == 1`` is no match), numpy scalars as their Python kind."""
    for kind in (str, (bool, np.bool_)):
        if isinstance(x, kind) or isinstance(v, kind):
            return isinstance(x, kind) and isinstance(v, kind)
    if isinstance(x, numbers.Number):
        return isinstance(v, numbers.Number)
    return type(v) is type(x)


def Options(*values) -> Constraint:
    """One of ``values`` (compared with ``==``, each with values of its kind only)."""
    return Constraint(lambda v: any(_same_kind(v, x) and v == x for x in values),
                      lambda name: ("one of " if len(values) > 1 else "") + ", ".join(pvalue(x, name) for x in values))


def Instance(*classes: type, name: str | None = None, hint: Callable[[Any], str] | None = None) -> Constraint:
    return Constraint(lambda v: isinstance(v, classes), name or " or ".join(c.__name__ for c in classes), hint)


def _is_estimator(v) -> bool:
    return hasattr(v, "get_params") and hasattr(v, "fit") and not isinstance(v, type)


def model_hint(v, name: str | None = "init") -> str:
    """How to pass what was meant for a compiled SPN (the parameter ``name``): a fitted
    estimator's ``spn_``, a model file loaded first."""
    to = f"{name}=" if name else ""
    if _is_estimator(v):
        return f" (pass the model it learned, {to}est.spn_" + ("" if hasattr(v, "spn_") else ", after fitting it") + ")"
    if isinstance(v, (str, os.PathLike)):
        return f" (load the file first: {to}spnc.load({str(v)!r}))"
    return ""


BOOL = Constraint(lambda v: isinstance(v, (bool, np.bool_, numbers.Integral)) and v in (0, 1), "a bool")
CALLABLE = Constraint(callable, "a callable")
#: seeds reach numpy and the kernels as unsigned 64-bit integers, not C ints
RANDOM_STATE = Constraint(lambda v: isinstance(v, GENERATORS) or (
    isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= int(v) <= 2**64 - 1),
    "an integer >= 0 and <= 2**64 - 1, a numpy Generator or a RandomState")
N_THREADS = Constraint(lambda v: _is_int(v) and v != 0, "a non-zero integer (-1: all cores)")
N_THREADS.c_int = True
#: a Gaussian leaf's std floor: its square must stay finite (as real training values do)
MIN_STD = Interval(float, 0, 1e150, closed="right")
ARRAY_LIKE = Constraint(lambda v: hasattr(v, "__len__") and not isinstance(v, (str, bytes)), "a sequence")


def json_value(v: Any) -> Any:
    """A hyper-parameter as a JSON value: numpy scalars and arrays as Python ones,
    non-finite floats as strings (JSON has no inf/nan), other objects as their repr."""
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    return repr(v)


def validate_params(est) -> None:
    """Check every hyper-parameter of ``est`` against its class's table."""
    table = type(est)._parameter_constraints
    for name, allowed in table.items():
        v = getattr(est, name)
        if v is None and None in allowed:
            continue
        if any(c is not None and c.ok(v) for c in allowed):
            continue
        texts = [c.describe(name) for c in allowed if c is not None]
        hint = next((h for h in (c.hint(v) for c in allowed if c is not None and c.hint) if h), "")
        if None in allowed and _flag(name) is None:      # an option left out is None
            texts.append("None")
        big = isinstance(v, numbers.Integral) and not isinstance(v, bool) and abs(int(v)) > MAX_INT and \
            any(getattr(c, "c_int", False) for c in allowed)
        shown = f"a {type(v).__name__} estimator" if _is_estimator(v) else pvalue(v, name)    # not its repr
        raise ParameterError(name, f"{type(est).__name__}: {pname(name)} must be {' or '.join(texts)}, "
                                   f"got {shown}" + (f" (integers beyond +-{MAX_INT} are not supported)"
                                                     if big else "") + hint)
