"""`veloz sim` (vz-sim): queueing theory where it applies, the policies' promises, the CLI.

The simulator runs the runtime's own dispatch code, so these tests check the
simulation around it: with one worker it must be the textbook M/M/1 and M/D/1
queue; with several, each worker's FIFO queue is fed by a fixed share of the
flows, so the system is that many M/M/1 queues (not M/M/c, which shares one
queue: Erlang C is a bound it must stay above).
"""

from __future__ import annotations

import json
import math
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from veloz.core.errors import VelozError
from veloz.lab import sim

REPO_ROOT = Path(__file__).resolve().parents[2]
VELOZ = REPO_ROOT / ".venv" / "bin" / "veloz"


def vz_sim(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(sim.tool()), *argv], capture_output=True, text=True, check=False)


def test_mm1_mean_and_tail():
    r = sim.run_sim(cores=1, load=0.5, step_ms=400, service="exp", service_us=1, seed=3)
    s = r["overall"]
    assert s["frames"] > 150_000
    assert s["offered"] == pytest.approx(0.5, rel=0.03)
    # M/M/1: sojourn time is exponential with mean S / (1 - rho) = 2 us.
    assert s["latency_us"]["mean"] == pytest.approx(2.0, rel=0.10)
    assert s["latency_us"]["p50"] == pytest.approx(math.log(2) * 2, rel=0.10)
    assert s["latency_us"]["p99"] == pytest.approx(-math.log(0.01) * 2, rel=0.10)
    assert s["reordered"] == 0 and s["active_mean"] == pytest.approx(1.0)


def test_md1_pollaczek_khinchine():
    r = sim.run_sim(cores=1, load=0.7, step_ms=300, service="const", service_us=2, seed=4)
    # M/D/1: W = S + rho * S / (2 (1 - rho)).
    rho, svc = 0.7, 2.0
    want = svc + rho * svc / (2 * (1 - rho))
    assert r["overall"]["latency_us"]["mean"] == pytest.approx(want, rel=0.05)
    assert r["overall"]["latency_us"]["p50"] >= svc


def test_a_full_queue_loses_frames_and_the_tail_counts_them():
    # 1.5x what one worker serves, its queue bounded at 100 frames: a third
    # is lost, nothing waits more than 101 service times, and the p99 of
    # every frame offered falls among the lost ones
    r = sim.run_sim(cores=1, load=1.5, step_ms=50, service="const", service_us=1,
                    queue_cap=100, seed=5)  # fmt: skip
    s = r["overall"]
    assert s["lost"] / s["frames"] == pytest.approx(1 / 3, abs=0.02)
    assert s["latency_us"]["max"] <= 101.5
    assert s["tail_us"]["p99"] is None
    # below capacity nothing is lost, and the two p99s are the same
    r = sim.run_sim(cores=1, load=0.5, step_ms=50, service="const", service_us=1,
                    queue_cap=100, seed=5)  # fmt: skip
    s = r["overall"]
    assert s["lost"] == 0 and s["tail_us"]["p99"] == s["latency_us"]["p99"]


def erlang_c_sojourn(c: int, rho: float, svc: float) -> float:
    """Mean time in an M/M/c system (Erlang C) at per-server load rho."""
    a = c * rho
    top = a**c / math.factorial(c) / (1 - rho)
    wait_prob = top / (sum(a**k / math.factorial(k) for k in range(c)) + top)
    return svc + wait_prob * svc / (c * (1 - rho))


def test_four_workers_are_four_mm1_queues_above_erlang_c():
    cores, load = 4, 0.6
    r = sim.run_sim(policy="rss-mod", cores=cores, load=load, step_ms=100, flows=20000,
                    service="exp", seed=5)  # fmt: skip
    s = r["overall"]
    shares = s["share"]
    assert sum(shares) == pytest.approx(1.0, abs=1e-3)
    # Each worker gets a Poisson share of the frames: an M/M/1 queue at its own load.
    want = sum(p * 1.0 / (1 - load * cores * p) for p in shares)
    assert s["latency_us"]["mean"] == pytest.approx(want, rel=0.06)
    # One shared queue (M/M/c) would do better: the per-worker queues cost that much.
    assert s["latency_us"]["mean"] > 1.3 * erlang_c_sojourn(cores, load, 1.0)


RAMP: dict[str, Any] = dict(cores=8, ramp=[0.2, 0.5, 0.8, 0.5, 0.2], step_ms=10, alloc=True,
                            flows=200, arrivals="bursty", seed=7)  # fmt: skip


@pytest.fixture(scope="module")
def ramp_runs() -> dict[str, dict[str, Any]]:
    return {r["policy"]: r for r in sim.run_policies(sim.policies(), **RAMP)}


def test_the_policies_come_from_the_build():
    assert sim.policies() == ("rss-mod", "flow-affinity", "buckets", "adaptive")
    assert json.loads(vz_sim("--policies").stdout) == list(sim.policies())


@pytest.mark.parametrize("policy", ["flow-affinity", "buckets", "adaptive"])
def test_reorders_nothing_while_workers_change_unless_forced(policy):
    # force_gap 0: a busy flow never leaves its worker, so nothing is
    # reordered however often workers are added and parked
    s = sim.run_sim(policy=policy, force_gap=0, **RAMP)["overall"]
    assert s["reallocations"] > 0 and s["grows"] > 0 and s["shrinks"] > 0
    assert s["reordered"] == 0 and s["flows_forced"] == 0 and s["buckets_forced"] == 0
    assert s["flows_moved"] > 0  # idle flows do follow the allocator
    assert 1 < s["active_mean"] < RAMP["cores"]


def test_reordering_comes_only_with_moves_counted_as_forced(ramp_runs):
    # On this bursty ramp (200 flows on 8 workers) a policy but rss-mod
    # reorders only where it forced busy flows off a worker left behind.
    for policy in ("flow-affinity", "buckets", "adaptive"):
        for step in ramp_runs[policy]["steps"]:
            forced = step["flows_forced"] + step["buckets_forced"]
            assert step["reordered"] == 0 or forced > 0, (policy, step)
    # Never forced (no budget): nothing reordered either.
    held = sim.run_sim(policy="buckets", max_forced=0, **RAMP)["overall"]
    assert held["reallocations"] > 0 and held["buckets_moved"] > 0
    assert held["buckets_forced"] == held["flows_forced"] == held["reordered"] == 0


def test_flows_follow_the_allocator_onto_new_workers():
    # Issue 19's stranding: every flow began on the one active worker. Idle
    # flows now move to the workers the allocator adds.
    r = sim.run_sim(policy="flow-affinity", cores=16, ramp=[0.2, 0.8], step_ms=5, alloc=True,
                    queue_cap=4096)  # fmt: skip
    high = r["steps"][1]
    assert high["lost"] == 0
    assert high["workers_used"] == 16
    assert high["imbalance"] < 1.2


def test_cost_model_charges_the_dispatcher_and_the_moves():
    base = dict(cores=16, load=0.5, step_ms=5, alloc=True, policy="flow-affinity")
    free = sim.run_sim(**base)["overall"]
    costly = sim.run_sim(**base, dispatch_ns=20, scan_ns=1, migrate_us=0.5)["overall"]
    assert free["cold_frames"] == 0 and costly["cold_frames"] > 0
    assert costly["workers_compared"] > 0
    assert costly["latency_us"]["mean"] > free["latency_us"]["mean"]
    # a dispatcher slower than the arrivals (100 ns a frame, 14.4 Mpps
    # offered): frames queue for it, ~4 per us more every us
    over = sim.run_sim(cores=16, load=0.9, step_ms=2, dispatch_ns=100)["overall"]
    assert over["latency_us"]["p50"] > 100  # a free dispatcher: a few us


def test_rss_mod_reorders_under_the_same_ramp(ramp_runs):
    s = ramp_runs["rss-mod"]["overall"]
    assert s["reallocations"] > 0
    assert s["reordered"] > 0
    assert s["flows_moved"] > 0
    assert s["buckets_forced"] == s["flows_forced"] == 0


def test_every_policy_sees_the_same_trace(ramp_runs):
    frames = {p: [st["frames"] for st in r["steps"]] for p, r in ramp_runs.items()}
    assert frames["rss-mod"] == frames["flow-affinity"] == frames["buckets"] == frames["adaptive"]
    assert len(frames["rss-mod"]) == 5
    # Load steps: the middle one carries four times the first's frames, roughly.
    assert 3 < frames["rss-mod"][2] / frames["rss-mod"][0] < 5


def test_deterministic_with_a_seed_and_not_without_it():
    argv = ["--cores", "16", "--ramp", "0.3,0.7", "--step-ms", "2", "--alloc", "--policy",
            "buckets", "--arrivals", "bursty", "--service", "heavy", "--flow-sizes", "heavy",
            "--zipf-s", "0.8", "--timeline-us", "100", "--json"]  # fmt: skip
    a, b = vz_sim(*argv, "--seed", "11"), vz_sim(*argv, "--seed", "11")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    assert vz_sim(*argv, "--seed", "12").stdout != a.stdout
    timeline = json.loads(a.stdout)["timeline"]
    assert len(timeline) == 41 and all(len(t["queues"]) == 16 for t in timeline)


def test_heavy_service_and_bursty_arrivals_keep_the_mean():
    for kw in (dict(service="heavy"), dict(arrivals="bursty", step_ms=100)):
        r = sim.run_sim(cores=2, load=0.4, **{"step_ms": 50, **kw})
        assert r["overall"]["offered"] == pytest.approx(0.4, rel=0.08), kw
    heavy = sim.run_sim(cores=1, load=0.3, step_ms=50, service="heavy")["overall"]
    const = sim.run_sim(cores=1, load=0.3, step_ms=50, service="const")["overall"]
    # Bimodal service: a tenth of the frames take 10 / 1.9 us, and queue behind.
    assert (
        heavy["latency_us"]["max"] > 5 and heavy["latency_us"]["p99"] > const["latency_us"]["p99"]
    )


@pytest.mark.parametrize(
    "argv",
    [["--cores", "0"], ["--cores", "65"], ["--load", "abc"], ["--load"], ["--policy", "lifo"],
     ["--ramp", "0.1,,0.5"], ["--load", "0.5", "--ramp", "0.2"], ["--flow-slots", "1000"],
     ["--bogus"], ["extra"]],
)  # fmt: skip
def test_bad_arguments_exit_2_with_one_line(argv):
    done = vz_sim(*argv)
    assert done.returncode == 2
    assert done.stdout == ""
    # the option tables' one line (src/common/options.c): "veloz: " and what is wrong
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("veloz: ")
    assert argv[0] in done.stderr, done.stderr


@pytest.mark.parametrize("argv", [["--cores", "0"], ["--policy", "lifo"], ["--ramp", "x"]])
def test_veloz_sim_bad_arguments_exit_2_with_one_line(argv):
    done = subprocess.run([str(VELOZ), "sim", *argv], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("veloz: ")


def test_run_sim_refuses_unknown_keywords():
    with pytest.raises(VelozError, match="unexpected keyword"):
        sim.run_sim(cores=2, loda=0.5)


def test_veloz_sim_table_and_json():
    argv = [str(VELOZ), "sim", "--cores", "4", "--ramp", "0.3,0.6", "--step-ms", "2", "--alloc"]
    table = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert table.returncode == 0, table.stderr
    for word in ("rss-mod", "flow-affinity", "buckets", "p99.9", "reordered"):
        assert word in table.stdout
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, check=False)
    runs = json.loads(done.stdout)["runs"]
    assert [r["policy"] for r in runs] == list(sim.policies())
    assert all(len(r["steps"]) == 2 and r["alloc"] for r in runs)


def test_progress_counts_the_simulated_time_up_to_its_total():
    calls: list[tuple[int, int]] = []
    quiet = sim.run_sim(cores=2, ramp=[0.3, 0.6], step_ms=3, seed=9)
    shown = sim.run_sim(cores=2, ramp=[0.3, 0.6], step_ms=3, seed=9,
                        progress=lambda done, total: calls.append((done, total)))  # fmt: skip
    assert shown == quiet  # reporting changes nothing it computes
    assert {total for _, total in calls} == {6000}  # two steps of 3 ms, in us
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[-1] == 6000 and done.count(6000) == 1
    assert 100 < len(calls) <= 1001  # as the run goes, not only at its end


def test_progress_leaves_errors_to_stderr():
    with pytest.raises(VelozError, match="flow table has no room"):
        sim.run_sim(flows=100, flow_slots=32, prepopulate=True, progress=lambda d, t: None)


def test_veloz_sim_json_stays_json_with_a_progress_bar_on_a_terminal():
    # stderr a terminal, stdout a pipe: the bar goes to the one, the JSON to the other
    main, side = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "python"), "COLUMNS": "120"}
    argv = [sys.executable, "-m", "veloz.cli", "sim", "--cores", "2", "--ramp", "0.3,0.6",
            "--step-ms", "20", "--json"]  # fmt: skip
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=side, env=env) as proc:
        os.close(side)
        seen = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        out = proc.stdout.read() if proc.stdout else b""
    os.close(main)
    assert proc.returncode == 0, seen
    runs = json.loads(out)["runs"]
    assert [r["policy"] for r in runs] == list(sim.policies())
    assert b"sim: " in seen and b"simulated us" in seen
    assert f"{4 * 40000}/{4 * 40000}".encode() in seen.replace(b",", b"")
