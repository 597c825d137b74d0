"""EM's M-step helpers: sum weights as the constrained maximum of Eq. 6 with a floor,
the running statistics of stepwise (online) EM, and what a refitted leaf table keeps of
the old one (:mod:`spnc.learn.em`)."""
from __future__ import annotations

import numpy as np

from .._kinds import MAX_REAL
from ..leaves import base as _lb


def constrained_weights(counts: np.ndarray, seg: np.ndarray, n_seg: int, floor: float) -> np.ndarray:
    """Maximise sum_i c_i log w_i per segment under sum w = 1 and w_i >= floor.

    The solution is w_i = max(floor, c_i / lambda) (KKT); found by clamping the entries that
    fall below the floor until none does (at most the segment length rounds, usually one).
    Segments with no counts are returned as NaN (the caller keeps the old weights)."""
    top = np.zeros(n_seg)     # per segment the maximiser ignores the scale: subnormal counts
    np.maximum.at(top, seg, counts)          # would overflow 1 / total
    counts = np.divide(counts, top[seg], out=np.zeros(len(counts)), where=top[seg] > 0)
    deg = np.bincount(seg, minlength=n_seg).astype(np.float64)
    f = np.minimum(floor, 1.0 / np.maximum(deg, 1.0))[seg]
    tot = np.bincount(seg, counts, minlength=n_seg)
    clamp = np.zeros(len(counts), dtype=bool)
    while True:
        free_c = np.where(clamp, 0.0, counts)
        free_tot = np.bincount(seg, free_c, minlength=n_seg)
        n_cl = np.bincount(seg, clamp, minlength=n_seg)
        mass = 1.0 - n_cl * np.minimum(floor, 1.0 / np.maximum(deg, 1.0))
        scale = np.divide(mass, free_tot, out=np.zeros(n_seg), where=free_tot > 0)
        w = np.where(clamp, f, free_c * scale[seg])
        new = ~clamp & (w < f)
        if not new.any():
            break
        clamp |= new
    tw = np.bincount(seg, w, minlength=n_seg)
    w = np.divide(w, tw[seg], out=np.full(len(w), np.nan), where=(tot > 0)[seg] & (tw > 0)[seg])
    return w


#: leaf statistics that are not sums over rows (the centre of centred moments, their unit of weight)
NOT_ADDED = ("center", "unit")


#: weight (in a leaf's unit) whose squared offsets, each below (2 MAX_REAL)**2, a sum of two
#: running statistics holds
_SAFE_WEIGHT = float(np.finfo(np.float64).max) / (4 * (2 * MAX_REAL) ** 2)


def align_steps(run: dict | None, est: dict, scale: float, stats_of) -> None:
    """Online EM: bring each leaf table's running and batch statistics to one centre and
    one unit of weight (``stats_of(name)``: the table's :class:`LeafStats`). Where
    ``scale`` times a leaf's batch weight could overflow its sums, the batch's unit is
    first divided by a power of two (exact: the fit is unchanged)."""
    for k, s in est["leaf"].items():
        h = stats_of(k)
        prev = None if run is None else run["leaf"].get(k)
        if hasattr(h, "rescale"):
            heavy = scale * s["w"] / _SAFE_WEIGHT
            unit = s["unit"] * 2.0 ** -np.ceil(np.log2(np.maximum(heavy, 1.0)))
            if prev is not None:
                unit = np.minimum(unit, prev["unit"])
                h.rescale(prev, unit)
            h.rescale(s, unit)
        if prev is not None and hasattr(h, "recentre"):
            h.recentre(prev, s["center"])


def _mix(run: dict | None, est: dict, eta: float, scale: float) -> dict:
    """Stepwise EM: running statistics <- (1 - eta) running + eta * scale * batch."""
    def comb(a, b):
        return b * scale if a is None else (1.0 - eta) * a + eta * scale * b
    out = {"objective": est["objective"],
           "edge_counts": comb(None if run is None else run["edge_counts"], est["edge_counts"]),
           "node_counts": comb(None if run is None else run["node_counts"], est["node_counts"]),
           "leaf": {}, "kept": est["kept"]}
    for k, s in est["leaf"].items():
        prev = None if run is None else run["leaf"].get(k)
        out["leaf"][k] = {a: (v if a in NOT_ADDED else comb(None if prev is None else prev[a], v))
                          for a, v in s.items()}
    return out


def _copy_private(src: _lb.LeafType, dst: _lb.LeafType) -> None:
    # cltree tables keep variable cardinalities outside their arrays
    if hasattr(src, "_card") and getattr(src, "_card", None) is not None:
        dst._card = np.array(src._card, copy=True)
