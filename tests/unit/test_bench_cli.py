"""`veloz bench`: bad input is one line and a non-zero exit, before anything runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from veloz.cli import build_parser
from veloz.core.errors import VelozError
from veloz.lab import bench


def veloz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "veloz.cli", *args], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


@pytest.mark.parametrize(
    "args, says",
    [
        (["nope"], "no experiment 'nope' (known: drop, tx, redirect, latency"),
        (["drop", "--backends", "xdp,quic"], "no backend 'quic'"),
        (["latency", "--rates", "2G"], "more than a 400 Gbit/s link carries"),
        (["cpu", "--rates", "0.1"], "below one packet per second"),
        (["cpu", "--rates", "fast"], "is not a rate"),
        (["sizes", "--sizes", "9000"], "needs multi-buffer frames"),
        (["sizes", "--sizes", "32"], "not a whole number in 64..3520"),
        (["drop", "--trials", "0"], "argument --trials: '0' is not between 1 and 1000"),
        (["drop", "--loss", "2"], "argument --loss: '2' is not between 0 and 1"),
        (["noisy", "--noises", "gpu"], "no neighbour 'gpu'"),
        (["udp-app", "--udp-workers", "0"], "argument --udp-workers: '0' is not between 1 and 256"),
    ],
)
def test_bad_input_is_one_line(args, says):
    done = veloz("bench", *args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("veloz: ") and says in lines[0], done.stderr


def test_missing_testbed_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(bench.testbed, "status",
                        lambda: {"up": False, "problems": ["no namespace vz-dut"]})  # fmt: skip
    args = build_parser().parse_args(["bench", "drop", "--out", str(tmp_path)])
    with pytest.raises(VelozError, match=r"testbed is not up \(no namespace vz-dut\)") as e:
        bench.run(args)
    assert e.value.code == 1
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_defaults_per_experiment():
    parse = build_parser().parse_args
    head = bench.settings_from(parse(["bench", "headline"]))
    assert head["sizes"] == [64, 1500] and head["trials"] == 5 and head["nfs"] == ["drop", "tx"]
    lat = bench.settings_from(parse(["bench", "latency"]))
    assert lat["nf"] == "tx" and lat["rates"] == [10_000, 1_000_000]
    cost = bench.settings_from(parse(["bench", "cost"]))
    assert cost["accesses"] == [0, 25, 50, 100, 200, 400, 800, 1600, 3200]
