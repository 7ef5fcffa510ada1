"""The XDP dispatch stage on the testbed: the dispatcher on dut-gen spreads
the generator's 256 flows over two CPUs through a cpumap, the tx NF runs on
both (its cpumap build: TX is a redirect back out of dut-gen there) and
every frame comes back to vz-gen, where a sink counts it. With --alloc the
core allocator grows the active CPUs under load and shrinks them after.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable

import pytest
from wire import run_nf, xdp_attached

from veloz.core.proc import Runner, in_netns, run_json, veloz_argv
from waits import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

COUNT = 100_000
FLOWS = 256
DST = "198.18.0.1"


@pytest.mark.parametrize("backend", ["xdp", "xdp-generic"])
def test_flow_affinity_spreads_flows_over_two_cpus_and_frames_come_back(testbed, backend):
    sink_argv = veloz_argv("gen", "--sink", "--replace", "--iface", "gen-dut", "--json")
    sink = Runner(in_netns("vz-gen", sink_argv), what="the sink")
    with sink:
        with run_nf("tx", backend, "--dispatch", "flow-affinity", "--workers", "2") as nf:
            assert nf.attached["dispatch"] == "flow-affinity" and nf.attached["workers"] == 2
            assert nf.attached["nf_prog_id"] != nf.attached["prog_id"]
            gen_argv = veloz_argv("gen", "--iface", "gen-dut", "--count", str(COUNT),
                                  "--rate", "100k", "--flows", str(FLOWS),
                                  "--dst-ip", "198.18.0.1", "--json")  # fmt: skip
            sent = run_json(in_netns("vz-gen", gen_argv), timeout=60)
            summary = nf.stop()
        arrived = sink.stop()
    # Every frame the generator made was handed to dut-gen or refused by the
    # veth (its 256-entry ring overflows when a busy two-core machine delays
    # dut-gen's NAPI, the generic path's skb work most of all: CI saw 388 of
    # 100,000 once). That loss is the testbed's, and small; what dut-gen
    # received is what the dispatcher must account for, exactly.
    xmit = sent["xmit"]
    assert xmit + sent["xmit_errors"] == COUNT, sent
    assert xmit >= COUNT * 0.98, sent
    dispatch = summary["dispatch"]
    # every frame went through the cpumap to an active CPU, and the NF
    # ran on the CPU it was sent to
    assert dispatch["policy"] == "flow-affinity" and dispatch["active"] == [0, 1]
    assert sum(dispatch["cpu_packets"]) == xmit == summary["tx"] == summary["packets"]
    assert dispatch["no_cpu"] == 0
    assert [w["packets"] for w in summary["workers"]][:2] == dispatch["cpu_packets"]
    # both CPUs processed packets: the flows were placed on the least loaded
    assert all(n > 0 for n in dispatch["cpu_packets"]), dispatch
    assert dispatch["flows_new"] == FLOWS and dispatch["flows_moved"] == 0, dispatch
    # TX from the cpumap (a redirect out of dut-gen) reached vz-gen
    assert arrived["received"] >= xmit * 0.99, arrived
    assert not xdp_attached("vz-dut", "dut-gen")


class Records(threading.Thread):
    """A running NF's JSON lines as they come, so a test can wait on them."""

    def __init__(self, nf: Runner) -> None:
        super().__init__(daemon=True)
        self.nf = nf
        self.records: list[dict] = []
        self.lock = threading.Lock()
        self.start()

    def run(self) -> None:
        assert self.nf.proc.stdout is not None
        for line in self.nf.proc.stdout:
            if line.strip():
                with self.lock:
                    self.records.append(json.loads(line))

    def first(self, what: str, ok: Callable[[dict], bool], since: int) -> tuple[int, dict] | None:
        """The first record from index `since` on that is ok(), with its index."""
        alive = self.is_alive()  # before the look: a record read before it ended is seen
        with self.lock:
            found = next(((i, r) for i, r in enumerate(self.records[since:], since)
                          if "dispatch" in r and ok(r)), None)  # fmt: skip
        if found is None and not alive:
            raise AssertionError(f"the run's output ended before {what}")
        return found

    def wait_for(self, what: str, ok: Callable[[dict], bool], timeout: float, since: int = 0):
        """The first record from index `since` on that is ok(); (index, record)."""
        return wait_until(lambda: self.first(what, ok, since), timeout, interval=0.05, what=what)

    def stop(self) -> dict:
        """SIGINT, as Runner.stop(), reading stdout here; the summary."""
        assert self.nf.proc.stderr is not None
        self.nf.proc.send_signal(signal.SIGINT)
        err = self.nf.proc.stderr.read()
        self.nf.proc.wait(timeout=20)
        self.join(timeout=20)
        summary = [r for r in self.records if r.get("summary")]
        assert self.nf.proc.returncode == 0 and summary, err
        return summary[-1]


# flow-affinity is left out: its flows stay on the CPU that was active when
# they began (issue 19), so a CPU added under load gets none and is parked.
@pytest.mark.parametrize("policy", ["rss-mod", "buckets"])
@pytest.mark.parametrize("backend", ["xdp", "xdp-generic"])
def test_the_allocator_grows_under_load_and_shrinks_after(testbed, backend, policy):
    nf = run_nf("tx", backend, "--dispatch", policy, "--workers", "2", "--alloc",
                "--interval", "0.1")  # fmt: skip
    records = Records(nf)
    try:
        assert nf.attached["alloc"] is True
        gen_argv = veloz_argv("gen", "--iface", "gen-dut", "--rate", "1M", "--duration", "4",
                              "--flows", str(FLOWS), "--dst-ip", DST, "--json")  # fmt: skip
        gen = subprocess.Popen(in_netns("vz-gen", gen_argv), stdout=subprocess.PIPE, text=True)
        try:
            # One CPU to start with; under 1 Mpps its cpumap queue falls
            # behind and the allocator adds the second.
            first = records.wait_for("a first interval", lambda r: True, timeout=5)[1]
            assert first["dispatch"]["active"] == [0], first
            i, grown = records.wait_for(
                "two active CPUs", lambda r: r["dispatch"]["active"] == [0, 1], timeout=10
            )
            out, _ = gen.communicate(timeout=30)
        finally:
            if gen.poll() is None:
                gen.kill()
                gen.wait()
        sent = json.loads(out.strip().splitlines()[-1])
        xmit = sent["xmit"]
        # It grew while the load was on, and shrinks back once it stops...
        assert grown["packets"] < xmit, grown
        records.wait_for("back to one CPU", lambda r: r["dispatch"]["active"] == [0], 10, i)
        # ... and every frame the stage sent to a CPU was run there, or
        # written off as dropped by that CPU's cpumap queue.
        records.wait_for(
            "the books balance",
            lambda r: (
                sum(r["dispatch"]["cpu_packets"])
                == r["packets"] + r["dispatch"]["alloc"]["written_off"]
                == xmit
            ),
            timeout=5,
        )
    finally:
        summary = records.stop()
    dispatch = summary["dispatch"]
    alloc = dispatch["alloc"]
    assert dispatch["active"] == [0] and dispatch["no_cpu"] == 0, dispatch
    assert sum(dispatch["cpu_packets"]) == summary["packets"] + alloc["written_off"] == xmit
    assert all(n > 0 for n in dispatch["cpu_packets"]), dispatch
    assert alloc["grows"] >= 1 and alloc["shrinks"] >= 1, alloc
    assert alloc["reallocations"] == alloc["grows"] + alloc["shrinks"]
    assert 1.0 < alloc["mean_active"] < 2.0, alloc
    assert not xdp_attached("vz-dut", "dut-gen")
