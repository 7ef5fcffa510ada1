"""`veloz bench udp-latency|udp-throughput`'s report from records, without
the testbed: one row per payload and stack, ratios against kernel sockets."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from veloz.lab.experiments import EXPERIMENTS, Context, udp

pytest.importorskip("scipy")


def ping_record(stack: str, payload: int, mean: float, trial: int) -> dict:
    return {"stack": stack, "payload": payload, "trial": trial, "sent": 2000,
            "received": 2000, "lost": 0, "rtt_mean_us": mean, "rtt_stddev_us": mean / 10,
            "rtt_p99_us": mean * 2}  # fmt: skip


def test_latency_ratio_against_kernel_sockets():
    records = [ping_record("veloz", p, 10.0 + t, t) for p in (18, 1472) for t in range(3)]
    records += [ping_record("kernel", p, 40.0 + t, t) for p in (18, 1472) for t in range(3)]
    sections = udp.UDP_LATENCY.sections(records, {})
    mean = sections[0]
    assert mean["title"].startswith("Round-trip mean")
    rows = {(r[0], r[1]): r for r in mean["table"]["rows"]}
    assert set(rows) == {(18, "veloz"), (18, "kernel"), (1472, "veloz"), (1472, "kernel")}
    veloz = rows[(18, "veloz")]
    assert veloz[3] == 11.0 and veloz[-2] == pytest.approx(11 / 41, abs=0.01)


def test_throughput_rows_and_registration():
    records = [{"stack": s, "payload": 18, "trial": t, "rate_pps": r * 1e6}
               for t in range(3) for s, r in (("veloz", 0.5), ("kernel", 0.25))]  # fmt: skip
    sec = udp.UDP_THROUGHPUT.sections(records, {})[0]
    rows = {r[1]: r for r in sec["table"]["rows"]}
    assert rows["veloz"][3] == 0.5 and rows["veloz"][-2] == 2.0
    assert EXPERIMENTS["udp-latency"] is udp.UDP_LATENCY
    assert EXPERIMENTS["udp-throughput"] is udp.UDP_THROUGHPUT


class FakeLab:
    """udpd, ping and blast replaced: what ran, in what order, with udpd up."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_at: int = -1) -> None:
        self.calls: list[tuple] = []
        self.udpd_up = False
        self.udpd_runs = 0
        self.fail_at = fail_at
        monkeypatch.setattr(udp, "running_udpd", self.running_udpd)
        monkeypatch.setattr(udp, "ping", self.ping)
        monkeypatch.setattr(udp, "blast", self.blast)

    @contextlib.contextmanager
    def running_udpd(self, gen: bool = True) -> Iterator[None]:
        self.udpd_up = True
        self.udpd_runs += 1
        try:
            yield
        finally:
            self.udpd_up = False

    def _measure(self, call: tuple) -> dict:
        # direct mode owns the interfaces: never beside a udpd
        if call[1].startswith("veloz-direct"):
            assert not self.udpd_up, f"{call} ran beside udpd"
        else:
            assert self.udpd_up, f"{call} ran without udpd"
        if len(self.calls) == self.fail_at:
            raise RuntimeError("the DUT went away")
        self.calls.append(call)
        return {"stack": call[1], "payload": call[2], "n": len(self.calls)}

    def ping(self, stack: str, payload: int) -> dict:
        return self._measure(("ping", stack, payload))

    def blast(self, stack: str, payload: int, seconds: float) -> dict:
        return self._measure(("blast", stack, payload, seconds))


def expected_runs(kind: str, trials: int, *extra: object) -> list[tuple]:
    arms = udp.LATENCY_ARMS if kind == "ping" else udp.THROUGHPUT_ARMS
    pollers = [a for a in arms if not a.startswith("veloz-direct")]
    direct = [a for a in arms if a.startswith("veloz-direct")]
    runs = []
    for _ in range(trials):
        runs += [(kind, arm, p, *extra) for p in udp.PAYLOADS for arm in pollers]
        runs += [(kind, arm, p, *extra) for p in udp.PAYLOADS for arm in direct]
    return runs


@pytest.mark.parametrize("exp", [udp.UDP_LATENCY, udp.UDP_THROUGHPUT], ids=lambda e: e.name)
def test_run_loop_order_labels_and_tags(monkeypatch: pytest.MonkeyPatch, exp) -> None:
    lab = FakeLab(monkeypatch)
    labels: list[str] = []
    settings = {"trials": 2, "seconds": 1.5}
    ctx = Context(settings=settings, advance=lambda label, n=1: labels.append(label))
    exp.run(ctx)
    if exp is udp.UDP_LATENCY:
        assert lab.calls == expected_runs("ping", 2)
    else:
        assert lab.calls == expected_runs("blast", 2, 1.5)
    assert lab.udpd_runs == 2 and not lab.udpd_up  # once per trial
    # one record per run, in order, tagged with its trial and the experiment
    arms = udp.LATENCY_ARMS if exp is udp.UDP_LATENCY else udp.THROUGHPUT_ARMS
    assert len(ctx.records) == exp.count(settings) == 2 * len(udp.PAYLOADS) * len(arms)
    assert labels == [f"{c[1]} {c[2]} B" for c in lab.calls]
    per_trial = len(udp.PAYLOADS) * len(arms)
    assert ctx.records == [
        {"trial": i // per_trial, "experiment": exp.name, "stack": c[1], "payload": c[2],
         "n": i + 1}
        for i, c in enumerate(lab.calls)
    ]  # fmt: skip
    assert list(ctx.records[0]) == ["trial", "experiment", "stack", "payload", "n"]


@pytest.mark.parametrize("exp", [udp.UDP_LATENCY, udp.UDP_THROUGHPUT], ids=lambda e: e.name)
def test_run_stops_udpd_when_a_run_fails(monkeypatch: pytest.MonkeyPatch, exp) -> None:
    lab = FakeLab(monkeypatch, fail_at=3)
    ctx = Context(settings={"trials": 1, "seconds": 1.0})
    with pytest.raises(RuntimeError, match="went away"):
        exp.run(ctx)
    assert len(lab.calls) == 3 and len(ctx.records) == 3 and not lab.udpd_up


def test_payloads_from_sizes_and_the_kernel_row_stays_blocking(monkeypatch) -> None:
    lab = FakeLab(monkeypatch)
    ctx = Context(settings={"trials": 1, "seconds": 1.0, "udp_payloads": [64]})
    udp.UDP_LATENCY.run(ctx)
    assert lab.calls == [("ping", arm, 64) for arm in udp.LATENCY_ARMS]
    # the baseline row named `kernel` is blocking kernel sockets; the
    # busy-polling kernel arm is named beside it
    assert udp.LATENCY_ARMS[0] == "kernel" and "kernel-busy" in udp.LATENCY_ARMS


def test_latency_sections_percentiles_and_cpu() -> None:
    records = [{**ping_record(arm, 64, m + t, t), "rtt_p50_us": m, "rtt_p999_us": 3 * m,
                "cpu_dut_pct": c, "cpu_gen_pct": c}
               for t in range(3)
               for arm, m, c in (("kernel", 40.0, 20.0), ("veloz", 10.0, 150.0))]  # fmt: skip
    titles = [s["title"] for s in udp.UDP_LATENCY.sections(records, {})]
    assert any("p50" in t for t in titles) and any("p99.9" in t for t in titles)
    assert sum("CPU used" in t for t in titles) == 2
