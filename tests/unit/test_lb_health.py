# SPDX-License-Identifier: BSD-2-Clause
"""lb's health checks (python/veloz/control/health.py) without root: the
check config and its errors, the rise/fall state machine and the schedule on
a fake clock, the transactions a drain and a restore make against an
in-memory lb (only the failed backend's Maglev slots move; it comes back to
the same ones), real probes on loopback, and the metrics and lines that show
the result."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from test_lb_maglev import FakeCtl, run
from test_monitoring import needs_promtool, promtool

from veloz.control import health, lb, metrics
from veloz.control.objects import Ports
from veloz.core.errors import VelozError

VIP = "198.18.100.1"
BACKENDS = ["198.18.1.10", "198.18.1.11", "198.18.1.12"]


def config(check: object = None, backends: list | None = None, **vip: object) -> dict:
    table = {"address": VIP, "port": 80, "proto": "tcp",
             "backends": BACKENDS if backends is None else backends, **vip}  # fmt: skip
    if check is not None:
        table["check"] = check
    return {"lb": {"source4": "198.18.0.1", "next_hop_mac": "02:00:00:00:00:fe"}, "vip": [table]}


def ip(text: str) -> lb.Address:
    return ipaddress.ip_address(text)


# ---- config -------------------------------------------------------------------


def test_vip_check_is_every_backends_default_and_a_backend_may_replace_it():
    backends = [BACKENDS[0], {"address": BACKENDS[1], "weight": 2},
                {"address": BACKENDS[2], "check": {"type": "http", "path": "/health",
                                                   "status": 204, "port": 8080}}]  # fmt: skip
    checked = health.targets(config({"type": "tcp", "rise": 1, "fall": 5}, backends))
    assert [str(t.address) for t in checked] == BACKENDS
    tcp = health.Check("tcp", 80, interval=1.0, timeout=0.5, rise=1, fall=5)
    assert checked[0].check == checked[1].check == tcp
    assert checked[2].check == health.Check("http", 8080, path="/health", status=204)
    assert all(t.vip == lb.parse_vip(VIP, 80, "tcp") for t in checked)


def test_no_check_no_targets_and_udp_fields():
    assert health.targets(config()) == []
    only = [{"address": BACKENDS[0],
             "check": {"type": "udp", "send": "ping", "expect": "pong", "interval": 2,
                       "timeout": 2}}, BACKENDS[1]]  # fmt: skip
    (t,) = health.targets(config(backends=only))
    assert t.check == health.Check("udp", 80, 2.0, 2.0, send=b"ping", expect=b"pong")
    (t,) = health.targets(config({"type": "udp", "send": "x"}, backends=[BACKENDS[0]]))
    assert t.check.expect is None


@pytest.mark.parametrize(
    "check, message",
    [
        ("tcp", "check must be a table"),
        ({"port": 80}, "type must be one of tcp, http, udp, not None"),
        ({"type": "icmp"}, "type must be one of tcp, http, udp, not 'icmp'"),
        ({"type": "tcp", "path": "/"}, "a tcp check has no key 'path'"),
        ({"type": "http", "send": "x"}, "a http check has no key 'send'"),
        ({"type": "tcp", "intervall": 1}, "no key 'intervall'"),
        ({"type": "tcp", "port": 0}, "port must be a whole number 1-65535, not 0"),
        ({"type": "tcp", "port": 65536}, "port must be a whole number 1-65535"),
        ({"type": "tcp", "port": "80"}, "port must be a whole number 1-65535, not '80'"),
        ({"type": "tcp", "port": True}, "port must be a whole number"),
        ({"type": "tcp", "interval": 0.05}, "interval must be at least 0.1 s"),
        ({"type": "tcp", "interval": 3601}, "interval must be seconds from 0.01 to 3600"),
        ({"type": "tcp", "interval": "1s"}, "interval must be seconds"),
        ({"type": "tcp", "interval": float("nan")}, "interval must be seconds"),
        ({"type": "tcp", "interval": 1, "timeout": 1.5}, "timeout must be seconds from 0.01 to 1"),
        ({"type": "tcp", "timeout": 0}, "timeout must be seconds"),
        ({"type": "tcp", "rise": 0}, "rise must be a whole number 1-100, not 0"),
        ({"type": "tcp", "fall": 101}, "fall must be a whole number 1-100, not 101"),
        ({"type": "tcp", "fall": 2.5}, "fall must be a whole number 1-100, not 2.5"),
        ({"type": "http", "status": 99}, "status must be a whole number 100-599"),
        ({"type": "http", "path": "health"}, "path must start with /"),
        ({"type": "http", "path": "/a b"}, "path must start with /"),
        ({"type": "http", "path": ""}, "path must be a string of 1-1024 bytes"),
        ({"type": "udp"}, "a udp check needs send"),
        ({"type": "udp", "send": 7}, "send must be a string of 1-1024 bytes, not 7"),
        ({"type": "udp", "send": "x" * 1025}, "send must be a string of 1-1024 bytes"),
        ({"type": "udp", "send": "x", "expect": ""}, "expect must be a string"),
    ],
)
def test_each_bad_field_is_one_line_naming_it(check: object, message: str):
    for values, where in (
        (config(check), f"vip {VIP}:80/tcp check"),
        (config(backends=[{"address": BACKENDS[0], "check": check}]),
         f"vip {VIP}:80/tcp backend {BACKENDS[0]} check"),
    ):  # fmt: skip
        for parse in (health.targets, lambda v: lb.config_ops(v, Ports(), Path("."))):
            with pytest.raises(VelozError) as err:
                parse(values)
            text = str(err.value)
            assert message in text and where in text and "\n" not in text, text


def test_on_all_down_is_checked_and_sets_the_vip_flag():
    with pytest.raises(VelozError, match='on_all_down must be "drop" or "pass", not \'up\''):
        lb.config_ops(config(on_all_down="up"), Ports(), Path("."))
    for mode, flags in (("drop", 0), ("pass", lb.VIP_PASS_ALL_DOWN)):
        ops = lb.config_ops(config(on_all_down=mode), Ports(), Path("."))
        (vip,) = [op for op in ops if op.map == lb.VIPS]
        assert lb.VIP_VALUE.unpack(vip.value).flags == flags
    assert lb.VIP_PASS_ALL_DOWN == 1 and lb.BACKEND_DOWN == 2  # include/veloz/abi.h


# ---- the state machine and the schedule, on a fake clock -------------------------


def test_up_until_fall_failures_then_down_until_rise_successes():
    h = health.Health(rise=2, fall=3)
    assert h.up and h.last is None
    assert not h.record("fail", 1.0) and not h.record("timeout", 2.0)
    assert not h.record("ok", 3.0)  # a success breaks the run of failures
    assert not h.record("fail", 4.0) and not h.record("fail", 5.0)
    assert h.record("timeout", 6.0, "no answer") and not h.up and h.changed == 6.0
    assert (h.failures, h.successes, h.detail) == (3, 0, "no answer")
    assert not h.record("fail", 7.0)  # down stays down: no second change
    assert not h.record("ok", 8.0) and not h.up
    assert not h.record("fail", 9.0)
    assert not h.record("ok", 10.0) and h.record("ok", 11.0) and h.up and h.changed == 11.0
    assert h.counts == {"ok": 4, "fail": 5, "timeout": 2}
    with pytest.raises(ValueError):
        h.record("maybe", 12.0)


def test_checker_probes_every_interval_and_goes_down_after_fall_intervals():
    check = health.Check("tcp", 80, interval=1.0, timeout=0.5, rise=2, fall=3)
    t = health.Target(lb.parse_vip(VIP, 80, "tcp"), ip(BACKENDS[0]), check)
    other = health.Target(t.vip, ip(BACKENDS[1]), t.check)
    c = health.Checker([t, other], now=100.0)
    assert c.due(100.0) == [0] and c.due(100.4) == [] and c.due(100.5) == [1]
    assert c.due(200.0) == []  # running: never two probes of one target at once
    now, changes = 100.0, []
    for _ in range(3):
        now += 0.2  # a failure seen 0.2 s after its probe started
        changes.append(c.done(0, now - 0.2, now, "fail", "refused", wall=now))
        assert c.next_due() == pytest.approx(now - 0.2 + 1.0)
        now = c.next_due()
        assert c.due(now) == [0]
    assert changes == [False, False, True] and c.pending() == [0]
    c.applied[0] = False
    assert c.pending() == []
    # a probe that took longer than the interval: the next starts at once
    assert not c.done(0, now, now + 1.5, "ok", "", wall=now + 1.5)
    assert c.next_due() == now + 1.5
    status = c.status(runner=4242)
    row = status["vips"][f"{VIP}:80/tcp"]
    assert status["pid"] == 4242 and row["up"] == 1 and row["on_all_down"] == "drop"
    b = row["backends"][BACKENDS[0]]
    assert (b["up"], b["in_ring"], b["last"], b["successes"], b["failures"]) == (
        False, False, "ok", 1, 0)  # fmt: skip
    assert b["checks"] == {"ok": 1, "fail": 3, "timeout": 0} and b["changed"] is not None


# ---- drain and restore: the transactions ------------------------------------------


def started(**vip: object) -> FakeCtl:
    """A FakeCtl holding what `veloz run lb` installs from config()."""
    ctl = FakeCtl()
    ctl.apply(lb.config_ops(config(**vip), Ports(), Path(".")))
    return ctl


def target(address: str) -> health.Target:
    return health.Target(lb.parse_vip(VIP, 80, "tcp"), ip(address), health.Check("tcp", 80))


def entry(ctl: FakeCtl, bid: int) -> lb.Backend:
    b = lb.Backend.unpack(ctl.maps_[lb.BACKENDS][lb.u32(bid)])
    assert b is not None
    return b


def test_drain_moves_only_the_failed_backends_slots_and_restore_gives_them_back():
    ctl = started()
    ring0 = ctl.ring(0)
    ids = {str(entry(ctl, i).address): i for i in (1, 2, 3)}
    failed = ids[BACKENDS[1]]
    mine = {s for s, owner in enumerate(ring0) if owner == failed}
    assert len(mine) > lb.RING_SIZE // 4

    moved = health.apply_change(ctl, target(BACKENDS[1]), up=False)
    (ops,) = ctl.applied[-1:]
    assert [op.map for op in ops] == [lb.RING] * len(mine) + [lb.BACKENDS]  # ring first
    ring1 = ctl.ring(0)
    assert moved == len(mine)
    assert {s for s in range(lb.RING_SIZE) if ring1[s] != ring0[s]} == mine
    assert {ring1[s] for s in mine} == {ids[BACKENDS[0]], ids[BACKENDS[2]]}  # both share them
    b = entry(ctl, failed)
    assert (b.valid, b.down, str(b.address)) == (False, True, BACKENDS[1])

    assert health.apply_change(ctl, target(BACKENDS[1]), up=False) == 0  # drained already
    moved = health.apply_change(ctl, target(BACKENDS[1]), up=True)
    (ops,) = ctl.applied[-1:]
    assert ops[0].map == lb.BACKENDS and ops[0].key == lb.u32(failed)  # entry first
    assert moved == len(mine) and ctl.ring(0) == ring0  # the same id, the same slots
    b = entry(ctl, failed)
    assert (b.valid, b.down) == (True, False)


def test_a_full_maglev_rebuild_would_move_other_backends_slots():
    """Why a drain does not recompute the whole table: Maglev alone moves some
    slots between the survivors too, and those are flows of healthy backends."""
    members = {i + 1: lb.Backend(ip(a)) for i, a in enumerate(BACKENDS)}
    full = lb.ring_ids(members)
    rebuilt = lb.ring_ids({i: b for i, b in members.items() if i != 2})
    assert any(a != b for a, b in zip(full, rebuilt, strict=True) if a != 2)


def test_all_down_empties_the_ring_and_a_drained_id_is_never_reused():
    ctl = started(on_all_down="pass")
    for address in BACKENDS:
        health.apply_change(ctl, target(address), up=False)
    assert set(ctl.ring(0)) == {0}
    run(ctl, "backend", "add", VIP, "80", "tcp", "198.18.1.20")
    added = {str(entry(ctl, i).address): i for i in range(1, 5)}
    assert added["198.18.1.20"] == 4  # not one of the drained ids 1-3
    with pytest.raises(VelozError, match="is a backend of"):
        run(ctl, "backend", "add", VIP, "80", "tcp", BACKENDS[0])  # drained, still known
    rows = lb.vip_rows(lb.State.read(ctl))
    assert [(b["address"], b["down"]) for b in rows[0]["backends"]] == [
        *((a, True) for a in BACKENDS), ("198.18.1.20", False)]  # fmt: skip
    assert rows[0]["on_all_down"] == "pass"


def test_ctl_backend_del_of_a_drained_backend_ends_its_checks_changes(capsys):
    ctl = started()
    health.apply_change(ctl, target(BACKENDS[0]), up=False)
    ring = ctl.ring(0)
    run(ctl, "backend", "del", VIP, "80", "tcp", BACKENDS[0])
    assert "(down) removed" in capsys.readouterr().out and ctl.ring(0) == ring
    b = entry(ctl, 1)
    assert (b.valid, b.down) == (False, False)  # a tombstone, reusable
    assert health.apply_change(ctl, target(BACKENDS[0]), up=True) == 0  # not brought back
    assert ctl.ring(0) == ring


def test_lb_stats_and_vip_list_say_a_vip_has_no_backend_up(capsys):
    ctl = started()
    for address in BACKENDS:
        health.apply_change(ctl, target(address), up=False)
    capsys.readouterr()
    run(ctl, "lb-stats")
    text = capsys.readouterr().out
    assert "no backend up: its traffic is dropped" in text
    assert text.count("(down)") == 3
    run(ctl, "vip", "list")
    assert "(no backend up: dropped)" in capsys.readouterr().out
    run(ctl, "lb-stats", "--json")
    assert '"up": 0' in capsys.readouterr().out


# ---- probes, for real, on loopback -----------------------------------------------


@contextlib.contextmanager
def server(kind: int, answer: bytes | None):
    """A loopback server: TCP accepts, reads and answers, then closes (without
    an answer it holds the connection, silent); UDP answers each datagram.
    Yields its port."""
    sock = socket.socket(socket.AF_INET, kind)
    sock.bind(("127.0.0.1", 0))
    if kind == socket.SOCK_STREAM:
        sock.listen(8)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        sock.settimeout(0.05)
        while not stop.is_set():
            try:
                if kind == socket.SOCK_DGRAM:
                    data, peer = sock.recvfrom(2048)
                    if answer is not None:
                        sock.sendto(answer + data, peer)
                    continue
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            if answer is None:
                held.append(conn)
                continue
            with conn:
                conn.settimeout(1)
                conn.recv(2048)
                conn.sendall(answer)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        t.join()
        for conn in held:
            conn.close()
        sock.close()


def probe(check: health.Check) -> tuple[str, str]:
    return health.probe(health.Target(lb.parse_vip(VIP, 80, "tcp"), ip("127.0.0.1"), check))


def free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_probes_on_loopback():
    with server(socket.SOCK_STREAM, b"HTTP/1.0 200 OK\r\n\r\n") as port:
        assert probe(health.Check("tcp", port)) == ("ok", "")
        assert probe(health.Check("http", port, path="/health")) == ("ok", "")
        assert probe(health.Check("http", port, status=204)) == ("fail", "HTTP status 200")
    with server(socket.SOCK_STREAM, None) as port:  # accepts, never answers
        assert probe(health.Check("http", port, timeout=0.2))[0] == "timeout"
    result, detail = probe(health.Check("tcp", free_port(socket.SOCK_STREAM)))
    assert (result, detail) == ("fail", "Connection refused")
    with server(socket.SOCK_DGRAM, b"pong ") as port:
        assert probe(health.Check("udp", port, send=b"ping", expect=b"pong")) == ("ok", "")
        assert probe(health.Check("udp", port, send=b"ping", expect=b"PONG"))[0] == "fail"
    with server(socket.SOCK_DGRAM, None) as port:  # a silent peer
        assert probe(health.Check("udp", port, timeout=0.2, send=b"ping"))[0] == "timeout"
    # ICMP port unreachable on loopback: refused, not a timeout
    assert probe(health.Check("udp", free_port(socket.SOCK_DGRAM), send=b"x"))[0] == "fail"


# ---- what readers show -------------------------------------------------------------


def status() -> dict:
    c = health.Checker([target(BACKENDS[0]), target(BACKENDS[1])], now=0.0)
    for _ in range(3):
        c.done(0, 0.0, 0.0, "fail", "Connection refused", wall=1.0)
    c.done(1, 0.0, 0.0, "ok", "", wall=1.0)
    c.done(1, 0.0, 0.0, "timeout", "no answer", wall=1.0)
    return c.status(runner=7)


def lb_rows() -> list[dict]:
    """lb.stats()'s VIP rows: .10 drained, .11 up, .12 never checked, and a
    tombstone of .10 from an earlier add (frames counted, no longer live)."""

    def b(address: str, valid: bool, down: bool) -> dict:
        return {"address": address, "valid": valid, "down": down, "packets": 1, "bytes": 64}

    backends = [b(BACKENDS[0], False, False), b(BACKENDS[0], False, True),
                b(BACKENDS[1], True, False), b(BACKENDS[2], True, False)]  # fmt: skip
    return [
        {"vip": f"{VIP}:80/tcp", "packets": 4, "bytes": 256, "backends": backends, "up": 2},
        {"vip": "198.18.100.2:80/tcp", "packets": 0, "bytes": 0, "backends": [], "up": 0},
    ]


def exposition(status: dict | None) -> str:
    class Collector:
        def collect(self):
            return metrics.lb_health(lb_rows(), status)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def test_metrics_names_and_values():
    text = exposition(status())
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for f in text_string_to_metric_families(text) for s in f.samples}  # fmt: skip
    vip = ("vip", f"{VIP}:80/tcp")
    assert got[("veloz_lb_backend_up", (("backend", BACKENDS[0]), vip))] == 0
    assert got[("veloz_lb_backend_up", (("backend", BACKENDS[1]), vip))] == 1
    assert got[("veloz_lb_backend_up", (("backend", BACKENDS[2]), vip))] == 1  # unchecked
    assert got[("veloz_lb_vip_healthy_backends", (vip,))] == 2
    assert got[("veloz_lb_vip_healthy_backends", (("vip", "198.18.100.2:80/tcp"),))] == 0
    key = ("veloz_lb_health_checks_total", (("backend", BACKENDS[0]), ("result", "fail"), vip))
    assert got[key] == 3
    key = ("veloz_lb_health_checks_total", (("backend", BACKENDS[1]), ("result", "timeout"), vip))
    assert got[key] == 1
    key = ("veloz_lb_health_checks_total", (("backend", BACKENDS[2]), ("result", "ok"), vip))
    assert got[key] == 0
    types = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert types == {"veloz_lb_backend_up": "gauge", "veloz_lb_vip_healthy_backends": "gauge",
                     "veloz_lb_health_checks": "counter"}  # fmt: skip
    # without a checker (no check tables): the same names, no probe counted
    bare = exposition(None)
    assert {f.name for f in text_string_to_metric_families(bare)} == set(types)
    counted = [s.value for f in text_string_to_metric_families(bare) for s in f.samples
               if s.name == "veloz_lb_health_checks_total"]  # fmt: skip
    assert len(counted) == 3 * 3 and not any(counted)


@needs_promtool
def test_health_metrics_pass_promtool_lint():
    lint = promtool("check", "metrics", stdin=exposition(status()))
    assert lint.returncode == 0, lint.stderr


def test_annotate_and_a_stale_status_file(tmp_path: Path):
    path = tmp_path / "net1-dut-gen.health.json"
    from veloz.control import companion

    companion.write_status(path, status())
    assert health.read(path, runner=8) is None  # another run's file
    vips = [{"vip": f"{VIP}:80/tcp", "backends": [{"address": BACKENDS[0]},
                                                   {"address": "198.18.1.99"}]}]  # fmt: skip
    health.annotate(vips, health.read(path, runner=7))
    first, unchecked = vips[0]["backends"]
    assert first["health"] == ("down, last fail (Connection refused); in a row: 0 ok, 3 failed")
    assert first["check"]["type"] == "tcp" and "health" not in unchecked


def test_a_deleted_vip_leaves_nothing_to_change():
    ctl = started()
    run(ctl, "vip", "del", VIP, "80", "tcp")
    applied = len(ctl.applied)
    assert health.apply_change(ctl, target(BACKENDS[0]), up=False) == 0
    assert len(ctl.applied) == applied
