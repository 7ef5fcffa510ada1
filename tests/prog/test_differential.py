# SPDX-License-Identifier: BSD-2-Clause
"""Every NF x every vector x its configs: the XDP build (BPF_PROG_TEST_RUN) and
the native build give the same verdicts, lengths, ports and output bytes."""

from __future__ import annotations

import pytest

from .conftest import VECTOR_FILES, Replayer, needs_root, nf_config_params, read_vector

# Keys that are allowed to differ between backends.
BACKEND_KEYS = {"ns", "backend", "ns_per_packet"}


def strip(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in BACKEND_KEYS}


def first_differences(xdp: list[dict], native: list[dict], limit: int = 5) -> str:
    lines = []
    for i, (a, b) in enumerate(zip(xdp, native, strict=False)):
        if strip(a) != strip(b):
            lines.append(f"  packet {i}: xdp {strip(a)} != native {strip(b)}")
            if len(lines) == limit:
                break
    if len(xdp) != len(native):
        lines.append(f"  {len(xdp)} records on xdp, {len(native)} on native")
    return "\n".join(lines)


@needs_root
@pytest.mark.parametrize("vector", VECTOR_FILES)
@pytest.mark.parametrize(("nf", "config"), nf_config_params())
def test_xdp_matches_native(replay: Replayer, nf: str, config: dict, vector: str):
    xdp = replay(nf, "xdp", vector, config)
    native = replay(nf, "native", vector, config)
    xdp.check_ok()
    native.check_ok()

    frames = read_vector(vector).frames
    assert len(xdp.records) == len(native.records) == len(frames)
    assert [strip(r) for r in xdp.records] == [strip(r) for r in native.records], (
        f"{nf} {config} on {vector}: xdp and native disagree\n"
        + first_differences(xdp.records, native.records)
    )
    assert xdp.summary is not None and native.summary is not None
    assert xdp.summary["backend"] == "xdp" and native.summary["backend"] == "native"
    assert strip(xdp.summary) == strip(native.summary)

    assert xdp.out is not None and native.out is not None, "--out was given: both must write it"
    assert xdp.out.header == native.out.header, "output pcap headers differ"
    assert len(xdp.out.records) == len(native.out.records)
    for i, (a, b) in enumerate(zip(xdp.out.records, native.out.records, strict=True)):
        assert a == b, f"output frame {i} differs between xdp and native"
    assert xdp.out_raw == native.out_raw
