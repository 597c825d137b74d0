"""Univariate leaves: Bernoulli, Categorical, Gaussian and Indicator."""
from __future__ import annotations

import copy

import numpy as np

from . import _kernels as K
from ._univariate_nodes import Bernoulli, Categorical, Gaussian, Indicator  # noqa: F401  (re-exported)
from .._kinds import MAX_REAL
from .base import LeafStats, LeafType, _err, overflow_units, register_leaf, warn_kept, xlogy

#: a centre moved by less than this relative step is no better (constant data, rounding)
_MOVES = 1e3 * float(np.finfo(np.float64).eps)

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
        for i, s in enumerate(self.scopes):
            if s.size != 1:
                raise _err(self, i, f"scope must hold exactly one variable, got {s.tolist()}")

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
        k = cardinality[self.var].astype(np.int64)
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


# ---------------------------------------------------------------- EM statistics
class _NoStats(LeafStats):
    """Indicators have no parameters."""

    def add_state_counts(self, s, counts):
        pass


class _BernoulliStats(LeafStats):
    # count[2 l + x]: weighted rows with x_var = x under leaf l
    def zero(self):
        return {"count": np.zeros(2 * len(self.t))}

    def accumulate(self, s, XT, R, rw):
        K.binary_counts(R, self.t.slot, self.t.var, XT, rw, s["count"], self.nt)

    def add_state_counts(self, s, counts):
        s["count"] += counts

    def fit(self, s):
        a = self.alpha
        c0, c1 = s["count"][0::2], s["count"][1::2]
        p = self.t.params["p"].astype(np.float64).copy()
        keep = c0 + c1 + 2 * a > 0
        p[keep] = (c1[keep] + a) / (c0[keep] + c1[keep] + 2 * a)
        return {"p": np.clip(p, 0.0, 1.0)}

    def score(self, params, s):
        p, a = params["p"], self.alpha
        return xlogy(s["count"][1::2] + a, p) + xlogy(s["count"][0::2] + a, 1.0 - p)


class _CategoricalStats(LeafStats):
    def zero(self):
        return {"count": np.zeros(len(self.t.params["prob"]))}

    def accumulate(self, s, XT, R, rw):
        off = np.ascontiguousarray(self.t.params["prob_ptr"][:-1], dtype=np.int64)
        K.discrete_counts(R, self.t.slot, self.t.var, XT, rw, off, s["count"], self.nt)

    def add_state_counts(self, s, counts):
        s["count"] += counts

    def fit(self, s):
        ptr = self.t.params["prob_ptr"]
        prob = self.t.params["prob"].astype(np.float64).copy()
        c = s["count"] + self.alpha
        tot = np.add.reduceat(c, ptr[:-1]) if len(c) else np.zeros(0)
        keep = np.repeat(tot > 0, np.diff(ptr))
        prob[keep] = (c / np.repeat(np.where(tot > 0, tot, 1.0), np.diff(ptr)))[keep]
        return {"prob_ptr": ptr, "prob": prob}

    def score(self, params, s):
        ptr = self.t.params["prob_ptr"]
        v = xlogy(s["count"] + self.alpha, params["prob"])
        return np.add.reduceat(v, ptr[:-1]) if len(v) else np.zeros(0)


class _GaussianStats(LeafStats):
    # moments centred on the current mean (numerically stable one-pass statistics); the
    # centre is kept within the range of training data EM accepts (MAX_REAL), so squared
    # distances to it cannot overflow
    def zero(self):
        L = len(self.t)
        center = np.clip(np.asarray(self.t.params["mean"], dtype=np.float64), -MAX_REAL, MAX_REAL)
        return {"center": center, "unit": np.ones(L), "w": np.zeros(L), "sd": np.zeros(L), "sdd": np.zeros(L)}

    def rescale(self, s, unit):
        """Express the sums in another unit of weight per leaf (exact for powers of two)."""
        f = np.asarray(unit, dtype=np.float64) / s["unit"]
        for a in ("w", "sd", "sdd"):
            s[a] = s[a] * f
        s["unit"] = np.array(unit, dtype=np.float64)

    def overflowed(self, s):
        """Units of weight that keep every leaf's sums finite, if some leaf's overflowed
        (else None): with the leaf's scaled weight at most 1, its sum of squared offsets
        (each below (2 MAX_REAL)**2) is too."""
        return overflow_units(s["unit"], s["w"], ~np.isfinite(s["sd"]) | ~np.isfinite(s["sdd"]))

    def recentre(self, s, center):
        d = center - s["center"]
        s["sdd"] = s["sdd"] - 2 * d * s["sd"] + s["w"] * d ** 2
        s["sd"] = s["sd"] - s["w"] * d
        s["center"] = np.array(center, dtype=np.float64)

    def accumulate(self, s, XT, R, rw):
        slot = self.t.slot
        if np.any(s["unit"] != 1.0):        # responsibilities in each leaf's unit of weight
            R, slot = np.ascontiguousarray(R[slot] * s["unit"][:, None]), np.arange(len(slot), dtype=np.int64)
        K.gauss_moments(R, slot, self.t.var, XT, rw, np.ascontiguousarray(s["center"]),
                        s["w"], s["sd"], s["sdd"], self.nt)

    def fit(self, s):
        m0 = s["center"]
        mean, std = self.t.params["mean"].astype(np.float64).copy(), self.t.params["std"].astype(np.float64).copy()
        k = s["w"] > 0
        with np.errstate(over="ignore", invalid="ignore"):
            delta = s["sd"][k] / s["w"][k]
            var = np.maximum(s["sdd"][k] / s["w"][k] - delta * delta, 0.0)
            mu = m0[k] + delta
        # the floor on the std, not the variance: min_std ** 2 underflows to 0 below ~1.5e-154
        sd = np.maximum(np.sqrt(var), self.min_std)
        ok = np.isfinite(mu) & np.isfinite(sd)      # overflowed sums keep the old parameters
        warn_kept(self.t, np.flatnonzero(k)[~ok])
        idx = np.flatnonzero(k)[ok]
        mean[idx], std[idx] = mu[ok], sd[ok]
        return {"mean": mean, "std": std}

    def imprecise(self, s):
        """Centres on each leaf's weighted mean if some leaf's moments lost precision by
        their centre (squared offset above 1e6 times the variance, the offset more than
        rounding of the centre), else None."""
        k = s["w"] > 0
        delta = np.divide(s["sd"], s["w"], out=np.zeros_like(s["w"]), where=k)
        with np.errstate(over="ignore", invalid="ignore"):
            bad = k & (delta * delta > 1e6 * (s["sdd"] / np.where(k, s["w"], 1.0) - delta * delta))
        bad &= np.abs(delta) > _MOVES * np.abs(s["center"])    # else recentring changes nothing
        return s["center"] + np.where(bad, delta, 0.0) if bad.any() else None

    def score(self, params, s):
        """Weighted log-likelihood of each leaf's rows, without squaring the std (which over-
        or underflows at extreme scales): -inf where it is below every float or below
        ``min_std`` (a start below the floor the M-step keeps must not hold its leaf there)."""
        w, std = s["w"], params["std"]
        k = w > 0
        m = np.divide(s["sd"], w, out=np.zeros_like(w), where=k)
        spread = np.maximum(s["sdd"] - s["sd"] * m, 0.0)        # sum of w (x - weighted mean) ** 2
        with np.errstate(over="ignore", under="ignore"):
            t = (params["mean"] - s["center"] - m) / std
            quad = spread / std / std + w * (t * t)
        out = -0.5 * w * (_LOG2PI + 2.0 * np.log(std)) - 0.5 * quad
        return np.where(k, np.where(std < self.min_std, -np.inf, out), 0.0)


_LOG2PI = float(np.log(2.0 * np.pi))
