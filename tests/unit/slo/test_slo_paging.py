"""Detection to the page: Alertmanager's API v2 answers read, the stages after firing dated
from the timeline, a page that never came explained, and the objective judged."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from faultkit.inventory import parse_inventory
from faultkit.model.durations import parse_model_duration
from faultkit.model.events import EventKind
from faultkit.model.records import Event
from slo.alertmanager import AmAlert, RouteTiming, Silence
from slo.checks import judge, paged_within
from slo.observer import Observer
from slo.paging import Paging, page_of
from slo.types import Measurement

NODE = "vllm"
T_EFFECT, T_FIRING, T_END = 1000.0, 1001.2, 1030.0

#: GET /api/v2/alerts, as Alertmanager 0.25 answers it: one alert a silence holds back
ALERTS_SILENCED: list[dict[str, Any]] = [{
    "annotations": {"summary": "vllm: Prometheus cannot scrape vllm (up == 0)"},
    "endsAt": "2026-12-06T13:05:04.262Z",
    "fingerprint": "4c5a1b2e9f0d7a31",
    "receivers": [{"name": "faultkit-pager"}],
    "startsAt": "2026-12-06T13:01:04.262Z",
    "status": {"inhibitedBy": [], "silencedBy": ["0a8b0c4e-1d2f-4b55-9a1c-7e9f3c2d1b00"],
               "state": "suppressed"},
    "updatedAt": "2026-12-06T13:01:05.001Z",
    "labels": {"alertname": "FaultkitNodeDown", "job": "vllm", "node": "vllm",
               "severity": "page"},
}]
#: GET /api/v2/silence/{id}
SILENCE: dict[str, Any] = {
    "id": "0a8b0c4e-1d2f-4b55-9a1c-7e9f3c2d1b00", "createdBy": "alice",
    "comment": "maintenance window", "startsAt": "2026-12-06T12:00:00Z",
    "endsAt": "2026-12-06T14:00:00Z", "status": {"state": "active"},
    "matchers": [{"name": "node", "value": "vllm", "isRegex": False, "isEqual": True}],
}
ROUTE_CONFIG = """
global: {resolve_timeout: 5m}
route:
  receiver: faultkit-pager
  group_by: [alertname, node]
  group_wait: 2s
  group_interval: 1m30s
  routes: [{matchers: ['severity="ticket"'], receiver: tickets}]
receivers: [{name: faultkit-pager}, {name: tickets}]
"""


def ev(t: float, kind: str, source: str = "observer", **data: Any) -> Event:
    return Event(t=t, source=source, kind=kind, node=NODE, data=data)  # type: ignore[arg-type]


def route_event(pager: bool = True, **timing: Any) -> Event:
    route = RouteTiming.from_config(ROUTE_CONFIG).to_json() | timing
    return ev(990.0, EventKind.AM_ROUTE, "harness", url="http://127.0.0.1:19093", pager=pager,
              **route)


def am_alert(t: float, state: str = "active", starts_at: float = T_FIRING,
             silenced_by: tuple[str, ...] = ()) -> Event:
    return ev(t, EventKind.AM_ALERT, alertname="FaultkitNodeDown", fingerprint="4c5a",
              state=state, starts_at=starts_at, silenced_by=list(silenced_by),
              inhibited_by=[], labels={"node": NODE})


def paged(t: float, status: str = "firing") -> Event:
    return ev(t, EventKind.PAGED, status=status, alertname="FaultkitNodeDown",
              receiver="faultkit-pager", group_key="{}:{alertname=\"FaultkitNodeDown\"}")


#: Prometheus fired the node's alert (the observer's event)
FIRING = ev(T_FIRING + 0.1, EventKind.ALERT_FIRING, alertname="FaultkitNodeDown",
            t_state=T_FIRING, for_s=0.0)


# ------------------------------------------------------------------ the API's answers


def test_durations_as_alertmanager_and_rules_write_them() -> None:
    assert parse_model_duration("30s") == 30.0
    assert parse_model_duration("1m30s") == 90.0
    assert parse_model_duration("4h") == 14_400.0
    assert parse_model_duration("0s") == 0.0
    for bad in ("", "30", "1.5m", "30 s", "3x", "30s1m"):
        with pytest.raises(ValueError, match="not a Prometheus duration"):
            parse_model_duration(bad)


def test_the_root_route_timing_with_alertmanagers_defaults() -> None:
    route = RouteTiming.from_config(ROUTE_CONFIG)
    assert (route.receiver, route.group_wait_s, route.group_interval_s) == \
        ("faultkit-pager", 2.0, 90.0)
    assert route.repeat_interval_s == 4 * 3600.0  # not set: Alertmanager's default
    assert route.has_children and route.group_by == ("alertname", "node")
    bare = RouteTiming.from_config("route: {receiver: x}\nreceivers: [{name: x}]")
    assert (bare.group_wait_s, bare.group_interval_s) == (30.0, 300.0)
    with pytest.raises(ValueError, match="no route"):
        RouteTiming.from_config("receivers: []")


def test_an_alert_and_the_silence_that_holds_it() -> None:
    (alert,) = [AmAlert.from_api(a) for a in ALERTS_SILENCED]
    assert alert.state == "suppressed" and alert.name == "FaultkitNodeDown"
    assert alert.silenced_by == ("0a8b0c4e-1d2f-4b55-9a1c-7e9f3c2d1b00",)
    assert alert.starts_at == pytest.approx(1796562064.262)  # 2026-12-06T13:01:04.262Z
    said = Silence.from_api(SILENCE).describe()
    assert said == ('silence 0a8b0c4e-1d2f-4b55-9a1c-7e9f3c2d1b00 by alice ("maintenance '
                    'window"), matching node="vllm"')


class _Sink:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def write(self, obj: Event) -> None:
        self.events.append(obj)


def test_the_observer_writes_alertmanagers_state_on_changes_only() -> None:
    node = parse_inventory(f"""
nodes: [{{name: {NODE}, engine: vllm, base_url: "http://127.0.0.1:1", model: m,
          prometheus: {{job: vllm}}}}]
""").nodes[0]
    sink = _Sink()
    observer = Observer(node, None, sink)
    silenced = [AmAlert.from_api(a) for a in ALERTS_SILENCED]
    silence = Silence.from_api(SILENCE)
    observer._on_alertmanager(1001.0, silenced, "", {silence.id: silence})
    observer._on_alertmanager(1001.5, silenced, "", {})  # unchanged: nothing written
    observer._on_alertmanager(1002.0, None, "connection refused", {})
    observer._on_alertmanager(1002.5, None, "connection refused", {})
    observer._on_alertmanager(1003.0, silenced, "", {})
    kinds = [e.kind for e in sink.events]
    assert kinds == [EventKind.AM_ALERT, EventKind.ALERTMANAGER_DOWN, EventKind.ALERTMANAGER_UP]
    first = sink.events[0].data
    assert first["state"] == "suppressed"
    assert first["silenced_by"] == [silence.describe()]


# ------------------------------------------------------------------ the stages


def test_firing_held_then_paged_each_stage_dated() -> None:
    timeline = [FIRING, route_event(), am_alert(1001.6), paged(1003.4)]
    paging = page_of(timeline, NODE, T_EFFECT, T_FIRING, T_END)
    assert paging is not None
    assert paging.received_s == pytest.approx(1.6)
    assert paging.page_s == pytest.approx(3.4)
    assert paging.after_firing_s == pytest.approx(2.2)  # group_wait 2 s + delivery
    assert paging.group_wait_s == 2.0 and paging.receiver == "faultkit-pager"
    assert paging.finding is None
    assert Paging.from_json(paging.to_json()) == paging


def test_no_alertmanager_no_paging() -> None:
    assert page_of([am_alert(1001.6)], NODE, T_EFFECT, T_FIRING, T_END) is None


def test_a_silenced_alert_is_a_finding_naming_the_silence() -> None:
    said = Silence.from_api(SILENCE).describe()
    timeline = [FIRING, route_event(), am_alert(1001.6, "suppressed", silenced_by=(said,))]
    paging = page_of(timeline, NODE, T_EFFECT, T_FIRING, T_END)
    assert paging is not None and paging.page_s is None
    assert paging.finding == ("detected, but no one was paged: Alertmanager suppressed the "
                              f"alert ({said})")


@pytest.mark.parametrize(("timeline", "t_end", "reason"), [
    ([FIRING, route_event()], T_END, "Alertmanager never held the alert"),
    ([FIRING, route_event(), ev(1001.0, EventKind.ALERTMANAGER_DOWN, detail="connection refused")],
     T_END, "Alertmanager did not answer (connection refused)"),
    ([FIRING, route_event(), am_alert(1001.6)], 1002.0, "inside the route's group_wait (2 s)"),
    ([FIRING, route_event(pager=False), am_alert(1001.6)], T_END, "no pager receives its pages"),
    ([FIRING, route_event(), am_alert(1001.6),
      ev(1030.0, EventKind.PAGER_DOWN, "harness", detail="pager unreachable")],
     T_END, "the pager did not answer"),
    ([FIRING, route_event(), am_alert(1001.6)], 1100.0, "no page reached the pager"),
    ([FIRING, route_event(), am_alert(1001.6)], 1030.0, "next group_interval (90 s)"),
    ([FIRING, route_event(), am_alert(1001.6),
      ev(1002.5, EventKind.ALERT_RESOLVED, alertname="FaultkitNodeDown", t_state=1002.5)],
     T_END, "the alert resolved 1.3 s after it fired, before Alertmanager's route sent it"),
    # an earlier alert resolving 3 s before this one fired (a previous run's), and another
    # alert resolving meanwhile, are not this alert's resolution
    ([ev(T_FIRING - 3.1, EventKind.ALERT_RESOLVED, alertname="FaultkitNodeDown",
         t_state=T_FIRING - 3.1), FIRING, route_event(), am_alert(1001.6),
      ev(1002.0, EventKind.ALERT_RESOLVED, alertname="FaultkitMetricsAbsent", t_state=1002.0),
      ev(1003.2, EventKind.ALERT_RESOLVED, alertname="FaultkitNodeDown", t_state=1003.2)],
     T_END, "the alert resolved 2.0 s after it fired, before Alertmanager's route sent it"),
])
def test_detected_but_no_page_says_why(timeline: list[Event], t_end: float,
                                       reason: str) -> None:
    paging = page_of(timeline, NODE, T_EFFECT, T_FIRING, t_end)
    assert paging is not None and paging.finding is not None
    assert reason in paging.finding


def history_route(pager: bool = True) -> Event:
    """The route as a postmortem reads it: now, beside the pager's history."""
    route = RouteTiming.from_config(ROUTE_CONFIG).to_json()
    return ev(990.0, EventKind.AM_ROUTE, url="http://127.0.0.1:19093", pager=pager,
              from_history=True, **route)


@pytest.mark.parametrize(("timeline", "t_end", "reason"), [
    # no live view of Alertmanager: its never holding the alert is not a finding
    ([FIRING, history_route()], 1100.0, "no page reached the pager"),
    ([FIRING, history_route()], 1002.0, "inside the route's group_wait (2 s)"),
    ([FIRING, history_route(pager=False)], T_END, "no pager receives its pages"),
    ([FIRING, history_route(), ev(T_END, EventKind.PAGER_DOWN, detail="pager unreachable")],
     T_END, "the pager did not answer (pager unreachable)"),
])
def test_a_postmortems_missing_page_rests_on_the_pagers_history_alone(
        timeline: list[Event], t_end: float, reason: str) -> None:
    paging = page_of(timeline, NODE, T_EFFECT, T_FIRING, t_end)
    assert paging is not None and paging.finding is not None
    assert reason in paging.finding
    assert "Alertmanager held" not in paging.finding
    assert "Alertmanager holds" not in paging.finding
    assert "never held" not in paging.finding


def test_a_postmortems_page_is_dated_from_the_pagers_history() -> None:
    paging = page_of([FIRING, history_route(), paged(1004.5)], NODE, T_EFFECT, T_FIRING, T_END)
    assert paging is not None and paging.finding is None
    assert paging.page_s == pytest.approx(4.5) and paging.t_received is None


def test_each_notification_naming_the_node_is_one_paged_event() -> None:
    from faultkit.pager import Notification
    from slo.paging import page_events

    node = parse_inventory(
        "nodes: [{name: vllm, engine: vllm, base_url: 'http://127.0.0.1:9', model: m,"
        " prometheus: {job: vllm-job}}]").node("vllm")
    by_label = {"receiver": "faultkit-pager", "groupKey": "k1", "alerts": [
        {"status": "firing", "labels": {"alertname": "FaultkitNodeDown", "node": "vllm"}}]}
    by_job = {"receiver": "faultkit-pager", "groupKey": "k2", "alerts": [
        {"status": "resolved", "labels": {"alertname": "FaultkitNodeDown", "job": "vllm-job"}}]}
    other = {"receiver": "faultkit-pager", "alerts": [
        {"status": "firing", "labels": {"alertname": "FaultkitNodeDown", "node": "llama"}}]}
    events = page_events([Notification(1.0, by_label), Notification(2.0, other),
                          Notification(3.0, by_job)], node)
    assert [(e.t, e.kind, e.node, e.data["status"], e.data["group_key"]) for e in events] == [
        (1.0, EventKind.PAGED, "vllm", "firing", "k1"),
        (3.0, EventKind.PAGED, "vllm", "resolved", "k2")]
    assert events[0].data["payload"] == by_label


def test_an_alert_that_never_fired_pages_no_one_and_says_its_for_outlasted_the_outage(
) -> None:
    """A rule with for: 1m went pending on a 20 s outage; detection rested on up == 0."""
    pending = ev(1001.1, EventKind.ALERT_PENDING, alertname="FaultkitNodeDown",
                 t_state=1000.9, for_s=60.0)
    paging = page_of([route_event(), pending], NODE, T_EFFECT, 1000.9, T_END)
    assert paging is not None and paging.page_s is None
    assert paging.finding == ("no alert fired, so no one was paged: FaultkitNodeDown went "
                              "pending, but what it watched ended before its for: (60 s) elapsed")
    bare = page_of([route_event()], NODE, T_EFFECT, 1000.9, T_END)
    assert bare is not None and bare.finding is not None
    assert "detection rests on up == 0 alone" in bare.finding


def test_pages_and_alerts_from_before_the_fault_are_not_this_faults() -> None:
    stale = [FIRING, route_event(), am_alert(1001.0, starts_at=900.0), paged(995.0),
             paged(1004.0, status="resolved")]
    paging = page_of(stale, NODE, T_EFFECT, T_FIRING, T_END)
    assert paging is not None
    assert paging.t_received is None and paging.t_paged is None


def test_the_page_of_an_alert_already_pending_before_the_harness_acted_is_not_this_faults(
) -> None:
    """FaultkitErrorRatioHigh went pending 3.6 s before the fault (the last run's errors in
    its rate() window) and fired on its for: at +6.4 s; Alertmanager held it and paged. The
    node's own alert of this fault never fired: no page is this fault's, and why says so."""
    carried: dict[str, Any] = {"alertname": "FaultkitErrorRatioHigh", "activeAt": 996.4,
                               "for_s": 10.0}
    t_acting = 999.9
    timeline = [
        route_event(),
        ev(996.5, EventKind.ALERT_PENDING, **carried, t_state=996.4),
        ev(1006.5, EventKind.ALERT_FIRING, **carried, t_state=1006.4),
        ev(1006.6, EventKind.AM_ALERT, alertname="FaultkitErrorRatioHigh", fingerprint="e1",
           state="active", starts_at=1006.4, silenced_by=[], inhibited_by=[],
           labels={"node": NODE}),
        ev(1008.4, EventKind.PAGED, status="firing", alertname="FaultkitErrorRatioHigh",
           receiver="faultkit-pager", group_key="{}"),
    ]
    up_detected = 1001.0
    paging = page_of(timeline, NODE, T_EFFECT, up_detected, T_END, t_acting)
    assert paging is not None
    assert paging.t_received is None and paging.t_paged is None
    assert paging.finding is not None and "no alert fired" in paging.finding
    # without the harness's act to tell it by (a postmortem), the page is counted
    counted = page_of(timeline, NODE, T_EFFECT, up_detected, T_END)
    assert counted is not None and counted.t_paged == 1008.4


# ------------------------------------------------------------------ the objective


def _measured(paging: Paging | None, detected: bool = True) -> Measurement:
    return Measurement(node=NODE, t_effect=T_EFFECT, t_revert=1010.0, t_window_end=T_END,
                       t_detect=T_FIRING if detected else None,
                       detection_s=T_FIRING - T_EFFECT if detected else None,
                       detect_signal="alert" if detected else None, paging=paging)


def test_paged_within_judges_the_page_and_never_passes_without_one() -> None:
    on_time = page_of([FIRING, route_event(), am_alert(1001.6), paged(1003.4)], NODE, T_EFFECT,
                      T_FIRING, T_END)
    (result,) = judge(_measured(on_time), paged_within(5)).checks
    assert result.passed and result.observed == "3.400 s (group_wait 2 s)"
    (late,) = judge(_measured(on_time), paged_within(3)).checks
    assert late.failed
    silenced = page_of([FIRING, route_event(), am_alert(1001.6, "suppressed", silenced_by=("s1",))],
                       NODE, T_EFFECT, T_FIRING, T_END)
    (no_page,) = judge(_measured(silenced), paged_within(30)).checks
    assert no_page.failed and "suppressed" in no_page.why
    assert on_time is not None
    for paging in (None, dataclasses.replace(on_time, pager=False)):
        (unknown,) = judge(_measured(paging), paged_within(30)).checks
        assert unknown.inconclusive and not unknown.passed
    (undetected,) = judge(_measured(on_time, detected=False), paged_within(30)).checks
    assert undetected.inconclusive

