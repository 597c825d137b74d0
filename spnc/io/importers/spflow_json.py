"""SPFlow legacy (0.0.x) ``spn.io.Text.to_JSON`` dump (SPFlow has no reader for it).

Nested objects ``{"Sum": {"children": [...], "weights": [...], "scope": [...], "id": n}}``,
``{"Product": {...}}`` and leaves such as ``{"Bernoulli": {"p": .., "scope": [..], "id": n}}``.
Mapped leaves: Bernoulli, Categorical, Gaussian, MultivariateGaussian (mean, sigma) and
binary CLTree (tree, log_factors). Nodes are nested, so shared nodes repeat; repeated ids
must repeat the same content. SPFlow writes numpy arrays with ``str()``, which is read too.
spnc keeps its declaration of the variables among the root node's attributes
(:mod:`._variables`).
"""
from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from ...errors import FormatError
from ...graph import SPN
from ._common import MAX_NODES, Builder, integer, mapping, parse_json, real, reals, tree_size, unsupported, walk
from ._cltree import binary_tree_leaf
from . import _variables

JSON = "spflow-json"

_JSON_LEAVES = {"Bernoulli": ("bernoulli", ("p",)), "Gaussian": ("gaussian", ("mean", "stdev")),
                "Categorical": ("categorical", ("p",)),
                "MultivariateGaussian": ("mvgaussian", ("mean", "sigma")),
                "CLTree": ("cltree", ("tree", "log_factors"))}


def loads_json(data: bytes | str, where: str = JSON) -> SPN:
    """Parse SPFlow's ``to_JSON`` dump into an SPN (iteratively; repeated ids share)."""
    obj = parse_json(data, where)
    b = Builder(where)
    content: dict[int, Any] = {}

    def unpack(o: Any, what: str) -> tuple[str, dict, Any]:
        o = mapping(o, what)
        if len(o) != 1:
            raise FormatError(f"{where}: {what}: a node is an object with one class key, got {sorted(o)[:5]}")
        (cls, body), = o.items()
        body = mapping(body, f"{what} ({cls})")
        key = body.get("id")
        if isinstance(key, bool) or not isinstance(key, int):
            raise FormatError(f"{where}: {what} ({cls}): id must be an integer")
        return cls, body, key

    root_cls, root_body, root_key = unpack(obj, "root")
    stack = [(obj, "root")]
    while stack:
        o, what = stack.pop()
        cls, body, key = unpack(o, what)
        label = f"node {key} ({cls})"
        if key in content:
            if content[key] != o:
                raise FormatError(f"{where}: {label}: id {key} is used by two different nodes")
            continue
        content[key] = o
        if cls in ("Sum", "Product"):
            ch = body.get("children")
            if not isinstance(ch, list):
                raise FormatError(f"{where}: {label}: 'children' must be a list")
            keys = []
            for i, c in enumerate(ch):
                keys.append(unpack(c, f"child {i} of {label}")[2])
                stack.append((c, f"child {i} of {label}"))
            if cls == "Sum":
                b.sum(key, keys, reals(body.get("weights"), f"{where}: {label}: weights"), label)
            else:
                b.product(key, keys, label)
            continue
        if cls not in _JSON_LEAVES:
            raise FormatError(f"{where}: {label}: leaf type {cls!r} cannot be mapped to spnc "
                              f"(supported: {', '.join(sorted(_JSON_LEAVES))})")
        kind, names = _JSON_LEAVES[cls]
        scope = body.get("scope")
        if not isinstance(scope, list) or not scope:
            raise FormatError(f"{where}: {label}: 'scope' must be a non-empty list")
        vs = [integer(v, f"{where}: {label}: scope[{i}]") for i, v in enumerate(scope)]
        missing = [n for n in names if n not in body]
        if missing:
            raise FormatError(f"{where}: {label}: missing parameter(s) {missing}")
        if kind not in ("mvgaussian", "cltree") and len(vs) != 1:
            raise FormatError(f"{where}: {label}: a {cls} leaf has one variable, got {len(vs)}")
        try:
            if kind == "bernoulli":
                b.leaf(key, kind, vs, {"p": real(body["p"], "p")}, label)
            elif kind == "gaussian":
                b.leaf(key, kind, vs, {"mean": real(body["mean"], "mean"),
                                       "std": real(body["stdev"], "stdev")}, label)
            elif kind == "categorical":
                b.leaf(key, kind, vs, {"probs": reals(_array(body["p"]), "p")}, label)
            elif kind == "cltree":
                b.leaf(key, kind, vs, _cltree(body, len(vs)), label)
            else:
                mean = reals(_array(body["mean"]), "mean")
                sig = _array(body["sigma"])
                if not isinstance(sig, list) or len(sig) != len(vs):
                    raise FormatError(f"sigma must be {len(vs)} rows")
                cov = np.array([reals(r, f"sigma[{i}]") for i, r in enumerate(sig)])
                if mean.shape != (len(vs),) or cov.shape != (len(vs), len(vs)):
                    raise FormatError(f"mean/sigma shapes {mean.shape}/{cov.shape} do not match "
                                      f"{len(vs)} variables")
                b.leaf(key, kind, vs, {"mean": mean, "cov": cov}, label)
        except FormatError as e:
            if str(e).startswith(where):
                raise
            raise FormatError(f"{where}: {label}: {e}") from None
    return b.build(root_key, declared=_variables.read(root_body.get(_variables.KEY), where))


def _cltree(body: dict, n: int) -> dict:
    """SPFlow's CLTree: ``tree[i]`` = local parent index (-1 for the root) and
    ``log_factors[i][x_i][x_parent]`` (the root's two columns hold its prior)."""
    return binary_tree_leaf(body["tree"], _array(body["log_factors"]), n, ("tree", "log_factors"),
                            factor_by_parent=False)


def _array(v: Any) -> Any:
    """SPFlow writes numpy arrays with ``str()``: ``"[0.1 0.9]"``; lists stay lists."""
    if isinstance(v, str):
        if "..." in v:
            raise FormatError("array was abbreviated by numpy ('...') when written")
        try:
            rows = re.findall(r"\[([^\[\]]*)\]", v)
            if v.strip().startswith("[["):
                return [[float(x) for x in r.replace(",", " ").split()] for r in rows]
            return [float(x) for x in rows[0].replace(",", " ").split()] if rows else []
        except (ValueError, IndexError):
            raise FormatError(f"cannot read array text {v[:40]!r}") from None
    return v


def _cltree_json(n: int, o: Any) -> dict:
    """SPFlow's CLTree fields; the root is put first (SPFlow's inference expects it at
    local index 0), the others in breadth-first order."""
    if any(c.shape[1] != 2 for c in o.cpts):
        raise unsupported(JSON, n, o, "SPFlow's CLTree needs binary variables")
    par = [int(p) for p in o.parents]
    order = [par.index(-1)]
    for j in order:
        order += [k for k in range(len(par)) if par[k] == j]
    pos = {j: i for i, j in enumerate(order)}
    with np.errstate(divide="ignore"):
        lf = [np.log(np.vstack([o.cpts[j][0], o.cpts[j][0]]) if par[j] < 0 else o.cpts[j]).T.tolist()
              for j in order]
    return {"df_order": list(range(len(order))), "id": n, "log_factors": lf, "n_features": len(order),
            "post_order": list(range(len(order)))[::-1], "scope": [int(o.vars[j]) for j in order],
            "tree": [pos[par[j]] if par[j] >= 0 else -1 for j in order]}


def dumps_json(spn: SPN) -> str:
    """SPFlow ``to_JSON``-style dump of ``spn`` (nested; shared nodes repeated with their id)."""
    nodes, root = walk(spn, JSON)
    if tree_size(nodes, root) > MAX_NODES:
        raise FormatError(f"{JSON}: the model expanded into a tree would have more than {MAX_NODES} nodes")
    built: list[Any] = [None] * len(nodes)
    scopes = [spn.node_scope(n if n < spn.n_nodes else int(spn.roots[0])).tolist()
              for n in range(len(nodes))]
    for n, spec in enumerate(nodes):
        if spec[0] == "sum":
            built[n] = {"Sum": {"children": [built[c] for c in spec[1]], "id": n,
                                "scope": scopes[n], "weights": [float(w) for w in spec[2]]}}
        elif spec[0] == "product":
            built[n] = {"Product": {"children": [built[c] for c in spec[1]], "id": n, "scope": scopes[n]}}
        else:
            o = spec[1]
            lt = type(o)._leaf_type.name
            if lt == "bernoulli":
                built[n] = {"Bernoulli": {"id": n, "p": o.p, "scope": [o.var]}}
            elif lt == "gaussian":
                built[n] = {"Gaussian": {"id": n, "mean": o.mean, "scope": [o.var], "stdev": o.std}}
            elif lt == "categorical":
                built[n] = {"Categorical": {"id": n, "p": o.probs.tolist(), "scope": [o.var]}}
            elif lt == "cltree":
                built[n] = {"CLTree": _cltree_json(n, o)}
            elif lt == "mvgaussian":
                built[n] = {"MultivariateGaussian": {"id": n, "mean": o.mean.tolist(),
                                                     "scope": o.vars.tolist(), "sigma": o.cov.tolist()}}
            else:
                raise unsupported(JSON, n, o)
    (body,) = built[root].values()
    body[_variables.KEY] = _variables.block(spn)
    try:
        return json.dumps(built[root], sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        raise FormatError(f"{JSON}: a Chow-Liu leaf has a zero probability, whose log is not JSON") from None
    except RecursionError:
        raise FormatError(f"{JSON}: the model is too deep for a nested JSON file") from None
