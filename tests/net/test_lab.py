"""The lab on the testbed: the sink's counts, one trial's balance, and a short
`veloz bench` from the command line to its results and report."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from scapy.all import IP, TCP, UDP, IPv6
from wire import Capture

from veloz.core import paths
from veloz.core.proc import Runner, in_netns, run_json, veloz_argv
from veloz.lab import trial
from veloz.testbed import status

BACKENDS = ("xdp", "xdp-generic", "afxdp", "dpdk", "linux")


def far_end_program(netns: str, ifname: str) -> str | None:
    for i in status()["interfaces"]:
        if (i["netns"], i["ifname"]) == (netns, ifname):
            return (i["xdp"] or {}).get("prog_name")
    raise AssertionError(f"{netns}/{ifname} not in the testbed")


def test_sink_counts_every_frame_and_measures_latency(testbed):
    # tx on xdp sends every frame back to vz-gen, where the sink counts it
    r = trial.measure("tx", "xdp", rate=200_000, seconds=None, count=40_000)
    assert r["sent"] == r["done"] == r["counted"] == 40_000
    assert r["lost"] == 0 and r["reordered"] == 0
    lat = r["latency_ns"]
    assert lat["count"] == 40_000 - r["duplicates"]
    assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"] <= lat["max"]
    assert sum(c for _, c in r["histogram"]) == lat["count"]
    # the testbed's receive program is back where the sink was
    assert far_end_program("vz-gen", "gen-dut") == "vz_tb_rx"


def test_sink_alone_reports_nothing_lost_and_refuses_sending_options(testbed):
    with Runner(in_netns("vz-sink", veloz_argv("gen", "--sink", "--iface", "sink-dut",
                                                "--json")), what="the sink") as sink:  # fmt: skip
        assert far_end_program("vz-sink", "sink-dut") == "vz_xdp_sink"
        got = sink.stop()
    assert got["received"] == 0 and got["latency_ns"]["count"] == 0
    assert far_end_program("vz-sink", "sink-dut") == "vz_tb_rx"
    bad = subprocess.run(veloz_argv("gen", "--sink", "--iface", "sink-dut", "--count", "5"),
                         capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert bad.returncode == 2 and "a sending option" in bad.stderr


def test_count_only_sink_lets_address_resolution_through(testbed):
    # udp-throughput's sink: a sender that must resolve the sink's address
    # through it (veloz's direct mode: a new process, an empty ARP table)
    # gets its answer, and every datagram counts
    env = dict(os.environ, VZ_MODE="direct", VZ_DIRECT_IFACE="dut-gen",
               VZ_DIRECT_ADDR="198.18.0.3/24")  # fmt: skip
    argv = veloz_argv("gen", "--sink", "--replace", "--count-only", "--iface", "gen-dut", "--json")
    with Runner(in_netns("vz-gen", argv), what="the sink") as sink:
        done = subprocess.run(in_netns("vz-dut", [str(paths.tool("veloz-pktgen")), "--stack",
                                                  "veloz", "--bind", "198.18.0.3:0", "--connect",
                                                  "198.18.0.1:9", "--size", "64", "--count",
                                                  "2000", "--rate", "100000", "--json"]),
                              env=env, capture_output=True, text=True, timeout=60,
                              check=True)  # fmt: skip
        got = sink.stop()
    assert json.loads(done.stdout.splitlines()[-1])["sent"] == 2000
    # the ARP exchange passed, uncounted; a few frames the hosts send on
    # their own (MLD reports, behind a hop-by-hop header) are frames too
    assert 2000 <= got["received"] <= 2010, got
    assert far_end_program("vz-gen", "gen-dut") == "vz_tb_rx"


def test_sink_sees_the_generator_ceiling_without_loss(testbed):
    r = trial.measure("drop", "generator", rate=0, seconds=0.5)
    assert r["sent"] > 0 and r["done"] == r["sent"] and r["counted"] is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_trial_balances_on_every_backend(testbed, backend):
    r = trial.measure("drop", backend, rate=300_000, seconds=None, count=30_000)
    assert r["sent"] == 30_000
    missed = r["rx_missed"] or 0
    assert r["counted"] + missed == r["sent"], r
    assert r["cpu_busy"] > 0 and r["offered_pps"] > 0


def test_bench_from_the_command_line_writes_results_and_report(testbed, tmp_path):
    done = subprocess.run(
        veloz_argv("bench", "drop", "--backends", "xdp,linux", "--trials", "2", "--seconds",
                   "0.3", "--steps", "1", "--out", str(tmp_path)),
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "drop.json").read_text())
    assert result["environment"]["kernel"] and result["settings"]["trials"] == 2
    peaks = [r for r in result["records"] if r["kind"] == "peak"]
    # interleaved: trial 0 of every backend before trial 1 of any
    assert [(r["trial"], r["backend"]) for r in peaks] == [
        (t, b) for t in (0, 1) for b in ("generator", "xdp", "linux")
    ]
    for r in result["records"]:
        if r["kind"] in ("peak", "search"):
            assert r["sent"] == r["done"] + r["lost"]
    titles = [s["title"] for s in result["sections"]]
    assert "drop, 64 B: peak rate (generator unpaced)" in titles
    peak = result["sections"][0]
    assert [row[0] for row in peak["table"]["rows"]] == ["generator", "xdp", "linux"]
    assert (tmp_path / "report.html").exists()
    assert f"report: {tmp_path / 'report.html'}" in done.stdout


def test_bench_run_json_is_usable_by_hand(testbed):
    # what a user would type: the generator's JSON has what the lab reads
    sent = run_json(in_netns("vz-gen", trial.gen_argv("drop", 64, 100_000, None, 1000, 4)), 60)
    assert sent["sent"] == 1000 and sent["flows"] == 4


@pytest.mark.parametrize("afxdp", [False, True], ids=["live-frames", "afxdp"])
@pytest.mark.parametrize("ipv6", [False, True], ids=["ipv4", "ipv6"])
@pytest.mark.parametrize("tcp", [False, True], ids=["udp", "tcp"])
def test_generator_templates_are_valid_on_the_wire(testbed, tmp_path, ipv6, tcp, afxdp):
    flags = (["--ipv6"] if ipv6 else []) + (["--tcp"] if tcp else [])
    flags += ["--afxdp"] if afxdp else []
    cap = Capture("vz-dut", "dut-gen", tmp_path / "gen.pcap", "ip or ip6")
    run_json(in_netns("vz-gen", veloz_argv("gen", "--iface", "gen-dut", "--json", "--count", "6",
                                           "--rate", "1000", "--flows", "3", "--size", "200",
                                           *flags)), 60)  # fmt: skip
    frames = [f for f in cap.stop() if (IPv6 if ipv6 else IP) in f]
    assert len(frames) == 6
    l4 = TCP if tcp else UDP
    for n, f in enumerate(frames):
        assert len(f) == 200 and l4 in f and f[l4].dport == 9
        assert f[l4].sport == 1024 + n % 3
        assert int.from_bytes(bytes(f[l4].payload)[:8], "little") == n  # sequence number
        sent = f[l4].chksum
        if l4 is UDP and not ipv6:
            assert sent == 0  # none: allowed over IPv4, and the generator's choice
            continue
        again = f.copy()
        del again[l4].chksum  # scapy computes it afresh from the bytes
        assert again.__class__(bytes(again))[l4].chksum == sent


def test_sink_counts_ipv6_tcp_frames_too(testbed):
    argv = veloz_argv("gen", "--sink", "--iface", "dut-gen", "--json")
    with Runner(in_netns("vz-dut", argv), what="the sink") as sink:
        gen = veloz_argv("gen", "--iface", "gen-dut", "--json", "--count", "1000", "--rate",
                         "100k", "--ipv6", "--tcp", "--size", "128")  # fmt: skip
        run_json(in_netns("vz-gen", gen), 60)
        got = sink.stop()
    assert got["received"] == got["unique"] == got["latency_ns"]["count"] == 1000
    assert got["reordered"] == 0


def test_afxdp_generator_counts_exactly_what_it_sent(testbed):
    argv = veloz_argv("gen", "--sink", "--iface", "dut-gen", "--json")
    with Runner(in_netns("vz-dut", argv), what="the sink") as sink:
        gen = veloz_argv("gen", "--iface", "gen-dut", "--json", "--afxdp", "--count", "50000",
                         "--rate", "200k", "--flows", "8")  # fmt: skip
        sent = run_json(in_netns("vz-gen", gen), 60)
        got = sink.stop()
    assert sent["sent"] == sent["xmit"] == 50_000
    assert got["received"] == got["unique"] == 50_000 and got["reordered"] == 0
