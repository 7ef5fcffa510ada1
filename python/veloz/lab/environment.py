"""What a result depends on besides the code under test, recorded with it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

from veloz.core import paths


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cpu_model() -> str | None:
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return None


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(paths.REPO_ROOT), *args], capture_output=True,
                              text=True, timeout=10, check=False)  # fmt: skip
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def record() -> dict:
    """Kernel, CPU, memory, veloz commit (and whether the tree was modified),
    the settings that change packet-processing figures (JIT, bpf_stats,
    CPU frequency governor, hugepages), the Python that ran the lab."""
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    meminfo = dict(
        line.split(":", 1) for line in (_read("/proc/meminfo") or "").splitlines() if ":" in line
    )
    return {
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory": meminfo.get("MemTotal", "").strip() or None,
        "veloz_commit": _git("rev-parse", "--short=12", "HEAD"),
        "veloz_tree_modified": bool(dirty) if dirty is not None else None,
        "bpf_jit_enable": _read("/proc/sys/net/core/bpf_jit_enable"),
        "bpf_stats_enabled": _read("/proc/sys/kernel/bpf_stats_enabled"),
        "cpufreq_governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "nr_hugepages": _read("/proc/sys/vm/nr_hugepages"),
        "python": sys.version.split()[0],
        "hostname": platform.node(),
    }
