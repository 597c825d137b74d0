"""spnc-convert: convert a model file between HDF5 and JSON, or draw it as DOT/SVG/PNG."""
from __future__ import annotations

import argparse
import os
import sys

from .._text import counted
from ..errors import SpncError
from .._atomic import atomic_write, check_writable
from . import add_common, run_tool, write_stdout

PROG = "spnc-convert"
EXAMPLES = """\
examples:
  spnc-convert model.h5 model.json          HDF5 -> JSON (lossless)
  spnc-convert model.json model.h5          JSON -> HDF5 (lossless)
  spnc-convert model.h5 model.dot           drawing (one way)
  spnc-convert model.h5 model.svg --max-depth 4   render with Graphviz dot
  spnc-convert --validate-only model.h5     check a file, write nothing
  spnc-convert model.deeprob.json model.h5  import (DeeProb-kit, SPFlow, sparc-pc files)
  spnc-convert model.h5 out.txt --to spflow-text   export, format named

exit status: 0 success, 2 bad input (one line "spnc-convert: error: ...")
"""


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Convert spnc model files between .h5/.hdf5 and .json, or "
        "draw them as .dot (.svg/.png/.pdf when Graphviz is installed).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="model file (.h5, .hdf5, .json, or another library's, see --from)")
    p.add_argument("output", nargs="?", help="output file (.h5, .hdf5, .json, .dot, .svg, .png, .pdf), "
                                             "or - for DOT text on standard output (--to dot)")
    p.add_argument("--from", dest="from_format", metavar="FMT", default=None,
                   help="input format (default: from the extension): hdf5, json or a foreign "
                   "format (spflow-text, spflow-json, deeprob-json, sparc-json)")
    p.add_argument("--to", dest="to_format", metavar="FMT", default=None,
                   help="output format (default: from the extension), as for --from, or a drawing: "
                   "dot, gv, svg, png, pdf")
    p.add_argument("--validate-only", action="store_true",
                   help="check the input (format, structure, parameters) and write nothing")
    p.add_argument("--max-nodes", type=_positive, default=500, help="DOT: draw at most this many nodes (default 500)")
    p.add_argument("--max-depth", type=_positive, default=None, help="DOT: draw nodes at most this deep below a root")
    p.add_argument("--show-counts", action="store_true", help="DOT: add n=<count> from /stats/count")
    add_common(p, threads=False, json_summary=False)
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, _parser(), _run, argv)


def _run(args: argparse.Namespace) -> int:
    from .. import io
    from ..io import importers
    v = importers.read_validated_any(args.input, args.from_format)
    if args.validate_only:
        from ..io._model import model_from_validated
        model_from_validated(v)
        print(f"{args.input}: ok (spnc-model {'.'.join(map(str, v.tree.attrs['format_version']))}, "
              f"{counted(v.n_nodes, 'node')}, {counted(v.n_edges, 'edge')}, {counted(v.n_vars, 'variable')})")
        return 0
    if not args.output:
        raise SpncError("an OUTPUT file is needed (or --validate-only)")
    ext = os.path.splitext(args.output)[1].lower()
    drawing = (".dot", ".gv", ".svg", ".png", ".pdf")
    if args.to_format:                   # --to dot, --to svg, ...; any other format is no drawing
        ext = "." + args.to_format.lower()
    if args.output == "-" and ext not in (".dot", ".gv"):
        raise SpncError("OUTPUT '-' (standard output) takes DOT text only (--to dot); "
                        "give a file name for a model file or a picture")
    if args.output != "-":
        check_writable(args.output, inputs=(args.input,))
    if ext in drawing:
        text = io.to_dot(v.tree, max_nodes=args.max_nodes, max_depth=args.max_depth,
                         show_counts=args.show_counts)
        if args.output == "-":
            write_stdout(text)
        elif ext in (".dot", ".gv"):
            data = text.encode("utf-8")

            def write(tmp: str) -> None:
                with open(tmp, "wb") as f:
                    f.write(data)
            atomic_write(args.output, write)
        else:
            atomic_write(args.output, lambda tmp: io.render(text, tmp, fmt=ext[1:]))
        if args.max_nodes is not None and v.n_nodes > args.max_nodes and not args.quiet:
            print(f"{PROG}: note: drew {args.max_nodes} of {v.n_nodes} nodes (--max-nodes)",
                  file=sys.stderr)
        return 0
    importers.write_tree_any(v, args.output, args.to_format)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
