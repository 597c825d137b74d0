"""DeeProb-kit JSON (``deeprob.spn.structure.io.save_spn_json`` / ``load_spn_json``).

A NetworkX node-link document: ``{"directed": true, "multigraph": false, "graph": {},
"nodes": [...], "links": [...]}`` (NetworkX 3.4+ writes ``"edges"``; both are read, and spnc writes both). Each
node is ``{"id", "class", "scope", ...}``: ``Sum`` has ``weights``, ``Product`` nothing
more, a leaf ``params``. Each link goes from child (``source``) to parent (``target``) with
``idx`` = the child's position under the parent. DeeProb-kit takes node 0 as the root.

Mapped leaves: ``Bernoulli`` (p), ``Categorical`` (categories, probabilities),
``Gaussian`` (mean, stddev) and ``BinaryCLT`` (root, tree = parent index per scope position
or -1, params = log P(X_i = k | parent = l) as ``[i][l][k]``; the root's two rows are its
prior). ``Isotonic``, ``Uniform`` and any other class are refused. spnc keeps its
declaration of the variables in the ``graph`` attributes (:mod:`._variables`). DeeProb-kit rounds what
it writes to 8 decimals; spnc writes the shortest exact form.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from ...errors import FormatError
from ...graph import SPN
from ._common import Builder, MAX_NODES, integer, mapping, parse_json, real, reals, unsupported, walk
from ._cltree import binary_tree_leaf
from . import _variables

NAME = "deeprob-json"
_KNOWN = ("Bernoulli", "Categorical", "Gaussian", "BinaryCLT")


def loads(data: bytes | str, where: str = NAME) -> SPN:
    doc = mapping(parse_json(data, where), where)
    nodes = doc.get("nodes")
    links = doc.get("links", doc.get("edges"))
    if "links" in doc and "edges" in doc and doc["links"] != doc["edges"]:
        raise FormatError(f"{where}: 'links' and 'edges' differ")
    if not isinstance(nodes, list) or not isinstance(links, list):
        raise FormatError(f"{where}: needs a 'nodes' list and a 'links' (or 'edges') list")
    if len(nodes) > MAX_NODES or len(links) > 4 * MAX_NODES:
        raise FormatError(f"{where}: too many nodes or links")
    b = Builder(where)
    recs: dict[int, dict] = {}
    for i, rec in enumerate(nodes):
        rec = mapping(rec, f"{where}: nodes[{i}]")
        key = integer(rec.get("id"), f"{where}: nodes[{i}].id", 0, 2**62)
        if key in recs:
            raise FormatError(f"{where}: nodes[{i}]: id {key} is used twice")
        recs[key] = rec
    children: dict[int, dict[int, int]] = {k: {} for k in recs}
    has_parent: set[int] = set()
    for j, ln in enumerate(links):
        ln = mapping(ln, f"{where}: links[{j}]")
        c = integer(ln.get("source"), f"{where}: links[{j}].source", 0, 2**62)
        p = integer(ln.get("target"), f"{where}: links[{j}].target", 0, 2**62)
        idx = integer(ln.get("idx"), f"{where}: links[{j}].idx", 0, MAX_NODES)
        for end, k in (("source", c), ("target", p)):
            if k not in recs:
                raise FormatError(f"{where}: links[{j}].{end} = {k} is not a node id")
        if idx in children[p]:
            raise FormatError(f"{where}: node {p}: two links have idx {idx}")
        children[p][idx] = c
        has_parent.add(c)
    for key, rec in recs.items():
        _node(b, key, rec, children[key], where)
    if 0 in recs:
        root = 0
    else:
        tops = [k for k in recs if k not in has_parent]
        if len(tops) != 1:
            raise FormatError(f"{where}: no node 0 and {len(tops)} nodes without a parent; cannot tell the root")
        root = tops[0]
    if root in has_parent:
        raise FormatError(f"{where}: the root (node {root}) has a parent")
    graph = doc.get("graph")
    declared = _variables.read(graph.get(_variables.KEY), where) if isinstance(graph, dict) else None
    return b.build(root, declared=declared)


def _node(b: Builder, key: int, rec: dict, kids: dict[int, int], where: str) -> None:
    cls = rec.get("class")
    label = f"node {key} ({cls})"
    if not isinstance(cls, str):
        raise FormatError(f"{where}: node {key}: 'class' must be a string")
    scope = rec.get("scope")
    if not isinstance(scope, list) or not scope:
        raise FormatError(f"{where}: {label}: 'scope' must be a non-empty list")
    vs = [integer(v, f"{where}: {label}: scope[{i}]") for i, v in enumerate(scope)]
    if cls in ("Sum", "Product"):
        if sorted(kids) != list(range(len(kids))):
            raise FormatError(f"{where}: {label}: child positions (idx) {sorted(kids)[:10]} are not 0..{len(kids) - 1}")
        ch = [kids[i] for i in range(len(kids))]
        if cls == "Sum":
            w = reals(rec.get("weights"), f"{where}: {label}: weights")
            b.sum(key, ch, w, label)
        else:
            b.product(key, ch, label)
        return
    if kids:
        raise FormatError(f"{where}: {label}: a leaf has children")
    if cls not in _KNOWN:
        raise FormatError(f"{where}: {label}: leaf type {cls!r} cannot be mapped to spnc "
                          f"(supported: {', '.join(_KNOWN)})")
    p = mapping(rec.get("params"), f"{where}: {label}: params")

    def need(*names: str) -> None:
        miss = [n for n in names if n not in p]
        extra = [n for n in p if n not in names]
        if miss or extra:
            raise FormatError(f"{where}: {label}: params must be {list(names)}, got {sorted(p)}")
    try:
        if cls != "BinaryCLT" and len(vs) != 1:
            raise FormatError(f"a {cls} leaf has one variable, got {len(vs)}")
        if cls == "Bernoulli":
            need("p")
            b.leaf(key, "bernoulli", vs, {"p": real(p["p"], "p")}, label)
        elif cls == "Gaussian":
            need("mean", "stddev")
            b.leaf(key, "gaussian", vs, {"mean": real(p["mean"], "mean"),
                                         "std": real(p["stddev"], "stddev")}, label)
        elif cls == "Categorical":
            need("categories", "probabilities")
            cats = p["categories"]
            if not isinstance(cats, list) or not cats:
                raise FormatError("categories must be a non-empty list")
            cats = [integer(c, f"categories[{i}]", 0, 1 << 20) for i, c in enumerate(cats)]
            pr = reals(p["probabilities"], "probabilities")
            if len(pr) != len(cats) or len(set(cats)) != len(cats):
                raise FormatError(f"{len(cats)} distinct categories needed for {len(pr)} probabilities")
            probs = np.zeros(max(cats) + 1)
            probs[cats] = pr
            b.leaf(key, "categorical", vs, {"probs": probs}, label)
        else:
            need("root", "tree", "params")
            _clt(b, key, vs, p, label)
    except FormatError as e:
        if str(e).startswith(where):
            raise
        raise FormatError(f"{where}: {label}: {e}") from None


def _clt(b: Builder, key: int, vs: list[int], p: dict, label: str) -> None:
    leaf = binary_tree_leaf(p["tree"], p["params"], len(vs), ("tree", "params"), factor_by_parent=True)
    root = leaf["parents"].index(-1)
    if p["root"] is not None and integer(p["root"], "root") != vs[root]:
        raise FormatError(f"root {p['root']} is not the tree's root variable {vs[root]}")
    b.leaf(key, "cltree", vs, leaf, label)


def dumps(spn: SPN) -> str:
    """DeeProb-kit JSON of ``spn``; node 0 is the root, numbers are written exactly."""
    nodes, root = walk(spn, NAME)
    last = len(nodes) - 1
    if root != last:  # pragma: no cover - compiled SPNs keep the root last
        raise FormatError(f"{NAME}: the root must be the last node")
    ident = lambda n: last - n  # noqa: E731  (root -> 0, parents before children)
    scope = [spn.node_scope(n if n < spn.n_nodes else int(spn.roots[0])).tolist()
             for n in range(len(nodes))]
    recs: list[dict] = []
    links: list[dict] = []
    for n in range(last, -1, -1):
        spec = nodes[n]
        rec: dict[str, Any] = {"id": ident(n)}
        if spec[0] == "sum":
            rec.update({"class": "Sum", "scope": scope[n], "weights": [float(w) for w in spec[2]]})
        elif spec[0] == "product":
            rec.update({"class": "Product", "scope": scope[n]})
        else:
            rec.update(_leaf(n, spec[1]))
        recs.append(rec)
        if spec[0] != "leaf":
            links += [{"idx": i, "source": ident(c), "target": ident(n)} for i, c in enumerate(spec[1])]
    # NetworkX < 3.4 reads the links under "links", newer versions under "edges": write both
    doc = {"directed": True, "multigraph": False, "graph": {_variables.KEY: _variables.block(spn)},
           "nodes": recs, "links": links, "edges": links}
    return json.dumps(doc, allow_nan=False) + "\n"


def _leaf(n: int, o: Any) -> dict:
    lt = type(o)._leaf_type.name
    if lt == "bernoulli":
        return {"class": "Bernoulli", "scope": [o.var], "params": {"p": o.p}}
    if lt == "gaussian":
        return {"class": "Gaussian", "scope": [o.var], "params": {"mean": o.mean, "stddev": o.std}}
    if lt == "categorical":
        return {"class": "Categorical", "scope": [o.var],
                "params": {"categories": list(range(len(o.probs))), "probabilities": o.probs.tolist()}}
    if lt == "cltree":
        cards = [c.shape[1] for c in o.cpts]
        if any(k != 2 for k in cards):
            raise unsupported(NAME, n, o, "DeeProb-kit's BinaryCLT needs binary variables")
        params = []
        with np.errstate(divide="ignore"):
            for j, c in enumerate(o.cpts):
                blk = np.log(c if o.parents[j] >= 0 else np.vstack([c, c]))
                if not np.all(np.isfinite(blk)):
                    raise unsupported(NAME, n, o, "a zero probability has no finite log "
                                      "(DeeProb-kit stores log-CPTs in JSON)")
                params.append(blk.tolist())
        r = int(np.flatnonzero(o.parents == -1)[0])
        return {"class": "BinaryCLT", "scope": o.vars.tolist(),
                "params": {"root": int(o.vars[r]), "tree": [int(x) for x in o.parents], "params": params}}
    raise unsupported(NAME, n, o)

