"""sparc-pc JSON (``gcw-circuit-v1``, ``sparc.io.serializer.CircuitSerializer``).

``{"format": "gcw-circuit-v1", "backend": "numpy", "root": k, "nodes": [...]}``; nodes are
listed children first with ids ``0..N-1``, each ``{"id", "kind", "children", ...}``:
``sum`` (``params`` = weights), ``product``, ``categorical`` (``scope``, ``params``),
``bernoulli`` (``scope``, ``p``), ``indicator`` (``scope``, ``value``, ``num_cats``),
``literal`` (``scope``, ``value``: the indicator of a binary variable) and ``gaussian``
(``scope``, ``mean``, ``std``). ``discrete_logistic`` and unknown kinds are refused.
spnc keeps its declaration of the variables in a top-level key sparc-pc ignores
(:mod:`._variables`).
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from ...errors import FormatError
from ...graph import SPN
from ._common import Builder, MAX_NODES, integer, mapping, parse_json, real, reals, unsupported, walk
from . import _variables

NAME = "sparc-json"
FORMAT = "gcw-circuit-v1"
_LEAVES = ("bernoulli", "categorical", "gaussian", "indicator", "literal")


def loads(data: bytes | str, where: str = NAME) -> SPN:
    doc = mapping(parse_json(data, where), where)
    if doc.get("format") != FORMAT:
        raise FormatError(f"{where}: format is {str(doc.get('format'))[:40]!r}, expected {FORMAT!r}")
    nodes = doc.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise FormatError(f"{where}: 'nodes' must be a non-empty list")
    if len(nodes) > MAX_NODES:
        raise FormatError(f"{where}: more than {MAX_NODES} nodes")
    root = integer(doc.get("root"), f"{where}: root", 0, len(nodes) - 1)
    b = Builder(where)
    for i, rec in enumerate(nodes):
        rec = mapping(rec, f"{where}: nodes[{i}]")
        key = integer(rec.get("id"), f"{where}: nodes[{i}].id", 0, len(nodes) - 1)
        if key != i:
            raise FormatError(f"{where}: nodes[{i}] has id {key}; ids must be 0..N-1 in order")
        kind = rec.get("kind")
        label = f"node {key} ({kind})"
        if not isinstance(kind, str):
            raise FormatError(f"{where}: node {key}: 'kind' must be a string")
        ch = rec.get("children", [])
        if not isinstance(ch, list):
            raise FormatError(f"{where}: {label}: 'children' must be a list")
        ch = [integer(c, f"{where}: {label}: children[{j}]", 0, len(nodes) - 1) for j, c in enumerate(ch)]
        if any(c >= key for c in ch):
            raise FormatError(f"{where}: {label}: child {max(ch)} is not listed before its parent "
                              "(a cycle, or nodes out of order)")
        try:
            _node(b, key, kind, rec, ch, label)
        except FormatError as e:
            if str(e).startswith(where):
                raise
            raise FormatError(f"{where}: {label}: {e}") from None
    return b.build(root, declared=_variables.read(doc.get(_variables.KEY), where))


def _node(b: Builder, key: int, kind: str, rec: dict, ch: list[int], label: str) -> None:
    if kind == "sum":
        b.sum(key, ch, reals(rec.get("params"), "params"), label)
        return
    if kind == "product":
        b.product(key, ch, label)
        return
    if kind not in _LEAVES:
        raise FormatError(f"leaf type {kind!r} cannot be mapped to spnc (supported: {', '.join(_LEAVES)})")
    if ch:
        raise FormatError("a leaf has children")
    scope = rec.get("scope")
    if not isinstance(scope, list) or len(scope) != 1:
        raise FormatError("'scope' must list exactly one variable")
    vs = [integer(scope[0], "scope[0]")]
    if kind == "bernoulli":
        b.leaf(key, "bernoulli", vs, {"p": real(rec.get("p"), "p")}, label)
    elif kind == "categorical":
        pr = reals(rec.get("params"), "params")
        if len(pr) == 0:
            raise FormatError("params must not be empty")
        b.leaf(key, "categorical", vs, {"probs": pr}, label)
    elif kind == "gaussian":
        b.leaf(key, "gaussian", vs, {"mean": real(rec.get("mean"), "mean"),
                                     "std": real(rec.get("std"), "std")}, label)
    elif kind == "literal":
        v = integer(rec.get("value"), "value", 0, 1)
        b.leaf(key, "indicator", vs, {"value": v}, label)
    else:
        k = integer(rec.get("num_cats"), "num_cats", 2, 1 << 20)
        v = integer(rec.get("value"), "value", 0, k - 1)
        b.leaf(key, "indicator", vs, {"value": v, "num_cats": k}, label)


def dumps(spn: SPN) -> str:
    """gcw-circuit-v1 JSON of ``spn`` (numbers written exactly)."""
    nodes, root = walk(spn, NAME)
    card = np.asarray(spn.cardinality)
    used = spn.node_scope(int(spn.roots[0]))
    if (card[used] == 0).any() and (card[used] != 0).any():
        raise FormatError(f"{NAME}: sparc-pc cannot mix discrete and continuous leaves in one "
                          "circuit; this model has both")
    recs: list[dict[str, Any]] = []
    for n, spec in enumerate(nodes):
        if spec[0] == "sum":
            recs.append({"id": n, "kind": "sum", "children": spec[1], "params": [float(w) for w in spec[2]]})
        elif spec[0] == "product":
            recs.append({"id": n, "kind": "product", "children": spec[1]})
        else:
            o = spec[1]
            lt = type(o)._leaf_type.name
            r: dict[str, Any] = {"id": n, "kind": lt, "children": [], "scope": [int(o.scope[0])]}
            if lt == "bernoulli":
                r["p"] = o.p
            elif lt == "categorical":
                r["params"] = o.probs.tolist()
            elif lt == "gaussian":
                r.update(mean=o.mean, std=o.std)
            elif lt == "indicator":
                r.update(value=o.value, num_cats=int(card[o.var]))
            else:
                raise unsupported(NAME, n, o)
            recs.append(r)
    return json.dumps({"format": FORMAT, "backend": "numpy", "root": root, "nodes": recs,
                       _variables.KEY: _variables.block(spn)}, allow_nan=False) + "\n"
