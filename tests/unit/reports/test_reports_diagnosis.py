"""Rule-based diagnosis and preventive changes, on hand-built run directories.

The run directories hold what a run writes: run.json with its window (``t_start``,
``t_end``), Docker's events on the timeline (``docker_kill`` with its signal, ``docker_oom``,
``docker_die`` with its exit code, ``docker_start``, and the ``restart_seen`` that restates a
die), container.json before and after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reports import RULES, Diagnosis, changes_for, diagnose, load_run
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
    params: dict[str, Any] | None = None,
    fault_result: dict[str, Any] | None = None,
    slo: dict[str, Any] | None = None,
) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(
        json.dumps({"scenario": "s", "node": "n1", "t_start": T0 - 30, "t_end": T0 + 60,
                    "fault": {"kind": fault, "params": params or {}},
                    "fault_result": fault_result or {}, "slo": slo or {}})
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


def _ev(t: float, source: str, kind: str, **data: Any) -> dict[str, Any]:
    return {"t": t, "source": source, "kind": kind, "node": "n1", "data": data}


def test_not_detected_with_loss_is_monitoring_gap(tmp_path: Path) -> None:
    m = _measurement(
        t_detect=None, detect_signal=None, detection_s=None, lost_total=4, t_impact=T0 + 1
    )
    d = make_run(tmp_path, fault="stop", measurement=m)
    diags = diagnose(load_run(d))
    gap = next(x for x in diags if x.key == "monitoring_gap")
    assert any("t_detect = null" in e for e in gap.evidence)
    assert any("missing alert" in c.text for _, c in changes_for(diags, load_run(d)))


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(NotARunDirectory, match="not a run directory"):
        load_run(tmp_path)
    with pytest.raises(NotARunDirectory):
        load_run(tmp_path / "absent")


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


# ---- evidence from this run, about this container ----------------------------------------


def _died(t: float, code: int, **more: Any) -> list[dict[str, Any]]:
    """A die as Docker reports it, and the restart_seen the harness derives from it."""
    return [_ev(t, "harness", "docker_die", action="die", exit_code=code, **more),
            _ev(t + 1, "harness", "docker_start", action="start"),
            _ev(t + 1, "harness", "restart_seen", exit_code=code, oom_killed=False)]


def _kill_events(t: float) -> list[dict[str, Any]]:
    return [_ev(t - 0.05, "fault", "inject_start", fault="kill", params={}),
            _ev(t - 0.01, "fault", "act", what="SIGKILL to host pid 4242"),
            _ev(t + 0.02, "fault", "inject_end", fault="kill", params={})]


def test_a_stale_oomkilled_flag_from_an_earlier_run_is_not_this_runs_cause(
    tmp_path: Path,
) -> None:
    """memory_squeeze then pause on one container: Docker still says OOMKilled, but the
    container's last stop predates this run and no oom/die event is in it."""
    earlier = {"oom_killed": True, "exit_code": 0, "finished_at": T0 - 600,
               "started_at": T0 - 590, "id": "abc"}
    tl = [_ev(T0 - 0.1, "fault", "inject_start", fault="pause", params={}),
          _ev(T0, "harness", "docker_pause", action="pause"),
          _ev(T0 + 10, "fault", "revert_start", fault="pause", params={}),
          _ev(T0 + 10.1, "harness", "docker_unpause", action="unpause"),
          _ev(T0 + 10.2, "fault", "revert_end", fault="pause", params={})]
    d = make_run(tmp_path, fault="pause", timeline=tl,
                 container={"before": _state(**earlier), "after": _state(**earlier)},
                 measurement=_measurement(lost_total=3, effect_evidence="docker_event"))
    diags = diagnose(load_run(d))
    assert diags[0].key == "injected_pause"
    assert diags[0].title.startswith("the engine was frozen by the injected pause")
    assert not any(x.key == "memory_exhaustion" for x in diags)
    assert any("predates this run" in e for e in diags[0].evidence)
    assert not any("memory" in c.text.lower() for _, c in changes_for(diags, load_run(d)))
    rec = analyse(load_run(d))
    assert rec.mechanisms[0] == "the harness's revert of the fault (unpause)"


def test_an_oom_kill_in_this_run_is_memory_exhaustion_with_the_runs_limit(
    tmp_path: Path,
) -> None:
    tl = [_ev(T0 - 1, "fault", "inject_start", fault="memory_squeeze", params={"limit": "256m"}),
          _ev(T0 - 0.5, "harness", "docker_update", action="update"),
          _ev(T0 - 0.01, "harness", "docker_oom", action="oom"),
          *_died(T0, 137, oom_killed=True)]
    d = make_run(tmp_path, fault="memory_squeeze", timeline=tl, params={"limit": "256m"},
                 container={"before": _state(id="abc", restart_count=0),
                            "after": _state(id="abc", restart_count=1)})
    diags = diagnose(load_run(d))
    assert diags[0].key == "memory_exhaustion"
    assert diags[0].title == ("the engine was OOM-killed under the injected fault "
                              "(a memory squeeze to 256m)")
    assert len([e for e in diags[0].evidence if e.startswith("docker_die")]) == 1
    changes = [c.text for _, c in changes_for(diags, load_run(d))]
    assert any("256m" in text for text in changes)
    rec = analyse(load_run(d))
    assert rec.mechanisms[0].startswith("Docker's restart policy (the same container's "
                                        "restart_count 0 → 1)")


def test_an_injected_kill_is_the_fault_and_one_death_is_counted_once(tmp_path: Path) -> None:
    tl = [*_kill_events(T0), *_died(T0, 137)]
    d = make_run(tmp_path, fault="kill", timeline=tl,
                 container={"before": _state(id="abc"), "after": _state(id="abc",
                                                                        restart_count=1)})
    diags = diagnose(load_run(d))
    assert diags[0].key == "injected_kill"
    assert [e for e in diags[0].evidence if e.startswith("docker_die")] == [
        "docker_die at +0.0 s (exit 137): the injected kill (0.0 s after its act)"]
    assert "restart_loop" not in [x.key for x in diags]


def _stopped_then_started(kind: str, *, signals: dict[float, str], died: tuple[float, int],
                          reverted: float, started: float) -> list[dict[str, Any]]:
    """A fault that stops the container through Docker (its signals, the die), then a
    revert during which Docker reports the container started."""
    t_die, code = died
    return [_ev(T0 - 0.1, "fault", "inject_start", fault=kind, params={}),
            _ev(T0, "fault", "act", what=kind),
            *(_ev(t, "harness", "docker_kill", action="kill", signal=sig)
              for t, sig in signals.items()),
            _ev(t_die, "harness", "docker_die", action="die", exit_code=code),
            _ev(t_die + 0.1, "fault", "inject_end", fault=kind, params={}),
            _ev(reverted, "fault", "revert_start", fault=kind, params={}),
            _ev(started, "harness", "docker_start", action="start"),
            _ev(T0 + 20, "fault", "revert_end", fault=kind, params={})]


def test_a_harness_stop_timeout_is_not_the_engines_failure(tmp_path: Path) -> None:
    """cold start: docker stop sends SIGTERM, the engine ignores it, Docker SIGKILLs it 10 s
    later: the exit 137 is the stop's, and that the engine ignored SIGTERM is a finding."""
    tl = _stopped_then_started("stop", signals={T0: "15", T0 + 10: "9"}, died=(T0 + 10.1, 137),
                               reverted=T0 + 13, started=T0 + 13.1)
    d = make_run(tmp_path, fault="stop", timeline=tl,
                 container={"before": _state(id="abc"), "after": _state(id="abc")})
    diags = diagnose(load_run(d))
    assert diags[0].key == "injected_stop"
    assert "memory_exhaustion" not in [x.key for x in diags]
    assert "stop_timeout" in [x.key for x in diags]
    rec = analyse(load_run(d))
    assert "restart policy" not in " ".join(rec.mechanisms)
    assert rec.mechanisms[0] == "the harness's revert of the fault (start the container)"


def test_a_rollbacks_docker_kill_is_the_harness_and_the_candidates_exit_is_its_defect(
    tmp_path: Path,
) -> None:
    """rollout of a config vLLM rejects at start-up (exit 1), then the rollback."""
    log = ("INFO api_server.py: vLLM API server version 0.32\n"
           "ValueError: User-specified max_model_len (100000) is greater than the derived "
           "max_model_len (max_position_embeddings=2048)\n")
    tl = [_ev(T0 - 0.5, "fault", "inject_start", fault="rollout", params={"config": "bad"}),
          _ev(T0 - 0.4, "harness", "docker_kill", action="kill", signal="9"),
          _ev(T0 - 0.3, "harness", "docker_die", action="die", exit_code=137),
          _ev(T0 - 0.2, "harness", "docker_start", action="start"),
          _ev(T0 + 8, "harness", "docker_die", action="die", exit_code=1),
          _ev(T0 + 9, "fault", "config_failed", reason="the container exited 1"),
          _ev(T0 + 9.1, "fault", "rollback_start", config="bad"),
          _ev(T0 + 9.2, "harness", "docker_start", action="start"),
          _ev(T0 + 30, "fault", "rollback_done", config="bad"),
          _ev(T0 + 30.1, "fault", "inject_end", fault="rollout", params={"config": "bad"})]
    d = make_run(tmp_path, fault="rollout", timeline=tl, params={"config": "bad"},
                 fault_result={"failed_reason": "the container exited 1", "rolled_back": True,
                               "candidate_log_tail": log},
                 container={"before": _state(id="old", oom_killed=True, finished_at=T0 - 900),
                            "after": _state(id="new")})
    diags = diagnose(load_run(d))
    assert diags[0].key == "config_rejected"
    assert "the candidate config bad never became ready" in diags[0].title
    assert "max_model_len (100000)" in diags[0].underlying
    assert not any(x.key == "memory_exhaustion" for x in diags)
    changes = [c.text for _, c in changes_for(diags, load_run(d))]
    assert any("max_model_len (100000)" in text for text in changes)
    rec = analyse(load_run(d))
    assert "rollback to the previous config" in rec.mechanisms
    assert not any("restart policy" in m for m in rec.mechanisms)


def test_an_engine_that_exits_by_itself_is_quoted(tmp_path: Path) -> None:
    tl = [_ev(T0 - 5, "fault", "inject_start", fault="flood", params={"rate": 50}),
          *_died(T0, 3)]
    log = "INFO ok\nRuntimeError: Engine core initialization failed\n"
    d = make_run(tmp_path, fault="flood", timeline=tl, params={"rate": 50},
                 container={"before": _state(id="a"), "after": _state(id="a", restart_count=1),
                            "log_tail": log},
                 measurement=_measurement(lost_total=5))
    diags = diagnose(load_run(d))
    assert diags[0].key == "engine_exit"
    assert diags[0].title == ("the engine exited by itself (exit 3) during the injected fault (a "
                              "request flood at 50 req/s)")
    assert diags[0].underlying == "RuntimeError: Engine core initialization failed"


def test_no_incident_when_a_request_level_fault_was_served(tmp_path: Path) -> None:
    m = _measurement(t_detect=None, detect_signal=None, detection_s=None, t_recovered=T0,
                     recovery_s=0.0, lost_total=0)
    d = make_run(tmp_path, fault="bad_input", measurement=m,
                 container={"before": _state(), "after": _state()})
    diags = diagnose(load_run(d))
    assert [x.key for x in diags] == ["served_through"]
    assert diags[0].title == "no incident: the node kept serving through malformed requests"
    assert changes_for(diags, load_run(d)) == []


def test_undiagnosed_says_what_was_missing(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"scenario": "s", "node": "n1"}))
    diags = diagnose(load_run(d))
    assert diags[0].key == "undiagnosed"
    assert "no fault recorded in run.json" in diags[0].evidence
    assert any("Docker event" in e for e in diags[0].evidence)


def test_every_fault_kind_has_a_cause_the_diagnosis_names(tmp_path: Path) -> None:
    """One home per fact: each kind's cause is its FaultSpec's, found by the rules from the
    run's own evidence (the fault took effect, users dropped)."""
    from faultkit.model.kinds import FAULTS

    for kind, spec in FAULTS.items():
        if spec.request_level or kind == "rollout":
            continue
        run = tmp_path / kind
        run.mkdir()
        tl = [_ev(T0 - 0.1, "fault", "inject_start", fault=kind, params={}),
              _ev(T0, "fault", "act", what=kind)]
        d = make_run(run, fault=kind, timeline=tl,
                     container={"before": _state(id="a"), "after": _state(id="a")},
                     measurement=_measurement(lost_total=2, effect_evidence="mechanism"))
        first = diagnose(load_run(d))[0]
        assert (first.key, first.title) == (f"injected_{kind}", spec.cause), kind


def test_every_change_is_typed_and_cites_the_run(tmp_path: Path) -> None:
    """Each rule's changes carry an action-item type and a value of the run they came from
    (here: the run's lost count)."""
    m = _measurement(lost_total=7, requests_total=70, t_detect=None, detection_s=None,
                     detect_signal=None, t_impact=T0 + 1)
    d = make_run(tmp_path, fault="memory_squeeze", measurement=m, params={"limit": "256m"})
    data = load_run(d)
    for key, rule in RULES.items():
        diag = Diagnosis(key, key, ("run.json fault_result.never_restarted: exit 0",))
        changes = rule(diag, data)
        assert changes, key
        assert all(c.type in ("prevent", "detect", "mitigate", "process") for c in changes), key
    cited = [c.text for _, c in changes_for([Diagnosis("memory_exhaustion", "m", ()),
                                             Diagnosis("monitoring_gap", "g", ())], data)]
    assert any("256m" in t for t in cited) and any("7 of 70 requests" in t for t in cited)


def test_vllms_exit_3_seconds_after_the_kernel_killed_its_engine_core_is_an_oom(
    tmp_path: Path,
) -> None:
    """The kernel kills VLLM::Worker (Docker's oom), the API server exits 3 s later."""
    tl = [_ev(T0 - 11, "fault", "inject_start", fault="memory_squeeze", params={}),
          _ev(T0 - 10, "fault", "act", what="lower the memory limit"),
          _ev(T0 - 0.3, "harness", "docker_update", action="update"),
          _ev(T0, "harness", "docker_oom", action="oom"),
          _ev(T0 + 3.3, "harness", "docker_die", action="die", exit_code=3, oom_killed=False),
          _ev(T0 + 4, "harness", "docker_start", action="start")]
    d = make_run(tmp_path, fault="memory_squeeze", timeline=tl,
                 container={"before": _state(id="a", restart_count=2),
                            "after": _state(id="a", restart_count=3)})
    diags = diagnose(load_run(d))
    assert diags[0].key == "memory_exhaustion"
    assert "the kernel killed a process of the container 3.3 s before it exited" in \
        diags[0].evidence[0]


def test_a_host_restart_brings_its_nodes_back_itself_and_a_reset_count_is_no_policy(
    tmp_path: Path,
) -> None:
    tl = _stopped_then_started("host_restart", signals={T0 + 0.5: "15"}, died=(T0 + 0.6, 0),
                               reverted=T0 + 2.1, started=T0 + 9)
    d = make_run(tmp_path, fault="host_restart", timeline=tl,
                 container={"before": _state(id="a", restart_count=1),
                            "after": _state(id="a", restart_count=0)})
    assert diagnose(load_run(d))[0].key == "injected_host_restart"
    mechanisms = analyse(load_run(d)).mechanisms
    assert mechanisms[0].startswith("the fault's own action (a restart of its whole Docker "
                                    "host) started the container")
    assert not any("restart policy" in m for m in mechanisms)


def test_a_fault_that_could_not_be_applied_is_the_cause_and_nothing_else(
    tmp_path: Path,
) -> None:
    why = "Cannot pause container x: OCI runtime pause failed: unable to freeze: unknown"
    tl = [_ev(T0 - 1, "fault", "inject_start", fault="pause", params={}),
          _ev(T0, "fault", "not_applied", error=why, attempts=5, applied="none")]
    d = make_run(tmp_path, fault="pause", timeline=tl,
                 container={"before": _state(id="a"), "after": _state(id="a")})
    diags = diagnose(load_run(d))
    assert diags[0].key == "fault_not_applied"
    assert diags[0].title == f"the fault could not be applied (a docker pause): {why}"
    # the undo that followed is not what brought the node back: nothing was done to it
    tl += [_ev(T0 + 0.1, "fault", "revert_start"), _ev(T0 + 0.2, "fault", "revert_end")]
    (tmp_path / "reverted").mkdir()
    d = make_run(tmp_path / "reverted", fault="pause", timeline=tl,
                 container={"before": _state(id="a"), "after": _state(id="a")})
    assert analyse(load_run(d)).mechanisms == (
        "nothing: the fault was never applied, so the node was not impaired by it",)


def test_a_candidate_rolled_back_before_another_fault_is_the_cause(tmp_path: Path) -> None:
    """test_gateway_rollout: the bad candidate is detected and rolled back before the load,
    then an upstream is killed on the restored config."""
    result = {"config": "gateway-bad-upstream", "rolled_back": True, "ready": False,
              "failed_reason": "the gateway cannot reach upstream sim-sglang"}
    tl = [_ev(T0 - 30, "harness", "gateway_rollout", **result),
          *_kill_events(T0)]
    d = make_run(tmp_path, fault="kill", timeline=tl,
                 container={"before": _state(id="a"), "after": _state(id="a")},
                 measurement=_measurement(lost_total=2, effect_evidence="docker_event"))
    keys = [x.key for x in diagnose(load_run(d))]
    assert keys[:2] == ["failed_rollout", "injected_kill"]
    from reports.summary import summary
    assert "the candidate config gateway-bad-upstream was detected (the gateway cannot reach " \
        "upstream sim-sglang) and rolled back" in summary(load_run(d))


def test_a_gateway_headline_says_the_upstreams_outage_and_the_route_around() -> None:
    from reports.summary import _upstream_clause

    route = {"upstream": "sim-vllm", "outage_s": 11.46, "route_around_s": 0.0, "retries": 4,
             "routed_while_down": True, "back_in_rotation_s": 21.9}
    assert _upstream_clause(route) == (
        "sim-vllm itself was out for 11.5 s, and the gateway routed around it after 0.0 s "
        "(4 requests retried on another upstream); it served users again 21.9 s after the "
        "fault took effect")
    hung = {"upstream": "sim-vllm", "outage_s": 8.2, "route_around_s": None,
            "routed_while_down": False}
    assert _upstream_clause(hung) == ("sim-vllm itself was out for 8.2 s, and the gateway kept "
                                      "sending it users while it was down")
    assert _upstream_clause({}) is None


def test_a_recovery_at_once_with_streams_cut_is_not_down_for_zero_seconds(
    tmp_path: Path,
) -> None:
    """Every arrival after the effect succeeded, one stream in flight was cut: the headline
    says so instead of "down for 0.0 s"."""
    from reports.summary import summary

    m = _measurement(t_recovered=T0, recovery_s=0.0, lost_total=1, requests_total=94,
                     lost_by_class={"stream_error": 1}, t_detect=None, detection_s=None,
                     detect_signal=None)
    d = make_run(tmp_path, fault="kill", timeline=_kill_events(T0), measurement=m)
    assert summary(load_run(d)).startswith(
        "Not judged: n1 answered every request that arrived after a SIGKILL of its main "
        "process, but requests in flight at that moment were cut; monitoring did not detect "
        "it; 1 of 94 requests was lost (1 stream error)")


@pytest.mark.parametrize("stalled_alert", [False, True], ids=["unseen", "alerted"])
def test_an_engine_stall_names_the_stall_and_a_probe_that_generates(
    tmp_path: Path, stalled_alert: bool
) -> None:
    """The engine alone stopped (its API answering): the cause is the injected stall, and
    the changes are the stall alert (unless it is what saw it), a liveness check that
    generates a token, and a client timeout — each with this run's figures."""
    detected = ({"detect_detail": "alert FaultkitEngineStalled firing", "detection_s": 16.0}
                if stalled_alert else
                {"t_detect": None, "detect_signal": None, "detection_s": None})
    m = _measurement(effect_evidence="mechanism", lost_total=2, requests_total=300,
                     slow_total=40, recovery_s=21.0, **detected)
    d = make_run(tmp_path, fault="stall", params={"match": "VLLM::EngineCore"},
                 fault_result={"whole": False, "stopped": [{"pid": 7, "cmdline": "VLLM"}]},
                 measurement=m, container={"before": _state(), "after": _state()})
    diags = diagnose(load_run(d))
    assert diags[0].key == "injected_stall"
    changes = [c.text for _, c in changes_for(diags, load_run(d))]
    alert = [c for c in changes if "FaultkitEngineStalled" in c]
    assert bool(alert) is not stalled_alert
    if alert:
        assert "the readiness endpoint answered OK throughout" in alert[0]
    assert any("generate a token" in c and "lost 2 of 300 requests and answered 40 more "
               "too slowly" in c for c in changes), changes


@pytest.mark.parametrize(("slow", "cause"), [(1, "served_through"), (12, "slow_service")])
def test_slow_users_are_a_cause_only_beyond_what_the_ttft_objective_allows(
    tmp_path: Path, slow: int, cause: str
) -> None:
    """Prompts at the context limit, 115 requests, the TTFT objective letting 5 % be slow:
    one slow user is within it (no incident, no cause), twelve are beyond it."""
    m = _measurement(t_detect=None, detect_signal=None, detection_s=None, lost_total=0,
                     requests_total=115, slow_total=slow, effect_evidence="act")
    d = make_run(tmp_path, fault="context_limits", measurement=m,
                 slo={"ttft_s": 2.5, "ttft_target": 0.95},
                 container={"before": _state(), "after": _state()})
    assert _keys(d)[0] == cause


@pytest.mark.parametrize(("slow", "cause"), [(2, "served_through"), (20, "slow_service")])
def test_a_readiness_probe_that_timed_out_while_users_were_served_is_no_incident(
    tmp_path: Path, slow: int, cause: str
) -> None:
    """Malformed requests kept a CPU vLLM so busy that one /health probe timed out (the run
    reads recovery 4.1 s), yet no user was lost, monitoring saw nothing, and 2 of 175 were
    slow — within the 5 % the objective allows: the node served through it. Beyond the
    allowance, the slowness is the finding."""
    m = _measurement(t_detect=None, detect_signal=None, detection_s=None, lost_total=0,
                     requests_total=175, slow_total=slow, effect_evidence="act",
                     t_recovered=T0 + 4.1, recovery_s=4.1)
    d = make_run(tmp_path, fault="bad_input", measurement=m,
                 slo={"ttft_s": 2.5, "ttft_target": 0.95},
                 container={"before": _state(), "after": _state()})
    diags = diagnose(load_run(d))
    assert diags[0].key == cause
    if cause == "served_through":
        assert any("only the harness's readiness probe failed, for 4.1 s" in e
                   for e in diags[0].evidence)
