"""Legitimate traffic for the ddos experiment, on kernel sockets both sides.

`serve` (in vz-dut) echoes UDP datagrams and counts the bytes of TCP streams;
`client` (in vz-gen) sends a UDP request every few milliseconds, times the
echoes, and pushes one TCP stream as fast as it goes. What the server counted
is the goodput: bytes that reached the application, not bytes offered.

    python -m veloz.lab.legit serve --addr 198.18.0.2
    python -m veloz.lab.legit client --addr 198.18.0.2 --seconds 3
"""

from __future__ import annotations

import argparse
import json
import selectors
import signal
import socket
import struct
import sys
import threading
import time

UDP_PORT, TCP_PORT = 7007, 7008  # not the generator's (9, discard)
REQUEST = struct.Struct("!Qd")  # sequence number, send time
LATE_S = 1.0  # an echo later than this counts as lost


def serve(addr: str) -> None:
    """Until SIGINT: one JSON line when listening, one summary line at the end."""
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    sel = selectors.DefaultSelector()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((addr, UDP_PORT))
    udp.setblocking(False)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((addr, TCP_PORT))
    tcp.listen()
    tcp.setblocking(False)
    sel.register(udp, selectors.EVENT_READ, "udp")
    sel.register(tcp, selectors.EVENT_READ, "listen")
    print(json.dumps({"listening": addr, "udp": UDP_PORT, "tcp": TCP_PORT}), flush=True)
    echoed = tcp_bytes = 0
    buf = bytearray(1 << 16)
    while not stop.is_set():
        for key, _ in sel.select(timeout=0.1):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            if key.data == "udp":
                try:
                    data, peer = sock.recvfrom(2048)
                    sock.sendto(data, peer)
                    echoed += 1
                except (BlockingIOError, ConnectionRefusedError):
                    pass
            elif key.data == "listen":
                try:
                    conn, _ = sock.accept()
                except BlockingIOError:
                    continue
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ, "stream")
            else:
                try:
                    n = sock.recv_into(buf)
                except BlockingIOError:
                    continue
                except OSError:
                    n = 0
                if n == 0:
                    sel.unregister(sock)
                    sock.close()
                tcp_bytes += n
    print(json.dumps({"summary": True, "udp_echoed": echoed, "tcp_bytes": tcp_bytes}), flush=True)


def _push_tcp(addr: str, deadline: float, out: dict) -> None:
    """One stream, as fast as the path allows, until the deadline."""
    chunk = b"\0" * (1 << 16)
    sent = 0
    try:
        with socket.create_connection((addr, TCP_PORT), timeout=2.0) as s:
            s.settimeout(0.2)
            while time.monotonic() < deadline:
                try:
                    sent += s.send(chunk)
                except TimeoutError:
                    pass  # the window is shut: try again until the deadline
    except OSError as e:
        out["tcp_error"] = str(e)
    out["tcp_sent"] = sent


def client(addr: str, seconds: float, interval: float) -> dict:
    """UDP echoes answered and their round trips, and the TCP bytes pushed."""
    start = time.monotonic()
    deadline = start + seconds
    tcp: dict = {}
    pusher = threading.Thread(target=_push_tcp, args=(addr, deadline, tcp))
    pusher.start()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.connect((addr, UDP_PORT))
    sent = 0
    rtts: list[float] = []
    next_send = start
    while True:
        now = time.monotonic()
        if now >= deadline + LATE_S:
            break
        if now >= next_send and now < deadline:
            try:
                udp.send(REQUEST.pack(sent, now))
            except OSError:
                pass  # a refused or unreachable echo port counts as lost
            sent += 1
            next_send += interval
        wait = (next_send if now < deadline else deadline + LATE_S) - time.monotonic()
        udp.settimeout(max(wait, 0.0005))
        try:
            seq, t0 = REQUEST.unpack(udp.recv(64)[: REQUEST.size])
        except (TimeoutError, OSError, struct.error):
            continue
        rtt = time.monotonic() - t0
        if seq < sent and rtt <= LATE_S:
            rtts.append(rtt)
    pusher.join()
    rtts.sort()
    return {
        "udp_sent": sent,
        "udp_answered": len(rtts),
        "rtt_ms": 1e3 * sum(rtts) / len(rtts) if rtts else None,
        "rtt_p99_ms": 1e3 * rtts[min(len(rtts) - 1, int(0.99 * len(rtts)))] if rtts else None,
        "tcp_sent": tcp.get("tcp_sent", 0),
        "tcp_error": tcp.get("tcp_error"),
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m veloz.lab.legit", description=__doc__)
    p.add_argument("role", choices=("serve", "client"))
    p.add_argument("--addr", required=True)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--interval", type=float, default=0.005, help="seconds between UDP requests")
    a = p.parse_args(argv)
    if a.role == "serve":
        serve(a.addr)
    else:
        print(json.dumps(client(a.addr, a.seconds, a.interval)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
