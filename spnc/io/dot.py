"""Graphviz DOT drawings of a model (one way: DOT is never read back).

Sums are circles "+" with weighted edges, products circles "×", leaves boxes showing the
leaf type, its variables and a short summary of its parameters. Each node is drawn once,
so a shared node simply has several in-edges. Output is deterministic (nodes in id order).
Machine-readable attributes (``spnc_kind``, ``spnc_scope``, ``spnc_w``, ``spnc_params``)
carry the exact values. Several roots hang from a dashed node: "+" with the root weights
for a mixture, "×" for independent roots.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import deque
from typing import Any

import numpy as np

from .._kinds import SUM
from ..errors import SpncError
from ._spec import FORMAT, VERSION, Group

_SHORT = {"bernoulli": "Bern", "categorical": "Cat", "gaussian": "N", "mvgaussian": "MVN",
          "cltree": "CLT", "indicator": "Ind"}


def _q(s: str) -> str:
    """A double-quoted DOT string."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _num(x: float, prec: int) -> str:
    return f"{x:.{prec}g}"


def _tree_of(model: Any) -> Group:
    if isinstance(model, Group):
        return model
    tree = getattr(model, "tree", None)      # a Validated result
    if isinstance(tree, Group):
        return tree
    from ._model import tree_from_model
    return tree_from_model(model)


def to_dot(model: Any, *, max_nodes: int | None = 500, max_depth: int | None = None,
           precision: int = 3, show_counts: bool = False, title: str | None = None) -> str:
    """DOT text for a model (an :class:`spnc.SPN`, or a validated file tree).

    ``max_depth`` keeps nodes at most that many edges below a root; ``max_nodes`` keeps the
    first nodes in breadth-first order from the roots. Cut-off children are summarised by a
    dashed "… k more" box. ``show_counts`` appends ``n=<count>`` from ``/stats/count``.
    """
    t = _tree_of(model)
    kind = np.asarray(t.members["nodes"].members["kind"])
    sp = np.asarray(t.members["nodes"].members["scope_ptr"])
    sc = np.asarray(t.members["nodes"].members["scope"])
    ptr = np.asarray(t.members["edges"].members["ptr"])
    child = np.asarray(t.members["edges"].members["child"])
    weight = np.asarray(t.members["edges"].members["weight"])
    roots = np.asarray(t.members["roots"].members["node"]).tolist()
    var = t.members["variables"]
    V = len(var.members["type"])
    names = var.members.get("name") or [f"X{i}" for i in range(V)]
    counts = None
    if show_counts and "stats" in t.members:
        c = t.members["stats"].members.get("count")
        counts = None if c is None else np.asarray(c)
    N = kind.size

    # which nodes to draw: breadth-first from the roots, within the caps
    depth = {}
    q = deque()
    for r in roots:
        if r not in depth:
            depth[r] = 0
            q.append(r)
    cap = N if max_nodes is None else max(1, int(max_nodes))
    order: list[int] = []
    while q and len(order) < cap:
        n = q.popleft()
        order.append(n)
        d = depth[n]
        if max_depth is not None and d >= max_depth:
            continue
        for c in child[ptr[n]:ptr[n + 1]].tolist():
            if c not in depth:
                depth[c] = d + 1
                q.append(c)
    shown = set(order)

    leaf_row: dict[int, tuple[str, int]] = {}
    tables = t.members["leaves"].members
    for name, tg in tables.items():
        if isinstance(tg, Group) and "node" in tg.members:
            for i, n in enumerate(np.asarray(tg.members["node"]).tolist()):
                if n in shown:
                    leaf_row[n] = (name, i)

    out = ["digraph spnc {",
           f"  graph [rankdir=TB, spnc_format={_q(FORMAT)}, "
           f"spnc_version={_q('.'.join(map(str, VERSION)))}"
           + (f", label={_q(title)}" if title else "") + "];",
           '  node [fontname="Helvetica"];',
           '  edge [fontname="Helvetica"];']
    if len(shown) < N:
        out.append(f"  // showing {len(shown)} of {N} nodes")
    out += _roots_node(t.members["roots"], roots, precision)
    rootset = set(roots)
    for n in sorted(shown):
        k = int(kind[n])
        scope = sc[sp[n]:sp[n + 1]].tolist()
        attrs = {"spnc_scope": ",".join(map(str, scope))}
        if k == 0:
            attrs.update(shape="circle", label="+", spnc_kind="sum")
        elif k == 1:
            attrs.update(shape="circle", label="×", spnc_kind="product")
        else:
            lname, i = leaf_row.get(n, ("leaf", -1))
            label, params = _leaf_label(tables.get(lname), lname, i, scope, names, precision)
            attrs.update(shape="box", label=label, spnc_kind=lname,
                         spnc_params=json.dumps(params, separators=(",", ":")))
        if counts is not None:
            attrs["label"] += f"\nn={_num(float(counts[n]), precision)}"
        if n in rootset:
            attrs["peripheries"] = "2"
        out.append(f"  n{n} [" + ", ".join(f"{a}={_q(v)}" for a, v in attrs.items()) + "];")
    for n in sorted(shown):
        a, b = int(ptr[n]), int(ptr[n + 1])
        hidden = 0
        for e in range(a, b):
            c = int(child[e])
            if c not in shown:
                hidden += 1
                continue
            ea = {}
            if kind[n] == SUM:
                ea = {"label": _num(float(weight[e]), precision), "spnc_w": repr(float(weight[e]))}
            s = ", ".join(f"{x}={_q(v)}" for x, v in ea.items())
            out.append(f"  n{n} -> n{c}" + (f" [{s}]" if s else "") + ";")
        if hidden:
            out.append(f'  n{n}_more [shape="box", style="dashed", label={_q(f"… {hidden} more")}];')
            out.append(f'  n{n} -> n{n}_more [style="dashed"];')
    out.append("}")
    return "\n".join(out) + "\n"


def _roots_node(rg: Group, roots: list[int], precision: int) -> list[str]:
    """Several roots: a dashed node for how they combine, a mixture's weights on its edges."""
    if len(roots) < 2:
        return []
    combine = str(rg.attrs.get("combine", "independent"))
    w = rg.members.get("weight")
    mix = combine == "mixture" and w is not None
    lines = [f'  roots [shape="circle", style="dashed", label={_q("+" if mix else "×")}, '
             f'spnc_kind={_q("roots_" + combine)}];']
    for i, r in enumerate(roots):
        ea = f' [label={_q(_num(float(w[i]), precision))}, spnc_w={_q(repr(float(w[i])))}]' if mix else ""
        lines.append(f"  roots -> n{r}{ea};")
    return lines


def _leaf_label(tg: Group | None, lname: str, i: int, scope: list[int], names: list[str],
                prec: int) -> tuple[str, dict]:
    vs = ",".join(names[v] for v in scope)
    head = f"{_SHORT.get(lname, lname)}({vs})"
    if tg is None or i < 0:
        return head, {}
    params: dict[str, Any] = {}
    parts = []
    for pname, arr in tg.members.items():
        if pname == "node" or pname.endswith("_ptr") or isinstance(arr, (Group, list)):
            continue
        arr = np.asarray(arr)
        ptr = tg.members.get(pname + "_ptr")
        if ptr is not None:
            vals = arr[int(ptr[i]):int(ptr[i + 1])].tolist()
            params[pname] = vals
            txt = " ".join(_num(float(x), prec) for x in vals[:4]) + (" …" if len(vals) > 4 else "")
            parts.append(f"{pname}=[{txt}]")
        else:
            params[pname] = arr[i].item()
            parts.append(f"{pname}={_num(float(arr[i]), prec)}")
    return head + ("\n" + "\n".join(parts) if parts else ""), params


def render(dot_text: str, out_path: str | os.PathLike, *, fmt: str | None = None,
           timeout: float = 120.0) -> None:
    """Render DOT text with Graphviz ``dot`` to SVG/PNG/PDF (by extension or ``fmt``)."""
    exe = shutil.which("dot")
    if exe is None:
        raise SpncError("Graphviz 'dot' is not installed (apt-get install graphviz)")
    fmt = fmt or os.path.splitext(os.fspath(out_path))[1].lstrip(".").lower()
    if fmt not in ("svg", "png", "pdf"):
        raise SpncError(f"cannot render to {fmt!r}; use svg, png or pdf")
    res = subprocess.run([exe, f"-T{fmt}", "-o", os.fspath(out_path)], input=dot_text.encode(),
                         capture_output=True, timeout=timeout)
    if res.returncode != 0:
        raise SpncError(f"dot failed: {res.stderr.decode(errors='replace').strip()[:300]}")
