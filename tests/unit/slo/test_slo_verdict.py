"""slo.verdict: the three outcomes, their summaries and JSON; the checks that feed them
(run-level gaps, monitoring-only detection, intervention, windows without data)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from faultkit.inventory import SLOSettings
from slo.checks import (
    check,
    checks_from_slo,
    detected_within,
    error_ratio_at_most,
    judge,
    lost_at_most,
    recovered_without_intervention,
    ttft_p95_below,
)
from slo.types import CheckResult as ReexportedCheckResult
from slo.types import Measurement, WindowSLIs
from slo.types import Verdict as ReexportedVerdict
from slo.verdict import NO_CHECKS, CheckResult, Verdict

OK = CheckResult("recovery", True, "≤ 60 s", "8.000 s", "recovered in time")
BAD = CheckResult("lost_requests", False, "≤ 0 lost", "3 lost", "3 lost > 0 allowed")
GAP = CheckResult("ttft_p95_after", False, "≤ 2 s", "no data", "no requests in the after window",
                  inconclusive=True)
PROM = "Prometheus not ready at http://127.0.0.1:1 (connection refused)"


def m(**kw: object) -> Measurement:
    base: dict[str, object] = dict(node="n", t_effect=100.0, t_revert=105.0, t_window_end=160.0)
    base.update(kw)
    return Measurement(**base)  # type: ignore[arg-type]


def after(requests: int, ok: int, **kw: object) -> dict[str, WindowSLIs]:
    ratio = (requests - ok) / requests if requests else None
    return {"after": WindowSLIs(110, 160, requests, ok, requests - ok, ratio, **kw)}  # type: ignore[arg-type]


# --------------------------------------------------------------------------- Verdict


def test_types_reexports_the_verdict_classes() -> None:
    assert ReexportedVerdict is Verdict
    assert ReexportedCheckResult is CheckResult


@pytest.mark.parametrize(
    ("checks", "reasons", "outcome"),
    [
        ((OK,), (), "PASS"),
        ((OK, BAD), (), "FAIL"),
        ((OK, BAD, GAP), (), "FAIL"),  # a judged failure outranks an unjudged check
        ((OK, GAP), (), "INCONCLUSIVE"),
        ((OK,), (PROM,), "INCONCLUSIVE"),
        ((OK, BAD), (PROM,), "INCONCLUSIVE"),  # a breach in a run without evidence: untrusted
        ((), (), "INCONCLUSIVE"),
    ],
)
def test_outcome_precedence(
    checks: tuple[CheckResult, ...], reasons: tuple[str, ...], outcome: str
) -> None:
    verdict = Verdict(checks, inconclusive=reasons)
    assert verdict.outcome == outcome
    assert verdict.passed is (outcome == "PASS")


def test_failures_and_unjudged_are_apart() -> None:
    verdict = Verdict((OK, BAD, GAP))
    assert verdict.failures == (BAD,)
    assert verdict.unjudged == (GAP,)
    assert (OK.outcome, BAD.outcome, GAP.outcome) == ("PASS", "FAIL", "INCONCLUSIVE")
    assert BAD.failed and not GAP.failed and not OK.failed


def test_a_check_cannot_pass_and_be_inconclusive() -> None:
    with pytest.raises(ValueError, match="both passed and inconclusive"):
        CheckResult("x", True, "e", "o", "w", inconclusive=True)


def test_summaries_start_with_the_outcome_and_name_the_missing_evidence() -> None:
    assert Verdict((OK,)).summary() == "PASS (1 checks)"
    assert Verdict((OK, BAD)).summary() == "FAIL: lost_requests: 3 lost > 0 allowed"
    assert Verdict((BAD, GAP)).summary() == (
        "FAIL: lost_requests: 3 lost > 0 allowed "
        "(not judged: ttft_p95_after: no requests in the after window)"
    )
    assert Verdict((OK,), inconclusive=(PROM,)).summary() == (
        f"INCONCLUSIVE: missing evidence: {PROM}"
    )
    assert Verdict((OK, GAP)).summary() == (
        "INCONCLUSIVE: missing evidence: ttft_p95_after: no requests in the after window"
    )
    assert Verdict((BAD,), inconclusive=(PROM,)).summary() == (
        f"INCONCLUSIVE: missing evidence: {PROM} (also failed: lost_requests: 3 lost > 0 allowed)"
    )
    assert Verdict().summary() == f"INCONCLUSIVE: missing evidence: {NO_CHECKS}"


def test_missing_evidence_lists_run_gaps_then_unjudged_checks() -> None:
    assert Verdict((GAP,), inconclusive=(PROM,)).missing_evidence == (
        PROM,
        "ttft_p95_after: no requests in the after window",
    )
    assert Verdict(inconclusive=(NO_CHECKS,)).missing_evidence == (NO_CHECKS,)


@pytest.mark.parametrize(
    "verdict",
    [
        Verdict((OK,)),
        Verdict((OK, BAD, GAP)),
        Verdict((OK, GAP)),
        Verdict((BAD,), inconclusive=(PROM, "no evidence that the fault took effect")),
        Verdict(),
    ],
)
def test_json_round_trip(verdict: Verdict) -> None:
    data = json.loads(json.dumps(verdict.to_json()))
    assert data["outcome"] == verdict.outcome
    assert data["passed"] is verdict.passed
    assert data["inconclusive"] == list(verdict.inconclusive)
    assert [c["inconclusive"] for c in data["checks"]] == [c.inconclusive for c in verdict.checks]
    assert Verdict.from_json(data) == verdict


def test_old_verdict_files_still_read() -> None:
    old = {
        "passed": False,
        "checks": [
            {"name": "lost", "passed": False, "expected": "≤ 0", "observed": "3", "why": "3 > 0"},
            {"name": "recovery", "passed": True, "expected": "≤ 60", "observed": "8", "why": "ok"},
        ],
    }
    verdict = Verdict.from_json(old)
    assert verdict.outcome == "FAIL"
    assert verdict.inconclusive == ()
    assert not any(c.inconclusive for c in verdict.checks)
    assert Verdict.from_json({"passed": True, "checks": []}).outcome == "INCONCLUSIVE"


def test_stored_outcome_is_recomputed_not_trusted() -> None:
    data = Verdict((BAD,)).to_json() | {"outcome": "PASS", "passed": True}
    assert Verdict.from_json(data).outcome == "FAIL"


@pytest.mark.parametrize(
    "data",
    [
        {"checks": "nope"},
        {"checks": [1]},
        {"checks": [{"name": "x"}]},
        {"checks": [], "inconclusive": "a string"},
        {"checks": [], "inconclusive": [1]},
    ],
)
def test_malformed_verdict_files_raise_type_errors(data: dict[str, object]) -> None:
    with pytest.raises(TypeError):
        Verdict.from_json(data)


# --------------------------------------------------------------------------- judge


GOOD = m(t_detect=101.5, detect_signal="alert", detection_s=1.5, t_recovered=110.0,
         recovery_s=10.0, slis=after(10, 10, ttft_p95_s=0.4))


def test_judge_and_checks_carry_the_run_level_gaps() -> None:
    gappy = dataclasses.replace(GOOD, inconclusive=[PROM, PROM, "clock skew 3 s"])
    for verdict in (judge(gappy, [lambda _: OK]), check(lambda _: OK)(gappy)):
        assert verdict.outcome == "INCONCLUSIVE"
        assert verdict.inconclusive == (PROM, "clock skew 3 s")
        assert verdict.summary().startswith(f"INCONCLUSIVE: missing evidence: {PROM}")


def test_judging_nothing_is_inconclusive() -> None:
    verdict = judge(GOOD, [])
    assert verdict.outcome == "INCONCLUSIVE"
    assert verdict.inconclusive == (NO_CHECKS,)
    assert NO_CHECKS in verdict.summary()


def test_complete_evidence_and_met_objectives_pass() -> None:
    settings = SLOSettings(detection_s_max=30, recovery_s_max=60, lost_max=0)
    verdict = checks_from_slo(settings)(GOOD)
    assert verdict.outcome == "PASS", verdict.summary()


# --------------------------------------------------------------------------- detection


def test_detection_by_monitoring_passes_and_shows_the_probe() -> None:
    measured = m(detection_s=4.0, detect_signal="up", probe_detection_s=0.5)
    result = detected_within(30)(measured).checks[0]
    assert result.passed
    assert result.observed == "4.000 s via up (harness probe: 0.500 s)"


def test_the_harness_probe_alone_is_not_detection() -> None:
    measured = m(probe_detection_s=0.5, detection_by_signal_s={"probe": 0.5})
    result = detected_within(30)(measured).checks[0]
    assert result.failed
    assert result.observed == "not detected (harness probe: 0.500 s)"
    assert "only the harness's probe saw it, which is not detection" in result.why


def test_a_non_monitoring_signal_never_satisfies_detection() -> None:
    legacy = m(detection_s=0.5, detect_signal="probe")  # a measurement from before the change
    assert detected_within(30)(legacy).checks[0].failed


def test_late_monitoring_detection_fails() -> None:
    result = detected_within(3)(m(detection_s=4.0, detect_signal="alert")).checks[0]
    assert result.failed
    assert result.why == "4.000 s > 3 s"


# --------------------------------------------------------------------------- intervention


def test_recovery_without_intervention() -> None:
    result = recovered_without_intervention()(GOOD).checks[0]
    assert result.passed
    assert result.name == "recovered_without_intervention"


def test_harness_intervention_fails_and_says_what_the_harness_did() -> None:
    helped = dataclasses.replace(
        GOOD, harness_intervened=["started the container its restart policy left down"]
    )
    result = recovered_without_intervention()(helped).checks[0]
    assert result.failed
    assert result.why == (
        "did not recover without intervention: started the container its restart policy "
        "left down"
    )
    names = [c.name for c in checks_from_slo(SLOSettings())(helped).failures]
    assert "recovered_without_intervention" in names


# --------------------------------------------------------------------------- windows


@pytest.mark.parametrize(
    ("slis", "why"),
    [
        ({}, "the after window was not measured"),
        (after(0, 0), "no requests in the after window to judge"),
    ],
)
def test_a_window_without_data_is_inconclusive_not_failed(
    slis: dict[str, WindowSLIs], why: str
) -> None:
    verdict = (ttft_p95_below(2.0) & error_ratio_at_most(0.01))(m(slis=slis))
    assert [c.inconclusive for c in verdict.checks] == [True, True]
    assert all(c.why == why for c in verdict.checks)
    assert verdict.outcome == "INCONCLUSIVE"
    assert verdict.failures == ()


def test_a_window_where_every_request_failed_is_a_failure() -> None:
    verdict = (error_ratio_at_most(0.01) & ttft_p95_below(2.0))(m(slis=after(12, 0)))
    ratio, ttft = verdict.checks
    assert ratio.failed and ratio.observed == "1"
    assert ttft.failed and not ttft.inconclusive
    assert ttft.why == "all 12 requests in the after window failed"
    assert verdict.outcome == "FAIL"


def test_successes_without_the_figure_are_inconclusive() -> None:
    result = ttft_p95_below(2.0)(m(slis=after(5, 5))).checks[0]
    assert result.inconclusive
    assert result.why == "no ttft_p95_s recorded for the 5 successful requests in the after window"


def test_a_failure_elsewhere_outranks_a_window_gap() -> None:
    verdict = (lost_at_most(0) & ttft_p95_below(2.0))(m(lost_total=2))
    assert verdict.outcome == "FAIL"
    assert [c.name for c in verdict.unjudged] == ["ttft_p95_after"]
