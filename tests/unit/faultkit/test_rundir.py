"""faultkit.rundir's typed readers: run.json as RunInfo, container.json as
ContainerEvidence; tolerant of missing and partial files, and of run directories written
in the current format (tests/fixtures/runs)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from faultkit.rundir import (
    ContainerEvidence,
    ContainerSnapshot,
    FaultInfo,
    GateDir,
    GateResult,
    RunDir,
    RunInfo,
    UnreadableRunFile,
)
from slo.types import read_measurement, read_verdict
from tests.paths import FIXTURES

FIXTURES = FIXTURES / "runs"


def run_dir(tmp_path: Path, name: str = "pass-kill") -> RunDir:
    dst = tmp_path / name
    shutil.copytree(FIXTURES / name, dst)
    return RunDir(dst)


def test_container_evidence_of_a_fixture_run() -> None:
    evidence = RunDir(FIXTURES / "pass-kill").container_evidence()
    assert evidence.captured
    assert evidence.before.restart_count == 0 and evidence.after.restart_count == 1
    assert evidence.before.oom_killed is False and evidence.after.exit_code == 0
    assert evidence.after.status == "running" and evidence.after.image == "faultkit/simnode:latest"
    # older runs hold RFC 3339 stamps: kept as written
    assert evidence.before.started_at == "2026-01-01T11:52:10.114Z"
    assert evidence.log_tail is not None and "Started server process" in evidence.log_tail
    assert evidence.before.invalid == () and evidence.after.invalid == ()


def test_absent_container_json_is_not_captured(tmp_path: Path) -> None:
    evidence = RunDir(tmp_path).container_evidence()
    assert evidence == ContainerEvidence()
    assert not evidence.captured and not evidence.before.captured and evidence.log_tail is None
    assert evidence.after.get("status", "not captured") == "not captured"


def test_container_json_without_after(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.write_json(run.container_json, {"before": {"restart_count": 2, "started_at": 10}})
    evidence = run.container_evidence()
    assert evidence.captured
    assert evidence.before.captured and evidence.before.restart_count == 2
    assert evidence.before.started_at == 10.0
    assert not evidence.after.captured and evidence.after.restart_count is None
    assert evidence.log_tail is None


def test_null_sides_and_inspect_errors(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.write_json(
        run.container_json,
        {"before": None, "after": {"error": "no such container"}, "log_tail": ""},
    )
    evidence = run.container_evidence()
    assert evidence.captured and evidence.log_tail == ""
    assert not evidence.before.captured and evidence.before.error is None
    assert evidence.after.captured and evidence.after.error == "no such container"


def test_wrongly_typed_fields_read_as_none_and_are_named() -> None:
    snap = ContainerSnapshot.from_json(
        {"restart_count": "3", "oom_killed": 1, "exit_code": 137.0, "started_at": True,
         "status": 5, "image": None}
    )
    assert snap.captured and snap.exit_code == 137
    assert (snap.restart_count, snap.oom_killed, snap.started_at, snap.status) == (
        None, None, None, None)
    assert snap.invalid == ("status", "oom_killed", "restart_count", "started_at")
    assert snap.get("restart_count") == "3"  # as written, for verbatim reports
    assert ContainerSnapshot.from_json(["not", "an", "object"]) == ContainerSnapshot()
    assert ContainerEvidence.from_json({"log_tail": 7}).log_tail is None


@pytest.mark.parametrize(("text", "why"), [
    ('{"before": {', "container.json: unreadable"),
    ("[1, 2]", "container.json: expected a JSON object, got list"),
])
def test_unreadable_container_json_raises(tmp_path: Path, text: str, why: str) -> None:
    run = RunDir(tmp_path)
    run.container_json.write_text(text, encoding="utf-8")
    with pytest.raises(UnreadableRunFile, match=re.escape(why)):
        run.container_evidence()


def test_a_fixture_copy_reads_the_same(tmp_path: Path) -> None:
    """Reading does not depend on where the run directory lives."""
    assert run_dir(tmp_path).container_evidence() == RunDir(
        FIXTURES / "pass-kill").container_evidence()


def test_run_info_of_a_fixture_run() -> None:
    info = RunDir(FIXTURES / "pass-kill").info()
    assert info.captured
    assert (info.scenario, info.node, info.engine) == ("kill", "sim-vllm-a", "vllm")
    assert info.serving_config == "default" and info.harness_version == "0.1.0"
    assert info.node_config_hash == "sha256:3f9c2a71d0be"
    assert info.prometheus_url == "http://127.0.0.1:9090" and info.scrape_interval_s == 1.0
    assert (info.t_start, info.t_end) == (1767268780.0, 1767268840.0)
    assert info.fault == FaultInfo(
        kind="kill",
        params={"signal": "SIGKILL"},
        describe="SIGKILL the engine (host pid of the container's main process)",
    )
    assert info.slo["ttft_s"] == 2.5 and info.load_profile["stream"] is True
    assert info.aborted is None and info.fault_result == {}
    assert info.get("slo") == info.slo  # as written


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_every_fixture_run_reads(name: str) -> None:
    run = RunDir(FIXTURES / name)
    assert run.info().captured and run.info().get("scenario") == run.info().scenario
    assert run.container_evidence().captured


def test_absent_run_json_is_empty(tmp_path: Path) -> None:
    info = RunDir(tmp_path).info()
    assert info == RunInfo() and not info.captured
    assert info.fault is None and info.slo == {} and info.t_start is None


def test_run_json_missing_optional_keys(tmp_path: Path) -> None:
    """The first version of run.json (no fault, fault_result, t_end yet), an aborted run."""
    run = RunDir(tmp_path)
    run.write_json(run.run_json, {"scenario": "kill", "node": "n", "t_start": 100,
                                  "serving_config": None, "aborted": "not in steady state"})
    info = run.info()
    assert (info.scenario, info.node, info.t_start, info.t_end) == ("kill", "n", 100.0, None)
    assert info.serving_config is None and info.engine is None and info.fault is None
    assert info.aborted == "not in steady state" and info.slo_window_requests is None
    assert info.load_profile == {} and info.fault_result == {}
    written = json.loads(run.run_json.read_text())
    run.write_info(info)  # a rewrite of what was read changes nothing
    assert json.loads(run.run_json.read_text()) == written


def test_run_info_updates_are_written_as_given_and_keep_unknown_keys(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.write_json(run.run_json, {"scenario": "kill", "node": "n", "custom": [1, 2]})
    info = run.info().updated(fault=FaultInfo(kind="pause", params={"x": 1}, describe="p"),
                              fault_result={}, serving_config=None, t_end=12.5)
    run.write_info(info)
    data = json.loads(run.run_json.read_text())
    assert data == {"scenario": "kill", "node": "n", "custom": [1, 2], "fault_result": {},
                    "serving_config": None, "t_end": 12.5,
                    "fault": {"kind": "pause", "params": {"x": 1}, "describe": "p"}}
    again = run.info()
    assert again.fault == FaultInfo(kind="pause", params={"x": 1}, describe="p")
    assert again.t_end == 12.5 and again.get("custom") == [1, 2]
    with pytest.raises(TypeError, match="no key bogus"):
        info.updated(bogus=1)


def test_container_evidence_written_and_read_back(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    before = {"status": "running", "restart_count": 0, "started_at": 10.0}
    started = "2026-01-01T12:00:01.201000000Z INFO Starting vLLM API server on http://0.0.0.0:8000"
    run.write_container_evidence(ContainerEvidence.of(before=before, after=None, log_tail="x",
                                                      startup_log=started))
    assert json.loads(run.container_json.read_text()) == {
        "before": before, "after": None, "log_tail": "x", "startup_log": started}
    evidence = run.container_evidence()
    assert evidence.before.restart_count == 0 and evidence.before.status == "running"
    assert not evidence.after.captured and evidence.log_tail == "x" and evidence.captured
    assert evidence.startup_log == started


def test_run_json_wrong_types_read_as_none(tmp_path: Path) -> None:
    info = RunInfo.from_json({
        "node": 3, "t_start": True, "slo": [1], "fault": "kill", "slo_window_requests": 1000,
        "scrape_interval_s": "1s", "fault_result": {"killed_pid": 42},
    })
    assert (info.node, info.t_start, info.slo, info.fault) == (None, None, {}, None)
    assert info.scrape_interval_s is None and info.fault_result == {"killed_pid": 42}
    assert info.slo_window_requests == 1000 and isinstance(info.slo_window_requests, int)
    assert FaultInfo.from_json({"kind": 1, "params": None}) == FaultInfo()
    assert RunInfo.from_json([]) == RunInfo()


def test_unreadable_run_json_raises(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.run_json.write_text("{", encoding="utf-8")
    with pytest.raises(UnreadableRunFile, match=r"run\.json: unreadable"):
        run.info()


def test_measurement_and_verdict_of_a_fixture_run() -> None:
    run = RunDir(FIXTURES / "pass-kill")
    m = read_measurement(run)
    assert m is not None and m.node == "sim-vllm-a" and m.t_effect == 1767268800.0
    assert (m.detection_s, m.recovery_s, m.lost_total) == (4.0, 8.3, 19)
    verdict = read_verdict(run)
    assert verdict is not None and verdict.outcome == "PASS"


def test_absent_or_empty_measurement_and_verdict_are_none(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert read_measurement(run) is None and read_verdict(run) is None
    run.write_json(run.measurement_json, {})
    assert read_measurement(run) is None


def test_measurement_written_before_t_effect_existed(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.write_json(run.measurement_json, {"node": "n", "t_inject": 10.0, "t_revert": 20.0,
                                          "t_window_end": 30.0, "in_flight_at_inject": 3})
    m = read_measurement(run)
    assert m is not None and m.t_effect == 10.0 and m.in_flight_at_effect == 3


@pytest.mark.parametrize(("name", "text", "why"), [
    ("measurement.json", "{", "measurement.json: unreadable"),
    ("measurement.json", '{"lost_total": 1}', "measurement.json: does not match slo.Measurement"),
    ("verdict.json", "[]", "verdict.json: expected a JSON object, got list"),
    ("verdict.json", '{"checks": 1}', "verdict.json: does not match slo.Verdict"),
])
def test_unreadable_measurement_or_verdict_raises(
    tmp_path: Path, name: str, text: str, why: str
) -> None:
    run = RunDir(tmp_path)
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(UnreadableRunFile, match=re.escape(why)):
        read_measurement(run) if name == "measurement.json" else read_verdict(run)


def test_read_model_round_trips_a_written_model(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    m = read_measurement(RunDir(FIXTURES / "pass-kill"))
    assert m is not None
    run.write_json(run.measurement_json, m.to_json())
    assert read_measurement(run) == m


def test_gate_result_round_trips_and_tolerates_old_and_torn_files(tmp_path: Path) -> None:
    gate = GateDir(tmp_path)
    assert gate.result() == GateResult()  # not written yet (gate running or interrupted)
    result = GateResult(node="n", candidate="c", current="p", config_diff=["-a", "+b"],
                        started_at=1.0)
    result.fail("c did not become ready")
    gate.write_result(result)
    read = gate.result()
    assert (read.decision, read.why, read.passed) == ("fail", "c did not become ready", False)
    assert read.config_diff == ["-a", "+b"] and read.started_at == 1.0
    # an older gate.json: a diff as one string, no steady state, a stray key, a bad type
    gate.gate_json.write_text(json.dumps({"decision": "pass", "config_diff": "-a\n+b",
                                          "scenarios": [{"name": "kill"}, 3],
                                          "promoted": "yes", "extra": 1}))
    old = gate.result()
    assert old.passed and old.config_diff == ["-a", "+b"] and old.steady_state is None
    assert old.scenarios == [{"name": "kill"}] and old.promoted is False
    assert old.to_json()["extra"] == 1
    gate.gate_json.write_text("{torn")
    with pytest.raises(UnreadableRunFile, match=r"gate\.json: unreadable"):
        gate.result()


def test_prometheus_json_is_a_typed_capture_tolerant_of_what_it_reads(tmp_path: Path) -> None:
    from slo.capture import CapturedSeries, PrometheusCapture

    run = RunDir(tmp_path)
    capture = PrometheusCapture(
        series=(CapturedSeries("up", "up{job=\"j\"}", {"job": "j"}, [[1.0, "1"]]),),
        alerts=({"alertname": "FaultkitNodeDown", "state": "firing"},))
    run.write_model(run.prometheus_json, capture)
    assert PrometheusCapture.from_json(run.read_object(run.prometheus_json)) == capture
    failed = PrometheusCapture(error="Prometheus unreachable")
    assert failed.to_json() == {"series": [], "alerts": [], "error": "Prometheus unreachable"}
    odd = PrometheusCapture.from_json({"series": [3, {"values": "x"}], "alerts": "no"})
    assert odd.series == (CapturedSeries("?", "not captured", {}, []),) and odd.alerts == ()


def test_the_next_whole_write_removes_what_a_killed_writer_left(tmp_path: Path) -> None:
    """A writer killed mid-write leaves its ``.<name>.<pid>.tmp``; the next write of the same
    file removes it, but never the temporary file of a writer still alive."""
    import os
    import subprocess
    import sys

    from faultkit.rundir import replaced_whole

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    target = tmp_path / "incident.md"
    stray = tmp_path / f".incident.md.{dead}.tmp"
    live = tmp_path / f".incident.md.{os.getppid()}.tmp"  # pytest's parent: alive
    other = tmp_path / f".timeline.png.{dead}.tmp"  # another file's: not this write's
    for path in (stray, live, other):
        path.write_text("half a report")
    with replaced_whole(target) as tmp:
        tmp.write_text("# the report\n")
    assert target.read_text() == "# the report\n"
    assert not stray.exists()
    assert live.exists() and other.exists()
