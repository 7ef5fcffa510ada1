# SPDX-License-Identifier: BSD-2-Clause
"""The control plane under load and faults (issue 22), for ddos and lb as
test_ctl_load.py does it for the router: concurrent `veloz ctl` clients
change a running NF (xdp, afxdp) under paced generator traffic, and one
client is SIGKILLed in the middle of a transaction whose writes the data
path already sees. Afterwards:

- every frame the generator sent is accounted for exactly;
- the NF's objects (rules and allow-list; VIPs, backends and the Maglev
  ring) are exactly what the committed commands wrote, read back through
  `veloz ctl` and the maps; the killed client's writes are gone;
- the runner holds as many file descriptors as before the clients came.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_ctl_load import held_fds, kill_mid_transaction, ok
from test_metrics import LB_CONFIG, LB_VIP

from veloz.control import ddos, lb
from veloz.control.client import Ctl
from veloz.core.proc import Runner, in_netns, run_json, veloz_argv
from waits import settle

CLIENTS = 4
GEN_IP = "198.18.0.1"  # vz-gen's gen-dut: the generator's source
DUT_IP = "198.18.0.2"  # vz-dut's dut-gen: the kernel there takes what ddos passes


def generate(count: int, rate: str, *extra: str) -> threading.Thread:
    """The generator in the background; its record lands in sent."""
    sent: list[dict] = []
    argv = veloz_argv("gen", "--iface", "gen-dut", "--json", "--count", str(count), "--rate",
                      rate, "--flows", "64", *extra)  # fmt: skip
    t = threading.Thread(target=lambda: sent.append(run_json(in_netns("vz-gen", argv), 180)))
    t.sent = sent  # type: ignore[attr-defined]
    t.start()
    return t


def udp_no_ports() -> int:
    """UDP datagrams vz-dut's kernel took for a port nobody listens on: the
    generator's frames an NF passed (its port 9 has no socket in vz-dut)."""
    done = subprocess.run(["ip", "netns", "exec", "vz-dut", "cat", "/proc/net/snmp"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    head, values = [line.split() for line in done.stdout.splitlines() if line.startswith("Udp:")]
    return int(values[head.index("NoPorts")])


def port_missed(summary: dict) -> int:
    """Frames the port dropped before a worker saw them (afxdp's rx_missed:
    a worker kept off its CPU by the suite's other lane); none on xdp."""
    return summary["errors"]["rx_missed"] or 0


def run(nf: str, backend: str, cfg: Path) -> Runner:
    argv = veloz_argv("run", nf, "--backend", backend, "--iface", "dut-gen", "--config",
                      str(cfg), "--json")  # fmt: skip
    return Runner(in_netns("vz-dut", argv), attach_timeout=60)


# ---- ddos --------------------------------------------------------------------

DDOS_FRAMES = 60_000


def ddos_client(i: int) -> list[dict]:
    """Rules of its own: one that never meets the traffic, one that drops all
    of it while it lasts, deleted again, and one more; returns those left."""
    kept = {"src": f"198.18.{150 + i}.0/24", "proto": "udp", "dport": 1000 + i,
            "action": "drop"}  # fmt: skip
    ok("rule", "add", "drop", "--src", kept["src"], "--proto", "udp", "--dport", str(1000 + i))
    out = ok("rule", "add", "drop", "--src", f"{GEN_IP}/32", "--proto", "udp", "--dport", "9")
    slot = out.split()[1]  # "rule N added: ..."
    ok("rule", "del", slot)
    last = {"src": f"198.18.{160 + i}.0/24", "action": "allow"}
    ok("rule", "add", "allow", "--src", last["src"])
    return [kept, last]


def ddos_killed_writes() -> list[str]:
    """Its transaction: the generator's source allow-listed (every frame of
    it passes untouched while the transaction is open), and a drop rule in
    the last slot with the rules' end raised to it."""
    net = ipaddress.ip_network("198.18.0.0/24")
    rule = ddos.parse_rule({"proto": "udp", "action": "drop"})
    last = ddos.ABI.RULES_MAX - 1
    ops = [ddos.allow_op(net), *ddos.add_rule_ops(rule, last, 1, 0)]
    return [op.line() for op in ops]


def rules(listed: str) -> list[dict]:
    counts = ("id", "packets", "bytes", "dropped")
    return sorted(({k: v for k, v in r.items() if k not in counts} for r in json.loads(listed)),
                  key=lambda r: json.dumps(r, sort_keys=True))  # fmt: skip


def drops(stats: dict) -> int:
    return stats["verdicts"]["drop"]["packets"] - stats["counters"]["malformed"]


@pytest.mark.parametrize("backend", ["xdp", "afxdp"])
def test_ddos_clients_under_load_and_a_kill(testbed, tmp_path, backend):
    cfg = tmp_path / "ddos.toml"
    cfg.write_text('[[rule]]\nsrc = "198.18.200.0/24"\naction = "drop"\n')
    with run("ddos", backend, cfg) as nf:
        path = nf.attached["ctl"]
        before = rules(ok("rule", "list", "--json"))
        fds_before = held_fds(nf.proc.pid, path)
        no_ports0 = udp_no_ports()
        stats0 = json.loads(ok("stats", "--json"))
        gen = generate(DDOS_FRAMES, "10k", "--dst-ip", DUT_IP)
        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            futures = [pool.submit(ddos_client, i) for i in range(CLIENTS)]
            kill_mid_transaction(path, ddos_killed_writes())
            expected = sorted([*before, *(r for f in futures for r in f.result())],
                              key=lambda r: json.dumps(r, sort_keys=True))  # fmt: skip
        gen.join(timeout=180)
        assert gen.sent, "the generator failed"  # type: ignore[attr-defined]
        sent = gen.sent[0]["sent"]  # type: ignore[attr-defined]

        # the maps: the committed rules, no allow-list, nothing in the last slot
        assert rules(ok("rule", "list", "--json")) == expected
        with Ctl(Path(path)) as c:
            assert ddos.read_allow(c) == []
            slots, end = ddos.read_rules(c)
            assert not slots[ddos.ABI.RULES_MAX - 1].used and end < ddos.ABI.RULES_MAX

        # every frame: dropped by a rule, or passed to vz-dut's kernel (which
        # has no socket on port 9); wait for the last, never a fixed sleep
        def counted() -> tuple[dict, int, int]:
            stats = json.loads(ok("stats", "--json"))
            # drops since the start, less the malformed ones (not the generator's)
            return stats, drops(stats) - drops(stats0), udp_no_ports() - no_ports0

        settle(lambda: sum(counted()[1:]), lambda n: n >= sent)
        stats, dropped, passed = counted()
        assert dropped > 0, "the drop rules never met the traffic"
        assert held_fds(nf.proc.pid, path) == fds_before
        missed = port_missed(nf.stop())
    assert dropped + passed + missed == sent, (stats, passed, missed, sent)
    assert not Path(path).exists()


# ---- lb ----------------------------------------------------------------------

LB_FRAMES = 100_000
KILLED_ID = 4000  # a backend id no command takes (they take the lowest free)


def lb_client(i: int) -> tuple[str, list[str]]:
    """A VIP of its own, a backend added and one removed; client 0 also adds
    and removes a backend of the VIP the traffic goes to, so its ring moves
    under the frames. Returns its VIP and the backends it keeps."""
    vip = f"198.18.0.{110 + i}"
    ok("vip", "add", vip, "80", "udp", "--backend", f"198.18.1.{20 + i}")
    ok("backend", "add", vip, "80", "udp", f"198.18.1.{30 + i}")
    ok("backend", "del", vip, "80", "udp", f"198.18.1.{20 + i}")
    if i == 0:
        ok("backend", "add", LB_VIP, "9", "udp", "198.18.1.4")
        ok("backend", "del", LB_VIP, "9", "udp", "198.18.1.4")
    return f"{vip}:80/udp", [f"198.18.1.{30 + i}"]


def lb_killed_writes() -> list[str]:
    """Its transaction: a backend of its own for the traffic's VIP (index
    0), and the first 4096 slots of that VIP's ring pointed at it."""
    backend = lb.Backend(ipaddress.ip_address("198.18.1.99"), vip=0)
    lines = [f"update {lb.BACKENDS} {lb.u32(KILLED_ID).hex()} {backend.value().hex()}"]
    lines += [f"update {lb.RING} {lb.u32(s).hex()} {lb.u32(KILLED_ID).hex()}"
              for s in range(4096)]  # fmt: skip
    return lines


def vip_rows(listed: str) -> dict[str, list[str]]:
    return {r["vip"]: sorted(b["address"] for b in r["backends"]) for r in json.loads(listed)}


@pytest.mark.parametrize("backend", ["xdp", "afxdp"])
def test_lb_clients_under_load_and_a_kill(testbed, tmp_path, backend):
    cfg = tmp_path / "lb.toml"
    cfg.write_text(LB_CONFIG)
    with run("lb", backend, cfg) as nf:
        path = nf.attached["ctl"]
        expected = vip_rows(ok("vip", "list", "--json"))
        with Ctl(Path(path)) as c:
            ring0 = lb.read_ring(c, 0)
        fds_before = held_fds(nf.proc.pid, path)
        gen = generate(LB_FRAMES, "5k", "--dst-ip", LB_VIP)
        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            futures = [pool.submit(lb_client, i) for i in range(CLIENTS)]
            kill_mid_transaction(path, lb_killed_writes())
            expected |= dict(f.result() for f in futures)
        gen.join(timeout=180)
        assert gen.sent, "the generator failed"  # type: ignore[attr-defined]
        sent = gen.sent[0]["sent"]  # type: ignore[attr-defined]

        # the maps: the committed VIPs and backends; the traffic's VIP has its
        # ring back exactly (client 0's backend came and went: Maglev puts
        # every slot back), and the killed client's backend was never there
        assert vip_rows(ok("vip", "list", "--json")) == expected
        with Ctl(Path(path)) as c:
            assert lb.read_ring(c, 0) == ring0
            assert lb.Backend.unpack(c.lookup(lb.BACKENDS, lb.u32(KILLED_ID)) or b"") is None

        # every frame counted at the VIP, and each one taken by a backend
        # (the killed client's too, while it lasted) or counted without one
        def counted() -> tuple[int, dict, dict]:
            with Ctl(Path(path)) as c:
                infos = c.maps()
                vip = lb._summed(c, infos, lb.VIP_STATS).get(0, (0, 0))[0]
                return vip, lb._summed(c, infos, lb.BACKEND_STATS), lb.counters(c, infos)

        settle(lambda: counted()[0], lambda n: n >= sent)
        vip, per_backend, counters = counted()
        # (the other VIPs get no traffic: every backend's frames are VIP 0's)
        taken = sum(p for p, _ in per_backend.values())
        assert taken + counters["no_backend"] == vip, (per_backend, counters)
        stats = json.loads(ok("stats", "--json"))
        assert stats["verdicts"]["tx"]["packets"] == taken - counters["encap_failed"]
        assert held_fds(nf.proc.pid, path) == fds_before
        missed = port_missed(nf.stop())
    assert vip + missed == sent, (vip, missed, sent)
    assert not Path(path).exists()
