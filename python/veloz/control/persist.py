"""The records vz-xdp leaves for a successor (src/xdp/xdp_adopt.h).

Each xdp or xdp-generic run writes, per port, once attached,
/run/veloz/persist/net<netns inode>-<IF>.json: its NF, whether it was
started with --persist, its pid and control socket, the NF program's id
(`prog_id`) and the program on the hook (`attached_id`: the NF, or libxdp's
dispatcher in front of it), its config's hash and since when (Unix time)
the data path has run. A run that stops without --persist removes it. An
attached program matching a record of a --persist run whose process is gone
is adoptable: the next `veloz run` of that NF on those ports takes it over.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

PERSIST_DIR = Path("/run/veloz/persist")  # src/xdp/xdp_adopt.h: VZ_PERSIST_DIR
RECORD_NAME = re.compile(r"^net(\d+)-(.+)\.json$")


@dataclass
class Record:
    path: Path
    netns_inode: int
    iface: str
    nf: str
    persist: bool
    pid: int
    prog_id: int
    attached_id: int
    mode: str
    since: float
    ports: list[str]

    def run_alive(self) -> bool:
        """Is the run that wrote it still there (a vz-xdp by that pid)?"""
        try:
            return Path(f"/proc/{self.pid}/comm").read_text().strip() == "vz-xdp"
        except OSError:
            return False

    def as_dict(self) -> dict:
        return {"nf": self.nf, "ports": self.ports, "mode": self.mode, "prog_id": self.prog_id,
                "since": self.since, "pid": self.pid, "record": str(self.path)}  # fmt: skip


def records(directory: Path = PERSIST_DIR) -> dict[tuple[int, str], Record]:
    """(netns inode, interface) -> the record there; unreadable ones are skipped."""
    out: dict[tuple[int, str], Record] = {}
    try:
        paths = sorted(directory.iterdir())
    except OSError:
        return out
    for path in paths:
        m = RECORD_NAME.match(path.name)
        if not m:
            continue
        try:
            d = json.loads(path.read_text())
            rec = Record(path, int(m.group(1)), m.group(2), str(d["nf"]), bool(d["persist"]),
                         int(d["pid"]), int(d["prog_id"]), int(d["attached_id"]),
                         str(d.get("mode", "")), float(d.get("since", 0)),
                         [str(p) for p in d.get("ports", [])])  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out[(rec.netns_inode, rec.iface)] = rec
    return out


def adoptable(rec: Record | None, attached_id: int) -> bool:
    """A --persist run's program, still on the hook, its run gone."""
    return (
        rec is not None and rec.persist and rec.attached_id == attached_id and not rec.run_alive()
    )


def remove_command(rec: Record) -> list[str]:
    return ["rm", "-f", os.fspath(rec.path)]
