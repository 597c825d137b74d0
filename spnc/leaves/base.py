"""The leaf-type plug-in mechanism.

A leaf type is a subclass of :class:`LeafType`; one instance holds the parameter table of
*all* leaves of that type in one compiled SPN (structure of arrays). The core never branches
on leaf type: for each chunk of rows it asks every table to write its leaves' log-values
into the rows of a leaf matrix, then runs the sum/product kernels. Registering a subclass
with :func:`register_leaf` is the whole change needed to add a leaf type.

Array conventions shared by every method below:

* ``XT`` -- a chunk of data, transposed: float64, C-contiguous, shape ``(n_vars, m)``;
  NaN marks a missing value.
* ``out`` -- float64, C-contiguous, shape ``(n_leaves_total, m)``; leaf ``i`` of this table
  writes row ``self.slot[i]``.
* ``active`` -- uint8, shape ``(n_leaves_total, m)``; nonzero where the leaf is on the
  selected induced tree of that row (MPE / sampling).
"""
from __future__ import annotations

import abc
import re
from typing import Any, ClassVar

import numpy as np

from .._warn import warn_user
from ..errors import FormatError, StructureError

_BY_NAME: dict[str, type["LeafType"]] = {}
_BY_CODE: dict[int, type["LeafType"]] = {}

#: mode values for :meth:`LeafType.log_prob` (missing variables summed out / maximised over)
from .._kinds import MARGINAL, MAX  # noqa: E402,F401


def register_leaf(cls: type["LeafType"]) -> type["LeafType"]:
    """Class decorator adding a leaf type to the registry (by ``name`` and file ``code``)."""
    if cls.name in _BY_NAME:
        raise ValueError(f"leaf type {cls.name!r} is already registered")
    if cls.code in _BY_CODE or cls.code < 2 or cls.code > 255:
        raise ValueError(f"leaf type {cls.name!r}: code {cls.code} is taken or outside 2..255")
    # formats/spnc-hdf5.md §4: 8..127 are reserved for the format, 128..255 are vendor codes
    vendor = re.fullmatch(r"x_[a-z0-9]+_[a-z0-9_]+", cls.name) is not None
    if (cls.code >= 128) != vendor or 8 <= cls.code < 128:
        raise ValueError(f"leaf type {cls.name!r}: new leaf types take a vendor code 128..255 "
                         "and a name 'x_<vendor>_<type>' (formats/spnc-hdf5.md §4)")
    _BY_NAME[cls.name] = cls
    _BY_CODE[cls.code] = cls
    cls.node_class._leaf_type = cls
    return cls


def leaf_type_by_name(name: str) -> type["LeafType"]:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise FormatError(f"unknown leaf type {name!r}; known: {sorted(_BY_NAME)}") from None


def leaf_type_by_code(code: int) -> type["LeafType"]:
    try:
        return _BY_CODE[int(code)]
    except KeyError:
        raise FormatError(f"unknown node kind code {code}; known leaf codes: {sorted(_BY_CODE)}") from None


def leaf_types() -> list[type["LeafType"]]:
    """Registered leaf types, ordered by code."""
    return [_BY_CODE[c] for c in sorted(_BY_CODE)]


class LeafType(abc.ABC):
    """Parameter table for all leaves of one type in a compiled SPN.

    Subclasses set ``name`` (file table ``/leaves/<name>``), ``code`` (node kind code in
    files, >= 2), ``node_class`` (the construction class, a :class:`spnc.nodes.Leaf`)
    and ``discrete`` (True if every variable must be discrete: its leaves' values are then
    probabilities, at most 1, which the sweeps rely on); ``max_abs_value``, when
    set, bounds the training values of its variables (its EM statistics square them).
    """

    name: ClassVar[str]
    code: ClassVar[int]
    node_class: ClassVar[type]
    discrete: ClassVar[bool] = False
    max_abs_value: ClassVar[float | None] = None

    def __init__(self, node: np.ndarray, scopes: list[np.ndarray], params: dict[str, np.ndarray]):
        self.node = np.ascontiguousarray(node, dtype=np.int64)
        self.scopes = [np.asarray(s, dtype=np.int32) for s in scopes]   # per leaf, ascending
        self.params = {k: np.ascontiguousarray(v) for k, v in params.items()}
        self.slot = np.arange(len(self.node), dtype=np.int64)  # set by the container

    def __len__(self) -> int:
        return len(self.node)

    # ---- construction and files -------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def from_nodes(cls, node_ids: np.ndarray, leaves: list) -> "LeafType":
        """Build the table from construction objects (``leaves[i]`` is node ``node_ids[i]``)."""

    @classmethod
    def from_arrays(cls, node: np.ndarray, scopes: list[np.ndarray], arrays: dict[str, np.ndarray]) -> "LeafType":
        """Build the table from file arrays (``to_arrays`` output). Does not validate."""
        return cls(node, scopes, arrays)

    def content_key(self) -> tuple:
        """Hashes of the node and parameter arrays' contents: caches derived from the table
        compare it, so an in-place edit of the parameters invalidates them."""
        return (hash(np.asarray(self.node).tobytes()),) + tuple(hash(np.asarray(v).tobytes())
                                                               for v in self.params.values())

    def with_params(self, params: dict[str, np.ndarray]) -> "LeafType":
        """The same leaves with new parameters (not validated). Types whose construction
        derives nothing from the parameters may override this with a cheaper copy."""
        return type(self).from_arrays(self.node, self.scopes, params)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The datasets of ``/leaves/<name>`` except ``node``, exactly as stored."""
        return dict(self.params)

    @classmethod
    def gather(cls, node_ids: np.ndarray, parts: list[tuple["LeafType", np.ndarray, np.ndarray]]) -> "LeafType":
        """A table of ``len(node_ids)`` leaves copied from existing tables of this type:
        for each part ``(table, idx, pos)`` leaf ``idx[k]`` of ``table`` becomes leaf
        ``pos[k]``. Parameters are sliced from the arrays (one entry per leaf, or slices of
        ``name`` delimited by ``name_ptr``), so no construction objects are made; other
        layouts go through :meth:`to_node` and :meth:`from_nodes`."""
        L = len(node_ids)
        tabs = [t for t, _, _ in parts]
        keys = sorted(tabs[0].params)
        if any(sorted(t.params) != keys for t in tabs):
            return cls._gather_objects(node_ids, parts)
        params: dict[str, np.ndarray] = {}
        for k in keys:
            if k.endswith("_ptr") and k[:-4] in tabs[0].params:
                continue
            a0 = tabs[0].params[k]
            if all(len(t.params.get(k + "_ptr", ())) == len(t) + 1 for t in tabs):
                lens = np.zeros(L, dtype=np.int64)
                for t, idx, pos in parts:
                    lens[pos] = np.diff(t.params[k + "_ptr"])[idx]
                ptr = np.zeros(L + 1, dtype=tabs[0].params[k + "_ptr"].dtype)
                np.cumsum(lens, out=ptr[1:])
                vals = np.empty(int(ptr[-1]), dtype=a0.dtype)
                for t, idx, pos in parts:
                    vals[_ranges(ptr[:-1][pos], lens[pos])] = t.params[k][_ranges(t.params[k + "_ptr"][idx], lens[pos])]
                params[k], params[k + "_ptr"] = vals, ptr
            elif all(t.params[k].ndim >= 1 and t.params[k].shape[0] == len(t) for t in tabs):
                vals = np.empty((L,) + a0.shape[1:], dtype=a0.dtype)
                for t, idx, pos in parts:
                    vals[pos] = t.params[k][idx]
                params[k] = vals
            else:
                return cls._gather_objects(node_ids, parts)
        out = cls._from_gathered(np.asarray(node_ids, dtype=np.int64), _place([t.scopes for t in tabs], parts, L),
                                 params, parts)
        out._gathered(parts)
        _follow_keys(out, parts)
        _follow_scope_index(out, parts)
        return out

    @classmethod
    def _from_gathered(cls, node: np.ndarray, scopes: list, params: dict, parts) -> "LeafType":
        """The table :meth:`gather` made of ``parts``: ``scopes`` are the parts' own arrays."""
        return cls.from_arrays(node, scopes, params)

    def _gathered(self, parts) -> None:
        """Hook after :meth:`gather`: copy derived per-leaf state from the parts."""

    @classmethod
    def _gather_objects(cls, node_ids, parts) -> "LeafType":
        objs: list = [None] * len(node_ids)
        for t, idx, pos in parts:
            for i, j in zip(idx.tolist(), pos.tolist()):
                objs[j] = t.to_node(i)
        return cls.from_nodes(np.asarray(node_ids, dtype=np.int64), objs)

    @abc.abstractmethod
    def to_node(self, i: int):
        """Construction object for leaf ``i`` (used to walk a compiled SPN)."""

    @abc.abstractmethod
    def validate(self, cardinality: np.ndarray) -> None:
        """Check parameters (shapes, ranges, normalisation) against the variables;
        raise :class:`StructureError` naming the node and the parameter."""

    def describe(self, i: int, var_names: list[str]) -> str:
        """Short label for drawings, e.g. ``Bern(X0) p=0.2``."""
        vs = ",".join(var_names[v] for v in self.scopes[i])
        return f"{self.name}({vs})"

    # ---- inference ---------------------------------------------------------------------
    def zero_leaves(self) -> np.ndarray:
        """Boolean mask of the leaves that may give some complete row probability zero
        (hard routing must then read their values, spnc.learn.routing): every leaf, unless
        the type knows better."""
        return np.ones(len(self.node), dtype=bool)

    def underflow_leaves(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Boolean mask of the leaves outside :meth:`zero_leaves` (positive everywhere) whose
        log-value may still be ``-inf`` or NaN in doubles for a complete row with every
        variable v in ``[lo[v], hi[v]]`` (a density far from its mean underflows): hard
        routing then treats the row as of probability zero. None, unless the type says."""
        return np.zeros(len(self.node), dtype=bool)

    def state_log_probs(self, cardinality: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """For univariate discrete leaves: ``(var, ptr, logp)`` with ``logp[ptr[i] + x]`` the
        log-probability of state x of leaf i on variable ``var[i]`` (normalised, so a
        missing value contributes 0). The compiled sweep then evaluates these leaves itself,
        with no leaf matrix; ``None`` (the default) means :meth:`log_prob` is used."""
        return None

    def log_marginals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Single-variable log-marginals of every leaf, or None (then callers evaluate
        evidence rows instead): ``(ptr, var, logp)``, leaf ``i`` owning entries
        ``ptr[i]:ptr[i+1]`` of ``var`` (discrete variables of its scope), ``logp`` listing
        each entry's states' log-probabilities in turn."""
        return None

    @abc.abstractmethod
    def log_prob(self, XT: np.ndarray, out: np.ndarray, mode: int, n_threads: int) -> None:
        """Write log p(x_scope) of each leaf into ``out[slot[i], :]``.

        ``mode == MARGINAL``: missing variables are marginalised; ``mode == MAX``: they are
        maximised over (the leaf's max-product value)."""

    @abc.abstractmethod
    def fill(self, XT: np.ndarray, active: np.ndarray, out_XT: np.ndarray, mode: int,
             seed: int, row0: int) -> None:
        """For rows where ``active[slot[i], r]`` is set, write the leaf's missing variables
        into ``out_XT``: the conditional mode given the observed ones (``mode == MAX``) or
        a sample from the conditional (``mode == MARGINAL``), using counter-based random
        numbers keyed by ``(seed, row0 + r, node[i])`` (see ``spnc/_random.pxd``)."""

    # ---- learning (EM) -----------------------------------------------------------------
    def em_stats(self, alpha: float = 0.0, min_std: float = 1e-3, n_threads: int = 1) -> "LeafStats | None":
        """Streaming EM statistics of this table (a :class:`LeafStats`), or ``None`` to let
        EM call :meth:`weighted_fit` on the whole data with the table's responsibilities."""
        return None

    def weighted_fit(self, X: np.ndarray, resp: np.ndarray, **options: Any) -> None:
        """Replace each leaf's parameters by the weighted ML fit, ``resp[:, i]`` being the
        weight of each row of ``X`` (full-width, n x n_vars) for leaf ``i``."""
        raise NotImplementedError(f"leaf type {self.name!r} has no weighted fit")

    def log_prior(self, alpha: float) -> np.ndarray:
        """Per leaf, the log-prior (up to a constant) that :meth:`weighted_fit` with
        pseudo-count ``alpha`` maximises together with the weighted log-likelihood: EM's
        Eq. 12 check compares old and new parameters by the sum. Default: none (zeros)."""
        return np.zeros(len(self))

    def check_data(self, X: np.ndarray, cardinality: np.ndarray) -> None:
        """Raise DataError for values outside the support of this leaf type's variables
        (``X``: the query's rows, float64 (n, n_vars), NaN = missing, already checked for
        infinities and discrete states). Every query calls it; the default accepts all."""


def _ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lens)])`` without a loop."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    if not lens.size:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lens)
    return np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(starts - (ends - lens), lens)


def _err(table: LeafType, i: int, msg: str) -> StructureError:
    return StructureError(f"node {int(table.node[i])} ({table.name} leaf): {msg}")


class LeafStats:
    """Streaming EM sufficient statistics of one leaf table: accumulate over row chunks,
    then fit. A leaf type returns one from :meth:`LeafType.em_stats`.

    ``zero()`` -> dict of arrays; ``accumulate(s, XT, R, rw)`` adds one chunk of rows
    (``XT`` (n_vars, m) transposed, ``R`` the responsibilities of all leaves in slot layout
    (n_leaves, m), ``rw`` the row weights (m,)); ``fit(s)`` -> new parameter arrays;
    ``score(params, s)`` -> (L,) the weighted log-likelihood (plus the log prior of the
    pseudo-counts or ridge) of each leaf under ``params``, the quantity EM's leaf check
    (Eq. 12) compares. Statistics that live around a centre also define
    ``recentre(s, center)`` (online EM mixes statistics of several steps). Sums of
    squares that can overflow keep a per-leaf unit of weight ``s["unit"]`` with
    ``rescale(s, unit)`` and ``overflowed(s)`` (the units for redoing the pass, or None);
    ``imprecise(s)`` gives the centres for redoing a pass that lost precision. Tables with
    ``state_log_probs`` may define ``add_state_counts(s, counts)``: the sweep then counts
    the weighted posterior of every state itself (``counts`` in the order of the table's
    state table) and EM needs no responsibilities for them."""

    def __init__(self, table: LeafType, alpha: float = 0.0, min_std: float = 1e-3, n_threads: int = 1):
        self.t, self.alpha, self.min_std, self.nt = table, float(alpha), float(min_std), int(n_threads)

    def zero(self) -> dict:
        return {}

    def accumulate(self, s: dict, XT: np.ndarray, R: np.ndarray, rw: np.ndarray) -> None:
        pass

    def fit(self, s: dict) -> dict:
        return dict(self.t.params)

    def score(self, params: dict, s: dict) -> np.ndarray:
        return np.zeros(len(self.t))


def xlogy(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x log y, 0 where x is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, x * np.log(np.where(x > 0, y, 1.0)), 0.0)


def overflow_units(unit: np.ndarray, w: np.ndarray, overflowed: np.ndarray) -> np.ndarray | None:
    """Per-leaf units of weight for redoing sums of squares that overflowed (``overflowed``
    where a leaf of weight ``w > 0`` has a non-finite sum): powers of two, so that the
    leaf's weight in its unit is at most 1; None if no leaf overflowed."""
    bad = (w > 0) & overflowed
    if not bad.any():
        return None
    out = np.array(unit, dtype=np.float64, copy=True)
    out[bad] *= 2.0 ** -np.maximum(np.ceil(np.log2(w[bad])), 1.0)
    return out


def warn_kept(table: LeafType, idx: np.ndarray) -> None:
    """Warn that the leaves ``idx`` of ``table`` keep their parameters (sums not finite)."""
    if len(idx):
        i = int(idx[0])
        more = f" (and {len(idx) - 1} more leaves)" if len(idx) > 1 else ""
        warn_user(f"node {int(table.node[i])} ({table.name} leaf on variables {table.scopes[i].tolist()}): its EM "
                  f"statistics overflowed, so it keeps its parameters{more}; rescale the data")


def _follow_keys(out: "LeafType", parts) -> None:
    """Per-leaf content keys (``spnc.learn._graphedit.leaf_keys``, kept on a table as
    ``_leaf_keys`` with the content stamp they were made for) follow gathered leaves: a
    key depends on the leaf's own scope and parameters only, which gathering copies."""
    memo = []
    for t, _, _ in parts:
        m = t.__dict__.get("_leaf_keys")
        if m is None or m[0] != t.content_key():
            return
        memo.append(m[1])
    out._leaf_keys = (out.content_key(), _place(memo, parts, len(out)))


def _follow_scope_index(out: "LeafType", parts) -> None:
    """The scope lengths and concatenated scopes that ``spnc._validation.scope_index``
    keeps on a table follow gathered leaves (their scopes are the parts' arrays)."""
    memo = []
    for t, _, _ in parts:
        m = t.__dict__.get("_scope_index")
        if m is None or m[0] is not t.scopes or len(m[1]) != len(t.scopes):
            return
        memo.append(m)
    lens = np.zeros(len(out), dtype=np.int64)
    for (t, idx, pos), m in zip(parts, memo):
        lens[pos] = m[1][idx]
    ptr = np.zeros(len(out) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    flat = np.empty(int(ptr[-1]), dtype=np.int64)
    for (t, idx, pos), m in zip(parts, memo):
        tptr = np.zeros(len(m[1]) + 1, dtype=np.int64)
        np.cumsum(m[1], out=tptr[1:])
        flat[_ranges(ptr[:-1][pos], lens[pos])] = m[2][_ranges(tptr[:-1][idx], lens[pos])]
    out._scope_index = (out.scopes, lens, flat)


def _place(lists: list, parts, L: int) -> list:
    """A list of ``L`` items: item ``idx[k]`` of ``lists[p]`` at ``pos[k]``, for each part
    ``p`` = ``(table, idx, pos)`` (object arrays: no loop in Python)."""
    out = np.empty(L, dtype=object)
    for items, (_, idx, pos) in zip(lists, parts):
        out[pos] = np.fromiter(items, dtype=object, count=len(items))[idx]
    return out.tolist()
