"""slo.measure on hand-built ledgers and timelines whose truth is known by construction."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faultkit.faults.memory import MemorySqueeze
from faultkit.model.records import Event, RequestRecord
from slo.measure import MeasurementInputError, measure, window_slis

NODE = "n1"


def req(i: int, t: float, status: str = "ok", cls: str | None = None, dur: float = 0.05,
        node: str = NODE) -> RequestRecord:
    ok = status == "ok"
    return RequestRecord(
        id=f"r{i}", node=node, kind="chat", t_invoke=t, status=status,  # type: ignore[arg-type]
        t_end=t + dur, t_first_token=t + 0.01 if ok else None,
        t_last_token=t + dur if ok else None, output_tokens=5 if ok else None,
        error_class=cls, http_status=200 if ok else None,
    )


def ev(t: float, source: str, kind: str, **data: object) -> Event:
    return Event(t=t, source=source, kind=kind, node=NODE, data=dict(data))  # type: ignore[arg-type]


def outage_ledger(down_from: float = 1010.0, down_to: float = 1015.0) -> list[RequestRecord]:
    out = []
    for i in range(300):  # one request every 0.1 s from t=1000 to 1030
        t = round(1000 + i * 0.1, 3)
        if down_from <= t < down_to:
            out.append(req(i, t, "fail", "refused", dur=0.001))
        else:
            out.append(req(i, t))
    # in flight when the fault hit: reset mid-stream
    out.append(req(999, 1009.95, "fail", "reset", dur=0.3))
    return out


KILL_EFFECT = {"docker_actions": ["die"], "required": "docker", "spans_outage": False}


def outage_timeline(*, alert: bool = True, up: bool = True, die: bool = True) -> list[Event]:
    """A kill: the harness acts at 1009.95, Docker's ``die`` (the truth) is at 1010.0."""
    events = [
        ev(1000.0, "observer", "health_ok", ok=True),
        ev(1009.9, "fault", "inject_start", fault="kill", effect=KILL_EFFECT),
        ev(1009.95, "fault", "act", what="SIGKILL"),
        ev(1010.05, "fault", "inject_end"),
        ev(1010.3, "observer", "health_fail", ok=False, detail="refused"),
        ev(1015.0, "fault", "revert_start"),
        ev(1015.0, "fault", "revert_end"),
        ev(1015.2, "observer", "health_ok", ok=True),
    ]
    if die:
        events.append(Event(t=1010.0, source="harness", kind="docker_die", node=NODE,
                            data={"action": "die", "exit_code": 137}))
    if up:
        events += [ev(1011.2, "observer", "up_0", value=0.0, t_sample=1010.8),
                   ev(1016.1, "observer", "up_1", value=1.0, t_sample=1015.8)]
    if alert:
        events += [ev(1011.9, "observer", "alert_firing", alertname="FaultkitNodeDown",
                      t_state=1011.5)]
    return sorted(events, key=lambda e: e.t)


def test_outage_detection_recovery_and_loss_match_construction() -> None:
    m = measure(outage_ledger(), outage_timeline(), NODE, recovery_hold_s=5)
    assert m.t_effect == 1010.0  # Docker's die event, not the harness's call or return
    assert (m.effect_evidence, m.effect_detail) == ("docker_event",
                                                    "Docker 'die' event (exit code 137)")
    assert m.detect_signal == "alert"
    assert m.detection_s == pytest.approx(1.5)
    assert m.detection_by_signal_s == pytest.approx({"alert": 1.5, "up": 0.8, "probe": 0.3})
    assert m.probe_detection_s == pytest.approx(0.3)
    assert m.t_recovered == pytest.approx(1015.2)  # readiness OK again (requests ok from 1015.0)
    assert m.recovery_s == pytest.approx(5.2)
    assert m.recovery_after_revert_s == pytest.approx(0.2)
    assert m.lost_total == 51
    assert m.lost_by_class == {"refused": 50, "reset": 1}
    assert m.in_flight_at_effect == 1
    assert m.inconclusive == [] and m.harness_intervened == []
    assert m.clean_rejections == 0
    assert m.t_impact == pytest.approx(1010.001)
    assert m.slis["baseline"].failed == 1  # the request in flight at t_effect, sent before it
    assert m.slis["fault"].failed == 50
    assert m.slis["after"].requests == 148  # 1015.2 … 1029.9
    assert m.notes == []


def test_signal_priority_alert_then_up_and_the_probe_is_never_detection() -> None:
    m = measure(outage_ledger(), outage_timeline(alert=False), NODE)
    assert m.detect_signal == "up"
    assert m.detection_s == pytest.approx(0.8)
    m = measure(outage_ledger(), outage_timeline(alert=False, up=False), NODE)
    assert (m.detect_signal, m.detection_s, m.t_detect) == (None, None, None)
    assert m.probe_detection_s == pytest.approx(0.3)  # a figure, not detection
    assert any("not detected by monitoring" in n and "probe saw it" in n for n in m.notes)


def test_not_detected_is_a_finding_with_a_note() -> None:
    timeline = [e for e in outage_timeline(alert=False, up=False) if e.kind != "health_fail"]
    m = measure(outage_ledger(), timeline, NODE)
    assert m.t_detect is None
    assert m.detection_s is None
    assert not m.detected
    assert any("not detected" in n for n in m.notes)


def test_signals_before_the_fault_do_not_count() -> None:
    timeline = [*outage_timeline(alert=False),
                ev(1005.0, "observer", "alert_firing", alertname="Old", t_state=1005.0)]
    m = measure(outage_ledger(), timeline, NODE)
    assert m.detect_signal == "up"


def _with_alert(name: str, active_at: float, for_s: float, seen: float, *,
                up: bool = True) -> list[Event]:
    """The kill's timeline with one alert the observer first saw pending at ``seen``."""
    alert = {"alertname": name, "activeAt": active_at, "for_s": for_s}
    return sorted([
        *outage_timeline(alert=False, up=up),
        ev(seen, "observer", "alert_pending", **alert, t_state=active_at),
        ev(seen + for_s, "observer", "alert_firing", **alert, t_state=active_at + for_s),
    ], key=lambda e: e.t)


def test_an_alert_already_pending_before_the_fault_is_not_its_detection() -> None:
    """The last run's errors were still inside the error-ratio rule's 1m rate(): its alert
    went pending 3.6 s before this fault and fired on its for: 10 s at +6.4 s."""
    m = measure(outage_ledger(), _with_alert("FaultkitErrorRatioHigh", 1006.4, 10.0, 1006.5),
                NODE)
    assert m.detect_signal == "up" and m.t_detect == pytest.approx(1010.8)
    assert "alert" not in m.detection_by_signal_s
    assert any("FaultkitErrorRatioHigh was already active 3.6 s before" in n for n in m.notes)


def test_the_page_of_an_alert_carried_over_is_not_the_faults_page() -> None:
    """measure() dates the page with the harness's act, so the carried alert's page at
    +8.4 s (Alertmanager held it at +6.6 s) is not this fault's."""
    timeline = sorted([
        *_with_alert("FaultkitErrorRatioHigh", 1006.4, 10.0, 1006.5),
        ev(1000.0, "harness", "am_route", url="http://127.0.0.1:19093", pager=True),
        ev(1016.6, "observer", "am_alert", alertname="FaultkitErrorRatioHigh",
           fingerprint="e1", state="active", starts_at=1016.4, silenced_by=[],
           inhibited_by=[], labels={"node": NODE}),
        ev(1018.4, "pager", "paged", status="firing", alertname="FaultkitErrorRatioHigh",
           receiver="faultkit-pager", group_key="{}"),
    ], key=lambda e: e.t)
    m = measure(outage_ledger(), timeline, NODE)
    assert m.paging is not None
    assert m.paging.t_received is None and m.paging.t_paged is None


def test_an_alert_the_harness_saw_only_after_it_acted_is_the_faults() -> None:
    """Made active by the evaluation under way at the fault, stamped just before it."""
    m = measure(outage_ledger(), _with_alert("FaultkitNodeDown", 1009.97, 1.0, 1010.4, up=False),
                NODE)
    assert m.detect_signal == "alert" and m.t_detect == pytest.approx(1010.97)


def _with_up(*events: Event) -> list[Event]:
    timeline = [e for e in outage_timeline(alert=False) if e.kind not in ("up_0", "up_1")]
    return sorted([*timeline, *events], key=lambda e: e.t)


def test_the_scrape_under_way_at_the_fault_counts_at_t_effect_never_negative() -> None:
    # the scrape that failed at the kill began 0.1 s before Docker's die event (Prometheus
    # stamps a scrape with its start); the observer saw it only after the harness acted
    m = measure(outage_ledger(), _with_up(ev(1010.4, "observer", "up_0", value=0.0,
                                             t_sample=1009.9)), NODE)
    assert (m.detect_signal, m.detection_s) == ("up", 0.0)
    assert all(v >= 0 for v in m.detection_by_signal_s.values())
    assert any("stamped 0.100 s before" in n and "counted as detection at t_effect" in n
               for n in m.notes), m.notes


def test_an_alert_fired_by_that_scrape_counts_at_t_effect_too() -> None:
    timeline = [*outage_timeline(up=False, alert=False),
                ev(1010.6, "observer", "alert_firing", alertname="FaultkitNodeDown",
                   t_state=1009.97)]
    m = measure(outage_ledger(), sorted(timeline, key=lambda e: e.t), NODE)
    assert (m.detect_signal, m.detection_s) == ("alert", 0.0)


def test_a_signal_seen_before_the_harness_acted_is_a_finding_not_detection() -> None:
    # seen at 1009.93, before the act at 1009.95: not the fault's doing
    m = measure(outage_ledger(), _with_up(ev(1009.93, "observer", "up_0", value=0.0,
                                             t_sample=1009.9)), NODE)
    assert m.detection_s is None
    assert any("up signal was stamped 0.100 s before" in n and "not counted" in n
               for n in m.notes), m.notes


def test_a_signal_that_ended_before_t_effect_is_a_finding_not_detection() -> None:
    # a failed scrape, then a good one, both stamped before the die event
    m = measure(outage_ledger(), _with_up(
        ev(1010.2, "observer", "up_0", value=0.0, t_sample=1009.96),
        ev(1010.2, "observer", "up_1", value=1.0, t_sample=1009.99),
    ), NODE)
    assert m.detection_s is None
    assert all(v >= 0 for v in m.detection_by_signal_s.values())


def test_readiness_failing_at_end_means_not_recovered_and_loss_runs_to_window_end() -> None:
    ledger = outage_ledger(down_to=2000)
    timeline = [e for e in outage_timeline() if e.t < 1015.1]
    m = measure(ledger, timeline, NODE)
    assert m.t_recovered is None
    assert m.recovery_s is None
    assert m.lost_total == 200 + 1  # everything from 1010.0 to the end, plus the reset
    assert any("not recovered" in n for n in m.notes)


def test_recovery_needs_the_hold_to_last_to_window_end() -> None:
    m = measure(outage_ledger(), outage_timeline(), NODE, recovery_hold_s=5,
                t_window_end=1019.0)
    assert m.t_recovered is None
    m = measure(outage_ledger(), outage_timeline(), NODE, recovery_hold_s=3.7,
                t_window_end=1019.0)
    assert m.t_recovered == pytest.approx(1015.2)


def test_a_late_failure_moves_recovery_after_it() -> None:
    ledger = outage_ledger()
    # a 503 with an OpenAI-style error body after the node came back: a clean rejection
    ledger[200] = dataclasses.replace(req(200, 1020.0, "fail", "http_5xx"), http_status=503,
                                      error_body=True)
    m = measure(ledger, outage_timeline(), NODE, recovery_hold_s=5)
    assert m.t_recovered == pytest.approx(1020.1)  # first success after the last failure
    assert m.lost_by_class["http_5xx"] == 1
    assert m.clean_rejections == 1
    assert m.lost_total == 52


def test_harness_cancellations_while_draining_do_not_block_recovery() -> None:
    ledger = [*outage_ledger(), req(1000, 1029.95, "unknown", "cancelled", dur=0.01)]
    m = measure(ledger, outage_timeline(), NODE)
    assert m.t_recovered == pytest.approx(1015.2)
    assert "cancelled" not in m.lost_by_class


def test_without_probes_recovery_uses_requests_and_says_so() -> None:
    timeline = [e for e in outage_timeline() if not e.kind.startswith("health")]
    m = measure(outage_ledger(), timeline, NODE)
    assert m.t_recovered == pytest.approx(1015.0)
    assert any("no readiness probes" in n for n in m.notes)


def test_other_nodes_and_probe_records_are_ignored() -> None:
    ledger = [*outage_ledger(), req(5000, 1011.0, "fail", "refused", node="other"),
              RequestRecord(id="p", node=NODE, kind="probe", t_invoke=1011.0,
                            status="fail", t_end=1011.1)]
    m = measure(ledger, outage_timeline(), NODE)
    assert m.lost_total == 51
    assert m.requests_total == 301


def test_missing_inject_event_is_a_clear_error() -> None:
    with pytest.raises(MeasurementInputError, match="inject_start"):
        measure(outage_ledger(), [ev(1.0, "observer", "health_ok")], NODE)


def test_window_slis_percentiles_tpot_and_throughput() -> None:
    records = [
        RequestRecord(id=str(i), node=NODE, kind="chat", t_invoke=float(i), status="ok",
                      t_end=i + 1.0, t_first_token=i + 0.1 * (i + 1), t_last_token=i + 1.0,
                      output_tokens=11)
        for i in range(10)
    ]
    s = window_slis(records, 0.0, 10.0)
    assert s.requests == 10
    assert s.error_ratio == 0.0
    assert s.ttft_p50_s == pytest.approx(0.55)
    assert s.ttft_p95_s == pytest.approx(0.955)
    assert s.tpot_p50_s == pytest.approx((1.0 - 0.55) / 10)
    assert s.output_tokens_per_s == pytest.approx(11.0)
    assert window_slis(records, 20.0, 30.0).error_ratio is None


# --------------------------------------------------------------------------- t_effect


def _effect_timeline(spec: dict[str, object], *extra: Event) -> list[Event]:
    return sorted([
        ev(1000.0, "observer", "health_ok", ok=True),
        ev(1009.0, "fault", "inject_start", fault="x", effect=spec),
        *extra,
        ev(1012.0, "fault", "inject_end"),
        ev(1013.0, "fault", "revert_end"),
    ], key=lambda e: e.t)


def test_a_memory_squeeze_takes_effect_at_the_oom_kill_when_docker_reports_it_first() -> None:
    """The kernel OOM-killed the engine inside Docker's update call; Docker's
    ``oom`` came 1.7 s before its ``update`` (written when the call returned)."""
    spec = {"docker_actions": list(MemorySqueeze.effect_docker_actions), "required": "docker",
            "spans_outage": False}
    act = ev(1009.1, "fault", "act", what="docker update --memory")
    oom = Event(t=1009.4, source="harness", kind="docker_oom", node=NODE, data={})
    update = Event(t=1011.1, source="harness", kind="docker_update", node=NODE, data={})
    m = measure(outage_ledger(), _effect_timeline(spec, act, oom, update), NODE)
    assert (m.t_effect, m.effect_evidence) == (1009.4, "docker_event")


def test_effect_evidence_order_docker_then_mechanism_then_call() -> None:
    spec = {"docker_actions": ["pause"], "required": "docker", "spans_outage": False}
    act = ev(1009.5, "fault", "act", what="docker pause")
    mech = ev(1009.8, "fault", "effect", what="rule added")
    pause = Event(t=1009.6, source="harness", kind="docker_pause", node=NODE, data={})
    ledger = outage_ledger()
    m = measure(ledger, _effect_timeline(spec, act, mech, pause), NODE)
    assert (m.t_effect, m.effect_evidence) == (1009.6, "docker_event")
    spec = {"docker_actions": [], "required": "mechanism", "spans_outage": False}
    m = measure(ledger, _effect_timeline(spec, act, mech), NODE)
    assert (m.t_effect, m.effect_evidence, m.effect_detail) == (1009.8, "mechanism", "rule added")
    spec = {"docker_actions": [], "required": "", "spans_outage": False}
    m = measure(ledger, _effect_timeline(spec, act), NODE)
    assert (m.t_effect, m.effect_evidence) == (1009.5, "call")
    assert m.inconclusive == []


def test_faults_spanning_the_outage_count_from_their_first_act() -> None:
    # a rollout: the old container is removed at 1009.5, the new one is ready at 1015.2
    spec = {"docker_actions": [], "required": "", "spans_outage": True}
    act = ev(1009.5, "fault", "act", what="remove the current container")
    timeline = [e for e in outage_timeline() if e.kind not in ("inject_start", "act")]
    timeline += [ev(1009.4, "fault", "inject_start", fault="rollout", effect=spec), act]
    m = measure(outage_ledger(), sorted(timeline, key=lambda e: e.t), NODE)
    assert (m.t_effect, m.effect_evidence) == (1009.5, "act")
    assert m.recovery_s == pytest.approx(1015.2 - 1009.5)  # the whole outage, never 0.0
    assert m.detection_s is not None and m.detection_s > 0


def test_required_evidence_missing_is_inconclusive() -> None:
    m = measure(outage_ledger(), outage_timeline(die=False), NODE)
    assert m.effect_evidence == "call"
    assert any("Docker recorded no 'die' event" in g for g in m.inconclusive)
    spec = {"docker_actions": [], "required": "mechanism", "spans_outage": False}
    m = measure(outage_ledger(), _effect_timeline(spec), NODE)
    assert any("never confirmed its mechanism" in g for g in m.inconclusive)
    spec = {"docker_actions": [], "required": "", "spans_outage": True}
    m = measure(outage_ledger(), _effect_timeline(
        spec, ev(1012.5, "fault", "no_effect", why="flood sent no request")), NODE)
    assert m.inconclusive == ["the fault did not take effect: flood sent no request"]


def test_missing_monitoring_and_harness_gaps_are_inconclusive() -> None:
    timeline = [*outage_timeline(),
                ev(1000.1, "harness", "evidence_gap", reason="Prometheus not ready"),
                ev(1011.0, "observer", "prometheus_down", detail="connection refused")]
    m = measure(outage_ledger(), sorted(timeline, key=lambda e: e.t), NODE)
    assert m.inconclusive[0] == "Prometheus not ready"
    assert "Prometheus was unreachable during the run (connection refused)" in m.inconclusive[1]


def test_requests_sent_late_across_an_edge_of_the_outage_make_the_run_inconclusive() -> None:
    """A starved client sends late: a request whose user arrived before an edge of the
    outage (effect at 1010, revert at 1015, recovery at 1015.2) but that was sent after it
    met the node on the edge's other side, so the run is INCONCLUSIVE (a false PASS
    otherwise); late on one side of every edge it met what its user would have; a send
    just under LATE_CLIENT_S late is the client's ordinary jitter."""
    on_time = [dataclasses.replace(r, t_scheduled=r.t_invoke - 0.49) for r in outage_ledger()]
    assert measure(on_time, outage_timeline(), NODE).inconclusive == []
    across = [dataclasses.replace(r, t_scheduled=r.t_invoke - 1.5)
              if 1015.3 <= r.t_invoke < 1016.3 else r for r in outage_ledger()]
    m = measure(across, outage_timeline(), NODE)
    assert m.sent_late == 10
    assert len(m.inconclusive) == 1
    assert "10 requests were sent 0.5 s or more after their users arrived, across an edge " \
        "of the outage" in m.inconclusive[0]
    assert "1.50 s late" in m.inconclusive[0]
    # late inside the outage, or in the baseline: each met what its user would have met
    for lo, hi in ((1012.5, 1013.5), (1002.5, 1003.5)):
        inside = [dataclasses.replace(r, t_scheduled=r.t_invoke - 1.5)
                  if lo <= r.t_invoke < hi else r for r in outage_ledger()]
        assert measure(inside, outage_timeline(), NODE).inconclusive == [], (lo, hi)


def test_a_node_that_served_through_the_fault_has_no_edge_to_send_late_across() -> None:
    """Nothing lost and recovered at the effect (a request-level fault the node served
    through): the fault's moments are no outage edges, so late sends leave no gap."""
    calm = [req(i, round(1000 + i * 0.1, 3)) for i in range(300)]
    timeline = [e for e in outage_timeline() if e.kind != "health_fail"]
    late = [dataclasses.replace(r, t_scheduled=r.t_invoke - 1.5)
            if 1010.3 <= r.t_invoke < 1011.3 else r for r in calm]
    m = measure(late, timeline, NODE)
    assert m.lost_total == 0 and m.t_recovered is not None and m.t_recovered <= m.t_effect
    assert m.sent_late == 0 and m.inconclusive == []


def test_an_unvouched_timeout_inside_the_outage_met_what_its_user_met() -> None:
    """A timeout the stalled client could not vouch for (``client_stalled``): if its
    user's arrival and the moment the client noticed both lie inside the outage (effect at
    1010 to its first edge, the revert at 1015), the node was held down throughout and the
    user would have met the same — it is lost, and no gap; crossing the revert, or in the
    healthy baseline, it cannot be told from a stall and the run is INCONCLUSIVE."""
    def stalled(arrived: float, sent: float, noticed: float) -> RequestRecord:
        return dataclasses.replace(req(7000, sent, "fail", "client_stalled",
                                       dur=noticed - sent), t_scheduled=arrived)

    inside = measure([*outage_ledger(), stalled(1012.0, 1012.6, 1014.8)], outage_timeline(),
                     NODE)
    assert inside.inconclusive == []
    assert inside.lost_by_class["client_stalled"] == 1
    for arrived, sent, noticed in ((1013.0, 1013.6, 1015.4), (1003.0, 1003.6, 1005.8)):
        m = measure([*outage_ledger(), stalled(arrived, sent, noticed)], outage_timeline(),
                    NODE)
        assert len(m.inconclusive) == 1 and "timed out while it could not act on time" \
            in m.inconclusive[0], (arrived, m.inconclusive)


def test_client_exhaustion_is_inconclusive_not_the_nodes_fault() -> None:
    ledger = [*outage_ledger(), req(7000, 1020.0, "fail", "client_exhausted")]
    m = measure(ledger, outage_timeline(), NODE)
    assert any("load client ran out of resources" in g for g in m.inconclusive)


def test_harness_intervention_is_recorded() -> None:
    timeline = [*outage_timeline(),
                ev(1014.0, "fault", "harness_intervened", action="docker start",
                   why="restart policy left it exited")]
    m = measure(outage_ledger(), sorted(timeline, key=lambda e: e.t), NODE)
    assert m.harness_intervened == ["docker start: restart policy left it exited"]


# --------------------------------------------------------------------------- users


PAUSE_EFFECT = {"docker_actions": ["pause"], "required": "docker", "spans_outage": False}


def _pause_timeline(revert_end: float, ready: float, *more: Event) -> list[Event]:
    """A docker pause at 1010.0, reverted at ``revert_end``, readiness OK at ``ready``."""
    return sorted([
        ev(1000.0, "observer", "health_ok", ok=True),
        ev(1009.9, "fault", "inject_start", fault="pause", effect=PAUSE_EFFECT),
        Event(t=1010.0, source="harness", kind="docker_pause", node=NODE, data={}),
        ev(1010.6, "observer", "health_fail", detail="timeout"),
        ev(revert_end, "fault", "revert_end"),
        ev(ready, "observer", "health_ok", ok=True),
        *more,
    ], key=lambda e: e.t)


def test_users_who_arrived_during_a_hang_are_counted_from_their_arrival() -> None:
    """An 8 s pause at 10 req/s: every arrival in the hang is lost, shed or slow (≈ 80)."""
    ledger: list[RequestRecord] = []
    for i in range(300):
        t = round(1000 + i * 0.1, 3)
        if 1010.0 <= t < 1018.0 and i % 5 == 0:  # sent, answered after the unpause: slow
            r = dataclasses.replace(req(i, t, dur=1018.1 - t), t_first_token=1018.05)
        elif 1010.0 <= t < 1018.0:  # client cap reached: shed at once, at its arrival
            r = RequestRecord(id=f"r{i}", node=NODE, kind="chat", t_invoke=t, t_end=t,
                              t_scheduled=t, status="fail", error_class="shed_client")
        else:
            r = req(i, t)
        ledger.append(r)
    timeline = _pause_timeline(1018.0, 1018.1, ev(1011.4, "observer", "alert_firing",
                                                   alertname="FaultkitNodeDown",
                                                   t_state=1011.2))
    m = measure(ledger, timeline, NODE, ttft_objective_s=2.5)
    assert m.lost_by_class == {"shed_client": 64}
    # of the 16 sent, those that arrived before 1015.55 waited more than 2.5 s: 12
    assert m.slow_total == 12
    assert m.affected_total == 76
    assert m.slis["fault"].user_ttft_p95_s is not None and m.slis["fault"].user_ttft_p95_s > 7


def _backlog_run(*, held_status: str = "ok") -> tuple[list[RequestRecord], list[Event]]:
    """An 8 s pause at 10 req/s whose 80 held users are released at once at 1018.0: the node
    works through them until 1021.0, and users who arrive meanwhile get their first token
    only then; from 1021.0 on it answers in 0.01 s."""
    ledger: list[RequestRecord] = []
    for i in range(400):
        t = round(1000 + i * 0.1, 3)
        if 1010.0 <= t < 1018.0:  # held by the pause, answered (or not) once it ends
            r = dataclasses.replace(req(i, t, held_status, None if held_status == "ok"
                                        else "cancelled", dur=1021.0 - t),
                                    t_first_token=1018.05 if held_status == "ok" else None)
        elif 1018.0 <= t < 1021.0:  # queued behind the backlog
            r = dataclasses.replace(req(i, t, dur=1021.5 - t), t_first_token=1021.0)
        else:
            r = req(i, t)
        ledger.append(r)
    return ledger, _pause_timeline(1017.95, 1017.98)


def test_the_after_window_starts_once_the_node_has_served_the_users_the_fault_held() -> None:
    ledger, timeline = _backlog_run()
    m = measure(ledger, timeline, NODE, ttft_objective_s=2.5)
    assert m.t_recovered == pytest.approx(1017.98)
    after = m.slis["after"]
    # the last held user's answer ended at 1021.0: those queued behind the backlog are the
    # fault's, and the after window is the service the node gives once back
    assert after.start == pytest.approx(1021.0)
    assert after.ttft_p95_s == pytest.approx(0.01)
    assert m.slis["fault"].end == pytest.approx(1021.0)
    # the users who waited behind the backlog more than 2.5 s are slowed by the fault
    assert m.slow_total == 80 + 5  # every held user; arrivals 1018.0-1018.4 waited ≥ 2.6 s


def test_users_the_node_never_answered_do_not_hold_the_after_window_back() -> None:
    ledger, timeline = _backlog_run(held_status="fail")
    m = measure(ledger, timeline, NODE, ttft_objective_s=2.5)
    # the held users were cancelled, not served: the window starts at the recovery (the
    # first answered user's arrival); those queued until 1021.0 are the after window's tail
    assert m.t_recovered == pytest.approx(1018.0)
    assert m.slis["after"].start == pytest.approx(m.t_recovered)
    assert m.slis["after"].ttft_p95_s is not None and m.slis["after"].ttft_p95_s > 1.5


@given(
    act=st.floats(0, 5), die=st.floats(0, 5), sample=st.floats(-3, 20), probe=st.floats(-3, 20),
    ready=st.floats(0, 30), spans=st.booleans(),
)
def test_no_figure_is_ever_negative(act: float, die: float, sample: float, probe: float,
                                    ready: float, spans: bool) -> None:
    spec = {"docker_actions": ["die"], "required": "docker", "spans_outage": spans}
    t0 = 1005.0
    timeline = sorted([
        ev(1000.0, "observer", "health_ok", ok=True),
        ev(t0, "fault", "inject_start", fault="kill", effect=spec),
        ev(t0 + act, "fault", "act", what="x"),
        Event(t=t0 + act + die, source="harness", kind="docker_die", node=NODE, data={}),
        ev(t0 + max(probe, 0), "observer", "health_fail", t_sample=t0 + probe),
        ev(t0 + max(sample, 0) + 0.5, "observer", "up_0", t_sample=t0 + sample),
        ev(t0 + 10, "fault", "revert_end"),
        ev(t0 + max(probe, 0) + ready + 0.01, "observer", "health_ok", ok=True),
    ], key=lambda e: e.t)
    m = measure(outage_ledger(), timeline, NODE, recovery_hold_s=1, t_window_end=1040.0)
    figures = [m.detection_s, m.recovery_s, m.probe_detection_s,
               *m.detection_by_signal_s.values()]
    assert all(f >= 0 for f in figures if f is not None), figures


def test_users_held_by_the_outage_are_slowed_even_within_the_objective() -> None:
    """Arrivals in the last second of an outage wait < 2.5 s, but they waited for it."""
    ledger = outage_ledger()
    held = dataclasses.replace(req(7001, 1014.5, dur=1.0), t_first_token=1015.3)  # TTFT 0.8 s
    m = measure([*ledger, held], outage_timeline(), NODE, ttft_objective_s=2.5)
    assert m.t_recovered == pytest.approx(1015.2)
    assert m.slow_total == 1 and m.affected_total == m.lost_total + 1


def test_a_fault_on_an_upstream_gives_t_effect_and_the_rest_is_the_gateways() -> None:
    """measure(effect_node=…): the kill hit the upstream 'up'; the gateway NODE is judged."""
    upstream_events = [
        dataclasses.replace(e, node="up") for e in outage_timeline(alert=False, up=False)
        if e.source != "observer"
    ]
    gateway_probes = [ev(1000.0, "observer", "health_ok", ok=True)]  # always ready
    ledger = outage_ledger(down_from=1010.0, down_to=1010.3)  # a short burst of failures
    timeline = sorted(upstream_events + gateway_probes, key=lambda e: e.t)
    m = measure(ledger, timeline, NODE, recovery_hold_s=5, effect_node="up")
    assert (m.t_effect, m.effect_evidence) == (1010.0, "docker_event")
    assert m.t_revert == 1015.0
    assert m.lost_total == 4  # 3 refused in the burst + the stream in flight
    assert m.t_recovered == pytest.approx(1010.3)
    assert m.detect_signal is None  # the gateway was never down
    assert any("injected on up" in note for note in m.notes)
    with pytest.raises(MeasurementInputError):  # without effect_node: no fault on NODE
        measure(ledger, timeline, NODE)


def test_a_user_left_unanswered_until_the_harness_cancelled_is_no_recovery() -> None:
    # the node took every request from 1020 on and answered none: at the window's end the
    # harness cancelled them, up to 10 s after they arrived
    ledger = [r for r in outage_ledger() if r.t_invoke < 1020.0]
    for i in range(100):
        t = 1020.0 + i * 0.1
        ledger.append(dataclasses.replace(
            req(2000 + i, t, "unknown", "cancelled"), t_end=1030.0, t_first_token=None,
            t_last_token=None, output_tokens=None))
    m = measure(ledger, outage_timeline(), NODE, recovery_hold_s=5, t_window_end=1030.0)
    assert m.t_recovered is None
    assert any("last request scheduled in the window failed" in n for n in m.notes), m.notes


def test_requests_cancelled_soon_after_they_were_sent_do_not_break_recovery() -> None:
    ledger = outage_ledger()
    ledger += [dataclasses.replace(req(3000 + i, 1029.5 + i * 0.1, "unknown", "cancelled"),
                                   t_end=1029.95, t_first_token=None, t_last_token=None,
                                   output_tokens=None) for i in range(4)]
    m = measure(ledger, outage_timeline(), NODE, recovery_hold_s=5)
    assert m.t_recovered == pytest.approx(1015.2)


def test_streams_a_kill_cut_before_dockers_die_move_t_effect_and_are_lost() -> None:
    """The kill cuts streams at once; Docker's die comes after the reap. t_effect is the
    first failure after the act, so the cut streams are lost and the headline, Key figures
    and Symptoms count the same requests."""
    ledger = outage_ledger()
    cut = [req(2000 + i, 1009.5 + i * 0.01, "fail", "reset", dur=0.47 - i * 0.01)
           for i in range(3)]  # each ends at 1009.97, between the act and the die
    m = measure(ledger + cut, outage_timeline(), NODE, recovery_hold_s=5)
    assert m.t_effect == pytest.approx(1009.97)
    assert m.effect_evidence == "observed"
    assert m.effect_detail.startswith("the first request that failed after the act")
    assert "before Docker 'die' event" in m.effect_detail
    failed = [r for r in ledger + cut if r.status != "ok" and r.t_end >= 1009.95]
    assert m.lost_total == len(failed)


def test_a_failure_before_the_act_does_not_move_t_effect() -> None:
    early = req(3000, 1009.0, "fail", "reset", dur=0.5)  # ended at 1009.5, before the act
    m = measure([*outage_ledger(), early], outage_timeline(), NODE, recovery_hold_s=5)
    assert m.t_effect == 1010.0 and m.effect_evidence == "docker_event"


STALL_EFFECT = {"docker_actions": [], "required": "mechanism", "spans_outage": False}


def _stalled(kind: str = "stall", *, readiness_fails: bool = False
             ) -> tuple[list[RequestRecord], list[Event]]:
    """An engine stopped from 1010 to 1020 while its API answered: every request that arrived
    meanwhile got its first token only after the SIGCONT (1020.1), then all is prompt."""
    ledger = []
    for i in range(300):
        t = round(1000 + i * 0.1, 3)
        r = req(i, t)
        if 1010.0 <= t < 1020.0:
            r = dataclasses.replace(r, t_first_token=1020.1 + i * 0.0001, t_end=1020.3,
                                    t_last_token=1020.3)
        ledger.append(r)
    timeline = [
        ev(1000.0, "observer", "health_ok", ok=True),
        ev(1009.9, "fault", "inject_start", fault=kind, effect=STALL_EFFECT),
        ev(1009.95, "fault", "act", what="SIGSTOP"),
        ev(1010.0, "fault", "effect", evidence="mechanism", detail="stopped"),
        ev(1010.05, "fault", "inject_end"),
        ev(1020.0, "fault", "revert_start"),
        ev(1020.0, "fault", "revert_end"),
    ]
    if readiness_fails:
        timeline += [ev(1011.0, "observer", "health_fail", ok=False, detail="timeout"),
                     ev(1020.2, "observer", "health_ok", ok=True)]
    return ledger, sorted(timeline, key=lambda e: e.t)


def test_a_node_that_held_every_user_while_its_readiness_said_ok_recovers_when_it_answers(
) -> None:
    """A stall behind a readiness endpoint that keeps answering 200: the users were held
    for up to 10 s, so the node did not serve through it — it recovered when it answered
    them again (1020.1), and every one of them is counted as slowed."""
    ledger, timeline = _stalled()
    m = measure(ledger, timeline, NODE, recovery_hold_s=5, t_window_end=1030.0,
                ttft_objective_s=2.5)
    assert m.t_effect == pytest.approx(1010.0)
    assert m.t_recovered == pytest.approx(1020.1, abs=0.02)
    assert m.lost_total == 0 and m.slow_total == 100
    assert any("readiness answered OK throughout" in n for n in m.notes), m.notes


def test_the_held_request_rule_leaves_readiness_outages_and_request_faults_alone() -> None:
    # readiness failed: its own stretch dates the recovery, as for a pause
    ledger, timeline = _stalled(readiness_fails=True)
    m = measure(ledger, timeline, NODE, recovery_hold_s=5, t_window_end=1030.0)
    assert m.t_recovered == pytest.approx(1020.2)
    assert not any("readiness answered OK throughout" in n for n in m.notes)
    # a flood's slow users are the fault's effect: no outage is read into them
    ledger, timeline = _stalled("flood")
    m = measure(ledger, timeline, NODE, recovery_hold_s=5, t_window_end=1030.0)
    assert m.t_recovered is not None and m.t_recovered < 1020.0
