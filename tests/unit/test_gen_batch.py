"""`veloz gen --batch`, `--threads` and `--static`: live frames per kernel
batch, transmit threads, frames built once; handed to vz-gen and checked on
both sides (no root, nothing sent)."""

from __future__ import annotations

import subprocess

import pytest

from veloz import cli
from veloz.core import paths
from veloz.core.errors import VelozError
from veloz.lab import gen


def command(*argv: str) -> list[str]:
    args = cli.build_parser().parse_args(["gen", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01",
                                          "--src-ip", "127.0.0.1", "--dst-ip", "127.0.0.2",
                                          *argv])  # fmt: skip
    return gen.command(args)


def test_batch_threads_and_static_reach_vz_gen_only_when_given():
    plain = command("--rate", "0")
    assert not {"--batch", "--threads", "--static"} & set(plain)
    assert "--batch-stamp" not in plain
    cmd = command("--rate", "0", "--batch", "256", "--threads", "2", "--static", "--batch-stamp")
    assert cmd[cmd.index("--batch") + 1] == "256" and cmd[cmd.index("--threads") + 1] == "2"
    assert "--static" in cmd and "--batch-stamp" in cmd


def test_the_sink_takes_no_threads():
    args = cli.build_parser().parse_args(["gen", "--sink", "--iface", "lo", "--threads", "2"])
    with pytest.raises(VelozError, match="--threads: a sending option"):
        gen.sink_command(args)


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--batch", "0"], "--batch must be between 1 and 256"),
     (["--batch", "257"], "--batch must be between 1 and 256"),
     (["--batch", "128", "--afxdp"], "--batch is for live frames, not --afxdp"),
     (["--threads", "0"], "--threads must be between 1 and 64"),
     (["--threads", "65"], "--threads must be between 1 and 64"),
     (["--threads", "2", "--afxdp"], "--threads is for live frames, not --afxdp"),
     (["--batch-stamp", "--afxdp"], "--batch-stamp is for live frames, not --afxdp")],
)  # fmt: skip
def test_bad_batches_are_refused(argv, message):
    with pytest.raises(VelozError, match=message):
        command(*argv)


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--batch", "300"], "--batch must be a whole number from 1 to 256, not '300'"),
     (["--batch", "64x"], "--batch"),
     (["--batch", "8", "--afxdp"], "--batch is for live frames, not --afxdp"),
     (["--threads", "65"], "--threads must be a whole number from 1 to 64, not '65'"),
     (["--threads", "2", "--afxdp"], "--threads is for live frames, not --afxdp"),
     (["--threads", "4", "--count", "3"], "--rate and --count must be at least --threads (4)"),
     (["--threads", "4", "--rate", "3"], "--rate and --count must be at least --threads (4)"),
     (["--static", "--flows", "2"], "--static sends one frame over and over"),
     (["--static", "--afxdp"], "--static sends one frame over and over"),
     (["--batch-stamp", "--afxdp"], "--batch-stamp is for live frames, not --afxdp")],
)  # fmt: skip
def test_vz_gen_refuses_bad_batches_itself(argv, message):
    argv = [str(paths.tool("vz-gen")), "--iface", "lo", "--dst-mac", "02:00:00:00:00:01",
            "--src-ip", "198.18.0.1", "--dst-ip", "198.18.0.2", *argv]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2, done
    assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr
