"""test_limits' check against the current config's context limit (``current_limit_served``):
PASS without a request when the candidate's own limit is at least as large; FAIL with the
gate's capability sentence when the candidate rejects or fails the prompt at the current
limit; and that prompt counts in neither of the checks on the candidate's own limit."""

from __future__ import annotations

import pytest

from faultkit.gate.capability import Capabilities, capability_regressions
from faultkit.model.records import RequestRecord
from faultkit.probes.context import ProbePlan, ProbeResult, judge_step
from faultkit.probes.limits import (
    ContextLimit,
    PromptFit,
    context_limit_regression,
    plan_steps,
)
from scenarios.test_limits import current_limit_served, steps_answered
from slo.types import CheckResult, Measurement

M = Measurement(node="n1", t_effect=100.0, t_revert=105.0, t_window_end=160.0)
LIMIT = ContextLimit(2048, "/v1/models max_model_len")
FIT = PromptFit(per_word=1.0, overhead=10.0, spread=0.0)


def answered(tokens: int = 100) -> RequestRecord:
    return RequestRecord(id="r", node="n1", kind="chat", t_invoke=0.0, status="ok", t_end=1.0,
                         http_status=200, prompt_tokens=tokens, output_tokens=8)


def refused(http: int | None = 400, error_class: str = "http_4xx") -> RequestRecord:
    return RequestRecord(id="r", node="n1", kind="chat", t_invoke=0.0, status="fail",
                         t_end=1.0, http_status=http, error_class=error_class,
                         error_body=http is not None,
                         error_detail="The decoder prompt (length 4088) is longer than the "
                                      "maximum model length of 2048.")


def probed(current: int, last: RequestRecord | None) -> ProbeResult:
    """The probe on a 2,048-token node: its own steps as they should go (the over step
    cleanly refused), then the current config's step answered with ``last``."""
    steps = plan_steps(LIMIT, FIT, output_tokens=8, concurrency=2, current_limit=current)
    result = ProbeResult(ProbePlan(LIMIT, FIT, 2, tuple(steps), current))
    for step in steps:
        if step.current_limit is not None:
            assert last is not None
            records = [last]
        elif step.within:
            records = [answered()] * step.requests
        else:
            records = [refused()]
        result.steps.append(judge_step(step, records, LIMIT))
    return result


def judged(probe: list[ProbeResult], candidate: int, current: int) -> CheckResult:
    (result,) = current_limit_served(probe, candidate, current)(M).checks
    return result


SENTENCE = ("context limit per request 2,048 tokens vs 4,096 on the current config: prompts "
            "between them would be rejected")


@pytest.mark.parametrize("last", [refused(), refused(500, "http_5xx"), refused(None, "reset")],
                         ids=["rejected", "5xx", "reset"])
def test_a_candidate_that_refuses_the_current_limit_fails_with_the_gates_sentence(
    last: RequestRecord,
) -> None:
    result = judged([probed(4096, last)], 2048, 4096)
    assert not result.passed and not result.inconclusive
    assert result.why == SENTENCE
    assert result.expected == ("a prompt at the current config's context limit (4,096 tokens) "
                               "answered in full")
    assert result.observed.startswith("current step (~"), result.observed
    assert ("was rejected (HTTP 400" in result.observed) is (last.http_status == 400)


def test_a_candidate_that_answers_the_current_limit_passes() -> None:
    result = judged([probed(4096, answered(4080))], 2048, 4096)
    assert result.passed and result.why == "as expected"
    assert result.observed.endswith("answered in full")


@pytest.mark.parametrize("current", [2048, 1024])
def test_a_candidate_limit_at_least_the_current_passes_without_a_request(current: int) -> None:
    probe = probed(current, None)
    assert all(s.step.current_limit is None for s in probe.steps)  # nothing more was sent
    for ran in ([probe], []):  # whether the probe ran or not
        result = judged(ran, 2048, current)
        assert result.passed and not result.inconclusive
        assert result.observed == f"the candidate's limit 2,048 ≥ the current config's {current:,}"


def test_no_probe_result_is_inconclusive() -> None:
    result = judged([], 2048, 4096)
    assert result.inconclusive and not result.passed


def test_the_current_limits_prompt_counts_in_neither_of_the_candidates_own_checks() -> None:
    """Refused, it is no 'prompt inside the limit' finding; within the current config's
    limit, it is no 'over the limit' step either: the over step is the candidate's own."""
    probe = [probed(4096, refused())]
    for within in (True, False):
        (result,) = steps_answered(probe, within=within)(M).checks
        assert result.passed, result
        assert "current" not in result.observed


def test_the_sentence_is_the_gates_capability_regression() -> None:
    assert context_limit_regression(2048, 4096) == SENTENCE

    def caps(context: int) -> Capabilities:
        return Capabilities(context, "x", None, "not read")

    assert capability_regressions(caps(4096), caps(2048)) == [SENTENCE]
