"""faultkit.probes.clockread: a remote clock read to within half the fastest exchange's round
trip."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from faultkit.probes.clockread import ClockReading, read_clock


def _exchanges(*pairs: tuple[float, float]) -> tuple[Callable[[], float], Callable[[], float]]:
    """A fake remote (stamping at a fixed point of each exchange) and local clock: each pair
    is (this machine's time when the request leaves, the round trip)."""
    times: Iterator[float] = iter([t for start, rtt in pairs for t in (start, start + rtt)])
    stamps = iter([start + rtt / 4 + 0.2 for start, rtt in pairs])  # remote is 0.2 s ahead
    return (lambda: next(stamps)), (lambda: next(times))


def test_the_fastest_of_the_exchanges_gives_the_reading() -> None:
    # a slow first exchange (1 s: the stamp 0.25 s after it left) reads a skew 0.25 s off
    remote, now = _exchanges((100.0, 1.0), (102.0, 0.2), (103.0, 0.1), (104.0, 0.4))
    reading = read_clock(remote, samples=4, good_round_trip_s=0.01, now=now)
    assert reading.samples == 4
    assert reading.uncertainty_s == pytest.approx(0.05)
    assert reading.skew_s == pytest.approx(0.2 - 0.025)
    assert abs(reading.skew_s - 0.2) <= reading.uncertainty_s  # the truth is inside the bar


def test_a_fast_exchange_ends_the_reading() -> None:
    remote, now = _exchanges((100.0, 0.004), (101.0, 0.001))
    reading = read_clock(remote, samples=5, now=now)
    assert reading.samples == 1 and reading.uncertainty_s == pytest.approx(0.002)


def test_within_needs_the_whole_error_bar_inside_the_bound() -> None:
    assert ClockReading(0.2, 0.04, 1).within(0.25)
    assert not ClockReading(0.2, 0.06, 1).within(0.25)
    assert not ClockReading(-0.3, 0.0, 1).within(0.25)
    described = ClockReading(-0.474, 0.48, 5).describe()
    assert described == "-0.474 ± 0.480 s (the fastest of 5 readings)"


def test_errors_of_the_remote_propagate_and_zero_samples_is_refused() -> None:
    def broken() -> float:
        raise ConnectionError("no answer")

    with pytest.raises(ConnectionError):
        read_clock(broken)
    with pytest.raises(ValueError, match="samples must be 1 or more"):
        read_clock(lambda: 0.0, samples=0)
