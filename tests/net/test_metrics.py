"""`veloz run --metrics`: scrape a live run's endpoint on the testbed and parse it
with prometheus_client's own parser, as Prometheus would read it.

The endpoint listens on vz-dut's loopback, so it is scraped from inside
vz-dut; each namespace has its own loopback, so the port is free there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scapy.all import IP, UDP, Ether, Raw, wrpcap
from wire import run_nf, send_from_gen, xdp_attached

from veloz import testbed as tb
from veloz.proc import in_netns, veloz_argv

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

ADDR = "127.0.0.1:9464"
SCRAPE = ("import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
          "'http://' + sys.argv[1] + '/metrics', timeout=5).read().decode())")  # fmt: skip


def scrape(addr: str = ADDR) -> subprocess.CompletedProcess:
    return subprocess.run(in_netns("vz-dut", [sys.executable, "-c", SCRAPE, addr]),
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip


def samples(text: str) -> dict[str, list]:
    """Sample name -> its samples, parsed by prometheus_client."""
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("veloz_"), family.name
        for s in family.samples:
            if family.type == "counter":
                assert s.name == family.name + "_total" or s.name.endswith("_created"), s.name
            out.setdefault(s.name, []).append(s)
    return out


def frames(n: int) -> list:
    gen, dut = tb.endpoint("gen-dut"), tb.endpoint("dut-gen")
    return [Ether(src=gen.mac, dst=dut.mac) / IP(src=gen.ipv4.split("/")[0], dst="198.18.1.1")
            / UDP(sport=42000 + i, dport=9) / Raw(b"metrics") for i in range(n)]  # fmt: skip


@pytest.mark.parametrize("backend, extra", [
    ("xdp", ("--workers", "2", "--dispatch", "rss-mod")),
    ("afxdp", ()),
])  # fmt: skip
def test_scrape_parses_and_counts_what_was_sent(testbed, tmp_path: Path, backend, extra):
    runner = run_nf("drop", backend, "--metrics", ADDR, *extra)
    with runner:
        pcap = tmp_path / "in.pcap"
        sent = frames(30)
        wrpcap(str(pcap), sent)
        send_from_gen(pcap)
        deadline = time.monotonic() + 20
        while True:
            done = scrape()
            got = samples(done.stdout) if done.returncode == 0 else {}
            drops = sum(s.value for s in got.get("veloz_frames_total", [])
                        if s.labels["verdict"] == "drop")  # fmt: skip
            if drops >= 30 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert done.returncode == 0, done.stderr
        assert drops == 30, done.stdout
        assert [s.value for s in got["veloz_up"]] == [1.0]
        info = got["veloz_run_info"][0].labels
        assert info == {"nf": "drop", "backend": backend}
        others = [s for s in got["veloz_frames_total"] if s.labels["verdict"] != "drop"]
        assert others and all(s.value == 0 for s in others)
        workers = {s.labels["worker"] for s in got["veloz_frames_total"]}
        assert workers and {s.labels["worker"] for s in got["veloz_bytes_total"]} == workers
        assert sum(s.value for s in got["veloz_bytes_total"]) == sum(len(f) for f in sent)
        if backend == "xdp":
            # dispatch figures: every frame went to one of the 2 CPUs
            assert len(got["veloz_dispatch_frames_total"]) == 2
            assert sum(s.value for s in got["veloz_dispatch_frames_total"]) == 30
            assert got["veloz_dispatch_workers"][0].value == 2
            assert "veloz_rx_missed_frames_total" not in got  # XDP cannot tell: not a 0
        else:
            assert got["veloz_rx_missed_frames_total"][0].value >= 0
            assert sum(s.value for s in got["veloz_rx_frames_total"]) == 30
            kinds = {s.labels["error"] for s in got["veloz_errors_total"]}
            assert kinds == {"rx_invalid", "tx_failed", "pass_failed"}
        runner.stop()
    # the server goes with the run
    deadline = time.monotonic() + 10
    while scrape().returncode == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert scrape().returncode != 0


def test_busy_metrics_address_is_refused_before_attaching(testbed):
    hold = subprocess.Popen(in_netns("vz-dut", [sys.executable, "-c",
        "import socket, sys; s = socket.socket(); s.bind(('127.0.0.1', 9465)); s.listen(); "
        "print('ready', flush=True); sys.stdin.read()"]),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert hold.stdout is not None and hold.stdout.readline().strip() == "ready"
        done = subprocess.run(in_netns("vz-dut", veloz_argv(
            "run", "drop", "--backend", "xdp", "--iface", "dut-gen", "--json",
            "--metrics", "127.0.0.1:9465")), capture_output=True, text=True, timeout=60,
            check=False)  # fmt: skip
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and "cannot listen" in done.stderr, done.stderr
        assert not xdp_attached("vz-dut", "dut-gen")
    finally:
        hold.communicate(input="", timeout=10)
