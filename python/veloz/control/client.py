"""The client of a running NF's control socket (server: src/ctl/ctl_server.c).

Every `veloz run` listens on a Unix socket named after its network namespace
and first port, so `veloz ctl --iface IF` run in the same namespace finds it:
/run/veloz/ctl/net<inode of /proc/self/ns/net>-<IF>.sock. The socket is
root's, mode 0600; with `veloz run --ctl-group GROUP` it is root:GROUP, 0660,
and the NF also checks each client's credentials (root or a member of GROUP;
anyone else gets one error line and the hang-up). The directory is 0755: it
is shared by every run, each with its own group or none.

The protocol is lines of text, one reply line per request line; a reply of
"ok N" to dump, maps and ports is followed by N data lines:

    update MAP KEYHEX VALUEHEX      -> ok | error MESSAGE
    delete MAP KEYHEX               -> ok | error MESSAGE
    lookup MAP KEYHEX               -> ok VALUEHEX (per-CPU maps: every copy)
    dump MAP                        -> ok N, then N lines "KEYHEX VALUEHEX"
    maps                            -> ok N, then "NAME TYPE KEYSIZE VALUESIZE MAX COPIES"
    ports                           -> ok N, then "PORT IFNAME"
    info                            -> ok NF BACKEND
    counters                        -> ok 1, then the runner's latest counters
                                       line (the JSON `veloz run --json`
                                       prints), or ok 0 before the first
    handover                        -> ok PID PAUSED_AT, with a memfd of the
                                       NF's maps (SCM_RIGHTS): a userspace
                                       run's workers pause for a successor
                                       (`veloz run --take-over`), and go on
                                       if it hangs up before "leave"
    leave                           -> ok: a successor took the NF over; the
                                       run stops (xdp: leaving its program
                                       attached; userspace: after "handover")
    begin / commit                  -> a transaction: if any operation between
                                       them fails, commit undoes the others
                                       and replies "error ...".

A client that sends nothing for the run's idle time (--ctl-idle-timeout,
30 s by default) while holding the session is sent one line, "error closed:
...", in place of its next reply, and hung up on; its open transaction is
rolled back as if it had died. The NF serves one session at a time, so a
stopped client would otherwise hold every other client off for ever.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from veloz.control.ops import Op
from veloz.core.errors import VelozError

CTL_DIR = Path(os.environ.get("VELOZ_CTL_DIR", "/run/veloz/ctl"))
# Requests in flight before reading replies: bounds what either side buffers.
CHUNK = 2048
# The longest reply line read: a dump row is a key and a value in hex, the
# value once per CPU (a 16 KiB per-CPU entry on 1024 CPUs is 32 MiB of hex).
REPLY_MAX = 64 << 20
# The line the NF sends before it hangs up on a silent session (ctl_server.c).
CLOSED = "error closed:"


def socket_path(iface: str) -> Path:
    ns = os.stat("/proc/self/ns/net").st_ino
    return CTL_DIR / f"net{ns}-{iface}.sock"


def running_ifaces() -> list[str]:
    """First ports of the NFs running in this network namespace."""
    prefix = f"net{os.stat('/proc/self/ns/net').st_ino}-"
    try:
        names = sorted(p.name for p in CTL_DIR.iterdir())
    except OSError:
        return []
    # the sockets only: the companions' status files sit beside them
    return [n[len(prefix) : -len(".sock")] for n in names
            if n.startswith(prefix) and n.endswith(".sock")]  # fmt: skip


@dataclass(frozen=True)
class MapInfo:
    name: str
    type: int  # enum bpf_map_type
    key_size: int
    value_size: int
    max_entries: int
    copies: int  # per-CPU maps: CPUs (xdp) or workers (userspace); else 1

    @property
    def stride(self) -> int:
        return (self.value_size + 7) // 8 * 8


class CtlError(VelozError):
    pass


class Ctl:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(str(path))
        except FileNotFoundError:
            self.sock.close()
            raise CtlError(f"no running NF listens on {path}") from None
        except PermissionError:
            self.sock.close()
            raise CtlError(f"cannot reach the running NF on {path}: permission denied "
                           "(root, or a member of the run's --ctl-group)") from None  # fmt: skip
        except OSError as e:
            self.sock.close()
            raise CtlError(f"cannot reach the running NF on {path}: {e.strerror}") from None
        self.reader = self.sock.makefile("r", encoding="ascii", newline="\n")

    @classmethod
    def for_iface(cls, iface: str | None) -> Ctl:
        if iface is None:
            running = running_ifaces()
            if len(running) != 1:
                what = ", ".join(running) if running else "none"
                raise CtlError(f"name the NF's first port with --iface (running here: {what})")
            iface = running[0]
        return cls(socket_path(iface))

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def __enter__(self) -> Ctl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- raw requests ----

    def _readline(self) -> str:
        # bounded: a peer that never sends a newline is refused, not buffered
        # without end
        line = self.reader.readline(REPLY_MAX)
        if not line:
            raise CtlError("the running NF closed its control socket")
        if not line.endswith("\n"):
            raise CtlError(f"a reply longer than {REPLY_MAX} bytes on the control socket")
        if line.startswith(CLOSED):
            # the NF hung up on a silent session: whatever was asked, that is the answer
            why = line.removeprefix(CLOSED).strip()
            raise CtlError(f"the running NF closed this control session: {why}")
        return line.rstrip("\n")

    def requests(self, lines: Sequence[str]) -> list[str]:
        """Send lines, pipelined in chunks; one reply line each."""
        replies: list[str] = []
        for start in range(0, len(lines), CHUNK):
            chunk = lines[start : start + CHUNK]
            try:
                self.sock.sendall(("\n".join(chunk) + "\n").encode("ascii"))
            except (BrokenPipeError, ConnectionResetError):
                pass  # it hung up: the line it sent first (if any) says why
            replies.extend(self._readline() for _ in chunk)
        return replies

    def request(self, line: str) -> str:
        reply = self.requests([line])[0]
        if reply.startswith("error"):
            raise CtlError(reply.removeprefix("error").strip())
        return reply.removeprefix("ok").strip()

    def _listing(self, line: str) -> list[str]:
        count = int(self.request(line) or 0)
        return [self._readline() for _ in range(count)]

    # ---- what the NF modules use ----

    def apply(self, ops: Iterable[Op]) -> int:
        """All of ops or none: one transaction. Returns how many were applied."""
        lines = ["begin", *(op.line() for op in ops), "commit"]
        replies = self.requests(lines)
        final = replies[-1]
        if final.startswith("error"):
            raise CtlError(final.removeprefix("error").strip())
        return len(lines) - 2

    def lookup(self, map_name: str, key: bytes) -> bytes | None:
        reply = self.requests([f"lookup {map_name} {key.hex()}"])[0]
        if reply.startswith("error"):
            if "no such entry" in reply:
                return None
            raise CtlError(reply.removeprefix("error").strip())
        return bytes.fromhex(reply.removeprefix("ok").strip())

    def dump(self, map_name: str) -> list[tuple[bytes, bytes]]:
        out = []
        for line in self._listing(f"dump {map_name}"):
            key, _, value = line.partition(" ")
            out.append((bytes.fromhex(key), bytes.fromhex(value)))
        return out

    def maps(self) -> dict[str, MapInfo]:
        out = {}
        for line in self._listing("maps"):
            name, *nums = line.split()
            out[name] = MapInfo(name, *(int(n) for n in nums))
        return out

    def ports(self) -> list[str]:
        return [line.split()[1] for line in self._listing("ports")]

    def counters(self) -> dict | None:
        """The runner's latest counters line, or None before the first."""
        lines = self._listing("counters")
        if not lines:
            return None
        try:
            value = json.loads(lines[0])
        except ValueError:
            raise CtlError("the running NF sent a counters line that is not JSON") from None
        if not isinstance(value, dict):
            raise CtlError("the running NF sent a counters line that is not an object")
        return value

    def peer_pid(self) -> int:
        """The pid of the process serving this socket (SO_PEERCRED)."""
        creds = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[0]

    def info(self) -> tuple[str, str]:
        nf, backend = self.request("info").split()
        return nf, backend


def per_cpu_sums(value: bytes, info: MapInfo, fmt: struct.Struct) -> list[int]:
    """Each field of a per-CPU value (fmt), summed over its copies."""
    sums = [0] * len(fmt.unpack(bytes(fmt.size)))
    for c in range(info.copies):
        if c * info.stride + fmt.size > len(value):
            break  # a missing value reads as zeros
        for i, n in enumerate(fmt.unpack_from(value, c * info.stride)):
            sums[i] += n
    return sums
