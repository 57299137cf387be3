"""bench/gate_repeat.py's summary of repeated gates, from fake rounds: the false-alarm rate
and its bound, and the spread of the gate's time, scenario and steady-state figures."""

from __future__ import annotations

from typing import Any

import pytest
from gate_repeat import spread, summarize, upper95


def fake_round(decision: str, seconds: float, recovery: float | None, lost: int,
               ttft: tuple[float, float], error: tuple[float, float] = (0.0, 0.0)
               ) -> dict[str, Any]:
    return {
        "decision": decision, "seconds": seconds,
        "figures": {"test_kill[n]": {"detection_s": 1.0, "recovery_s": recovery, "lost": lost},
                    "test_bad_input[n]": {"detection_s": None, "recovery_s": 0.0, "lost": 0}},
        "steady": {"ttft_p95_s": {"current": ttft[0], "candidate": ttft[1], "regression": False},
                   "error_ratio": {"current": error[0], "candidate": error[1]}},
        "figure_regressions": ["test_kill[n]: recovery …"] if decision != "pass" else [],
        "steady_regressions": [],
    }


ROUNDS = [
    fake_round("pass", 200.0, 2.0, 20, (0.10, 0.12)),
    fake_round("fail", 240.0, 8.0, 30, (0.20, 0.20), (0.0, 0.02)),
    fake_round("pass", 210.0, None, 25, (0.10, 0.08)),
]


def test_false_alarms_and_their_bound() -> None:
    s = summarize(ROUNDS)
    assert (s["rounds"], s["passed"], s["false_alarms"]) == (3, 2, 1)
    assert s["false_alarm_rounds"] == [2]
    assert s["false_alarm_rate"] == pytest.approx(1 / 3)
    assert s["false_alarm_rate_upper95"] == pytest.approx(upper95(1, 3))
    assert s["figure_regressions"] == 1
    assert s["seconds"] == {"n": 3, "missing": 0, "min": 200.0, "median": 210.0, "max": 240.0,
                            "max_min_ratio": pytest.approx(1.2), "max_minus_min": 40.0}


def test_upper_bound_is_clopper_pearson() -> None:
    # 0 of n: 1 - 0.05^(1/n), the "rule of three" (≈ 3/n)
    assert upper95(0, 10) == pytest.approx(1 - 0.05 ** (1 / 10), abs=1e-9)
    assert upper95(0, 100) == pytest.approx(0.0295, abs=1e-4)
    # 1 of 10: the p at which P(X <= 1) = 0.05 (binomial tables: 0.3942)
    assert upper95(1, 10) == pytest.approx(0.3942, abs=1e-4)
    assert upper95(0, 0) == upper95(3, 3) == 1.0


def test_scenario_figures_spread() -> None:
    kill = summarize(ROUNDS)["scenarios"]["test_kill[n]"]
    # recovery not captured in round 3: the spread is of the two captured
    assert kill["recovery_s"] == {"n": 2, "missing": 1, "min": 2.0, "median": 5.0, "max": 8.0,
                                  "max_min_ratio": 4.0, "max_minus_min": 6.0}
    assert kill["lost"]["max_min_ratio"] == pytest.approx(1.5)
    assert kill["lost"]["median"] == 25
    assert kill["detection_s"]["max_minus_min"] == 0.0
    bad = summarize(ROUNDS)["scenarios"]["test_bad_input[n]"]
    assert bad["detection_s"] == {"n": 0, "missing": 3}
    assert bad["recovery_s"]["max_min_ratio"] is None  # a min of 0 has no ratio
    assert "peak_rps" not in bad


def test_steady_ratio_per_round_and_its_spread() -> None:
    ttft = summarize(ROUNDS)["steady"]["ttft_p95_s"]
    assert ttft["ratio_per_round"] == pytest.approx([1.2, 1.0, 0.8])
    assert ttft["ratio"]["max_min_ratio"] == pytest.approx(1.5)
    assert ttft["difference"]["max"] == pytest.approx(0.02)
    assert ttft["current"]["max"] == 0.2
    error = summarize(ROUNDS)["steady"]["error_ratio"]
    assert error["ratio_per_round"] == [None, None, None]  # current 0: no ratio
    assert error["difference"]["max"] == pytest.approx(0.02)
    e2e = summarize(ROUNDS)["steady"]["e2e_p95_s"]  # not in the gate.json: nothing captured
    assert e2e["ratio"] == {"n": 0, "missing": 3}


def test_spread_of_nothing_and_no_rounds() -> None:
    assert spread([]) == {"n": 0, "missing": 0}
    s = summarize([])
    assert (s["rounds"], s["false_alarms"], s["false_alarm_rate"]) == (0, 0, None)
