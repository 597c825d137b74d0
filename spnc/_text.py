"""Wording shared by messages."""
from __future__ import annotations


def counted(n, noun: str, plural: str | None = None) -> str:
    """``"1 column"``, ``"3 columns"``: ``n`` and ``noun`` in the number it takes."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
