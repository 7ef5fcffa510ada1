"""veloz dump's capture file writer (src/dump/capfile.c), read back by scapy:
pcapng with each frame's verdict as its comment, classic pcap without."""

from __future__ import annotations

import subprocess
from pathlib import Path

from scapy.utils import PcapNgReader, PcapReader

from veloz.core import paths

WRITER = paths.build_dir() / "tests/unit/capfile-write"
TS = 1700000000123456789


def write(path: Path, *fmt: str) -> None:
    subprocess.run([str(WRITER), str(path), *fmt], check=True)


def test_pcapng_holds_each_frame_its_length_time_and_verdict(tmp_path):
    out = tmp_path / "x.pcapng"
    write(out)
    with PcapNgReader(str(out)) as r:
        pkts = list(r)
    assert [bytes(p) for p in pkts] == [bytes([0xA0]) * 60, bytes([0xA1]) * 99, bytes([0xA2]) * 20]
    assert [p.wirelen for p in pkts] == [60, 99, 100]
    assert [int(p.time * 10**9) // 1000 for p in pkts] == [(TS + i) // 1000 for i in range(3)]
    comments = [b" ".join(c if isinstance(c, bytes) else c.encode() for c in p.comments)
                for p in pkts]  # fmt: skip
    assert comments == [b"verdict=drop queue=0", b"verdict=pass queue=1",
                        b"verdict=redirect port=1 queue=0"]  # fmt: skip


def test_pcap_holds_the_frames_with_nanosecond_times(tmp_path):
    out = tmp_path / "x.pcap"
    write(out, "pcap")
    with PcapReader(str(out)) as r:
        pkts = list(r)
    assert [bytes(p) for p in pkts] == [bytes([0xA0]) * 60, bytes([0xA1]) * 99, bytes([0xA2]) * 20]
    assert [p.wirelen for p in pkts] == [60, 99, 100]
    assert int(pkts[1].time * 10**9) // 1000 == (TS + 1) // 1000


def test_a_write_that_fails_is_an_error(tmp_path):
    done = subprocess.run([str(WRITER), "/dev/full"], check=False)
    assert done.returncode == 1
