"""BGP on the testbed: Debian's bird2 in vz-gen announces routes to bird2 in
vz-dut, which installs them in vz-dut's kernel table (where a router with
`sync = "kernel"` follows them).

    vz-gen  bird "announcer"  AS 65001, 198.18.0.1  --BGP over gen-dut-->
    vz-dut  bird "receiver"   AS 65002, 198.18.0.2  -> kernel table main

The announcer sends every route with the next hop 198.18.1.2 (vz-sink, on
vz-dut's other port), so what the router forwards by BGP reaches the sink.
The receiver resolves that next hop through its connected routes (gateway
recursive) and exports what it learns to the kernel with ECMP merged.

Routes are announced by static protocols of the announcer: `feed` (a file,
possibly a full table) and one small protocol per churn prefix, so that a
single prefix is withdrawn or announced again at once (`birdc disable` /
`enable`) without BIRD reading the whole table again.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from veloz.core.errors import VelozError

ANNOUNCER = ("vz-gen", "198.18.0.1", 65001)
RECEIVER = ("vz-dut", "198.18.0.2", 65002)
NEXT_HOP = "198.18.1.2"  # vz-sink's sink-dut
# quick to (re)connect: a test does not wait BIRD's default 120 s hold time
TIMERS = "hold time 9; keepalive time 3; connect delay time 1; connect retry time 2;"


def churn_name(i: int) -> str:
    return f"churn{i}"


def announcer_config(feed: Path | None, churn: Sequence[str]) -> str:
    netns, addr, asn = ANNOUNCER
    _, peer, peer_asn = RECEIVER
    lines = [f"router id {addr};", "log stderr { warning, error, fatal };", "protocol device {}"]
    if feed is not None:
        # BIRD takes `include` only at the start of a line
        lines += ["protocol static feed { ipv4;", f'include "{feed}";', "}"]
    for i, prefix in enumerate(churn):
        lines.append(f"protocol static {churn_name(i)} {{ ipv4; route {prefix} blackhole; }}")
    lines.append(
        f"protocol bgp receiver {{ local {addr} as {asn}; neighbor {peer} as {peer_asn}; "
        f"{TIMERS} ipv4 {{ import none; export all; next hop address {NEXT_HOP}; }}; }}"
    )
    return "\n".join(lines) + "\n"


def receiver_config() -> str:
    netns, addr, asn = RECEIVER
    _, peer, peer_asn = ANNOUNCER
    return "\n".join([
        f"router id {addr};",
        "log stderr { warning, error, fatal };",
        "protocol device {}",
        'protocol direct { ipv4; interface "dut-*"; }',
        # only what BGP learns goes to the kernel; ECMP paths merged
        "protocol kernel { ipv4 { import none; export where source = RTS_BGP; }; "
        "merge paths on; }",
        f"protocol bgp announcer {{ local {addr} as {asn}; neighbor {peer} as {peer_asn}; "
        f"{TIMERS} ipv4 {{ import all; export none; gateway recursive; igp table master4; }}; }}",
    ]) + "\n"  # fmt: skip


def feed_file(path: Path, prefixes: Sequence[str]) -> Path:
    """A static protocol's routes: each prefix, announced as a blackhole
    (BGP carries the next hop; the announcer forwards nothing itself)."""
    with path.open("w") as f:
        for prefix in prefixes:
            f.write(f"route {prefix} blackhole;\n")
    return path


class Bird:
    """One bird daemon in a namespace, in the foreground of its own process."""

    def __init__(self, netns: str, workdir: Path, config: str) -> None:
        self.netns = netns
        workdir.mkdir(parents=True, exist_ok=True)
        self.conf = workdir / f"bird-{netns}.conf"
        self.sock = workdir / f"bird-{netns}.ctl"
        self.log = workdir / f"bird-{netns}.log"
        self.conf.write_text(config)
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Bird:
        argv = ["ip", "netns", "exec", self.netns, "bird", "-f", "-c", str(self.conf),
                "-s", str(self.sock)]  # fmt: skip
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                why = self.log.read_text().strip() or "no word from it"
                raise VelozError(f"bird in {self.netns} did not start: {why}")
            time.sleep(0.05)
        return self

    def _answers(self) -> bool:
        if not self.sock.exists():
            return False
        argv = ["birdc", "-s", str(self.sock), "show", "status"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        return "Daemon is up and running" in done.stdout

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        with contextlib.suppress(OSError):
            self.sock.unlink()

    def birdc(self, *command: str) -> str:
        done = subprocess.run(["birdc", "-s", str(self.sock), *command], capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip
        if done.returncode != 0:
            raise VelozError(f"birdc {' '.join(command)}: {done.stderr.strip() or done.stdout}")
        return done.stdout

    def established(self, protocol: str) -> bool:
        return "Established" in self.birdc("show", "protocols", protocol)

    def withdraw(self, i: int) -> None:
        self.birdc("disable", churn_name(i))

    def announce(self, i: int) -> None:
        self.birdc("enable", churn_name(i))
