"""`veloz status` on the testbed: a live run as it is, then what a kill -9 left.

Status is asked from the host's namespace, as a user would: it must find the
run in vz-dut by itself. After the kill, each stale item's printed command is
run as printed, and must leave nothing behind.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from scapy.all import IP, UDP, Ether, Raw, wrpcap
from test_metrics import LB_CONFIG, LB_VIP, lb_expected
from wire import run_nf, send_from_gen, xdp_attached

from veloz import testbed as tb
from veloz.core.proc import veloz_argv
from waits import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def ours(stale: list[dict]) -> list[dict]:
    """The stale items in vz-dut: status sees the whole machine, where other
    tests may leave or make their own meanwhile."""
    ino = os.stat("/run/netns/vz-dut").st_ino
    return [s for s in stale if "vz-dut" in s["what"] or f"xdp-{ino}-" in s["what"]
            or "/run/veloz/udpd/test-udpd" in s["what"]]  # fmt: skip


def status() -> dict:
    done = subprocess.run(veloz_argv("status", "--json"), capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def our_run(st: dict, pid: int) -> dict | None:
    return next((r for r in st["runs"] if r["pid"] == pid), None)


def frames(n: int) -> list:
    gen, dut = tb.endpoint("gen-dut"), tb.endpoint("dut-gen")
    return [Ether(src=gen.mac, dst=dut.mac) / IP(src=gen.ipv4.split("/")[0], dst="198.18.1.1")
            / UDP(sport=41000 + i, dport=9) / Raw(b"status") for i in range(n)]  # fmt: skip


def test_status_of_a_live_run_then_of_its_kill_9(testbed, tmp_path: Path):
    started = time.monotonic()
    runner = run_nf("drop", "xdp")
    killed = False
    try:
        pid = runner.proc.pid  # `ip netns exec` and veloz both exec() into vz-xdp
        pcap = tmp_path / "in.pcap"
        wrpcap(str(pcap), frames(25))
        send_from_gen(pcap)
        # the run's counters reach status through its control socket
        st = wait_until(status, 20, until=lambda s: (r := our_run(s, pid)) and r["counters"]
                        and r["counters"]["drop"] >= 25, interval=0.2,
                        what="the run's counters in status")  # fmt: skip
        run = our_run(st, pid)
        assert (run["nf"], run["backend"], run["netns"]) == ("drop", "xdp", "vz-dut")
        assert run["counters"]["drop"] == run["counters"]["packets"]
        assert run["ctl"].endswith("-dut-gen.sock") and Path(run["ctl"]).exists()
        # since the process started, rounded to 0.1 s (scapy's start alone
        # took longer than that), and no longer than this test has run
        assert 0 < run["uptime_s"] <= time.monotonic() - started + 0.1, run
        assert run["workers"] >= 1
        port = run["ports"][0]
        assert port["iface"] == "dut-gen" and port["xdp_mode"] == "native"
        assert port["prog_id"] > 0 and any(n.startswith("vz_xdp_") for n in port["programs"])
        assert not [s for s in st["stale"] if "dut-gen" in s["what"]], st["stale"]
        text = subprocess.run(veloz_argv("status"), capture_output=True, text=True,
                              timeout=60, check=True).stdout  # fmt: skip
        assert "drop on xdp" in text and "netns vz-dut" in text and f"pid {pid}" in text

        runner.proc.kill()
        runner.proc.communicate(timeout=20)
        killed = True
        assert xdp_attached("vz-dut", "dut-gen")  # what a kill -9 leaves
        st = status()
        assert our_run(st, pid) is None
        kinds = {s["kind"] for s in st["stale"]}
        assert {"xdp", "socket", "lock"} <= kinds, st["stale"]
        xdp = [s for s in st["stale"] if s["kind"] == "xdp"]
        assert len(xdp) == 1 and "dut-gen" in xdp[0]["what"] and "vz-dut" in xdp[0]["what"]
        for item in st["stale"]:
            subprocess.run(shlex.split(item["remove"]), check=True, timeout=30)
        assert not xdp_attached("vz-dut", "dut-gen")
        assert ours(status()["stale"]) == []
        # and the interface is free again: a new run attaches without --replace
        again = subprocess.run(
            ["ip", "netns", "exec", "vz-dut", *veloz_argv("run", "drop", "--backend", "xdp",
             "--iface", "dut-gen", "--duration", "0.3", "--json")],
            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert again.returncode == 0, again.stderr
    finally:
        if not killed:
            runner.__exit__()
        else:  # a failed assertion above must not leave the program on the testbed
            subprocess.run(["ip", "-n", "vz-dut", "link", "set", "dev", "dut-gen", "xdp", "off"],
                           check=False)  # fmt: skip


def test_status_shows_lb_counters_and_dispatch_figures(testbed, tmp_path: Path):
    """lb's own counters, per VIP and backend, and the afxdp dispatcher's
    figures per worker, as status reads them through the control socket."""
    cfg = tmp_path / "lb.toml"
    cfg.write_text(LB_CONFIG)
    gen, dut = tb.endpoint("gen-dut"), tb.endpoint("dut-gen")
    sent = [Ether(src=gen.mac, dst=dut.mac) / IP(src=gen.ipv4.split("/")[0], dst=LB_VIP)
            / UDP(sport=44000 + i, dport=9) / Raw(b"lb") for i in range(40)]  # fmt: skip
    with run_nf("lb", "afxdp", "--config", str(cfg), "--workers", "2", "--dispatch",
                "rss-mod") as runner:  # fmt: skip
        pcap = tmp_path / "in.pcap"
        wrpcap(str(pcap), sent)
        send_from_gen(pcap)
        st = wait_until(status, 20, until=lambda s: (r := our_run(s, runner.proc.pid))
                        and r.get("lb") and r["lb"][0]["packets"] == 40
                        and sum(r["dispatch"]["frames_per_worker"]) == 40, interval=0.2,
                        what="lb's 40 frames in status")  # fmt: skip
        run = our_run(st, runner.proc.pid)
        text = subprocess.run(veloz_argv("status"), capture_output=True, text=True,
                              timeout=60, check=True).stdout  # fmt: skip
    vip = run["lb"][0]
    assert vip["vip"] == f"{LB_VIP}:9/udp"
    per = {b["address"]: b["packets"] for b in vip["backends"]}
    assert per == lb_expected(sent)
    assert run["nf_counters"]["ring"] == 40 and run["nf_counters"]["no_backend"] == 0
    d = run["dispatch"]
    assert d["policy"] == "rss-mod" and d["workers"] == 2 and d["ring_full"] == 0
    assert len(d["frames_per_worker"]) == len(d["in_flight_per_worker"]) == 2
    assert f"vip {LB_VIP}:9/udp: 40 frames" in text
    assert "dispatch rss-mod: " in text and "frames per worker: " in text
    assert "lb: malformed 0" in text
