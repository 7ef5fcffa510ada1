# SPDX-License-Identifier: BSD-2-Clause
"""The ddos NF with a real rule set, on both builds: every packet's verdict is
expected here from the rules, xdp and native agree byte for byte, and the
token buckets pass exactly `burst` packets of a flood.

Time: BPF_PROG_TEST_RUN and the native replay both read CLOCK_MONOTONIC, so a
bucket refills between packets as on the wire. The exact counts use rate = 0
(burst packets, then none) or rate = 1 (no whole token within one replay,
which takes milliseconds); rate = 2^32-1 refills between any two packets.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment
from scapy.layers.l2 import ARP, Dot1Q, Ether

from .conftest import (
    BACKENDS,
    VECTOR_DIR,
    VECTOR_FILES,
    VELOZ,
    needs_root,
    parse_json_lines,
    parse_pcap,
    run_veloz,
    vectors,
)

MAC_A, MAC_B = "02:00:c6:12:00:01", "02:00:c6:12:00:02"
DST4, DST6 = "198.18.1.1", "fd00:198:18:1::1"

CONFIG = """\
allow = ["198.18.0.0/24", "fd00:198:18::/64"]

[[rule]]    # 0: attack UDP from a blocked prefix, every fragment
src = "198.18.128.0/17"
proto = "udp"
action = "drop"

[[rule]]    # 1: SYN flood: 5 SYNs per source, then none (no refill)
src = "198.18.0.0/16"
proto = "tcp"
tcp_flags = "syn,!ack"
action = "limit"
rate = 0
burst = 5

[[rule]]    # 2: DNS from anywhere
proto = "udp"
dport = 53
action = "drop"

[[rule]]    # 3: first match wins: this host is let through...
src = "198.19.4.4/32"
action = "allow"

[[rule]]    # 4: ...the rest of its /24 is not
src = "198.19.4.0/24"
action = "drop"

[[rule]]    # 5: 3 per source, refill 1/s: no whole token within a replay
src = "198.19.2.0/24"
proto = "udp"
dport = 9
action = "limit"
rate = 1
burst = 3

[[rule]]    # 6: refills between any two packets
src = "198.19.3.0/24"
action = "limit"
rate = 4294967295
burst = 1

[[rule]]    # 7: IPv6 port rule
src = "fd00:198:18::/48"
proto = "udp"
dport = 7
action = "drop"
"""


def e() -> Ether:
    return Ether(src=MAC_A, dst=MAC_B)


def udp4(src: str, dport: int = 5001, **ip: object) -> bytes:
    return bytes(
        e() / IP(src=src, dst=DST4, id=1, **ip) / UDP(sport=40000, dport=dport) / (b"u" * 18)
    )


def tcp4(src: str, flags: str, dport: int = 80) -> bytes:
    return bytes(e() / IP(src=src, dst=DST4, id=1) / TCP(sport=40001, dport=dport, flags=flags))


def udp6(src: str, dport: int, *ext: object) -> bytes:
    pkt = IPv6(src=src, dst=DST6, hlim=64)
    for hdr in ext:
        pkt = pkt / hdr
    return bytes(e() / pkt / UDP(sport=40000, dport=dport) / (b"6" * 18))


def frag4(
    src: str, offset: int, proto: int = 17, size: int = 64, mf: bool = True, payload: bytes = b""
) -> bytes:
    """An IPv4 fragment at offset (8-byte units) of opaque data."""
    ip = IP(src=src, dst=DST4, id=7, proto=proto, frag=offset, flags="MF" if mf else 0)
    return bytes(e() / ip / (payload or b"f" * size))


def frag6(src: str, offset: int, payload: bytes) -> bytes:
    ext = IPv6ExtHdrFragment(nh=17, offset=offset, m=1, id=9)
    return bytes(e() / IPv6(src=src, dst=DST6, hlim=64) / ext / payload)


def with_byte(frame: bytes, index: int, value: int) -> bytes:
    return frame[:index] + bytes([value]) + frame[index + 1 :]


def with_tot_len(frame: bytes, tot_len: int) -> bytes:
    return frame[:16] + tot_len.to_bytes(2, "big") + frame[18:]


@dataclass(frozen=True)
class Case:
    name: str
    frame: bytes
    verdict: str  # "pass" or "drop"


def cases() -> list[Case]:
    legit_udp = udp4("198.19.1.2")
    out = [
        # legitimate traffic: no rule matches, untouched
        Case("legit-tcp-ack", tcp4("198.19.1.2", "PA"), "pass"),
        Case("legit-tcp-syn", tcp4("198.19.1.2", "S"), "pass"),
        Case("legit-udp", legit_udp, "pass"),
        Case("arp", bytes(e() / ARP(psrc="198.19.1.2", pdst=DST4)), "pass"),
        # attack UDP from the blocked /17, tagged or not, any port
        Case("attack-udp", udp4("198.18.200.7", 9), "drop"),
        Case("attack-udp-low-edge", udp4("198.18.128.0", 1234), "drop"),
        Case(
            "attack-udp-vlan",
            bytes(
                Ether(src=MAC_A, dst=MAC_B)
                / Dot1Q(vlan=10)
                / IP(src="198.18.200.7", dst=DST4)
                / UDP(sport=1, dport=2)
            ),
            "drop",
        ),  # fmt: skip
        Case("just-below-blocked", udp4("198.18.127.255", 1234), "pass"),
        Case("attack-tcp-not-udp", tcp4("198.18.200.7", "PA"), "pass"),
        # allow-listed sources pass before any rule (rule 2 would drop them)
        Case("allowlisted-dns", udp4("198.18.0.5", 53), "pass"),
        Case("allowlisted-v6-port7", udp6("fd00:198:18::9", 7), "pass"),
        Case("dns", udp4("198.19.1.2", 53), "drop"),
        Case("dns-ip-options", udp4("198.19.1.2", 53, options=[IPOption_NOP()] * 4), "drop"),
        # first match wins
        Case("allow-before-drop", udp4("198.19.4.4"), "pass"),
        Case("drop-after-allow", udp4("198.19.4.5"), "drop"),
        # IPv6
        Case("v6-port7", udp6("fd00:198:18:1::2", 7), "drop"),
        Case("v6-port8", udp6("fd00:198:18:1::2", 8), "pass"),
        Case("v6-port7-destopts", udp6("fd00:198:18:1::2", 7, IPv6ExtHdrDestOpt()), "drop"),
        Case("v6-other-prefix", udp6("fd00:198:19::2", 7), "pass"),
        Case(
            "v6-first-fragment-port7",
            udp6("fd00:198:18:1::2", 7, IPv6ExtHdrFragment(offset=0, m=1, id=9)),
            "drop",
        ),  # fmt: skip
        Case("v6-later-fragment", frag6("fd00:198:18:1::2", 100, b"\0\x07" * 16), "pass"),
        # IPv4 fragments: a rule without a port drops them all, a port rule
        # only sees the first
        Case("attack-later-fragment", frag4("198.18.200.7", 185), "drop"),
        Case("legit-later-fragment", frag4("198.19.1.2", 185), "pass"),
        Case("dns-first-fragment", udp4("198.19.1.2", 53, flags="MF"), "drop"),
        Case("dns-later-fragment", frag4("198.19.1.2", 3, mf=False), "pass"),
        # data that reads like a UDP header to port 53 is still data
        Case(
            "dns-lookalike-later-fragment",
            frag4("198.19.1.2", 3, payload=b"\0\x35\0\x35" + bytes(28)),
            "pass",
        ),  # fmt: skip
        # malformed: dropped, allow-listed or not
        Case("truncated-ip-header", legit_udp[: 14 + 12], "drop"),
        Case("bad-ihl", with_byte(legit_udp, 14, 0x44), "drop"),
        Case("bad-version", with_byte(legit_udp, 14, 0x55), "drop"),
        Case("tot-len-past-frame", with_tot_len(legit_udp, len(legit_udp) - 14 + 1), "drop"),
        Case("tot-len-below-header", with_tot_len(legit_udp, 19), "drop"),
        Case(
            "tot-len-past-frame-allowlisted",
            with_tot_len(udp4("198.18.0.5"), len(legit_udp) - 14 + 40),
            "drop",
        ),  # fmt: skip
        Case("udp-header-cut", with_tot_len(legit_udp, 20 + 6)[: 14 + 26], "drop"),
        Case("tcp-tiny-first-fragment", frag4("198.19.1.2", 0, proto=6, size=8), "drop"),
        # ... even when Ethernet padding makes the frame long enough
        Case(
            "tcp-tiny-first-fragment-padded",
            frag4("198.19.1.2", 0, proto=6, size=8).ljust(60, b"\0"),
            "drop",
        ),  # fmt: skip
        Case("udp-header-cut-padded", with_tot_len(legit_udp, 20 + 6), "drop"),
        Case("tcp-fragment-at-8", frag4("198.19.1.2", 1, proto=6, size=32, mf=False), "drop"),
        Case(
            "truncated-ipv6-header",
            bytes(e() / IPv6(src="fd00:198:18:1::2", dst=DST6))[: 14 + 30],
            "drop",
        ),  # fmt: skip
        Case(
            "ipv6-7-extension-headers",
            udp6("fd00:198:18:1::2", 8, *[IPv6ExtHdrDestOpt() for _ in range(7)]),
            "drop",
        ),  # fmt: skip
        Case(
            "ipv6-6-extension-headers",
            udp6("fd00:198:18:1::2", 7, *[IPv6ExtHdrDestOpt() for _ in range(6)]),
            "drop",
        ),  # fmt: skip
        Case(
            "ipv6-ext-header-past-payload",
            udp6("fd00:198:18:1::2", 8, IPv6ExtHdrDestOpt(len=40)),
            "drop",
        ),  # fmt: skip
        Case("ipv6-payload-past-frame", udp6("fd00:198:18:1::2", 8)[:-4], "drop"),
        # padding after tot_len is fine (60-byte minimum frames)
        Case(
            "padded-min-frame",
            bytes(e() / IP(src="198.19.1.2", dst=DST4, id=1) / UDP(sport=1, dport=2)).ljust(
                60, b"\0"
            ),
            "pass",
        ),  # fmt: skip
    ]
    # SYN flood from one source: 5 pass, then drop; a SYN-ACK is no SYN; another
    # source has its own bucket
    for i in range(8):
        out.append(Case(f"syn-flood-{i}", tcp4("198.18.5.5", "S"), "pass" if i < 5 else "drop"))
        if i == 2:
            out += [
                Case(f"syn-other-source-{j}", tcp4("198.18.6.6", "S"), "pass") for j in range(3)
            ]
    out.append(Case("syn-ack-after-flood", tcp4("198.18.5.5", "SA"), "pass"))
    out.append(Case("ack-after-flood", tcp4("198.18.5.5", "A"), "pass"))
    # limit with refill 1/s
    out += [Case(f"udp9-limit-{i}", udp4("198.19.2.2", 9), "pass" if i < 3 else "drop")
            for i in range(6)]  # fmt: skip
    out.append(Case("udp9-limit-other-port", udp4("198.19.2.2", 10), "pass"))
    # limit that refills between packets: burst 1, yet every packet passes
    out += [Case(f"fast-refill-{i}", udp4("198.19.3.3", 5000 + i), "pass") for i in range(6)]
    return out


CASES = cases()


@dataclass
class Result:
    returncode: int
    stderr: str
    records: list[dict]
    summary: dict | None
    out_raw: bytes | None


def replay(backend: str, pcap: Path, config: Path, out: Path) -> Result:
    proc = run_veloz("replay", "ddos", "--backend", backend, "--in", pcap, "--out", out,
                     "--config", config, "--json")  # fmt: skip
    records, summary = parse_json_lines(proc.stdout) if proc.returncode == 0 else ([], None)
    raw = out.read_bytes() if out.exists() else None
    return Result(proc.returncode, proc.stderr, records, summary, raw)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ddos")
    vectors.write_pcap(d / "in.pcap", [c.frame for c in CASES])
    (d / "ddos.toml").write_text(CONFIG)
    return d


@pytest.fixture(scope="module")
def results() -> dict[str, Result]:
    """Each backend's replay of CASES, run once for the module."""
    return {}


def run(results: dict[str, Result], workdir: Path, backend: str) -> Result:
    if backend not in results:
        res = replay(
            backend, workdir / "in.pcap", workdir / "ddos.toml", workdir / f"{backend}.pcap"
        )
        assert res.returncode == 0 and res.stderr == "", (res.returncode, res.stderr)
        results[backend] = res
    return results[backend]


@pytest.mark.parametrize("backend", BACKENDS)
def test_verdicts(results, workdir, backend):
    res = run(results, workdir, backend)
    assert len(res.records) == len(CASES)
    wrong = [
        f"{c.name}: {r['verdict']} (expected {c.verdict})"
        for c, r in zip(CASES, res.records, strict=True)
        if r["verdict"] != c.verdict
    ]
    assert not wrong, "\n".join(wrong)
    # PASS and DROP leave the frame as it came
    for c, r in zip(CASES, res.records, strict=True):
        assert r["len_in"] == r["len_out"] == len(c.frame), c.name
    assert res.summary is not None
    assert res.summary["pass"] == sum(c.verdict == "pass" for c in CASES)
    assert res.summary["drop"] == sum(c.verdict == "drop" for c in CASES)
    assert res.summary["written"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_rate_limit_passes_exactly_burst(results, workdir, backend):
    res = run(results, workdir, backend)
    by_name = {c.name: r["verdict"] for c, r in zip(CASES, res.records, strict=True)}
    syn = [v for n, v in by_name.items() if n.startswith("syn-flood-")]
    assert syn.count("pass") == 5 and syn[5:] == ["drop"] * 3
    udp9 = [v for n, v in by_name.items() if n.startswith("udp9-limit-") and n[-1].isdigit()]
    assert udp9.count("pass") == 3
    fast = [v for n, v in by_name.items() if n.startswith("fast-refill-")]
    assert fast == ["pass"] * 6


@needs_root
def test_xdp_matches_native(results, workdir):
    xdp, native = run(results, workdir, "xdp"), run(results, workdir, "native")

    def strip(r: dict) -> dict:
        return {k: v for k, v in r.items() if k not in ("ns", "backend")}

    assert [strip(r) for r in xdp.records] == [strip(r) for r in native.records]
    assert xdp.summary and native.summary
    assert strip(xdp.summary) == strip(native.summary)
    assert xdp.out_raw is not None and xdp.out_raw == native.out_raw
    assert parse_pcap(xdp.out_raw).records == []


# Rules that the shared vectors' addresses (198.18.0.1, 198.19.0.2, fd00:198:18::1,
# ...) and ports (UDP 9, TCP 80) run into.
VECTOR_CONFIG = """\
[[rule]]
src = "198.18.0.0/16"
proto = "udp"
dport = 9
action = "drop"

[[rule]]
proto = "tcp"
tcp_flags = "syn,!ack"
action = "limit"
rate = 0
burst = 1

[[rule]]
src = "fd00:198:18::/48"
proto = "icmp6"
action = "drop"

[[rule]]
proto = "udp"
action = "limit"
rate = 0
burst = 2
"""


@needs_root
@pytest.mark.parametrize("vector", VECTOR_FILES)
def test_shared_vectors_agree_under_rules(workdir, vector):
    config = workdir / "vectors.toml"
    config.write_text(VECTOR_CONFIG)
    runs = {
        b: replay(b, VECTOR_DIR / vector, config, workdir / f"{vector}.{b}.pcap")
        for b in ("xdp", "native")
    }
    for b, res in runs.items():
        assert res.returncode == 0 and res.stderr == "", (b, res.stderr)
    xdp, native = runs["xdp"], runs["native"]
    assert [{k: v for k, v in r.items() if k != "ns"} for r in xdp.records] == [
        {k: v for k, v in r.items() if k != "ns"} for r in native.records
    ]
    assert xdp.out_raw == native.out_raw
    assert native.summary is not None
    if vector in ("l3l4.pcap", "encap.pcap", "fragments.pcap", "options.pcap"):
        assert native.summary["drop"] > 0 and native.summary["pass"] > 0, native.summary


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[[rule]]\nproto = "udpx"\naction = "drop"\n', "unknown protocol 'udpx'"),
        ('[[rule]]\nsrc = "198.18.0.1/16"\naction = "drop"\n', "host bits set"),
        ('[[rule]]\nproto = "udp"\ndport = 65536\naction = "drop"\n', "between 1 and 65535"),
        ('allow = ["fd00::zz/64"]\n', "bad allow-list prefix"),
    ],
)
def test_bad_config_is_one_line(workdir, tmp_path, backend, toml, message):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml)
    res = replay(backend, workdir / "in.pcap", cfg, tmp_path / "out.pcap")
    assert res.returncode == 2, res
    assert message in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert not (tmp_path / "out.pcap").exists()


def test_case_names_are_unique():
    assert len({c.name for c in CASES}) == len(CASES)


# ---- the bucket table full (issue 8: maps full) ----------------------------------------

OVERFLOW_CONFIG = """\
[[rule]]    # one token per source, never refilled: a source's second frame drops
src = "198.18.0.0/15"
proto = "udp"
action = "limit"
rate = 0
burst = 1
"""
VZ_DDOS_BUCKETS_MAX = 65536  # include/veloz/abi.h
OVERFLOW_SOURCES = VZ_DDOS_BUCKETS_MAX + 4464  # more sources than the table has buckets


def overflow_frames() -> tuple[list[bytes], list[str]]:
    """A UDP frame from each of OVERFLOW_SOURCES sources, then the last 100
    sources again, then the first 100 again. The IPv4 header checksum is
    patched per source; the UDP checksum is 0 (none), which IPv4 allows."""
    template = bytearray(bytes(e() / IP(src="198.18.0.0", dst=DST4) /
                               UDP(sport=1024, dport=9, chksum=0) / (b"x" * 18)))  # fmt: skip
    ip = 14

    def frame(n: int) -> bytes:
        f = bytearray(template)
        f[ip + 12 : ip + 16] = (0xC6120000 + n).to_bytes(4, "big")  # 198.18.0.0 + n
        f[ip + 10 : ip + 12] = b"\0\0"
        words = sum(int.from_bytes(f[ip + i : ip + i + 2], "big") for i in range(0, 20, 2))
        while words >> 16:
            words = (words & 0xFFFF) + (words >> 16)
        f[ip + 10 : ip + 12] = (~words & 0xFFFF).to_bytes(2, "big")
        return bytes(f)

    first = [frame(n) for n in range(1, OVERFLOW_SOURCES + 1)]
    again_last, again_first = first[-100:], first[:100]
    kinds = ["new"] * len(first) + ["recent"] * 100 + ["evicted"] * 100
    return first + again_last + again_first, kinds


@pytest.mark.parametrize("backend", BACKENDS)
def test_bucket_table_overflow_evicts_the_oldest_sources(tmp_path, backend):
    # A flood of more sources than there are buckets: the table is an LRU,
    # so it never refuses a source (no frame goes unjudged or uncounted);
    # the least recently seen sources lose their buckets and start over
    # with a full one, while recent sources keep theirs.
    frames, kinds = overflow_frames()
    vectors.write_pcap(tmp_path / "in.pcap", frames)
    (tmp_path / "ddos.toml").write_text(OVERFLOW_CONFIG)
    res = replay(backend, tmp_path / "in.pcap", tmp_path / "ddos.toml", tmp_path / "out.pcap")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.summary is not None and len(res.records) == len(frames)
    assert res.summary["pass"] + res.summary["drop"] == len(frames)
    verdicts: dict[str, list[str]] = {}
    for kind, r in zip(kinds, res.records, strict=True):
        verdicts.setdefault(kind, []).append(r["verdict"])
    assert set(verdicts["new"]) == {"pass"}
    assert set(verdicts["recent"]) == {"drop"}, "a recent source lost its bucket"
    assert set(verdicts["evicted"]) == {"pass"}, "the oldest sources kept their buckets"


# ---- token arithmetic under a clock the test drives (native build) ----------------------

# CLOCK_MONOTONIC advances on every read, by the steps in VZ_TEST_CLOCK_STEPS
# (nanoseconds, comma-separated; the last one repeats). During a replay
# without --repeat only the NF reads it (vz_time_ns() on the limit path), so
# the n-th rate-limited packet sees the n-th step since the one before.
FAKE_CLOCK_C = r"""
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int clock_gettime(clockid_t id, struct timespec *ts)
{
	static unsigned long long now = 1000000000ull, step;
	static const char *steps;

	if (id != CLOCK_MONOTONIC)
		return (int)syscall(SYS_clock_gettime, id, ts);
	if (!steps)
		steps = getenv("VZ_TEST_CLOCK_STEPS");
	if (*steps) {
		char *end;

		step = strtoull(steps, &end, 10);
		steps = *end ? end + 1 : end;
	}
	now += step;
	ts->tv_sec = (time_t)(now / 1000000000ull);
	ts->tv_nsec = (long)(now % 1000000000ull);
	return 0;
}
"""


@pytest.fixture(scope="module")
def fake_clock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("clock")
    (d / "clock.c").write_text(FAKE_CLOCK_C)
    lib = d / "libclock.so"
    done = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(d / "clock.c")],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot build the clock shim: {done.stderr.strip()}")
    return lib


def replay_with_clock(lib: Path, steps: list[int], rule: str, frames: list[bytes], d: Path) -> list:
    vectors.write_pcap(d / "in.pcap", frames)
    (d / "cfg.toml").write_text(rule)
    env = os.environ | {"LD_PRELOAD": str(lib), "VZ_TEST_CLOCK_STEPS": ",".join(map(str, steps))}
    proc = subprocess.run(
        [str(VELOZ), "replay", "ddos", "--backend", "native", "--in", d / "in.pcap",
         "--config", d / "cfg.toml", "--json"],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    records, _ = parse_json_lines(proc.stdout)
    return [r["verdict"] for r in records]


LIMIT_RULE = """\
[[rule]]
src = "198.19.2.0/24"
proto = "udp"
action = "limit"
rate = {rate}
burst = 3
"""


def test_partial_refill(fake_clock, tmp_path):
    # 1000 pps and a packet every 0.5 ms: half a token each; 3 in the bucket,
    # so 5 pass before it is empty, then every other one
    verdicts = replay_with_clock(fake_clock, [500_000], LIMIT_RULE.format(rate=1000),
                                 [udp4("198.19.2.2")] * 11, tmp_path)  # fmt: skip
    assert verdicts == ["pass"] * 5 + ["drop", "pass"] * 3


def test_long_idle_fills_the_bucket_without_overflow(fake_clock, tmp_path):
    # 2^54 ns (208 days) at 1024 pps is 2^64 billionths of a token: a refill
    # computed as elapsed * rate would wrap to 0 and starve the source
    verdicts = replay_with_clock(fake_clock, [2**54], LIMIT_RULE.format(rate=1024),
                                 [udp4("198.19.2.2")] * 8, tmp_path)  # fmt: skip
    assert verdicts == ["pass"] * 8


def test_no_refill_at_rate_zero_however_long(fake_clock, tmp_path):
    verdicts = replay_with_clock(fake_clock, [2**54], LIMIT_RULE.format(rate=0),
                                 [udp4("198.19.2.2")] * 6, tmp_path)  # fmt: skip
    assert verdicts == ["pass"] * 3 + ["drop"] * 3


def test_bucket_never_holds_more_than_burst(fake_clock, tmp_path):
    # 2.5 ms apart at 1000 pps the bucket tops up to its 3 tokens, never past:
    # after 6 such packets, a back-to-back flood gets 2 (what is left), not 9
    steps = [2_500_000] * 6 + [1]
    verdicts = replay_with_clock(fake_clock, steps, LIMIT_RULE.format(rate=1000),
                                 [udp4("198.19.2.2")] * 14, tmp_path)  # fmt: skip
    assert verdicts == ["pass"] * 8 + ["drop"] * 6
