"""The `veloz` command's plumbing, without root: config, rates, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from veloz import cli
from veloz.control import run
from veloz.core import config, paths
from veloz.core.errors import VelozError
from veloz.core.proc import veloz_argv
from veloz.lab import gen


def test_config_file_and_sets_become_assignments(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text("accesses = 400\nflag = true\n")
    values = config.load(str(f)) | config.parse_sets(["accesses=12"])
    assert config.to_assignments(values) == ["accesses=12", "flag=1"]


@pytest.mark.parametrize(
    ("content", "message"),
    [("accesses = ", "config file"), ("accesses = 1.5", "expected an integer"),
     ("accesses = 'many'", "not an integer"),
     # found by fuzz-py-config: keys that are no field's name
     ("'' = 7", "not a field name"), ('"a=b" = 1', "not a field name"),
     ('"a b" = 1', "not a field name"), ('"\\u00e9" = 1', "not a field name")],
)  # fmt: skip
def test_bad_config_files_are_refused(tmp_path, content, message):
    f = tmp_path / "bad.toml"
    f.write_text(content + "\n")
    with pytest.raises(VelozError, match=message):
        config.to_assignments(config.load(str(f)))


def test_missing_config_file():
    with pytest.raises(VelozError, match="does not exist"):
        config.load("/nonexistent/veloz.toml")


def test_config_files_that_are_not_toml_text(tmp_path):
    # found by tests/fuzz/fuzz_py_config.py: UnicodeDecodeError, RecursionError
    f = tmp_path / "bad.toml"
    f.write_bytes(b"accesses = 1 # \xff\n")
    with pytest.raises(VelozError, match="not UTF-8"):
        config.load(str(f))
    f.write_text("accesses = " + "[" * 5000 + "\n")
    with pytest.raises(VelozError, match="nested too deeply"):
        config.load(str(f))


def test_port_fields_may_name_interfaces():
    assert config.to_assignments({"port": "dut-sink"}, ["dut-gen", "dut-sink"]) == ["port=1"]
    with pytest.raises(VelozError, match="one of the ports"):
        config.to_assignments({"port": "eth9"}, ["dut-gen"])


def run_command(*argv: str) -> list[str]:
    """The C tool's command line that `veloz run ARGV...` would exec."""
    return run.command(cli.parse_args(["run", *argv]))


def test_run_adds_a_named_port_and_keeps_order():
    cmd = run_command("redirect", "--backend", "xdp", "--iface", "dut-gen", "--iface", "dut-gen",
                      "--set", "port=dut-sink", "--json")  # fmt: skip
    ifaces = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--iface"]
    assert ifaces == ["dut-gen", "dut-sink"]
    assert cmd[cmd.index("--set") + 1] == "port=1"
    assert cmd[cmd.index("--mode") + 1] == "native"


def test_userspace_backends_get_their_options_and_eal_arguments():
    cmd = run_command("drop", "--backend", "afxdp", "--iface", "x", "--workers", "2",
                      "--batch", "32", "--copy", "--busy-poll", "--xdp-mode", "skb")  # fmt: skip
    assert cmd[0].endswith("vz-afxdp") and cmd[1] == "run"
    assert cmd[cmd.index("--workers") + 1] == "2" and cmd[cmd.index("--batch") + 1] == "32"
    assert "--copy" in cmd and "--busy-poll" in cmd and cmd[cmd.index("--mode") + 1] == "skb"
    cmd = run_command("tx", "--backend", "dpdk", "--iface", "x", "--pmd", "eal", "--no-huge",
                      "--", "-a", "0000:3b:00.0")  # fmt: skip
    assert cmd[0].endswith("vz-dpdk")
    assert cmd[cmd.index("--pmd") + 1] == "eal" and "--no-huge" in cmd
    assert cmd[-3:] == ["--", "-a", "0000:3b:00.0"]


@pytest.mark.parametrize(("backend", "tool"), [("afxdp", "vz-afxdp"), ("dpdk", "vz-dpdk")])
def test_userspace_backends_dispatch(backend, tool):
    cmd = run_command("tx", "--backend", backend, "--iface", "x", "--workers", "4",
                      "--dispatch", "flow-affinity", "--alloc")  # fmt: skip
    assert cmd[0].endswith(tool)
    assert cmd[cmd.index("--dispatch") + 1] == "flow-affinity" and "--alloc" in cmd
    assert cmd[cmd.index("--workers") + 1] == "4"
    assert "--queues" not in cmd  # dispatching, one thread takes every queue


@pytest.mark.parametrize("backend", ["xdp", "xdp-generic"])
def test_xdp_dispatch_with_the_allocator(backend):
    cmd = run_command("tx", "--backend", backend, "--iface", "x", "--workers", "2",
                      "--dispatch", "rss-mod", "--alloc")  # fmt: skip
    assert cmd[0].endswith("vz-xdp")
    assert cmd[cmd.index("--dispatch") + 1] == "rss-mod" and "--alloc" in cmd
    assert "--alloc" not in run_command(
        "tx", "--backend", backend, "--iface", "x", "--workers", "2", "--dispatch", "rss-mod"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backend", "xdp", "--workers", "2"], "--workers on xdp goes with --dispatch"),
        (["--backend", "dpdk", "--alloc"], "--alloc goes with --dispatch"),
        (
            ["--backend", "linux", "--dispatch", "buckets"],
            "--dispatch is not an option of the linux",
        ),
        (["--backend", "afxdp", "--alloc"], "--alloc goes with --dispatch"),
        (["--backend", "afxdp", "--copy", "--zero-copy"], "--copy and --zero-copy exclude"),
        (["--backend", "xdp", "--alloc"], "--alloc goes with --dispatch"),
        (["--backend", "linux", "--alloc", "--dispatch", "rss-mod"], "is not an option"),
        (["--backend", "afxdp", "--pmd", "af_packet"], "--pmd is not an option of the afxdp"),
        (["--backend", "dpdk", "--zero-copy"], "--zero-copy is not an option of the dpdk"),
        (["--backend", "xdp", "--", "-l", "0"], "EAL arguments is not an option of the xdp"),
        (["--backend", "linux", "--ctl-group", "0"], "--ctl-group is not an option of the linux"),
    ],
)
def test_options_of_another_backend_are_refused(argv, message):
    with pytest.raises(VelozError, match=message):
        run_command("drop", "--iface", "x", *argv)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backend", "afxdp", "--workers", "0"], "--workers: '0' is not between 1 and 64"),
        (["--backend", "dpdk", "--batch", "257"], "--batch: '257' is not between 1 and 256"),
    ],
)
def test_numbers_out_of_range_are_refused_by_the_parser(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        run_command("drop", "--iface", "x", *argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["xdp", "xdp-generic", "afxdp", "dpdk"])
def test_ctl_group_goes_to_every_data_plane(backend):
    cmd = run_command("drop", "--backend", backend, "--iface", "x", "--ctl-group", "veloz")
    assert cmd[cmd.index("--ctl-group") + 1] == "veloz"
    assert "--ctl-group" not in run_command("drop", "--backend", backend, "--iface", "x")


@pytest.mark.parametrize("tool", ["vz-xdp", "vz-afxdp", "vz-dpdk"])
@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("no-such-group-here", "--ctl-group: no group no-such-group-here"),
        ("4294967295", "--ctl-group must be a whole number from 0 to 4294967294, not '4294967295'"),
    ],
)
def test_a_bad_ctl_group_is_one_line_before_anything_starts(tool, group, message):
    # parsed with the options, before the root check and any attach
    argv = [str(paths.tool(tool)), "run", "--ctl-group", group, "--bpf", "x", "--native", "y",
            "--iface", "z"]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert out.returncode == 2, out
    assert out.stderr.strip().splitlines() == [f"veloz: {message}"]


@pytest.mark.parametrize(
    ("text", "size", "pps"),
    [("100k", 64, 100_000), ("2M", 64, 2_000_000), ("2Mpps", 64, 2_000_000),
     ("1.5k", 64, 1500), ("512kbps", 64, 1000), ("1Gbps", 1000, 125_000)],
)  # fmt: skip
def test_rates(text, size, pps):
    assert gen.parse_rate(text, size) == pps


@pytest.mark.parametrize("text", ["fast", "1Tpps", "-5", "0.1", ""])
def test_bad_rates(text):
    with pytest.raises(VelozError):
        gen.parse_rate(text, 64)


def test_unknown_nf_lists_the_known_ones():
    with pytest.raises(VelozError, match=r"unknown NF 'nope' \(available: .*drop.*\)"):
        paths.nf("nope")
    # a path is a user's NF file (`veloz run ./nf.bpf.o`), never a name looked up
    # in the NF directories: one that is not NAME.bpf.o or NAME.so is refused
    with pytest.raises(VelozError, match="an NF is a NAME.bpf.o with its NAME.so beside it"):
        paths.nf("../nf/drop")


@pytest.mark.parametrize(
    "argv",
    [["replay"], ["replay", "drop", "--backend", "bogus", "--in", "x"], ["frobnicate"],
     ["run", "drop", "--backend", "xdp"], ["gen", "--iface", "lo", "--size", "many"]],
)  # fmt: skip
def test_usage_errors_are_one_line(argv):
    done = subprocess.run(veloz_argv(*argv), capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("veloz: ") and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == ""


def test_an_error_quoting_a_newline_is_still_one_line(monkeypatch, capsys):
    # a message that quotes input holding a newline (a route file's name
    # from a TOML string, say) still prints as one line
    from veloz.cli import udpd  # the parser's binding of the command's work

    def fail(args):
        raise VelozError("route file a\nb.txt: No such file or directory", code=2)

    monkeypatch.setattr(udpd, "run", fail)
    assert cli.main(["udpd", "--config", "x.toml"]) == 2
    err = capsys.readouterr().err
    assert err == "veloz: route file a b.txt: No such file or directory\n", err


def test_lb_vip_backends_must_be_a_list():
    vip = {"address": "198.18.0.10", "port": 80, "proto": "tcp"}
    with pytest.raises(VelozError, match="backends must be a list"):
        run.lb_vips({"vip": [{**vip, "backends": 5}]})
    assert len(run.lb_vips({"vip": [{**vip, "backends": ["198.18.1.10"]}]})[0][1]) == 1


def test_every_subcommand_has_help():
    for sub in ("testbed", "run", "replay", "gen", "demo", "nfs"):
        done = subprocess.run(veloz_argv(sub, "--help"), capture_output=True, text=True,
                              check=False)  # fmt: skip
        assert done.returncode == 0 and "usage: veloz " + sub in done.stdout


def test_nfs_describes_config_from_btf():
    done = subprocess.run(veloz_argv("nfs", "--json"), capture_output=True, text=True, check=True)
    infos = {nf["name"]: nf for nf in json.loads(done.stdout)}
    assert {"drop", "pass", "tx", "redirect", "memaccess"} <= infos.keys()
    assert infos["redirect"]["config"] == [
        {"name": "port", "offset": 0, "size": 4, "signed": False, "default": 1}
    ]
    assert [f["name"] for f in infos["memaccess"]["config"]] == ["accesses", "reflect"]
    assert infos["memaccess"]["maps"][0]["type"] == "percpu_array"
    assert all(nf["program"] == "vz_xdp_" + name for name, nf in infos.items())


def test_runner_reports_a_run_that_fails_to_start():
    from veloz.core.proc import Runner

    failing = [sys.executable, "-c", "import sys; sys.stderr.write('veloz: boom\\n'); sys.exit(2)"]
    with pytest.raises(VelozError, match="^boom$"):
        Runner(failing)


def test_runner_stops_a_run_that_hangs():
    from veloz.core.proc import Runner

    with pytest.raises(VelozError, match="did not start in time"):
        Runner([sys.executable, "-c", "import time; time.sleep(60)"], attach_timeout=0.5)
