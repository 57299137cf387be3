"""Scenario-specific checks that need more than the Measurement (container state, fault results).

Each returns a composable :class:`slo.checks.Checks` so scenarios write
``experiment.check(checks_from_slo(slo) & node_not_crashed(experiment))``.
"""

from __future__ import annotations

from typing import Any

import pytest

from faultkit import Experiment, Node
from faultkit.rundir import ContainerEvidence, UnreadableRunFile
from slo.checks import Checks, check
from slo.types import CheckResult, Measurement


def _state_gap(evidence: ContainerEvidence) -> str | None:
    """Why the container states cannot show a crash (``None``: both were captured)."""
    for when, state in (("before", evidence.before), ("after", evidence.after)):
        if not state.captured:
            return f"container state {when} the run not captured"
        if state.error:
            return f"container state {when} the run unreadable: {state.error}"
        wrong = [n for n in state.invalid if n in ("restart_count", "oom_killed", "started_at")]
        if wrong:
            return f"container state {when} the run unreadable: wrong type of {', '.join(wrong)}"
    return None


def node_not_crashed(experiment: Experiment) -> Checks:
    """The node's container did not restart or get OOM-killed during the run.

    Without both container states (no Docker access, inspect failed) the check cannot be
    judged: it is inconclusive, never a pass."""

    def fn(m: Measurement) -> CheckResult:
        try:
            evidence = experiment.run.container_evidence()
            gap = _state_gap(evidence)
        except UnreadableRunFile as exc:
            evidence, gap = ContainerEvidence(), str(exc)
        before, after = evidence.before, evidence.after
        if gap is not None:
            return CheckResult(
                name="no_crash",
                passed=False,
                expected="no restart, no OOM kill",
                observed="not captured",
                why=gap,
                inconclusive=True,
            )
        restarts = (after.restart_count or 0) - (before.restart_count or 0)
        # Docker keeps OOMKilled from an earlier kill until the container is recreated,
        # so only a change during this run counts
        oom = bool(after.oom_killed) and not before.oom_killed
        restarted = bool(before.started_at) and after.started_at != before.started_at
        passed = restarts == 0 and not oom and not restarted
        return CheckResult(
            name="no_crash",
            passed=passed,
            expected="no restart, no OOM kill",
            observed=f"restarts +{restarts}, OOMKilled={oom}, restarted={restarted}",
            why="the node stayed up" if passed else "the node crashed and was restarted",
        )

    return check(fn)


def no_loss_outside_clean_rejections() -> Checks:
    """Every lost request was a clean rejection (4xx/429/503 with an OpenAI-style error body,
    ``faultkit.model.records.is_clean_rejection``), nothing dropped."""

    def fn(m: Measurement) -> CheckResult:
        dropped = m.lost_total - m.clean_rejections
        return CheckResult(
            name="no_drops",
            passed=dropped == 0,
            expected="0 dropped/reset/timed-out requests",
            observed=f"{dropped} dropped ({m.lost_by_class or 'none'})",
            why="only clean rejections" if dropped == 0 else f"{dropped} requests were dropped",
        )

    return check(fn)


def fault_result(
    experiment: Experiment, name: str, expected: str, predicate: Any, key: str
) -> Checks:
    """A check on one value the fault recorded (``experiment.fault_result[key]``)."""

    def fn(m: Measurement) -> CheckResult:
        value = experiment.fault_result.get(key)
        passed = bool(predicate(value))
        return CheckResult(
            name=name,
            passed=passed,
            expected=expected,
            observed=f"{key}={value!r}",
            why="as expected" if passed else f"{key} was {value!r}",
        )

    return check(fn)


def engine_pattern(node: Node) -> str:
    """The node's engine worker pattern (the inventory's ``engine_process``, else the
    engine's own); a node without one fails: it cannot be judged as configured, and a
    scenario skipped by omission would read green."""
    pattern = node.engine_process_pattern
    if pattern is None:
        pytest.fail(f"node {node.name}: no engine process known for engine {node.engine!r}; "
                    "set the node's engine_process (a regular expression matching the "
                    "engine's worker command line) in the inventory")
    return pattern


def rolled_back(config: str, result: dict[str, Any], t_effect: float) -> tuple[bool, str]:
    """Whether a rollout's failed candidate was detected and the previous config restored
    (``result``: the rollout fault's), and the words for it, dated from the fault's effect."""
    detected, restored = result.get("t_failed_detected"), result.get("t_restored")
    if not isinstance(detected, int | float) or not isinstance(restored, int | float):
        return False, f"{config} failed and was not restored: {result}"
    why = f" ({result['failed_reason']})" if result.get("failed_reason") else ""
    return True, (f"{config} failed{why}: detected {detected - t_effect:+.1f} s after it took "
                  f"effect, rolled back, the previous config serving again "
                  f"{restored - detected:.1f} s later")
