"""Console tools: ``spnc-convert`` (spnc.cli.convert), ``spnc-eval`` (spnc.cli.evaluate),
``spnc-learn`` (spnc.cli.learn), ``spnc-merge`` (spnc.cli.merge) and ``spnc-demo``
(spnc.cli.demo). Each module defines ``main(argv=None) -> int``."""
from __future__ import annotations

import argparse
import sys
from typing import Callable

from ..errors import SpncError


def run_tool(prog: str, parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int],
             argv: list[str] | None) -> int:
    """Parse ``argv`` and run; an expected failure (a :class:`SpncError` or an OS error on a
    file) becomes one line ``PROG: error: ...`` on stderr and exit code 2. Anything else is a
    bug and keeps its traceback."""
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (SpncError, OSError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        if isinstance(e, OSError) and e.filename and str(e.filename) not in msg:
            msg = f"{e.filename}: {msg}"
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2
