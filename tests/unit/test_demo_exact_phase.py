# SPDX-License-Identifier: BSD-2-Clause
"""The demo's exact phase: a run whose every lost frame the port missed while
its worker waited for a CPU longer than its ring lasts is made again (up to
demo.ATTEMPTS runs); any other loss, or a loss in the last run, stands."""

from __future__ import annotations

import pytest

from veloz.lab import demo, trial

RATE = 500_000  # dpdk's 2048 descriptors last 4.1 ms at this rate


def record(backend: str, lost: int, missed: int | None, wait_ms: float | None) -> dict:
    wait = None if wait_ms is None else {"max_ms": wait_ms, "total_ms": wait_ms, "workers": 1}
    return {"backend": backend, "sent": 20_000, "counted": 20_000 - lost,
            "errors": {"rx_missed": missed}, "worker_wait": wait}  # fmt: skip


@pytest.mark.parametrize(
    ("r", "starved"),
    [
        (record("dpdk", 352, 352, 473.6), True),
        (record("dpdk", 352, 352, 1.0), False),  # the ring outlasts that wait
        (record("dpdk", 352, 300, 473.6), False),  # 52 lost elsewhere
        (record("dpdk", 352, 352, None), False),
        (record("dpdk", 0, 0, 473.6), False),  # nothing lost
        (record("xdp", 352, None, 473.6), False),  # no ring of ours to overrun
    ],
)
def test_starved(r: dict, starved: bool):
    assert demo.starved(r, RATE) is starved


def run_phase(monkeypatch, results: dict[str, list[dict]]) -> list[dict]:
    def measure(nf, backend, **kw):
        queue = results.get(backend)
        return queue.pop(0) if queue else record(backend, 0, 0, 0.0)

    monkeypatch.setattr(trial, "measure", measure)
    return demo.exact_phase(20_000, RATE)


def test_a_starved_run_is_made_again_and_shown(monkeypatch):
    rows = run_phase(monkeypatch, {"dpdk": [record("dpdk", 352, 352, 473.6)]})
    dpdk = next(r for r in rows if r["backend"] == "dpdk")
    assert dpdk["counted"] == dpdk["sent"]
    assert len(dpdk["starved_runs"]) == 1 and "473.6 ms" in dpdk["starved_runs"][0]
    assert all(r["starved_runs"] == [] for r in rows if r["backend"] != "dpdk")


def test_losses_stand_after_the_last_attempt_or_when_not_starved(monkeypatch):
    starving = [record("dpdk", 352, 352, 473.6) for _ in range(demo.ATTEMPTS)]
    rows = run_phase(monkeypatch, {"dpdk": starving, "afxdp": [record("afxdp", 10, 10, 0.2)]})
    dpdk = next(r for r in rows if r["backend"] == "dpdk")
    assert dpdk["counted"] < dpdk["sent"] and len(dpdk["starved_runs"]) == demo.ATTEMPTS - 1
    afxdp = next(r for r in rows if r["backend"] == "afxdp")
    assert afxdp["counted"] < afxdp["sent"] and afxdp["starved_runs"] == []
