"""spnc-info: structure statistics of a model file, as a table or JSON, and a picture."""
from __future__ import annotations

import argparse
import os
import shutil
import sys

import numpy as np

from .._kinds import LEAF, PRODUCT, SUM
from .._text import counted
from ..errors import SpncError
from . import MODEL_HELP, add_common, positive_count, print_json, run_tool

PROG = "spnc-info"
EXAMPLES = """\
examples:
  spnc-info model.h5                       nodes by kind, edges, parameters, depth, sharing,
                                           scope sizes, leaf families, variables
  spnc-info model.json --json              the same as one JSON object on stdout
  spnc-info model.h5 --plot model.svg      draw it (Graphviz 'dot' if installed, else
                                           matplotlib; .svg, .png or .pdf)

exit status: 0 success, 2 bad input (one line "spnc-info: error: ...")
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Show the structure of an spnc model: "
                                "node and edge counts, parameters, depth, sharing, scopes and "
                                "leaf families; optionally draw it.",
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--plot", metavar="FILE", help="draw the model to FILE (.svg, .png or .pdf)")
    p.add_argument("--max-nodes", type=positive_count(), default=500,
                   help="--plot: draw at most this many nodes (default 500)")
    add_common(p, threads=False)
    return p


def main(argv: list[str] | None = None) -> int:
    return run_tool(PROG, _parser(), _run, argv)


def statistics(spn) -> dict:
    """Structure statistics of a compiled SPN (vectorised except one pass for the depth)."""
    kind = np.asarray(spn.kind)
    N = len(kind)
    ptr, child = np.asarray(spn.child_ptr), np.asarray(spn.child)
    deg = np.diff(ptr)
    parents = np.bincount(child, minlength=N) if child.size else np.zeros(N, dtype=np.int64)
    # height of each node (edges to its deepest leaf); children come before parents
    height = np.zeros(N, dtype=np.int64)
    for n in np.flatnonzero(deg):
        height[n] = 1 + height[child[ptr[n]:ptr[n + 1]]].max()
    scope = np.diff(np.asarray(spn.scope_ptr))
    families = {}
    leaf_params = 0
    for name, t in spn.leaf_tables.items():
        if len(t):
            # the numbers a learner estimates: real arrays (not offsets, Chow-Liu parent
            # indices or indicator values, which are structure)
            n_p = sum(int(np.asarray(v).size) for v in t.params.values() if np.asarray(v).dtype.kind == "f")
            families[name] = {"leaves": len(t), "parameters": n_p}
            leaf_params += n_p
    sums = kind == SUM
    sum_edges = int(deg[sums].sum())
    card = np.asarray(spn.cardinality)
    leaf_scope = scope[kind >= LEAF]
    return {
        "nodes": N, "edges": int(len(child)),
        "sums": int(sums.sum()), "products": int((kind == PRODUCT).sum()), "leaves": int((kind >= LEAF).sum()),
        "parameters": {"sum_weights": sum_edges, "leaf": leaf_params, "total": sum_edges + leaf_params},
        "depth": int(height[np.asarray(spn.roots)].max()) if N else 0,
        "shared_nodes": int((parents > 1).sum()), "max_parents": int(parents.max()) if N else 0,
        "scope_size": {"root": int(scope[np.asarray(spn.roots)].max()) if N else 0,
                       "leaf_min": int(leaf_scope.min()) if leaf_scope.size else 0,
                       "leaf_max": int(leaf_scope.max()) if leaf_scope.size else 0,
                       "mean": float(scope.mean()) if N else 0.0},
        "children": {"sum_mean": float(deg[sums].mean()) if sums.any() else 0.0,
                     "product_mean": float(deg[kind == PRODUCT].mean()) if (kind == PRODUCT).any() else 0.0},
        "leaf_families": families,
        "variables": {"total": int(spn.n_vars), "discrete": int((card > 0).sum()), "real": int((card == 0).sum()),
                      "named": spn.var_names is not None},
        "roots": int(len(spn.roots)), "combine": spn.combine,
        "learner": spn.learner.get("name") if spn.learner else None,
    }


def _table(path: str, st: dict) -> str:
    rows = [
        ("file", f"{path} ({os.path.getsize(path)} bytes)"),
        ("nodes", f"{st['nodes']} ({counted(st['sums'], 'sum')}, {counted(st['products'], 'product')}, "
                   f"{counted(st['leaves'], 'leaf', 'leaves')})"),
        ("edges", str(st["edges"])),
        ("parameters", f"{st['parameters']['total']} ({st['parameters']['sum_weights']} sum weights, "
                       f"{st['parameters']['leaf']} leaf parameters)"),
        ("depth", f"{counted(st['depth'], 'edge')} from the root to the deepest leaf"),
        ("sharing", f"{counted(st['shared_nodes'], 'node')} with more than one parent (at most {st['max_parents']})"),
        ("scope sizes", f"root {st['scope_size']['root']}, leaves {st['scope_size']['leaf_min']}.."
                        f"{st['scope_size']['leaf_max']}, mean {st['scope_size']['mean']:.2f}"),
        ("children", f"{st['children']['sum_mean']:.2f} per sum, {st['children']['product_mean']:.2f} per product"),
        ("leaf families", ", ".join(f"{k} {v['leaves']} ({v['parameters']} parameters)"
                                    for k, v in st["leaf_families"].items()) or "none"),
        ("variables", f"{st['variables']['total']} ({st['variables']['discrete']} discrete, "
                      f"{st['variables']['real']} real{', named' if st['variables']['named'] else ''})"),
        ("roots", f"{st['roots']} ({st['combine']})"),
        ("learner", st["learner"] or "-"),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(w)}  {v}" for k, v in rows)


def _run(args: argparse.Namespace) -> int:
    from ..io import importers
    plot_fmt = None
    if args.plot:
        plot_fmt = os.path.splitext(args.plot)[1].lstrip(".").lower()
        if plot_fmt not in ("svg", "png", "pdf"):
            raise SpncError(f"--plot {args.plot}: use a .svg, .png or .pdf file name")
        from .._atomic import check_writable
        check_writable(args.plot, inputs=(args.model,))
        _backend()   # fail before the work when nothing can draw
    model = importers.load_any(args.model)     # native or another library's format
    st = statistics(model)
    if args.plot:
        _plot(model, args.plot, plot_fmt, args.max_nodes)
        st["plot"] = args.plot
    if args.json:
        print_json(st)
    else:
        print(_table(args.model, st))
        if args.plot:
            print(f"{'plot'.ljust(13)}  {args.plot}")
    return 0


def _backend() -> str:
    if shutil.which("dot"):
        return "dot"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SpncError("--plot needs Graphviz ('dot', e.g. apt-get install graphviz) or matplotlib "
                        "(pip install matplotlib)") from None
    return "matplotlib"


def _plot(model, path: str, fmt: str, max_nodes: int) -> None:
    from .._atomic import atomic_write
    if _backend() == "dot":
        from ..io import render, to_dot
        text = to_dot(model, max_nodes=max_nodes)
        atomic_write(path, lambda tmp: render(text, tmp, fmt=fmt))
        return
    atomic_write(path, lambda tmp: _plot_matplotlib(model, tmp, fmt, max_nodes))


def _plot_matplotlib(model, out: str, fmt: str, max_nodes: int) -> None:
    """Layered drawing: nodes at their distance from the root, breadth-first, at most
    ``max_nodes`` of them."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ptr, child, kind = model.child_ptr, model.child, model.kind
    level = {int(r): 0 for r in model.roots}
    order = list(level)
    i = 0
    while i < len(order) and len(order) < max_nodes:
        n = order[i]
        for c in child[ptr[n]:ptr[n + 1]]:
            c = int(c)
            if c not in level and len(order) < max_nodes:
                level[c] = level[n] + 1
                order.append(c)
        i += 1
    keep = set(order)
    for n in sorted(order, reverse=True):      # parents before children: longest path from a root
        for c in child[ptr[n]:ptr[n + 1]]:
            if int(c) in keep:
                level[int(c)] = max(level[int(c)], level[n] + 1)
    by_level: dict[int, list[int]] = {}
    for n in order:
        by_level.setdefault(level[n], []).append(n)
    pos = {}
    for lv, ns in by_level.items():
        for j, n in enumerate(ns):
            pos[n] = ((j + 1) / (len(ns) + 1), -lv)
    depth = max(by_level) + 1
    width = max(len(ns) for ns in by_level.values())
    fig, ax = plt.subplots(figsize=(min(2 + 0.4 * width, 40), min(1.5 + 1.0 * depth, 40)))
    for n in order:
        for c in child[ptr[n]:ptr[n + 1]]:
            if int(c) in pos:
                (x0, y0), (x1, y1) = pos[n], pos[int(c)]
                ax.plot([x0, x1], [y0, y1], color="0.6", lw=0.6, zorder=1)
    names = {0: "+", 1: "×"}
    leaf_name = {t.code: name for name, t in model.leaf_tables.items()}
    for n in order:
        x, y = pos[n]
        k = int(kind[n])
        ax.scatter([x], [y], s=120, zorder=2, c="#8ecae6" if k == 0 else "#ffb703" if k == 1 else "#90be6d")
        ax.text(x, y, names.get(k, leaf_name.get(k, "leaf")[:3]), ha="center", va="center", fontsize=6, zorder=3)
    ax.set_axis_off()
    shown = f"{len(order)} of {model.n_nodes} nodes" if len(order) < model.n_nodes else counted(model.n_nodes, 'node')
    ax.set_title(f"SPN: {shown}", fontsize=9)
    fig.savefig(out, format=fmt, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
