# SPDX-License-Identifier: BSD-2-Clause
"""The records vz-xdp leaves for a successor (python/veloz/control/persist.py),
as `veloz status` reads them: a --persist run's program whose run is gone is
adoptable; one of a run that did not persist, or a program since replaced,
is not."""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

from veloz.control import persist, status

RECORD = {"nf": "ddos", "persist": True, "pid": 0, "mode": "native", "prog_id": 41,
          "attached_id": 41, "config": "00000000deadbeef", "since": 1700000000.5,
          "ctl": "/run/veloz/ctl/net4026532000-eth0.sock", "port": 0, "nports": 1,
          "ports": ["eth0"]}  # fmt: skip


def write(directory: Path, name: str, **changes: object) -> None:
    (directory / name).write_text(json.dumps(RECORD | changes) + "\n")


def test_a_persisted_program_whose_run_is_gone_is_adoptable(tmp_path: Path):
    write(tmp_path, "net4026532000-eth0.json", pid=2**22 + 1)  # above pid_max: no such run
    recs = persist.records(tmp_path)
    rec = recs[(4026532000, "eth0")]
    assert (rec.nf, rec.ports, rec.prog_id, rec.since) == ("ddos", ["eth0"], 41, 1700000000.5)
    assert persist.adoptable(rec, 41)
    assert not persist.adoptable(rec, 42)  # another program on the hook since
    assert persist.remove_command(rec) == ["rm", "-f", str(tmp_path / "net4026532000-eth0.json")]


def comm(name: bytes) -> None:
    """This process's name in /proc/self/comm (prctl PR_SET_NAME)."""
    assert ctypes.CDLL(None, use_errno=True).prctl(15, ctypes.c_char_p(name), 0, 0, 0) == 0


def test_not_adoptable_without_persist_or_with_its_run_alive(tmp_path: Path):
    write(tmp_path, "net1-eth0.json", persist=False, pid=2**22 + 1)
    write(tmp_path, "net1-eth1.json", pid=os.getpid())
    write(tmp_path, "net1-eth2.json", nf="")  # not read: no NF
    (tmp_path / "net1-eth3.json").write_text("{torn")
    (tmp_path / "other.json").write_text(json.dumps(RECORD))
    recs = persist.records(tmp_path)
    assert set(recs) == {(1, "eth0"), (1, "eth1"), (1, "eth2")}
    assert not persist.adoptable(recs[(1, "eth0")], 41)
    assert persist.adoptable(recs[(1, "eth1")], 41)  # a pid that is no vz-xdp: gone
    before = Path("/proc/self/comm").read_bytes().strip()
    comm(b"vz-xdp")
    try:
        assert not persist.adoptable(recs[(1, "eth1")], 41)  # its run is there
    finally:
        comm(before)
    assert not persist.adoptable(None, 41)


def test_status_text_says_adoptable_with_its_nf_ports_and_since():
    st = {"runs": [], "udpd": [], "stale": [],
          "adoptable": [{"nf": "lb", "ports": ["eth0"], "mode": "native", "prog_id": 7,
                         "since": 1700000000.0, "pid": 123, "record": "/x", "netns": "vz-dut",
                         "iface": "eth0", "xdp_mode": "native"}]}  # fmt: skip
    text = status.format_status(st)
    assert "adoptable: 1" in text
    assert "lb on eth0 in vz-dut (native prog 7; ports eth0): running since" in text
    assert "its run (pid 123) gone" in text and "`veloz run lb` on eth0 adopts it" in text
    assert "adoptable" not in status.format_status(st | {"adoptable": []})
