"""EM's sufficient statistics of the univariate leaf types (spnc.leaves.univariate): what
each table's ``em_stats`` returns, reduced block by block and refitted in the M-step."""
from __future__ import annotations

import numpy as np

from . import _kernels as K
from .._kinds import MAX_REAL
from .base import LeafStats, overflow_units, warn_kept, xlogy

#: a centre moved by less than this relative step is no better (constant data, rounding)
_MOVES = 1e3 * float(np.finfo(np.float64).eps)


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
