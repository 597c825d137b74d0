"""Warnings attributed to the caller's code, not to spnc's own frames."""
from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` at the first frame outside the spnc package (its filters and
    once-per-location rule then follow the user's call, however deep spnc's own is)."""
    level, f = 2, sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        level, f = level + 1, f.f_back
    warnings.warn(message, category, stacklevel=level)


def positional_frame(name: str) -> None:
    """A DataFrame queried against a model without ``var_names``: taken by position."""
    warn_user(f"{name} has feature names, but this SPN has no variable names (var_names): its DataFrame "
              "columns are taken by position")
