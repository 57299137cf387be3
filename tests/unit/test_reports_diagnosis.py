"""Rule-based diagnosis and the prevention catalogue, on hand-built run directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reports import CATALOGUE, changes_for, diagnose, load_run
from reports.errors import NotARunDirectory
from reports.recovery import analyse

T0 = 1767268800.0


def _measurement(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "node": "n1",
        "t_inject": T0,
        "t_revert": T0 + 10,
        "t_window_end": T0 + 60,
        "t_detect": T0 + 3,
        "detect_signal": "alert",
        "detection_s": 3.0,
        "t_recovered": T0 + 20,
        "recovery_s": 20.0,
        "lost_total": 0,
        "requests_total": 10,
    }
    base.update(over)
    return base


def make_run(
    tmp_path: Path,
    *,
    fault: str = "kill",
    container: dict[str, Any] | None = None,
    timeline: list[dict[str, Any]] | None = None,
    ledger: list[dict[str, Any]] | None = None,
    measurement: dict[str, Any] | None = None,
) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(
        json.dumps({"scenario": "s", "node": "n1", "fault": {"kind": fault, "params": {}}})
    )
    if container is not None:
        (d / "container.json").write_text(json.dumps(container))
    (d / "timeline.jsonl").write_text("".join(json.dumps(e) + "\n" for e in timeline or []))
    (d / "ledger.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ledger or []))
    (d / "measurement.json").write_text(json.dumps(measurement or _measurement()))
    return d


def _keys(d: Path) -> list[str]:
    return [x.key for x in diagnose(load_run(d))]


def _state(**over: Any) -> dict[str, Any]:
    return {"status": "running", "exit_code": 0, "oom_killed": False, "restart_count": 0, **over}


def test_oomkilled_is_memory_exhaustion_with_matching_changes(tmp_path: Path) -> None:
    d = make_run(
        tmp_path,
        fault="memory_squeeze",
        container={
            "before": _state(),
            "after": _state(status="exited", exit_code=137, oom_killed=True),
        },
    )
    diags = diagnose(load_run(d))
    assert diags[0].key == "memory_exhaustion"
    assert any("oom_killed = true" in e for e in diags[0].evidence)
    changes = changes_for(diags)
    texts = [c.text for _, c in changes if _.key == "memory_exhaustion"]
    assert texts == [c.text for c in CATALOGUE["memory_exhaustion"]]
    assert {c.type for _, c in changes} <= {"mitigate", "prevent", "process"}
    assert any("max-num-batched-tokens" in t for t in texts)


def test_exit_137_without_injected_kill_is_memory_exhaustion(tmp_path: Path) -> None:
    d = make_run(
        tmp_path,
        fault="oversized_context",
        container={"before": _state(), "after": _state(exit_code=137)},
    )
    assert _keys(d)[0] == "memory_exhaustion"


def test_exit_137_from_an_injected_kill_is_not_memory(tmp_path: Path) -> None:
    d = make_run(
        tmp_path,
        fault="kill",
        container={"before": _state(), "after": _state()},
        timeline=[
            {
                "t": T0 + 1,
                "source": "harness",
                "kind": "restart_seen",
                "data": {"exit_code": 137, "oom_killed": False},
            }
        ],
    )
    keys = _keys(d)
    assert "memory_exhaustion" not in keys
    assert "injected_kill" in keys


def test_no_evidence_is_undiagnosed(tmp_path: Path) -> None:
    d = make_run(tmp_path, fault="stop", container={"before": _state(), "after": _state()})
    diags = diagnose(load_run(d))
    assert [x.key for x in diags] == ["undiagnosed"]
    assert diags[0].title == "undiagnosed"
    assert [c.type for _, c in changes_for(diags)] == ["process"]


def test_gpu_oom_from_log(tmp_path: Path) -> None:
    log = "INFO start\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    d = make_run(
        tmp_path,
        fault="oversized_context",
        container={"before": _state(), "after": _state(), "log_tail": log},
    )
    diags = diagnose(load_run(d))
    assert diags[0].key == "gpu_oom"
    assert "CUDA out of memory" in diags[0].evidence[0]


def _rec(i: int, **over: Any) -> dict[str, Any]:
    return {
        "id": f"r{i}",
        "node": "n1",
        "kind": "chat",
        "t_invoke": T0 + i,
        "t_end": T0 + i + 0.01,
        "status": "fail",
        **over,
    }


def test_context_length_400_is_clean_rejection(tmp_path: Path) -> None:
    detail = (
        '{"error":{"message":"This model\'s maximum context length is 2048 tokens","code":400}}'
    )
    d = make_run(
        tmp_path,
        fault="oversized_context",
        ledger=[
            _rec(1, http_status=400, error_class="http_4xx", error_detail=detail),
            _rec(
                2,
                http_status=400,
                error_class="http_4xx",
                error_detail='{"error":{"type":"exceed_context_size_error","n_ctx":512}}',
            ),
            _rec(3, http_status=400, error_class="http_4xx", error_detail="invalid json"),
        ],
    )
    diag = next(x for x in diagnose(load_run(d)) if x.key == "context_rejection")
    assert diag.evidence[0].startswith("2 ledger records")


def test_startup_kv_error_is_config_rejected(tmp_path: Path) -> None:
    log = (
        "ValueError: To serve at least one request with the models's max seq len (32768), "
        "(4.00 GiB KV cache is needed, which is larger than the available KV cache memory"
    )
    d = make_run(
        tmp_path,
        fault="rollout",
        container={"before": _state(), "after": _state(), "log_tail": log},
    )
    assert "config_rejected" in _keys(d)


def _ev(t: float, source: str, kind: str, **data: Any) -> dict[str, Any]:
    return {"t": t, "source": source, "kind": kind, "node": "n1", "data": data}


def test_rollout_without_readiness_is_failed_rollout(tmp_path: Path) -> None:
    tl = [
        _ev(T0, "fault", "inject_end", fault="rollout", params={}),
        _ev(T0 + 60, "harness", "rollback_start"),
        _ev(T0 + 61, "harness", "rollback_done"),
        _ev(T0 + 70, "observer", "health_ok"),
    ]
    d = make_run(tmp_path, fault="rollout", timeline=tl)
    assert "failed_rollout" in _keys(d)
    rec = analyse(load_run(d))
    assert any("rollback" in m for m in rec.mechanisms)
    step = next(s for s in rec.steps if s.what.startswith("rollback"))
    assert step.duration_s == pytest.approx(1.0)


def test_rollout_that_became_ready_is_not_failed(tmp_path: Path) -> None:
    tl = [
        _ev(T0, "fault", "inject_end", fault="rollout", params={}),
        _ev(T0 + 20, "observer", "health_ok"),
        _ev(T0 + 60, "harness", "rollback_start"),
    ]
    assert "failed_rollout" not in _keys(make_run(tmp_path, fault="rollout", timeline=tl))


def test_not_detected_with_loss_is_monitoring_gap(tmp_path: Path) -> None:
    m = _measurement(
        t_detect=None, detect_signal=None, detection_s=None, lost_total=4, t_impact=T0 + 1
    )
    diags = diagnose(load_run(make_run(tmp_path, fault="stop", measurement=m)))
    gap = next(x for x in diags if x.key == "monitoring_gap")
    assert any("t_detect = null" in e for e in gap.evidence)
    assert any("missing alert" in c.text for _, c in changes_for(diags))


def test_not_detected_without_impact_is_no_gap(tmp_path: Path) -> None:
    m = _measurement(t_detect=None, detect_signal=None, detection_s=None, lost_total=0)
    assert _keys(make_run(tmp_path, fault="stop", measurement=m)) == ["undiagnosed"]


def test_restart_loop_from_restart_count(tmp_path: Path) -> None:
    d = make_run(
        tmp_path,
        fault="stop",
        container={"before": _state(restart_count=1), "after": _state(restart_count=4)},
    )
    assert "restart_loop" in _keys(d)
    rec = analyse(load_run(d))
    assert rec.mechanisms[0] == "restart policy (restart_count 1 → 4)"


def test_every_catalogued_change_is_typed() -> None:
    assert "undiagnosed" in CATALOGUE
    for key, changes in CATALOGUE.items():
        assert changes, key
        assert all(c.type in ("mitigate", "prevent", "process") for c in changes), key


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(NotARunDirectory, match="not a run directory"):
        load_run(tmp_path)
    with pytest.raises(NotARunDirectory):
        load_run(tmp_path / "absent")


def test_request_level_fault_without_outage_is_no_incident(tmp_path: Path) -> None:
    m = _measurement(t_detect=None, detect_signal=None, detection_s=None, t_recovered=T0,
                     recovery_s=0.0, lost_total=0)
    d = make_run(tmp_path, fault="bad_input", measurement=m,
                 container={"before": _state(), "after": _state()})
    diags = diagnose(load_run(d))
    assert [x.key for x in diags] == ["served_through"]
    assert diags[0].title == "no incident: the node kept serving through the bad_input fault"
    assert "container.json restart_count 0 → 0" in diags[0].evidence
    assert [c.type for _, c in changes_for(diags)] == ["process"]
    # the same numbers for an outage fault are not "no incident"
    (tmp_path / "other").mkdir()
    assert _keys(make_run(tmp_path / "other", fault="stop", measurement=m)) == ["undiagnosed"]


def test_an_engine_left_down_is_diagnosed_never_restarted(tmp_path: Path) -> None:
    d = make_run(tmp_path, fault="kill_process",
                 container={"before": {"exit_code": 0}, "after": {"exit_code": 0}})
    run = json.loads((d / "run.json").read_text())
    run["fault_result"] = {"never_restarted": "the container exited 0 (exited) and its restart "
                           "policy 'on-failure' did not bring it back"}
    (d / "run.json").write_text(json.dumps(run))
    found = {x.key: x for x in diagnose(load_run(d))}
    assert "never_restarted" in found
    assert any("'on-failure' did not bring it back" in e for e in found["never_restarted"].evidence)


def test_an_exit_137_after_kill_process_is_the_injected_kill(tmp_path: Path) -> None:
    d = make_run(tmp_path, fault="kill_process",
                 container={"before": {"exit_code": 0}, "after": {"exit_code": 137,
                                                                  "restart_count": 1}})
    keys = _keys(d)
    assert "memory_exhaustion" not in keys
