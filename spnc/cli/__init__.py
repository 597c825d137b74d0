"""Console tools: ``spnc-convert`` (spnc.cli.convert), ``spnc-eval`` (spnc.cli.evaluate),
``spnc-learn`` (spnc.cli.learn), ``spnc-info`` (spnc.cli.info), ``spnc-merge``
(spnc.cli.merge), ``spnc-compose`` (spnc.cli.compose) and ``spnc-demo`` (spnc.cli.demo).
Each module defines ``main(argv=None) -> int`` and ``_parser()``.

One vocabulary across tools: ``-q/--quiet``, ``--json`` (a machine-readable summary on
stdout), ``--n-threads`` (``--threads`` is a hidden alias), ``-`` for stdin/stdout, and the
data options of :func:`add_data_options`. Exit status: 0 success, 2 bad input (one line
``PROG: error: ...`` on stderr), 128 + N when stopped by signal N (outputs untouched),
141 when the reader of stdout went away (silently).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from typing import Any, Callable

from .._atomic import Interrupted, signals_as_exceptions
from .._progress import cli_logging, cli_logging_done
from ..errors import SpncError

#: help of a model-file argument: spnc's own formats and the importers' (docs/interop.md)
MODEL_HELP = ("model file (.h5, .hdf5, .json, or another library's: .spflow, .spflow.json, "
              ".deeprob.json, .sparc.json)")


def add_common(p: argparse.ArgumentParser, *, threads: bool = True, json_summary: bool = True) -> None:
    """``-q``, ``--json`` and ``--n-threads`` (with the hidden alias ``--threads``)."""
    p.add_argument("-q", "--quiet", action="store_true",
                   help="nothing on stderr but errors (no progress, no notes)")
    if json_summary:
        p.add_argument("--json", action="store_true",
                       help="print a machine-readable JSON summary on stdout instead of text")
    if threads:
        p.add_argument("--n-threads", dest="n_threads", type=int, metavar="N", default=None,
                       help="threads of the kernels (-1: all cores; default: by problem size)")
        p.add_argument("--threads", dest="n_threads", type=int, help=argparse.SUPPRESS)


def add_data_options(p: argparse.ArgumentParser) -> None:
    """How data files are read (see docs/cli.md)."""
    g = p.add_argument_group("reading data (CSV/TSV, .npy, HDF5 --dataset, Parquet; - = stdin)")
    g.add_argument("--dataset", help="dataset name inside HDF5 data files")
    g.add_argument("--delimiter", help="text delimiter: a character, 'tab' or 'space' "
                   "(default ',' or tab for .tsv)")
    g.add_argument("--encoding", help="text encoding (default UTF-8; UTF-16 and UTF-32 with a byte-order "
                   "mark are recognised)")
    hdr = g.add_mutually_exclusive_group()
    hdr.add_argument("--header", dest="header", action="store_const", const=True, default=None,
                     help="the first row is a header (default: only when every cell of it is a name)")
    hdr.add_argument("--no-header", dest="header", action="store_const", const=False,
                     help="the first row is data")
    g.add_argument("--by-position", action="store_true",
                   help="use columns in order even when the header's names differ from the model's")


def seed_value(s: str) -> int:
    """argparse type: a random seed, an integer in [0, 2**64)."""
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{s!r} is not a whole number") from None
    if not 0 <= v < 2**64:
        raise argparse.ArgumentTypeError(f"needs a whole number in [0, 2**64), got {s}")
    return v


def positive_count(limit: int = 10**12) -> Callable[[str], int]:
    """argparse type: an integer >= 1 (``1e6`` accepted) and at most ``limit``."""
    def parse(s: str) -> int:
        try:
            v = float(s)
        except ValueError:
            v = math.nan
        if math.isnan(v):
            raise argparse.ArgumentTypeError(f"{s!r} is not a number")
        if v > limit:          # 1e400 too: it reads as infinity
            raise argparse.ArgumentTypeError(f"{s} is too large (at most {limit})")
        if v < 1:
            raise argparse.ArgumentTypeError(f"needs a whole number >= 1, got {s}")
        if not v.is_integer():
            raise argparse.ArgumentTypeError(f"{s} is not a whole number")
        return int(v)
    return parse


def print_json(obj: Any) -> None:
    write_stdout(json.dumps(obj, allow_nan=False, default=_jsonable) + "\n")


def write_stdout(text: str) -> None:
    """Write all of ``text`` to stdout, or raise :class:`BrokenPipeError`. A large write
    to a pipe whose reader has gone comes back short from CPython's buffered writer, with
    no error: the rest would be dropped and the tool would exit 0 (not 141), so write
    until every byte is taken."""
    out = sys.stdout
    buf = getattr(out, "buffer", None)
    if buf is None:                 # a text-only stream (a test's StringIO)
        out.write(text)
        out.flush()
        return
    out.flush()
    data = memoryview(text.encode(out.encoding or "utf-8", out.errors or "strict"))
    while data:
        n = buf.write(data)
        if not n:
            raise BrokenPipeError(32, "standard output takes no more data")
        data = data[n:]
    buf.flush()


def _jsonable(v: Any) -> Any:
    import numpy as np
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def finite(x: float) -> float | None:
    """JSON has no NaN/inf: those become null."""
    import math
    return float(x) if math.isfinite(x) else None


def run_tool(prog: str, parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int],
             argv: list[str] | None) -> int:
    """Parse ``argv`` and run; an expected failure (a :class:`SpncError`, an OS error on a
    file, memory exhaustion) becomes one line ``PROG: error: ...`` on stderr and exit code 2.
    SIGTERM/SIGINT/SIGHUP unwind (temporary files are removed) and exit 128 + N; a closed
    stdout pipe exits 141 silently. Anything else is a bug and keeps its traceback."""
    _one_line_errors(prog, parser)
    args = parser.parse_args(argv)
    quiet = bool(getattr(args, "quiet", False))
    handler = cli_logging(prog, quiet)
    try:
        with signals_as_exceptions(), warnings.catch_warnings():
            # a warning is a note for the user: one line, without the library's source line
            warnings.showwarning = lambda message, *a, **k: None if quiet else print(
                f"{prog}: warning: {message}", file=sys.stderr)
            rc = run(args)
            sys.stdout.flush()
            return rc
    except (SpncError, OSError, MemoryError) as e:
        if isinstance(e, BrokenPipeError):
            return _broken_pipe()
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, MemoryError):
            msg = f"out of memory ({msg}); use less data or a smaller model"
        if isinstance(e, OSError) and e.filename and str(e.filename) not in msg:
            msg = f"{e.filename}: {msg}"
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"{prog}: interrupted (signal {e.signum}); no output was changed", file=sys.stderr)
        return 128 + e.signum
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; no output was changed", file=sys.stderr)
        return 130
    finally:
        cli_logging_done(handler)


def _one_line_errors(prog: str, parser: argparse.ArgumentParser) -> None:
    """Argument errors as the one line ``PROG: error: ...`` (exit 2) that docs/cli.md
    promises, not argparse's usage block; ``--help`` still shows the usage."""
    def error(message: str):
        print(f"{prog}: error: {message} (see {prog} --help)", file=sys.stderr)
        sys.exit(2)
    parsers = [parser]
    while parsers:
        p = parsers.pop()
        p.error = error
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                parsers.extend(a.choices.values())


def _broken_pipe() -> int:
    """The reader of stdout is gone: point stdout at /dev/null so the interpreter's final
    flush does not complain, and stop quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 141
