"""udpd seen from outside: `veloz udpd --metrics` scraped and parsed by
prometheus_client's parser, `veloz status` of a live udpd, and of one
killed with -9, whose printed removal commands leave nothing behind."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_status import ours, status
from test_udpd import CONFIG, SOCKET, echo_from_gen, start_veloz_echo, stop
from wire import xdp_attached

from veloz.core.proc import Runner, in_netns, veloz_argv
from waits import wait_until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

ADDR = "127.0.0.1:9466"
STATS = SOCKET + ".stats.json"
SCRAPE = ("import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
          "'http://' + sys.argv[1] + '/metrics', timeout=5).read().decode())")  # fmt: skip


def scrape() -> dict[str, float]:
    done = subprocess.run(in_netns("vz-dut", [sys.executable, "-c", SCRAPE, ADDR]),
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    if done.returncode != 0:
        return {}
    out = {}
    for family in text_string_to_metric_families(done.stdout):
        assert family.name.startswith("veloz_udpd_"), family.name
        for s in family.samples:
            if family.type == "counter":
                assert s.name.endswith("_total"), s.name
            out[s.name] = s.value
    return out


@pytest.fixture
def udpd_config(testbed, tmp_path) -> Path:
    cfg = tmp_path / "udpd.toml"
    cfg.write_text(CONFIG)
    yield cfg
    for mode in ("xdp", "xdpgeneric"):
        subprocess.run(["ip", "-n", "vz-dut", "link", "set", "dut-gen", mode, "off"],
                       check=False, capture_output=True, timeout=10)  # fmt: skip
    for path in (SOCKET, STATS):
        Path(path).unlink(missing_ok=True)


def test_udpd_metrics_status_and_its_kill_9(udpd_config):
    argv = in_netns("vz-dut", veloz_argv("udpd", "--config", str(udpd_config), "--json",
                                         "--interval-ms", "200", "--metrics", ADDR))  # fmt: skip
    runner = Runner(argv, attach_timeout=30, what="udpd")
    with runner:
        pid = runner.proc.pid  # `ip netns exec` and veloz exec() into vz-udpd
        echo = start_veloz_echo(7110)
        try:
            assert echo_from_gen(7110, [64] * 10) == {"ok": 10, "bad": 0, "lost": 0}
        finally:
            stop(echo)
        got = wait_until(scrape, 20,
                         until=lambda g: g.get("veloz_udpd_stack_rx_delivered_total", 0) >= 10,
                         interval=0.2, what="10 datagrams delivered, scraped")  # fmt: skip
        assert got["veloz_udpd_up"] == 1
        assert got["veloz_udpd_stack_tx_frames_total"] >= 10
        assert got["veloz_udpd_sockets"] == 0 and got["veloz_udpd_apps"] == 0  # echo stopped

        st = status()
        udpd = [u for u in st["udpd"] if u["pid"] == pid]
        assert len(udpd) == 1, st
        assert udpd[0]["netns"] == "vz-dut" and udpd[0]["ctl"] == SOCKET
        assert udpd[0]["ports"][0]["iface"] == "dut-gen"
        assert any(n.startswith("vz_xdp_udpd") for n in udpd[0]["ports"][0]["programs"])
        assert udpd[0]["counters"]["rx_delivered"] >= 10
        assert not [s for s in st["stale"] if "dut-gen" in s["what"] or "udpd" in s["what"]]

        runner.proc.kill()
        runner.proc.communicate(timeout=20)
    # the steering program was on a link only udpd held: gone with it
    assert not xdp_attached("vz-dut", "dut-gen")
    # the metrics process went with it
    wait_until(scrape, 10, until=lambda g: not g, interval=0.1, what="the metrics server gone")
    st = status()
    assert not [u for u in st["udpd"] if u["pid"] == pid]
    # what a killed process cannot remove: its lock file and control socket
    kinds = {s["kind"] for s in st["stale"]}
    assert {"lock", "udpd"} <= kinds and "xdp" not in kinds, st["stale"]
    assert any(SOCKET in s["what"] for s in st["stale"]), st["stale"]
    for item in st["stale"]:
        subprocess.run(shlex.split(item["remove"]), check=True, timeout=30)
    assert not xdp_attached("vz-dut", "dut-gen")
    assert not Path(SOCKET).exists() and not Path(STATS).exists()
    assert ours(status()["stale"]) == []
