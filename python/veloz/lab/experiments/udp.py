"""UDP sockets on veloz against kernel sockets, over the same veth (UDPDK's
two experiments).

udpd owns 198.18.0.3 on vz-dut's dut-gen for the whole experiment, beside
the kernel's 198.18.0.2 on the same interface. The application under test
runs in vz-dut, once on veloz's sockets (libveloz-sock, through udpd) and
once on the kernel's, interleaved within each trial; the other end is
always the same kernel socket program in vz-gen, so only the DUT's stack
differs between the arms.

  udp-latency: veloz-pingpong echoes on the DUT; veloz-pingpong --client in
    vz-gen sends one datagram, waits for its echo, and sends the next. Round
    trip mean, standard deviation and percentiles, per payload size.
  udp-throughput: veloz-pktgen on the DUT sends as fast as it can to a
    discard port in vz-gen; what arrived is read from gen-dut's receive
    counter. Datagrams per second, per payload size.

This machine has 2 CPUs: udpd polls one of them, and the application, the
client and the kernel's softirq share the rest, where UDPDK gave its poller
and each application a core of their own on a 10G NIC.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator

from veloz import paths
from veloz.lab import summary
from veloz.proc import Runner, in_netns, veloz_argv

PAYLOADS = (18, 64, 512, 1472)  # UDPDK's range
STACKS = ("veloz", "kernel")
UDPD_IP, KERNEL_IP, GEN_IP = "198.18.0.3", "198.18.0.2", "198.18.0.1"
SOCKET = "/run/veloz/udpd/lab.sock"
PORT = 7000
PINGS = 2000  # round trips per run
WARMUP = 200


@contextlib.contextmanager
def running_udpd() -> Iterator[Runner]:
    """udpd on dut-gen for the experiment's length; stopped whatever happens.
    Its counter lines wait in a pipe read only at the end: one a minute, or
    within a few minutes udpd would block on the full pipe and stop serving."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(f'interface = "dut-gen"\nipv4 = "{UDPD_IP}/24"\nsocket = "{SOCKET}"\n')
    try:
        argv = veloz_argv("udpd", "--config", f.name, "--json", "--interval-ms", "60000")
        with Runner(in_netns("vz-dut", argv), attach_timeout=30, what="udpd") as r:
            yield r
    finally:
        os.unlink(f.name)


def _env() -> dict[str, str]:
    return {**os.environ, "VZ_UDPD_SOCKET": SOCKET}


def _local_ip(stack: str) -> str:
    return UDPD_IP if stack == "veloz" else KERNEL_IP


@contextlib.contextmanager
def _echo_server(stack: str) -> Iterator[None]:
    argv = [str(paths.tool("veloz-pingpong")), "--server", "--stack", stack,
            "--bind", f"{_local_ip(stack)}:{PORT}"]  # fmt: skip
    proc = subprocess.Popen(in_netns("vz-dut", argv), env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        time.sleep(0.3)
        if proc.poll() is not None:
            raise RuntimeError(f"the {stack} echo server failed: {proc.communicate()[1].strip()}")
        yield
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def ping(stack: str, payload: int, count: int = PINGS) -> dict:
    """One run of round trips from vz-gen to an echo server on `stack`."""
    with _echo_server(stack):
        argv = [str(paths.tool("veloz-pingpong")), "--client", "--stack", "kernel",
                "--connect", f"{_local_ip(stack)}:{PORT}", "--size", str(payload),
                "--count", str(count), "--warmup", str(WARMUP), "--json"]  # fmt: skip
        done = subprocess.run(in_netns("vz-gen", argv), capture_output=True, text=True,
                              timeout=120, check=True)  # fmt: skip
    out = json.loads(done.stdout.strip().splitlines()[-1])
    rtt = out["rtt_us"]
    return {
        "stack": stack, "payload": payload, "sent": out["sent"], "received": out["received"],
        "lost": out["lost"], **{f"rtt_{k}_us": rtt[k] for k in
                                ("mean", "stddev", "p50", "p90", "p99", "p999", "max")},
    }  # fmt: skip


def _rx_packets(netns: str, ifname: str) -> int:
    path = f"/sys/class/net/{ifname}/statistics/rx_packets"
    return int(subprocess.run(in_netns(netns, ["cat", path]), capture_output=True, text=True,
                              check=True).stdout)  # fmt: skip


def blast(stack: str, payload: int, seconds: float) -> dict:
    """veloz-pktgen on the DUT, flat out to vz-gen's discard port."""
    before = _rx_packets("vz-gen", "gen-dut")
    argv = [str(paths.tool("veloz-pktgen")), "--stack", stack, "--connect", f"{GEN_IP}:9",
            "--bind", f"{_local_ip(stack)}:0", "--size", str(payload),
            "--duration", f"{seconds:g}", "--json"]  # fmt: skip
    done = subprocess.run(in_netns("vz-dut", argv), env=_env(), capture_output=True, text=True,
                          timeout=seconds + 60, check=True)  # fmt: skip
    time.sleep(0.2)
    arrived = _rx_packets("vz-gen", "gen-dut") - before
    out = json.loads(done.stdout.strip().splitlines()[-1])
    secs = out.get("seconds") or seconds
    return {"stack": stack, "payload": payload, "sent": out.get("sent"), "arrived": arrived,
            "seconds": secs, "rate_pps": arrived / secs,
            "gbps": arrived * (payload + 42) * 8 / secs / 1e9}  # fmt: skip


def _run_arms(ctx, experiment: str, measure: Callable[[str, int], dict]) -> None:
    """One udpd for the whole experiment; in each trial every payload on both
    stacks, interleaved, one record each (measure(stack, payload))."""
    with running_udpd():
        for t in range(ctx.settings["trials"]):
            for payload in PAYLOADS:
                for stack in STACKS:
                    ctx.record(f"{stack} {payload} B", measure(stack, payload), trial=t,
                               experiment=experiment)  # fmt: skip


class UdpLatency:
    name = "udp-latency"
    title = "UDP round trips: veloz sockets against kernel sockets"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(PAYLOADS) * len(STACKS)

    def run(self, ctx) -> None:
        _run_arms(ctx, self.name, ping)

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        out = []
        for metric, name in (("rtt_mean_us", "mean"), ("rtt_stddev_us", "standard deviation"),
                             ("rtt_p99_us", "p99")):  # fmt: skip
            sec = summary.rate_section(records, f"Round-trip {name} (µs) by payload",
                                       metric=metric, unit=1.0, unit_name="µs",
                                       category="stack", series="payload",
                                       baseline="kernel")  # fmt: skip
            sec["text"] = ("Median over trials, 95% bootstrap CI; ratio to kernel sockets "
                           f"(below 1: veloz faster). {PINGS} round trips per run after "
                           f"{WARMUP} of warm-up. UDPDK: 13.92 ± 0.74 µs against "
                           "116.57 ± 18.49 µs.")  # fmt: skip
            out.append(sec)
        return out


class UdpThroughput:
    name = "udp-throughput"
    title = "UDP send throughput: veloz sockets against kernel sockets"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(PAYLOADS) * len(STACKS)

    def run(self, ctx) -> None:
        _run_arms(
            ctx, self.name, lambda stack, payload: blast(stack, payload, ctx.settings["seconds"])
        )

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        sec = summary.rate_section(records, "Datagrams per second that arrived, by payload",
                                   metric="rate_pps", unit=1e6, unit_name="Mpps",
                                   category="stack", series="payload",
                                   baseline="kernel")  # fmt: skip
        sec["text"] = ("Median over trials, 95% bootstrap CI; ratio to kernel sockets. Counted "
                       "on arrival (gen-dut's receive counter), not as sent. UDPDK: up to 18x "
                       "at 64-byte frames.")  # fmt: skip
        return [sec]


UDP_LATENCY = UdpLatency()
UDP_THROUGHPUT = UdpThroughput()
