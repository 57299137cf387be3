"""The incident finder (faultkit.postmortem.incidents) on scrape sequences built here: each
expected bound is a stamp of a sample this test wrote, never a value the finder computed."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from faultkit.postmortem import (
    AlertSeries,
    Bound,
    NodeEvidence,
    Restart,
    find_incidents,
)
from faultkit.postmortem.model import Gap

T0 = 1_800_000_000.0
HOLD_S = 5.0


def up_samples(pattern: str, *, t0: float = T0, interval: float = 1.0
               ) -> tuple[tuple[float, float], ...]:
    """``"111000111"`` → one sample per character, ``interval`` apart from ``t0``; a space
    is a scrape that was never stored (a gap)."""
    return tuple((t0 + i * interval, float(c)) for i, c in enumerate(pattern) if c != " ")


def at(i: int) -> float:
    """The stamp of the ``i``-th character of a pattern."""
    return T0 + i


def evidence(up: Sequence[tuple[float, float]], *, alerts: Sequence[AlertSeries] = (),
             starts: tuple[tuple[tuple[float, float], ...], ...] | None = None,
             t_to: float | None = None) -> NodeEvidence:
    return NodeEvidence(
        node="n", job="n", selector='job="n"', prometheus_url="http://127.0.0.1:9",
        t_from=T0, t_to=up[-1][0] if t_to is None else t_to, scrape_interval_s=1.0,
        up=tuple(up), alerts=tuple(alerts), process_start=starts,
        process_start_metric=None if starts is None else "process_start_time_seconds")


def node_down(first: float, last: float, step: float = 1.0, name: str = "FaultkitNodeDown"
              ) -> AlertSeries:
    n = round((last - first) / step)
    return AlertSeries(name, {"alertname": name, "node": "n"},
                       tuple(first + k * step for k in range(n + 1)))


def test_one_outage_is_bounded_by_the_scrapes_around_it() -> None:
    found = find_incidents(evidence(up_samples("1" * 10 + "0" * 5 + "1" * 10)), hold_s=HOLD_S)
    [inc] = found.incidents
    assert inc.start == Bound(after=at(9), by=at(10))
    assert inc.end == Bound(after=at(14), by=at(15))
    assert inc.held and inc.failed_scrapes == 5 and inc.good_scrapes_inside == 0
    assert inc.duration_s == (4.0, 6.0)
    assert found.gaps == ()


def test_two_outages_apart_by_a_held_good_stretch_are_two_incidents() -> None:
    pattern = "111" + "000" + "1" * 8 + "00" + "1" * 7
    first, second = find_incidents(evidence(up_samples(pattern)), hold_s=HOLD_S).incidents
    assert (first.start, first.end) == (Bound(at(2), at(3)), Bound(at(5), at(6)))
    assert (second.start, second.end) == (Bound(at(13), at(14)), Bound(at(15), at(16)))
    assert first.failed_scrapes == 3 and second.failed_scrapes == 2


def test_a_good_stretch_shorter_than_the_hold_keeps_one_incident() -> None:
    pattern = "111" + "000" + "11" + "00" + "1" * 7  # 2 good scrapes: 1 s < hold
    [inc] = find_incidents(evidence(up_samples(pattern)), hold_s=HOLD_S).incidents
    assert inc.start == Bound(at(2), at(3)) and inc.end == Bound(at(9), at(10))
    assert inc.failed_scrapes == 5 and inc.good_scrapes_inside == 2


def test_an_outage_still_failing_at_the_window_end_has_no_end() -> None:
    [inc] = find_incidents(evidence(up_samples("11111" + "0000")), hold_s=HOLD_S).incidents
    assert inc.start == Bound(at(4), at(5))
    assert inc.end is None and not inc.held and inc.duration_s is None


def test_a_recovery_not_yet_held_at_the_window_end_is_said_so() -> None:
    [inc] = find_incidents(evidence(up_samples("11111" + "000" + "111")), hold_s=HOLD_S
                           ).incidents
    assert inc.end == Bound(at(7), at(8)) and not inc.held


def test_a_window_that_begins_inside_the_outage_leaves_its_start_open() -> None:
    [inc] = find_incidents(evidence(up_samples("000" + "1" * 8)), hold_s=HOLD_S).incidents
    assert inc.start == Bound(after=None, by=at(0)) and inc.start.width_s is None


def test_a_flap_of_one_failed_scrape_is_an_incident_of_one_scrape() -> None:
    [inc] = find_incidents(evidence(up_samples("1" * 6 + "0" + "1" * 6)), hold_s=HOLD_S
                           ).incidents
    assert inc.failed_scrapes == 1
    assert inc.start == Bound(at(5), at(6)) and inc.end == Bound(at(6), at(7))
    assert inc.duration_s == (0.0, 2.0)


def test_no_failed_scrape_no_incident() -> None:
    assert find_incidents(evidence(up_samples("1" * 20)), hold_s=HOLD_S).incidents == ()


def test_detection_is_the_first_alert_that_began_firing_inside_the_incident() -> None:
    up = up_samples("1" * 10 + "0" * 6 + "1" * 10)
    stalled = node_down(at(3), at(12), name="FaultkitEngineStalled")  # firing before it
    down = node_down(at(10) + 0.4, at(15) + 0.4)
    absent = node_down(at(13) + 0.4, at(15) + 0.4, name="FaultkitMetricsAbsent")
    [inc] = find_incidents(evidence(up, alerts=[stalled, absent, down]), hold_s=HOLD_S).incidents
    assert inc.detection is not None
    assert (inc.detection.alert, inc.detection.t_first) == ("FaultkitNodeDown", at(10) + 0.4)
    assert [a.alert for a in inc.alerts] == ["FaultkitNodeDown", "FaultkitMetricsAbsent"]


def test_no_alert_inside_the_incident_is_no_detection() -> None:
    up = up_samples("1" * 10 + "0" * 6 + "1" * 20)
    late = node_down(at(25), at(27))  # fired long after the node was back
    [inc] = find_incidents(evidence(up, alerts=[late]), hold_s=HOLD_S).incidents
    assert inc.detection is None and inc.alerts == ()


def test_an_alert_that_fired_twice_detects_each_incident_by_its_own_episode() -> None:
    up = up_samples("1" * 5 + "000" + "1" * 10 + "000" + "1" * 6)
    series = AlertSeries("FaultkitNodeDown", {"alertname": "FaultkitNodeDown"},
                         (at(5) + 0.5, at(6) + 0.5, at(7) + 0.5, at(18) + 0.5, at(19) + 0.5))
    first, second = find_incidents(evidence(up, alerts=[series]), hold_s=HOLD_S).incidents
    assert first.detection is not None and first.detection.t_first == at(5) + 0.5
    assert second.detection is not None and second.detection.t_first == at(18) + 0.5


def test_a_restart_belongs_to_the_incident_whose_first_good_scrape_showed_it() -> None:
    up = up_samples("1" * 10 + "0" * 5 + "1" * 10)
    starts = tuple((t, 1000.0 if t < at(15) else at(13) + 0.2) for t, v in up if v == 1.0)
    found = find_incidents(evidence(up, starts=(starts,)), hold_s=HOLD_S)
    [inc] = found.incidents
    assert inc.restarts == (Restart(t_seen=at(15), t_process_start=at(13) + 0.2,
                                    previous=1000.0),)
    assert found.restarts_outside == ()


def test_a_restart_without_a_failed_scrape_is_listed_apart() -> None:
    up = up_samples("1" * 20)
    starts = tuple((t, 1000.0 if t < at(8) else at(7) + 0.5) for t, _ in up)
    found = find_incidents(evidence(up, starts=(starts,)), hold_s=HOLD_S)
    assert found.incidents == ()
    assert found.restarts_outside == (Restart(at(8), at(7) + 0.5, 1000.0),)


def test_scrapes_never_stored_are_a_gap_not_an_outage() -> None:
    up = up_samples("11111" + " " * 10 + "11111")
    found = find_incidents(evidence(up), hold_s=HOLD_S)
    assert found.incidents == ()
    assert found.gaps == (Gap(at(4), at(15)),)


@given(st.lists(st.sampled_from("01"), min_size=1, max_size=60))
def test_every_failed_scrape_lies_in_exactly_one_incident(values: list[str]) -> None:
    """Whatever the sequence: each failed scrape lies inside exactly one incident, the good
    scrapes inside incidents are the flaps they count, and every bound's sides are a good
    and a failed scrape."""
    up = up_samples("".join(values))
    incidents = find_incidents(evidence(up), hold_s=HOLD_S).incidents
    good_inside = 0
    for t, v in up:
        inside = [i for i in incidents if i.start.by is not None and i.start.by <= t
                  and (i.end is None or (i.end.after is not None and t <= i.end.after))]
        assert len(inside) == (1 if v == 0.0 else len(inside[:1]))
        good_inside += len(inside) if v == 1.0 else 0
    assert good_inside == sum(i.good_scrapes_inside for i in incidents)
    values_at = dict(up)
    for inc in incidents:
        assert inc.start.by is not None and values_at[inc.start.by] == 0.0
        assert inc.start.after is None or values_at[inc.start.after] == 1.0
        if inc.end is not None:
            assert inc.end.after is not None and values_at[inc.end.after] == 0.0
            assert inc.end.by is not None and values_at[inc.end.by] == 1.0
    assert sum(i.failed_scrapes for i in incidents) == sum(1 for _, v in up if v == 0.0)
