"""A routing daemon drives the router, on every backend: bird2 in vz-gen
announces routes over BGP to bird2 in vz-dut, which installs them in
vz-dut's kernel table; the router there runs with `sync = "kernel"`.

A withdrawn prefix stops being forwarded and an announced one starts, each
within SYNC_S of the announcer's change; while prefixes come and go, frames
to a prefix that does not change are all forwarded."""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from scapy.all import UDP, Ether
from test_ctl import BACKENDS, counted_losses, send, sink
from wire import Capture, settle_nf

from veloz.control.client import Ctl
from veloz.control.router import parse_prefix
from veloz.core.proc import Runner, in_netns, run_json, veloz_argv
from veloz.testbed import bgp
from waits import wait_until

# From the announcer's change to the router's table: BGP's update, BIRD's
# kernel export, the sync's batch (at most route_sync.MAX_WAIT) and its
# transaction. Seconds, with room for a loaded 2-CPU machine.
SYNC_S = 3.0
STABLE = [f"198.19.{i}.0/24" for i in range(64)] + ["198.19.128.0/17"]
CHURN = [f"198.18.{200 + i}.0/24" for i in range(4)]


def router(backend: str, config: Path) -> Runner:
    argv = veloz_argv("run", "router", "--backend", backend, "--iface", "dut-gen", "--iface",
                      "dut-sink", "--config", str(config), "--json")  # fmt: skip
    return Runner(in_netns("vz-dut", argv), attach_timeout=60)


def holds(ctl_path: str, prefix: str) -> bool:
    p = parse_prefix(prefix)
    with Ctl(Path(ctl_path)) as c:
        key = f"{p.length.to_bytes(4, 'little').hex()}{p.addr.hex()}"
        return c.requests([f"holds router_routes4 {key}"])[0] == "ok 1"


def kernel_has(prefix: str) -> bool:
    done = subprocess.run(["ip", "-n", "vz-dut", "route", "show", prefix], capture_output=True,
                          text=True, check=False)  # fmt: skip
    return bool(done.stdout.strip())


def timed(change, ctl_path: str, prefix: str, present: bool) -> float:
    start = time.monotonic()
    change()
    where = "in" if present else "out of"
    wait_until(lambda: holds(ctl_path, prefix), SYNC_S, until=lambda held: held == present,
               interval=0.005, what=f"{prefix} {where} the router")  # fmt: skip
    return time.monotonic() - start


# every backend with the DIR-24-8 table (the default), and xdp with the trie
CASES = [(b, "dir24") for b in BACKENDS] + [("xdp", "trie")]


@pytest.mark.parametrize(("backend", "table"), CASES)
def test_bgp_drives_the_router(testbed, tmp_path, backend, table):
    cfg = tmp_path / "router.toml"
    cfg.write_text(f'sync = "kernel"\ntable = "{table}"\n')
    feed = bgp.feed_file(tmp_path / "feed.routes", STABLE)
    with (
        bgp.Bird("vz-dut", tmp_path, bgp.receiver_config()),
        router(backend, cfg) as nf,
        bgp.Bird("vz-gen", tmp_path, bgp.announcer_config(feed, CHURN)) as announcer,
    ):
        ctl = nf.attached["ctl"]
        # the session comes up after the router: the whole feed arrives live
        wait_until(lambda: all(holds(ctl, p) for p in [*STABLE, *CHURN]), 60,
                   what="every announced prefix in the router")  # fmt: skip
        with sink() as s:
            sent = send("198.19.7.1", 2000)
            got = s.stop()
        assert got["received"] == sent["sent"] == 2000, "forwarded by a BGP route"

        took = [timed(lambda: announcer.withdraw(0), ctl, CHURN[0], False)]
        assert not kernel_has(CHURN[0])
        with sink() as s:
            send("198.18.200.1", 1000)
            assert s.stop()["received"] == 0, "a withdrawn prefix is not forwarded"
        took.append(timed(lambda: announcer.announce(0), ctl, CHURN[0], True))
        with sink() as s:
            send("198.18.200.1", 1000)
            assert s.stop()["received"] == 1000, "an announced prefix is forwarded again"

        # churn beside a steady flow to a prefix that does not change
        lost0 = counted_losses(ctl)
        results: list[dict] = []
        with sink() as s:
            flow = threading.Thread(target=lambda: results.append(send("198.19.9.1", 200_000)))
            flow.start()
            for round_ in range(6):
                for i in range(1, len(CHURN)):
                    announcer.withdraw(i) if round_ % 2 == 0 else announcer.announce(i)
                time.sleep(0.1)
            flow.join()
            settle_nf(200_000)  # the last frames through the NF before the sink stops
            got = s.stop()
        assert results[0]["sent"] == 200_000
        lost = wait_until(lambda: counted_losses(ctl) - lost0, 10,
                          until=lambda n: got["received"] + n >= 200_000, interval=0.2,
                          what=f"losses beside {got['received']} frames received")  # fmt: skip
        assert got["received"] + lost == 200_000, (got, lost)
        # veloz status shows the sync, in step, with the kernel's prefixes
        text = subprocess.run(veloz_argv("status"), capture_output=True, text=True, timeout=60,
                              check=True).stdout  # fmt: skip
        line = next(x for x in text.splitlines() if "route sync:" in x)
        assert "kernel table main" in line and "in step" in line and " 0 errors" in line, line
        print(f"{backend} {table}: withdraw {took[0] * 1e3:.0f} ms, announce "
              f"{took[1] * 1e3:.0f} ms, {got['received']} of 200000 forwarded during churn, "
              f"{lost} counted as missed")  # fmt: skip
    # BIRD took its routes with it: nothing left in vz-dut's table
    assert not any(kernel_has(p) for p in [*STABLE, *CHURN])


ECMP_PREFIX = "198.19.250.0/24"
MEMBERS = {"198.18.1.2": "02:00:c6:12:01:02", "198.18.1.3": "02:00:c6:12:01:03"}


def _ip(*args: str) -> None:
    subprocess.run(["ip", "-n", "vz-dut", *args], check=True, capture_output=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_kernel_multipath_route_spreads_flows(testbed, tmp_path, backend):
    """An ECMP route in the kernel's table becomes a next-hop group: each
    flow keeps one next hop, and the flows spread evenly over both."""
    cfg = tmp_path / "router.toml"
    cfg.write_text('sync = "kernel"\n')
    try:
        for addr, mac in MEMBERS.items():
            _ip("neigh", "replace", addr, "lladdr", mac, "dev", "dut-sink", "nud", "permanent")
        with router(backend, cfg) as nf:
            hops = [w for a in MEMBERS for w in ("nexthop", "via", a, "dev", "dut-sink")]
            _ip("route", "add", ECMP_PREFIX, *hops)
            wait_until(lambda: holds(nf.attached["ctl"], ECMP_PREFIX), SYNC_S,
                       what=f"{ECMP_PREFIX} in the router")  # fmt: skip
            # paced low: tcpdump, beside a busy-polling worker on two CPUs,
            # must keep every frame (Capture fails on any it drops)
            capture = Capture("vz-sink", "sink-dut", tmp_path / "ecmp.pcap", "udp")
            argv = veloz_argv("gen", "--iface", "gen-dut", "--json", "--dst-ip", "198.19.250.1",
                              "--flows", "1000", "--count", "4000", "--rate", "10k")  # fmt: skip
            sent = run_json(in_netns("vz-gen", argv), timeout=60)
            frames = capture.stop(expect=sent["sent"])
    finally:
        subprocess.run(["ip", "-n", "vz-dut", "route", "del", ECMP_PREFIX], check=False,
                       capture_output=True)  # fmt: skip
        for addr in MEMBERS:
            subprocess.run(["ip", "-n", "vz-dut", "neigh", "del", addr, "dev", "dut-sink"],
                           check=False, capture_output=True)  # fmt: skip
    assert len(frames) == sent["sent"] == 4000
    hop_of: dict[int, set[str]] = {}
    for f in frames:
        hop_of.setdefault(f[UDP].sport, set()).add(f[Ether].dst)
    assert all(len(h) == 1 for h in hop_of.values()), "a flow took two next hops"
    per_hop = Counter(next(iter(h)) for h in hop_of.values())
    assert set(per_hop) == set(MEMBERS.values())
    share = min(per_hop.values()) / len(hop_of)
    print(f"{backend}: {len(hop_of)} flows over 2 next hops: {dict(per_hop)}")
    assert share >= 0.4, per_hop
