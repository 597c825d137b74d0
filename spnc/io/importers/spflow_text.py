"""SPFlow legacy (0.0.x) equation text.

**Text** (``spn.io.Text.spn_to_str_equation`` / ``str_to_spn``): a sum is
``(w*(child) + w*(child))``, a product ``(child * child)``, a leaf
``Class(Vk|name=value;name=value)``, categorical probabilities as ``p=[a, b]``. A child in
parentheses alone is that child. There are no node ids, so a DAG is written as a tree
(shared nodes once per path). Mapped leaves: Bernoulli(p), Categorical(p),
Gaussian(mean, stdev). SPFlow cannot read multivariate Gaussians from text (only the first
variable is written) and writes Chow-Liu trees without their tree (``CLTREE``); both are
refused, as is every other leaf class.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...errors import FormatError
from ...graph import SPN
from ._common import MAX_NODES, Builder, decode, fmt_real, real, tree_size, unsupported, walk

TEXT = "spflow-text"

_TOKEN = re.compile(r"""\s*(?:
    (?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z0-9_]+)
  | (?P<sym>[()*+\[\],;|=])
  | (?P<bad>\S)
  )""", re.VERBOSE)

#: deepest nesting of parentheses accepted (SPFlow's own parser recurses, so it reads far less)
MAX_DEPTH = 10000

_PARAMS = {"Bernoulli": ("bernoulli", {"p"}), "Gaussian": ("gaussian", {"mean", "stdev"}),
           "Categorical": ("categorical", {"p"})}


class _Lexer:
    """Tokens of the text, one lookahead; ``pos`` is where the last token taken starts."""

    def __init__(self, text: str, where: str):
        self.where, self.pos, self.end = where, 0, len(text)
        self._it = _TOKEN.finditer(text)
        self._buf: tuple[str, str, int] | None = None

    def error(self, msg: str, at: int | None = None) -> FormatError:
        return FormatError(f"{self.where}: character {self.pos if at is None else at}: {msg}")

    def _next(self) -> tuple[str, str, int]:
        m = next(self._it, None)
        if m is None:
            return "eof", "", self.end
        k = m.lastgroup
        if k == "bad":
            raise self.error(f"unexpected character {m.group(k)!r}", m.start(k))
        return k, m.group(k), m.start(k)

    def peek(self) -> tuple[str, str]:
        if self._buf is None:
            self._buf = self._next()
        return self._buf[0], self._buf[1]

    def take(self) -> tuple[str, str]:
        t = self._buf if self._buf is not None else self._next()
        self._buf = None
        self.pos = t[2]
        return t[0], t[1]

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
    fpos = lx.pos
    lx.expect("|")
    params: dict[str, Any] = {}
    while True:
        k, pname = lx.take()
        if k == "sym" and pname == ")" and not params:
            break
        if k != "name":
            raise lx.error(f"{label}: expected a parameter name, found {pname!r}")
        if pname in params:
            raise lx.error(f"{label}: parameter {pname!r} given twice")
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
    var = _variable(fname, fpos, variables)
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


def _variable(fname: str, at: int, variables: dict[str, tuple[int, int]]) -> int:
    """A placeholder id per feature name (and where it first appears), resolved by
    :func:`_resolve`."""
    if fname not in variables:
        variables[fname] = (-1 - len(variables), at)   # resolved once all names are known
    return variables[fname][0]


def _place(text: str, at: int) -> str:
    """``at`` (a character offset) as line and column, both counted from 1."""
    start = text.rfind("\n", 0, at) + 1
    return f"line {text.count(chr(10), 0, at) + 1}, character {at - start + 1}"


def _resolve(b: Builder, variables: dict[str, tuple[int, int]], text: str, where: str) -> list[str] | None:
    fixed = {n: int(n[1:]) for n in variables if re.fullmatch(r"V\d{1,7}", n)}
    if len(fixed) == len(variables):
        seen: dict[int, str] = {}
        for n in sorted(fixed, key=lambda n: variables[n][1]):     # in order of appearance
            if fixed[n] in seen:
                m = seen[fixed[n]]
                raise FormatError(f"{where}: {_place(text, variables[n][1])}: feature {n!r} is variable "
                                  f"{fixed[n]}, and so is {m!r} ({_place(text, variables[m][1])}); SPFlow "
                                  "reads both as that one column: write each variable one way")
            seen[fixed[n]] = n
        mapping_ = {variables[n][0]: v for n, v in fixed.items()}
        names = None
    else:
        order = sorted(variables, key=lambda n: variables[n][1])   # first appearance
        mapping_ = {variables[n][0]: i for i, n in enumerate(order)}
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
    variables: dict[str, tuple[int, int]] = {}
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
                key, start = counter, lx.pos
                counter += 1
                if lx.peek()[0] == "num":
                    w = lx.number()
                    lx.expect("*")
                    stack.append([key, "sum", [], [w], start])
                else:
                    if lx.peek() == ("sym", ")"):
                        raise lx.error(f"node {key}: empty parentheses")
                    stack.append([key, "prod", [], [], start])
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
    names = _resolve(b, variables, text, where)
    return b.build(value if value is not None else counter - 1, var_names=names)


def dumps_text(spn: SPN) -> str:
    """SPFlow equation text of ``spn`` (a DAG is expanded into a tree; variables are
    written ``V<k>``). Numbers are written exactly (shortest round-trip form)."""
    nodes, root = walk(spn, TEXT)
    if tree_size(nodes, root) > MAX_NODES:
        raise FormatError(f"{TEXT}: the model expanded into a tree would have more than "
                          f"{MAX_NODES} nodes (the format cannot share nodes)")
    # parentheses the reader stacks: a sum's own and one per weighted child, a product's own
    depth = [0] * len(nodes)
    for n, spec in enumerate(nodes):
        if spec[0] != "leaf":
            depth[n] = (2 if spec[0] == "sum" else 1) + max(depth[c] for c in spec[1])
    if depth[root] > MAX_DEPTH:
        raise FormatError(f"{TEXT}: the model would nest parentheses {depth[root]} deep, more than the "
                          f"{MAX_DEPTH} this reader takes (SPFlow's own parser far fewer)")
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
