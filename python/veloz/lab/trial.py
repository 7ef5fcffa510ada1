"""One measurement on the lab's topology: an NF on the DUT, the generator,
the sink where the NF's frames arrive, and the CPU each of them used.

    generator port ==== dut port 0  DUT  dut port 1 ==== sink port

On the namespace testbed (the default topology):

    vz-gen  gen-dut ==== dut-gen  vz-dut  dut-sink ==== sink-dut  vz-sink

What is delivered depends on the NF: drop's work is what it dropped (the
NF's own counter); tx sends frames back out of the DUT's first port, so the
sink runs on the generator's port; redirect sends them out of the second, so
it runs on the sink's. The linux backend does the same jobs with the kernel
(nftables drop, IP forwarding) and gets the same frames: for tx they are
addressed to the generator itself, so the kernel routes them back.

Each role's commands run on its host (veloz.lab.topology): a namespace, this
machine, or another over SSH; the CPU figures are read on the DUT's host.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import ExitStack

from veloz.core.proc import Runner, json_result
from veloz.lab import topology, workers
from veloz.lab.hosts import Host

# Where each NF's frames arrive, if anywhere: the role whose (first) port gets them.
ARRIVE = {"tx": "generator", "redirect": "sink", "router": "sink"}
# The verdict that counts as an NF's work done.
WORK = {"drop": "drop", "tx": "tx", "redirect": "redirect", "router": "redirect", "lb": "tx"}
SETTLE_S = 0.3  # the last frames reach the counters before they are read


def nf_args(nf: str, backend: str, topo: topology.Topology | None = None) -> list[str]:
    """redirect and router: out of the DUT's second port. The linux baseline
    forwards by its routes (the generator's frames are addressed to the
    sink) and takes no NF config."""
    if nf not in ("redirect", "router") or backend == "linux":
        return []
    out = (topo or topology.current()).dut.ports[1].iface
    return ["--iface", out] + (["--set", f"port={out}"] if nf == "redirect" else [])


def _cpu_jiffies(host: Host) -> dict[str, int]:
    """Machine-wide CPU time from the host's /proc/stat, in clock ticks, by kind."""
    fields = host.read_file("/proc/stat").split("\n", 1)[0].split()[1:]
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return {name: int(v) for name, v in zip(names, fields, strict=False)}


def _process_cpu_s(runner: Runner | None, host: Host) -> float:
    """CPU time of a running process, all its threads (`ip netns exec`, the
    SSH wrapper and `veloz run` exec the tool, so the pid is the tool's)."""
    if runner is None:
        return 0.0
    try:
        stat = host.read_file(f"/proc/{Host.pid(runner.proc)}/stat")
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    # USER_HZ, the same on every Linux host
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _bpf_run_stats(runner: Runner | None, host: Host) -> tuple[int, int] | None:
    """(run_time_ns, run_cnt) of the NF's XDP program, when the kernel keeps
    them (kernel.bpf_stats_enabled=1, which `veloz bench` sets for its run)."""
    prog_id = runner.attached.get("prog_id") if runner else None
    if not prog_id:
        return None
    done = host.run(["bpftool", "-j", "prog", "show", "id", str(prog_id)], timeout=10)
    if done.returncode != 0:
        return None
    info = json.loads(done.stdout)
    # bpftool leaves both out while they are zero
    return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))


IDLE_SPIN_S = 0.02  # long enough to tell a busy-polling worker from a sleeper


def _idle_spin(host: Host, pid: int | None) -> tuple[dict, dict, float]:
    """Two snapshots of the NF's threads before any traffic (busy-pollers
    spin anyway), for workers.worker_cpus()."""
    t0, before = time.monotonic(), workers.snapshot(host, pid)
    if not before:
        return before, before, 1.0
    time.sleep(IDLE_SPIN_S)
    return before, workers.snapshot(host, pid), time.monotonic() - t0


def off_workers(argv: list[str], gen: Host, dut: Host, busy: frozenset[int]) -> list[str]:
    """The generator kept off the CPUs the NF's workers busy-poll, when both
    run on this machine: a task on a worker's CPU takes it until the next
    tick, and the generator, with the kernel's receive work it drives, would
    be that task. Nothing to do for xdp (no workers) or another machine."""
    others = workers.other_cpus(busy)
    if not (busy and others and gen.this_machine and dut.this_machine):
        return argv
    return ["taskset", "-c", ",".join(map(str, others)), *argv]


def gen_argv(nf: str, size: int, rate: int, seconds: float | None, count: int | None,
             flows: int, extra: list[str] | None = None,
             topo: topology.Topology | None = None) -> list[str]:  # fmt: skip
    """`veloz gen` on the generator's host: to the sink's address through the
    DUT's MAC (tx: to the generator's own), every address from the topology."""
    topo = topo or topology.current()
    gen, dut_in, sink = topo.generator.port, topo.dut.ports[0], topo.sink.port
    argv = ["gen", "--iface", gen.iface, "--json", "--size", str(size), "--rate", str(rate),
            "--flows", str(flows), "--src-mac", gen.mac, "--dst-mac", dut_in.mac,
            "--src-ip", gen.ipv4, "--dst-ip", sink.ipv4, *(extra or [])]  # fmt: skip
    argv += ["--count", str(count)] if count else ["--duration", str(seconds)]
    if nf == "tx":
        argv += ["--dst-ip", gen.ipv4]
    # drop: no one reads the frames (the NF counts them, the generator row's
    # sink only counts), so they go as the template was built: vz-gen
    # --static, the generator's cheapest frame (docs/lab.md, the generator).
    # A caller that passes `extra` chooses for itself.
    if nf == "drop" and flows == 1 and extra is None:
        argv.append("--static")
    return topo.generator.host.veloz_argv(*argv)


def _sink(topo: topology.Topology, nf: str, backend: str, arrive: str | None
          ) -> tuple[topology.Role | None, list[str]]:  # fmt: skip
    """The role the NF's frames reach, if any, and the argv of the sink there."""
    # backend "generator": no NF, the sink on the DUT's port itself: the
    # most the generator can put through the link, to tell when it is the limit
    if arrive is None:  # else: the role the caller says the NF's frames reach
        arrive = "dut" if backend == "generator" else ARRIVE.get(nf)
    at = topo.role(arrive) if arrive else None
    sink_argv = ["gen", "--sink", "--replace", "--iface", at.port.iface, "--json"] if at else []
    if backend == "generator":
        sink_argv.append("--count-only")
    return at, sink_argv


def _record(
    nf: str,
    backend: str,
    size: int,
    flows: int,
    rate: int,
    *,
    sent: dict,
    counted: dict,
    work_key: str,
    arrived: dict | None,
    wall: float,
    cpu0: dict[str, int],
    cpu1: dict[str, int],
    gen_cpu: float,
    nf_cpu: float,
    sched0: dict[int, workers.Thread],
    sched1: dict[int, workers.Thread],
) -> dict:
    """measure()'s flat record, from what it read before and after the trial."""
    tick = os.sysconf("SC_CLK_TCK")
    cpu = {k: (cpu1[k] - cpu0[k]) / tick / wall for k in cpu0}
    secs = sent["seconds"]
    xmit = sent["xmit"] if sent["xmit"] is not None else sent["sent"]
    # Frames through an skb path (kernel forwarding, generic XDP) can arrive
    # with a sequence number already seen: the generator's page was reused
    # while the frame was in flight. They did arrive: they count as done, and
    # are reported as duplicates.
    work = counted[work_key]
    done = work if arrived is None else arrived["received"]
    return {
        "nf": nf,
        "backend": backend,
        "size": size,
        "flows": flows,
        "target_pps": rate,
        "sent": xmit,
        "seconds": secs,
        "offered_pps": xmit / secs if secs else 0.0,
        "counted": work,
        "done": done,
        "rate_pps": done / secs if secs else 0.0,
        "lost": xmit - done,
        "loss": (xmit - done) / xmit if xmit else None,
        "rx_missed": counted["errors"].get("rx_missed"),
        "errors": counted["errors"],
        "cpu_busy": sum(v for k, v in cpu.items() if k not in ("idle", "iowait")),
        "cpu_softirq": cpu["softirq"],
        "cpu_system": cpu["system"],
        "cpu_user": cpu["user"],
        "cpu_gen_process": gen_cpu / wall,
        "cpu_nf_process": nf_cpu / wall,
        # the DUT's share: the NF's process, and softirq, where the kernel
        # runs XDP, AF_XDP copy-mode receive and netfilter
        "cpu_dut": cpu["softirq"] + nf_cpu / wall,
        # how long the busy-polling workers were kept off their CPUs
        "worker_wait": workers.waited(sched0, sched1, wall),
    }


def measure(
    nf: str,
    backend: str,
    size: int = 64,
    rate: int = 0,
    seconds: float | None = 2.0,
    count: int | None = None,
    flows: int = 1,
    nf_extra: list[str] | None = None,
    gen_extra: list[str] | None = None,
    attach_timeout: float = 15.0,
    arrive: str | None = None,
    work: str | None = None,
) -> dict:
    """One trial; rate 0 = as fast as the generator goes. Returns a flat record.

    sent: frames the generator's driver transmitted. done: the NF's work
    that reached its destination (dropped for drop, arrived at the sink for
    tx and redirect). lost = sent - done. cpu_*: CPU-seconds per second of
    the trial, machine-wide by kind, and of the generator and NF processes.
    """
    topo = topology.current()
    gen, dut = topo.generator, topo.dut
    run_argv = dut.host.veloz_argv("run", nf, "--backend", backend, "--iface",
                                   dut.ports[0].iface, "--json", *nf_args(nf, backend, topo),
                                   *(nf_extra or []))  # fmt: skip
    at, sink_argv = _sink(topo, nf, backend, arrive)
    with ExitStack() as started:
        # entered one by one: an NF that fails to start still stops the sink
        sink = (
            started.enter_context(Runner(at.host.veloz_argv(*sink_argv), what="the sink",
                                         host=at.host))
            if at
            else None
        )  # fmt: skip
        runner = (
            None
            if backend == "generator"
            else started.enter_context(Runner(run_argv, attach_timeout=attach_timeout,
                                              host=dut.host))
        )  # fmt: skip
        pid = runner and Host.pid(runner.proc)
        busy = workers.worker_cpus(*_idle_spin(dut.host, pid))
        cpu0, t0 = _cpu_jiffies(dut.host), time.monotonic()
        nf0 = _process_cpu_s(runner, dut.host)
        bpf0 = _bpf_run_stats(runner, dut.host)
        sched0 = workers.snapshot(dut.host, pid)
        done, gen_cpu = gen.host.run_measured(
            off_workers(gen_argv(nf, size, rate, seconds, count, flows, gen_extra, topo),
                        gen.host, dut.host, busy),
            timeout=(seconds or 0) + (count or 0) / max(rate, 1) + 120)  # fmt: skip
        sent = json_result(done, "the generator")
        cpu1, t1 = _cpu_jiffies(dut.host), time.monotonic()
        nf_cpu = _process_cpu_s(runner, dut.host) - nf0
        bpf1 = _bpf_run_stats(runner, dut.host)
        sched1 = workers.snapshot(dut.host, pid)
        time.sleep(SETTLE_S)
        # lb's kernel baseline forwards (DNAT) where the NF transmits back
        work_key = work or ("redirect" if (nf, backend) == ("lb", "linux") else WORK.get(nf, nf))
        counted = runner.stop() if runner else {work_key: None, "errors": {}}
        arrived = sink.stop() if sink else None
    record = _record(nf, backend, size, flows, rate, sent=sent, counted=counted,
                     work_key=work_key, arrived=arrived, wall=t1 - t0, cpu0=cpu0, cpu1=cpu1,
                     gen_cpu=gen_cpu, nf_cpu=nf_cpu, sched0=sched0, sched1=sched1)  # fmt: skip
    if bpf0 and bpf1 and bpf1[1] > bpf0[1]:
        # the XDP program's own time per frame, as the kernel measured it live
        record["bpf_ns_per_packet"] = (bpf1[0] - bpf0[0]) / (bpf1[1] - bpf0[1])
    dispatch = [r for r in getattr(runner, "records", []) if r.get("event") == "dispatch_summary"]
    if dispatch:  # run --dispatch: what the dispatch stage counted
        record["dispatch"] = dispatch[-1]
    if arrived is not None:
        record.update(
            duplicates=arrived["duplicates"],
            reordered=arrived["reordered"],
            latency_ns=arrived["latency_ns"],
            histogram=arrived["histogram"],
        )
    return record
