# SPDX-License-Identifier: BSD-2-Clause
"""Bad input to `veloz replay`: a non-zero exit, exactly one line on stderr
starting with "veloz: ", nothing on stdout and no output pcap left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import BACKENDS, NFS, VECTOR_DIR, run_veloz, vectors

GOOD_PCAP = VECTOR_DIR / "l3l4.pcap"

# What the tool's contract says exits 2: an unknown NF, a bad config key, a value out of range.
USAGE = 2


def assert_one_error_line(proc, out: Path | None = None, code: int | None = None) -> str:
    context = f"exit {proc.returncode}, stderr {proc.stderr!r}, stdout {proc.stdout[:300]!r}"
    assert proc.returncode != 0, context
    if code is not None:
        assert proc.returncode == code, context
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and proc.stderr.endswith("\n"), f"not one line: {context}"
    assert lines[0].startswith("veloz: ") and len(lines[0]) > len("veloz: "), context
    assert proc.stdout == "", context
    if out is not None:
        assert not out.exists(), f"{out.name} left behind ({out.stat().st_size} bytes): {context}"
    return lines[0]


def replay_args(nf: str, backend: str, pcap: Path, out: Path, *extra: str) -> list[str | Path]:
    return ["replay", nf, "--backend", backend, "--in", pcap, "--out", out, "--json", *extra]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "out.pcap"


def needs(nf: str) -> None:
    if nf not in NFS:
        pytest.skip(f"this build has no {nf} NF")


# ---- contract: exit 2 --------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_unknown_nf(out: Path, backend: str):
    proc = run_veloz(*replay_args("no-such-nf", backend, GOOD_PCAP, out))
    line = assert_one_error_line(proc, out, USAGE)
    assert "no-such-nf" in line


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("nf", "setting", "mentions"),
    [
        pytest.param("redirect", "nosuch=1", "nosuch", id="redirect-unknown-key"),
        pytest.param("memaccess", "port=1", "port", id="memaccess-unknown-key"),
        pytest.param("drop", "port=1", "port", id="drop-takes-no-config"),
        pytest.param("redirect", "port=64", "64", id="redirect-port=64"),
        pytest.param("redirect", "port=-1", "port", id="redirect-port=-1"),
        pytest.param("memaccess", "accesses=16385", "16384", id="memaccess-accesses=16385"),
        pytest.param("memaccess", "accesses=-1", "accesses", id="memaccess-accesses=-1"),
        pytest.param("memaccess", "accesses=abc", "abc", id="memaccess-accesses=abc"),
        pytest.param("memaccess", "accesses=", "accesses", id="memaccess-accesses-empty"),
        pytest.param("memaccess", "accesses=4294967296", "accesses", id="memaccess-accesses=2^32"),
    ],
)
def test_bad_config_set(out: Path, nf: str, setting: str, mentions: str, backend: str):
    needs(nf)
    proc = run_veloz(*replay_args(nf, backend, GOOD_PCAP, out, "--set", setting))
    line = assert_one_error_line(proc, out, USAGE)
    assert mentions in line


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("nf", "toml", "mentions"),
    [
        pytest.param("redirect", "port = 64\n", "64", id="redirect-port=64"),
        pytest.param("redirect", "nosuch = 1\n", "nosuch", id="redirect-unknown-key"),
        pytest.param("memaccess", "accesses = 16385\n", "16384", id="memaccess-accesses=16385"),
        pytest.param("memaccess", 'accesses = "abc"\n', "abc", id="memaccess-accesses=abc"),
    ],
)
def test_bad_config_file(tmp_path: Path, out: Path, nf: str, toml: str, mentions: str, backend):
    needs(nf)
    config = tmp_path / "nf.toml"
    config.write_text(toml)
    proc = run_veloz(*replay_args(nf, backend, GOOD_PCAP, out, "--config", config))
    line = assert_one_error_line(proc, out, USAGE)
    assert mentions in line


# ---- other bad input: any non-zero exit ------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_config_file(tmp_path: Path, out: Path, backend: str):
    proc = run_veloz(*replay_args("redirect", backend, GOOD_PCAP, out, "--config", tmp_path / "x"))
    assert_one_error_line(proc, out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_malformed_config_file(tmp_path: Path, out: Path, backend: str):
    config = tmp_path / "nf.toml"
    config.write_text("port = = 1\n")
    proc = run_veloz(*replay_args("redirect", backend, GOOD_PCAP, out, "--config", config))
    assert_one_error_line(proc, out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_missing_input(tmp_path: Path, out: Path, backend: str):
    missing = tmp_path / "missing.pcap"
    proc = run_veloz(*replay_args("tx", backend, missing, out))
    line = assert_one_error_line(proc, out)
    assert "missing.pcap" in line


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_ethernet_pcap(tmp_path: Path, out: Path, backend: str):
    """linktype 101 (raw IP): the same frames without their Ethernet header."""
    raw_ip = tmp_path / "raw-ip.pcap"
    frames = [f[14:] for f in (data for _, data in vectors.l3l4()) if len(f) > 14]
    raw_ip.write_bytes(vectors.pcap_bytes(frames, vectors.LINKTYPE_RAW))
    proc = run_veloz(*replay_args("tx", backend, raw_ip, out))
    assert_one_error_line(proc, out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_not_a_pcap(tmp_path: Path, out: Path, backend: str):
    junk = tmp_path / "junk.pcap"
    junk.write_text("this is not a capture file\n")
    proc = run_veloz(*replay_args("tx", backend, junk, out))
    assert_one_error_line(proc, out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pcap_cut_mid_record(tmp_path: Path, out: Path, backend: str):
    """A capture cut short in the middle of a frame: an error, and no
    half-written output pcap."""
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(GOOD_PCAP.read_bytes()[:500])
    proc = run_veloz(*replay_args("tx", backend, cut, out))
    assert proc.returncode != 0, proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("veloz: "), proc.stderr
    assert not out.exists(), f"partial output left behind ({out.stat().st_size} bytes)"


@pytest.mark.parametrize("backend", BACKENDS)
def test_unwritable_output(tmp_path: Path, backend: str):
    out = tmp_path / "no-such-dir" / "out.pcap"
    proc = run_veloz(*replay_args("tx", backend, GOOD_PCAP, out))
    assert_one_error_line(proc, out)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("repeat", ["0", "-1", "abc"])
def test_bad_repeat(out: Path, repeat: str, backend: str):
    proc = run_veloz(*replay_args("drop", backend, GOOD_PCAP, out, "--repeat", repeat))
    assert_one_error_line(proc, out)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["replay", "tx", "--backend", "bogus", "--in", GOOD_PCAP], id="bad-backend"),
        pytest.param(["replay", "tx", "--backend", "native"], id="no-input"),
        pytest.param(["replay", "--backend", "native", "--in", GOOD_PCAP], id="no-nf"),
    ],
)
def test_usage_errors(args: list):
    """DESIGN.md: every subcommand answers bad input with one clear line."""
    proc = run_veloz(*args)
    assert_one_error_line(proc, code=USAGE)
