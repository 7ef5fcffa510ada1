"""Load balancer: the lb NF against the kernel's own L4 load balancing (the
XDP paper compared Katran with IPVS: 4.3x).

One UDP VIP, 198.18.0.100:9, two backends (198.18.1.2 and 198.18.1.3, both
vz-sink's), 256 flows from the generator, unpaced, 64-byte frames.

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

VIP = "198.18.0.100"
BACKENDS = ("198.18.1.2", "198.18.1.3")
SINK_MAC = "02:00:c6:12:01:02"  # vz-sink's sink-dut: both backends live there
GEN_MAC = "02:00:c6:12:00:01"  # vz-gen's gen-dut: where tunnelled frames go
FLOWS = 256

CONFIG = f"""
[lb]
source4 = "198.18.0.2"
next_hop_mac = "{GEN_MAC}"
[[vip]]
address = "{VIP}"
port = 9
proto = "udp"
backends = {list(BACKENDS)!r}
""".replace("'", '"')


@contextmanager
def second_backend() -> Iterator[None]:
    """vz-dut's kernel must reach 198.18.1.3 for the DNAT baseline: it is
    vz-sink's MAC too (a static neighbour, removed afterwards)."""
    dut = topology.current().dut
    out = dut.ports[1].iface
    done = dut.host.run(["ip", "neigh", "replace", BACKENDS[1], "lladdr", SINK_MAC,
                         "dev", out, "nud", "permanent"])  # fmt: skip
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, "ip neigh replace", stderr=done.stderr)
    try:
        yield
    finally:
        dut.host.run(["ip", "neigh", "del", BACKENDS[1], "dev", out])


class LoadBalancer:
    name = "lb"
    title = "L4 load balancer (Maglev + IPIP) against the kernel's (nftables DNAT)"
    doc = __doc__

    def count(self, s: dict) -> int:
        return s["trials"] * len(s["backends"])

    def run(self, ctx) -> None:
        s = ctx.settings
        with tempfile.TemporaryDirectory(prefix="veloz-lb-") as tmp, second_backend():
            cfg = Path(tmp) / "lb.toml"
            cfg.write_text(CONFIG)
            for t in range(s["trials"]):
                for backend in s["backends"]:
                    # the kernel forwards (DNAT) to the sink; the NF tunnels back
                    arrive = "sink" if backend == "linux" else "generator"
                    rec = trial.measure("lb", backend, size=s["sizes"][0], rate=0,
                                        seconds=s["seconds"], flows=FLOWS,
                                        nf_extra=["--config", str(cfg)],
                                        gen_extra=["--dst-ip", VIP], arrive=arrive)  # fmt: skip
                    ctx.record(f"lb {backend}", rec, trial=t, experiment=self.name)

    def sections(self, records: list[dict], s: dict) -> list[dict]:
        sec = summary.rate_section(records, "Frames balanced and delivered (Mpps)")
        sec["text"] = (
            "Median over trials, 95% bootstrap CI, ratio to linux (nftables DNAT: "
            "this kernel has no IPVS). " + throughput.SPEED_NOTE
        )
        return [sec]


LB = LoadBalancer()
