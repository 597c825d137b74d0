"""Where the benchmark data is (``binary/``, ``continuous/``), without side effects:
``$SPNC_DATA`` when set, else ``shared/data`` next to the checkout or, for a git
worktree, next to its main checkout."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def data_candidates(root: Path = ROOT) -> list[Path]:
    """The places looked at, in order (only ``$SPNC_DATA`` when it is set)."""
    env = os.environ.get("SPNC_DATA")
    if env:
        return [Path(env).expanduser()]
    out = [root.parent / "shared" / "data"]
    git = root / ".git"
    if git.is_file():                   # a worktree: "gitdir: MAIN/.git/worktrees/NAME"
        text = git.read_text()
        gitdir = Path(text.split(":", 1)[1].strip()) if text.startswith("gitdir:") else None
        if gitdir is not None and gitdir.parent.name == "worktrees":
            out.append(gitdir.parents[2].parent / "shared" / "data")
    return out


def default_data() -> Path:
    """The first candidate that is a directory, else the first (messages use :func:`tried`)."""
    cands = data_candidates()
    return next((p for p in cands if p.is_dir()), cands[0])


def tried() -> str:
    """How the default was chosen, for a 'not found' message."""
    if os.environ.get("SPNC_DATA"):
        return f"--data defaults to $SPNC_DATA = {os.environ['SPNC_DATA']}; give --data DIR or fix SPNC_DATA"
    return ("--data defaults to the first existing of " + ", ".join(map(str, data_candidates()))
            + "; give --data DIR, or set SPNC_DATA=DIR (DIR holding binary/ and continuous/)")
