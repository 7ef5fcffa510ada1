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
from test_run import GEN_SIDE, probe_through
from wire import replay_prediction

from veloz.proc import veloz_argv

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
    assert len(json.loads(done.stdout)["objects"]) == 3
    return d / "shortdrop.bpf.o"


@pytest.mark.parametrize("backend", ["xdp", "afxdp"])
def test_user_nf_by_path_runs_as_replay_predicts(testbed, user_nf, backend, tmp_path):
    frames, got, summary, _ = probe_through(str(user_nf), backend, tmp_path, GEN_SIDE)
    expected = replay_prediction(str(user_nf), tmp_path / "in.pcap", tmp_path / "expect.pcap")
    assert len(expected) == 8 and len(frames) == 20
    assert [bytes(p) for p in got] == expected
    assert summary["nf"] == "shortdrop"
    assert summary["tx"] >= 8 and summary["drop"] >= 12
