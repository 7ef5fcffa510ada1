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
from scapy.layers.inet import IP, UDP

from veloz.lab import fixtures

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

# The cases, their config and the frame builders: ddos's fixture table.
TABLE = fixtures.load("ddos")
_table = fixtures.module("ddos")
CONFIG, DST4, e, udp4 = _table.CONFIG, _table.DST4, _table.e, _table.udp4
CASES = TABLE.fixtures


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
    vectors.write_pcap(d / "in.pcap", [c.input for c in CASES])
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
        assert r["len_in"] == r["len_out"] == len(c.input), c.name
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
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Only the native replay's clock: the veloz command around it keeps the
 * real one (its own timeouts would expire at the first step). */
int clock_gettime(clockid_t id, struct timespec *ts)
{
	static unsigned long long now = 1000000000ull, step;
	static const char *steps;

	if (id != CLOCK_MONOTONIC || strcmp(program_invocation_short_name, "vz-replay"))
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
