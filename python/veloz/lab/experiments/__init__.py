"""The lab's experiments, by name, and what they share: settings, the
progress bar, and the records they collect.

An experiment is an object with a name, a title, a doc, `count(settings)` (how
many measurements it will make, for the progress bar's ETA), `run(ctx)`
(make them, through ctx.measure, trials interleaved across backends) and
`sections(records, settings)` (what the report shows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from veloz.lab.experiments import (
    bgp,
    cost,
    cpu,
    ddos_attack,
    dispatch,
    latency,
    lb_bench,
    router,
    soak,
    throughput,
    udp,
    udp_app,
    udp_servers,
)

EXPERIMENTS: dict[str, object] = {
    "drop": throughput.DROP,
    "tx": throughput.TX,
    "redirect": throughput.REDIRECT,
    "latency": latency.LATENCY,
    "cpu": cpu.CPU,
    "cost": cost.COST,
    "sizes": throughput.SIZES,
    "noisy": throughput.NOISY,
    "headline": throughput.HEADLINE,
    "router": router.ROUTER,
    "bgp": bgp.BGP,
    "lb": lb_bench.LB,
    "ddos": ddos_attack.DDOS,
    "dispatch": dispatch.DISPATCH,
    "udp-latency": udp.UDP_LATENCY,
    "udp-throughput": udp.UDP_THROUGHPUT,
    "udp-app": udp_app.UDP_APP,
    "udp-servers": udp_servers.UDP_SERVERS,
    "soak": soak.SOAK,
    "udp-soak": soak.UDP_SOAK,
}


@dataclass
class Context:
    """What an experiment gets: its settings, and where measurements go."""

    settings: dict
    advance: Callable[..., None] = lambda label, n=1: None
    records: list[dict] = field(default_factory=list)

    def record(self, label: str, rec: dict, **tags: object) -> dict:
        """Keep a measurement, tagged (trial, kind, ...), and move the bar."""
        rec = {**tags, **rec}
        self.records.append(rec)
        self.advance(label)
        return rec
