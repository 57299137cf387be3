"""slo.measure on hand-built ledgers and timelines whose truth is known by construction."""

from __future__ import annotations

import pytest

from faultkit.records import Event, RequestRecord
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


def outage_timeline(*, alert: bool = True, up: bool = True) -> list[Event]:
    events = [
        ev(1000.0, "observer", "health_ok", ok=True),
        ev(1010.0, "fault", "inject_start"),
        ev(1010.05, "fault", "inject_end"),
        ev(1010.3, "observer", "health_fail", ok=False, detail="refused"),
        ev(1015.0, "fault", "revert_start"),
        ev(1015.0, "fault", "revert_end"),
        ev(1015.2, "observer", "health_ok", ok=True),
    ]
    if up:
        events += [ev(1011.2, "observer", "up_0", value=0.0, t_sample=1010.8),
                   ev(1016.1, "observer", "up_1", value=1.0, t_sample=1015.8)]
    if alert:
        events += [ev(1011.9, "observer", "alert_firing", alertname="FaultkitNodeDown",
                      t_state=1011.5)]
    return sorted(events, key=lambda e: e.t)


def test_outage_detection_recovery_and_loss_match_construction() -> None:
    m = measure(outage_ledger(), outage_timeline(), NODE, recovery_hold_s=5)
    assert m.t_inject == 1010.05
    assert m.detect_signal == "alert"
    assert m.detection_s == pytest.approx(1.45)
    assert m.detection_by_signal_s == pytest.approx({"alert": 1.45, "up": 0.75, "probe": 0.25})
    assert m.t_recovered == pytest.approx(1015.2)  # readiness OK again (requests ok from 1015.0)
    assert m.recovery_s == pytest.approx(5.15)
    assert m.recovery_after_revert_s == pytest.approx(0.2)
    assert m.lost_total == 51
    assert m.lost_by_class == {"refused": 50, "reset": 1}
    assert m.in_flight_at_inject == 1
    assert m.clean_rejections == 0
    assert m.t_impact == pytest.approx(1010.001)
    assert m.slis["baseline"].failed == 1  # the request in flight at inject, invoked before it
    assert m.slis["fault"].failed == 50
    assert m.slis["after"].requests == 148  # 1015.2 … 1029.9
    assert m.notes == []


def test_signal_priority_alert_then_up_then_probe() -> None:
    m = measure(outage_ledger(), outage_timeline(alert=False), NODE)
    assert (m.detect_signal, m.detection_s) == ("up", pytest.approx(0.75))
    m = measure(outage_ledger(), outage_timeline(alert=False, up=False), NODE)
    assert (m.detect_signal, m.detection_s) == ("probe", pytest.approx(0.25))


def test_not_detected_is_a_finding_with_a_note() -> None:
    timeline = [e for e in outage_timeline(alert=False, up=False) if e.kind != "health_fail"]
    m = measure(outage_ledger(), timeline, NODE)
    assert m.t_detect is None
    assert m.detection_s is None
    assert not m.detected
    assert any("not detected" in n for n in m.notes)


def test_signals_before_the_fault_do_not_count() -> None:
    timeline = [*outage_timeline(alert=False, up=False),
                ev(1005.0, "observer", "alert_firing", alertname="Old", t_state=1005.0)]
    m = measure(outage_ledger(), timeline, NODE)
    assert m.detect_signal == "probe"


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
    ledger[200] = req(200, 1020.0, "fail", "http_5xx")  # a 503 after the node came back
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
    with pytest.raises(MeasurementInputError, match="inject_end"):
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
