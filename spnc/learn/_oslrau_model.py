"""oSLRAU's tree as a model: compiled to a :class:`spnc.SPN` (leaf variances exactly as the
kernel evaluates them), exported with the learner's whole state, and restored from it."""
from __future__ import annotations

import json
import os

import numpy as np

from .._kinds import LEAF, SUM
from ..errors import FormatError
from ..graph import SPN
from ..leaves.mvgaussian import MVGaussianLeaves
from ..leaves.univariate import GaussianLeaves
from ._params import GENERATORS

VERSION = "1"
ARRAYS = ("kind", "count", "merges", "scope_ptr", "scope", "cov_ptr", "mean", "cov", "child_ptr", "child")


def compile_tree(self) -> SPN:
    """The learner's tree as a compiled :class:`spnc.SPN`, leaf variances as the kernel
    evaluates them, with the running statistics in ``stats`` and the state in ``learner``."""
    if self._dirty:
        self._rebuild()
    order = self._order
    N = len(order)
    new_id = np.full(len(self._kind), -1, dtype=np.int64)
    new_id[order] = np.arange(N)
    kind = self._kind[order]
    g = self._g
    st, en = g["cstart"].view[order], g["cend"].view[order]
    deg = en - st
    ptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(deg, out=ptr[1:])
    old_child = g["child"].buf[np.repeat(st - ptr[:-1], deg) + np.arange(ptr[-1])]
    child = new_id[old_child]
    weight = np.ones(len(child))
    parent = np.repeat(np.arange(N), deg)
    is_sum = kind[parent] == SUM
    if is_sum.any():
        w = self._count[old_child[is_sum]] + 1.0
        tot = np.bincount(parent[is_sum], weights=w, minlength=N)
        weight[is_sum] = w / tot[parent[is_sum]]
    leaf = np.flatnonzero(kind == LEAF)
    sp, cp, scope = g["scope_ptr"].buf, g["cov_ptr"].buf, g["scope"].buf
    s = sp[order + 1] - sp[order]
    uni = leaf[s[leaf] == 1]
    mv = leaf[s[leaf] > 1]
    out_kind = kind.astype(np.uint8)
    out_kind[uni] = GaussianLeaves.code
    out_kind[mv] = MVGaussianLeaves.code
    jit = self._eval_jitter()
    o = order[uni]
    var = self._cov[cp[o]]
    gt = GaussianLeaves.from_arrays(uni, list(scope[sp[o]].reshape(-1, 1)),
                                    {"mean": self._mean[sp[o]].copy(), "std": np.sqrt(var + _jitter(var, jit))})
    scopes, means, covs = [], [], []
    for x in order[mv]:
        m_, c_ = self._node_stats(int(x))
        scopes.append(self._node_scope(int(x)).copy())
        means.append(m_.copy())
        covs.append(_positive_definite(c_, jit).ravel())
    dims = np.array([len(sc) for sc in scopes], dtype=np.int64)
    mean_ptr = np.zeros(len(dims) + 1, dtype=np.int64)
    cov_ptr = np.zeros(len(dims) + 1, dtype=np.int64)
    np.cumsum(dims, out=mean_ptr[1:])
    np.cumsum(dims * dims, out=cov_ptr[1:])
    mvt = MVGaussianLeaves.from_arrays(mv, scopes, {
        "mean_ptr": mean_ptr, "mean": np.concatenate(means) if means else np.zeros(0),
        "cov_ptr": cov_ptr, "cov": np.concatenate(covs) if covs else np.zeros(0)})
    stats = {"count": self._count[order].copy(), "merges": self._merges[order].copy()}
    has = kind != SUM        # running mean / covariance of products and leaves, CSR by node
    for key, ptr_all, arr in (("mean", sp, g["mean"].buf), ("cov", cp, g["cov"].buf)):
        ln = np.where(has, ptr_all[order + 1] - ptr_all[order], 0)
        optr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(ln, out=optr[1:])
        stats[key + "_ptr"] = optr
        stats[key] = arr[np.repeat(ptr_all[order] - optr[:-1], ln) + np.arange(optr[-1])].copy()
    return SPN.from_arrays(out_kind, ptr, child, weight, {"gaussian": gt, "mvgaussian": mvt},
                           cardinality=np.zeros(self._d, dtype=np.int32), stats=stats,
                           learner=export_state(self))

def export_state(self) -> dict:
    """The whole learner state (settings, seed, counters, arrays) as ``learner``."""
    if self._dirty:
        self._rebuild()
    params = {k: _plain(v) for k, v in self._cfg.items()}
    params["select"] = getattr(self, "selection_", None)
    if isinstance(params.get("random_state"), GENERATORS):     # the seed drawn from it, as other learners record
        params["random_state"] = int(self._seed)
    params.update(n_vars=int(self._d), seed=str(self._seed), n_seen=int(self._n_seen),
                  prequential_ll_sum=float(self._preq[0]),
                  n_batches=int(self._n_batches), root=int(self._root))
    json.dumps(params)
    arrays = {k: self._g[k].view for k in ("kind", "count", "merges", "scope_ptr", "scope",
                                            "cov_ptr", "mean", "cov")}
    arrays["child_ptr"], arrays["child"] = self._csr()
    return {"name": "oslrau", "version": VERSION, "params": params,
            "arrays": {k: np.array(v, copy=True) for k, v in arrays.items()}}

def restore(cls, source):
    """A learner of class ``cls`` from an :class:`spnc.SPN` or a model file carrying
oSLRAU state."""
    spn, where = source, "the model"
    if not isinstance(source, SPN):
        import spnc
        if not hasattr(spnc, "load"):
            raise FormatError("spnc.load is not available; pass the SPN object")
        spn, where = spnc.load(source), os.fspath(source)
    info = getattr(spn, "learner", None) or {}
    if info.get("name") != "oslrau":
        raise FormatError(f"{where} {_made_by(info)}: it holds no oSLRAU state to resume from")
    if str(info.get("version")) != VERSION:
        raise FormatError(f"{where}: unsupported oSLRAU state version {info.get('version')!r}; "
                          f"this spnc reads {VERSION!r}")
    params = dict(info.get("params") or {})
    arrays = info.get("arrays") or {}
    missing = [k for k in ARRAYS if k not in arrays]
    if missing:
        raise FormatError(f"{where}: oSLRAU state lacks arrays {missing}")
    known = {k: params[k] for k in cls._param_names() if k in params and k != "select"}
    self = cls(**known)
    self._preq = np.array([float(params.get("prequential_ll_sum", 0.0))])
    if params.get("select"):
        self.selection_ = params["select"]
    self._d = int(params["n_vars"])
    self._seed = int(params["seed"])
    self._n_seen = int(params["n_seen"])
    self._n_batches = int(params["n_batches"])
    self._root = int(params["root"])
    self._names = None if spn.var_names is None else list(spn.var_names)
    if self._names is not None:         # as after its fit on a DataFrame (scikit-learn's attribute)
        self.feature_names_in_ = np.asarray(self._names, dtype=object)
    a = {k: np.asarray(arrays[k]) for k in ARRAYS}
    N = len(a["kind"])
    if len(a["child_ptr"]) != N + 1 or len(a["scope_ptr"]) != N + 1 or len(a["cov_ptr"]) != N + 1 \
            or a["scope_ptr"][-1] != len(a["scope"]) or a["cov_ptr"][-1] != len(a["cov"]) \
            or a["child_ptr"][-1] != len(a["child"]) or len(a["mean"]) != len(a["scope"]):
        raise FormatError("oSLRAU state arrays have inconsistent lengths")
    self._alloc(a)
    return self


def _made_by(info: dict) -> str:
    """Which learner a model's ``learner`` entry records, and the one it started from
    (EM refining a structure, Merge shrinking a model), in words."""
    name = info.get("name")
    if not info or name is None:
        return "records no learner (no /learner group)"
    params = info.get("params") if isinstance(info.get("params"), dict) else {}
    first = (params.get("structure_learner") or {}).get("name") \
        if isinstance(params.get("structure_learner"), dict) else info.get("init_learner")
    made = f"was made by the learner {name!r}"
    if isinstance(first, str) and first:
        made += f" (applied to a model by {first!r})"
    return made + ", not by OSLRAU"


def _plain(v):
    if isinstance(v, (np.integer, np.bool_)):
        return v.item()
    if isinstance(v, np.floating):
        return float(v)
    return v


def _jitter(var: np.ndarray, jitter0: float) -> np.ndarray:
    """The kernel's rule for univariate leaves: ``jitter0``, raised (x10 + 1e-12) until
    the variance is positive."""
    j = np.full(len(var), jitter0)
    bad = ~(var + j > 0)
    while bad.any():
        j[bad] = j[bad] * 10.0 + 1e-12
        bad = ~(var + j > 0)
    return j


def _positive_definite(cov: np.ndarray, jitter0: float) -> np.ndarray:
    """``cov + j I`` with the kernel's jitter rule, for a multivariate leaf."""
    j = jitter0
    while True:
        c = cov + j * np.eye(len(cov))
        try:
            np.linalg.cholesky(c)
            return c
        except np.linalg.LinAlgError:
            j = j * 10.0 + 1e-12
