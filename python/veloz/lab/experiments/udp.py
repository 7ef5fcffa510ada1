"""UDP sockets on veloz against kernel sockets, over the same veth, in
UDPDK's set-up: the same stack on both ends.

udp-latency runs two udpd pollers for the whole experiment: one owns
198.18.0.3 on vz-dut's dut-gen (beside the kernel's 198.18.0.2), the other
198.18.0.4 on vz-gen's gen-dut (beside the kernel's 198.18.0.1); on a
topology file, the DUT's and the generator's ports and [addresses], each on
its role's host. veloz-pingpong echoes in vz-dut and its client runs in
vz-gen, both on the arm's stack; the arms are interleaved within each trial:

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
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from veloz.core.errors import VelozError
from veloz.core.proc import Runner
from veloz.lab import summary, topology
from veloz.lab.hosts import Host, stop

PAYLOADS = (18, 64, 512, 1472)  # UDPDK's range
LATENCY_ARMS = ("kernel", "kernel-busy", "veloz", "veloz-busy", "veloz-direct")
THROUGHPUT_ARMS = ("kernel", "kernel-mmsg", "veloz", "veloz-mmsg", "veloz-direct",
                   "veloz-direct-mmsg")  # fmt: skip
DIRECT = "veloz-direct"  # arms starting so run without udpd
STACKS = LATENCY_ARMS
SOCKET = "/run/veloz/udpd/lab.sock"
GEN_SOCKET = "/run/veloz/udpd/lab-gen.sock"
PORT = 7000
PINGS = 2000  # round trips per run
WARMUP = 200
BUSY_US = 200  # SO_BUSY_POLL of the veloz-busy arm, as net.core.busy_read's usual 50..200
BATCH = 32  # datagrams per sendmmsg in the -mmsg arms
# What runs where: udpd and the echo server on the DUT (and a second udpd,
# udp-latency's client, on the generator), each on its role's host
LATENCY_NEEDS = tuple(topology.Need(role, "tool", tool) for role in ("dut", "generator")
                      for tool in ("vz-udpd", "veloz-pingpong"))  # fmt: skip
THROUGHPUT_NEEDS = (topology.Need("dut", "tool", "vz-udpd"),
                    topology.Need("dut", "tool", "veloz-pktgen"))  # fmt: skip
# pids of the running pollers on their hosts, for their CPU time: by role
_UDPD_PIDS: dict[str, int] = {}


def udpd_ip(role: str = "dut") -> str:
    """udpd's address on the role's port (the topology's [addresses])."""
    a = topology.current().addr
    return a.udpd if role == "dut" else a.udpd_generator


@contextlib.contextmanager
def _one_udpd(role: str, socket: str) -> Iterator[Runner]:
    """udpd on the role's port, on its host, for the experiment's length;
    stopped whatever happens. Its counter lines wait in a pipe read only at
    the end: one a minute, or within a few minutes udpd would block on the
    full pipe."""
    topo = topology.current()
    at = topo.role(role)  # its port faces the other role
    with tempfile.TemporaryDirectory(prefix="veloz-udpd-") as tmp:
        (Path(tmp) / "udpd.toml").write_text(
            f'interface = "{at.port.iface}"\nipv4 = "{udpd_ip(role)}/{topo.addr.prefix_len}"\n'
            f'socket = "{socket}"\n')  # fmt: skip
        with at.host.staged(tmp) as there:
            argv = at.host.veloz_argv("udpd", "--config", f"{there}/udpd.toml", "--json",
                                      "--interval-ms", "60000")  # fmt: skip
            with Runner(argv, attach_timeout=30, what=f"udpd on the {role}",
                        host=at.host) as r:  # fmt: skip
                yield r


@contextlib.contextmanager
def running_udpd(gen: bool = True) -> Iterator[Runner]:
    """udpd on the DUT, and (gen) on the generator's side too; yields the
    DUT's (its stop() gives udpd's summary)."""
    with contextlib.ExitStack() as stack:
        dut = stack.enter_context(_one_udpd("dut", SOCKET))
        _UDPD_PIDS["dut"] = Host.pid(dut.proc)
        if gen:
            _UDPD_PIDS["generator"] = Host.pid(
                stack.enter_context(_one_udpd("generator", GEN_SOCKET)).proc
            )
        try:
            yield dut
        finally:
            _UDPD_PIDS.clear()


def _stack(arm: str) -> str:
    return "veloz" if arm.startswith("veloz") else "kernel"


def _env(arm: str, role: str = "dut") -> dict[str, str | None]:
    """The arm's environment for an application on the role's host: what is
    not the arm's is taken away (None), whatever the shell had set."""
    env: dict[str, str | None] = {
        "VZ_BUSY_POLL_US": None,
        "VZ_MODE": None,
        "VZ_UDPD_SOCKET": SOCKET if role == "dut" else GEN_SOCKET,
    }
    if arm == "veloz-busy":
        env["VZ_BUSY_POLL_US"] = str(BUSY_US)
    if arm.startswith(DIRECT):
        topo = topology.current()
        env.update(VZ_MODE="direct", VZ_DIRECT_IFACE=topo.role(role).port.iface,
                   VZ_DIRECT_ADDR=f"{udpd_ip(role)}/{topo.addr.prefix_len}")  # fmt: skip
    return env


def _local_ip(stack: str) -> str:
    """The DUT's address on the arm's stack."""
    return udpd_ip("dut") if stack == "veloz" else topology.current().dut.port.ipv4


def _udpd_cpu_s() -> dict[str, float]:
    """CPU seconds each running udpd has used, read on its host."""
    topo = topology.current()
    return {role: topo.role(role).host.threads_cpu_s(pid) for role, pid in _UDPD_PIDS.items()}


def _checked(done: subprocess.CompletedProcess, what: str) -> dict:
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise VelozError(f"{what} failed: {why}", code=1)
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def _echo_server(arm: str) -> Iterator[int]:
    """veloz-pingpong's server on the DUT's host; yields its pid there."""
    stack, host = _stack(arm), topology.current().dut.host
    argv = [host.tool("veloz-pingpong"), "--server", "--stack", stack,
            "--bind", f"{_local_ip(stack)}:{PORT}"]  # fmt: skip
    if arm == "kernel-busy":
        argv.append("--busy-poll")
    proc = host.spawn(argv, env=_env(arm))
    try:
        # the ready line ("echoing on ...") on stderr; `ip netns exec` and
        # the SSH wrapper exec, so the pid is the server's own
        line = proc.stderr.readline() if proc.stderr else ""
        if "echoing" not in line:
            raise RuntimeError(f"the {arm} echo server failed: {line.strip()}")
        yield Host.pid(proc)
    finally:
        stop(proc)


def ping(arm: str, payload: int, count: int = PINGS) -> dict:
    """One run of round trips from the generator to an echo server on the
    DUT, both on the arm's stack; the CPU each side used meanwhile."""
    stack = _stack(arm)
    topo = topology.current()
    gen, dut = topo.generator.host, topo.dut.host
    with _echo_server(arm) as server:
        argv = [gen.tool("veloz-pingpong"), "--client", "--stack", stack,
                "--connect", f"{_local_ip(stack)}:{PORT}", "--size", str(payload),
                "--count", str(count), "--warmup", str(WARMUP), "--json"]  # fmt: skip
        if arm == "kernel-busy":
            argv.append("--busy-poll")
        cpu0 = _udpd_cpu_s() if stack == "veloz" else {}
        srv0, t0 = dut.threads_cpu_s(server), time.monotonic()
        done, client = gen.run_measured(argv, timeout=120, env=_env(arm, "generator"))
        wall = time.monotonic() - t0
        server_cpu = dut.threads_cpu_s(server) - srv0
        udpd = {k: v - cpu0[k] for k, v in _udpd_cpu_s().items() if k in cpu0}
    out = _checked(done, f"the {arm} ping client")
    rtt = out["rtt_us"]
    return {
        "stack": arm, "payload": payload, "sent": out["sent"], "received": out["received"],
        "lost": out["lost"], **{f"rtt_{k}_us": rtt[k] for k in
                                ("mean", "stddev", "p50", "p90", "p99", "p999", "max")},
        "cpu_dut_pct": 100 * (server_cpu + udpd.get("dut", 0.0)) / wall,
        "cpu_gen_pct": 100 * (client + udpd.get("generator", 0.0)) / wall,
        "cpu_udpd_pct": 100 * sum(udpd.values()) / wall,
    }  # fmt: skip


def blast(arm: str, payload: int, seconds: float) -> dict:
    """veloz-pktgen on the DUT, flat out to the generator's discard port,
    where the lab's XDP sink counts and drops every datagram. The receiving
    side then costs the same little for every arm: the kernel's receive path
    (ip_rcv, a route lookup, an ICMP port-unreachable per datagram) ran on
    the sender's CPU, since veth delivers in the sender's softirq, and capped
    every stack at the same rate; it measured vz-gen's kernel, not the
    sending stack. The sender's CPU time per datagram is recorded too."""
    stack = _stack(arm)
    topo = topology.current()
    gen, dut = topo.generator, topo.dut.host
    argv = [dut.tool("veloz-pktgen"), "--stack", stack, "--connect", f"{gen.port.ipv4}:9",
            "--bind", f"{_local_ip(stack)}:0", "--size", str(payload),
            "--duration", f"{seconds:g}", "--json"]  # fmt: skip
    if arm.endswith("-mmsg"):
        argv += ["--batch", str(BATCH)]
    sink_argv = gen.host.veloz_argv("gen", "--sink", "--replace", "--count-only", "--iface",
                                    gen.port.iface, "--json")  # fmt: skip
    with Runner(sink_argv, what="the sink", host=gen.host) as sink:
        udpd = _UDPD_PIDS.get("dut")
        udpd0 = dut.threads_cpu_s(udpd) if udpd else 0.0
        done, app_cpu = dut.run_measured(argv, timeout=seconds + 60, env=_env(arm))
        cpu_s = app_cpu + (dut.threads_cpu_s(udpd) - udpd0 if udpd else 0.0)
        time.sleep(0.2)  # the veth's last frames into the sink
        arrived = sink.stop()["received"]
    out = _checked(done, f"the {arm} sender")
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

    def needs(self, s: dict) -> tuple[topology.Need, ...]:
        return LATENCY_NEEDS

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

    def needs(self, s: dict) -> tuple[topology.Need, ...]:
        return THROUGHPUT_NEEDS

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
