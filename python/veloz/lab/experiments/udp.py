"""UDP sockets on veloz against kernel sockets, over the same veth, in
UDPDK's set-up: the same stack on both ends.

udp-latency runs two udpd pollers for the whole experiment: one owns
198.18.0.3 on vz-dut's dut-gen (beside the kernel's 198.18.0.2), the other
198.18.0.4 on vz-gen's gen-dut (beside the kernel's 198.18.0.1).
veloz-pingpong echoes in vz-dut and its client runs in vz-gen, both on the
arm's stack; the arms are interleaved within each trial:

  kernel       kernel sockets, blocking (poll, then recv): the baseline
  kernel-busy  kernel sockets, spinning on recv(MSG_DONTWAIT): the best a
               kernel user can do without privileges
  veloz        veloz poller mode, blocking calls (the poller busy-polls its
               port and rings, then sleeps after 1 ms idle)
  veloz-busy   veloz poller mode, SO_BUSY_POLL on both ends
               ($VZ_BUSY_POLL_US=BUSY_US): a blocking call spins on its
               ring before it sleeps
  veloz-direct veloz direct mode on both ends (VZ_MODE=direct): each
               application runs the stack on its own AF_XDP socket, no
               udpd (they are stopped for it: direct mode takes the
               interface), a blocking call spinning 200 µs before it sleeps

Round trip mean, standard deviation and percentiles per payload, and the
CPU each side used during the run (application, plus its udpd for veloz):
a percentage of one CPU. Kernel softirq work is nobody's process and is not
counted, so kernel arms' figures are a floor.

udp-throughput: veloz-pktgen on the DUT sends as fast as it can to a
discard port in vz-gen (only the DUT's udpd runs), where the lab's XDP
sink (count-only) counts and drops what arrives: the other server's NIC.
Datagrams per second, per payload, for send() one at a time and sendmmsg()
in bursts of BATCH, on each stack and in direct mode; and the sender's CPU
time per datagram (with its udpd's), softirq run in its context included.
veth delivers in the sender's softirq, so the sink's cost lands on the
sender too, equally for every arm; on veth, AF_XDP transmits in copy mode
(an skb per frame, as the kernel's own path), which bounds what any stack
above it can gain here.

This machine has 2 CPUs, shared with whatever else runs: each udpd
polls, and the applications and the kernel's softirq share the same two,
where UDPDK gave its poller and each application a core of their own on a
10G NIC. Spinning arms compete with each other for those 2 CPUs.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator

from veloz import paths
from veloz.lab import summary, topology
from veloz.proc import Runner, veloz_argv

PAYLOADS = (18, 64, 512, 1472)  # UDPDK's range
LATENCY_ARMS = ("kernel", "kernel-busy", "veloz", "veloz-busy", "veloz-direct")
THROUGHPUT_ARMS = ("kernel", "kernel-mmsg", "veloz", "veloz-mmsg", "veloz-direct",
                   "veloz-direct-mmsg")  # fmt: skip
DIRECT = "veloz-direct"  # arms starting so run without udpd
STACKS = LATENCY_ARMS
UDPD_IP, KERNEL_IP, GEN_IP = "198.18.0.3", "198.18.0.2", "198.18.0.1"
GEN_UDPD_IP = "198.18.0.4"
SOCKET = "/run/veloz/udpd/lab.sock"
GEN_SOCKET = "/run/veloz/udpd/lab-gen.sock"
PORT = 7000
PINGS = 2000  # round trips per run
WARMUP = 200
BUSY_US = 200  # SO_BUSY_POLL of the veloz-busy arm, as net.core.busy_read's usual 50..200
BATCH = 32  # datagrams per sendmmsg in the -mmsg arms
# pids of the running pollers, for their CPU time: "dut", "gen"
_UDPD_PIDS: dict[str, int] = {}


@contextlib.contextmanager
def _one_udpd(role: str, ip: str, socket: str) -> Iterator[Runner]:
    """udpd on one interface for the experiment's length; stopped whatever
    happens. Its counter lines wait in a pipe read only at the end: one a
    minute, or within a few minutes udpd would block on the full pipe."""
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        iface = topology.current().role(role).port.iface  # the one facing the other role
        f.write(f'interface = "{iface}"\nipv4 = "{ip}/24"\nsocket = "{socket}"\n')
    try:
        argv = veloz_argv("udpd", "--config", f.name, "--json", "--interval-ms", "60000")
        with Runner(topology.on(role, argv), attach_timeout=30, what=f"udpd on the {role}") as r:
            yield r
    finally:
        os.unlink(f.name)


@contextlib.contextmanager
def running_udpd(gen: bool = True) -> Iterator[Runner]:
    """udpd on the DUT, and (gen) on the generator's side too; yields the
    DUT's (its stop() gives udpd's summary)."""
    with contextlib.ExitStack() as stack:
        dut = stack.enter_context(_one_udpd("dut", UDPD_IP, SOCKET))
        _UDPD_PIDS["dut"] = dut.proc.pid
        if gen:
            _UDPD_PIDS["gen"] = stack.enter_context(
                _one_udpd("generator", GEN_UDPD_IP, GEN_SOCKET)
            ).proc.pid
        try:
            yield dut
        finally:
            _UDPD_PIDS.clear()


def _stack(arm: str) -> str:
    return "veloz" if arm.startswith("veloz") else "kernel"


def _env(arm: str, socket: str = SOCKET) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VZ_BUSY_POLL_US"}
    env["VZ_UDPD_SOCKET"] = socket
    if arm == "veloz-busy":
        env["VZ_BUSY_POLL_US"] = str(BUSY_US)
    if arm.startswith(DIRECT):
        dut = socket == SOCKET
        env.update(VZ_MODE="direct", VZ_DIRECT_IFACE="dut-gen" if dut else "gen-dut",
                   VZ_DIRECT_ADDR=f"{UDPD_IP if dut else GEN_UDPD_IP}/24")  # fmt: skip
    return env


def _local_ip(stack: str) -> str:
    return UDPD_IP if stack == "veloz" else KERNEL_IP


def _cpu_s(pid: int | None) -> float:
    """CPU seconds a live process's threads have run (the scheduler's
    nanoseconds: runs of a few ms are far below the 10 ms tick); 0 if
    unknown."""
    if not pid:
        return 0.0
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return total / 1e9


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@contextlib.contextmanager
def _echo_server(arm: str) -> Iterator[int]:
    stack = _stack(arm)
    argv = [str(paths.tool("veloz-pingpong")), "--server", "--stack", stack,
            "--bind", f"{_local_ip(stack)}:{PORT}"]  # fmt: skip
    if arm == "kernel-busy":
        argv.append("--busy-poll")
    proc = subprocess.Popen(topology.on("dut", argv), env=_env(arm), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        # the ready line ("echoing on ...") on stderr; `ip netns exec`
        # execs, so proc.pid is the server's own
        line = proc.stderr.readline() if proc.stderr else ""
        if "echoing" not in line:
            raise RuntimeError(f"the {arm} echo server failed: {line.strip()}")
        yield proc.pid
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def ping(arm: str, payload: int, count: int = PINGS) -> dict:
    """One run of round trips from vz-gen to an echo server in vz-dut, both
    on the arm's stack; the CPU each side used meanwhile."""
    stack = _stack(arm)
    with _echo_server(arm) as server:
        argv = [str(paths.tool("veloz-pingpong")), "--client", "--stack", stack,
                "--connect", f"{_local_ip(stack)}:{PORT}", "--size", str(payload),
                "--count", str(count), "--warmup", str(WARMUP), "--json"]  # fmt: skip
        if arm == "kernel-busy":
            argv.append("--busy-poll")
        pids = dict(_UDPD_PIDS) if stack == "veloz" else {}
        cpu0 = {k: _cpu_s(v) for k, v in pids.items()}
        srv0, kids0, t0 = _cpu_s(server), _children_cpu_s(), time.monotonic()
        done = subprocess.run(topology.on("generator", argv), env=_env(arm, GEN_SOCKET),
                              capture_output=True, text=True, timeout=120,
                              check=True)  # fmt: skip
        wall = time.monotonic() - t0
        client = _children_cpu_s() - kids0
        server_cpu = _cpu_s(server) - srv0
        udpd = {k: _cpu_s(v) - cpu0[k] for k, v in pids.items()}
    out = json.loads(done.stdout.strip().splitlines()[-1])
    rtt = out["rtt_us"]
    return {
        "stack": arm, "payload": payload, "sent": out["sent"], "received": out["received"],
        "lost": out["lost"], **{f"rtt_{k}_us": rtt[k] for k in
                                ("mean", "stddev", "p50", "p90", "p99", "p999", "max")},
        "cpu_dut_pct": 100 * (server_cpu + udpd.get("dut", 0.0)) / wall,
        "cpu_gen_pct": 100 * (client + udpd.get("gen", 0.0)) / wall,
        "cpu_udpd_pct": 100 * sum(udpd.values()) / wall,
    }  # fmt: skip


def blast(arm: str, payload: int, seconds: float) -> dict:
    """veloz-pktgen on the DUT, flat out to vz-gen's discard port, where the
    lab's XDP sink counts and drops every datagram. The receiving side then
    costs the same little for every arm: the kernel's receive path (ip_rcv,
    a route lookup, an ICMP port-unreachable per datagram) ran on the
    sender's CPU, since veth delivers in the sender's softirq, and capped
    every stack at the same rate; it measured vz-gen's kernel, not the
    sending stack. The sender's CPU time per datagram is recorded too."""
    stack = _stack(arm)
    argv = [str(paths.tool("veloz-pktgen")), "--stack", stack, "--connect", f"{GEN_IP}:9",
            "--bind", f"{_local_ip(stack)}:0", "--size", str(payload),
            "--duration", f"{seconds:g}", "--json"]  # fmt: skip
    if arm.endswith("-mmsg"):
        argv += ["--batch", str(BATCH)]
    sink_argv = veloz_argv("gen", "--sink", "--replace", "--count-only", "--iface", "gen-dut",
                           "--json")  # fmt: skip
    with Runner(topology.on("generator", sink_argv), what="the sink") as sink:
        udpd = _UDPD_PIDS.get("dut")
        udpd0, kids0 = _cpu_s(udpd), _children_cpu_s()
        done = subprocess.run(topology.on("dut", argv), env=_env(arm), capture_output=True,
                              text=True, timeout=seconds + 60, check=True)  # fmt: skip
        cpu_s = _children_cpu_s() - kids0 + _cpu_s(udpd) - udpd0
        time.sleep(0.2)  # the veth's last frames into the sink
        arrived = sink.stop()["received"]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    secs = out.get("elapsed_s") or seconds
    return {"stack": arm, "payload": payload, "sent": out.get("sent"), "arrived": arrived,
            "seconds": secs, "rate_pps": arrived / secs,
            "gbps": arrived * (payload + 42) * 8 / secs / 1e9,
            # the sender's (and its udpd's) CPU per datagram sent, softirq
            # run in its context included: what the datagram cost the DUT
            "cpu_ns_per_datagram": 1e9 * cpu_s / max(out.get("sent") or 0, 1)}  # fmt: skip


def _run_arms(ctx, experiment: str, arms: tuple[str, ...], gen_udpd: bool,
              measure: Callable[[str, int], dict]) -> None:  # fmt: skip
    """The pollers for the whole experiment; in each trial every payload on
    every arm, interleaved, one record each (measure(arm, payload))."""
    payloads = ctx.settings.get("udp_payloads") or PAYLOADS
    pollers = [a for a in arms if not a.startswith(DIRECT)]
    direct = [a for a in arms if a.startswith(DIRECT)]
    for t in range(ctx.settings["trials"]):
        # direct mode takes the interfaces: the pollers stop for it, and
        # start again for the next trial
        with running_udpd(gen_udpd):
            for payload in payloads:
                for arm in pollers:
                    ctx.record(f"{arm} {payload} B", measure(arm, payload), trial=t,
                               experiment=experiment)  # fmt: skip
        for payload in payloads:
            for arm in direct:
                ctx.record(f"{arm} {payload} B", measure(arm, payload), trial=t,
                           experiment=experiment)  # fmt: skip


class UdpLatency:
    name = "udp-latency"
    title = "UDP round trips: veloz sockets against kernel sockets"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(s.get("udp_payloads") or PAYLOADS) * len(LATENCY_ARMS)

    def run(self, ctx) -> None:
        _run_arms(ctx, self.name, LATENCY_ARMS, True, ping)

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        out = []
        for metric, name in (("rtt_mean_us", "mean"), ("rtt_stddev_us", "standard deviation"),
                             ("rtt_p50_us", "p50"), ("rtt_p99_us", "p99"),
                             ("rtt_p999_us", "p99.9")):  # fmt: skip
            sec = summary.rate_section(records, f"Round-trip {name} (µs) by payload",
                                       metric=metric, unit=1.0, unit_name="µs",
                                       category="stack", series="payload",
                                       baseline="kernel")  # fmt: skip
            sec["text"] = ("Median over trials, 95% bootstrap CI; ratio to kernel sockets "
                           f"(below 1: veloz faster). {PINGS} round trips per run after "
                           f"{WARMUP} of warm-up. UDPDK: 13.92 ± 0.74 µs against "
                           "116.57 ± 18.49 µs.")  # fmt: skip
            out.append(sec)
        for metric, side in (("cpu_dut_pct", "the echo server's side (vz-dut)"),
                             ("cpu_gen_pct", "the client's side (vz-gen)")):  # fmt: skip
            if not any(metric in r for r in records):
                continue
            sec = summary.rate_section(records, f"CPU used by {side}, % of one CPU",
                                       metric=metric, unit=1.0, unit_name="%",
                                       category="stack", series="payload",
                                       baseline="kernel")  # fmt: skip
            sec["text"] = ("The application's CPU time, plus its udpd's for veloz, over the "
                           "run's wall time. Kernel softirq time is not counted (it belongs to "
                           "no process), so kernel figures are a floor.")  # fmt: skip
            out.append(sec)
        return out


class UdpThroughput:
    name = "udp-throughput"
    title = "UDP send throughput: veloz sockets against kernel sockets"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(s.get("udp_payloads") or PAYLOADS) * len(THROUGHPUT_ARMS)

    def run(self, ctx) -> None:
        _run_arms(ctx, self.name, THROUGHPUT_ARMS, False,
                  lambda arm, payload: blast(arm, payload, ctx.settings["seconds"]))  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        sec = summary.rate_section(records, "Datagrams per second that arrived, by payload",
                                   metric="rate_pps", unit=1e6, unit_name="Mpps",
                                   category="stack", series="payload",
                                   baseline="kernel")  # fmt: skip
        sec["text"] = ("Median over trials, 95% bootstrap CI; ratio to kernel sockets. Counted "
                       "on arrival (an XDP sink on gen-dut), not as sent. UDPDK: up to 18x "
                       "at 64-byte frames.")  # fmt: skip
        out = [sec]
        if any("cpu_ns_per_datagram" in r for r in records):
            cost = summary.rate_section(records, "Sender CPU per datagram (ns), by payload",
                                        metric="cpu_ns_per_datagram", unit=1.0, unit_name="ns",
                                        category="stack", series="payload",
                                        baseline="kernel")  # fmt: skip
            cost["text"] = ("The sending application's CPU time, plus its udpd's, over the "
                            "datagrams it sent (below 1: veloz cheaper). Softirq work done in "
                            "its context (the veth hand-off, the sink's XDP) is included for "
                            "every arm alike.")  # fmt: skip
            out.append(cost)
        return out


UDP_LATENCY = UdpLatency()
UDP_THROUGHPUT = UdpThroughput()
