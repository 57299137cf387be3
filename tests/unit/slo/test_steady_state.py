"""The steady-state check before a fault (slo/evidence.py, steady_state_violations): what
counts as the readiness probe "not OK throughout the baseline"."""

from __future__ import annotations

import time
from typing import Any

from faultkit.inventory import SLOSettings
from faultkit.model.events import EventKind
from faultkit.model.records import Event, RequestRecord
from faultkit.probes.clockread import ClockReading
from slo.evidence import steady_state_violations

T = 1_000.0  # the baseline's start
NOT_READY = "the readiness probe was not OK throughout the baseline"
SLO = SLOSettings()  # TTFT objective 2.5 s


def _probe(at: float, ok: bool, latency_s: float, detail: str = "ok") -> Event:
    return Event(t=at, source="observer", node="n",
                 kind=EventKind.HEALTH_OK if ok else EventKind.HEALTH_FAIL,
                 data={"ok": ok, "status": 200 if ok else None, "detail": detail,
                       "latency_s": latency_s})


def _served(at: float, ttft_s: float) -> RequestRecord:
    return RequestRecord(id=f"r{at}", node="n", kind="chat", t_invoke=at, status="ok",
                         t_end=at + ttft_s + 0.3, t_first_token=at + ttft_s)


USERS = [_served(T + i * 0.2, 0.3) for i in range(25)]


def _violations(probes: list[Event]) -> list[str]:
    return steady_state_violations(USERS, probes, "n", SLO, T, T + 5.0)


def test_a_probe_always_ok_is_steady() -> None:
    assert _violations([_probe(T - 0.1 + i * 0.3, True, 0.01) for i in range(17)]) == []


def test_one_slow_answer_is_not_a_readiness_failure() -> None:
    """CI, test_memory_squeeze[vllm]: /health timed out after 1.23 s (the probe gives it
    1 s), the next probe was answered 0.34 s later; every user was served within 1.43 s."""
    probes = [_probe(T - 0.02, True, 0.014), _probe(T + 0.64, False, 1.23, "timeout"),
              _probe(T + 1.87, True, 0.89), _probe(T + 3.0, True, 0.02)]
    assert _violations(probes) == []


def test_a_silence_as_long_as_the_ttft_objective_is_a_readiness_failure() -> None:
    probes = [_probe(T - 0.02, True, 0.014), _probe(T + 0.5, False, 1.0, "timeout"),
              _probe(T + 1.5, False, 1.0, "timeout"), _probe(T + 2.5, True, 0.6)]
    assert NOT_READY in _violations(probes)  # unanswered from +0.5 to +3.1: 2.6 s ≥ 2.5 s


def test_a_refusal_or_an_error_status_is_a_readiness_failure_however_short() -> None:
    for detail in ("ConnectionRefusedError", "status 503"):
        probes = [_probe(T - 0.02, True, 0.01), _probe(T + 1.0, False, 0.001, detail),
                  _probe(T + 1.25, True, 0.01)]
        assert NOT_READY in _violations(probes), detail


def test_a_refusal_just_before_the_baseline_answered_after_its_start_counts() -> None:
    probes = [_probe(T - 0.3, False, 0.001, "ConnectionRefusedError"), _probe(T + 0.1, True, 0.01)]
    assert NOT_READY in _violations(probes)


def test_a_probe_still_failing_at_the_end_is_a_readiness_failure() -> None:
    probes = [_probe(T - 0.02, True, 0.01), _probe(T + 4.5, False, 1.0, "timeout")]
    assert NOT_READY in _violations(probes)


def test_a_node_on_a_docker_host_with_another_clock_is_an_evidence_gap() -> None:
    """Issue 16: a node's Docker host may be another machine; its events date t_effect."""
    from slo.evidence import MAX_CLOCK_SKEW_S, preflight_gaps

    node, prom = _remote_node(), _as_any(_Prometheus(ahead_s=0.0))
    near = ClockReading(skew_s=MAX_CLOCK_SKEW_S / 2, uncertainty_s=0.01, samples=1)
    assert preflight_gaps(node, prom, True, docker_clock=near) == []
    off = ClockReading(skew_s=-1.5, uncertainty_s=0.004, samples=1)
    (gap,) = preflight_gaps(node, prom, True, docker_clock=off)
    assert "node's Docker host tcp://127.0.0.1:18100 is -1.500 ± 0.004 s" in gap
    # a skew inside the bound whose error bar is not: the clocks are not shown to agree
    vague = ClockReading(skew_s=0.1, uncertainty_s=0.2, samples=5)
    (gap,) = preflight_gaps(node, prom, True, docker_clock=vague)
    assert "+0.100 ± 0.200 s (the fastest of 5 readings), not shown within ±0.25 s" in gap


class _Prometheus:
    """Ready, one rule for node n1, and a clock ``ahead_s`` ahead of this machine's; the
    queries it was asked are kept."""

    url = "http://prom"

    def __init__(self, ahead_s: float) -> None:
        self.ahead_s = ahead_s
        self.queries: list[str] = []

    def ready(self) -> bool:
        return True

    def rules(self, kind: str) -> list[dict[str, object]]:
        return [{"rules": [{"labels": {"node": "n1"}}]}]

    def query_value(self, query: str) -> float:
        self.queries.append(query)
        return time.time() + self.ahead_s


def _remote_node() -> Any:
    from tests.unit.faults_fake import node

    return node("n1", docker={"host": "tcp://127.0.0.1:18100", "container": "c"})


def _as_any(value: object) -> Any:
    return value


def test_a_prometheus_with_another_clock_is_an_evidence_gap() -> None:
    """Every detection figure compares Prometheus' clock with this machine's."""
    from slo.evidence import preflight_gaps

    prom = _Prometheus(ahead_s=1.0)
    (gap,) = preflight_gaps(_remote_node(), _as_any(prom), True)
    assert prom.queries and set(prom.queries) == {"time()"}, prom.queries
    assert "clock skew between this machine and Prometheus is +1.0" in gap
    assert "not shown within ±0.25 s: detection times could be wrong" in gap
