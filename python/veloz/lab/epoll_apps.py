"""Unmodified UDP servers of the kinds people run, and their checks: plain
Python on the socket module, run as `python -m veloz.lab.epoll_apps CMD`
(under the LD_PRELOAD shim for veloz's sockets, without it for the
kernel's). `veloz bench udp-servers` and tests/net/test_shim_epoll.py run
them:

  asyncio ADDR PORT            an asyncio DatagramProtocol echo server
  threads ADDR PORT N          N threads, each epoll_wait on its own set
                               holding its own dup() of one UDP socket
  reuseport ADDR PORT N        N threads, each epoll_wait on its own socket,
                               all bound to one port with SO_REUSEPORT
  client ADDR PORT COUNT       COUNT requests, one in flight, each answer
        [FLOWS]                checked (content), round robin over FLOWS
                               source ports; prints a JSON summary
  reflector ADDR PORT          echoes, on kernel sockets, for probe
  probe ADDR PORT RADDR RPORT  epoll edge-triggered and EPOLLONESHOT, dup of
        [--shim]               a closed descriptor; with --shim (veloz's
                               sockets), a close under a blocked recvfrom
                               and epoll_wait, and a forked child's calls;
                               datagrams come back from the reflector;
                               prints JSON

Servers print "ready" once bound, and a JSON summary on SIGTERM.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import json
import os
import select
import signal
import socket
import sys
import threading
import time


def ready() -> None:
    print("ready", flush=True)


def asyncio_server(addr: str, port: int) -> None:
    echoed = 0

    class Echo(asyncio.DatagramProtocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def datagram_received(self, data: bytes, peer: tuple[str, int]) -> None:
            nonlocal echoed
            echoed += 1
            self.transport.sendto(data, peer)  # type: ignore[attr-defined]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
        transport, _ = await loop.create_datagram_endpoint(Echo, local_addr=(addr, port))
        ready()
        await stop
        transport.close()

    asyncio.run(main())
    print(json.dumps({"echoed": echoed}), flush=True)


def threads_server(addr: str, port: int, n: int, reuseport: bool = False) -> None:
    """n threads, each with its own dup() of one socket, or (reuseport) its
    own socket in a SO_REUSEPORT group."""

    def bound() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if reuseport:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind((addr, port))
        s.setblocking(False)
        return s

    sock = bound()
    mines = [bound() if reuseport and i else None for i in range(n)]
    counts = [0] * n
    stop = threading.Event()

    def serve(i: int) -> None:
        mine = mines[i] or socket.socket(fileno=os.dup(sock.fileno()))
        ep = select.epoll()
        ep.register(mine.fileno(), select.EPOLLIN)
        while not stop.is_set():
            for _ in ep.poll(0.2):
                while True:
                    try:
                        data, peer = mine.recvfrom(65535)
                    except BlockingIOError:
                        break  # another thread took it
                    mine.sendto(data, peer)
                    counts[i] += 1
        ep.close()
        mine.close()

    workers = [threading.Thread(target=serve, args=(i,)) for i in range(n)]
    for w in workers:
        w.start()
    for sig in (signal.SIGTERM, signal.SIGINT):  # a service's stop, a user's Ctrl-C
        signal.signal(sig, lambda *_: stop.set())
    ready()
    while not stop.is_set():
        stop.wait(0.2)
    for w in workers:
        w.join()
    sock.close()
    print(json.dumps({"echoed": sum(counts), "per_thread": counts}), flush=True)


def client(addr: str, port: int, count: int, flows: int = 1) -> None:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(flows)]
    for s in socks:
        s.settimeout(0.5)
    answered = wrong = stale = 0
    rtts: list[float] = []
    start = time.monotonic()
    for i in range(count):
        sock = socks[i % flows]  # each its own source port: a flow
        want = f"req {i} {os.urandom(6).hex()} ".encode() * (1 + i % 7)
        sent = time.monotonic()
        sock.sendto(want, (addr, port))
        while True:
            try:
                got, peer = sock.recvfrom(65535)
            except TimeoutError:
                break  # lost
            if got.startswith(b"req %d " % i) and got == want and peer == (addr, port):
                answered += 1
                rtts.append(time.monotonic() - sent)
                break
            if got.startswith(b"req ") and int(got.split()[1]) < i:
                stale += 1  # a late answer to an earlier request
                continue
            wrong += 1
            break
    took = time.monotonic() - start
    rtts.sort()

    def pct_us(q: float) -> float | None:
        return round(rtts[min(int(len(rtts) * q), len(rtts) - 1)] * 1e6, 1) if rtts else None

    print(json.dumps({"sent": count, "answered": answered, "wrong": wrong, "stale": stale,
                      "seconds": round(took, 3), "rtt_p50_us": pct_us(0.5),
                      "rtt_p99_us": pct_us(0.99)}))  # fmt: skip


def reflector(addr: str, port: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((addr, port))
    ready()
    while True:
        data, peer = sock.recvfrom(65535)
        sock.sendto(data, peer)


class Probe:
    """Datagrams for a socket arrive as the reflector's answers."""

    def __init__(self, addr: str, port: int, raddr: str, rport: int) -> None:
        self.addr, self.raddr = addr, (raddr, rport)
        self.sock = self.bound(port)
        self.unseen = 0  # datagrams back that select() did not report

    def bound(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((self.addr, port))
        sock.setblocking(False)
        return sock

    def bounce(self, text: bytes, sock: socket.socket | None = None) -> None:
        """Send text to the reflector and wait until it is back, unread:
        select() says so (a look of its own, beside any epoll set)."""
        sock = sock or self.sock
        sock.sendto(text, self.raddr)
        readable, _, _ = select.select([sock], [], [], 2.0)
        self.unseen += not readable
        time.sleep(0.05)  # anything else in flight lands too

    def read_all(self, sock: socket.socket | None = None) -> list[bytes]:
        got = []
        while True:
            try:
                got.append((sock or self.sock).recv(65535))
            except BlockingIOError:
                return got


def probe_epoll_modes(p: Probe) -> dict:
    out: dict = {}
    fd = p.sock.fileno()
    with select.epoll() as et, select.epoll() as one:
        et.register(fd, select.EPOLLIN | select.EPOLLET)
        one.register(fd, select.EPOLLIN | select.EPOLLONESHOT)
        p.bounce(b"a")
        out["et_first"] = len(et.poll(1.0))
        out["et_again"] = len(et.poll(0.1))
        out["oneshot_first"] = len(one.poll(1.0))
        out["read_a"] = [d.decode() for d in p.read_all()]
        p.bounce(b"b")
        out["et_after_drain"] = len(et.poll(1.0))
        out["oneshot_disarmed"] = len(one.poll(0.1))
        one.modify(fd, select.EPOLLIN | select.EPOLLONESHOT)
        out["oneshot_rearmed"] = len(one.poll(1.0))
        out["read_b"] = [d.decode() for d in p.read_all()]
    return out


def probe_dup(p: Probe) -> dict:
    out: dict = {}
    copy = os.dup(p.sock.fileno())
    os.close(copy)
    try:
        os.dup(copy)
        out["dup_closed"] = "worked"
    except OSError as e:
        out["dup_closed"] = errno.errorcode[e.errno]
    p.bounce(b"c")
    out["after_copy_closed"] = [d.decode() for d in p.read_all()]
    return out


def probe_close_while_waiting(p: Probe, port: int) -> dict:
    out: dict = {}
    blocked = p.bound(port + 1)
    blocked.setblocking(True)
    watched = p.bound(port + 2)
    result: dict = {}

    def recv() -> None:
        try:
            blocked.recv(100)
            result["recv"] = "data"
        except OSError as e:
            result["recv"] = errno.errorcode[e.errno]

    def wait() -> None:
        with select.epoll() as ep:
            ep.register(watched.fileno(), select.EPOLLIN)
            result["epoll"] = len(ep.poll(0.5))

    threads = [threading.Thread(target=recv), threading.Thread(target=wait)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    os.close(blocked.detach())
    os.close(watched.detach())
    for t in threads:
        t.join(5.0)
    out["recv_after_close"] = result.get("recv", "still blocked")
    out["epoll_after_close"] = result.get("epoll", "still waiting")
    again = p.bound(port + 2)  # the port is free again, and works
    p.bounce(b"d", again)
    out["port_reused"] = [d.decode() for d in p.read_all(again)]
    return out


def probe_fork(p: Probe) -> dict:
    """A forked child's calls on the parent's socket, and a socket of its
    own; its exit (C's exit: atexit handlers run) leaves the parent's port."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        got = {}
        calls = {
            "recv": lambda: p.sock.recv(100),
            "socket": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
        }
        for what, call in calls.items():
            try:
                call()
                got[what] = "worked"
            except OSError as e:
                got[what] = errno.errorcode[e.errno]
        os.write(w, json.dumps(got).encode())
        ctypes.CDLL(None).exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        out = {"child_" + k: v for k, v in json.loads(f.read() or "{}").items()}
    out["child_status"] = status
    p.bounce(b"e")
    out["after_child"] = [d.decode() for d in p.read_all()]
    return out


def probe(argv: list[str]) -> None:
    addr, port, raddr, rport = argv[0], int(argv[1]), argv[2], int(argv[3])
    p = Probe(addr, port, raddr, rport)
    out = {**probe_epoll_modes(p), **probe_dup(p)}
    if "--shim" in argv:
        out.update(probe_close_while_waiting(p, port))
        out.update(probe_fork(p))
    out["select_missed"] = p.unseen
    print(json.dumps(out), flush=True)


def main() -> None:
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "asyncio":
        asyncio_server(args[0], int(args[1]))
    elif cmd in ("threads", "reuseport"):
        threads_server(args[0], int(args[1]), int(args[2]), reuseport=cmd == "reuseport")
    elif cmd == "client":
        client(args[0], int(args[1]), int(args[2]), *(int(a) for a in args[3:4]))
    elif cmd == "reflector":
        reflector(args[0], int(args[1]))
    elif cmd == "probe":
        probe(args)
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
