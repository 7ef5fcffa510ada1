"""kernel.bpf_stats_enabled: the kernel's own count and time of each BPF
program's runs (bpftool's run_cnt and run_time_ns), for a block, then as
it was.

Only where a figure needs it: the kernel then reads the clock twice around
every program run, which costs tens of ns per frame on a VM and would slow
every other measurement down.
"""

from __future__ import annotations

from pathlib import Path

BPF_STATS = "/proc/sys/kernel/bpf_stats_enabled"


class Enabled:
    """with Enabled(): ... runs the block with the stats on (when `enable`)."""

    def __init__(self, enable: bool = True) -> None:
        self.enable = enable
        self.before: str | None = None

    def __enter__(self) -> None:
        if not self.enable:
            return
        try:
            self.before = Path(BPF_STATS).read_text().strip()
            Path(BPF_STATS).write_text("1")
        except OSError:
            self.before = None

    def __exit__(self, *exc: object) -> None:
        if self.before is not None:
            Path(BPF_STATS).write_text(self.before)
