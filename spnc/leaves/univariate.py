"""Univariate leaves: Bernoulli, Categorical, Gaussian and Indicator."""
from __future__ import annotations

import copy

import numpy as np

from . import _kernels as K
from ._univariate_nodes import Bernoulli, Categorical, Gaussian, Indicator  # noqa: F401  (re-exported)
from .._kinds import MAX, MAX_REAL
from ._univariate_stats import _BernoulliStats, _CategoricalStats, _GaussianStats, _NoStats
from .base import LeafType, _err, register_leaf

#: most states of all indicator tables swept inline (8 MiB of log-probabilities)
_INLINE_STATES = 1 << 20

# ---------------------------------------------------------------- tables


class _UnivariateTable(LeafType):
    def __init__(self, node, scopes, params):
        super().__init__(node, scopes, params)
        self.var = np.ascontiguousarray([s[0] if s.size else -1 for s in self.scopes], dtype=np.int32)

    @classmethod
    def _from_gathered(cls, node, scopes, params, parts):
        # the parts' scopes are int32 arrays already and their variables are known: copied,
        # not derived leaf by leaf again (what __init__ would do, with no loop in Python)
        new = object.__new__(cls)
        new.node = np.ascontiguousarray(node, dtype=np.int64)
        new.scopes = scopes
        new.params = {k: np.ascontiguousarray(v) for k, v in params.items()}
        new.slot = np.arange(len(new.node), dtype=np.int64)
        new.var = np.empty(len(new.node), dtype=np.int32)
        for t, idx, pos in parts:
            new.var[pos] = t.var[idx]
        return new

    def with_params(self, params):
        new = copy.copy(self)        # node, scopes and var are shared, never edited in place
        new.params = {k: np.ascontiguousarray(v) for k, v in params.items()}
        return new

    def _check_scopes(self) -> None:
        if self.__dict__.get("_scopes_checked") is self.scopes:
            return                   # with_params' copies share the scopes checked here
        bad = np.flatnonzero(np.array([s.size for s in self.scopes], dtype=np.int64) != 1)
        if bad.size:
            i = int(bad[0])
            raise _err(self, i, f"scope must hold exactly one variable, got {self.scopes[i].tolist()}")
        self._scopes_checked = self.scopes

    def _check_param(self, name: str, n: int | None = None) -> np.ndarray:
        a = self.params.get(name)
        if a is None:
            raise _err(self, 0, f"missing parameter array {name!r}")
        n = len(self.node) if n is None else n
        if a.ndim != 1 or len(a) != n:
            raise _err(self, 0, f"parameter {name!r} has shape {a.shape}, expected ({n},)")
        return a


@register_leaf
class BernoulliLeaves(_UnivariateTable):
    name = "bernoulli"
    code = 2
    node_class = Bernoulli
    discrete = True

    @classmethod
    def from_nodes(cls, node_ids, leaves):
        return cls(node_ids, [np.array([l.var]) for l in leaves],
                   {"p": np.array([l.p for l in leaves], dtype=np.float64)})

    def to_node(self, i):
        return Bernoulli(int(self.var[i]), float(self.params["p"][i]))

    def validate(self, cardinality):
        self._check_scopes()
        p = self._check_param("p").astype(np.float64, copy=False)
        bad = np.flatnonzero(~(p >= 0) | ~(p <= 1))
        if bad.size:
            raise _err(self, bad[0], f"p = {float(p[bad[0]])!r} is outside [0, 1]")
        card = cardinality[self.var]
        if np.any(card != 2):
            i = int(np.flatnonzero(card != 2)[0])
            raise _err(self, i, f"variable {self.var[i]} has {card[i]} states, a Bernoulli leaf needs 2")

    def _tables(self):
        p = self.params["p"].astype(np.float64, copy=False)
        with np.errstate(divide="ignore"):
            logp = np.log(np.stack([1.0 - p, p], axis=1)).ravel()
        ptr = np.arange(0, 2 * len(p) + 1, 2, dtype=np.int64)
        return ptr, logp, np.stack([1.0 - p, p], axis=1).ravel()

    def state_log_probs(self, cardinality):
        ptr, logp, _ = self._tables()
        return self.var, ptr, logp

    def log_prob(self, XT, out, mode, n_threads):
        _, logp, _ = self._tables()
        K.bernoulli_log_prob(XT, self.var, logp, self.slot, out, mode, n_threads)

    def fill(self, XT, active, out_XT, mode, seed, row0):
        ptr, _, prob = self._tables()
        K.categorical_fill(XT, active, out_XT, self.var, ptr, prob, self.node, self.slot, mode, seed, row0, 1)

    def describe(self, i, var_names):
        return f"Bern({var_names[self.var[i]]}) p={self.params['p'][i]:.3g}"

    def em_stats(self, alpha=0.0, min_std=1e-3, n_threads=1):
        return _BernoulliStats(self, alpha, min_std, n_threads)

    def weighted_fit(self, X, resp, *, alpha: float = 0.0, **_):
        x = X[:, self.var]
        obs = ~np.isnan(x)
        w = np.where(obs, resp, 0.0)
        ones = np.sum(w * np.where(obs, x, 0.0), axis=0)
        tot = np.sum(w, axis=0)
        keep = tot + 2 * alpha > 0
        p = self.params["p"].copy()
        p[keep] = (ones[keep] + alpha) / (tot[keep] + 2 * alpha)
        self.params["p"] = p


@register_leaf
class CategoricalLeaves(_UnivariateTable):
    name = "categorical"
    code = 3
    node_class = Categorical
    discrete = True

    @classmethod
    def from_nodes(cls, node_ids, leaves):
        ptr = np.zeros(len(leaves) + 1, dtype=np.int64)
        np.cumsum([len(l.probs) for l in leaves], out=ptr[1:])
        prob = np.concatenate([l.probs for l in leaves]) if leaves else np.zeros(0)
        return cls(node_ids, [np.array([l.var]) for l in leaves], {"prob_ptr": ptr, "prob": prob})

    def to_node(self, i):
        ptr, prob = self.params["prob_ptr"], self.params["prob"]
        return Categorical(int(self.var[i]), prob[ptr[i]:ptr[i + 1]].copy())

    def validate(self, cardinality):
        self._check_scopes()
        ptr = self._check_param("prob_ptr", len(self.node) + 1)
        prob = self.params.get("prob")
        if prob is None or prob.ndim != 1:
            raise _err(self, 0, "missing or malformed parameter array 'prob'")
        if ptr[0] != 0 or ptr[-1] != len(prob) or np.any(np.diff(ptr) < 0):
            raise _err(self, 0, "prob_ptr must start at 0, not decrease and end at len(prob)")
        k = np.diff(ptr)
        card = cardinality[self.var]
        if np.any(k != card):
            i = int(np.flatnonzero(k != card)[0])
            raise _err(self, i, f"{k[i]} probabilities for variable {self.var[i]} with {card[i]} states")
        prob = prob.astype(np.float64, copy=False)
        if np.any(~(prob >= 0) | ~(prob <= 1)):
            j = int(np.flatnonzero(~(prob >= 0) | ~(prob <= 1))[0])
            i = int(np.searchsorted(ptr, j, side="right") - 1)
            raise _err(self, i, f"probability {float(prob[j])!r} is outside [0, 1]")
        if len(self.node):
            tot = np.add.reduceat(prob, ptr[:-1]) if prob.size else np.zeros(len(self.node))
            bad = np.flatnonzero(np.abs(tot - 1.0) > 1e-6)
            if bad.size:
                raise _err(self, bad[0], f"probabilities add up to {float(tot[bad[0]])!r}, not 1")

    def state_log_probs(self, cardinality):
        with np.errstate(divide="ignore"):
            logp = np.log(self.params["prob"].astype(np.float64, copy=False))
        return self.var, np.ascontiguousarray(self.params["prob_ptr"], dtype=np.int64), logp

    def em_stats(self, alpha=0.0, min_std=1e-3, n_threads=1):
        return _CategoricalStats(self, alpha, min_std, n_threads)

    def log_prob(self, XT, out, mode, n_threads):
        ptr, prob = self.params["prob_ptr"], self.params["prob"].astype(np.float64, copy=False)
        with np.errstate(divide="ignore"):
            logp = np.log(prob)
        mx = np.maximum.reduceat(logp, ptr[:-1]) if len(self.node) else np.zeros(0)
        K.categorical_log_prob(XT, self.var, ptr, logp, mx, self.slot, out, mode, n_threads)

    def fill(self, XT, active, out_XT, mode, seed, row0):
        K.categorical_fill(XT, active, out_XT, self.var, self.params["prob_ptr"],
                           self.params["prob"].astype(np.float64, copy=False), self.node, self.slot, mode, seed, row0, 1)

    def describe(self, i, var_names):
        ptr, prob = self.params["prob_ptr"], self.params["prob"]
        ps = " ".join(f"{v:.2g}" for v in prob[ptr[i]:ptr[i + 1]][:6])
        return f"Cat({var_names[self.var[i]]}) [{ps}{' …' if ptr[i + 1] - ptr[i] > 6 else ''}]"

    def weighted_fit(self, X, resp, *, alpha: float = 0.0, **_):
        ptr, prob = self.params["prob_ptr"], self.params["prob"].copy()
        for i in range(len(self.node)):  # one vectorised bincount per leaf
            x = X[:, self.var[i]]
            obs = ~np.isnan(x)
            k = ptr[i + 1] - ptr[i]
            c = np.bincount(x[obs].astype(np.int64), weights=resp[obs, i], minlength=k) + alpha
            if c.sum() > 0:
                prob[ptr[i]:ptr[i + 1]] = c / c.sum()
        self.params["prob"] = prob


@register_leaf
class GaussianLeaves(_UnivariateTable):
    name = "gaussian"
    code = 4
    node_class = Gaussian
    discrete = False
    max_abs_value = MAX_REAL

    @classmethod
    def from_nodes(cls, node_ids, leaves):
        return cls(node_ids, [np.array([l.var]) for l in leaves],
                   {"mean": np.array([l.mean for l in leaves], dtype=np.float64),
                    "std": np.array([l.std for l in leaves], dtype=np.float64)})

    def to_node(self, i):
        return Gaussian(int(self.var[i]), float(self.params["mean"][i]), float(self.params["std"][i]))

    def zero_leaves(self):
        return np.zeros(len(self.node), dtype=bool)      # a density, positive everywhere

    def underflow_leaves(self, lo, hi):
        """Exact: the kernel's value falls as ``|x - mean|`` grows, so a leaf's least value
        over ``[lo, hi]`` is at one end; both ends are evaluated by the kernel itself."""
        XT = np.ascontiguousarray(np.stack([lo, hi], axis=1), dtype=np.float64)
        out = np.empty((len(self.node), 2))
        K.gaussian_log_prob(XT, self.var, self.params["mean"].astype(np.float64, copy=False),
                            self.params["std"].astype(np.float64, copy=False),
                            np.arange(len(self.node), dtype=np.int64), out, MAX, 1)
        return ~np.isfinite(out).all(axis=1)

    def validate(self, cardinality):
        self._check_scopes()
        mean = self._check_param("mean").astype(np.float64, copy=False)
        std = self._check_param("std").astype(np.float64, copy=False)
        bad = np.flatnonzero(~np.isfinite(mean))
        if bad.size:
            raise _err(self, bad[0], f"mean = {float(mean[bad[0]])!r} is not finite")
        bad = np.flatnonzero(~np.isfinite(std) | ~(std > 0))
        if bad.size:
            raise _err(self, bad[0], f"std = {float(std[bad[0]])!r} must be finite and positive")

    def em_stats(self, alpha=0.0, min_std=1e-3, n_threads=1):
        return _GaussianStats(self, alpha, min_std, n_threads)

    def log_prob(self, XT, out, mode, n_threads):
        K.gaussian_log_prob(XT, self.var, self.params["mean"].astype(np.float64, copy=False),
                            self.params["std"].astype(np.float64, copy=False), self.slot, out, mode, n_threads)

    def fill(self, XT, active, out_XT, mode, seed, row0):
        K.gaussian_fill(XT, active, out_XT, self.var, self.params["mean"].astype(np.float64, copy=False),
                        self.params["std"].astype(np.float64, copy=False), self.node, self.slot, mode, seed, row0, 1)

    def describe(self, i, var_names):
        return f"N({var_names[self.var[i]]}) μ={self.params['mean'][i]:.3g} σ={self.params['std'][i]:.3g}"

    def weighted_fit(self, X, resp, *, min_std: float = 1e-3, **_):
        x = X[:, self.var]
        obs = ~np.isnan(x)
        w = np.where(obs, resp, 0.0)
        xv = np.where(obs, x, 0.0)
        tot = w.sum(0)
        w, tot = _weight_units(w, tot)
        keep = tot > 0
        mean = self.params["mean"].copy()
        std = self.params["std"].copy()
        mu = np.divide((w * xv).sum(0), tot, out=mean.copy(), where=keep)
        var = np.divide((w * (xv - mu) ** 2).sum(0), tot, out=std.copy() ** 2, where=keep)
        mean[keep] = mu[keep]
        std[keep] = np.maximum(np.sqrt(np.maximum(var[keep], 0.0)), min_std)    # min_std ** 2 may underflow
        self.params["mean"], self.params["std"] = mean, std


def _weight_units(w: np.ndarray, tot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weights (rows, leaves) and their totals in a power-of-two unit per leaf that keeps
    each total at most 1 (weighted squares of values up to MAX_REAL cannot overflow then)."""
    unit = 2.0 ** -np.maximum(np.ceil(np.log2(np.where(tot > 1.0, tot, 1.0))), 0.0)
    return w * unit, tot * unit


@register_leaf
class IndicatorLeaves(_UnivariateTable):
    name = "indicator"
    code = 7
    node_class = Indicator
    discrete = True

    @classmethod
    def from_nodes(cls, node_ids, leaves):
        return cls(node_ids, [np.array([l.var]) for l in leaves],
                   {"value": np.array([l.value for l in leaves], dtype=np.int32)})

    def to_node(self, i):
        return Indicator(int(self.var[i]), int(self.params["value"][i]))

    def validate(self, cardinality):
        self._check_scopes()
        v = self._check_param("value")
        if not np.issubdtype(v.dtype, np.integer):
            raise _err(self, 0, f"indicator values must be integers, got dtype {v.dtype}")
        card = cardinality[self.var]
        bad = np.flatnonzero((v < 0) | (v >= card))
        if bad.size:
            i = bad[0]
            raise _err(self, i, f"value {v[i]} is not a state of variable {self.var[i]} (0..{card[i] - 1})")

    def state_log_probs(self, cardinality):
        """One state table per leaf, over all its variable's states; None (the leaf matrix)
        when the tables would hold more than ``_INLINE_STATES`` states (an indicator of a
        2^31-state variable would need 16 GiB)."""
        k = cardinality[self.var].astype(np.int64)
        if k.sum() > _INLINE_STATES:
            return None
        ptr = np.zeros(len(k) + 1, dtype=np.int64)
        np.cumsum(k, out=ptr[1:])
        logp = np.full(ptr[-1], -np.inf)
        logp[ptr[:-1] + self.params["value"].astype(np.int64)] = 0.0
        return self.var, ptr, logp

    def em_stats(self, alpha=0.0, min_std=1e-3, n_threads=1):
        return _NoStats(self, alpha, min_std, n_threads)

    def log_prob(self, XT, out, mode, n_threads):
        K.indicator_log_prob(XT, self.var, self.params["value"].astype(np.int32, copy=False), self.slot, out, mode, n_threads)

    def fill(self, XT, active, out_XT, mode, seed, row0):
        K.indicator_fill(XT, active, out_XT, self.var, self.params["value"].astype(np.int32, copy=False), self.slot, 1)

    def describe(self, i, var_names):
        return f"[{var_names[self.var[i]]}={self.params['value'][i]}]"

    def weighted_fit(self, X, resp, **_):
        pass  # indicators have no parameters
