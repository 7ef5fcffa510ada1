# SPDX-License-Identifier: BSD-2-Clause
"""The lab's topology file and hosts, without root or a network."""

import shlex
import signal
import subprocess
import sys
import textwrap

import pytest

from veloz.core.errors import VelozError
from veloz.lab import topology, trial
from veloz.lab.hosts import Host, LocalHost, NetnsHost, SshHost

GOOD = """
name = "two boxes"

[hosts.tg]
kind = "ssh"
address = "192.0.2.10"
user = "lab"
port = 2222
identity = "key"
options = ["ProxyJump=bastion"]
veloz = ["/opt/veloz/bin/veloz"]

[hosts.server]
kind = "netns"
netns = "vz-dut"

[generator]
host = "tg"
iface = "ens1f0"
mac = "02:00:C6:12:00:01"
ipv4 = "198.18.0.1"
ipv6 = "fd00:198:18::1"

[dut]
host = "server"
ports = [{ iface = "p0", mac = "02:00:c6:12:00:02", ipv4 = "198.18.0.2" },
         { iface = "p1", mac = "02:00:c6:12:01:01", ipv4 = "198.18.1.1" }]

[sink]
host = "tg"
iface = "ens1f1"
mac = "02:00:c6:12:01:02"
ipv4 = "198.18.1.2"
"""


def _write(tmp_path, text: str):
    (tmp_path / "key").write_text("not a real key\n")
    path = tmp_path / "lab.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_file_names_each_role_its_host_and_ports(tmp_path):
    topo = topology.load(_write(tmp_path, GOOD))
    assert topo.name == "two boxes"
    tg = topo.generator.host
    assert isinstance(tg, SshHost) and topo.sink.host is tg  # one host, two roles
    assert (tg.host, tg.user, tg.port) == ("192.0.2.10", "lab", 2222)
    assert tg.identity == str(tmp_path / "key")  # relative to the file
    assert tg.veloz_argv("gen") == ["/opt/veloz/bin/veloz", "gen"]
    assert isinstance(topo.dut.host, NetnsHost) and topo.dut.host.netns == "vz-dut"
    assert topo.generator.port.mac == "02:00:c6:12:00:01"  # normalised
    assert [p.iface for p in topo.dut.ports] == ["p0", "p1"]
    assert len(topo.hosts()) == 2
    described = topo.describe()
    assert described["dut"]["host"] == {"name": "server", "kind": "netns", "netns": "vz-dut"}


def test_the_trial_takes_every_address_from_the_topology(tmp_path):
    topo = topology.load(_write(tmp_path, GOOD))
    argv = trial.gen_argv("drop", 64, 1000, 1.0, None, 4, topo=topo)
    assert argv[0] == "/opt/veloz/bin/veloz"
    got = dict(zip(argv[::1], argv[1:], strict=False))
    assert got["--iface"] == "ens1f0"
    assert (got["--src-mac"], got["--dst-mac"]) == ("02:00:c6:12:00:01", "02:00:c6:12:00:02")
    assert (got["--src-ip"], got["--dst-ip"]) == ("198.18.0.1", "198.18.1.2")
    # tx: addressed to the generator itself (the last --dst-ip wins)
    tx = trial.gen_argv("tx", 64, 1000, 1.0, None, 4, topo=topo)
    assert tx[len(tx) - 1 - tx[::-1].index("--dst-ip") + 1] == "198.18.0.1"
    assert trial.nf_args("redirect", "xdp", topo) == ["--iface", "p1", "--set", "port=p1"]


def test_the_testbed_is_the_default_topology():
    topo = topology.current()
    assert topo.name == "testbed"
    assert (topo.generator.host.netns, topo.dut.host.netns, topo.sink.host.netns) == (
        "vz-gen",
        "vz-dut",
        "vz-sink",
    )
    assert [p.iface for p in topo.dut.ports] == ["dut-gen", "dut-sink"]
    # the generator's frames: exactly what `veloz gen` defaults to on the testbed
    argv = trial.gen_argv("drop", 64, 1000, 1.0, None, 1)
    assert argv[:3] == [sys.executable, "-m", "veloz.cli"]
    assert "02:00:c6:12:00:02" in argv and "198.18.1.2" in argv


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (("port = 2222", "port = 70000"), "'port' must be a whole number"),
        (('kind = "netns"', 'kind = "vm"'), "'kind' must be one of"),
        (('mac = "02:00:C6:12:00:01"', 'mac = "02:00"'), "not a MAC address"),
        (('ipv4 = "198.18.0.1"', 'ipv4 = "198.18.0.300"'), "198.18.0.300"),
        (('host = "server"', 'host = "nowhere"'), "no host 'nowhere'"),
        (('identity = "key"', 'identity = "missing"'), "'identity': no file"),
        (('address = "192.0.2.10"', 'address = "-oProxyCommand=x"'), "not a host name"),
        (('user = "lab"', 'user = "lab; rm"'), "not a user name"),
        (('name = "two boxes"', 'colour = "red"'), "unknown key 'colour'"),
        (("[sink]", "[unused]"), "unknown key 'unused'"),
        (('{ iface = "p1", mac = "02:00:c6:12:01:01", ipv4 = "198.18.1.1" }', ""), "two ports"),
        (('options = ["ProxyJump=bastion"]', 'options = ["-oFoo"]'), "'options' must be"),
        (("[dut]", "[dut]\nextra = 1"), "unknown key 'extra'"),
    ],
)
def test_a_bad_file_is_one_clear_line(tmp_path, change, says):
    text = GOOD.replace(*change)
    assert text != GOOD
    with pytest.raises(VelozError) as e:
        topology.load(_write(tmp_path, text))
    msg = str(e.value)
    assert says in msg and "\n" not in msg and str(tmp_path / "lab.toml") in msg


def test_not_toml_and_no_file(tmp_path):
    with pytest.raises(VelozError, match="not TOML"):
        topology.load(_write(tmp_path, "[generator\n"))
    with pytest.raises(VelozError, match="cannot read topology"):
        topology.load(tmp_path / "absent.toml")


def test_use_sets_the_current_topology_and_closes_its_hosts(tmp_path):
    topo = topology.load(_write(tmp_path, GOOD))
    closed = []
    topo.generator.host.close = lambda: closed.append("tg")  # type: ignore[method-assign]
    with topology.use(topo):
        assert topology.current() is topo
    assert topology.current().name == "testbed" and closed == ["tg"]


def test_local_host_runs_spawns_reads_and_writes(tmp_path):
    host = LocalHost()
    done = host.run(["sh", "-c", 'printf "%s" "$X"'], env={"X": "a b"})
    assert done.returncode == 0 and done.stdout == "a b"
    done, cpu = host.run_measured(
        [
            sys.executable,
            "-c",
            "import time\nt=time.process_time()\nwhile time.process_time()-t<0.2: pass",
        ],
        timeout=30,
    )
    assert done.returncode == 0 and cpu >= 0.15  # the child's own CPU time, not wall time
    path = tmp_path / "f"
    host.write_file(str(path), "hello\n")
    assert host.read_file(str(path)) == "hello\n"
    # SIGINT blocked before "up": sent between the print and sigwait, it would
    # otherwise raise KeyboardInterrupt there, and the child exits without "bye"
    proc = host.spawn([sys.executable, "-c", "import signal\n"
                       "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\n"
                       "print('up', flush=True)\n"
                       "signal.sigwait([signal.SIGINT])\nprint('bye')"])  # fmt: skip
    assert proc.stdout.readline() == "up\n"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert out == "bye\n" and Host.pid(proc) == proc.pid


def test_ssh_argv_quotes_for_the_remote_shell_and_never_prompts(tmp_path):
    host = SshHost("192.0.2.10", user="lab", port=2222, identity="/k", known_hosts="/kh",
                   options=["ProxyJump=b"])  # fmt: skip
    try:
        argv = host.argv(["echo", "a b", "$HOME;x"], env={"V": "1 2"})
        assert argv[-3:-1] == ["lab@192.0.2.10", "--"]
        remote = argv[-1]
        assert shlex.split(remote) == ["env", "V=1 2", "echo", "a b", "$HOME;x"]
        joined = " ".join(argv[:-1])
        for want in ("BatchMode=yes", "StrictHostKeyChecking=yes", "-p 2222", "-i /k",
                     "UserKnownHostsFile=/kh", "ProxyJump=b", "-F none"):  # fmt: skip
            assert want in joined
    finally:
        host.close()


def test_ssh_run_measured_reads_the_remote_shells_times(tmp_path, monkeypatch):
    """The `times` lines come off stderr; the command's own stderr stays."""
    host = SshHost("192.0.2.10")
    fake = subprocess.CompletedProcess(
        [], 0, stdout='{"x": 1}\n', stderr="warning\n0m0.010s 0m0.000s\n0m1.500s 0m0.250s\n"
    )
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: fake)
    try:
        done, cpu = host.run_measured(["veloz", "gen"], timeout=5)
    finally:
        monkeypatch.undo()
        host.close()
    assert cpu == pytest.approx(1.75) and done.stderr == "warning\n"
