"""The busy-polling workers of a userspace NF (afxdp, dpdk), as the
scheduler saw them during a trial.

A worker owns its CPU only as long as nothing else runs there: a task the
scheduler puts on that CPU keeps it until the next tick (4 ms at HZ=250),
and meanwhile the port's rx ring fills. So a trial keeps its own generator
off the workers' CPUs, and when a port missed frames it says how long the
workers waited for their CPUs: frames missed with the workers waiting is
the machine's other work, not the NF's speed.

Read from /proc/PID/task/*: schedstat (ns on CPU, ns runnable but waiting
for a CPU) and the thread's allowed CPUs. A worker is a thread pinned to
one CPU that runs whether or not frames come (both backends pin their
workers, and they busy-poll).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from veloz.lab.hosts import Host

# A thread runnable (on a CPU or waiting for one) through at least this
# share of the time busy-polled: a sleeper is neither. Running alone would
# miss a worker on a loaded machine, whose CPU other work shares.
BUSY_SHARE = 0.5


@dataclass(frozen=True)
class Thread:
    run_ns: int
    wait_ns: int
    cpus: frozenset[int]


def parse_cpu_list(text: str) -> frozenset[int]:
    """'0-2,5' -> {0, 1, 2, 5}."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return frozenset(cpus)


def parse(text: str) -> dict[int, Thread]:
    """Host.threads_sched()'s lines: 'TID RUN_NS WAIT_NS SLICES CPULIST'."""
    threads = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 5 and all(f.isdigit() for f in fields[:3]):
            threads[int(fields[0])] = Thread(int(fields[1]), int(fields[2]),
                                             parse_cpu_list(fields[4]))  # fmt: skip
    return threads


def snapshot(host: Host, pid: int | None) -> dict[int, Thread]:
    return parse(host.threads_sched(pid)) if pid else {}


def busy(before: dict[int, Thread], after: dict[int, Thread], wall_s: float) -> list[int]:
    """The threads runnable through most of the time between two snapshots."""
    floor = BUSY_SHARE * wall_s * 1e9
    return [tid for tid, t in before.items() if tid in after
            and after[tid].run_ns + after[tid].wait_ns - t.run_ns - t.wait_ns >= floor]  # fmt: skip


def worker_cpus(before: dict[int, Thread], after: dict[int, Thread], wall_s: float
                ) -> frozenset[int]:  # fmt: skip
    """The CPUs of the busy threads pinned to one CPU each: the workers.
    (DPDK also pins its control threads to one CPU where it has two: they
    sleep, so they are not counted.)"""
    return frozenset(cpu for tid in busy(before, after, wall_s)
                     if len(after[tid].cpus) == 1 for cpu in after[tid].cpus)  # fmt: skip


def other_cpus(busy: frozenset[int]) -> list[int]:
    """This machine's CPUs (those we may use) that no worker holds; empty
    when the workers hold them all (then nothing is pinned)."""
    return sorted(set(os.sched_getaffinity(0)) - busy)


def waited(before: dict[int, Thread], after: dict[int, Thread], wall_s: float) -> dict | None:
    """How long the busiest-waiting busy worker was kept off its CPU, in ms,
    and the workers' total; None when no thread busy-polled (xdp, linux)."""
    waits = [after[tid].wait_ns - before[tid].wait_ns for tid in busy(before, after, wall_s)]
    if not waits:
        return None
    return {"max_ms": max(waits) / 1e6, "total_ms": sum(waits) / 1e6, "workers": len(waits)}
