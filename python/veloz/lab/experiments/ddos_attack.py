"""DDoS: does the host keep serving its legitimate clients while it is
flooded? (The XDP paper's Figure 8: the kernel's own service keeps going
behind the XDP filter, as attack traffic grows.)

The legitimate traffic runs on kernel sockets between vz-gen and vz-dut's own
address (198.18.0.2; on a topology file, the generator's host and the DUT's
first port, the attacker's source from its [addresses]), through
`veloz.lab.legit`: a UDP request every 5 ms, echoed by a server in vz-dut
(answered fraction, mean and p99 round trip),
and one TCP stream pushed as fast as it goes (goodput: the bytes the server
read). The attacker is the generator in vz-gen, from its own source address
(198.18.0.200) to the same address and the UDP service's port, at each
--rates (the first level is always no attack at all). Arms:

  - linux: the kernel alone, no filter: every attack datagram climbs the
    stack and queues at the service's socket, beside the legitimate ones.
  - ddos on each XDP/userspace backend: a rule drops the attacker's source;
    the legitimate traffic PASSes to the kernel untouched.

On veth the generator shares the DUT's two cores, so the attack rates are
the generator's (`attack_pps` in each record), and the legitimate traffic
competes with both for CPU: compare arms, not absolute figures.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
from pathlib import Path

from veloz.core.errors import VelozError
from veloz.core.proc import Runner, json_result
from veloz.lab import legit, summary, topology

SECONDS = 3.0  # of legitimate traffic (and attack) per trial


def config(topo: topology.Topology) -> str:
    """The filter: the attacker's source ([addresses] attacker) dropped."""
    return f"""
[[rule]]
src = "{topo.addr.attacker}/32"
action = "drop"
"""


def __getattr__(name: str) -> str:
    if name == "CONFIG":  # the current topology's (the testbed's by default)
        return config(topology.current())
    raise AttributeError(name)


def attack_and_serve(rate: int) -> dict:
    """Legitimate traffic for SECONDS, flooded at `rate` pps (0: no attack):
    the server on the DUT's host, the client and the attacker on the
    generator's, to the DUT's first address."""
    topo = topology.current()
    gen, dut = topo.generator, topo.dut
    victim = dut.port.ipv4
    flood: dict = {}
    argv = gen.host.veloz_argv("gen", "--iface", gen.port.iface, "--json", "--src-mac",
                               gen.port.mac, "--dst-mac", dut.port.mac, "--src-ip",
                               topo.addr.attacker, "--dst-ip", victim, "--dst-port",
                               str(legit.UDP_PORT), "--rate", str(rate),
                               "--duration", str(SECONDS))  # fmt: skip

    def flood_run() -> None:
        try:
            flood.update(json_result(gen.host.run(argv, timeout=SECONDS + 60), "the attacker"))
        except (VelozError, subprocess.TimeoutExpired) as e:
            flood["error"] = str(e)

    serve = dut.host.python_argv("veloz.lab.legit", "serve", "--addr", victim)
    with Runner(serve, what="the legitimate server", host=dut.host) as server:
        attacker = threading.Thread(target=flood_run)
        if rate:
            attacker.start()
        client = json_result(
            gen.host.run(gen.host.python_argv("veloz.lab.legit", "client", "--seconds",
                                              str(SECONDS), "--addr", victim),
                         timeout=SECONDS + 60), "the legitimate client")  # fmt: skip
        if rate:
            attacker.join()
        served = server.stop()
    if "error" in flood:
        raise VelozError(f"the attack did not run: {flood['error']}", code=1)
    sent = client["udp_sent"]
    return {
        "answered": client["udp_answered"] / sent if sent else 0.0,
        "udp_sent": sent,
        "rtt_ms": client["rtt_ms"],
        "rtt_p99_ms": client["rtt_p99_ms"],
        "goodput_mbps": served["tcp_bytes"] * 8 / SECONDS / 1e6,
        "tcp_error": client["tcp_error"],
        "attack_pps": flood.get("pps", 0.0),
        "attack_sent": flood.get("sent", 0),
    }


class DdosAttack:
    name = "ddos"
    title = "Legitimate traffic under a flood: the ddos NF vs the kernel alone"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * (1 + len(s["rates"])) * len(s["backends"])

    def needs(self, s: dict) -> tuple[topology.Need, ...]:
        # the legitimate server and client: veloz's Python on both hosts
        return tuple(topology.Need(r, "python", "veloz.lab.legit") for r in ("dut", "generator"))

    def run(self, ctx) -> None:
        dut = topology.current().dut.host
        with tempfile.TemporaryDirectory(prefix="veloz-ddos-") as tmp:
            (Path(tmp) / "ddos.toml").write_text(config(topology.current()))
            with dut.staged(tmp) as there:
                self._trials(ctx, f"{there}/ddos.toml")

    def _trials(self, ctx, cfg: str) -> None:
        s = ctx.settings
        for t in range(s["trials"]):
            for rate in [0, *s["rates"]]:
                for backend in s["backends"]:
                    rec = self._one(backend, rate, cfg)
                    what = f"under {rate:,} pps" if rate else "no attack"
                    ctx.record(f"ddos {backend} {what}", rec, trial=t, rate=rate,
                               backend=backend, experiment=self.name)  # fmt: skip

    def _one(self, backend: str, rate: int, cfg: str) -> dict:
        if backend == "linux":  # the kernel alone: no filter at all
            return {"nf": "none", **attack_and_serve(rate)}
        dut = topology.current().dut
        argv = dut.host.veloz_argv("run", "ddos", "--backend", backend, "--iface",
                                   dut.port.iface, "--config", cfg, "--json")  # fmt: skip
        with Runner(argv, attach_timeout=60, host=dut.host) as nf:
            rec = attack_and_serve(rate)
            counted = nf.stop()
        return {"nf": "ddos", **rec, "dropped": counted.get("drop"), "passed": counted.get("pass")}

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        note = (
            "Median over trials with a 95% bootstrap CI; ratio to linux (the kernel "
            "alone, no filter). Series: the attack's target rate in pps (0: none); each "
            "record holds the rate the generator reached (attack_pps)."
        )
        out = []
        for metric, title, unit_name in (
            ("goodput_mbps", "TCP goodput during the flood (Mbit/s)", "Mbit/s"),
            ("answered", "UDP requests answered during the flood (fraction)", "fraction"),
            ("rtt_ms", "UDP round trip during the flood (ms)", "ms"),
        ):
            sec = summary.rate_section(records, title, metric=metric, unit=1.0,
                                       unit_name=unit_name, series="rate")  # fmt: skip
            sec["text"] = note
            out.append(sec)
        return out


DDOS = DdosAttack()
