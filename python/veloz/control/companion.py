"""Companions: the Python processes that run beside an NF's C runner.

`veloz run` exec()s the C runner, so that signals and kill -9 reach the
program that detaches. What the runner's control plane needs beyond its
control socket runs in a companion, forked before the exec: the metrics
server (--metrics), the router's sync with the kernel's routing table, lb's
health checks. A companion:

  - dies with the runner (PR_SET_PDEATHSIG), so nothing outlives the run;
  - reaches the NF only through its control socket, as `veloz ctl` does, in
    short sessions (the NF serves one session at a time);
  - reports what it knows in a status file beside the control socket,
    /run/veloz/ctl/net<ns>-<IF>.<NAME>.json, written whole (rename), which
    the metrics server and `veloz status` read.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from veloz.control.client import socket_path

PR_SET_PDEATHSIG = 1


def fork(name: str, body: Callable[[int], None], status: Path | None = None) -> int:
    """Fork a companion; return its pid in the parent, which goes on to exec
    the runner. The child runs body(runner_pid) until the parent exits; its
    status file, if it has one, goes with it."""
    parent = os.getpid()
    child = os.fork()
    if child != 0:
        return child
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the runner died before prctl took effect
            os._exit(0)
        signal.signal(signal.SIGTERM, lambda *_: _exit(0, status))
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner stops, then we do
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)  # a reader of the run's stdout sees it end with the run
        body(parent)
    except BaseException as e:  # noqa: BLE001 (the child never returns into the CLI)
        print(f"veloz: {name}: {e}", file=sys.stderr)
    _exit(1, status)


def _exit(code: int, status: Path | None) -> None:
    if status is not None:
        remove_status(status)
    os._exit(code)


def status_path(iface: str, name: str) -> Path:
    """The status file of companion NAME of the run whose first port is iface,
    in this network namespace."""
    return beside(socket_path(iface), name)


def beside(ctl_path: Path, name: str) -> Path:
    """The status file of companion NAME of the run listening on ctl_path."""
    return ctl_path.with_suffix(f".{name}.json")


def write_status(path: Path, status: dict) -> None:
    """Replace the status file whole: a reader never sees half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(status, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_status(path: Path) -> dict | None:
    """A companion's latest status, or None without one (not configured, or
    not written yet)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def remove_status(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
