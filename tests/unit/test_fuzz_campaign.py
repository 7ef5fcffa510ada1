"""`make fuzz-long`'s campaign (tests/fuzz/campaign.py): a target stopped by
hand is not a finding, whichever fuzzer it is, and a crash still is one.
The fuzzer here is a stand-in script that prints what libFuzzer or atheris
print and exits as they do; the corpora and regressions are tmp_path's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import campaign  # noqa: E402  (tests/fuzz is not a package)

# Each stand-in ignores the merge (exit 0, nothing merged) and otherwise
# prints its count and how it stopped.
STOPS = {
    # atheris: Python's KeyboardInterrupt ends the run, exit 130
    "python-sigint": (True, "print('fuzz-fake: 123 inputs')\n"
                            "print('KeyboardInterrupt: stopping.')\nsys.exit(130)\n"),
    # libFuzzer: exit 72 after its final stats
    "c-sigint": (False, "print('==1== libFuzzer: run interrupted; exiting')\n"
                        "print('stat::number_of_executed_units: 123')\nsys.exit(72)\n"),
}  # fmt: skip


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setattr(campaign, "CORPORA", tmp_path / "corpus")
    monkeypatch.setattr(campaign, "REGRESSIONS", tmp_path / "regressions")

    def make(body: str, python: bool) -> campaign.Target:
        script = tmp_path / "fake.py"
        script.write_text(f"import sys\nif '-merge=1' in sys.argv:\n    sys.exit(0)\n{body}")
        return campaign.Target("fake", [sys.executable, str(script)], python=python)

    return make


@pytest.mark.parametrize("stop", sorted(STOPS))
def test_a_target_stopped_by_hand_is_not_a_finding(fake, tmp_path, stop):
    python, body = STOPS[stop]
    r = campaign.run_one(fake(body, python), tmp_path / "build", runs=10, seconds=5)
    assert r.finding is None, r
    assert r.executions == 123


def test_a_crash_is_a_finding(fake, tmp_path):
    body = "print('fuzz-fake: 5 inputs')\nraise SystemExit(1)\n"
    r = campaign.run_one(fake(body, True), tmp_path / "build", runs=10, seconds=5)
    assert r.finding and r.finding.startswith("exit 1"), r
    # exit 130 without atheris' words is not taken for a stop
    body = "print('fuzz-fake: 5 inputs')\nsys.exit(130)\n"
    r = campaign.run_one(fake(body, True), tmp_path / "build", runs=10, seconds=5)
    assert r.finding and r.finding.startswith("exit 130"), r
