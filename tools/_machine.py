"""The processor a benchmark ran on, for its header: the host behind this machine's two cores
is not always the same one, so a table's figures name the CPU they were measured on."""
from __future__ import annotations

import platform


def _cpuinfo(key: str) -> str | None:
    """The first ``key: value`` line's value in /proc/cpuinfo (Linux), else None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith(key)), None)
    except OSError:
        return None


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it, else the platform's guess."""
    return _cpuinfo("model name") or platform.processor() or platform.machine() or "unknown CPU"


def vector_isa() -> str:
    """The widest x86 vector extension the CPU reports (AVX-512F, AVX2, or none found)."""
    flags = _cpuinfo("flags")
    if flags is None:
        return "unknown"
    flags = flags.split()
    return "AVX-512F" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "no AVX2")
