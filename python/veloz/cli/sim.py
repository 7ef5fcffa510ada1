"""`veloz sim`'s command line; the work is veloz.lab.sim's."""

from __future__ import annotations

import argparse

from veloz.core import options
from veloz.core.errors import VelozError
from veloz.lab.sim import policies, run

DESCRIPTION = """\
Simulate the dispatch stage with the runtime's own policy code (not a model of it).
Frames of --flows flows (Toeplitz RSS hashes of random 5-tuples) arrive at --load times
the capacity of --cores workers, or at each load of --ramp for --step-ms each; the
policy picks a worker and the frame joins its FIFO queue; a worker serves one frame at
a time; with --alloc the core allocator adds or parks workers every 5 us (parked ones
drain, then sleep; waking takes --wake-us). Latency is completion minus arrival.
"""


def policy_choices(*extra: str) -> tuple[str, ...] | None:
    """argparse choices: the build's policies, or None (no check here: the C
    tool refuses an unknown one) when the build is not there to ask."""
    try:
        return (*policies(), *extra)
    except VelozError:
        return None


def choices(option: str) -> tuple[str, ...] | None:
    """argparse choices: vz-sim's table's (src/dispatch/sim/vz-sim.c), or None
    (vz-sim refuses a wrong one) when the build is not there to ask."""
    try:
        return tuple(options.row("vz-sim", option)["choices"])
    except (VelozError, OSError, KeyError):
        return None


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim",
        help="simulate the dispatch policies and core allocator on 1 to 64 cores",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--policy",
        default="all",
        choices=policy_choices("all"),
        help="dispatch policy, or all three on the same trace (default)",
    )
    p.add_argument("--cores", type=int, help="workers, 1..64 (default 4)")
    _add_trace_options(p)
    _add_dispatcher_options(p)
    p.add_argument("--seed", type=int, help="trace seed (1)")
    p.add_argument(
        "--timeline-us", type=int, help="also sample active workers and queue lengths every T us"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="vz-sim's JSON: one object, or {'runs': [...]} for all policies",
    )
    p.set_defaults(func=run)  # fmt: skip


def _add_trace_options(p: argparse.ArgumentParser) -> None:
    """The trace: offered load, arrivals, service times, flows."""
    load = p.add_mutually_exclusive_group()
    load.add_argument("--load", type=float, help="offered load, fraction of capacity (0.7)")
    load.add_argument("--ramp", metavar="F,F,..", help="loads raised in steps, e.g. 0.1,0.5,0.9")
    p.add_argument("--step-ms", type=float, help="simulated time per load step (20)")
    p.add_argument(
        "--arrivals",
        choices=choices("--arrivals"),
        help="poisson, or bursty: on/off, 4x the mean rate 20%% of the time",
    )
    p.add_argument("--burst-us", type=float, help="bursty: mean burst length (50)")
    p.add_argument(
        "--service",
        choices=choices("--service"),
        help="service time: exp, const, or heavy (bimodal: 10%% take 10x)",
    )
    p.add_argument("--service-us", type=float, help="mean service time (1)")
    p.add_argument("--flows", type=int, help="flows in the trace (1000)")
    p.add_argument(
        "--flow-sizes",
        choices=choices("--flow-sizes"),
        help="frames per flow: uniform, or heavy (Zipf: a few elephants)",
    )
    p.add_argument("--zipf-s", type=float, help="heavy flow sizes: Zipf exponent (1.1)")


def _add_dispatcher_options(p: argparse.ArgumentParser) -> None:
    """The flow table, the core allocator and the dispatcher's costs and limits."""
    p.add_argument("--flow-slots", type=int, help="flow table slots, a power of two (65536)")
    p.add_argument(
        "--alloc",
        action="store_true",
        help="the core allocator grows and shrinks the active workers",
    )
    p.add_argument("--wake-us", type=float, help="a parked worker's wake-up time (5)")
    p.add_argument(
        "--hold-us",
        type=float,
        help="buckets: longest wait for a bucket to drain before a forced move (200)",
    )
    p.add_argument(
        "--queue-cap",
        type=int,
        help="frames a worker's queue holds; beyond, a frame is lost (0, the default: no bound)",
    )
    p.add_argument(
        "--prepopulate",
        action="store_true",
        help="fill the flow table with the trace's flows first",
    )
    p.add_argument("--settle-us", type=float,
                   help="buckets: no periodic rebalance this soon after a change of workers "
                   "(2000)")  # fmt: skip
    p.add_argument(
        "--max-forced", type=int, help="forced moves allowed per rebalance period of 1 ms (1024)"
    )
    p.add_argument("--migrate-gap", type=int,
                   help="an idle flow moves when its worker has more than this many frames "
                   "above the least loaded (1)")  # fmt: skip
    p.add_argument("--force-gap", type=int,
                   help="a busy flow is forced off a worker this many frames behind; 0 never "
                   "(64)")  # fmt: skip
    p.add_argument("--migrate-us", type=float,
                   help="cache-affinity penalty: added to a flow's first frame on a new worker "
                   "(0)")  # fmt: skip
    p.add_argument(
        "--dispatch-ns",
        type=float,
        help="the dispatcher's own time per frame; frames queue for it (0)",
    )
    p.add_argument("--scan-ns", type=float, help="the dispatcher's time per worker it compares (0)")
