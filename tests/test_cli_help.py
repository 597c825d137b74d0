"""What the documentation tells a user to type parses, and ``--help`` states every default:
the console tools' ``examples:`` and the ``spnc-*`` commands of README.md and docs/*.md
parse with the tool's own parser; the ``tools/*.py`` commands of the benchmark pages (too
long to run here) parse with the benchmark's parser, which is stopped before any work."""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from spnc.cli import compose, convert, demo, evaluate, info, learn, merge

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOOLS = {"spnc-learn": learn, "spnc-eval": evaluate, "spnc-merge": merge, "spnc-info": info,
         "spnc-convert": convert, "spnc-compose": compose, "spnc-demo": demo}
# placeholders the benchmark pages use in their command lines
PLACEHOLDERS = {"SET": "nltcs", "K": "2", "R": "1000", "T": "1", "C": "100", "DIR": "/tmp",
                "$s": "nltcs", "small|large": "small", "...": "nltcs"}


def _fences(text: str) -> list[str]:
    """Lines of the non-Python fenced blocks, continuation lines joined, ``$ `` dropped."""
    lines = []
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
        if lang != "python":
            lines += [ln.strip().removeprefix("$ ") for ln in re.sub(r"\\\n\s*", " ", body).splitlines()]
    return lines


def _inline(text: str) -> list[str]:
    """Inline code spans outside fenced blocks (they may wrap lines)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", text)]


def _words(cmd: str) -> list[str]:
    """A command line without its comment or pipe, split as the shell would."""
    return shlex.split(re.split(r"\s+#|\s\|\s", cmd)[0])


def console_commands() -> list[tuple[str, str]]:
    """(where, command) for the spnc-* commands of the docs and of the tools' help; synopsis
    lines (``[...]``, ``a|b``, ``IN...``) are left out."""
    out = []
    for path in DOCS:
        for ln in _fences(path.read_text(encoding="utf-8")):
            if re.match(r"spnc-\w+ ", ln):
                out.append((path.name, ln))
    for name, mod in TOOLS.items():
        text = mod._parser().format_help()
        for ln in re.findall(rf"^ +({name}(?: .*)?)$", text, re.M):
            out.append((f"{name} --help", re.split(r"\s{2,}", ln.strip())[0]))
    return [(w, c) for w, c in out if not re.search(r"\[|\w\|\w|\.\.\.", c)]


def test_console_commands_are_found():
    found = {c.split()[0] for _, c in console_commands()}
    assert found == set(TOOLS)
    assert len(console_commands()) >= 40


@pytest.mark.parametrize("where, cmd", console_commands())
def test_documented_console_commands_parse(where, cmd, capsys):
    words = _words(cmd)
    try:
        TOOLS[words[0]]._parser().parse_args(words[1:])
    except SystemExit:
        pytest.fail(f"{where}: `{cmd}` does not parse: {capsys.readouterr().err.strip()}")


def _shown(v) -> str:
    return format(v, "g") if isinstance(v, float) else str(v)


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_help_states_every_default(name):
    """An option with a default says so, with the value (None and off switches need not)."""
    for a in TOOLS[name]._parser()._actions:
        if not a.option_strings or a.default is None or a.default is False or a.help == argparse.SUPPRESS:
            continue
        if isinstance(a, argparse._HelpAction):
            continue
        assert a.help and "default" in a.help and _shown(a.default) in a.help, (name, a.option_strings, a.help)


# ---------------------------------------------------------------------------- tools/*.py
def tool_commands() -> list[tuple[str, str, list[str]]]:
    """(page, tool file, arguments) for every ``tools/X.py ...`` command of the docs."""
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for cmd in _fences(text) + _inline(text):
            m = re.search(r"(?:tools/)?(\w+\.py)\b(.*)$", cmd)
            if m and m.group(2).strip() and (ROOT / "tools" / m.group(1)).exists():
                args = [PLACEHOLDERS.get(w, w) for w in _words(m.group(2).replace("[", "").replace("]", ""))]
                out.append((path.name, m.group(1), args))
    return out


# Runs each tool's __main__ with parse_args stopped right after parsing (argparse errors
# exit 2 before that); one interpreter for all, so the tools' environment set-up
# (threads, import path) stays out of the test process.
_RUNNER = r"""
import argparse, json, os, runpy, sys
class Parsed(BaseException):
    pass
parse = argparse.ArgumentParser.parse_args
def stop(self, args=None, namespace=None):
    parse(self, args, namespace)
    raise Parsed
argparse.ArgumentParser.parse_args = stop
tools, bad = sys.argv[1], []
for page, tool, args in json.load(sys.stdin):
    sys.argv = [tool, *args]
    sys.path.insert(0, tools)
    try:
        runpy.run_path(os.path.join(tools, tool), run_name="__main__")
        bad.append([page, tool, args, "ran without argparse"])
    except Parsed:
        pass
    except SystemExit as e:
        bad.append([page, tool, args, f"exit {e.code}"])
print(json.dumps(bad))
"""


def test_benchmark_commands_in_docs_parse():
    cmds = tool_commands()
    assert len({t for _, t, _ in cmds}) >= 15
    # make_peer_fixtures.py runs inside the peer libraries' venvs and has no parser
    cmds = [c for c in cmds if c[1] != "make_peer_fixtures.py"]
    r = subprocess.run([sys.executable, "-c", _RUNNER, str(ROOT / "tools")], input=json.dumps(cmds),
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-2000:]
    bad = json.loads(r.stdout.strip().splitlines()[-1])
    assert not bad, "\n".join(f"{p}: tools/{t} {' '.join(a)}: {why}" for p, t, a, why in bad) + r.stderr[-2000:]
