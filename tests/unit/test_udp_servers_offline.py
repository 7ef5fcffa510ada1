"""`veloz bench udp-servers` without the testbed: every server on every arm
in each trial, udpd beside poller mode only, and the report's answers and
ratios to kernel sockets."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from veloz.lab.experiments import EXPERIMENTS, Context, udp_servers

pytest.importorskip("scipy")

P50 = {"kernel": 50.0, "veloz": 60.0, "veloz-direct": 40.0}


def test_arms_interleaved_udpd_for_poller_only_and_ratios(monkeypatch):
    calls: list[tuple[str, str, bool]] = []
    udpd = {"up": False}

    @contextlib.contextmanager
    def running_udpd(gen: bool = True) -> Iterator[None]:
        assert not gen
        udpd["up"] = True
        try:
            yield
        finally:
            udpd["up"] = False

    def measure(arm: str, server: str) -> dict:
        calls.append((server, arm, udpd["up"]))
        lost = 1 if arm == "veloz" else 0
        return {
            "stack": arm,
            "server": server,
            "sent": 100,
            "answered": 100 - lost,
            "wrong": 0,
            "stale": 0,
            "rtt_p50_us": P50[arm],
            "rtt_p99_us": 2 * P50[arm],
        }

    monkeypatch.setattr(udp_servers.udp, "running_udpd", running_udpd)
    monkeypatch.setattr(udp_servers, "measure", measure)
    ctx = Context(settings={"trials": 2})
    EXPERIMENTS["udp-servers"].run(ctx)
    one_trial = [(s, a, a == "veloz") for s in udp_servers.SERVERS for a in udp_servers.ARMS]
    assert calls == one_trial * 2
    assert len(ctx.records) == udp_servers.UDP_SERVERS.count(ctx.settings)
    sections = udp_servers.UDP_SERVERS.sections(ctx.records, ctx.settings)
    rows = {(r[0], r[1]): r[2:] for r in sections[0]["table"]["rows"]}
    assert rows[("threads", "veloz")] == [2, 200, 198, 0]
    assert rows[("asyncio", "kernel")] == [2, 200, 200, 0]
    p50 = next(s for s in sections if "p50" in s["title"])
    direct = [r for r in p50["table"]["rows"] if r[1] == "veloz-direct"]
    assert direct and all(r[-2] == pytest.approx(0.8) for r in direct)
