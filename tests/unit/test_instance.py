# SPDX-License-Identifier: BSD-2-Clause
"""Instance files (veloz/control/instance.py) without root: each key checked,
each fault one line; the command line an instance becomes; a ddos reload as
the difference between the running rules and the file's, in one transaction."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_ddos_rules import FakeCtl

from veloz.cli import parse_args
from veloz.cli import run as cli_run
from veloz.control import companion, ddos, instance
from veloz.control.objects import Ports
from veloz.core.errors import VelozError

REPO = Path(__file__).resolve().parents[2]
GOOD = """\
nf = "ddos"
backend = "xdp"
ports = ["lo"]
metrics = "127.0.0.1:9464"
ctl_group = "adm"
config = "ddos.toml"
[options]
interval = 5
replace = true
"""
RULES = '[[rule]]\nsrc = "198.18.200.0/24"\naction = "drop"\n'


def write(tmp_path: Path, text: str, name: str = "edge.toml") -> Path:
    (tmp_path / "ddos.toml").write_text(RULES)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_good_instance_and_its_command_line(tmp_path):
    inst = instance.load(str(write(tmp_path, GOOD)))
    assert (inst.name, inst.nf, inst.backend, inst.ports) == ("edge", "ddos", "xdp", ["lo"])
    assert inst.config_file == tmp_path / "ddos.toml" and inst.base == tmp_path
    assert inst.config_values() == {"rule": [{"src": "198.18.200.0/24", "action": "drop"}]}
    argv = instance.run_argv(inst)
    assert argv == ["run", "ddos", "--backend", "xdp", "--iface", "lo",
                    "--metrics", "127.0.0.1:9464", "--ctl-group", "adm",
                    "--interval", "5", "--replace"]  # fmt: skip
    # what `veloz run`'s own parser makes of it
    args = cli_run.instance_args(inst, parse_args(["run", "--instance", "x"]).run_parser)
    assert (args.nf, args.backend, args.iface, args.interval, args.replace) == (
        "ddos", "xdp", ["lo"], 5.0, True)  # fmt: skip


def test_an_inline_config_and_a_name(tmp_path, monkeypatch):
    text = (
        GOOD.replace('config = "ddos.toml"\n', "")
        + "[config]\n"
        + RULES.replace("[[rule]]", "[[config.rule]]")
    )
    write(tmp_path, text, "inline.toml")
    monkeypatch.setattr(instance, "INSTANCE_DIR", tmp_path)
    inst = instance.load("inline")
    assert inst.config_file is None and inst.base == tmp_path
    assert inst.config_values()["rule"][0]["action"] == "drop"


BAD = [
    ("nf = ", "not valid TOML"),
    ("colour = 1\n" + GOOD, "unknown key 'colour'"),
    (GOOD.replace('nf = "ddos"\n', ""), "nf is required"),
    (GOOD.replace('"ddos"', '"nosuch"'), "unknown NF 'nosuch'"),
    (GOOD.replace('nf = "ddos"', "nf = 3"), "nf must be a non-empty string"),
    (GOOD.replace('"xdp"', '"linux"'), "backend must be one of xdp, xdp-generic, afxdp, dpdk"),
    (GOOD.replace('["lo"]', '"lo"'), "ports must be a list of interface names"),
    (GOOD.replace('["lo"]', "[]"), "ports must be a list of interface names"),
    (GOOD.replace('["lo"]', '["vz-none0"]'), "ports: no interface vz-none0 here"),
    (GOOD.replace('["lo"]', '["lo", "lo"]'), "ports: an interface is named twice"),
    (GOOD.replace('["lo"]', '["a/b"]'), "ports: not an interface name"),
    (GOOD.replace('"ddos.toml"', '"missing.toml"'), "config: no such file"),
    (GOOD.replace('"ddos.toml"', "7"), "config must be a file name or a table"),
    (GOOD.replace('"127.0.0.1:9464"', "9464"), "metrics must be a non-empty string"),
    (GOOD.replace('"adm"', "true"), "ctl_group must be a group name or number"),
    ("persist = 1\n" + GOOD, "persist must be true or false"),
    ('kind = "vm"\n' + GOOD, "kind must be one of nf, udpd"),
    ('kind = "udpd"\n' + GOOD, "a udpd instance: `veloz udpd --instance` runs it"),
    ("colour = 2\n" + GOOD, "(known: kind, nf, backend"),
    ("queues = 2\n" + GOOD, "unknown key 'queues'"),
    (GOOD.replace("interval = 5", "queues = 2"), "queues is not an option of the xdp backend"),
    (GOOD.replace("interval = 5", "colour = 2"), "options: unknown option 'colour'"),
    (GOOD.replace("interval = 5", 'ctl_group = "x"'), "ctl_group is a key of its own"),
    (GOOD.replace("replace = true", "replace = 1"), "replace is a flag: true or false"),
    (GOOD.replace("interval = 5", "interval = [5]"), "interval must be a number, string or"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_each_bad_key_is_one_line(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(VelozError) as e:
        instance.load(str(path))
    assert message in str(e.value) and "\n" not in str(e.value)
    assert str(path) in str(e.value)


def veloz(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "veloz.cli", *argv], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


def test_the_cli_says_one_line_before_anything_runs(tmp_path):
    # a value only `veloz run`'s parser refuses (negative seconds)
    bad = write(tmp_path, GOOD.replace("interval = 5", "interval = -1"))
    done = veloz("run", "--instance", str(bad))
    assert done.returncode != 0 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and str(bad) in done.stderr
    done = veloz("run", "--instance", str(bad), "--workers", "2")
    assert done.returncode != 0 and "not --workers too" in done.stderr
    done = veloz("run", "ddos")
    assert done.returncode != 0 and "needs --backend, --iface" in done.stderr


def test_persist_needs_a_run_that_takes_it(tmp_path):
    inst = instance.load(str(write(tmp_path, "persist = true\n" + GOOD)))
    parser = parse_args(["run", "--instance", "x"]).run_parser
    if cli_run.has_persist(parser):  # the runner's flag has landed: it is passed on
        assert instance.run_argv(inst)[-1] == "--persist"
        assert cli_run.instance_args(inst, parser).persist
        return
    with pytest.raises(VelozError, match="^persist needs a veloz with --persist$"):
        cli_run.instance_args(inst, parser)
    # the check reads the parser: one with --persist passes it on
    parser.add_argument("--persist", action="store_true")
    assert cli_run.instance_args(inst, parser).persist


def test_a_udpd_instance(tmp_path):
    path = tmp_path / "dns.toml"
    path.write_text('kind = "udpd"\nmetrics = "127.0.0.1:9465"\n[config]\n'
                    'interface = "lo"\nipv4 = "198.18.0.3/24"\n')  # fmt: skip
    inst = instance.load(str(path), kind="udpd")
    assert inst.config_values() == {"interface": "lo", "ipv4": "198.18.0.3/24"}
    with pytest.raises(VelozError, match="a udpd instance"):
        instance.load(str(path))
    path.write_text('kind = "udpd"\nnf = "ddos"\n')
    with pytest.raises(VelozError, match="unknown key 'nf'"):
        instance.load(str(path), kind="udpd")
    done = veloz("udpd", "--instance", str(path), "--config", "x.toml")
    assert done.returncode != 0 and "not --config or --metrics too" in done.stderr


# ---- reload --------------------------------------------------------------------


def rule(**item) -> ddos.Rule:
    return ddos.parse_rule(item)


def holding(text: str) -> FakeCtl:
    """A running ddos NF as the start-up ops of a config leave it."""
    fake = FakeCtl()
    fake.apply(ddos.config_ops(parse_toml(text), Ports(), Path()))
    fake.applied.clear()
    return fake


def parse_toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)


OLD = """\
allow = ["198.18.0.0/24"]
[[rule]]
src = "198.18.200.0/24"
action = "drop"
[[rule]]
proto = "udp"
dport = 53
action = "limit"
rate = 100
burst = 10
[[rule]]
src = "198.18.210.0/24"
action = "allow"
"""
NEW = """\
allow = ["198.18.1.0/24"]
[[rule]]
src = "198.18.200.0/24"
action = "drop"
[[rule]]
proto = "udp"
dport = 54
action = "drop"
"""


def state(fake: FakeCtl) -> tuple:
    """The rules in use (slot, rule), the end, the allow-list."""
    slots, end = ddos.read_rules(fake)
    used = sorted((i, s.rule) for i, s in slots.items() if s.used)
    return used, end, sorted(map(str, ddos.read_allow(fake)))


def test_reload_ops_reach_what_a_fresh_start_holds():
    fake = holding(OLD)
    gen1 = ddos.read_rules(fake)[0][1].gen
    ops = ddos.reload_ops(fake, parse_toml(NEW), Ports(), Path())
    fake.apply(ops)
    assert state(fake) == state(holding(NEW))
    slots, end = ddos.read_rules(fake)
    assert slots[0].gen == 1  # unchanged: kept, not rewritten
    assert slots[1].gen == gen1 + 1  # changed: a new generation (fresh token buckets)
    assert not slots[2].used and end == 2
    # slot 0 untouched; slot 1 cleared first, then rewritten used = 0, then used = 1
    keys = [(op.map, op.key) for op in ops]
    assert (ddos.RULES, ddos.slot_key(0)) not in keys
    slot1 = [ddos.Rule.decode(op.value)[1] for op in ops
             if op.map == ddos.RULES and op.key == ddos.slot_key(1)]  # fmt: skip
    assert slot1 == [False, False, True]
    assert ops[-1] == ddos.meta_op(2)  # end lowered last
    # the same file again: nothing to do
    assert ddos.reload_ops(fake, parse_toml(NEW), Ports(), Path()) == []


def test_a_broken_file_reads_nothing_and_sends_nothing():
    fake = holding(OLD)
    before = state(fake)
    broken = NEW.replace('dport = 54\naction = "drop"', 'dport = 54\naction = "explode"')
    with pytest.raises(VelozError, match="config: rule 2: unknown action 'explode'"):
        ddos.reload_ops(fake, parse_toml(broken), Ports(), Path())
    assert fake.applied == [] and state(fake) == before


class FakeSession:
    """Ctl(path) for instance.reload: the fake maps, this process as the runner."""

    def __init__(self, fake: FakeCtl, pid: int) -> None:
        self.fake, self.pid = fake, pid

    def __call__(self, path: Path) -> FakeSession:
        return self

    def __enter__(self) -> FakeCtl:
        self.fake.peer_pid = lambda: self.pid  # type: ignore[attr-defined]
        return self.fake

    def __exit__(self, *exc: object) -> None:
        pass


def test_instance_reload_is_one_transaction_and_a_broken_file_changes_nothing(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(instance, "socket_path", lambda iface: tmp_path / f"{iface}.sock")
    monkeypatch.setattr(companion, "status_path", lambda iface, name: tmp_path / "status.json")
    (tmp_path / "ddos.toml").write_text(OLD)
    path = tmp_path / "edge.toml"
    path.write_text(GOOD.split("[options]")[0])
    inst = instance.load(str(path))
    with pytest.raises(VelozError, match="is not running here"):
        instance.reload(str(path))
    companion.write_status(tmp_path / "status.json",
                           {**instance.record(inst, inst.config_values()), "pid": 42})  # fmt: skip
    fake = holding(OLD)
    monkeypatch.setattr(instance, "Ctl", FakeSession(fake, 42))
    assert instance.reload(str(path)) == 0 and fake.applied == []

    (tmp_path / "ddos.toml").write_text(NEW)
    changes = instance.reload(str(path))
    assert len(fake.applied) == 1 and changes == len(fake.applied[0]) > 0
    assert state(fake) == state(holding(NEW))

    (tmp_path / "ddos.toml").write_text(OLD + "[[rule]]\naction = 'explode'\n")
    with pytest.raises(VelozError, match="config: rule 4"):
        instance.reload(str(path))
    (tmp_path / "ddos.toml").write_text("rule = [")
    with pytest.raises(VelozError, match="config file"):
        instance.reload(str(path))
    (tmp_path / "ddos.toml").write_text("threshold = 3\n" + OLD)
    with pytest.raises(VelozError, match="the NF config's fields changed: a new run applies them"):
        instance.reload(str(path))
    assert len(fake.applied) == 1 and state(fake) == state(holding(NEW))
    # another process on the socket (a run not of this instance): refused
    monkeypatch.setattr(instance, "Ctl", FakeSession(fake, 43))
    (tmp_path / "ddos.toml").write_text(OLD)
    with pytest.raises(VelozError, match="not served by instance edge's runner"):
        instance.reload(str(path))
    assert len(fake.applied) == 1
    assert json.loads((tmp_path / "status.json").read_text())["pid"] == 42
