# SPDX-License-Identifier: BSD-2-Clause
"""`veloz dump`'s command line reaches vz-dump: its options are made from
vz-dump's table (veloz.cli.tool_options), short flags included."""

from __future__ import annotations

from veloz.cli import parse_args
from veloz.control import dump


def test_short_and_long_flags_reach_vz_dump(tmp_path):
    out = tmp_path / "x.pcapng"
    args = parse_args(["dump", "--iface", "dut-gen", "-w", str(out), "-c", "3", "-s", "128",
                       "--ring-size", "65536", "--json", "udp", "port", "9"])  # fmt: skip
    cmd = dump.command(args, ["--ctl", "/run/veloz/ctl/x"])
    assert cmd[0].endswith("vz-dump")
    assert cmd[1:] == ["--iface", "dut-gen", "--ctl", "/run/veloz/ctl/x", "-w", str(out),
                       "-c", "3", "-s", "128", "--ring-size", "65536", "--json",
                       "--", "udp", "port", "9"]  # fmt: skip


def test_vz_dump_defaults_apply_when_nothing_is_given():
    args = parse_args(["dump", "--iface", "dut-gen"])
    cmd = dump.command(args, ["--restore"])
    assert cmd[1:] == ["--iface", "dut-gen", "--restore"]
    args.restore = False
    assert dump.command(args, ["--ctl", "c"])[1:] == ["--iface", "dut-gen", "--ctl", "c"]
