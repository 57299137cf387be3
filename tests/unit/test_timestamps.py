"""One RFC 3339 parser for Docker's and Prometheus' stamps (faultkit.timestamps)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from faultkit.containers import state_from_attrs
from faultkit.timestamps import parse_rfc3339

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
