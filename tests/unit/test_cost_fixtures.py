# SPDX-License-Identifier: BSD-2-Clause
"""The cost experiment's table of fixture cases: medians over trials per
build, and xdp over native, from the records alone."""

from __future__ import annotations

from veloz.lab.experiments import cost


def rec(nf: str, case: str, backend: str, ns: float, trial: int) -> dict:
    return {"kind": "fixture", "nf": nf, "fixture": case, "verdict": "drop", "size": 60,
            "backend": backend, "ns_per_packet": ns, "trial": trial}  # fmt: skip


def test_a_row_per_case_with_medians_over_trials():
    records = [rec("ddos", "a", "xdp", ns, t) for t, ns in enumerate((30, 10, 20))]
    records += [rec("ddos", "a", "native", ns, t) for t, ns in enumerate((4, 5, 100))]
    records += [rec("lb", "b", "xdp", 8, 0), rec("lb", "b", "native", 2, 0)]
    section = cost.fixture_section(records, {"repeat": 1000})
    rows = section["table"]["rows"]
    assert section["table"]["columns"][4:] == ["xdp ns", "native ns", "xdp / native", "trials"]
    assert rows == [["ddos", "a", "drop", 60, 20.0, 5.0, 4.0, 3],
                    ["lb", "b", "drop", 60, 8.0, 2.0, 4.0, 1]]  # fmt: skip


def test_a_case_timed_on_one_build_only_has_no_ratio():
    section = cost.fixture_section([rec("tx", "c", "xdp", 7, 0)], {"repeat": 10})
    assert section["table"]["rows"] == [["tx", "c", "drop", 60, 7.0, None, None, 0]]
