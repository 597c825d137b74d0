"""Wording shared by messages."""
from __future__ import annotations


def counted(n, noun: str, plural: str | None = None) -> str:
    """``"1 column"``, ``"3 columns"``: ``n`` and ``noun`` in the number it takes."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def check_unique(names, error) -> None:
    """Raise ``error(name, first, again)`` for the first name that repeats an earlier one
    (``first``, ``again``: the positions of the two); names compare as given."""
    seen: dict = {}
    for j, n in enumerate(names):
        i = seen.setdefault(n, j)
        if i != j:
            raise error(n, i, j)
