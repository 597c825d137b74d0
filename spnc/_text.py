"""Wording shared by messages."""
from __future__ import annotations

import unicodedata


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


def lookalike_hint(missing, extra) -> str:
    """A hint when a name the model wants and one the data has differ only in their Unicode
    form (``'café'`` composed in one, ``e`` plus a combining accent in the other): they
    print alike, so the message would list one name as both missing and unknown."""
    nfc = {unicodedata.normalize("NFC", c): c for c in extra}
    for v in missing:
        c = nfc.get(unicodedata.normalize("NFC", v))
        if c is not None:
            return (f" ({v!r} is spelled with other Unicode characters in the data, {ascii(c)}, than in the "
                    f"model, {ascii(v)}: write the names in one Unicode normalization form, e.g. NFC)")
    return ""
