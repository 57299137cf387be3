"""slo.checks: composition, expected/observed/why, and the default set from SLO settings."""

from __future__ import annotations

from faultkit.inventory import SLOSettings
from slo.checks import (
    Checks,
    alert_fired_within,
    checks_from_slo,
    detected_within,
    judge,
    lost_at_most,
    recovered_within,
    ttft_p95_below,
)
from slo.types import CheckResult, Measurement, WindowSLIs


def m(**kw: object) -> Measurement:
    base: dict[str, object] = dict(node="n", t_effect=100.0, t_revert=105.0, t_window_end=160.0)
    base.update(kw)
    return Measurement(**base)  # type: ignore[arg-type]


GOOD = m(t_detect=101.5, detect_signal="alert", detection_s=1.5,
         detection_by_signal_s={"alert": 1.5, "probe": 0.2}, t_recovered=110.0, recovery_s=10.0,
         lost_total=0, slis={"after": WindowSLIs(110, 160, 10, 10, 0, 0.0, ttft_p95_s=0.4)})


def test_composed_checks_pass_and_keep_every_result() -> None:
    verdict = (ttft_p95_below(2.0) & lost_at_most(0) & recovered_within(60)
               & detected_within(30))(GOOD)
    assert verdict.passed
    assert [c.name for c in verdict.checks] == ["ttft_p95_after", "lost_requests", "recovery",
                                                "detection"]
    assert verdict.checks[3].observed == "1.500 s via alert"


def test_failures_say_expected_observed_and_why() -> None:
    bad = m(lost_total=3, lost_by_class={"refused": 2, "reset": 1}, recovery_s=None)
    verdict = (lost_at_most(0) & recovered_within(60) & detected_within(30)
               & alert_fired_within(10))(bad)
    assert not verdict.passed
    lost, rec, det, alert = verdict.checks
    assert (lost.expected, lost.observed) == ("≤ 0 lost", "3 lost (refused=2, reset=1)")
    assert "3 lost > 0" in lost.why
    assert rec.observed == "not recovered"
    assert det.observed == "not detected"
    assert "recall" in alert.why
    assert "lost_requests" in verdict.summary()


def test_thresholds_are_inclusive_and_strict_above() -> None:
    assert detected_within(1.5)(GOOD).passed
    assert not detected_within(1.4)(GOOD).passed
    assert not ttft_p95_below(0.3)(GOOD).passed


def test_plain_callables_compose_on_either_side() -> None:
    def always_fails(_: Measurement) -> CheckResult:
        return CheckResult("custom", False, "x", "y", "because")

    combined = always_fails & lost_at_most(0)
    assert isinstance(combined, Checks)
    assert [c.name for c in combined(GOOD).checks] == ["custom", "lost_requests"]
    assert not (lost_at_most(0) & always_fails)(GOOD).passed
    assert judge(GOOD, [always_fails]).checks[0].why == "because"


def test_missing_window_data_does_not_pass() -> None:
    result = ttft_p95_below(2.0)(m()).checks[0]
    assert not result.passed
    assert result.inconclusive
    assert result.observed == "no data"


def test_checks_from_slo_uses_settings() -> None:
    settings = SLOSettings(detection_s_max=1.0, recovery_s_max=60, lost_max=0)
    verdict = checks_from_slo(settings)(GOOD)
    names = [c.name for c in verdict.checks]
    assert names == ["detection", "recovery", "recovered_without_intervention",
                     "lost_requests", "error_ratio_after", "ttft_p95_after"]
    assert [c.name for c in verdict.failures] == ["detection"]
    assert "lost_requests" not in [c.name for c in checks_from_slo(SLOSettings())(GOOD).checks]
