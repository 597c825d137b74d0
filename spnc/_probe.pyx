"""Throughput probes of one core, for the benchmarks' limits (tools/bench_inference.py)."""
import time

import numpy as np
from libc.stdint cimport int64_t


cdef extern from "_probe.h" nogil:
    void spnc_probe_exp(double *x, int64_t n, int reps)
    void spnc_probe_fma(double *x, int64_t n, int reps)
    void spnc_probe_peak(double *x, int reps)


def probe(str what, int reps=2000) -> float:
    """Operations per second of one core: ``"exp"`` (the sweeps' vectorised exp), ``"fma"``
    (multiply-adds streamed over a cache-resident array of 512 values: a load and a store
    each) or ``"peak"`` (multiply-adds on values held in registers: the multiply pipes'
    limit, which no sweep can pass)."""
    if what not in ("exp", "fma", "peak"):
        raise ValueError(f"unknown probe {what!r}")
    buf = np.full(512, -0.5)
    cdef double[::1] x = buf
    cdef int kind = ("exp", "fma", "peak").index(what)
    cdef int n = 96 if kind == 2 else 512
    if kind == 2:
        reps *= 16
    cdef double t0 = time.perf_counter()
    with nogil:
        if kind == 0:
            spnc_probe_exp(&x[0], 512, reps)
        elif kind == 1:
            spnc_probe_fma(&x[0], 512, reps)
        else:
            spnc_probe_peak(&x[0], reps)
    return n * reps / (time.perf_counter() - t0)
