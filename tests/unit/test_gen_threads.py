"""`veloz gen --threads N` and the ceiling's variants, checked without root
and without sending anything."""

from __future__ import annotations

import subprocess

import pytest

from veloz import cli, gen, paths
from veloz.errors import VelozError
from veloz.lab import gen_ceiling, trial


def command(*argv: str) -> list[str]:
    args = cli.build_parser().parse_args(["gen", "--iface", "lo", "--dst-mac", "02:00:00:00:00:01",
                                          "--src-ip", "127.0.0.1", "--dst-ip", "127.0.0.2",
                                          *argv])  # fmt: skip
    return gen.command(args)


def test_threads_and_static_reach_vz_gen_only_when_given():
    assert "--threads" not in command("--rate", "0")
    assert "--static" not in command("--rate", "0")
    cmd = command("--rate", "0", "--threads", "2", "--static")
    assert cmd[cmd.index("--threads") + 1] == "2" and "--static" in cmd


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--threads", "0"], "--threads must be between 1 and 64"),
     (["--threads", "65"], "--threads must be between 1 and 64"),
     (["--threads", "2", "--afxdp"], "--threads is for live frames, not --afxdp")],
)  # fmt: skip
def test_bad_thread_counts_are_refused(argv, message):
    with pytest.raises(VelozError, match=message):
        command(*argv)


def test_the_sink_takes_no_threads():
    args = cli.build_parser().parse_args(["gen", "--sink", "--iface", "lo", "--threads", "2"])
    with pytest.raises(VelozError, match="--threads: a sending option"):
        gen.sink_command(args)


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--threads", "65"], "--threads must be a whole number from 1 to 64, not '65'"),
     (["--threads", "2", "--afxdp"], "--threads is for live frames, not --afxdp"),
     (["--threads", "4", "--count", "3"], "--rate and --count must be at least --threads (4)"),
     (["--threads", "4", "--rate", "3"], "--rate and --count must be at least --threads (4)"),
     (["--static", "--flows", "2"], "--static sends one frame over and over"),
     (["--static", "--afxdp"], "--static sends one frame over and over")],
)  # fmt: skip
def test_vz_gen_refuses_bad_thread_counts_itself(argv, message):
    argv = [str(paths.tool("vz-gen")), "--iface", "lo", "--dst-mac", "02:00:00:00:00:01",
            "--src-ip", "198.18.0.1", "--dst-ip", "198.18.0.2", *argv]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2, done
    assert message in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_ceiling_variants_parse_to_vz_gen_options():
    v = gen_ceiling.parse_variant("threads=2,rxq=2")
    assert v == {"threads": 2, "rxq": 2} and gen_ceiling.name(v) == "threads=2,rxq=2"
    assert gen_ceiling.gen_extra(v) == ["--threads", "2"]  # rxq is the DUT's, not vz-gen's
    assert gen_ceiling.parse_variant("base") == {} and gen_ceiling.name({}) == "base"
    assert gen_ceiling.gen_extra(gen_ceiling.parse_variant("afxdp")) == ["--afxdp"]
    assert gen_ceiling.gen_extra({"batch": 256}) == ["--batch", "256"]
    v = gen_ceiling.parse_variant("threads=2,rxq=2,static")
    assert gen_ceiling.gen_extra(v) == ["--static", "--threads", "2"]


@pytest.mark.parametrize(
    ("text", "message"),
    [("threads=x", "is not batch="), ("cores=2", "is not batch="),
     ("threads=65", "threads must be between 1 and 64"), ("rxq=0", "rxq must be between"),
     ("afxdp,threads=2", "not afxdp"), ("afxdp,static", "not afxdp")],
)  # fmt: skip
def test_bad_ceiling_variants_are_refused(text, message):
    with pytest.raises(VelozError, match=message):
        gen_ceiling.parse_variant(text)


def test_ceiling_ratios_are_per_backend_against_its_first_variant():
    recs = [{"backend": b, "variant": v, "rate_pps": r}
            for b, v, r in (("generator", "base", 10.0), ("generator", "threads=2", 20.0),
                            ("xdp", "base", 5.0), ("xdp", "threads=2", 5.0))] * 3  # fmt: skip
    rows = {(r["backend"], r["variant"]): r for r in gen_ceiling.summarize(recs)}
    assert rows["generator", "threads=2"]["vs_base"]["ratio"] == pytest.approx(2.0)
    assert rows["xdp", "threads=2"]["vs_base"]["ratio"] == pytest.approx(1.0)
    assert rows["xdp", "base"]["trials"] == 3


def test_the_lab_sends_static_frames_where_nothing_reads_them():
    assert "--static" in trial.gen_argv("drop", 64, 0, 1.0, None, 1)
    # a sink reads tx's frames (order, latency); flows vary the port; a
    # caller's own options are its choice
    assert "--static" not in trial.gen_argv("tx", 64, 0, 1.0, None, 1)
    assert "--static" not in trial.gen_argv("drop", 64, 0, 1.0, None, 4)
    assert "--static" not in trial.gen_argv("drop", 64, 0, 1.0, None, 1, extra=[])
