"""`veloz bench udp-app` without the testbed: DNS queries in wire format,
dnsperf's report parsed, the experiment's order of work and its report."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from veloz.cli import build_parser
from veloz.core.errors import VelozError
from veloz.lab import bench, dnsapp
from veloz.lab.experiments import EXPERIMENTS, Context, udp_app

pytest.importorskip("scipy")

DNSPERF_OUT = """\
Statistics:

  Queries sent:         408119
  Queries completed:    408100 (100.00%)
  Queries lost:         19 (0.00%)

  Response codes:       NOERROR 340100 (83.33%), NXDOMAIN 68000 (16.67%)
  Average packet size:  request 36, response 331
  Run time (s):         2.000099
  Queries per second:   204049.195516

  Average Latency (s):  0.000264 (min 0.000008, max 0.009118)
  Latency StdDev (s):   0.000241
"""


def test_query_wire_format():
    q = dnsapp.query("www", "AAAA", 1232, qid=7)
    qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", q[:12])
    assert (qid, flags, qd, an, ns, ar) == (7, 0x0100, 1, 0, 0, 1)
    name = b"\x03www\x07example\x04test\x00"
    assert q[12 : 12 + len(name)] == name
    assert struct.unpack("!HH", q[12 + len(name) : 16 + len(name)]) == (28, 1)
    # the OPT RR: root name, type 41, the buffer size in the class field
    assert q[16 + len(name) :] == b"\x00" + struct.pack("!HHIH", 41, 1232, 0, 0)
    assert struct.unpack("!H", dnsapp.query("@", "SOA", None)[10:12]) == (0,)
    assert dnsapp.qname("example.org.") == "example.org."


def test_zone_holds_every_probe_name():
    zone = dnsapp.zone_text()
    for name, _, _ in dnsapp.PROBES:
        if name not in ("@", "nope", "example.org."):
            assert f"\n{name} IN" in zone
    assert "nope" not in zone  # the NXDOMAIN probe
    assert sum(len(t) for t in dnsapp.HUGE_TXT) > 1500  # fragmented on the wire
    assert dnsapp.rcode("5a178503" + "0" * 16) == 3 and dnsapp.rcode("") is None


def test_dnsperf_report_parsed_and_refused():
    got = dnsapp.parse_dnsperf(DNSPERF_OUT)
    assert got["qps"] == pytest.approx(204049.195516) and got["lost"] == 19
    assert got["lat_avg_s"] == 0.000264 and got["lat_max_s"] == 0.009118
    assert got["lat_stddev_s"] == 0.000241
    with pytest.raises(VelozError, match="printed no 'qps'"):
        dnsapp.parse_dnsperf(DNSPERF_OUT.replace("Queries per second", "QPS"))


class FakeLab:
    """knotd, the probe and dnsperf replaced: what ran, in what order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, differ: bool = False) -> None:
        self.calls: list[tuple] = []
        self.udpd_up = False
        self.differ = differ
        monkeypatch.setattr(udp_app.udp, "running_udpd", self.running_udpd)
        monkeypatch.setattr(dnsapp, "knotd", self.knotd)
        monkeypatch.setattr(dnsapp, "probe_in_gen", self.probe)
        monkeypatch.setattr(dnsapp, "dnsperf", self.dnsperf)
        self.arm = None

    @contextlib.contextmanager
    def running_udpd(self, gen: bool = True) -> Iterator[None]:
        assert not gen
        self.udpd_up = True
        try:
            yield
        finally:
            self.udpd_up = False

    @contextlib.contextmanager
    def knotd(self, arm: str, sock: str = "", *, udp_workers: int = 1) -> Iterator[None]:
        # udpd runs for the poller arms, and never beside direct mode
        assert self.udpd_up == (arm in ("veloz", "veloz-busy")), arm
        self.arm = arm
        self.calls.append(("knotd", arm, udp_workers))
        yield

    def probe(self, ip: str) -> list[str]:
        base = ["5a17", "", "5a19"]
        if self.differ and self.arm != "kernel":
            base[2] = "5a1a"
        return base

    def dnsperf(self, ip: str, seconds: float, outstanding: int, qfile: Path) -> dict:
        assert qfile.exists()
        self.calls.append(("dnsperf", self.arm, outstanding))
        lat = 50e-6 if self.arm == "kernel" else 40e-6
        return {"qps": 1000.0 * outstanding, "lost": 0.0, "lat_avg_s": lat,
                "lat_stddev_s": lat / 2, "lat_max_s": lat * 3, "sent": 1.0,
                "completed": 1.0, "lat_min_s": lat}  # fmt: skip


def test_arms_interleaved_answers_compared(monkeypatch):
    lab = FakeLab(monkeypatch, differ=True)
    ctx = Context(settings={"trials": 2, "seconds": 0.5, "udp_workers": 1})
    EXPERIMENTS["udp-app"].run(ctx)
    arms = ["kernel", "veloz", "veloz-busy", "veloz-direct"]
    assert [c[1] for c in lab.calls if c[0] == "knotd"] == arms * 2
    assert [c[2] for c in lab.calls if c[0] == "dnsperf"][:2] == [udp_app.LOADED, 1]
    assert [r["stack"] for r in ctx.records] == arms * 2
    kernel, veloz = ctx.records[:2]
    # two answered probes; veloz's second differs, the unanswered one is not "same"
    assert kernel["same_as_kernel"] == 2 and veloz["same_as_kernel"] == 1
    assert kernel["answered"] == 2 and len(kernel["answers"][0]) == 16
    sections = udp_app.UDP_APP.sections(ctx.records, ctx.settings)
    rows = {r[0]: r for r in sections[0]["table"]["rows"]}
    assert rows["veloz"][3] == f"2/{2 * udp_app.PROBES}"  # one per trial
    lat = next(s for s in sections if s["title"].startswith("Mean latency, one"))
    vrow = next(r for r in lat["table"]["rows"] if r[0] == "veloz")
    assert vrow[2] == pytest.approx(40.0) and vrow[-2] == pytest.approx(0.8)


def test_knot_conf_udp_workers():
    assert "    udp-workers: 1\n" in dnsapp.knot_conf(Path("/w"), "198.18.0.3")
    assert "    udp-workers: 4\n" in dnsapp.knot_conf(Path("/w"), "198.18.0.3", udp_workers=4)


def test_udp_workers_option_reaches_every_arm(monkeypatch):
    parse = build_parser().parse_args
    assert bench.settings_from(parse(["bench", "udp-app"]))["udp_workers"] == 1
    settings = bench.settings_from(parse(["bench", "udp-app", "--udp-workers", "2",
                                          "--trials", "1", "--seconds", "0.5"]))  # fmt: skip
    lab = FakeLab(monkeypatch)
    ctx = Context(settings=settings)
    EXPERIMENTS["udp-app"].run(ctx)
    assert [c[2] for c in lab.calls if c[0] == "knotd"] == [2] * 4
    assert {r["udp_workers"] for r in ctx.records} == {2}
    text = udp_app.UDP_APP.sections(ctx.records, settings)[0]["text"]
    assert text.startswith("knotd with 2 UDP worker threads.")


def test_flows_one_source_port_each_queries_in_rounds():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as srv:
        srv.bind(("127.0.0.1", 0))
        srv.settimeout(5)
        seen: list[int] = []

        def answer() -> None:
            for _ in range(6):
                q, peer = srv.recvfrom(512)
                seen.append(peer[1])
                srv.sendto(q[:2] + b"\x81\x80" + q[4:], peer)  # QR set, NOERROR

        t = threading.Thread(target=answer)
        t.start()
        got = dnsapp.flows("127.0.0.1", srv.getsockname()[1], 3, 2)
        t.join()
    rows = [line.split() for line in got]
    assert [int(r[1]) for r in rows] == [dnsapp.FLOW_ID + i for i in range(6)]
    assert [int(r[0]) for r in rows] == seen and len(set(seen)) == 3
    assert seen[:3] == seen[3:]  # round after round over the same flows
    assert all(bytes.fromhex(r[2])[:2] == int(r[1]).to_bytes(2, "big") for r in rows)
