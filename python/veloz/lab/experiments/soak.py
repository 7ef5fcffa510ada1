"""Soak: each backend runs the drop NF for a long stretch (10 minutes by
default) at the highest rate it sustains on this testbed, and two things are
checked at the end, not assumed:

- the counters balance exactly: every frame the generator's driver
  transmitted is either one the NF took (its verdict counters) or one a
  counter says was lost on the way in (rx_missed: the AF_XDP ring was full;
  rx_invalid: a descriptor outside the UMEM). "unaccounted" is what is left,
  and must be 0.
- the data-plane process's resident memory stays flat: sampled every few
  seconds from /proc/PID/status (VmRSS; DPDK's hugepages are not in it and
  are reported apart), with the Theil-Sen slope of RSS over time and its 95%
  confidence interval (a robust, nonparametric fit: a single page fault
  burst does not tilt it). The first minute is left out of the fit: buffers
  and maps are touched for the first time then.

The sustainable rate is found first, per backend: probes of a few seconds at
each of the offered rates, highest first; the first with no loss at all is
the soak's rate. On this 2-CPU veth testbed the generator shares the CPUs
with the data plane, so that rate says more about the testbed than about
the backend (see `bench drop` for throughput).
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import ExitStack

from scipy import stats as sps

from veloz.core.proc import Runner, run_json
from veloz.lab import topology, trial
from veloz.lab.experiments import udp
from veloz.lab.hosts import Host, LocalHost

PROBE_RATES = (2_000_000, 1_000_000, 500_000, 250_000, 100_000)
PROBE_S = 3.0
SAMPLE_S = 5.0
WARMUP_S = 60.0
NF = "drop"


def proc_memory_kib(pid: int, host: Host | None = None) -> dict[str, int] | None:
    """VmRSS and HugetlbPages of a process on its host (default: here), in
    KiB (None once it is gone)."""
    try:
        text = (host or LocalHost()).read_file(f"/proc/{pid}/status")
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def kib(name: str) -> int:
        return int(fields.get(name, "0 kB").split()[0])

    return {"rss_kib": kib("VmRSS"), "hugetlb_kib": kib("HugetlbPages")}


class Sampler:
    """A thread that samples a process's memory every `every` seconds, on
    the process's host (over SSH: one round trip a sample)."""

    def __init__(self, host: Host, pid: int, every: float) -> None:
        self.host, self.pid, self.every = host, pid, every
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            mem = proc_memory_kib(self.pid, self.host)
            if mem is not None:
                self.samples.append({"t": round(time.monotonic() - self._t0, 3), **mem})
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def balance(sent: int, summary: dict) -> dict:
    """Where every transmitted frame went, by the NF's own counters."""
    errors = summary.get("errors", {})
    missed = errors.get("rx_missed") or 0
    invalid = errors.get("rx_invalid") or 0
    verdicts = {k: summary[k] for k in ("drop", "pass", "tx", "redirect", "aborted")}
    taken = sum(verdicts.values())
    return {
        "sent": sent,
        "taken": taken,
        "verdicts": verdicts,
        "rx_missed": missed,
        "rx_invalid": invalid,
        "unaccounted": sent - taken - missed - invalid,
    }


def rss_trend(samples: list[dict], warmup: float) -> dict:
    """Theil-Sen slope of RSS (KiB per minute) after the warm-up, with 95% CI."""
    pts = [s for s in samples if s["t"] >= warmup] or samples
    out = {
        "rss_first_kib": samples[0]["rss_kib"] if samples else None,
        "rss_after_warmup_kib": pts[0]["rss_kib"] if pts else None,
        "rss_last_kib": samples[-1]["rss_kib"] if samples else None,
        "rss_max_kib": max(s["rss_kib"] for s in samples) if samples else None,
        "hugetlb_kib": samples[-1]["hugetlb_kib"] if samples else None,
        "samples": len(samples),
    }
    if len(pts) >= 3:
        fit = sps.theilslopes([s["rss_kib"] for s in pts], [s["t"] / 60 for s in pts], 0.95)
        out.update(slope_kib_per_min=float(fit[0]), slope_low=float(fit[2]),
                   slope_high=float(fit[3]))  # fmt: skip
    return out


def soak(backend: str, rate: int, seconds: float, sample_s: float = SAMPLE_S,
         warmup: float = WARMUP_S) -> dict:  # fmt: skip
    """One long run of the drop NF at `rate`: the balance and the RSS trend."""
    # --interval: one counter line a minute, so that a long run's output
    # does not fill the pipe nobody reads until the end
    topo = topology.current()
    dut, gen = topo.dut, topo.generator
    run_argv = dut.host.veloz_argv("run", NF, "--backend", backend, "--iface",
                                   dut.ports[0].iface, "--json", "--interval", "60")  # fmt: skip
    with ExitStack() as started:
        runner = started.enter_context(Runner(run_argv, attach_timeout=30, host=dut.host))
        sampler = started.enter_context(Sampler(dut.host, Host.pid(runner.proc), sample_s))
        sent = run_json(gen.host.argv(trial.gen_argv(NF, 64, rate, seconds, None, 1, topo=topo)),
                        timeout=seconds + 120)  # fmt: skip
        time.sleep(trial.SETTLE_S)
        summary = runner.stop()
    xmit = sent["xmit"] if sent["xmit"] is not None else sent["sent"]
    return {
        "nf": NF,
        "backend": backend,
        "target_pps": rate,
        "seconds": sent["seconds"],
        "offered_pps": xmit / sent["seconds"] if sent["seconds"] else 0.0,
        **balance(xmit, summary),
        **rss_trend(sampler.samples, warmup),
        "rss": sampler.samples,
    }


class Soak:
    name = "soak"
    title = "Soak: counters that balance and memory that stays flat, per backend"
    doc = __doc__

    def _rates(self, s: dict) -> list[int]:
        return sorted(s["rates"], reverse=True) if s.get("rates_given") else list(PROBE_RATES)

    def count(self, s: dict) -> int:
        return len(s["backends"]) * (len(self._rates(s)) + 1)

    def run(self, ctx) -> None:
        s = ctx.settings
        for backend in s["backends"]:
            rates, chosen = self._rates(s), None
            for rate in rates:
                rec = trial.measure(NF, backend, rate=rate, seconds=PROBE_S)
                ctx.record(f"{backend}: probe {rate:,} pps", rec, kind="probe",
                           experiment=self.name)  # fmt: skip
                if rec["lost"] == 0:
                    chosen = rate
                    break
            if chosen is None:
                chosen = rates[-1]  # soak at the lowest anyway: the balance still holds
            ctx.advance(f"{backend}: skipped probes", len(rates) - 1 - rates.index(chosen))
            rec = soak(backend, chosen, s["seconds"])
            ctx.record(f"{backend}: soak {s['seconds']:g} s at {chosen:,} pps", rec,
                       kind="soak", experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        soaks = [r for r in records if r["kind"] == "soak"]
        rows = []
        for r in soaks:
            slope = r.get("slope_kib_per_min")
            rows.append([
                r["backend"], r["target_pps"], round(r["seconds"]), r["sent"], r["taken"],
                r["rx_missed"] + r["rx_invalid"], r["unaccounted"],
                r["rss_after_warmup_kib"], r["rss_last_kib"],
                None if slope is None else round(slope, 2),
                None if slope is None else f"{r['slope_low']:.2f} to {r['slope_high']:.2f}",
            ])  # fmt: skip
        out = [{
            "title": "Balance and resident memory",
            "text": self.doc + " unaccounted must be 0; a flat RSS has a slope whose "
            "CI holds 0 or is a few KiB per minute at most.",
            "table": {"columns": ["backend", "pps", "seconds", "sent", "taken by the NF",
                                  "counted lost", "unaccounted", "RSS after 1 min (KiB)",
                                  "RSS at end (KiB)", "RSS slope (KiB/min)", "95% CI"],
                      "rows": rows},
        }]  # fmt: skip
        series = [{"label": r["backend"], "x": [p["t"] / 60 for p in r["rss"]],
                   "y": [p["rss_kib"] / 1024 for p in r["rss"]]} for r in soaks]  # fmt: skip
        if series:
            out.append({
                "title": "Resident memory of the data-plane process over the soak",
                "text": "VmRSS, sampled every few seconds.",
                "plot": {"kind": "line", "xlabel": "minutes", "ylabel": "RSS (MiB)",
                         "xscale": "linear", "yscale": "linear", "series": series},
            })  # fmt: skip
        return out


SOAK = Soak()


# ---- the UDP stack: udpd under a steady stream of datagrams ----------------------

UDP_PROBE_RATES = (200_000, 100_000, 50_000, 20_000)
UDP_PORT = 7500
UDP_PAYLOAD = 64


def _dropped(role: str, direction: str) -> int:
    """A counter of the role's (first) port, read on its host."""
    host = topology.current().role(role)
    path = f"/sys/class/net/{host.port.iface}/statistics/{direction}_dropped"
    return int(host.host.read_file(path))


def udp_balance(sent: int, received: int, udpd_summary: dict, veth_dropped: int,
                sender_dropped: int = 0) -> dict:  # fmt: skip
    """Where every datagram the kernel client sent went: into the sink, or a
    counter on the way (the sender's veth, which drops when its peer's ring
    is full while sendto() still succeeds, counting UDP SndbufErrors; the
    receiving veth, the AF_XDP ring, the stack, the socket's ring)."""
    st, so, port = udpd_summary["stack"], udpd_summary["sockets"], udpd_summary["port"]
    xsk = port["xsk_rx_dropped"] + port["xsk_rx_ring_full"]
    counted = {
        "sender_tx_dropped": sender_dropped,
        # veth counts a frame XDP could not redirect to the AF_XDP socket in
        # its rx_dropped too: only the rest is the veth's own
        "veth_rx_dropped": max(0, veth_dropped - xsk),
        "xsk_rx_dropped": port["xsk_rx_dropped"],
        "xsk_rx_ring_full": port["xsk_rx_ring_full"],
        "udp_bad": st["udp_bad_len"] + st["udp_bad_csum"] + st["udp_no_port"],
        "socket_ring_full": so["rx_ring_full"],
    }
    return {"sent": sent, "received": received, "counted_lost": counted,
            "unaccounted": sent - received - sum(counted.values())}  # fmt: skip


def udp_soak(rate: int, seconds: float, sample_s: float = SAMPLE_S,
             warmup: float = WARMUP_S) -> dict:  # fmt: skip
    """veloz-pktgen on the generator (kernel sockets) at `rate` to a
    veloz-pktgen sink on udpd on the DUT: the balance and udpd's RSS trend."""
    topo = topology.current()
    dut, gen = topo.dut.host, topo.generator.host
    to = f"{udp.udpd_ip('dut')}:{UDP_PORT}"
    sink_argv = [dut.tool("veloz-pktgen"), "--sink", "--stack", "veloz", "--bind", to,
                 "--duration", f"{seconds + 4:g}", "--json"]  # fmt: skip
    send_argv = [gen.tool("veloz-pktgen"), "--stack", "kernel", "--connect", to,
                 "--size", str(UDP_PAYLOAD), "--rate", str(rate), "--duration", f"{seconds:g}",
                 "--json"]  # fmt: skip
    # the sender is on kernel sockets: udpd runs on the DUT only
    with (
        udp.running_udpd(gen=False) as udpd,
        Sampler(dut, Host.pid(udpd.proc), sample_s) as sampler,
    ):
        dropped0 = _dropped("dut", "rx")
        sender0 = _dropped("generator", "tx")
        sink = dut.spawn(sink_argv, env=udp._env("veloz"))
        try:
            time.sleep(1)
            sent = gen.run(send_argv, timeout=seconds + 60)
            out, err = sink.communicate(timeout=60)
        finally:
            if sink.poll() is None:
                sink.kill()
                sink.communicate()
        if sink.returncode != 0:
            raise RuntimeError(f"the veloz sink failed: {err.strip()}")
        dropped = _dropped("dut", "rx") - dropped0
        sender_dropped = _dropped("generator", "tx") - sender0
        summary = udpd.stop()
    tx = udp._checked(sent, "the kernel sender")
    rx = json.loads(out.strip().splitlines()[-1])
    return {
        "backend": "udpd",
        "target_pps": rate,
        "seconds": tx["elapsed_s"],
        "offered_pps": tx["pps"],
        **udp_balance(tx["sent"], rx["received"], summary, dropped, sender_dropped),
        **rss_trend(sampler.samples, warmup),
        "rss": sampler.samples,
    }


class UdpSoak(Soak):
    name = "udp-soak"
    title = "Soak of the UDP stack: udpd's datagrams balance, its memory stays flat"
    doc = (
        "udpd on dut-gen, a veloz-pktgen sink on it, and veloz-pktgen on kernel sockets in "
        "vz-gen (on a topology: the DUT's first port, the generator's host) sending 64-byte "
        "datagrams at the highest probed rate with no loss, for 10 minutes by default. Every "
        "datagram sent must be received or in a counter on the way (gen-dut's tx_dropped, "
        "dut-gen's rx_dropped, the AF_XDP ring, the stack's UDP "
        "drops, the socket's ring); udpd's RSS is sampled and fitted as in `bench soak`."
    )

    def _rates(self, s: dict) -> list[int]:
        return sorted(s["rates"], reverse=True) if s.get("rates_given") else list(UDP_PROBE_RATES)

    def needs(self, s: dict) -> tuple[topology.Need, ...]:
        return (
            topology.Need("dut", "tool", "vz-udpd"),
            *(topology.Need(r, "tool", "veloz-pktgen") for r in ("dut", "generator")),
        )

    def count(self, s: dict) -> int:
        return len(self._rates(s)) + 1

    def run(self, ctx) -> None:
        s = ctx.settings
        rates, chosen = self._rates(s), None
        for rate in rates:
            rec = udp_soak(rate, PROBE_S, warmup=0)
            ctx.record(f"udpd: probe {rate:,} pps", rec, kind="probe", experiment=self.name)
            if rec["received"] == rec["sent"]:
                chosen = rate
                break
        if chosen is None:
            chosen = rates[-1]
        ctx.advance("udpd: skipped probes", len(rates) - 1 - rates.index(chosen))
        rec = udp_soak(chosen, s["seconds"])
        ctx.record(f"udpd: soak {s['seconds']:g} s at {chosen:,} pps", rec, kind="soak",
                   experiment=self.name)  # fmt: skip

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        soaks = [{**r, "taken": r["received"], "rx_missed": sum(r["counted_lost"].values()),
                  "rx_invalid": 0} for r in records if r["kind"] == "soak"]  # fmt: skip
        out = super().sections(soaks, s)
        out[0]["text"] = self.doc + " unaccounted must be 0."
        out[0]["table"]["columns"][4] = "received by the sink"
        return out


UDP_SOAK = UdpSoak()
