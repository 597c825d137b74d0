"""The processor a benchmark ran on, for its header: the host behind this machine's two cores
is not always the same one, so a table's figures name the CPU they were measured on."""
from __future__ import annotations

import platform


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (Linux), else the platform's guess."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def vector_isa() -> str:
    """The widest x86 vector extension the CPU reports (AVX-512F, AVX2, or none found)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        return "unknown"
    return "AVX-512F" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "no AVX2")
