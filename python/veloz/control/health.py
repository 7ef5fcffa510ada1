"""lb's health checks: a companion of `veloz run lb` (companion.py) that
probes each checked backend and drains a failed one from its VIP's Maglev
ring, or brings it back, one control-socket transaction per change
(lb.drain_ops, lb.restore_ops).

Config, in lb's TOML (docs/nfs.md):

    [[vip]]
    address = "198.18.0.100"
    port = 80
    proto = "tcp"
    on_all_down = "drop"        # or "pass" (lb.py)
    check = { type = "tcp" }    # the default of the VIP's backends
    backends = ["198.18.1.2",
                { address = "198.18.1.3", check = { type = "http", path = "/health" } }]

A backend's own check replaces the VIP's whole; a backend with neither is
not checked (always up). Every check has type, port (default: the VIP's),
interval (s, default 1), timeout (s, default 0.5, at most the interval),
rise (default 2) and fall (default 3); "http" adds path ("/") and status
(200); "udp" adds send (required) and expect (an answer must contain it;
without it, any answer will do).

States: up until proven down, as haproxy starts a server: the config puts
every backend in the ring, so traffic flows from the first frame; `fall`
consecutive failed probes (refused, unreachable, a wrong answer, or no
answer within the timeout) take a backend down, `rise` consecutive good ones
bring it back. A drained backend keeps its id and Maglev identity, so it
comes back to the same slots. An unreachable target is a backend that is
down, never an error of the run.

The checker probes the targets the run started with. A reload of an
instance's config (lb_reload.py) that changes them (a checked backend added
or removed, a check's settings, a checked VIP's on_all_down) is refused,
asking for a restart; one that changes unchecked backends or weights leaves
the checker as it is, and a drained backend stays drained until it rises.

The probes run in threads (blocking sockets with a deadline); one loop
counts results, applies changes and writes the status file the metrics
server, `veloz status` and `veloz ctl lb-stats` read.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import queue
import socket
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from veloz.control import companion, lb
from veloz.control.client import Ctl, CtlError
from veloz.control.ops import Address
from veloz.core.errors import VelozError

NAME = "health"  # the companion's name: its status file
TYPES = ("tcp", "http", "udp")
RESULTS = ("ok", "fail", "timeout")
COMMON = frozenset({"type", "port", "interval", "timeout", "rise", "fall"})
EXTRA = {"tcp": frozenset(), "http": frozenset({"path", "status"}),
         "udp": frozenset({"send", "expect"})}  # fmt: skip
INTERVAL = (0.1, 3600.0)  # seconds
COUNT_MAX = 100  # rise and fall
PAYLOAD_MAX = 1024  # bytes of send, expect and path
READ_MAX = 4096  # bytes of an answer read


@dataclass(frozen=True)
class Check:
    type: str
    port: int
    interval: float = 1.0
    timeout: float = 0.5
    rise: int = 2
    fall: int = 3
    path: str = "/"
    status: int = 200
    send: bytes = b""
    expect: bytes | None = None


@dataclass(frozen=True)
class Target:
    """A checked backend of a VIP."""

    vip: lb.Vip
    address: Address
    check: Check
    on_all_down: str = "drop"


# ---- config -------------------------------------------------------------------


def _int(table: dict, key: str, default: int, low: int, high: int, where: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise VelozError(f"config: {where}: {key} must be a whole number {low}-{high}, "
                         f"not {value!r}")  # fmt: skip
    return value


def _seconds(table: dict, key: str, default: float, high: float, where: str) -> float:
    value = table.get(key, default)
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not ok or not INTERVAL[0] / 10 <= value <= high:
        raise VelozError(f"config: {where}: {key} must be seconds from {INTERVAL[0] / 10} "
                         f"to {high:g}, not {value!r}")  # fmt: skip
    return float(value)


def _text(table: dict, key: str, where: str, required: bool = False) -> str | None:
    if key not in table:
        if required:
            raise VelozError(f"config: {where}: a {table['type']} check needs {key}")
        return None
    value = table[key]
    if not isinstance(value, str) or not value or len(value.encode()) > PAYLOAD_MAX:
        raise VelozError(f"config: {where}: {key} must be a string of 1-{PAYLOAD_MAX} bytes, "
                         f"not {value!r}")  # fmt: skip
    return value


def parse_check(table: object, vip_port: int, where: str) -> Check:
    """A check table; where names it in the one error line."""
    where = f"{where} check"
    if not isinstance(table, dict):
        raise VelozError(f'config: {where} must be a table, e.g. {{ type = "tcp" }}')
    kind = table.get("type")
    if kind not in TYPES:
        raise VelozError(f"config: {where}: type must be one of {', '.join(TYPES)}, not {kind!r}")
    known = COMMON | EXTRA[kind]
    unknown = sorted(set(table) - known)
    if unknown:
        raise VelozError(f"config: {where}: a {kind} check has no key '{unknown[0]}' "
                         f"(known: {', '.join(sorted(known))})")  # fmt: skip
    interval = _seconds(table, "interval", 1.0, INTERVAL[1], where)
    if interval < INTERVAL[0]:
        raise VelozError(f"config: {where}: interval must be at least {INTERVAL[0]} s")
    timeout = _seconds(table, "timeout", min(0.5, interval), interval, where)
    check = Check(kind, _int(table, "port", vip_port, 1, 65535, where), interval, timeout,
                  _int(table, "rise", 2, 1, COUNT_MAX, where),
                  _int(table, "fall", 3, 1, COUNT_MAX, where))  # fmt: skip
    if kind == "http":
        path = _text(table, "path", where) or "/"
        if not path.startswith("/") or not all(33 <= ord(c) < 127 for c in path):
            raise VelozError(f"config: {where}: path must start with / and be printable "
                             f"ASCII without spaces, not {path!r}")  # fmt: skip
        status = _int(table, "status", 200, 100, 599, where)
        return dataclasses.replace(check, path=path, status=status)
    if kind == "udp":
        send = _text(table, "send", where, required=True) or ""
        expect = _text(table, "expect", where)
        return dataclasses.replace(
            check, send=send.encode(), expect=None if expect is None else expect.encode()
        )
    return check


def targets(values: dict) -> list[Target]:
    """The checked backends of an lb config (its [[vip]] tables, already read
    by lb.config_ops); a bad check is one VelozError line."""
    out = []
    for n, item in enumerate(values.get("vip", []), 1):
        if not isinstance(item, dict) or not {"address", "port", "proto"} <= item.keys():
            raise VelozError(f"config: vip {n} needs address, port and proto")
        vip = lb.parse_vip(item["address"], item["port"], item["proto"])
        default = None
        if "check" in item:
            default = parse_check(item["check"], vip.port, f"vip {vip}")
        mode = item.get("on_all_down", "drop")
        lb.parse_on_all_down(mode, f"vip {vip}")
        backends = item.get("backends", [])
        for b in backends if isinstance(backends, list) else []:
            backend = lb.parse_backend(b, f"vip {vip} backend")
            check = default
            if isinstance(b, dict) and "check" in b:
                where = f"vip {vip} backend {backend.address}"
                check = parse_check(b["check"], vip.port, where)
            if check is not None:
                out.append(Target(vip, backend.address, check, str(mode)))
    return out


# ---- the state machine --------------------------------------------------------


@dataclass
class Health:
    """A backend's health: up until `fall` failures in a row, then down
    until `rise` successes in a row."""

    rise: int
    fall: int
    up: bool = True
    successes: int = 0  # in a row
    failures: int = 0  # in a row (fail or timeout)
    last: str | None = None  # ok, fail, timeout; None before the first probe
    detail: str = ""
    changed: float | None = None  # wall time of the last change of state
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESULTS, 0))

    def record(self, result: str, now: float, detail: str = "") -> bool:
        """Count one probe's result at wall time now; True when the state changed."""
        if result not in RESULTS:
            raise ValueError(f"a probe's result is one of {RESULTS}, not {result!r}")
        self.last, self.detail = result, detail
        self.counts[result] += 1
        if result == "ok":
            self.successes, self.failures = self.successes + 1, 0
            flip = not self.up and self.successes >= self.rise
        else:
            self.successes, self.failures = 0, self.failures + 1
            flip = self.up and self.failures >= self.fall
        if flip:
            self.up, self.changed = not self.up, now
        return flip

    def as_dict(self) -> dict:
        return {"up": self.up, "last": self.last, "detail": self.detail,
                "successes": self.successes, "failures": self.failures,
                "changed": self.changed, "checks": dict(self.counts)}  # fmt: skip


# ---- probes -------------------------------------------------------------------


def _family(address: Address) -> int:
    return socket.AF_INET6 if address.version == 6 else socket.AF_INET


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _http(sock: socket.socket, target: Target, deadline: float) -> tuple[str, str]:
    c = target.check
    host = f"[{target.address}]" if target.address.version == 6 else str(target.address)
    request = (f"GET {c.path} HTTP/1.0\r\nHost: {host}\r\nUser-Agent: veloz-health\r\n"
               "Connection: close\r\n\r\n")  # fmt: skip
    sock.sendall(request.encode())
    answer = b""
    while b"\r\n" not in answer and len(answer) < READ_MAX:
        sock.settimeout(_left(deadline))
        chunk = sock.recv(READ_MAX)
        if not chunk:
            break
        answer += chunk
    parts = answer.split(b"\r\n", 1)[0].split()
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        return "fail", "no HTTP status line"
    status = int(parts[1])
    return ("ok", "") if status == c.status else ("fail", f"HTTP status {status}")


def _udp(target: Target, deadline: float) -> tuple[str, str]:
    c = target.check
    with socket.socket(_family(target.address), socket.SOCK_DGRAM) as sock:
        sock.connect((str(target.address), c.port))
        sock.send(c.send)
        sock.settimeout(_left(deadline))
        answer = sock.recv(READ_MAX)
    if c.expect is not None and c.expect not in answer:
        return "fail", "unexpected answer"
    return "ok", ""


def probe(target: Target) -> tuple[str, str]:
    """One check of target: (result, detail), result in RESULTS. Never raises
    for the network's sake: an unreachable target is a failure."""
    c = target.check
    deadline = time.monotonic() + c.timeout
    try:
        if c.type == "udp":
            return _udp(target, deadline)
        with socket.socket(_family(target.address), socket.SOCK_STREAM) as sock:
            sock.settimeout(c.timeout)
            sock.connect((str(target.address), c.port))
            if c.type == "http":
                return _http(sock, target, deadline)
        return "ok", ""
    except TimeoutError:  # socket.timeout too
        return "timeout", f"no answer within {c.timeout:g} s"
    except OSError as e:
        return "fail", e.strerror or str(e)


# ---- the loop -----------------------------------------------------------------


class Checker:
    """Each target's schedule and health. due() says which probes to start,
    done() counts a result; the clock is the caller's (monotonic seconds)."""

    def __init__(self, targets: list[Target], now: float) -> None:
        self.targets = targets
        self.health = [Health(t.check.rise, t.check.fall) for t in targets]
        self.applied = [True] * len(targets)  # in the ring, as the config put it
        self.running: set[int] = set()
        # the first probes spread over the first interval, not all at once
        self.queue = [(now + i * t.check.interval / len(targets), i)
                      for i, t in enumerate(targets)]  # fmt: skip
        heapq.heapify(self.queue)

    def due(self, now: float) -> list[int]:
        out = []
        while self.queue and self.queue[0][0] <= now:
            _, i = heapq.heappop(self.queue)
            self.running.add(i)
            out.append(i)
        return out

    def done(self, i: int, started: float, now: float, result: str, detail: str,
             wall: float) -> bool:  # fmt: skip
        """Count target i's result (its probe started at started); schedule its
        next probe an interval after this one's start. True on a change."""
        self.running.discard(i)
        heapq.heappush(self.queue, (max(started + self.targets[i].check.interval, now), i))
        return self.health[i].record(result, wall, detail)

    def next_due(self) -> float | None:
        return self.queue[0][0] if self.queue else None

    def pending(self) -> list[int]:
        """Targets whose health the maps do not reflect yet."""
        return [i for i, h in enumerate(self.health) if h.up != self.applied[i]]

    def status(self, runner: int) -> dict:
        """The status file: per VIP, per backend, its health and check."""
        vips: dict[str, dict] = {}
        for t, h, applied in zip(self.targets, self.health, self.applied, strict=True):
            v = vips.setdefault(str(t.vip), {"on_all_down": t.on_all_down, "backends": {}})
            row = h.as_dict() | {"type": t.check.type, "port": t.check.port,
                                 "in_ring": applied}  # fmt: skip
            v["backends"][str(t.address)] = row
        for v in vips.values():
            v["up"] = sum(b["up"] for b in v["backends"].values())
        return {"pid": runner, "updated": time.time(), "vips": vips}


def apply_change(ctl: Ctl, target: Target, up: bool) -> int:
    """Drain (up False) or restore target's backend in one transaction; the
    slots that moved (0: the maps say so already, or `veloz ctl backend del`
    or `vip del` removed it)."""
    state = lb.State.read(ctl)
    if target.vip not in state.vips:
        return 0
    index = state.index(target.vip)
    ring = lb.read_ring(ctl, index)
    make = lb.restore_ops if up else lb.drain_ops
    ops = make(state, target.vip, target.address, ring)
    if ops:
        ctl.apply(ops)
    return sum(op.map == lb.RING for op in ops)


def _line(target: Target, h: Health, moved: int) -> str:
    if h.up:
        why = f"{h.successes} good checks"
    else:
        why = f"{h.failures} failed checks, last: {h.last}" + (f" ({h.detail})" if h.detail else "")
    state = "up" if h.up else "down"
    return (f"veloz: health: backend {target.address} of {target.vip} is {state} ({why}); "
            f"{moved} ring slots moved")  # fmt: skip


class Runner:
    """The companion's loop: probes in threads, results counted here, each
    change applied through the run's control socket."""

    def __init__(self, targets: list[Target], ctl_path: Callable[[], Path], owner: int,
                 status: Path) -> None:  # fmt: skip
        self.checker = Checker(targets, time.monotonic())
        self.ctl_path, self.owner, self.status = ctl_path, owner, status
        self.results: queue.Queue = queue.Queue()
        self.unreachable: str | None = None  # the last ctl error logged

    def _start(self, pool: ThreadPoolExecutor, i: int) -> None:
        target, started = self.checker.targets[i], time.monotonic()

        def body() -> None:
            try:
                result, detail = probe(target)
            except Exception as e:  # noqa: BLE001 (a lost result would stop its checks)
                result, detail = "fail", f"probe error: {e}"
            self.results.put((i, started, result, detail))

        pool.submit(body)

    def _reconcile(self) -> None:
        for i in self.checker.pending():
            target, h = self.checker.targets[i], self.checker.health[i]
            try:
                with Ctl(self.ctl_path()) as ctl:
                    if ctl.peer_pid() != self.owner:
                        raise CtlError("another run answers on the control socket")
                    moved = apply_change(ctl, target, h.up)
            except (VelozError, OSError) as e:  # CtlError is one
                if str(e) != self.unreachable:  # once, not every interval
                    print(f"veloz: health: {e}; retrying", file=sys.stderr, flush=True)
                    self.unreachable = str(e)
                return
            self.unreachable = None
            self.checker.applied[i] = h.up
            print(_line(target, h, moved), file=sys.stderr, flush=True)

    def _wait_for_runner(self) -> None:
        """Until the runner answers on its control socket (it opens it once
        attached): before that, a change has nowhere to go."""
        while True:
            try:
                with Ctl(self.ctl_path()) as ctl:
                    if ctl.peer_pid() == self.owner:
                        return
            except (CtlError, OSError):
                pass
            time.sleep(0.1)

    def loop(self) -> None:
        companion.write_status(self.status, self.checker.status(self.owner))
        self._wait_for_runner()
        self.checker = Checker(self.checker.targets, time.monotonic())
        workers = min(32, len(self.checker.targets))
        with ThreadPoolExecutor(workers, thread_name_prefix="health") as pool:
            while True:
                for i in self.checker.due(time.monotonic()):
                    self._start(pool, i)
                wake = self.checker.next_due()
                wait = 1.0 if wake is None else max(0.0, wake - time.monotonic())
                try:
                    got = [self.results.get(timeout=min(wait, 1.0))]
                except queue.Empty:
                    continue
                while not self.results.empty():
                    got.append(self.results.get_nowait())
                for i, started, result, detail in got:
                    self.checker.done(i, started, time.monotonic(), result, detail, time.time())
                self._reconcile()
                companion.write_status(self.status, self.checker.status(self.owner))


def start(checked: list[Target], iface: str) -> int:
    """Fork the health checker (a companion) for the run whose first port is
    iface; return its pid in the parent, which goes on to exec the runner.
    Its status file goes with it."""
    from veloz.control.client import socket_path

    path = companion.status_path(iface, NAME)

    def body(runner: int) -> None:
        Runner(checked, lambda: socket_path(iface), runner, path).loop()

    return companion.fork(NAME, body, path)


# ---- what readers show ----------------------------------------------------------


def read(path: Path, runner: int | None) -> dict | None:
    """The health companion's status at path, if it is runner's (a file left
    by an earlier run is not)."""
    status = companion.read_status(path)
    if not isinstance(status, dict) or (runner is not None and status.get("pid") != runner):
        return None
    return status


def annotate(vips: list[dict], status: dict | None) -> None:
    """Add each checked backend's health to lb.stats()'s VIP rows: "health",
    a short text, and "check", the status file's row."""
    for vip in vips:
        rows = ((status or {}).get("vips") or {}).get(vip["vip"], {}).get("backends", {})
        for b in vip["backends"]:
            row = rows.get(b["address"])
            if not isinstance(row, dict):
                continue
            b["check"] = row
            last = row.get("last") or "not yet"
            text = f"{'up' if row.get('up') else 'down'}, last {last}"
            text += f" ({row['detail']})" if row.get("detail") else ""
            ok, failed = row.get("successes", 0), row.get("failures", 0)
            b["health"] = f"{text}; in a row: {ok} ok, {failed} failed"
