"""One progress helper for every long job (LearnSPN, EM, oSLRAU, Chow-Liu, the CLI).

A :class:`Progress` prints one status line at most every ``SPNC_PROGRESS_SECONDS`` (default
2) seconds, and a final line from :meth:`Progress.close`. Where it goes:

* ``enabled=True`` (an estimator's ``progress=True`` / ``verbose``): straight to stderr;
* ``enabled=None`` (the default): to the ``logging`` logger ``"spnc"`` at INFO level, so a
  library user sees progress after ``logging.basicConfig(level=logging.INFO)`` and the
  console tools show it unless ``-q`` (they install a stderr handler);
* ``enabled=False``: nowhere.

It needs no third-party package (``tqdm`` would draw bars, but our jobs rarely know their
total in advance and most run inside ``nogil`` kernels between updates).
"""
from __future__ import annotations

import logging
import os
import sys
import time

log = logging.getLogger("spnc")


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get("SPNC_PROGRESS_SECONDS", "2")))
    except ValueError:
        return 2.0


class Progress:
    """Rate-limited status lines for the job ``what``; ``update(**counters)`` is cheap."""

    def __init__(self, what: str, enabled: bool | None = None, total: float | None = None,
                 unit: str = ""):
        self.what, self.total, self.unit = what, total, unit
        self.t0 = self.last = time.monotonic()
        self.every = _interval()
        if enabled is None:
            self.mode = "log" if log.isEnabledFor(logging.INFO) else None
        else:
            self.mode = "stderr" if enabled else None
        self.lines = 0

    @property
    def active(self) -> bool:
        return self.mode is not None

    def update(self, message: str | None = None, done: float | None = None, *, force: bool = False) -> None:
        """Report ``message`` (or ``done`` of ``total``) if the interval has passed."""
        if self.mode is None:
            return
        t = time.monotonic()
        if not force and t - self.last < self.every:
            return
        self.last = t
        self._emit(self._text(message, done, t))

    def close(self, message: str | None = None) -> None:
        """Final line: always on stderr mode, in log mode only after earlier lines (a short
        job stays silent)."""
        if self.mode == "stderr" or (self.mode == "log" and self.lines):
            self._emit(self._text(message or "done", None, time.monotonic()))

    def _text(self, message: str | None, done: float | None, t: float) -> str:
        parts = [f"{self.what}:"] if self.what else []
        if message:
            parts.append(message)
        if done is not None:
            if self.total:
                parts.append(f"{done:.0f}/{self.total:.0f}{self.unit} ({100.0 * done / self.total:.0f}%)")
            else:
                parts.append(f"{done:.0f}{self.unit}")
        parts.append(f"[{t - self.t0:.1f} s]")
        return " ".join(parts)

    def _emit(self, text: str) -> None:
        self.lines += 1
        if self.mode == "log":
            log.info(text)
        else:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()


class _StderrHandler(logging.StreamHandler):
    """Looks up ``sys.stderr`` at each record (pytest and callers may swap it)."""

    def __init__(self, prefix: str):
        super().__init__()
        self.setFormatter(logging.Formatter(prefix + "%(message)s"))

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value):  # StreamHandler.__init__ assigns it
        pass


def cli_logging(prog: str, quiet: bool) -> logging.Handler | None:
    """Console tools: show spnc's INFO messages (progress) on stderr as ``prog: ...``,
    unless ``quiet``. Returns the handler so the caller can remove it."""
    if quiet:
        log.setLevel(logging.WARNING)
        return None
    h = _StderrHandler(f"{prog}: ")
    log.addHandler(h)
    log.setLevel(logging.INFO)
    log.propagate = False
    return h


def cli_logging_done(h: logging.Handler | None) -> None:
    if h is not None:
        log.removeHandler(h)
    log.setLevel(logging.NOTSET)
    log.propagate = True
