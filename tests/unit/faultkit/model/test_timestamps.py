"""One RFC 3339 parser for Docker's and Prometheus' stamps (faultkit.model.timestamps)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from faultkit.docker.containers import state_from_attrs
from faultkit.model.timestamps import parse_rfc3339

EPOCH = datetime(2026, 12, 1, 5, 30, 1, 123456, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01T05:30:01.123456789Z",  # Docker: nine digits
        "2026-12-01T05:30:01.123456Z",
        "2026-12-01T06:30:01.123456789+01:00",  # an offset is honoured, not dropped
        "2026-12-01T05:30:01.1234567",  # no offset: UTC
    ],
)
def test_fractional_stamps(text: str) -> None:
    assert parse_rfc3339(text) == pytest.approx(EPOCH, abs=1e-6)


def test_whole_seconds_and_short_fractions() -> None:
    whole = datetime(2026, 12, 1, 5, 30, 1, tzinfo=UTC).timestamp()
    assert parse_rfc3339("2026-12-01T05:30:01Z") == whole
    assert parse_rfc3339("2026-12-01T05:30:01.5Z") == whole + 0.5


@pytest.mark.parametrize("text", [None, "", "0001-01-01T00:00:00Z"])
def test_never_is_none(text: str | None) -> None:
    assert parse_rfc3339(text) is None


def test_docker_state_uses_it() -> None:
    state = state_from_attrs({"State": {"StartedAt": "2026-12-01T05:30:01.123456789Z",
                                        "FinishedAt": "0001-01-01T00:00:00Z"}})
    assert state.started_at == pytest.approx(EPOCH, abs=1e-6)
    assert state.finished_at is None


def test_a_wall_clock_step_during_a_run_is_an_evidence_gap() -> None:
    from faultkit.model.timestamps import clock_step_gap, wall_minus_monotonic

    start = wall_minus_monotonic()
    assert clock_step_gap(start) is None  # no step between two reads
    assert clock_step_gap(100.0, offset_now=100.4) is None  # within the tolerance
    gap = clock_step_gap(100.0, offset_now=128.3)  # CI run O: +28.3 s mid-scenario
    assert gap is not None and "stepped by +28.3 s" in gap
    assert clock_step_gap(100.0, offset_now=99.0) is not None  # a step back counts too


def test_the_gap_makes_the_measurement_inconclusive() -> None:
    from faultkit.model.events import EventKind
    from faultkit.model.records import Event
    from faultkit.model.timestamps import clock_step_gap
    from slo.effect import Effect
    from slo.gaps import evidence_gaps

    reason = clock_step_gap(0.0, offset_now=28.3)
    timeline = [Event(t=1.0, source="harness", kind=EventKind.EVIDENCE_GAP, node="n",
                      data={"reason": reason})]
    effect = Effect(t=0.5, evidence="docker_event", detail="die")
    assert evidence_gaps(timeline, [], "n", effect) == [reason]
