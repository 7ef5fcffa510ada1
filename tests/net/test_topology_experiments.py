# SPDX-License-Identifier: BSD-2-Clause
"""Every experiment that once assumed the namespace testbed, on a topology
file: noisy, router, lb, ddos, udp-latency, udp-throughput, udp-app, soak and
udp-soak, each once with the shortest settings, against the same run on the
testbed.

The topology's DUT is reached over SSH (sshd inside vz-dut, as in
test_topology_ssh.py) for the cheap experiments, and is the namespace for the
two longest; either way its file moves every address an experiment adds
beyond the ports' own ([addresses]: udpd's, the VIP, lb's second backend, the
attacker), so a constant left from the testbed would show. The two runs must
have the same records with the same fields, and equal exact counts.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_topology_ssh import MGMT_DUT_IP, _xdp_on, sshd  # noqa: F401  (the fixture)

from veloz.core.proc import veloz_argv
from veloz.lab import route_table, topology
from veloz.lab.experiments import Context, router

# Each beside its testbed value (198.18.0.3, .0.4, .0.100, .1.3, .0.200)
MOVED = {"udpd": "198.18.0.13", "udpd_generator": "198.18.0.14", "vip": "198.18.0.110",
         "backend2": "198.18.1.13", "attacker": "198.18.0.210"}  # fmt: skip
PROBES = 12  # dnsapp.PROBES: the DNS queries every arm answers


def topology_file(tmp: Path, dut: str, python: str | None = None) -> Path:
    """The testbed's ports, the DUT over ssh or as its namespace, addresses moved
    (python: the DUT's Python for the lab's helpers, over ssh)."""
    tb = topology.testbed_topology()

    def port(p: topology.Port) -> str:
        return f'{{ iface = "{p.iface}", mac = "{p.mac}", ipv4 = "{p.ipv4}" }}'

    if dut == "ssh":
        veloz = json.dumps([sys.executable, "-m", "veloz.cli"])  # this checkout, over there
        dut_host = (f'kind = "ssh"\naddress = "{MGMT_DUT_IP}"\nidentity = "{tmp / "client"}"\n'
                    f'known_hosts = "{tmp / "known_hosts"}"\nveloz = {veloz}\n')  # fmt: skip
        dut_host += f'python = "{python}"\n' if python else ""
    else:
        dut_host = 'kind = "netns"\nnetns = "vz-dut"\n'
    path = tmp / f"moved-{dut}{'-python' if python else ''}.toml"
    path.write_text(
        f'name = "dut {dut}, addresses moved"\n'
        '[hosts.gen]\nkind = "netns"\nnetns = "vz-gen"\n'
        '[hosts.sink]\nkind = "netns"\nnetns = "vz-sink"\n'
        f"[hosts.dut]\n{dut_host}"
        f'[generator]\nhost = "gen"\nports = [{port(tb.generator.port)}]\n'
        f'[dut]\nhost = "dut"\nports = [{", ".join(port(p) for p in tb.dut.ports)}]\n'
        f'[sink]\nhost = "sink"\nports = [{port(tb.sink.port)}]\n'
        "[addresses]\n" + "".join(f'{k} = "{v}"\n' for k, v in MOVED.items())
    )
    return path


def bench(tmp: Path, out: str, experiment: str, *args: str) -> dict:
    argv = veloz_argv("bench", experiment, "--trials", "1", "--no-report", "--out",
                      str(tmp / out), *args)  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((tmp / out / f"{experiment}.json").read_text())


def left_behind() -> list[str]:
    """Processes left in the three namespaces (sshd apart), and lab files."""
    netns = {os.stat(f"/run/netns/{n}").st_ino for n in ("vz-gen", "vz-dut", "vz-sink")}
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino not in netns:
                continue
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "sshd" not in cmd:
            left.append(cmd)
    tmp = tempfile.gettempdir()
    return left + glob.glob(f"{tmp}/veloz-lab-*") + glob.glob(f"{tmp}/veloz-knot-*")


def _tags(exp: str, r: dict) -> tuple:
    return tuple(r.get(k) for k in ("kind", "backend", "stack", "noise", "rate", "payload"))


# experiment: (its shortest settings, the DUT's host, fields that must be
# equal record by record in the two runs: exact counts, not rates)
CASES = {
    "noisy": (["--backends", "xdp", "--noises", "none,cpu", "--seconds", "0.5"], "ssh", ()),
    "lb": (["--backends", "xdp,linux", "--seconds", "0.5"], "ssh", ()),
    # (the flood is paced by duration: its count is check()'s, within 1%)
    "ddos": (["--backends", "xdp", "--rates", "1M"], "ssh", ()),
    "soak": (["--backends", "xdp", "--rates", "100k", "--seconds", "1"], "ssh",
             ("sent", "counted", "taken", "unaccounted")),
    "udp-latency": (["--sizes", "18"], "ssh", ("sent", "received", "lost")),
    "udp-app": (["--seconds", "0.5"], "ssh", ("answered", "same_as_kernel")),
    "udp-throughput": (["--sizes", "18", "--seconds", "0.5"], "netns", ()),
    "udp-soak": (["--rates", "20k", "--seconds", "1"], "netns", ("unaccounted",)),
}  # fmt: skip


def check(exp: str, r: dict) -> None:
    """What each record must say, on the testbed and on the topology alike."""
    if exp == "noisy" or (exp == "lb" and r["backend"] == "xdp"):
        # the drop NF took every frame; the lb NF tunnelled every one back
        assert r["sent"] > 0 and r["counted"] == r["sent"] and r["lost"] == 0, r
    elif exp == "lb":  # the kernel's DNAT to the sink's two addresses
        assert r["done"] > 0, r
    elif exp == "ddos":
        if r["rate"]:  # the rule drops the flood's source: the attacker of [addresses]
            # a paced flood for --duration: its last batch may miss the end
            # on a loaded machine (2,999,000 seen), so within 1% of rate x 3 s
            assert abs(r["attack_sent"] - 3_000_000) <= 30_000, r
            assert 0 < r["dropped"] <= r["attack_sent"], r
        else:
            assert r["attack_sent"] == 0 and r["dropped"] == 0 and r["answered"] >= 0.9, r
    elif exp == "soak" and r["kind"] == "probe":  # 3 s at the rate: all dropped
        assert r["sent"] == r["counted"] == 300_000, r
    elif exp in ("soak", "udp-soak"):  # udp-soak's probes balance too
        assert r["sent"] > 0 and r["unaccounted"] == 0 and r["samples"] >= 1, r
    elif exp == "udp-latency":
        assert r["sent"] == r["received"] == 2000 and r["cpu_dut_pct"] > 0, r
    elif exp == "udp-app":
        assert r["answered"] == r["same_as_kernel"] == PROBES, r
    elif exp == "udp-throughput":
        assert r["sent"] > 0 and r["arrived"] > 0, r


@pytest.mark.parametrize("exp", list(CASES))
def test_the_experiment_on_a_topology_equals_the_testbed_run(sshd, exp):  # noqa: F811
    args, dut, exact = CASES[exp]
    there = bench(sshd, f"{exp}-{dut}", exp, *args, "--topology",
                  str(topology_file(sshd, dut)))  # fmt: skip
    assert left_behind() == []
    here = bench(sshd, f"{exp}-testbed", exp, *args)
    assert there["topology"]["dut"]["host"]["kind"] == dut
    assert there["topology"]["addresses"] | MOVED == there["topology"]["addresses"]
    assert here["topology"]["addresses"]["udpd"] == "198.18.0.3"
    # the same records, with the same fields, in the same order
    assert [_tags(exp, r) for r in there["records"]] == [_tags(exp, r) for r in here["records"]]
    for a, b in zip(there["records"], here["records"], strict=True):
        assert sorted(k for k in a if not k.startswith("slope")) == sorted(
            k for k in b if not k.startswith("slope")), (exp, a, b)  # fmt: skip
        for rec in (a, b):
            check(exp, rec)
        for k in exact:
            assert a.get(k) == b.get(k), (exp, k, a, b)
    assert [s["title"] for s in there["sections"]] == [s["title"] for s in here["sections"]]
    assert _xdp_on("vz-dut", "dut-gen") is None and left_behind() == []


def test_router_over_ssh_with_a_small_table(sshd, monkeypatch):  # noqa: F811
    """router's configs are written here and copied to the DUT over SSH (the
    full table named relatively beside its config), its kernel routes via the
    sink's address of the topology. The full table is cut to 2,000 routes
    and the cost phase (local, as `bench cost`) left out, to stay short."""
    monkeypatch.setattr(route_table, "PAPER_ROUTES", 2000)
    monkeypatch.setattr(router.Router, "cost", lambda *_: None)
    settings = {"trials": 1, "backends": ["xdp", "linux"], "sizes": [64], "seconds": 0.5}

    def run(topo: topology.Topology) -> list[dict]:
        ctx = Context(settings=settings)
        with topology.use(topo):
            topology.check(topo)
            router.ROUTER.run(ctx)
        return ctx.records

    # the testbed's own run of the same experiment is test_nf_benches'; here
    # the same arms and tables, each once
    there = run(topology.load(topology_file(sshd, "ssh")))
    arms = ("generator", "xdp trie", "xdp dir24", "linux")
    assert sorted((r["table"], r["arm"]) for r in there) == sorted(
        (t, a) for t in ("one route", "full table") for a in arms)  # fmt: skip
    for r in there:
        assert r["sent"] > 0 and r["done"] > 0, r
        if r["backend"] == "xdp":
            assert r["loss"] == 0, r  # every destination routed to the sink
    assert _xdp_on("vz-dut", "dut-sink") is None and left_behind() == []


def test_what_a_host_lacks_is_one_line_before_anything_runs(sshd):  # noqa: F811
    """ddos runs its legitimate server with veloz's Python on the DUT: a
    Python there without veloz is named, and nothing starts."""
    path = topology_file(sshd, "ssh", python="/usr/bin/python3")  # the system's: no veloz
    argv = veloz_argv("bench", "ddos", "--backends", "xdp", "--rates", "1M", "--trials", "1",
                      "--no-report", "--out", str(sshd / "lacking"),
                      "--topology", str(path))  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].endswith("dut: /usr/bin/python3 on host dut cannot import veloz.lab.legit")
    assert not (sshd / "lacking" / "ddos.json").exists() and left_behind() == []
