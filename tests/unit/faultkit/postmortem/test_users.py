"""The server-side estimate of requests lost in an incident, against synthetic counters
whose truth is known by construction: arrivals at a steady rate, a server that answers
none of them while it is out."""

from __future__ import annotations

import pytest

from faultkit.postmortem.model import Bound, Incident
from faultkit.postmortem.users import BASELINE_S, estimate_lost

RATE = 5.0  # requests per second, exactly (one every 0.2 s)
T0 = 1_000_000.0


def incident(after: float | None, by: float, end_after: float | None, end_by: float | None
             ) -> Incident:
    end = None if end_by is None else Bound(end_after, end_by)
    return Incident(start=Bound(after, by), end=end, held=end is not None, failed_scrapes=3,
                    good_scrapes_inside=0, detection=None, alerts=(), restarts=())


def counter(t_down: float, t_up: float, *, reset: bool, until: float
            ) -> tuple[tuple[float, float], ...]:
    """A request counter scraped every second from ``T0``: +RATE a second while up; no
    sample while down; after a ``reset`` (a new process) it restarts from the requests
    served since ``t_up``."""
    samples, served_before, t = [], 0.0, T0
    while t <= until:
        if t < t_down:
            served_before = (t - T0) * RATE
            samples.append((t, served_before))
        elif t >= t_up:
            since_up = (t - t_up) * RATE
            samples.append((t, since_up if reset else served_before + since_up))
        t += 1.0
    return tuple(samples)


@pytest.mark.parametrize("reset", [True, False])
def test_the_lost_requests_of_an_outage_are_the_arrivals_the_server_did_not_count(
        reset: bool) -> None:
    # up to T0+60 (last good scrape at +60), down until +70 (first good scrape +70)
    samples = counter(T0 + 60.5, T0 + 70, reset=reset, until=T0 + 80)
    inc = incident(T0 + 60, T0 + 61, T0 + 69, T0 + 70)
    truth = (70 - 60) * RATE  # arrivals while nothing was served
    est = estimate_lost(inc, [samples], None, span_end=T0 + 75, interval_s=1.0, counter="c")
    assert est.lost is not None and est.low is not None and est.high is not None
    assert est.lost == pytest.approx(truth, abs=RATE)  # within one scrape's requests
    assert est.low <= truth <= est.high
    assert est.rate_per_s == pytest.approx(RATE)
    assert est.baseline_s == pytest.approx(BASELINE_S)
    assert "lost, between" in est.method and "abandoned" in est.method


def test_server_errors_in_the_span_are_lost_too() -> None:
    samples = counter(T0 + 1000, T0 + 1000, reset=False, until=T0 + 80)  # never down
    errors = ((T0 + 60, 0.0), (T0 + 65, 10.0), (T0 + 70, 10.0))
    inc = incident(T0 + 60, T0 + 61, T0 + 69, T0 + 70)
    est = estimate_lost(inc, [samples], [errors], span_end=T0 + 75, interval_s=1.0, counter="c")
    assert est.lost == 10 and est.errors == 10


def test_no_counter_is_not_estimated_and_says_why() -> None:
    inc = incident(T0 + 60, T0 + 61, T0 + 69, T0 + 70)
    est = estimate_lost(inc, None, None, span_end=T0 + 75, interval_s=1.0, counter=None,
                        why_none="the llamacpp engine exposes no request counter")
    assert est.lost is None and est.low is None
    assert est.method == "not estimated: the llamacpp engine exposes no request counter"
    assert est.to_json()["lost"] is None


def test_too_little_traffic_before_the_outage_is_not_estimated() -> None:
    samples = counter(T0 + 60.5, T0 + 70, reset=True, until=T0 + 80)
    inc = incident(T0 + 60, T0 + 61, T0 + 69, T0 + 70)
    est = estimate_lost(inc, [samples], None, span_end=T0 + 75, interval_s=1.0, counter="c",
                        not_before=T0 + 59)
    assert est.lost is None and "give an earlier --from" in est.why


def test_the_rate_is_never_taken_from_before_an_earlier_incident() -> None:
    # an earlier outage (+20..+40: nothing served) would halve a 60 s rate
    earlier = counter(T0 + 20, T0 + 40, reset=False, until=T0 + 60)
    later = counter(T0 + 60.5, T0 + 70, reset=True, until=T0 + 80)
    samples = earlier + tuple(s for s in later if s[0] >= T0 + 70)
    inc = incident(T0 + 60, T0 + 61, T0 + 69, T0 + 70)
    est = estimate_lost(inc, [samples], None, span_end=T0 + 75, interval_s=1.0, counter="c",
                        not_before=T0 + 40)
    assert est.rate_per_s == pytest.approx(RATE)
    assert est.baseline_s == pytest.approx(20.0)


def test_an_outage_that_began_before_the_window_is_not_estimated() -> None:
    inc = incident(None, T0 + 1, T0 + 9, T0 + 10)
    est = estimate_lost(inc, [((T0, 0.0),)], None, span_end=T0 + 15, interval_s=1.0, counter="c")
    assert est.lost is None and "before the window's first scrape" in est.why


def test_a_backlog_answered_after_recovery_is_served_not_lost() -> None:
    # a frozen server (+60..+70): its counter stands still, then it answers every request
    # that waited — after the first good scrape, counted by the scrapes of the hold
    samples = tuple((T0 + i, RATE * i if i <= 60 else RATE * 60 if i < 72 else RATE * i)
                    for i in range(0, 81) if not 60 < i < 70)
    inc = incident(T0 + 60, T0 + 61, T0 + 69, T0 + 70)
    est = estimate_lost(inc, [samples], None, span_end=T0 + 75, interval_s=1.0, counter="c")
    assert est.lost == 0 and est.low == 0
