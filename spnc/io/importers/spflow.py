"""SPFlow legacy (0.0.x) model files: the equation text and the ``to_JSON`` dump.

**Text** (``spn.io.Text.spn_to_str_equation`` / ``str_to_spn``): a sum is
``(w*(child) + w*(child))``, a product ``(child * child)``, a leaf
``Class(Vk|name=value;name=value)``, categorical probabilities as ``p=[a, b]``. A child in
parentheses alone is that child. There are no node ids, so a DAG is written as a tree
(shared nodes once per path). Mapped leaves: Bernoulli(p), Categorical(p),
Gaussian(mean, stdev). SPFlow cannot read multivariate Gaussians from text (only the first
variable is written) and writes Chow-Liu trees without their tree (``CLTREE``); both are
refused, as is every other leaf class.

**JSON** (``spn.io.Text.to_JSON``; Bernoulli, Categorical, Gaussian, MultivariateGaussian
and binary CLTree leaves): nested objects ``{"Sum": {"children": [...],
"weights": [...], "scope": [...], "id": n}}``, ``{"Product": {...}}`` and
``{"Bernoulli": {"p": .., "scope": [..], "id": n}}``; SPFlow has no reader for it. Nodes are
nested, so shared nodes repeat; repeated ids must repeat the same content.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...errors import FormatError
from ...graph import SPN
from ._common import (MAX_NODES, Builder, decode, fmt_real, integer, mapping, parse_json, real,
                      reals, tree_size, unsupported, walk)

TEXT = "spflow-text"
JSON = "spflow-json"

_TOKEN = re.compile(r"""\s*(?:
    (?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z0-9_]+)
  | (?P<sym>[()*+\[\],;|=])
  )""", re.VERBOSE)

#: deepest nesting of parentheses accepted (SPFlow's own parser recurses, so it reads far less)
MAX_DEPTH = 10000

_PARAMS = {"Bernoulli": ("bernoulli", {"p"}), "Gaussian": ("gaussian", {"mean", "stdev"}),
           "Categorical": ("categorical", {"p"})}


class _Lexer:
    def __init__(self, text: str, where: str):
        self.text, self.where, self.pos = text, where, 0
        self.n = len(text)

    def error(self, msg: str, at: int | None = None) -> FormatError:
        return FormatError(f"{self.where}: character {self.pos if at is None else at}: {msg}")

    def peek(self) -> tuple[str, str]:
        m = _TOKEN.match(self.text, self.pos)
        if m is None:
            rest = self.text[self.pos:].lstrip()
            if not rest:
                return "eof", ""
            raise self.error(f"unexpected text {rest[:20]!r}")
        kind = m.lastgroup
        return kind, m.group(kind)

    def take(self) -> tuple[str, str]:
        m = _TOKEN.match(self.text, self.pos)
        if m is None:
            t = self.peek()   # raises, or eof
            return t
        self.pos = m.end()
        return m.lastgroup, m.group(m.lastgroup)

    def expect(self, sym: str) -> None:
        k, v = self.take()
        if v != sym or k == "num":
            raise self.error(f"expected {sym!r}, found {v or 'end of text'!r}")

    def number(self) -> float:
        k, v = self.take()
        if k != "num":
            raise self.error(f"expected a number, found {v or 'end of text'!r}")
        return real(float(v), f"number {v!r} at character {self.pos}")


def _leaf(lx: _Lexer, name: str, b: Builder, key: int, variables: dict[str, int]) -> None:
    start = lx.pos
    label = f"node {key} ({name} leaf at character {start})"
    if name not in _PARAMS:
        if name == "CLTREE":
            raise FormatError(f"{lx.where}: {label}: SPFlow writes Chow-Liu leaves without their "
                              "tree and with 3-decimal factors; they cannot be mapped")
        raise FormatError(f"{lx.where}: {label}: leaf type {name!r} cannot be mapped to spnc "
                          "(supported: Bernoulli, Categorical, Gaussian)")
    lx.expect("(")
    k, fname = lx.take()
    if k != "name":
        raise lx.error(f"{label}: expected a feature name, found {fname!r}")
    lx.expect("|")
    params: dict[str, Any] = {}
    while True:
        k, pname = lx.take()
        if k == "sym" and pname == ")" and not params:
            break
        if k != "name":
            raise lx.error(f"{label}: expected a parameter name, found {pname!r}")
        lx.expect("=")
        if lx.peek() == ("sym", "["):
            lx.take()
            vals: list[float] = []
            if lx.peek() != ("sym", "]"):
                while True:
                    vals.append(lx.number())
                    if len(vals) > MAX_NODES:
                        raise lx.error(f"{label}: list too long")
                    k2, s = lx.take()
                    if s == "]" and k2 == "sym":
                        break
                    if s != "," or k2 != "sym":
                        raise lx.error(f"{label}: expected ',' or ']' in a list, found {s!r}")
            else:
                lx.take()
            params[pname] = vals
        else:
            params[pname] = lx.number()
        k, s = lx.take()
        if s == ")" and k == "sym":
            break
        if s != ";" or k != "sym":
            raise lx.error(f"{label}: expected ';' or ')', found {s!r}")
    kind, names = _PARAMS[name]
    if set(params) != names:
        raise FormatError(f"{lx.where}: {label}: parameters {sorted(params)}, expected {sorted(names)}")
    var = _variable(fname, variables)
    if kind == "bernoulli":
        if isinstance(params["p"], list):
            raise FormatError(f"{lx.where}: {label}: p must be a number")
        b.leaf(key, "bernoulli", [var], {"p": params["p"]}, label)
    elif kind == "gaussian":
        if isinstance(params["mean"], list) or isinstance(params["stdev"], list):
            raise FormatError(f"{lx.where}: {label}: mean and stdev must be numbers")
        b.leaf(key, "gaussian", [var], {"mean": params["mean"], "std": params["stdev"]}, label)
    else:
        if not isinstance(params["p"], list) or not params["p"]:
            raise FormatError(f"{lx.where}: {label}: p must be a non-empty list")
        b.leaf(key, "categorical", [var], {"probs": np.array(params["p"])}, label)


def _variable(fname: str, variables: dict[str, int]) -> int:
    """A placeholder id per feature name, resolved by :func:`_resolve`."""
    if fname not in variables:
        variables[fname] = -1 - len(variables)   # resolved once all names are known
    return variables[fname]


def _resolve(b: Builder, variables: dict[str, int]) -> list[str] | None:
    fixed = {n: int(n[1:]) for n in variables if re.fullmatch(r"V\d{1,7}", n)}
    if len(fixed) == len(variables):
        mapping_ = {variables[n]: v for n, v in fixed.items()}
        names = None
    else:
        order = sorted(variables, key=lambda n: -variables[n])   # first appearance
        mapping_ = {variables[n]: i for i, n in enumerate(order)}
        names = order
    for key, spec in b.nodes.items():
        if spec[0] == "leaf":
            spec[2][:] = [mapping_[v] for v in spec[2]]
    return names


def loads_text(data: bytes | str, where: str = TEXT) -> SPN:
    """Parse SPFlow's equation text into an SPN."""
    text = decode(data, where)
    lx = _Lexer(text, where)
    b = Builder(where)
    variables: dict[str, int] = {}
    # frames: [key, kind ('sum'|'prod'|None), children, weights, start]
    stack: list[list] = []
    counter = 0
    value: int | None = None
    while True:
        if value is None:   # expecting a node
            k, v = lx.take()
            if k == "sym" and v == "(":
                if len(stack) >= MAX_DEPTH:
                    raise lx.error(f"parentheses nested deeper than {MAX_DEPTH}")
                key = counter
                counter += 1
                if lx.peek()[0] == "num":
                    w = lx.number()
                    lx.expect("*")
                    stack.append([key, "sum", [], [w], lx.pos])
                else:
                    if lx.peek() == ("sym", ")"):
                        raise lx.error(f"node {key}: empty parentheses")
                    stack.append([key, "prod", [], [], lx.pos])
                continue
            if k == "name":
                key = counter
                counter += 1
                _leaf(lx, v, b, key, variables)
                value = key
                continue
            raise lx.error(f"expected a node, found {v or 'end of text'!r}")
        if not stack:
            k, v = lx.take()
            if k != "eof":
                raise lx.error(f"text after the root node: {v!r}")
            break
        top = stack[-1]
        top[2].append(value)
        value = None
        k, v = lx.take()
        if k == "sym" and v == ")":
            stack.pop()
            key, kind, ch, ws, start = top
            label = f"node {key} ({'Sum' if kind == 'sum' else 'Product'} at character {start})"
            if kind == "prod" and len(ch) == 1:
                value = ch[0]       # "(child)" is the child itself
                continue
            if kind == "sum":
                b.sum(key, ch, np.array(ws), label)
            else:
                b.product(key, ch, label)
            value = key
        elif top[1] == "sum" and k == "sym" and v == "+":
            top[3].append(lx.number())
            lx.expect("*")
        elif top[1] == "prod" and k == "sym" and v == "*":
            pass
        else:
            want = "'+' or ')'" if top[1] == "sum" else "'*' or ')'"
            raise lx.error(f"expected {want}, found {v or 'end of text'!r}")
    names = _resolve(b, variables)
    return b.build(value if value is not None else counter - 1, var_names=names)


def dumps_text(spn: SPN) -> str:
    """SPFlow equation text of ``spn`` (a DAG is expanded into a tree; variables are
    written ``V<k>``). Numbers are written exactly (shortest round-trip form)."""
    nodes, root = walk(spn, TEXT)
    if tree_size(nodes, root) > MAX_NODES:
        raise FormatError(f"{TEXT}: the model expanded into a tree would have more than "
                          f"{MAX_NODES} nodes (the format cannot share nodes)")
    leaf_text = {n: _leaf_text(n, spec[1]) for n, spec in enumerate(nodes) if spec[0] == "leaf"}
    out: list[str] = []
    work: list[int | str] = [root]      # node ids to expand, or text to emit
    while work:
        item = work.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        spec = nodes[item]
        if spec[0] == "leaf":
            out.append(leaf_text[item])
            continue
        parts: list[int | str] = ["("]
        for i, c in enumerate(spec[1]):
            if spec[0] == "sum":
                parts += [" + " if i else "", f"{fmt_real(spec[2][i])}*(", c, ")"]
            else:
                parts += [" * " if i else "", c]
        parts.append(")")
        work.extend(reversed(parts))
    return "".join(out) + "\n"


def _leaf_text(n: int, obj: Any) -> str:
    lt = type(obj)._leaf_type.name
    if lt == "bernoulli":
        return f"Bernoulli(V{obj.var}|p={fmt_real(obj.p)})"
    if lt == "gaussian":
        return f"Gaussian(V{obj.var}|mean={fmt_real(obj.mean)};stdev={fmt_real(obj.std)})"
    if lt == "categorical":
        return f"Categorical(V{obj.var}|p=[{', '.join(fmt_real(x) for x in obj.probs)}])"
    raise unsupported(TEXT, n, obj)


# ------------------------------------------------------------------ to_JSON dump
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
    return b.build(root_key)


def _cltree(body: dict, n: int) -> dict:
    """SPFlow's CLTree: ``tree[i]`` = local parent index (-1 for the root) and
    ``log_factors[i][x_i][x_parent]`` (the root's two columns hold its prior)."""
    tree = body["tree"]
    if not isinstance(tree, list) or len(tree) != n:
        raise FormatError(f"tree must list one parent per scope variable ({n})")
    par = [integer(t, f"tree[{i}]", -1, n - 1) for i, t in enumerate(tree)]
    if par.count(-1) != 1:
        raise FormatError(f"tree must have exactly one root (-1), found {par.count(-1)}")
    for i in range(n):
        j, steps = i, 0
        while par[j] != -1:
            j, steps = par[j], steps + 1
            if steps > n:
                raise FormatError(f"tree has a cycle through position {i}")
    lf = _array(body["log_factors"])
    if not isinstance(lf, list) or len(lf) != n:
        raise FormatError(f"log_factors must have shape ({n}, 2, 2)")
    cpts = []
    for i, blk in enumerate(lf):
        if not isinstance(blk, list) or len(blk) != 2:
            raise FormatError(f"log_factors[{i}] must be 2 x 2")
        rows = [reals(r, f"log_factors[{i}][{k}]", 2) for k, r in enumerate(blk)]
        if any(len(r) != 2 for r in rows):
            raise FormatError(f"log_factors[{i}] must be 2 x 2")
        with np.errstate(over="ignore"):
            c = np.exp(np.array(rows)).T          # rows: parent state, columns: x_i
        if not np.all(np.isfinite(c)):
            raise FormatError(f"log_factors[{i}] are too large to be log-probabilities")
        cpts.append(c[:1] if par[i] == -1 else c)
    return {"parents": par, "cpts": cpts}


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
    import json
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
    try:
        return json.dumps(built[root], sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        raise FormatError(f"{JSON}: a Chow-Liu leaf has a zero probability, whose log is not JSON") from None
    except RecursionError:
        raise FormatError(f"{JSON}: the model is too deep for a nested JSON file") from None
