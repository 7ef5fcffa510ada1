"""vz_adjust_head() allows and refuses exactly what bpf_xdp_adjust_head() does.

tests/nf/headroom.c moves the head by `delta` and sends the frame back (or
drops it when the move is refused). Swept across the kernel's limits: 256
bytes of headroom of which the kernel keeps sizeof(struct xdp_frame), and at
least an Ethernet header left; on plain, jumbo (fragmented) and short frames.
"""

from __future__ import annotations

import pytest

from .conftest import needs_root

pytestmark = needs_root

DELTAS = [-300, -217, -216, -215, -100, -1, 0, 1, 47, 48, 49, 100, 3600]
VECTORS = ["l3l4.pcap", "jumbo.pcap", "truncated.pcap", "runts.pcap"]


@pytest.mark.parametrize("vector", VECTORS)
@pytest.mark.parametrize("delta", DELTAS, ids=lambda d: f"delta{d}")
def test_head_adjustment_matches_the_kernel(replay, delta, vector):
    kernel = replay("headroom", "xdp", vector, {"delta": delta})
    native = replay("headroom", "native", vector, {"delta": delta})
    kernel.check_ok()
    native.check_ok()
    assert native.records == kernel.records
    assert native.out_raw == kernel.out_raw


def test_the_kernel_reserves_40_bytes_of_headroom(replay):
    # VZ_FRAME_RESERVE in abi.h: 256 - 216 = 40 = sizeof(struct xdp_frame).
    grown = replay("headroom", "xdp", "l3l4.pcap", {"delta": -216}).records[0]
    refused = replay("headroom", "xdp", "l3l4.pcap", {"delta": -217}).records[0]
    assert grown["verdict"] == "tx" and grown["len_out"] == grown["len_in"] + 216
    assert refused["verdict"] == "drop" and refused["len_out"] == refused["len_in"]
