# SPDX-License-Identifier: BSD-2-Clause
"""Fail-static and zero-loss restarts on xdp and xdp-generic (docs/backends.md,
"Persist, adopt, take over"):

- a `--persist` ddos killed with -9 keeps dropping the attack with no veloz
  process at all (vz-dut's kernel never sees a frame of it) and counting it;
  `veloz status` calls it adoptable, and the next `veloz run` adopts it with
  its rules and counters as they are;
- `--take-over` of a running ddos, lb and router under paced traffic from
  vz-gen loses no frame: ddos drops every one (none reaches vz-dut's
  kernel), lb takes every one at its VIP and sends it out, the router's sink
  receives every one; lb's established flows keep their backends, flow by
  flow, though a backend added since moved their ring slots; the rules,
  VIPs and routes changed through `veloz ctl` survive;
- without --persist a stop detaches, as it always did.

Every test removes what it leaves (programs, records, processes), pass or fail.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from scapy.all import IP, UDP, Ether, Raw, wrpcap
from test_ctl import CONFIG as ROUTER_CONFIG
from test_ctl_load_nfs import udp_no_ports
from test_metrics import LB_CONFIG, LB_VIP
from wire import Capture, nf_packets, send_from_gen, xdp_attached

from veloz import testbed as tb
from veloz.control import lb
from veloz.control.client import Ctl
from veloz.control.persist import PERSIST_DIR
from veloz.core.proc import Runner, in_netns, run_json, veloz_argv
from waits import settle, wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

GEN_IP = "198.18.0.1"  # vz-gen's gen-dut
DUT_IP = "198.18.0.2"  # vz-dut's dut-gen: its kernel takes what ddos passes
DDOS_CONFIG = f'[[rule]]\nsrc = "{GEN_IP}/32"\nproto = "udp"\naction = "drop"\n'
TRAFFIC = "198.18.140.0/22"  # inside the router config's 198.18.128.0/17
FRAMES = 200_000
RATE = "100k"
# the old run counts this many of the paced frames before the new one starts
UNDER_WAY = 10_000
DUT_PORTS = ("dut-gen", "dut-sink")
# lb's frames go back out dut-gen to a next hop no testbed host is: vz-gen's
# kernel drops them at once (not its MAC), its capture still sees them; with
# vz-gen's own MAC its stack would take 100k IPIP packets a second, and the
# generator beside it would fall behind
OTHER_MAC = "02:00:c6:12:ff:02"
LB_NEXT_HOP = LB_CONFIG.replace(
    'next_hop_mac = "02:00:c6:12:00:01"', f'next_hop_mac = "{OTHER_MAC}"'
)
CONFIGS = {"ddos": DDOS_CONFIG, "lb": LB_NEXT_HOP, "router": ROUTER_CONFIG}


def veth_drops() -> dict[str, int]:
    """The testbed's veth pair's drop counters that are not zero (ethtool -S),
    to tell a frame the veth dropped from one no program met."""
    out = {}
    for ns, dev in (("vz-gen", "gen-dut"), ("vz-dut", "dut-gen")):
        done = subprocess.run(in_netns(ns, ["ethtool", "-S", dev]), capture_output=True,
                              text=True, check=False)  # fmt: skip
        for line in done.stdout.splitlines():
            name, _, value = line.strip().partition(": ")
            if ("drop" in name or "err" in name or "full" in name) and value not in ("", "0"):
                out[f"{dev} {name}"] = int(value)
    return out


def ctl(*args: str) -> str:
    done = subprocess.run(in_netns("vz-dut", veloz_argv("ctl", *args)), capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, f"veloz ctl {' '.join(args)}: {done.stderr}"
    return done.stdout


def stats() -> dict:
    return json.loads(ctl("stats", "--json"))


def status() -> dict:
    done = subprocess.run(veloz_argv("status", "--json"), capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def ports_of(nf: str) -> list[str]:
    return list(DUT_PORTS) if nf == "router" else ["dut-gen"]


def run_argv(nf: str, backend: str, cfg: Path, *extra: str) -> list[str]:
    ifaces = [a for p in ports_of(nf) for a in ("--iface", p)]
    return in_netns("vz-dut", veloz_argv("run", nf, "--backend", backend, *ifaces, "--config",
                                         str(cfg), "--json", *extra))  # fmt: skip


def records() -> list[Path]:
    ino = os.stat("/run/netns/vz-dut").st_ino
    return [PERSIST_DIR / f"net{ino}-{p}.json" for p in DUT_PORTS
            if (PERSIST_DIR / f"net{ino}-{p}.json").exists()]  # fmt: skip


@pytest.fixture
def leftovers(testbed) -> Iterator[list[Runner]]:
    """The runs a test starts; whatever they leave is removed at the end."""
    runs: list[Runner] = []
    try:
        yield runs
    finally:
        for r in runs:
            if r.proc.poll() is None:
                r.proc.kill()
            r.proc.communicate(timeout=20)
        for port in DUT_PORTS:
            for off in ("xdpgeneric", "xdpdrv"):
                subprocess.run(["ip", "-n", "vz-dut", "link", "set", "dev", port, off, "off"],
                               check=False, capture_output=True)  # fmt: skip
        for path in records():
            path.unlink()


def start(runs: list[Runner], argv: list[str]) -> Runner:
    runner = Runner(argv, attach_timeout=60)
    runs.append(runner)
    return runner


def generate(*args: str) -> threading.Thread:
    """vz-gen's generator in the background; its record lands in .sent."""
    sent: list[dict] = []
    argv = veloz_argv("gen", "--iface", "gen-dut", "--json", *args)
    t = threading.Thread(target=lambda: sent.append(run_json(in_netns("vz-gen", argv), 180)))
    t.sent = sent  # type: ignore[attr-defined]
    t.start()
    return t


def send(count: int) -> int:
    """Frames from vz-gen to vz-dut's address, at 20k a second; how many left."""
    argv = veloz_argv("gen", "--iface", "gen-dut", "--json", "--count", str(count), "--rate", "20k",
                      "--dst-ip", DUT_IP)  # fmt: skip
    record = run_json(in_netns("vz-gen", argv), 60)
    assert record["xmit"] == count, record
    return record["xmit"]


def gen_sent(t: threading.Thread) -> int:
    """The frames the generator put on the wire ("xmit"): when lb's frames
    come back into vz-gen at the same rate, the kernel takes fewer than the
    generator offered ("sent"); those never left, so no NF could lose them."""
    t.join(timeout=180)
    assert t.sent, "the generator failed"  # type: ignore[attr-defined]
    record = t.sent[0]  # type: ignore[attr-defined]
    assert record["sent"] == FRAMES and record["xmit"] >= FRAMES // 2, record
    return record["xmit"]


def take_over(
    runs: list[Runner], old: Runner, argv: list[str], gen: threading.Thread,
    traffic: Callable[[], int],
) -> Runner:  # fmt: skip
    """Once the paced traffic is under way through the old run, start the
    new one with --take-over; the old one leaves without detaching. The old
    run's summary and stderr are kept (old.summary, old.stderr)."""
    base = traffic()
    wait_until(traffic, 30, until=lambda n: n >= base + UNDER_WAY, interval=0.02,
               what="the paced traffic under way")  # fmt: skip
    new = start(runs, [*argv, "--take-over"])
    assert new.attached["adopted"] is True, new.attached
    # the swap happened while frames were still coming
    assert gen.is_alive(), "the traffic ended before the new run attached"
    out, err = old.proc.communicate(timeout=30)
    assert old.proc.returncode == 0, err
    assert "handed over" in err, err
    summaries = [json.loads(x) for x in out.splitlines() if x.strip() and '"summary"' in x]
    assert summaries, out
    old.summary, old.stderr = summaries[-1], err  # type: ignore[attr-defined]
    return new


def stop_detaches(runner: Runner, nf: str) -> None:
    """A run without --persist (the adopted one here) detaches on stop."""
    runner.stop()
    for port in ports_of(nf):
        assert not xdp_attached("vz-dut", port), port
    assert records() == []


# ---- kill -9 of a persistent ddos ---------------------------------------------


def test_kill_9_of_a_persistent_ddos_keeps_dropping(leftovers, tmp_path):
    cfg = tmp_path / "ddos.toml"
    cfg.write_text(DDOS_CONFIG)
    first = start(leftovers, run_argv("ddos", "xdp", cfg, "--persist"))
    sent = send(2000)
    wait_until(lambda: stats()["counters"]["rule_dropped"], 10, until=lambda n: n >= sent,
               what=f"{sent} frames dropped by the rule")  # fmt: skip
    before = stats()["counters"]["rule_dropped"]
    assert before == sent

    first.proc.kill()
    first.proc.communicate(timeout=20)
    assert xdp_attached("vz-dut", "dut-gen")
    st = status()
    mine = [a for a in st["adoptable"] if a["netns"] == "vz-dut" and a["iface"] == "dut-gen"]
    assert len(mine) == 1 and mine[0]["nf"] == "ddos" and mine[0]["ports"] == ["dut-gen"], st
    assert mine[0]["pid"] == first.proc.pid and mine[0]["since"] > 0
    assert not [s for s in st["stale"] if "dut-gen" in s["what"] and "vz-dut" in s["what"]]
    text = subprocess.run(veloz_argv("status"), capture_output=True, text=True, timeout=60,
                          check=True).stdout  # fmt: skip
    assert "adoptable: " in text and "ddos on dut-gen in vz-dut" in text, text

    # no veloz process at all: the attack still never reaches vz-dut's kernel
    no_ports0 = udp_no_ports()
    attack = send(5000)
    assert attack == 5000
    assert settle(udp_no_ports, lambda n: n > no_ports0, timeout=2) == no_ports0

    # the next start adopts it (no flag): the counters went on meanwhile
    second = start(leftovers, run_argv("ddos", "xdp", cfg))
    assert second.attached["adopted"] is True, second.attached
    assert stats()["counters"]["rule_dropped"] == before + attack
    rules = json.loads(ctl("rule", "list", "--json"))
    assert [r["src"] for r in rules] == [f"{GEN_IP}/32"], rules
    assert rules[0]["packets"] == before + attack
    stop_detaches(second, "ddos")


def test_without_persist_a_stop_detaches(leftovers, tmp_path):
    cfg = tmp_path / "ddos.toml"
    cfg.write_text(DDOS_CONFIG)
    runner = start(leftovers, run_argv("ddos", "xdp", cfg))
    assert runner.attached["adopted"] is False and runner.attached["persist"] is False
    assert len(records()) == 1  # a successor could still --take-over
    stop_detaches(runner, "ddos")


# ---- --take-over under paced traffic --------------------------------------------


def upgrade_ddos(runs: list[Runner], backend: str, cfg: Path) -> None:
    old = start(runs, run_argv("ddos", backend, cfg, "--persist", "--interval", "0.2"))
    ctl("rule", "add", "drop", "--src", "198.18.201.0/24")  # state the config does not hold
    rules0 = json.loads(ctl("rule", "list", "--json"))
    dropped0, no_ports0 = stats()["counters"]["rule_dropped"], udp_no_ports()

    gen = generate("--count", str(FRAMES), "--rate", RATE, "--flows", "64", "--dst-ip", DUT_IP)
    new = take_over(runs, old, run_argv("ddos", backend, cfg), gen,
                    lambda: stats()["counters"]["rule_dropped"])  # fmt: skip
    sent = gen_sent(gen)
    dropped = wait_until(lambda: stats()["counters"]["rule_dropped"] - dropped0, 10,
                         until=lambda n: n >= sent, what=f"{sent} frames dropped")  # fmt: skip
    # every frame met a program: one that met none would reach the kernel
    assert dropped == sent
    assert settle(udp_no_ports, lambda n: n > no_ports0, timeout=1) == no_ports0
    rules = json.loads(ctl("rule", "list", "--json"))
    counts = ("packets", "bytes", "dropped")
    assert [{k: v for k, v in r.items() if k not in counts} for r in rules] == [
        {k: v for k, v in r.items() if k not in counts} for r in rules0
    ]
    assert rules[0]["packets"] == rules0[0]["packets"] + sent  # counting on, not reset
    stop_detaches(new, "ddos")


def lb_frames(sports: range) -> list:
    gen, dut = tb.endpoint("gen-dut"), tb.endpoint("dut-gen")
    return [Ether(src=gen.mac, dst=dut.mac) / IP(src=GEN_IP, dst=LB_VIP)
            / UDP(sport=s, dport=9) / Raw(b"persist") for s in sports]  # fmt: skip


def lb_flows(tmp_path: Path, name: str, sports: range) -> dict[int, str]:
    """Each flow's backend, as the IPIP frames lb sends back to vz-gen say."""
    pcap = tmp_path / f"{name}.pcap"
    wrpcap(str(pcap), lb_frames(sports))
    cap = Capture("vz-gen", "gen-dut", tmp_path / f"{name}.out.pcap", "ip proto 4")
    send_from_gen(pcap)
    got = cap.stop(len(sports))
    out = {p[IP].payload[UDP].sport: p[IP].dst for p in got}
    assert sorted(out) == list(sports), out
    return out


def ring_backends(sports: range) -> dict[int, str]:
    """Where VIP 0's ring alone (no connection table) would send each flow."""
    path = Path(ctl_path())
    with Ctl(path) as c:
        ring = lb.read_ring(c, 0)
        out = {}
        for s in sports:
            key = lb.flow_key(ipaddress.ip_address(GEN_IP), ipaddress.ip_address(LB_VIP), s, 9, 17)
            raw = c.lookup(lb.BACKENDS, lb.u32(ring[lb.flow_slot(key)]))
            out[s] = str(lb.Backend.unpack(raw or b"").address)  # type: ignore[union-attr]
    return out


def ctl_path() -> str:
    ino = os.stat("/run/netns/vz-dut").st_ino
    return f"{os.environ.get('VELOZ_CTL_DIR', '/run/veloz/ctl')}/net{ino}-dut-gen.sock"


def lb_vip_frames() -> int:
    with Ctl(Path(ctl_path())) as c:
        return lb._summed(c, c.maps(), lb.VIP_STATS).get(0, (0, 0))[0]


def upgrade_lb(runs: list[Runner], backend: str, cfg: Path, tmp_path: Path) -> None:
    old = start(runs, run_argv("lb", backend, cfg, "--persist", "--interval", "0.2"))
    assert OTHER_MAC in cfg.read_text()
    sports = range(42000, 42064)
    before = lb_flows(tmp_path, "before", sports)
    # a third backend moves ring slots; the connection table keeps the flows
    ctl("backend", "add", LB_VIP, "9", "udp", "198.18.1.4")
    moved = [s for s, b in ring_backends(sports).items() if b != before[s]]
    assert moved, "no flow's ring slot moved: the check below would prove nothing"
    vips0 = ctl("vip", "list", "--json")
    frames0, tx0 = lb_vip_frames(), stats()["verdicts"]["tx"]["packets"]
    drops0 = veth_drops()

    gen = generate("--count", str(FRAMES), "--rate", RATE, "--flows", "64", "--dst-ip", LB_VIP)
    new = take_over(runs, old, run_argv("lb", backend, cfg), gen, lb_vip_frames)
    sent = gen_sent(gen)
    got = settle(lambda: lb_vip_frames() - frames0, lambda n: n >= sent)
    assert got == sent, (got, sent, drops0, veth_drops())
    assert stats()["verdicts"]["tx"]["packets"] - tx0 == sent  # each one sent to a backend
    assert ctl("vip", "list", "--json") == vips0  # the config's VIPs not applied again
    assert lb_flows(tmp_path, "after", sports) == before  # flow by flow
    stop_detaches(new, "lb")


def upgrade_router(runs: list[Runner], backend: str, cfg: Path) -> None:
    # a run without --persist is taken over too (through libxdp's dispatcher)
    old = start(runs, run_argv("router", backend, cfg, "--interval", "0.2"))
    ctl("route", "add", "198.18.144.0/24", "via", "198.18.1.2", "--port", "dut-sink")
    routes0 = ctl("route", "list", "--json")
    sink_argv = veloz_argv("gen", "--sink", "--replace", "--iface", "sink-dut", "--json")
    with Runner(in_netns("vz-sink", sink_argv), what="the sink") as sink:
        gen = generate("--count", str(FRAMES), "--rate", RATE, "--dsts", "64", "--dst-range",
                       TRAFFIC)  # fmt: skip
        new = take_over(runs, old, run_argv("router", backend, cfg), gen, nf_packets)
        sent = gen_sent(gen)
        settle(lambda: stats()["counters"]["forwarded"], lambda n: False, timeout=10)
        arrived = sink.stop()
    assert arrived["received"] == sent, arrived
    assert ctl("route", "list", "--json") == routes0
    stop_detaches(new, "router")


@pytest.mark.parametrize("backend", ["xdp", "xdp-generic"])
@pytest.mark.parametrize("nf", ["ddos", "lb", "router"])
def test_take_over_loses_no_frame(leftovers, tmp_path, nf, backend):
    cfg = tmp_path / f"{nf}.toml"
    cfg.write_text(CONFIGS[nf])
    if nf == "ddos":
        upgrade_ddos(leftovers, backend, cfg)
    elif nf == "lb":
        upgrade_lb(leftovers, backend, cfg, tmp_path)
    else:
        upgrade_router(leftovers, backend, cfg)


def test_a_different_nf_is_not_adopted(leftovers, tmp_path):
    cfg = tmp_path / "ddos.toml"
    cfg.write_text(DDOS_CONFIG)
    first = start(leftovers, run_argv("ddos", "xdp", cfg, "--persist"))
    first.proc.send_signal(signal.SIGTERM)
    _, err = first.proc.communicate(timeout=20)
    assert first.proc.returncode == 0 and "left attached" in err, err
    prog = status()
    done = subprocess.run(in_netns("vz-dut", veloz_argv("run", "drop", "--backend", "xdp",
                                                        "--iface", "dut-gen", "--take-over")),
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "not adopted, nothing changed" in lines[0], done.stderr
    after = status()
    assert [a["prog_id"] for a in after["adoptable"] if a["netns"] == "vz-dut"] == [
        a["prog_id"] for a in prog["adoptable"] if a["netns"] == "vz-dut"
    ]
