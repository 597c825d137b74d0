"""Multivariate Gaussian leaves (full covariance; the Cholesky factor is derived on load)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .._kinds import MAX_REAL
from . import _kernels as K
from ..errors import StructureError
from ..nodes import Leaf, real_array
from .base import LeafStats, LeafType, _err, overflow_units, register_leaf, warn_kept
from ._univariate_stats import _MOVES
from .univariate import _weight_units


def floored_cov(cov, min_var: float) -> np.ndarray:
    """``cov + j I`` with ``j = min_var``, raised until the Cholesky factor the kernels use
    exists: on data of a large scale an absolute floor is lost to rounding, and a
    covariance of fewer rows than variables (or of collinear columns) is singular."""
    c = np.array(cov, dtype=np.float64)
    d = c.shape[0]
    eye = np.eye(d)
    ptr = np.array([0, d * d], dtype=np.int64)
    # Gershgorin: from j = the largest absolute row sum on, every pivot is positive
    top = float(np.max(np.abs(c).sum(axis=1))) if d else 0.0
    step = max(float(min_var), top * d * np.finfo(np.float64).eps, np.finfo(np.float64).tiny)
    j = float(min_var)
    for _ in range(400):        # bounded: a non-finite cov is left to the leaf's own check
        out = c + j * eye
        if K.cholesky_all(np.array([d], dtype=np.int64), ptr, out.ravel(), np.empty(d * d)) < 0 \
                or (j > 0 and not j < 2.0 * top):
            break
        j, step = j + step, step * 10.0
    return out


def floored_covs(C: np.ndarray, min_var: float) -> np.ndarray:
    """:func:`floored_cov` of each (k, k) block of the stack ``C`` (L, k, k); blocks that
    ``min_var`` alone makes positive definite get just that."""
    L, k = C.shape[0], C.shape[1]
    out = np.ascontiguousarray(C + min_var * np.eye(k))
    dims = np.full(L, k, dtype=np.int64)
    ptr = np.arange(L + 1, dtype=np.int64) * (k * k)
    work = np.empty(L * k * k)
    start = 0
    while start < L:
        bad = K.cholesky_all(dims[start:], ptr[: L - start + 1], out[start:].ravel(), work)
        if bad < 0:
            break
        i = start + bad
        out[i] = floored_cov(C[i], min_var)
        start = i + 1
    return out


class MultivariateGaussian(Leaf):
    """N(mean, cov) over the variables ``vars`` (any order; stored sorted)."""

    __slots__ = ("vars", "mean", "cov")

    def __init__(self, vars: Sequence[int], mean: Sequence[float], cov):
        v = np.asarray(vars).ravel()
        whole = v.dtype.kind in "iu" or (v.dtype.kind == "f" and np.all(np.isfinite(v)) and np.all(v == np.round(v)))
        if v.size == 0 or not whole or np.any(v < 0) or len(np.unique(v)) != v.size:
            raise StructureError(f"MultivariateGaussian: vars must be distinct non-negative integers, got {vars!r}")
        v = v.astype(np.int64)
        mean = real_array(mean, "MultivariateGaussian: mean").ravel()
        cov = real_array(cov, "MultivariateGaussian: cov")
        if mean.shape != (v.size,) or cov.shape != (v.size, v.size):
            raise StructureError(f"MultivariateGaussian: mean must have shape ({v.size},) and cov ({v.size}, "
                                 f"{v.size}); got {mean.shape} and {cov.shape}")
        order = np.argsort(v)
        self.vars = v[order]
        self.mean = mean[order]
        self.cov = cov[np.ix_(order, order)]

    @property
    def scope(self) -> tuple[int, ...]:
        return tuple(int(x) for x in self.vars)

    def cardinality_hint(self) -> dict[int, int]:
        return {int(x): 0 for x in self.vars}

    def __repr__(self) -> str:
        return f"MultivariateGaussian({self.vars.tolist()})"


@register_leaf
class MVGaussianLeaves(LeafType):
    name = "mvgaussian"
    code = 5
    node_class = MultivariateGaussian
    discrete = False
    max_abs_value = MAX_REAL

    def __init__(self, node, scopes, params):
        super().__init__(node, scopes, params)
        dim = np.array([len(s) for s in self.scopes], dtype=np.int64)
        self.var_ptr = np.zeros(len(dim) + 1, dtype=np.int64)
        np.cumsum(dim, out=self.var_ptr[1:])
        self.var = np.concatenate(self.scopes).astype(np.int32) if len(dim) else np.zeros(0, np.int32)
        self._chol = None

    def zero_leaves(self):
        return np.zeros(len(self.node), dtype=bool)      # a density, positive everywhere

    def underflow_leaves(self, lo, hi):
        """Conservative: the kernel's ``|L^-1 (x - mean)|^2`` (``L`` the Cholesky factor) is
        at most ``|L^-1|_F^2 |x - mean|^2``, each ``|x_a - mean_a|`` at most its largest
        over ``[lo, hi]``; a leaf whose bound is not far below the largest double counts."""
        L = len(self.node)
        if not L:
            return np.zeros(0, dtype=bool)
        mu, v = self.params["mean"].astype(np.float64, copy=False), self.var
        with np.errstate(over="ignore", invalid="ignore"):
            dev = np.maximum(np.abs(hi[v] - mu), np.abs(lo[v] - mu))
            bound = np.add.reduceat(dev * dev, self.var_ptr[:-1]) * self._inverse_norms()
        return ~(bound < 1e280)

    def _inverse_norms(self) -> np.ndarray:
        """``|L^-1|_F^2`` per leaf (``L`` its Cholesky factor), kept with :meth:`chol`."""
        chol = self.chol()
        if chol is None:
            return np.full(len(self.node), np.inf)
        if getattr(self, "_inv_norms", (None,))[0] is not chol:
            dim, ptr = np.diff(self.var_ptr), self.params["cov_ptr"]
            out = np.empty(len(self.node))
            for d in np.unique(dim).tolist():      # one batch per leaf size, not per leaf
                i = np.flatnonzero(dim == d)
                blocks = chol[ptr[:-1][i][:, None] + np.arange(d * d)].reshape(-1, d, d)
                with np.errstate(all="ignore"):
                    out[i] = np.square(np.linalg.inv(blocks)).sum(axis=(1, 2))
            self._inv_norms = (chol, np.where(np.isfinite(out), out, np.inf))
        return self._inv_norms[1]

    @classmethod
    def from_nodes(cls, node_ids, leaves):
        d = [len(l.vars) for l in leaves]
        mean_ptr = np.zeros(len(d) + 1, dtype=np.int64)
        cov_ptr = np.zeros(len(d) + 1, dtype=np.int64)
        np.cumsum(d, out=mean_ptr[1:])
        np.cumsum(np.square(d), out=cov_ptr[1:])
        cat = (lambda xs: np.concatenate(xs)) if leaves else (lambda xs: np.zeros(0))
        return cls(node_ids, [l.vars for l in leaves],
                   {"mean_ptr": mean_ptr, "mean": cat([l.mean for l in leaves]),
                    "cov_ptr": cov_ptr, "cov": cat([l.cov.ravel() for l in leaves])})

    def to_node(self, i):
        p = self.params
        d = len(self.scopes[i])
        return MultivariateGaussian(self.scopes[i], p["mean"][p["mean_ptr"][i]:p["mean_ptr"][i + 1]].copy(),
                                    p["cov"][p["cov_ptr"][i]:p["cov_ptr"][i + 1]].reshape(d, d).copy())

    def validate(self, cardinality):
        p = self.params
        L = len(self.node)
        dim = np.diff(self.var_ptr)
        for key, size in (("mean", dim), ("cov", dim * dim)):
            ptr, arr = p.get(key + "_ptr"), p.get(key)
            if ptr is None or arr is None or ptr.ndim != 1 or arr.ndim != 1 or len(ptr) != L + 1:
                raise _err(self, 0, f"missing or malformed {key!r}/{key}_ptr arrays")
            if ptr[0] != 0 or ptr[-1] != len(arr) or np.any(np.diff(ptr) != size):
                i = int(np.flatnonzero(np.diff(ptr) != size)[0]) if np.any(np.diff(ptr) != size) else 0
                raise _err(self, i, f"{key}_ptr does not match the scope size {dim[i] if L else 0}")
            if not np.all(np.isfinite(arr)):
                j = int(np.flatnonzero(~np.isfinite(arr))[0])
                i = int(np.searchsorted(ptr, j, side="right") - 1)
                raise _err(self, i, f"{key} holds a non-finite value")
        cov, ptr = p["cov"], p["cov_ptr"]
        for i in range(L):  # per-leaf symmetry check on small blocks
            c = cov[ptr[i]:ptr[i + 1]].reshape(dim[i], dim[i])
            if not np.allclose(c, c.T, rtol=1e-9, atol=1e-12):
                raise _err(self, i, "covariance is not symmetric")
        self._chol = None
        if self.chol() is None:
            raise self._bad
        _ = cardinality

    def chol(self):
        # keyed by the covariances' contents: an in-place edit of them must take effect
        key = hash(np.asarray(self.params["cov"]).tobytes())
        if self._chol is not None and getattr(self, "_chol_key", None) != key:
            self._chol = None
        if self._chol is None:
            self._chol_key = key
            p = self.params
            chol = np.empty(len(p["cov"]))
            bad = K.cholesky_all(np.diff(self.var_ptr), p["cov_ptr"], p["cov"].astype(np.float64, copy=False), chol)
            if bad >= 0:
                self._bad = _err(self, bad, "covariance is not positive definite")
                return None
            self._chol = chol
        return self._chol

    def _lower_cov(self) -> np.ndarray:
        """The covariances as used (formats/spnc-hdf5.md §5.2): lower triangle mirrored."""
        cov, ptr = self.params["cov"].astype(np.float64), self.params["cov_ptr"]
        dim = np.diff(self.var_ptr)
        for d in np.unique(dim[dim > 1]).tolist():  # one gather per leaf size, not per leaf
            r, c = np.triu_indices(d, 1)
            base = ptr[:-1][dim == d][:, None]
            cov[base + r * d + c] = cov[base + c * d + r]
        return cov

    def _args(self):
        p = self.params
        if self.chol() is None:
            raise self._bad
        return (self.var_ptr, self.var, p["mean_ptr"], p["mean"].astype(np.float64, copy=False),
                p["cov_ptr"], self._lower_cov(), self._chol)

    def log_prob(self, XT, out, mode, n_threads):
        K.mvn_pass(XT, *self._args(), self.node, self.slot, out, _NO_ACTIVE, _NO_VALUES, mode, 0, 0, n_threads)

    def fill(self, XT, active, out_XT, mode, seed, row0):
        K.mvn_pass(XT, *self._args(), self.node, self.slot, _NO_VALUES, active, out_XT, mode, seed, row0, 1)

    def describe(self, i, var_names):
        return "MVN{" + ",".join(var_names[v] for v in self.scopes[i]) + "}"

    def em_stats(self, alpha=0.0, min_std=1e-3, n_threads=1):
        return _MVGaussianStats(self, alpha, min_std, n_threads)

    def weighted_fit(self, X, resp, *, min_var: float = 1e-6, **_):
        p = self.params
        mean, cov = p["mean"].copy(), p["cov"].copy()
        for i, s in enumerate(self.scopes):  # rows with any missing value in the scope are skipped
            x = X[:, s]
            ok = ~np.isnan(x).any(1)
            w, tot = _weight_units(resp[ok, i], resp[ok, i].sum())
            if tot <= 0:
                continue
            mu = w @ x[ok] / tot
            dx = x[ok] - mu
            c = floored_cov((dx * w[:, None]).T @ dx / tot, min_var)
            mean[p["mean_ptr"][i]:p["mean_ptr"][i + 1]] = mu
            cov[p["cov_ptr"][i]:p["cov_ptr"][i + 1]] = c.ravel()
        p["mean"], p["cov"] = mean, cov
        self._chol = None


class _MVGaussianStats(LeafStats):
    """Rows with a missing value in the leaf's scope are left out (as in ``weighted_fit``).
    The covariance floor adds ``min_std**2`` to the diagonal (scikit-learn's ``reg_covar``),
    more where the Cholesky factor needs it (:func:`floored_cov`).
    Leaves of one scope size are handled together, as stacks of (k,) and (k, k) arrays."""

    _CHUNK = 1 << 22        # doubles per (leaves, k, rows) block in ``accumulate``

    def zero(self):
        p = self.t.params
        # the centre within the training data's range: squared offsets cannot overflow
        return {"center": np.clip(np.asarray(p["mean"], dtype=np.float64), -MAX_REAL, MAX_REAL),
                "unit": np.ones(len(self.t)), "w": np.zeros(len(self.t)),
                "sd": np.zeros(len(p["mean"])), "sdd": np.zeros(len(p["cov"]))}

    def _groups(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per scope size k: leaf indices (L,), scopes (L, k) and the positions of their
        means (L, k) and covariances (L, k*k) in the flat arrays."""
        if getattr(self, "_g", None) is None:
            p = self.t.params
            dim = np.diff(p["mean_ptr"])
            self._g = []
            for k in np.unique(dim).tolist():
                idx = np.flatnonzero(dim == k)
                sc = np.array([self.t.scopes[i] for i in idx], dtype=np.int64).reshape(len(idx), k)
                mi = p["mean_ptr"][idx][:, None] + np.arange(k)
                ci = p["cov_ptr"][idx][:, None] + np.arange(k * k)
                self._g.append((idx, sc, mi, ci))
        return self._g

    def _moments(self, s, idx, mi, ci):
        k = mi.shape[1]
        return s["w"][idx], s["sd"][mi], s["sdd"][ci].reshape(len(idx), k, k)

    def recentre(self, s, center):
        """Move the moments to another centre (online EM mixes statistics of several steps)."""
        for idx, _, mi, ci in self._groups():
            W, sd, sdd = self._moments(s, idx, mi, ci)
            d = center[mi] - s["center"][mi]
            out = sd[:, :, None] * d[:, None, :]
            S = sdd - out - out.transpose(0, 2, 1) + W[:, None, None] * d[:, :, None] * d[:, None, :]
            s["sdd"][ci] = S.reshape(len(idx), -1)
            s["sd"][mi] = sd - W[:, None] * d
        s["center"] = np.array(center, dtype=np.float64)

    def rescale(self, s, unit):
        """Express the sums in another unit of weight per leaf (exact for powers of two)."""
        f = np.asarray(unit, dtype=np.float64) / s["unit"]
        s["w"] = s["w"] * f
        for a, ptr in (("sd", "mean_ptr"), ("sdd", "cov_ptr")):
            s[a] = s[a] * np.repeat(f, np.diff(self.t.params[ptr]))
        s["unit"] = np.array(unit, dtype=np.float64)

    def overflowed(self, s):
        """Units of weight that keep every leaf's sums finite, if some leaf's overflowed
        (else None; see :func:`spnc.leaves.base.overflow_units`)."""
        p = self.t.params
        bad = np.zeros(len(self.t), dtype=bool)
        for a, ptr in (("sd", "mean_ptr"), ("sdd", "cov_ptr")):
            nf = ~np.isfinite(s[a])
            if nf.any():
                bad |= np.add.reduceat(nf, p[ptr][:-1]) > 0
        return overflow_units(s["unit"], s["w"], bad)

    def accumulate(self, s, XT, R, rw):
        m = XT.shape[1]
        for idx, sc, mi, ci in self._groups():
            k = sc.shape[1]
            slots = self.t.slot[idx]
            step = max(1, self._CHUNK // max(1, k * m))
            for j in range(0, len(idx), step):
                g = slice(j, j + step)
                D = XT[sc[g]] - s["center"][mi[g]][:, :, None]          # (L, k, m)
                w = R[slots[g]] * rw * s["unit"][idx[g], None]           # (L, m)
                bad = np.isnan(D).any(1)
                if bad.any():
                    w = np.where(bad, 0.0, w)
                    D = np.where(bad[:, None, :], 0.0, D)
                WD = D * w[:, None, :]
                s["w"][idx[g]] += w.sum(1)
                s["sd"][mi[g]] += WD.sum(2)
                with np.errstate(over="ignore", invalid="ignore"):     # overflow: redone (EM._precise)
                    s["sdd"][ci[g]] += np.matmul(WD, D.transpose(0, 2, 1)).reshape(WD.shape[0], k * k)

    def fit(self, s):
        p = self.t.params
        mean, cov = p["mean"].astype(np.float64).copy(), p["cov"].astype(np.float64).copy()
        for idx, _, mi, ci in self._groups():
            W, sd, sdd = self._moments(s, idx, mi, ci)
            fin = np.isfinite(sd).all(1) & np.isfinite(sdd).all((1, 2))
            warn_kept(self.t, idx[(W > 0) & ~fin])      # overflowed sums keep the old parameters
            ok = (W > 0) & fin
            if not ok.any():
                continue
            W, sd, sdd, mi, ci = W[ok], sd[ok], sdd[ok], mi[ok], ci[ok]
            k = mi.shape[1]
            delta = sd / W[:, None]
            C = sdd / W[:, None, None] - delta[:, :, None] * delta[:, None, :]
            C = floored_covs(0.5 * (C + C.transpose(0, 2, 1)), self.min_std ** 2)
            mean[mi] = s["center"][mi] + delta
            cov[ci] = C.reshape(len(W), k * k)
        return {"mean_ptr": p["mean_ptr"], "mean": mean, "cov_ptr": p["cov_ptr"], "cov": cov}

    def imprecise(self, s):
        """Centres on each leaf's weighted mean if some leaf's moments lost precision by
        their centre (a squared offset above 1e6 times that variable's variance), else None."""
        center, any_bad = s["center"].copy(), False
        for idx, _, mi, ci in self._groups():
            W, sd, sdd = self._moments(s, idx, mi, ci)
            ok = W > 0
            delta = sd / np.where(ok, W, 1.0)[:, None]
            with np.errstate(over="ignore", invalid="ignore"):
                var = np.diagonal(sdd, axis1=1, axis2=2) / np.where(ok, W, 1.0)[:, None] - delta * delta
                bad = ok & ((delta * delta > 1e6 * var) & (np.abs(delta) > _MOVES * np.abs(s["center"][mi]))).any(1)
            if bad.any():
                any_bad = True
                center[mi[bad]] += delta[bad]
        return center if any_bad else None

    def score(self, params, s):
        out = np.zeros(len(self.t))
        for idx, _, mi, ci in self._groups():
            W, sd, sdd = self._moments(s, idx, mi, ci)
            ok = W > 0
            if not ok.any():
                continue
            idx, W, sd, sdd, mi, ci = idx[ok], W[ok], sd[ok], sdd[ok], mi[ok], ci[ok]
            k = mi.shape[1]
            delta = params["mean"][mi] - s["center"][mi]
            out_ = sd[:, :, None] * delta[:, None, :]
            S = sdd - out_ - out_.transpose(0, 2, 1) + W[:, None, None] * delta[:, :, None] * delta[:, None, :]
            C = params["cov"][ci].reshape(len(W), k, k)
            sign, logdet = np.linalg.slogdet(C)
            good = sign > 0
            # the ridge is the exact maximiser of Q - W * min_std**2 * tr(C^-1) / 2: compare that
            S = S + (W * self.min_std ** 2)[:, None, None] * np.eye(k)
            val = np.full(len(W), -np.inf)
            if good.any():
                tr = np.trace(np.linalg.solve(C[good], S[good]), axis1=1, axis2=2)
                val[good] = -0.5 * W[good] * (k * _LOG2PI + logdet[good]) - 0.5 * tr
            out[idx] = val
        return out


_LOG2PI = float(np.log(2.0 * np.pi))
_NO_ACTIVE = np.zeros((0, 1), dtype=np.uint8)
_NO_VALUES = np.zeros((0, 1))
