"""Shared parts of the foreign-format importers and exporters.

Every importer turns a file into a flat list of nodes keyed by the source's own ids
(:class:`Builder`), and :meth:`Builder.build` checks that list (unknown children, cycles,
weights, leaf parameters, variable types) and assembles a :class:`spnc.SPN`. Every error
is a :class:`spnc.FormatError` naming the source node and its type. Exporters walk a
compiled SPN with :func:`walk`.
"""
from __future__ import annotations

import json
import math
import os
import re
import warnings
from typing import Any, Hashable

import numpy as np

from ...errors import FormatError, SpncError
from ...graph import SPN, SUM, PRODUCT
from ... import leaves as L
from .._spec import read_at_most

#: files larger than this are refused before reading
MAX_BYTES = 256 << 20
#: most nodes a foreign file may hold (also the bound on a DAG expanded into a tree)
MAX_NODES = 1 << 24
#: largest variable index accepted
MAX_VAR = (1 << 20) - 1
#: sum weights within this of 1 are kept bit for bit (the source evaluates them as they are)
KEEP_TOL = 1e-6
#: sum weights within this of 1 (rounded formats) are renormalised with a warning
RENORM_TOL = 1e-4


def read_bytes(path: str | os.PathLike) -> bytes:
    size = os.path.getsize(path)
    if size > MAX_BYTES:
        raise FormatError(f"{os.fspath(path)}: {size} bytes is larger than the {MAX_BYTES}-byte limit")
    with open(path, "rb") as f:
        return read_at_most(f, MAX_BYTES)


def decode(data: bytes | str, where: str) -> str:
    if isinstance(data, str):
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if not text.strip():
        raise FormatError(f"{where}: file is empty")
    return text


def _no_dups(pairs: list) -> dict:
    d: dict = {}
    for k, v in pairs:
        if k in d:
            raise FormatError(f"duplicate key {k!r}")
        d[k] = v
    return d


def _no_constant(name: str) -> Any:
    raise FormatError(f"{name} is not a JSON number")


def parse_json(data: bytes | str, where: str) -> Any:
    """Strict JSON: no duplicate keys, no NaN/Infinity, bounded nesting (the recursion
    limit), integers of at most 4300 digits."""
    text = decode(data, where)
    try:
        return json.loads(text, object_pairs_hook=_no_dups, parse_constant=_no_constant)
    except FormatError as e:
        raise FormatError(f"{where}: {e}") from None
    except RecursionError:
        raise FormatError(f"{where}: JSON nested too deeply") from None
    except ValueError as e:  # JSONDecodeError and over-long integers
        raise FormatError(f"{where}: not valid JSON: {str(e).splitlines()[0][:200]}") from None


# ------------------------------------------------------------------ checked scalars
def real(v: Any, what: str) -> float:
    """A finite real number (JSON int or float, not a boolean)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise FormatError(f"{what} must be a number, got {type(v).__name__}")
    try:
        x = float(v)
    except OverflowError:
        raise FormatError(f"{what} = {v} does not fit in a double") from None
    if not math.isfinite(x):
        raise FormatError(f"{what} must be finite, got {x!r}")
    return x


def integer(v: Any, what: str, lo: int = 0, hi: int = MAX_VAR) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        else:
            raise FormatError(f"{what} must be an integer, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise FormatError(f"{what} = {v} is outside [{lo}, {hi}]")
    return int(v)


def reals(v: Any, what: str, max_len: int = MAX_NODES) -> np.ndarray:
    if not isinstance(v, list):
        raise FormatError(f"{what} must be a list of numbers, got {type(v).__name__}")
    if len(v) > max_len:
        raise FormatError(f"{what} has {len(v)} entries, more than {max_len}")
    return np.array([real(x, f"{what}[{i}]") for i, x in enumerate(v)], dtype=np.float64)


def mapping(v: Any, what: str) -> dict:
    if not isinstance(v, dict):
        raise FormatError(f"{what} must be an object, got {type(v).__name__}")
    return v


# ------------------------------------------------------------------ building
class Builder:
    """Nodes of a foreign model keyed by the source's ids, assembled into an SPN.

    ``label(key)`` texts (e.g. ``"node 17 (Sum)"``) name nodes in error messages.
    Leaves are given as ``(type, vars, params)`` with ``type`` one of ``bernoulli``,
    ``categorical`` (``probs``), ``gaussian`` (``mean``, ``std``), ``mvgaussian``
    (``mean``, ``cov``), ``cltree`` (``parents``, ``cpts``) and ``indicator`` (``value``).
    """

    def __init__(self, source: str):
        self.source = source
        self.nodes: dict[Hashable, tuple] = {}
        self.labels: dict[Hashable, str] = {}

    def _add(self, key: Hashable, label: str, spec: tuple) -> None:
        if key in self.nodes:
            raise FormatError(f"{self.source}: {label}: id {key!r} is used twice")
        if len(self.nodes) >= MAX_NODES:
            raise FormatError(f"{self.source}: more than {MAX_NODES} nodes")
        self.nodes[key] = spec
        self.labels[key] = label

    def sum(self, key: Hashable, children: list, weights: np.ndarray, label: str) -> None:
        if len(children) != len(weights):
            raise FormatError(f"{self.source}: {label}: {len(weights)} weights for {len(children)} children")
        self._add(key, label, ("sum", list(children), np.asarray(weights, dtype=np.float64)))

    def product(self, key: Hashable, children: list, label: str) -> None:
        self._add(key, label, ("product", list(children)))

    def leaf(self, key: Hashable, kind: str, vars_: list[int], params: dict, label: str) -> None:
        self._add(key, label, ("leaf", kind, [int(v) for v in vars_], params))

    def err(self, key: Hashable, msg: str) -> FormatError:
        return FormatError(f"{self.source}: {self.labels.get(key, repr(key))}: {msg}")

    # -------------------------------------------------------------- assembly
    def _order(self, root: Hashable) -> list:
        if root not in self.nodes:
            raise FormatError(f"{self.source}: root {root!r} is not a node")
        state: dict = {}
        order: list = []
        stack = [(root, False)]
        while stack:
            key, done = stack.pop()
            if done:
                state[key] = 2
                order.append(key)
                continue
            if state.get(key) == 2:
                continue
            state[key] = 1
            stack.append((key, True))
            spec = self.nodes[key]
            if spec[0] != "leaf":
                if not spec[1]:
                    raise self.err(key, "has no children")
                for c in reversed(spec[1]):
                    if c not in self.nodes:
                        raise self.err(key, f"child {c!r} is not a node")
                    s = state.get(c)
                    if s == 1:
                        raise self.err(key, f"child {self.labels[c]} is its own ancestor (cycle)")
                    if s is None:
                        stack.append((c, False))
        return order

    def _cardinality(self, order: list) -> tuple[np.ndarray, np.ndarray]:
        """States each variable's leaves need (0: real) and which variables a leaf has."""
        card: dict[int, int] = {}
        for key in order:
            spec = self.nodes[key]
            if spec[0] != "leaf":
                continue
            _, kind, vs, p = spec
            if kind in ("gaussian", "mvgaussian"):
                need = {v: 0 for v in vs}
            elif kind == "bernoulli":
                need = {vs[0]: 2}
            elif kind == "categorical":
                need = {vs[0]: max(2, len(p["probs"]))}
            elif kind == "indicator":
                need = {vs[0]: max(2, p["value"] + 1, p.get("num_cats", 0))}
            elif kind == "cltree":
                need = {v: max(2, np.shape(c)[1]) for v, c in zip(vs, p["cpts"])}
            else:  # pragma: no cover - importers only emit the kinds above
                raise self.err(key, f"unknown leaf kind {kind!r}")
            for v, k in need.items():
                if not 0 <= v <= MAX_VAR:
                    raise self.err(key, f"variable {v} is outside [0, {MAX_VAR}]")
                if v in card and (card[v] == 0) != (k == 0):
                    raise self.err(key, f"variable {v} has both discrete and real-valued leaves")
                card[v] = max(card.get(v, k), k)
        n = max(card) + 1 if card else 0
        out = np.zeros(n, dtype=np.int64)
        used = np.zeros(n, dtype=bool)
        for v, k in card.items():
            out[v], used[v] = k, True
        return out, used

    def _leaf_object(self, key: Hashable, card: np.ndarray) -> Any:
        _, kind, vs, p = self.nodes[key]
        try:
            if kind == "bernoulli":
                pp = p["p"]
                if not 0.0 <= pp <= 1.0:
                    raise self.err(key, f"p = {pp!r} is outside [0, 1]")
                if card[vs[0]] == 2:
                    return L.Bernoulli(vs[0], pp)
                return L.Categorical(vs[0], _pad([1.0 - pp, pp], card[vs[0]]))
            if kind == "categorical":
                return L.Categorical(vs[0], _pad(p["probs"], card[vs[0]]))
            if kind == "gaussian":
                if not p["std"] > 0:
                    raise self.err(key, f"standard deviation {p['std']!r} is not positive")
                return L.Gaussian(vs[0], p["mean"], p["std"])
            if kind == "indicator":
                return L.Indicator(vs[0], p["value"])
            if kind == "mvgaussian":
                return L.MultivariateGaussian(vs, p["mean"], p["cov"])
            if kind == "cltree":
                order = np.argsort(vs)
                if np.any(np.diff(np.asarray(vs)[order]) == 0):
                    raise self.err(key, "a variable appears twice in the tree")
                pos = np.empty(len(vs), dtype=np.int64)
                pos[order] = np.arange(len(vs))
                par = [int(pos[p["parents"][j]]) if p["parents"][j] >= 0 else -1 for j in order]
                cpts = [_pad_cols(p["cpts"][j], card[vs[j]], card[vs[p["parents"][j]]]
                                  if p["parents"][j] >= 0 else 1) for j in order]
                return L.ChowLiuLeaf([vs[j] for j in order], par, cpts)
        except FormatError:
            raise
        except (SpncError, ValueError, TypeError, IndexError) as e:
            raise self.err(key, str(e)) from None
        raise self.err(key, f"unknown leaf kind {kind!r}")  # pragma: no cover

    def build(self, root: Hashable, var_names: list[str] | None = None, declared: Any = None) -> SPN:
        """The SPN rooted at ``root``; ``declared``: spnc's variables (:func:`._variables.settle`)."""
        from ._variables import settle
        order = self._order(root)
        index = {k: i for i, k in enumerate(order)}
        card, var_type, var_names = settle(declared, *self._cardinality(order), var_names, self.source)
        N = len(order)
        kind = np.empty(N, dtype=np.uint8)
        kids: list[list[int]] = []
        wts: list[np.ndarray] = []
        by_type: dict[Any, tuple[list[int], list]] = {}
        for i, key in enumerate(order):
            spec = self.nodes[key]
            if spec[0] == "sum":
                kind[i] = SUM
                ch, w = self._merge_duplicates(key, [index[c] for c in spec[1]], spec[2])
                kids.append(ch)
                wts.append(self._check_weights(key, w))
            elif spec[0] == "product":
                kind[i] = PRODUCT
                ch = [index[c] for c in spec[1]]
                if len(set(ch)) != len(ch):
                    raise self.err(key, "lists the same child twice (not decomposable)")
                kids.append(ch)
                wts.append(np.ones(len(ch)))
            else:
                obj = self._leaf_object(key, card)
                lt = type(obj)._leaf_type
                kind[i] = lt.code
                ids, objs = by_type.setdefault(lt, ([], []))
                ids.append(i)
                objs.append(obj)
                kids.append([])
                wts.append(np.zeros(0))
        ptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum([len(c) for c in kids], out=ptr[1:])
        child = np.array([c for cs in kids for c in cs], dtype=np.int64)
        weight = np.concatenate(wts) if wts else np.zeros(0)
        if var_names is not None and len(var_names) < len(card):
            var_names = None
        try:
            tables = {lt.name: lt.from_nodes(np.asarray(ids, dtype=np.int64), objs)
                      for lt, (ids, objs) in by_type.items()}
            return SPN.from_arrays(kind, ptr, child, weight, tables, card, var_type=var_type,
                                   var_names=None if var_names is None else var_names[:len(card)])
        except SpncError as e:
            raise FormatError(self._rename(str(e), order)) from None
        except (ValueError, TypeError, IndexError) as e:
            raise FormatError(f"{self.source}: invalid model: {self._rename(str(e), order)}") from None

    def _rename(self, msg: str, order: list) -> str:
        def sub(m: re.Match) -> str:
            i = int(m.group(2))
            if not 0 <= i < len(order):
                return m.group(0)
            return self.labels[order[i]] if m.group(1) == "node" else f"child {self.labels[order[i]]}"
        # spnc's "node 5 (bernoulli leaf)" becomes the source's "node 17 (Bernoulli leaf ...)"
        return f"{self.source}: " + re.sub(r"\b(node|child) (\d+)(?: \(\w+ leaf\))?", sub, msg)

    def _merge_duplicates(self, key: Hashable, ch: list[int], w: np.ndarray) -> tuple[list[int], np.ndarray]:
        if len(set(ch)) == len(ch):
            return ch, w
        seen: dict[int, int] = {}
        out_c: list[int] = []
        out_w: list[float] = []
        for c, x in zip(ch, w):
            if c in seen:
                out_w[seen[c]] += x
            else:
                seen[c] = len(out_c)
                out_c.append(c)
                out_w.append(float(x))
        return out_c, np.array(out_w)

    def _check_weights(self, key: Hashable, w: np.ndarray) -> np.ndarray:
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise self.err(key, f"weights must be finite and non-negative, got {w.tolist()[:8]}")
        tot = float(w.sum())
        if abs(tot - 1.0) <= KEEP_TOL:
            return w
        if abs(tot - 1.0) <= RENORM_TOL:
            warnings.warn(f"{self.source}: {self.labels[key]}: weights add up to {tot!r}; renormalised",
                          stacklevel=3)
            return w / tot
        raise self.err(key, f"weights add up to {tot!r}, not 1")


def _pad(probs: Any, k: int) -> np.ndarray:
    p = np.asarray(probs, dtype=np.float64).ravel()
    if len(p) > k:
        raise FormatError(f"{len(p)} probabilities for a variable with {k} states")
    return np.concatenate([p, np.zeros(k - len(p))])


def _pad_cols(cpt: Any, k: int, rows: int) -> np.ndarray:
    c = np.asarray(cpt, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] > k or c.shape[0] > rows:
        raise FormatError(f"CPT of shape {c.shape} does not fit {rows} parent states x {k} states")
    out = np.zeros((rows, k))
    out[:c.shape[0], :c.shape[1]] = c
    if c.shape[0] < rows:  # parent states never seen by the source: any normalised row
        out[c.shape[0]:, 0] = 1.0
    return out


# ------------------------------------------------------------------ exporting
def walk(spn: SPN, fmt: str) -> tuple[list[tuple], int]:
    """Per node of ``spn`` (children first): ``("sum", children, weights)``,
    ``("product", children)`` or ``("leaf", construction object)``; and the root id.
    A mixture of roots gets an extra sum node; ``combine='independent'`` is refused."""
    objs: list[Any] = [None] * spn.n_nodes
    for table in spn.leaf_tables.values():
        for i, n in enumerate(table.node):
            objs[n] = table.to_node(i)
    out: list[tuple] = []
    for n in range(spn.n_nodes):
        k = int(spn.kind[n])
        a, b = int(spn.child_ptr[n]), int(spn.child_ptr[n + 1])
        if k == SUM:
            out.append(("sum", [int(c) for c in spn.child[a:b]], np.asarray(spn.weight[a:b])))
        elif k == PRODUCT:
            out.append(("product", [int(c) for c in spn.child[a:b]]))
        else:
            out.append(("leaf", objs[n]))
    if spn.combine == "single":
        return out, int(spn.root)
    if spn.combine == "mixture":
        out.append(("sum", [int(r) for r in spn.roots], np.asarray(spn.root_weights)))
        return out, len(out) - 1
    raise FormatError(f"{fmt}: a bag of independent models (combine='independent') has no "
                      "single root; save each model separately")


def unsupported(fmt: str, n: int, obj: Any, why: str = "") -> FormatError:
    name = getattr(type(obj), "_leaf_type", None)
    tname = name.name if name is not None else type(obj).__name__
    return FormatError(f"{fmt}: node {n} ({tname} leaf) cannot be written"
                       + (f": {why}" if why else f"; {fmt} has no {tname} leaf"))


def tree_size(nodes: list[tuple], root: int) -> int:
    """Number of nodes once the DAG is expanded into a tree (capped at MAX_NODES + 1)."""
    size = np.zeros(len(nodes), dtype=np.int64)
    for n, spec in enumerate(nodes):
        if spec[0] == "leaf":
            size[n] = 1
        else:
            size[n] = min(MAX_NODES + 1, 1 + int(sum(int(size[c]) for c in spec[1])))
    return int(size[root])


def fmt_real(x: float) -> str:
    """Shortest text that reads back to the same double."""
    return repr(float(x))

