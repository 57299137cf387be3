"""The report's one timeline: routine bursts fold into one row, anchors stay apart, and
what another part of the report says is not repeated."""

from __future__ import annotations

import json
from pathlib import Path

from reports.load import load_run
from reports.tables import log_excerpt
from reports.timeline import Row, fold, rows

T0 = 1_767_268_800.0


def _row(dt: float, source: str, event: str) -> Row:
    return Row(T0 + dt, dt, source, event)


def test_a_burst_of_one_source_is_one_row_with_each_later_offset() -> None:
    folded = fold([_row(0.2, "harness", "docker_kill"), _row(0.5, "harness", "docker_die"),
                   _row(1.1, "harness", "docker_start"), _row(1.3, "harness", "docker_update")])
    assert [(r.rel_s, r.event) for r in folded] == [
        (0.2, "docker_kill · docker_die (+0.5) · docker_start (+1.1)"),
        (1.3, "docker_update"),  # 1.1 s after the burst's first event: a row of its own
    ]


def test_another_source_between_two_events_keeps_them_apart() -> None:
    folded = fold([_row(0.1, "harness", "docker_kill"), _row(0.2, "observer", "health_fail"),
                   _row(0.3, "harness", "docker_die")])
    assert [r.event for r in folded] == ["docker_kill", "health_fail", "docker_die"]


def test_anchors_share_a_row_only_at_the_same_instant() -> None:
    folded = fold([_row(0.0, "fault", "inject_end"), _row(0.01, "fault", "revert_start"),
                   _row(0.5, "fault", "ready")])
    assert [r.event for r in folded] == ["inject_end · revert_start", "ready"]


def test_alerts_and_the_runs_bounds_are_left_to_their_own_tables(tmp_path: Path) -> None:
    events = [
        {"t": T0 - 10, "source": "harness", "kind": "scenario_start", "data": {}},
        {"t": T0, "source": "harness", "kind": "docker_die", "data": {"exit_code": 137}},
        {"t": T0 + 2, "source": "observer", "kind": "alert_firing",
         "data": {"alertname": "NodeDown"}},
        {"t": T0 + 3, "source": "harness", "kind": "docker_start", "data": {}},
        {"t": T0 + 3, "source": "harness", "kind": "restart_seen", "data": {"exit_code": 137}},
        {"t": T0 + 20, "source": "harness", "kind": "scenario_end", "data": {}},
    ]
    (tmp_path / "timeline.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (tmp_path / "run.json").write_text(json.dumps({"scenario": "kill", "node": "n"}))
    assert [r.event for r in rows(load_run(tmp_path))] == ["docker_die exit_code=137",
                                                           "docker_start"]


def test_a_probe_answered_late_says_when_its_answer_came(tmp_path: Path) -> None:
    """A probe sent into a pause is answered only after the unpause: its row, at its send
    time, must not read as the node answering while still frozen."""
    events = [
        {"t": T0, "source": "observer", "kind": "health_fail",
         "data": {"ok": False, "detail": "timeout", "status": None, "latency_s": 1.0}},
        {"t": T0 + 7.5, "source": "observer", "kind": "health_ok",
         "data": {"ok": True, "detail": "ok", "status": 200, "latency_s": 0.851}},
        {"t": T0 + 9.0, "source": "observer", "kind": "health_ok",
         "data": {"ok": True, "detail": "ok", "status": 200, "latency_s": 0.004}},
    ]
    (tmp_path / "timeline.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (tmp_path / "run.json").write_text(json.dumps({"scenario": "pause", "node": "n"}))
    assert [r.event for r in rows(load_run(tmp_path))] == [
        "health_fail detail=timeout status=None (sent here, answered 1.00 s later)",
        "health_ok detail=ok status=200 (sent here, answered 0.85 s later)",
        "health_ok detail=ok status=200",
    ]


def test_a_log_of_routine_lines_says_how_many_were_left_out(tmp_path: Path) -> None:
    log = "\n".join([
        'INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "0.06.617.778 I slot print_timing: id  0 | task 1332 | prompt eval time = 2.55 ms",
        "0.06.617.873 I slot      release: id  0 | task 1332 | stop processing: n_tokens = 168",
        "ERROR engine core died: CUDA out of memory",
    ])
    (tmp_path / "run.json").write_text(json.dumps({"scenario": "kill", "node": "n"}))
    (tmp_path / "container.json").write_text(json.dumps({"log_tail": log}))
    excerpt = log_excerpt(load_run(tmp_path))
    assert excerpt is not None
    assert excerpt.lines == ["ERROR engine core died: CUDA out of memory"]
    assert excerpt.routine == 3
