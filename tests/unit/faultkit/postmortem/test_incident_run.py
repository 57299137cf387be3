"""An incident a postmortem found, written as a run directory of the shared format and
rendered by the one incident report: its times from the scrape bounds and Docker's own
events, users affected from the server-side estimate, judged INCONCLUSIVE without a
client's record, and diagnosed from this window's Docker events only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from faultkit.docker.events import container_events
from faultkit.inventory import Inventory
from faultkit.postmortem.docker_evidence import DockerEvidence
from faultkit.postmortem.incident_run import (
    DESCRIBE,
    SCENARIO,
    IncidentRun,
    incident_measurement,
    incident_timeline,
    incident_window,
    judge_incident,
    write_incident_run,
)
from faultkit.postmortem.model import AlertEpisode, Bound, Incident
from faultkit.postmortem.users import LossEstimate
from faultkit.rundir import RunDir
from reports.diagnosis import diagnose
from reports.load import load_run
from reports.render import render_incident
from slo.capture import PrometheusCapture

T = 1_800_000_000.0
INVENTORY = Inventory.model_validate({
    "prometheus": {"url": "http://127.0.0.1:9", "scrape_interval_s": 1},
    "nodes": [{"name": "n", "engine": "sim", "personality": "vllm",
               "base_url": "http://127.0.0.1:9", "model": "m",
               "docker": {"container": "c"}, "prometheus": {"job": "n"}}],
})
NODE = INVENTORY.node("n")
ESTIMATE = LossEstimate(lost=40, low=30, high=52, counter="http_requests_total{job=\"n\"}",
                        rate_per_s=5.0, baseline_s=30.0, baseline_requests=150.0,
                        span=(T, T + 8), expected=40.0, served=0.0, errors=0.0)


def raw(action: str, t: float, kind: str = "container", **attrs: str) -> dict[str, Any]:
    return {"Type": kind, "Action": action, "timeNano": int(t * 1e9),
            "Actor": {"ID": "x", "Attributes": attrs}}


def the_incident(detected: bool = True) -> Incident:
    alert = AlertEpisode("FaultkitNodeDown", T + 1.2, T + 7.2, {"job": "n"})
    return Incident(start=Bound(T, T + 1), end=Bound(T + 7, T + 8), held=True,
                    failed_scrapes=7, good_scrapes_inside=0,
                    detection=alert if detected else None,
                    alerts=(alert,) if detected else (), restarts=())


def docker_seen(*events: dict[str, Any], state: dict[str, Any] | None = None
                ) -> DockerEvidence:
    return DockerEvidence(T, T + 13, tuple(container_events(events, "n",
                                                             extra={"from": "docker events"})),
                          state or {"status": "running", "restart_count": 0},
                          "INFO serving again", ("Docker's events: 3 in the window",))


def write(tmp_path: Path, incident: Incident, docker: DockerEvidence | None,
          estimate: LossEstimate = ESTIMATE) -> RunDir:
    start, end = incident_window(incident, t_from=T - 20, t_to=T + 30, hold_s=5.0)
    m = incident_measurement("n", incident, docker, estimate, t_window_end=end, interval_s=1.0)
    run = IncidentRun(NODE, INVENTORY, incident, start, end,
                      incident_timeline("n", incident, docker), m,
                      judge_incident(m, INVENTORY.slo_for(NODE), estimate),
                      PrometheusCapture(), docker, None, "test", "http://127.0.0.1:9")
    directory = write_incident_run(tmp_path, run)
    render_incident(directory.path)
    return directory


KILL = (raw("kill", T + 0.40, signal="9"), raw("die", T + 0.41, exitCode="137"),
        raw("start", T + 6.5))


def test_a_kill_is_a_run_directory_the_shared_report_renders(tmp_path: Path) -> None:
    directory = write(tmp_path, the_incident(), docker_seen(*KILL))
    data = load_run(directory.path)
    assert directory.path.name.endswith(f"-{SCENARIO}-n")
    assert data.run.scenario == SCENARIO and data.run.fault is not None
    assert data.run.fault.kind is None and data.run.fault.describe == DESCRIBE
    assert (data.run.t_start, data.run.t_end) == (T, T + 8 + 5.0)
    m = data.measurement
    assert m is not None
    # the effect is Docker's die inside the start bound; detection the alert; recovery the
    # first good scrape
    assert (m.t_effect, m.effect_evidence) == (T + 0.41, "docker_event")
    assert m.detect_signal == "alert" and m.t_detect == T + 1.2
    assert m.t_recovered == T + 8 and m.recovery_s == pytest.approx(8 - 0.41)
    assert m.lost_total == 40 and m.server_cross_check is not None
    assert any(n.startswith("outage start: after") and "1.00 s wide" in n for n in m.notes)
    assert any(n.startswith("no ledger: no client recorded") for n in m.notes)
    # no client: the error ratio and TTFT after it cannot be judged — never PASS
    assert data.verdict is not None and data.verdict.outcome == "INCONCLUSIVE"
    assert "ledger.jsonl" in data.missing
    cause = diagnose(data)[0]
    assert cause.key == "docker_api_kill"
    assert "killed through Docker's API (docker kill, signal 9)" in cause.title
    report = directory.incident_md.read_text()
    assert "an estimated 40 requests (30–52) were lost" in report
    assert "none — " + DESCRIBE in report
    assert "Keep this scenario in the pre-promotion gate" not in report
    # the bounds and what Docker had are said in the report, not only in the files
    assert "- outage start: after" in report and "events: 3 in the window" in report
    sources = {(e.source, e.kind, e.data.get("from")) for e in data.timeline}
    assert ("observer", "up_0", "prometheus") in sources
    assert ("harness", "docker_die", "docker events") in sources


def test_a_pause_and_a_network_cut_are_named_by_docker_s_own_events(tmp_path: Path) -> None:
    paused = write(tmp_path / "p", the_incident(),
                   docker_seen(raw("pause", T + 0.3), raw("unpause", T + 6.3)))
    cause = diagnose(load_run(paused.path))[0]
    assert cause.key == "docker_api_pause"
    assert "paused through Docker's API (docker pause)" in cause.title
    assert "for 6.0 s (until docker_unpause" in cause.title
    cut = write(tmp_path / "c", the_incident(), docker_seen(
        raw("disconnect", T + 0.3, "network", container="x", name="lab"),
        raw("connect", T + 6.3, "network", container="x", name="lab")))
    cause = diagnose(load_run(cut.path))[0]
    assert cause.key == "docker_api_network_disconnect"
    assert "cut off the network through Docker's API" in cause.title
    assert "from network lab" in cause.title


def test_without_docker_the_effect_is_the_first_failed_scrape_and_stale_state_is_unused(
        tmp_path: Path) -> None:
    # the container's state says OOM-killed, but its last stop predates the window
    old = docker_seen(state={"status": "running", "oom_killed": True, "exit_code": 137,
                             "finished_at": T - 3600})
    directory = write(tmp_path, the_incident(detected=False), old)
    data = load_run(directory.path)
    m = data.measurement
    assert m is not None and (m.t_effect, m.effect_evidence) == (T + 1, "scrape")
    assert m.detect_signal == "up" and m.t_detect == T + 1
    causes = diagnose(data)
    assert causes[0].key == "undiagnosed"
    assert any("predates this run" in line for line in causes[0].evidence)
    assert any(d.key == "no_alert" for d in causes[1:])


def test_users_not_estimated_is_an_evidence_gap_never_zero_lost(tmp_path: Path) -> None:
    none = LossEstimate(None, why="the llamacpp engine exposes no request counter")
    directory = write(tmp_path, the_incident(), None, none)
    data = load_run(directory.path)
    assert data.verdict is not None and data.verdict.outcome == "INCONCLUSIVE"
    assert any("users affected not estimated" in r for r in data.verdict.missing_evidence)
    report = directory.incident_md.read_text()
    assert "users affected were not estimated (the llamacpp engine exposes" in report
    assert "not computable: users affected were not estimated" in report
    assert "0 of 0" not in report


@pytest.mark.parametrize(("low", "high", "passed", "inconclusive"),
                         [(0, 3, True, False), (6, 9, False, False), (2, 8, False, True)])
def test_lost_requests_are_judged_by_the_estimate_s_range(
        low: int, high: int, passed: bool, inconclusive: bool) -> None:
    slo = INVENTORY.slo_for(NODE).model_copy(update={"lost_max": 5})
    estimate = LossEstimate(lost=(low + high) // 2, low=low, high=high, span=(T, T + 8),
                            rate_per_s=1.0, baseline_s=30, baseline_requests=30,
                            expected=8.0, served=0.0)
    m = incident_measurement("n", the_incident(), None, estimate, t_window_end=T + 13,
                             interval_s=1.0)
    [lost] = [c for c in judge_incident(m, slo, estimate).checks if c.name == "lost_requests"]
    assert (lost.passed, lost.inconclusive) == (passed, inconclusive)


def test_faultkit_runs_lists_each_incident_beside_experiments(tmp_path: Path) -> None:
    from reports.runs import list_runs

    write(tmp_path, the_incident(), docker_seen(*KILL))
    write(tmp_path, the_incident(), None, LossEstimate(None, why="no counter"))
    entries = list_runs(tmp_path)
    assert [(e.scenario, e.fault) for e in entries] == [(SCENARIO, None)] * 2
    # the estimate where there is one; "not estimated" is no count, never 0
    assert sorted((e.lost for e in entries), key=str) == [40, None]
    assert len({e.path.name for e in entries}) == 2  # a second postmortem: its own directory


def test_a_resume_inside_the_end_bound_dates_the_recovery() -> None:
    # the first good scrape (stamped T+8, when it began) waited on the frozen engine and was
    # answered after Docker's unpause at T+8.5: the unpause is when it served again
    paused = docker_seen(raw("pause", T + 0.3), raw("unpause", T + 8.5))
    m = incident_measurement("n", the_incident(), paused, ESTIMATE, t_window_end=T + 13,
                             interval_s=1.0)
    assert m.t_recovered == T + 8.5 and m.recovery_s == pytest.approx(8.2)
    assert any("recovered at Docker's docker_unpause event" in n for n in m.notes)
    # a start before the last failed scrape is not recovery: the engine was still loading
    m = incident_measurement("n", the_incident(), docker_seen(*KILL), ESTIMATE,
                             t_window_end=T + 13, interval_s=1.0)
    assert m.t_recovered == T + 8
