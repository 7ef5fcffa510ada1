"""Load balancer: the lb NF against the kernel's own L4 load balancing (the
XDP paper compared Katran with IPVS: 4.3x).

One UDP VIP, 198.18.0.100:9, two backends (198.18.1.2 and 198.18.1.3, both
vz-sink's), 256 flows from the generator, unpaced, 64-byte frames. (On a
topology file: the sink's address, and the VIP and second backend of its
[addresses]; the tunnel goes to the generator's MAC.)

  - lb NF (every backend but linux): Maglev picks the backend, the frame is
    IPIP-encapsulated and sent back out of dut-gen towards vz-gen, whose
    sink counts the generator's frames inside the tunnel.
  - linux: this kernel is built without IPVS, so its load balancer is
    nftables DNAT by a jhash of the flow (conntrack keeps each flow on its
    backend), then IP forwarding out of dut-sink, where the sink counts.

Both count the same thing, a frame balanced and delivered, and the ratio is
of medians over interleaved trials. The methods differ (tunnel vs NAT), as
Katran and IPVS-NAT do.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from veloz.lab import summary, topology, trial
from veloz.lab.experiments import throughput

FLOWS = 256


def backends(topo: topology.Topology) -> tuple[str, str]:
    """The sink's address and [addresses] backend2: both reached at its MAC."""
    return (topo.sink.port.ipv4, topo.addr.backend2)


def config(topo: topology.Topology) -> str:
    """The NF's config: tunnel from the DUT's first address to the
    generator's MAC, where the generator's sink counts what comes back."""
    return f"""
[lb]
source4 = "{topo.dut.port.ipv4}"
next_hop_mac = "{topo.generator.port.mac}"
[[vip]]
address = "{topo.addr.vip}"
port = 9
proto = "udp"
backends = ["{backends(topo)[0]}", "{backends(topo)[1]}"]
"""


@contextmanager
def second_backend() -> Iterator[None]:
    """The DUT's kernel must reach the second backend for the DNAT
    baseline: it is the sink's MAC too (a static neighbour, removed
    afterwards)."""
    topo = topology.current()
    dut, second = topo.dut, backends(topo)[1]
    out = dut.ports[1].iface
    done = dut.host.run(["ip", "neigh", "replace", second, "lladdr", topo.sink.port.mac,
                         "dev", out, "nud", "permanent"])  # fmt: skip
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, "ip neigh replace", stderr=done.stderr)
    try:
        yield
    finally:
        dut.host.run(["ip", "neigh", "del", second, "dev", out])


class LoadBalancer:
    name = "lb"
    title = "L4 load balancer (Maglev + IPIP) against the kernel's (nftables DNAT)"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(s["backends"])

    def run(self, ctx) -> None:
        topo = topology.current()
        with (
            tempfile.TemporaryDirectory(prefix="veloz-lb-") as tmp,
            second_backend(),
        ):  # fmt: skip
            (Path(tmp) / "lb.toml").write_text(config(topo))
            with topo.dut.host.staged(tmp) as there:  # where the DUT's NF reads it
                self._trials(ctx, f"{there}/lb.toml", topo.addr.vip)

    def _trials(self, ctx, cfg: str, vip: str) -> None:
        s = ctx.settings
        for t in range(s["trials"]):
            for backend in s["backends"]:
                # the kernel forwards (DNAT) to the sink; the NF tunnels back
                arrive = "sink" if backend == "linux" else "generator"
                rec = trial.measure("lb", backend, size=s["sizes"][0], rate=0,
                                    seconds=s["seconds"], flows=FLOWS,
                                    nf_extra=["--config", cfg],
                                    gen_extra=["--dst-ip", vip], arrive=arrive)  # fmt: skip
                ctx.record(f"lb {backend}", rec, trial=t, experiment=self.name)

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        sec = summary.rate_section(records, "Frames balanced and delivered (Mpps)")
        sec["text"] = (
            "Median over trials, 95% bootstrap CI, ratio to linux (nftables DNAT: "
            "this kernel has no IPVS). " + throughput.SPEED_NOTE
        )
        return [sec]


LB = LoadBalancer()
