"""Lines of delimited text data, as the console tools read them (docs/cli.md): the
decoding, a first ``sep=`` line, and each line's cells, a comment or blank line told apart
from a data row."""
from __future__ import annotations

import codecs
import csv
import re
import shlex

from ..errors import DataError
from ._magic import refuse_binary

# '#N/A' and '#NA': a spreadsheet's "not available" (pandas reads them as missing too)
MISSING = frozenset({"", "?", "nan", "NaN", "NAN", "NA", "na", "N/A", "n/a", "#N/A", "#NA", "#N/A N/A"})
# a spreadsheet's error values: a line starting with one is data, not a comment
_SHEET_ERRORS = frozenset({"#NULL!", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#SPILL!", "#CALC!",
                           "#FIELD!", "#GETTING_DATA", "#BLOCKED!", "#CONNECT!", "#BUSY!", "#UNKNOWN!"})
_SHOW = {"\t": "tab", " ": "space"}


def _decode(raw: bytes, path: str, encoding: str | None) -> tuple[str, int]:
    """The encoding to read ``raw`` with and its number of lines; a byte sequence that is
    not valid in it is an error naming the line."""
    refuse_binary(raw, path)
    if encoding:
        encoding = _given(raw, path, encoding)
    elif raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):   # before UTF-16: FF FE starts both
        encoding = "utf-32"
    elif raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
        if b"\x00" in raw[:4096]:
            raise DataError(f"{path}: contains NUL bytes: not a text file (UTF-16 without a "
                            "byte-order mark? give --encoding utf-16-le)")
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        shown = "utf-8" if encoding == "utf-8-sig" else encoding
        raise DataError(f"{path}: line {line}: byte 0x{raw[e.start]:02x} is not valid {shown} "
                        "(give --encoding, e.g. --encoding latin-1)") from None
    return encoding, text.count("\n") + text.count("\r") + 1    # an upper bound on the rows


_BOMS = {"utf-8": codecs.BOM_UTF8, "utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE,
         "utf-32-le": codecs.BOM_UTF32_LE, "utf-32-be": codecs.BOM_UTF32_BE}


def _given(raw: bytes, path: str, encoding: str) -> str:
    """The codec to read ``raw`` with for ``--encoding encoding``: a byte-order mark the
    file starts with is no text (it was the first name's first character), and UTF-16 or
    UTF-32 without a byte order (the stream decoder's traceback) needs one."""
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        raise DataError(f"unknown --encoding {encoding!r}") from None
    if name in ("utf-16", "utf-32"):
        if not raw.startswith((_BOMS[name + "-le"], _BOMS[name + "-be"])):
            raise DataError(f"{path}: does not start with a byte-order mark, which --encoding {encoding} needs: "
                            f"give --encoding {name}-le (as Windows writes it) or {name}-be")
        return name
    if name in _BOMS and raw.startswith(_BOMS[name]):
        return "utf-8-sig" if name == "utf-8" else name[:6]       # 'utf-16': reads the mark and drops it
    return encoding


def _isnum(t: str) -> bool:
    try:
        float(t)
        return True
    except ValueError:
        return False


def _sep_line(text, d: str, given: bool, label: str) -> tuple[str, int]:
    """``(delimiter, lines read)``: a first line ``sep=;`` (a spreadsheet's directive, as
    Excel reads and writes it) names the delimiter and is no data; else ``(d, 0)`` with
    the stream where it was. A ``--delimiter`` (``given``) other than it is an error."""
    m = re.fullmatch(r"sep=(.)", text.readline(16).rstrip("\r\n"))
    if m is None:
        text.seek(0)
        return d, 0
    named = m.group(1)
    if given and named != d:
        show = lambda c: _SHOW.get(c, repr(c))      # noqa: E731
        raise DataError(f"{label}: line 1 'sep={named}' names {show(named)} as the delimiter, but --delimiter "
                        f"{show(d)} was given: drop one of them")
    return named, 1


def _records(stream, d: str, label: str, inner_blank: list[int], lead: list, skip: int = 0,
             later: "RowComments | None" = None):
    """``(line number, cells)`` of the non-blank, non-comment lines of a text stream; the
    first blank line before one of them is appended to ``inner_blank``, the comment lines
    before the first one to ``lead`` (as ``(line number, _Comment)``), those after it that
    read as a row as wide as it to ``later``."""
    blank, width = None, 0
    for k, toks in _lines(stream, d, label, skip):
        if isinstance(toks, _Comment):
            if not width:
                lead.append((k, toks))
            elif later is not None:
                later.note(k, toks, width)
            continue
        if toks is None:
            blank = k if blank is None else blank
            continue
        width = width or len(toks)
        if blank is not None and not inner_blank:
            inner_blank.append(blank)
        blank = None
        yield k, toks


class RowComments:
    """The comment lines that read as data rows but for their ``#`` (a row commented out,
    or a first column of IDs like ``#5``): counted, the first one kept for messages."""
    __slots__ = ("count", "line", "cell")

    def __init__(self):
        self.count, self.line, self.cell = 0, 0, ""

    def note(self, k: int, com: "_Comment", width: int) -> None:
        """Count comment line ``k`` if it reads as a row of ``width`` cells."""
        raw, cells = com.raw, com.cells
        for rest in (raw[1:] if width > 1 and len(raw) == width else None,
                     cells if len(cells) == width else None):     # '# 1 2 3' split on blanks
            if rest and all(t in MISSING or _isnum(t) for t in rest) and any(map(_isnum, rest)):
                if not self.count:
                    self.line, self.cell = k, raw[0]
                self.count += 1
                return

    def what(self, skipped: bool = False) -> str:
        """Which lines were counted and how to read them; "" when none was."""
        if not self.count:
            return ""
        one, cell = self.count == 1, self.cell[:20]
        ids = (f" (if {cell!r} is an ID, drop that column: it is not data)"
               if len(cell) > 1 and not cell[1].isspace() else "")
        return ((f"line {self.line} starts with '#' but reads as a data row" if one else
                 f"{self.count} lines starting with '#' read as data rows but for the '#' (the first: "
                 f"line {self.line})")
                + (f", and {'is' if one else 'are'} skipped as {'a comment' if one else 'comments'}"
                   if skipped else "")
                + f": remove the '#' to read {'it' if one else 'them'}{ids}")


class _Comment:
    """A comment line's cells, the ``#`` and the spaces around each cell removed
    (``raw``: with the ``#``)."""
    __slots__ = ("cells", "raw")

    def __init__(self, toks: list[str]):
        cells = [t.strip() for t in toks]
        self.raw = list(cells)
        cells[0] = cells[0][1:].strip()
        self.cells = cells[1:] if not cells[0] and len(cells) > 1 else cells   # '# a b c' split on blanks


def _lines(stream, d: str, label: str, skip: int = 0):
    """``(line number, cells)`` of each line after the ``skip`` lines already read: cells
    None for a blank line, a :class:`_Comment` for a comment line."""
    if len(d) == 1 and d != " ":
        reader = csv.reader(stream, delimiter=d)
        try:
            for toks in reader:
                if not toks or (len(toks) == 1 and not toks[0].strip()):
                    yield reader.line_num + skip, None
                else:
                    yield reader.line_num + skip, _Comment(toks) if _is_comment(toks[0]) else toks
        except csv.Error as e:
            raise DataError(f"{label}: line {reader.line_num + skip}: {e}") from None
    else:
        for k, ln in enumerate(stream, 1 + skip):
            ln = ln.rstrip("\r\n")
            if not ln.strip():
                yield k, None
                continue
            toks = ln.split(d) if d != " " else ln.split() if '"' not in ln or ln.lstrip().startswith("#") \
                else _blank_split(ln, label, k)
            yield k, _Comment(toks) if _is_comment(toks[0]) else toks


def _is_comment(cell: str) -> bool:
    """Whether a line whose first cell is ``cell`` is a comment: it starts with ``#`` and is
    not a spreadsheet's not-available or error value (``#N/A``, ``#DIV/0!``), a data cell."""
    cell = cell.strip()
    return cell.startswith("#") and cell not in MISSING and cell not in _SHEET_ERRORS


def _blank_split(line: str, label: str, k: int) -> list[str]:
    """Cells of a blank-delimited line with quoted cells ("1", "age group"), as CSV quoting
    reads them with the other delimiters."""
    try:
        return shlex.split(line, posix=True)
    except ValueError as e:              # an unclosed quote
        raise DataError(f"{label}: line {k}: {e}") from None
