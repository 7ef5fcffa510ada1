# SPDX-License-Identifier: BSD-2-Clause
"""What every experiment takes from a topology beyond its ports, without
root or a network: the lab's extra addresses ([addresses]), what an
experiment needs on a role's host (topology.check), the helpers' Python,
files staged where a host reads them, and the environment an arm gives."""

from __future__ import annotations

import os
import shlex
import shutil
import sys

import pytest

from veloz.core.errors import VelozError
from veloz.lab import bench, topology
from veloz.lab.experiments import EXPERIMENTS, ddos_attack, lb_bench, throughput, udp
from veloz.lab.hosts import LocalHost, SshHost, _schedstat_s, env_argv

PORTS = """
[generator]
host = "local"
iface = "lo"
mac = "02:00:c6:12:00:01"
ipv4 = "198.19.0.1"

[dut]
host = "local"
ports = [{ iface = "lo", mac = "02:00:c6:12:00:02", ipv4 = "198.19.0.2" },
         { iface = "lo", mac = "02:00:c6:12:01:01", ipv4 = "198.19.1.1" }]

[sink]
host = "local"
iface = "lo"
mac = "02:00:c6:12:01:02"
ipv4 = "198.19.1.2"
"""


def _load(tmp_path, extra: str = "") -> topology.Topology:
    path = tmp_path / "lab.toml"
    path.write_text(PORTS + extra)
    return topology.load(path)


def test_the_lab_addresses_default_from_the_ports(tmp_path):
    a = _load(tmp_path).addr
    # the DUT's first address + 1 and + 2, its /24's .100 and .200, the sink's + 1
    assert (a.udpd, a.udpd_generator, a.vip, a.attacker, a.backend2) == (
        "198.19.0.3", "198.19.0.4", "198.19.0.100", "198.19.0.200", "198.19.1.3")  # fmt: skip
    # the testbed's: exactly the addresses its experiments always used
    tb = topology.testbed_topology().addr
    assert (tb.udpd, tb.udpd_generator, tb.vip, tb.attacker, tb.backend2, tb.prefix_len) == (
        "198.18.0.3", "198.18.0.4", "198.18.0.100", "198.18.0.200", "198.18.1.3", 24)  # fmt: skip


def test_given_addresses_are_what_the_experiments_use(tmp_path):
    topo = _load(tmp_path, '[addresses]\nudpd = "198.19.0.50"\nvip = "198.19.0.99"\n'
                           'attacker = "198.19.9.9"\nbackend2 = "198.19.1.77"\n')  # fmt: skip
    assert topo.describe()["addresses"]["udpd"] == "198.19.0.50"
    with topology.use(topo):
        assert udp.udpd_ip("dut") == "198.19.0.50" and udp.udpd_ip("generator") == "198.19.0.4"
        assert udp._local_ip("kernel") == "198.19.0.2"
        env = udp._env("veloz-direct", "generator")
        assert env["VZ_DIRECT_ADDR"] == "198.19.0.4/24" and env["VZ_DIRECT_IFACE"] == "lo"
        assert udp._env("kernel")["VZ_MODE"] is None  # taken away, whatever the shell had
        cfg = lb_bench.config(topo)
        for want in ('source4 = "198.19.0.2"', 'next_hop_mac = "02:00:c6:12:00:01"',
                     'address = "198.19.0.99"', '["198.19.1.2", "198.19.1.77"]'):  # fmt: skip
            assert want in cfg
        assert 'src = "198.19.9.9/32"' in ddos_attack.CONFIG  # the current topology's


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('udpd = "198.19.5.3"', "'udpd' 198.19.5.3 is not on the DUT's first link (198.19.0.0/24)"),
        ('vip = "198.19.0.300"', "'vip'"),
        ("prefix_len = 31", "'prefix_len' must be a whole number in 8..30"),
        ('colour = "red"', "unknown key 'colour'"),
    ],
)
def test_bad_addresses_are_one_clear_line(tmp_path, table, says):
    with pytest.raises(VelozError) as e:
        _load(tmp_path, f"[addresses]\n{table}\n")
    assert says in str(e.value) and "\n" not in str(e.value) and "[addresses]" in str(e.value)


def test_the_helpers_python_there(tmp_path):
    # veloz run as `PYTHON -m veloz.cli` there: its Python runs the helpers too
    host = SshHost("192.0.2.10", veloz=("/opt/py", "-m", "veloz.cli"))
    assert host.python_argv("veloz.lab.legit", "serve") == ["/opt/py", "-m", "veloz.lab.legit",
                                                            "serve"]  # fmt: skip
    assert SshHost("192.0.2.10").python == ("python3",)  # an installed `veloz`
    assert SshHost("192.0.2.10", python_cmd=("/usr/bin/python3.11",)).python[0].endswith("3.11")
    path = tmp_path / "lab.toml"
    path.write_text('[hosts.tg]\nkind = "ssh"\naddress = "192.0.2.10"\n'
                    'python = "/srv/venv/bin/python"\n'
                    + PORTS.replace('host = "local"', 'host = "tg"', 1))  # fmt: skip
    topo = topology.load(path)
    assert topo.generator.host.python == ("/srv/venv/bin/python",)
    assert topo.generator.host.python_argv("veloz.lab.dnsapp")[:2] == ["/srv/venv/bin/python",
                                                                       "-m"]  # fmt: skip
    path.write_text(path.read_text().replace('"/srv/venv/bin/python"', "[]"))
    with pytest.raises(VelozError, match="'python' must be a command"):
        topology.load(path)
    assert LocalHost().python_argv("m") == [sys.executable, "-m", "m"]


def test_an_arm_can_take_a_variable_away():
    assert env_argv(["app"], {"A": None, "B": "1"}) == ["env", "-u", "A", "B=1", "app"]
    assert env_argv(["app"], None) == ["app"]
    # over SSH the same words reach the remote shell, quoted
    host = SshHost("192.0.2.10")
    try:
        assert shlex.split(host.argv(["app"], {"VZ_MODE": None})[-1]) == [
            "env",
            "-u",
            "VZ_MODE",
            "app",
        ]
    finally:
        host.close()
    done = LocalHost().run(["sh", "-c", 'echo "${X-unset}"'], env={"X": None})
    assert done.stdout == "unset\n"


def test_needs_are_checked_on_the_roles_host_in_one_line(tmp_path):
    topo = _load(tmp_path)
    topology.check(topo, [topology.Need("dut", "command", "sh"),
                          topology.Need("generator", "python", "json")])  # fmt: skip
    cases = [
        (topology.Need("dut", "command", "no-such-vz-cmd", "Debian package x"),
         "dut: no-such-vz-cmd is not installed on host local (Debian package x)"),
        (topology.Need("generator", "python", "no_such_vz_module"),
         "cannot import no_such_vz_module"),
        (topology.Need("dut", "tool", "no-such-vz-tool"), "dut: no-such-vz-tool"),
    ]  # fmt: skip
    for need, says in cases:
        with pytest.raises(VelozError) as e:
            topology.check(topo, [need])
        assert says in str(e.value) and "\n" not in str(e.value) and e.value.code == 1


def test_every_experiment_says_what_it_needs_where():
    """Each need names a role, a kind check() knows, and something to find."""
    seen = {}
    for name in bench.EXPERIMENTS:
        exp = EXPERIMENTS[name]
        settings = {"noises": ["none", "cpu"]}
        needs = exp.needs(settings) if hasattr(exp, "needs") else ()
        for n in needs:
            assert n.role in topology.ROLES and n.kind in ("command", "tool", "library", "python")
        seen[name] = {(n.role, n.name) for n in needs}
    assert ("dut", "stress-ng") in seen["noisy"] and ("dut", "knotd") in seen["udp-app"]
    assert ("generator", "dnsperf") in seen["udp-app"]
    assert ("dut", "veloz.lab.epoll_apps") in seen["udp-servers"]
    assert ("generator", "vz-udpd") in seen["udp-latency"]
    assert ("generator", "vz-udpd") not in seen["udp-throughput"]
    assert ("dut", "veloz.lab.legit") in seen["ddos"]
    assert EXPERIMENTS["noisy"].needs({"noises": ["none"]}) == ()


def test_local_files_are_staged_in_place_and_temp_dirs_removed(tmp_path):
    host = LocalHost()
    with host.staged(tmp_path) as there:
        assert there == str(tmp_path)  # this machine's files: no copy
    with host.temp_dir("veloz-unit-") as d:
        assert os.path.isdir(d) and os.path.basename(d).startswith("veloz-unit-")
        host.write_file(f"{d}/f", "x")
    assert not os.path.exists(d)


def test_schedstat_lines_sum_to_seconds():
    assert _schedstat_s("1500000000 2 3\n500000000 1 1\n\n") == pytest.approx(2.0)
    assert _schedstat_s("") == 0.0
    assert LocalHost().threads_cpu_s(os.getpid()) > 0
    assert LocalHost().threads_cpu_s(2**22 + 12345) == 0.0  # gone: 0


@pytest.mark.skipif(shutil.which("stress-ng") is None, reason="stress-ng is not installed")
def test_the_noisy_neighbour_runs_on_the_duts_host_and_stops(tmp_path, monkeypatch):
    topo = _load(tmp_path)
    started: list = []
    real = LocalHost.spawn

    def spawn(self, argv, env=None):
        started.append((self, real(self, argv, env)))
        return started[-1][1]

    monkeypatch.setattr(LocalHost, "spawn", spawn)
    with topology.use(topo), throughput.neighbour("cpu"):
        ((host, proc),) = started
        assert host is topo.dut.host and proc.args[0] == "stress-ng" and proc.poll() is None
    assert proc.returncode is not None  # stopped with the block
    with topology.use(topo), throughput.neighbour("none"):
        assert len(started) == 1  # no neighbour at all
