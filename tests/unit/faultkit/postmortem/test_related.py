"""Which incidents of several nodes overlapped (faultkit.postmortem.related): the widest
span the bounds allow — from the last good scrape (the first failed one when the window
began inside the outage) to the first good scrape that held (the window's end while
still failing) — so outages that may have overlapped are named together."""

from __future__ import annotations

from dataclasses import replace

from faultkit.postmortem.model import Bound, Incident
from faultkit.postmortem.related import NodeIncidents, outage_span, related_incidents


def incident(after: float | None, by: float, end: tuple[float, float] | None) -> Incident:
    return Incident(start=Bound(after, by), end=None if end is None else Bound(*end),
                    held=end is not None, failed_scrapes=3, good_scrapes_inside=0,
                    detection=None, alerts=(), restarts=())


def test_the_span_is_the_widest_the_bounds_allow() -> None:
    assert outage_span(incident(9.0, 10.0, (14.0, 15.0)), 100.0) == (9.0, 15.0)
    assert outage_span(incident(None, 0.0, (4.0, 5.0)), 100.0) == (0.0, 5.0)  # began before
    assert outage_span(incident(9.0, 10.0, None), 100.0) == (9.0, 100.0)  # still failing


def test_overlapping_outages_name_each_other_and_apart_ones_do_not() -> None:
    gateway = NodeIncidents([incident(19.0, 20.0, (29.0, 30.0)),
                             incident(69.0, 70.0, (74.0, 75.0))], ["gw-1", "gw-2"], 100.0)
    upstream = NodeIncidents([incident(14.0, 15.0, (20.0, 21.0)),   # overlaps gateway's 1st
                              incident(40.0, 41.0, (44.0, 45.0)),   # overlaps nothing
                              incident(74.5, 75.0, None)],          # touches the 2nd's end
                             ["up-1", "up-2", "up-3"], 100.0)
    related = related_incidents({"gw": gateway, "up": upstream})
    assert [(r.incident, r.node, r.other, r.run, r.t_end) for r in related["gw"]] == [
        (1, "up", 1, "up-1", 21.0), (2, "up", 3, "up-3", None)]
    assert [(r.incident, r.other, r.run) for r in related["up"]] == [
        (1, 1, "gw-1"), (3, 2, "gw-2")]
    assert related_incidents({"alone": upstream}) == {"alone": ()}


def test_a_related_outage_is_its_widest_span_open_ended_while_still_failing() -> None:
    """``Related.t_start`` is the other's start's earlier side (the last good scrape) and
    ``t_end`` ``None`` while it was still failing — an end bound without its later side
    (no good scrape after it) is still failing too — though the overlap is tested up to
    the window's end."""
    no_later_side = replace(incident(39.0, 40.0, (44.0, 45.0)), end=Bound(44.0, None))
    mine = NodeIncidents([incident(9.0, 10.0, (90.0, 91.0))], ["a-1"], 100.0)
    theirs = NodeIncidents([incident(19.0, 20.0, (24.0, 25.0)), incident(29.0, 30.0, None),
                            no_later_side], ["b-1", "b-2", "b-3"], 100.0)
    assert outage_span(no_later_side, 100.0) == (39.0, 100.0)
    assert [(r.other, r.t_start, r.t_end) for r in related_incidents(
        {"a": mine, "b": theirs})["a"]] == [(1, 19.0, 25.0), (2, 29.0, None), (3, 39.0, None)]
