"""`veloz sim`: the dispatch policies and the core allocator in a discrete-event simulation.

The simulator is the C tool vz-sim, linked with the runtime's own policy code
(src/dispatch/dispatch.c, core_alloc.c), so what it shows is what the afxdp
dispatcher does, on 2 to 64 simulated workers. This module builds its command
line, parses its JSON and prints it; `run_sim()` is the entry point for the lab.
A long run shows a progress bar on stderr when stderr is a terminal, fed by
vz-sim's own count of the simulated time it has computed (--progress).
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from veloz.core import options, paths
from veloz.core.errors import VelozError


def tool() -> Path:
    """The vz-sim binary (src/dispatch/sim), installed or built."""
    return paths.tool("vz-sim")


@functools.cache
def policies() -> tuple[str, ...]:
    """The dispatch policies, as the build names them (src/dispatch/policy.h)."""
    done = subprocess.run([str(tool()), "--policies"], capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise VelozError(f"vz-sim --policies failed: {done.stderr.strip()}", code=1)
    return tuple(json.loads(done.stdout))


def _ramp_text(ramp: str | list[float] | tuple[float, ...]) -> str:
    return ramp if isinstance(ramp, str) else ",".join(f"{x:g}" for x in ramp)


def command(
    *,
    policy: str = "rss-mod",
    cores: int | None = None,
    load: float | None = None,
    ramp: str | list[float] | tuple[float, ...] | None = None,
    step_ms: float | None = None,
    arrivals: str | None = None,
    burst_us: float | None = None,
    service: str | None = None,
    service_us: float | None = None,
    flows: int | None = None,
    flow_sizes: str | None = None,
    zipf_s: float | None = None,
    flow_slots: int | None = None,
    alloc: bool = False,
    wake_us: float | None = None,
    hold_us: float | None = None,
    queue_cap: int | None = None,
    prepopulate: bool = False,
    seed: int | None = None,
    timeline_us: int | None = None,
    settle_us: float | None = None,
    max_forced: int | None = None,
    migrate_gap: int | None = None,
    force_gap: int | None = None,
    migrate_us: float | None = None,
    dispatch_ns: float | None = None,
    scan_ns: float | None = None,
) -> list[str]:
    """vz-sim's argv for one policy; None leaves vz-sim's default."""
    cmd = [str(tool()), "--json", "--policy", policy]
    valued: dict[str, Any] = {
        "--cores": cores, "--load": load,
        "--ramp": None if ramp is None else _ramp_text(ramp),
        "--step-ms": step_ms, "--arrivals": arrivals, "--burst-us": burst_us,
        "--service": service, "--service-us": service_us, "--flows": flows,
        "--flow-sizes": flow_sizes, "--zipf-s": zipf_s, "--flow-slots": flow_slots,
        "--wake-us": wake_us, "--hold-us": hold_us, "--queue-cap": queue_cap, "--seed": seed,
        "--timeline-us": timeline_us, "--settle-us": settle_us, "--max-forced": max_forced,
        "--migrate-gap": migrate_gap, "--force-gap": force_gap, "--migrate-us": migrate_us,
        "--dispatch-ns": dispatch_ns, "--scan-ns": scan_ns,
    }  # fmt: skip
    for flag, value in valued.items():
        if value is not None:
            cmd += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if alloc:
        cmd.append("--alloc")
    if prepopulate:
        cmd.append("--prepopulate")
    return cmd


# progress(done, total): simulated microseconds computed, of the run's total
OnProgress = Callable[[int, int], None]


def _follow(cmd: list[str], progress: OnProgress) -> subprocess.CompletedProcess[str]:
    """Run cmd with --progress, calling progress() on each of its lines as they
    come; its other stderr lines and its stdout are returned as run() would."""
    with subprocess.Popen([*cmd, "--progress"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        out: list[str] = []
        # stdout (a timeline can be large) drains beside stderr, or either pipe could fill
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
        reader.start()
        rest = []
        for line in proc.stderr:
            words = line.split()
            if len(words) == 3 and words[0] == "progress" and words[1].isdigit():
                progress(int(words[1]), int(words[2]))
            else:
                rest.append(line)
        reader.join()
        code = proc.wait()
    return subprocess.CompletedProcess(cmd, code, out[0] if out else "", "".join(rest))


def run_sim(progress: OnProgress | None = None, **kw: Any) -> dict[str, Any]:
    """One simulation: keyword arguments as command() takes them, vz-sim's JSON back.

    The result has the run's parameters, "steps" (one dict per load step:
    load, offered, frames, lost, latency_us {mean, p50, p90, p99, p999, max} of the
    frames served, tail_us {p99, p999} of every frame offered (a lost one counting as
    slower than any served: None when the percentile falls among the lost),
    reordered, flows_moved, buckets_moved, buckets_forced, flows_forced, cold_frames,
    workers_compared, reallocations, grows, shrinks, active_mean, imbalance, share),
    "overall" (the same over every step) and,
    with timeline_us, "timeline". Bad input raises VelozError (code 2).
    progress, if given, is called as the run goes with the simulated
    microseconds computed and the total, the last call with both equal.
    """
    try:
        cmd = command(**kw)
    except TypeError as e:
        raise VelozError(f"sim: {e}") from None
    if progress is None:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    else:
        done = _follow(cmd, progress)
    if done.returncode != 0:
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        message = message.removeprefix("veloz: ").replace(
            "(see vz-sim --help)", "(see `veloz sim --help`)"
        )
        raise VelozError(message or f"vz-sim failed ({done.returncode})", done.returncode)
    return json.loads(done.stdout)


def run_policies(
    names: list[str] | tuple[str, ...],
    progress: Callable[[str, int, int], None] | None = None,
    **kw: Any,
) -> list[dict[str, Any]]:
    """The same trace (same seed and parameters) under each policy; progress,
    if given, is called as run_sim's with the policy's name first."""
    runs = []
    for p in names:
        each = None if progress is None else functools.partial(progress, p)
        runs.append(run_sim(policy=p, progress=each, **kw))
    return runs


@contextmanager
def progress_bar(runs: int, console: Console) -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar over `runs` runs of the same length, for run_policies()."""
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("simulated us"), TimeElapsedColumn(), TextColumn("ETA"),
               TimeRemainingColumn())  # fmt: skip
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("sim", total=None)
        finished: list[str] = []
        base = 0

        def update(policy: str, done: int, total: int) -> None:
            nonlocal base
            bar.update(task, total=runs * total, completed=base + done,
                       description=f"sim: {policy}")  # fmt: skip
            if done == total and policy not in finished:
                finished.append(policy)
                base += total

        yield update


def _kwargs(args: argparse.Namespace) -> dict[str, Any]:
    names = ("cores", "load", "ramp", "step_ms", "arrivals", "burst_us", "service",
             "service_us", "flows", "flow_sizes", "zipf_s", "flow_slots", "alloc",
             "wake_us", "hold_us", "queue_cap", "prepopulate", "seed", "timeline_us",
             "settle_us", "max_forced", "migrate_gap", "force_gap", "migrate_us",
             "dispatch_ns", "scan_ns")  # fmt: skip
    return {n: getattr(args, n) for n in names}


def _fmt(x: float) -> str:
    return f"{x:.2f}" if x < 1000 else f"{x:,.0f}"


def _row(policy: str, label: str, s: dict[str, Any]) -> list[str]:
    lat = s["latency_us"]
    return [policy, label, f"{s['load']:.2f}", f"{s['frames']:,}", f"{s['lost']:,}",
            _fmt(lat["mean"]),
            _fmt(lat["p50"]), _fmt(lat["p99"]), _fmt(lat["p999"]), _fmt(lat["max"]),
            f"{s['reordered']:,}", f"{s['flows_moved']:,}", f"{s['buckets_moved']:,}",
            f"{s['buckets_forced'] + s['flows_forced']:,}", f"{s['reallocations']:,}",
            f"{s['active_mean']:.1f}",
            f"{s['imbalance']:.2f}"]  # fmt: skip


def print_table(runs: list[dict[str, Any]], console: Console) -> None:
    first = runs[0]
    title = (
        f"{first['cores']} cores{', core allocator' if first['alloc'] else ''}"
        f"{', prepopulated' if first['prepopulate'] else ''}, {first['arrivals']} arrivals, "
        f"{first['service']} service ({first['service_us']:g} us), {first['flows']} flows "
        f"({first['flow_sizes']}), {first['step_ms']:g} ms per step, seed {first['seed']}"
    )
    caption = "latency in us; imbal: the busiest worker's frames / frames per active worker"
    table = Table(title=title, caption=caption)
    for col in ("policy", "step", "load", "frames", "lost", "mean", "p50", "p99", "p99.9", "max",
                "reordered", "flows moved", "buckets moved", "forced", "realloc", "active",
                "imbal"):  # fmt: skip
        if col == "policy":  # never cut a policy's name to fit the terminal
            table.add_column(col, justify="left", no_wrap=True, min_width=13)
        else:
            table.add_column(col, justify="right")
    for r in runs:
        steps = r["steps"]
        for i, s in enumerate(steps):
            table.add_row(*_row(r["policy"], str(i + 1), s))
        if len(steps) > 1:
            table.add_row(*_row(r["policy"], "all", r["overall"]), style="bold")
        if r is not runs[-1]:
            table.add_section()
    console.print(table)
    for r in runs:
        if "timeline" not in r:
            continue
        tl = Table(title=f"{r['policy']}: timeline")
        for col in ("t (us)", "active", "queued", "longest queue"):
            tl.add_column(col, justify="right")
        for t in r["timeline"]:
            tl.add_row(f"{t['t_us']:g}", str(t["active"]), str(t["queued"]),
                       str(max(t["queues"], default=0)))  # fmt: skip
        console.print(tl)


def _refuse_inapplicable(args: argparse.Namespace) -> None:
    """An option the chosen model never reads is a mistake worth a line."""
    for option, given, needs, applies in (
        ("--burst-us", args.burst_us, "--arrivals bursty", args.arrivals == "bursty"),
        ("--zipf-s", args.zipf_s, "--flow-sizes heavy", args.flow_sizes == "heavy"),
        ("--wake-us", args.wake_us, "--alloc", args.alloc),
    ):
        if given is not None and not applies:
            raise VelozError(f"{option} goes with {needs}")


def _check_ramp(text: str) -> None:
    """Each load finite and in range, as vz-sim's --load, named as --ramp."""
    lo, hi = options.limits("vz-sim", "--load")
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise VelozError(f"--ramp: '{item}' is not a number") from None
        if not lo <= value <= hi:  # NaN too
            raise VelozError(f"--ramp: '{item}' is not a load between {lo:g} and {hi:g}")


def run(args: argparse.Namespace) -> int:
    _refuse_inapplicable(args)
    if args.ramp is not None:
        _check_ramp(args.ramp)
    chosen = policies() if args.policy == "all" else (args.policy,)
    if sys.stderr.isatty():  # on stderr: --json's stdout stays one JSON document
        with progress_bar(len(chosen), Console(stderr=True)) as update:
            runs = run_policies(chosen, progress=update, **_kwargs(args))
    else:
        runs = run_policies(chosen, **_kwargs(args))
    if args.json:
        print(json.dumps(runs[0] if len(runs) == 1 else {"runs": runs}))
        return 0
    # Not a terminal (a pipe, a test): rich would squeeze the table to 80 columns.
    print_table(runs, Console() if sys.stdout.isatty() else Console(width=200))
    return 0
