"""The C tools' option tables (src/common/options.h): what `--describe-options
--json` says is what each parser accepts, a value out of range is refused in
one line by the tool and by `veloz`, and Python's limits are the C ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from veloz.core import options, paths
from veloz.core.errors import VelozError

# tool -> the subcommand its options follow
TOOLS = {
    "vz-gen": [],
    "vz-sink": [],
    "vz-udpd": [],
    "vz-replay": [],
    "vz-nfinfo": [],
    "vz-sim": [],
    "veloz-pingpong": [],
    "veloz-pktgen": [],
    "vz-xdp": ["run"],
    "vz-afxdp": ["run"],
    "vz-dpdk": ["run"],
}
KEYS = {"name", "short", "type", "takes_value", "required", "repeat", "default", "metavar",
        "help"}  # fmt: skip


def tool(name: str) -> str:
    try:
        return str(paths.tool(name))
    except VelozError:
        pytest.skip(f"{name} is not built here")


def run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def describe(name: str) -> list[dict]:
    done = run([tool(name), "--describe-options", "--json"])
    assert done.returncode == 0 and not done.stderr, done
    table = json.loads(done.stdout)
    assert table["prog"] == name
    return table["options"]


@pytest.mark.parametrize("name", TOOLS)
def test_describe_is_valid_json_with_every_field(name):
    rows = describe(name)
    assert rows
    names = [r["name"] for r in rows]
    assert len(names) == len(set(names)), names
    for r in rows:
        assert KEYS <= r.keys(), r
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", r["name"]), r
        assert isinstance(r["type"], str) and re.fullmatch(r"[a-z0-9-]+", r["type"]), r
        if r["type"] in ("u64", "double"):
            assert r["min"] <= r["max"], r
            if r["default"] is not None:
                assert r["min"] <= r["default"] <= r["max"], r
        if r["type"] == "enum":
            assert r["choices"] and (r["default"] is None or r["default"] in r["choices"]), r
        assert r["takes_value"] == (r["type"] != "flag"), r


def probe(name: str, argv: list[str]) -> subprocess.CompletedProcess:
    """argv, then --help: a parser that accepts argv reaches --help."""
    return run([tool(name), *TOOLS[name], *argv, "--help"])


@pytest.mark.parametrize("name", TOOLS)
def test_every_described_option_is_accepted(name):
    for r in describe(name):
        argv = [f"--{r['name']}"]
        if r["takes_value"]:
            # a valid value where the table says what one is
            if r["type"] == "enum":
                argv.append(r["choices"][0])
            elif r["type"] in ("u64", "double"):
                argv.append(str(r["max"]))
            elif r["type"] == "seconds":
                argv.append("1")
            elif r["type"] == "mac":
                argv.append("02:00:00:00:00:01")
            elif r["type"] == "group":
                argv.append("0")
            else:
                argv.append(r["default"] or "x")
        done = probe(name, argv)
        assert "unknown option" not in done.stderr, (argv, done.stderr)
        assert "usage" in done.stdout or done.returncode == 2, (argv, done)


@pytest.mark.parametrize("name", TOOLS)
def test_only_described_options_are_accepted(name):
    described = {r["name"] for r in describe(name)}
    done = probe(name, [])
    assert done.returncode == 0, done
    # every --word of the usage text is an option of the table (or --help)
    named = set(re.findall(r"--([a-z][a-z0-9-]*)", done.stdout)) - {"help", "describe-options"}
    assert named == described, named ^ described
    refused = run([tool(name), *TOOLS[name], "--no-such-option"])
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "unknown option" in refused.stderr


@pytest.mark.parametrize("name", [t for t in TOOLS if t != "vz-nfinfo"])  # it has no number
def test_out_of_range_is_refused_in_one_line(name):
    bounded = [r for r in describe(name) if r["type"] == "u64" and r["max"] < 2**64 - 1]
    assert bounded
    for r in bounded:
        for bad in (r["max"] + 1, *((r["min"] - 1,) if r["min"] > 0 else ())):
            done = run([tool(name), *TOOLS[name], f"--{r['name']}", str(bad)])
            assert done.returncode == 2, (r, done)
            assert done.stderr.count("\n") == 1 and done.stderr.startswith("veloz: "), done
            assert f"--{r['name']}" in done.stderr and f"{r['max']}" in done.stderr, done


def test_hidden_backend_options_are_refused_by_name():
    # --pmd is dpdk's: vz-afxdp does not offer it, and says so when given it
    assert "pmd" not in {r["name"] for r in describe("vz-afxdp")}
    assert "pmd" in {r["name"] for r in describe("vz-dpdk")}
    done = run([tool("vz-afxdp"), "run", "--bpf", "x", "--native", "y", "--iface", "lo",
                "--pmd", "af_packet"])  # fmt: skip
    assert done.returncode == 2, done
    assert done.stderr == "veloz: --pmd is not an option of the afxdp backend\n"


def test_python_reads_the_c_limits():
    for name in ("vz-gen", "vz-udpd", "vz-afxdp", "vz-replay", "vz-sim"):
        rows = {r["name"]: r for r in describe(name)}
        for option, row in options.table(name).items():
            assert row == rows[option]
    assert options.limits("vz-gen", "--size") == (60, 3520)
    with pytest.raises(VelozError, match="--mtu must be between 576 and 9000"):
        options.check("vz-udpd", "--mtu", 9001)


def veloz(*argv: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "veloz.cli", *argv])


@pytest.mark.parametrize(
    ("argv", "tool_name", "option"),
    [(["gen", "--iface", "lo", "--size"], "vz-gen", "size"),
     (["gen", "--iface", "lo", "--flows"], "vz-gen", "flows"),
     (["run", "drop", "--backend", "afxdp", "--iface", "lo", "--workers"], "vz-afxdp", "workers"),
     (["run", "drop", "--backend", "dpdk", "--iface", "lo", "--batch"], "vz-afxdp", "batch"),
     (["sim", "--cores"], "vz-sim", "cores"),
     (["sim", "--flows"], "vz-sim", "flows")],
)  # fmt: skip
def test_veloz_refuses_past_the_c_limit(argv, tool_name, option):
    row = {r["name"]: r for r in describe(tool_name)}[option]
    done = veloz(*argv, str(row["max"] + 1))
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("veloz:"), done.stderr
    assert str(row["max"]) in done.stderr, done.stderr


def test_veloz_udpd_config_refuses_past_the_c_limit(tmp_path):
    row = {r["name"]: r for r in describe("vz-udpd")}["max-sockets"]
    cfg = tmp_path / "udpd.toml"
    cfg.write_text(f'interface = "lo"\nipv4 = "198.18.0.3/24"\nmax_sockets = {row["max"] + 1}\n')
    done = veloz("udpd", "--config", str(cfg), "--check")
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"max_sockets must be a whole number in {row['min']}..{row['max']}" in done.stderr


@pytest.mark.parametrize("bad", ["", "abc", "-1", "1e3", "64x", "9" * 40, "0x40"])
def test_a_whole_number_is_only_digits(bad):
    done = run([tool("vz-gen"), "--size", bad])
    assert done.returncode == 2, done
    assert done.stderr == f"veloz: --size must be a whole number from 60 to 3520, not '{bad}'\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--backend", "foo"], "--backend: unknown value 'foo' (xdp, native)"),
     (["--json=1"], "unknown option '--json=1'"),
     (["--repeat"], "--repeat needs a value"),
     (["--set", "a=1"] * 65, "--set: at most 64 values")],
)  # fmt: skip
def test_bad_input_is_one_line(argv, message):
    done = run([tool("vz-replay"), *argv])
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
