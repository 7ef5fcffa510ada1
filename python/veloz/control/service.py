"""An NF or udpd under systemd: readiness (sd_notify) and reload on SIGHUP.

`veloz run --instance` exec()s the C runner, so the runner is the unit's
main process. What systemd needs beyond it runs in a companion
(companion.py) forked before the exec, the runner's child:

  - readiness: the companion polls the run's control socket until the
    runner answers `info` with the instance's NF and backend and `counters`
    with a first counters line (attached and counting), then sends
    READY=1 with MAINPID=<runner pid> to $NOTIFY_SOCKET (the unit says
    NotifyAccess=all, since the sender is not the main process);
  - reload: the runner passes SIGHUP on to the process named in
    $VELOZ_RELOAD_PID (src/runner/runner.c), this companion, which runs the
    same reload as `veloz reload --instance` and says how it went in the
    unit's STATUS=;
  - a record of what the instance started with, beside the control socket
    (companion.status_path(port, "instance")), so that a reload can tell a
    change it applies live from one that needs a restart.

The notify protocol is one datagram of NAME=VALUE lines to the Unix socket
$NOTIFY_SOCKET names (a leading '@' is an abstract name), as sd_notify(3)
does it; no library is needed for that.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from veloz.control import companion
from veloz.control.client import Ctl, CtlError, socket_path
from veloz.core.errors import VelozError

# The variable through which the runner learns whom to pass SIGHUP on to;
# src/runner/runner.c reads the same name.
RELOAD_PID_ENV = "VELOZ_RELOAD_PID"
# How often the companion looks for the runner's control socket or stats.
POLL_S = 0.05


def notify_address(value: str | None) -> str | bytes | None:
    """$NOTIFY_SOCKET as a socket address: a path, or an abstract name
    ('@name' -> b'\\0name'); None when unset or of another kind (vsock)."""
    if not value:
        return None
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None


def notify(message: str, env: dict[str, str] | None = None) -> bool:
    """Send message (NAME=VALUE lines) to systemd; False when not under a
    unit that listens, or when the socket refused it."""
    address = notify_address((os.environ if env is None else env).get("NOTIFY_SOCKET"))
    if address is None:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
        try:
            s.connect(address)
            s.sendall(message.encode())
        except OSError as e:
            print(f"veloz: cannot notify systemd: {e.strerror}", file=sys.stderr)
            return False
    return True


def ready_message(runner_pid: int, status: str) -> str:
    return f"READY=1\nMAINPID={runner_pid}\nSTATUS={status}"


def nf_answers(path: Path, runner_pid: int, nf: str, backend: str) -> bool:
    """True once the runner on path is attached and counting: it serves
    its control socket (opened after the NF is attached), is the runner
    this companion belongs to (not a stale socket's), and has counted."""
    try:
        with Ctl(path) as ctl:
            if ctl.peer_pid() != runner_pid:
                return False
            if ctl.info() != (nf, backend):
                raise VelozError(f"{path} serves {' '.join(ctl.info())}, not {nf} {backend}")
            return ctl.counters() is not None
    except CtlError:
        return False


def wait_nf(path: Path, runner_pid: int, nf: str, backend: str) -> None:
    """Until the run is attached and counting. Bounded by the runner's own
    life: this companion dies with it (PR_SET_PDEATHSIG)."""
    while not nf_answers(path, runner_pid, nf, backend):
        time.sleep(POLL_S)


def _serve_reloads(reload: Callable[[], str]) -> None:
    """Run reload() on each SIGHUP the runner passes on, one at a time."""
    pending = False

    def on_hup(*_: object) -> None:
        nonlocal pending
        pending = True

    signal.signal(signal.SIGHUP, on_hup)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})
    while True:
        if not pending:
            signal.pause()
            continue
        pending = False
        notify(f"RELOADING=1\nMONOTONIC_USEC={time.monotonic_ns() // 1000}")
        try:
            done = reload()
        except VelozError as e:
            done = "reload refused: " + " ".join(str(e).splitlines())
            print(f"veloz: {done}", file=sys.stderr)
        else:
            print(f"veloz: {done}", file=sys.stderr)
        notify(f"READY=1\nSTATUS={done}")


def start_nf(iface: str, nf: str, backend: str, record: dict,
             reload: Callable[[], str]) -> int:  # fmt: skip
    """Fork the companion of an NF instance whose first port is iface; the
    caller execs the runner next, with $VELOZ_RELOAD_PID set to the pid
    returned. SIGHUP is held back until the companion can take it."""
    status = companion.status_path(iface, "instance")

    def body(runner_pid: int) -> None:
        # SIGHUP stays blocked until the reloads are served: one sent before
        # the NF was ready is pending, and runs once it is
        wait_nf(socket_path(iface), runner_pid, nf, backend)
        companion.write_status(status, {**record, "pid": runner_pid})
        notify(ready_message(runner_pid, f"{nf} on {backend}, attached and counting"))
        _serve_reloads(reload)

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        return companion.fork("service", body, status)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGHUP})


def stats_fresh(path: Path, since: float) -> bool:
    """udpd's stats file, written since `since` (not a killed udpd's)."""
    try:
        return path.stat().st_mtime >= since
    except OSError:
        return False


def start_udpd(stats: Path) -> int:
    """Fork the companion of a udpd instance: READY=1 once vz-udpd writes its
    first stats line (it serves applications and counts by then)."""
    since = time.time()

    def body(runner_pid: int) -> None:
        while not stats_fresh(stats, since):
            time.sleep(POLL_S)
        notify(ready_message(runner_pid, "udpd serving"))
        signal.pause()  # until the runner exits and takes this along

    return companion.fork("service", body)
