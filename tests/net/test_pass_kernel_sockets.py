"""PASS on every backend carries a kernel socket's traffic to a kernel
socket: UDP requests answered, a TCP stream read (the legitimate side of the
ddos experiment, without an attack). On veth a socket's frames left with
partial checksums until the testbed turned transmit checksum offload off;
the userspace backends' TAP then handed the kernel frames it refused as bad.
"""

from __future__ import annotations

import pytest

from veloz.core.proc import Runner, in_netns, veloz_argv
from veloz.lab.experiments import ddos_attack


@pytest.mark.parametrize("backend", ["xdp", "xdp-generic", "afxdp", "dpdk"])
def test_sockets_through_the_ddos_filter(testbed, tmp_path, backend):
    cfg = tmp_path / "ddos.toml"
    cfg.write_text(ddos_attack.CONFIG)
    argv = veloz_argv("run", "ddos", "--backend", backend, "--iface", "dut-gen",
                      "--config", str(cfg), "--json")  # fmt: skip
    with Runner(in_netns("vz-dut", argv), attach_timeout=60) as nf:
        served = ddos_attack.attack_and_serve(0)
        counted = nf.stop()
    assert served["tcp_error"] is None and served["goodput_mbps"] > 0
    # The TCP stream fills the path: a userspace backend in copy mode may
    # miss a few frames (rx_missed); a checksum fault loses every one.
    assert served["answered"] >= 0.9, served
    assert counted["drop"] == 0 and counted["pass"] >= served["udp_sent"]
