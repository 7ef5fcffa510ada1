# SPDX-License-Identifier: BSD-2-Clause
"""A user's own NF, built by `veloz build` and run by path on the testbed.

`veloz run ./NAME.bpf.o` as `xdp-loader load IF prog.o`: the BPF build on
xdp, its NAME.so twin on afxdp, and what comes back matches what `veloz
replay` of the same file predicts. (tests/cli/test_install.py does the same
offline from an installed prefix.)
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from scapy.all import rdpcap, wrpcap
from test_dump import dump_argv, start_dump, verdicts
from test_run import GEN_SIDE, PROBE_PORT, probe_frames, probe_through
from wire import replay_prediction, run_nf, send_from_gen

from veloz.core.proc import veloz_argv

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

# Not one of ours: short frames dropped, the rest sent back addresses swapped.
# The probe frames are 58 + i bytes long (i = 0..19): 12 drops, 8 sent back.
USER_NF = """\
/* SPDX-License-Identifier: BSD-2-Clause */
#include <veloz/nf.h>

VZ_NF(shortdrop)
{
	struct ethhdr *eth = vz_header(ctx, 0, sizeof(*eth));

	if (!eth || vz_len(ctx) < 70)
		return VZ_DROP;
	vz_eth_swap(eth);
	return VZ_TX;
}
"""


@pytest.fixture(scope="module")
def user_nf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("user-nf")
    (d / "shortdrop.c").write_text(USER_NF)
    done = subprocess.run(veloz_argv("build", str(d / "shortdrop.c"), "-o", str(d), "--json"),
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert len(json.loads(done.stdout)["objects"]) == 4
    return d / "shortdrop.bpf.o"


@pytest.mark.parametrize("backend", ["xdp", "afxdp"])
def test_user_nf_by_path_runs_as_replay_predicts(testbed, user_nf, backend, tmp_path):
    frames, got, summary, _ = probe_through(str(user_nf), backend, tmp_path, GEN_SIDE)
    expected = replay_prediction(str(user_nf), tmp_path / "in.pcap", tmp_path / "expect.pcap")
    assert len(expected) == 8 and len(frames) == 20
    assert [bytes(p) for p in got] == expected
    assert summary["nf"] == "shortdrop"
    assert summary["tx"] >= 8 and summary["drop"] >= 12


def test_user_nf_dump_with_its_own_dump_build(testbed, user_nf, tmp_path):
    """`veloz dump --object` swaps in the user's NAME.dump.bpf.o (made by
    `veloz build`); without it, one line naming the file to pass."""
    frames = probe_frames()
    wrpcap(str(tmp_path / "in.pcap"), frames, linktype=1)
    obj = user_nf.with_name("shortdrop.dump.bpf.o")
    out = tmp_path / "dump.pcapng"
    with run_nf(str(user_nf), "xdp") as runner:
        refused = subprocess.run(dump_argv("-c", "1"), capture_output=True, text=True)
        assert refused.returncode == 2
        assert refused.stderr.count("veloz:") == 1 and "--object" in refused.stderr
        dump = start_dump("--object", str(obj), "-w", str(out), "-c", str(len(frames)),
                          "udp", "dst", "port", str(PROBE_PORT))  # fmt: skip
        send_from_gen(tmp_path / "in.pcap")
        _, stderr = dump.communicate(timeout=60)
        assert dump.returncode == 0, stderr
        runner.stop()
    # the NF's rule: frames shorter than 70 bytes dropped, the rest sent back
    expect = ["drop" if len(f) < 70 else "tx" for f in frames]
    # each frame is distinct by length; per-CPU perf buffers keep order
    # only within one CPU, and veth's NAPI may run the first frame elsewhere
    got = sorted((len(p), v) for p, v in zip(rdpcap(str(out)), verdicts(out), strict=True))
    assert (
        got == [(len(f), v) for f, v in zip(frames, expect, strict=True)]
        and expect.count("tx") == 8
    )
