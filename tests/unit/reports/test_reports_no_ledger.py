"""A run no client recorded and nothing injected (what ``faultkit postmortem`` writes):
the shared report's diagnosis names an act through Docker's API from Docker's own events,
and its loss figures are the server-side estimate with its range — or say it was not
estimated, never "0 lost". Runs with an injected fault are diagnosed as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from faultkit.model.records import Event
from faultkit.rundir import RunInfo
from reports.budget_figure import budget_figure
from reports.diagnosis import diagnose
from reports.figures import key_figures
from reports.load import RunData
from reports.prevention import changes_for
from reports.summary import summary
from slo.types import Measurement

T = 1_800_000_000.0


def docker(kind: str, t: float, **data: Any) -> Event:
    return Event(t=t, source="harness", kind=kind, node="n", data=data)


def run(tmp_path: Path, timeline: list[Event], *, fault: dict[str, Any] | None = None,
        estimate: dict[str, Any] | None = None) -> RunData:
    info = RunInfo.from_json({
        "scenario": "postmortem", "node": "n", "t_start": T, "t_end": T + 20,
        "fault": fault or {"kind": None, "params": {}, "describe": "an out-of-band failure"},
        "slo": {"availability": 0.999, "window_days": 30}, "slo_window_requests": 100_000})
    m = Measurement(node="n", t_effect=T + 1, t_revert=None, t_window_end=T + 20,
                    t_detect=T + 2, detect_signal="alert", detection_s=1.0,
                    t_recovered=T + 9, recovery_s=8.0, lost_total=(estimate or {}).get("lost")
                    or 0, server_cross_check=estimate)
    return RunData(path=tmp_path, run=info, timeline=timeline, measurement=m,
                   missing=["ledger.jsonl"])


KILL = [docker("docker_kill", T + 0.99, action="kill", signal="9"),
        docker("docker_die", T + 1.0, action="die", exit_code=137, oom_killed=False),
        docker("docker_start", T + 7.0, action="start")]
ESTIMATE = {"estimate": "server_counters", "lost": 40, "low": 30, "high": 52,
            "method": "5.00 req/s before the outage × 8 s …"}


def test_a_kill_through_docker_s_api_with_nothing_injected_is_the_cause(tmp_path: Path) -> None:
    data = run(tmp_path, KILL, estimate=ESTIMATE)
    cause = diagnose(data)[0]
    assert cause.key == "docker_api_kill"
    assert cause.title.startswith("the container was killed through Docker's API "
                                  "(docker kill, signal 9)")
    assert any("docker_die at +0.0 s (exit 137)" in line for line in cause.evidence)
    kinds = [c.type for _d, c in changes_for(diagnose(data), data)]
    assert kinds[0] == "process" and "mitigate" in kinds  # who did it; then a replica


def test_a_pause_is_dated_until_its_unpause(tmp_path: Path) -> None:
    data = run(tmp_path, [docker("docker_pause", T + 1.0, action="pause"),
                          docker("docker_unpause", T + 7.5, action="unpause")])
    cause = diagnose(data)[0]
    assert cause.key == "docker_api_pause"
    assert "frozen for 6.5 s (until docker_unpause at +6.5 s)" in cause.title


def test_a_network_cut_without_its_reconnect_says_so(tmp_path: Path) -> None:
    data = run(tmp_path, [docker("docker_network_disconnect", T + 1.0,
                                 action="network_disconnect", network="lab")])
    cause = diagnose(data)[0]
    assert cause.key == "docker_api_network_disconnect"
    assert "from network lab; no docker_network_connect in the window" in cause.title


def test_an_injected_fault_keeps_its_own_diagnosis(tmp_path: Path) -> None:
    fault = {"kind": "pause", "params": {}, "describe": "docker pause"}
    data = run(tmp_path, [docker("docker_pause", T + 1.0, action="pause")], fault=fault)
    assert diagnose(data)[0].key == "injected_pause"


def test_the_loss_is_the_server_side_estimate_with_its_range(tmp_path: Path) -> None:
    data = run(tmp_path, KILL, estimate=ESTIMATE)
    line = summary(data)
    assert "an estimated 40 requests (30–52) were lost, by the server's own counters" in line
    assert "after an out-of-band failure" in line
    [lost] = [f for f in key_figures(data) if f.label.startswith("Lost")]
    assert lost.label == "Lost requests (server-side estimate)"
    assert "Method: 5.00 req/s before the outage" in lost.value
    assert budget_figure(data).value.startswith("40 / ((1 − 0.999) × 100000)")


def test_a_loss_not_estimated_is_never_zero(tmp_path: Path) -> None:
    data = run(tmp_path, KILL, estimate={"estimate": "server_counters", "lost": None,
                                         "why": "no request counter"})
    assert "users affected were not estimated (no request counter)" in summary(data)
    assert budget_figure(data).value == "not computable: users affected were not estimated"
    assert "0 of" not in summary(data)


def test_the_network_disconnect_docker_does_after_a_death_is_not_an_act(tmp_path: Path) -> None:
    data = run(tmp_path, [*KILL, docker("docker_network_disconnect", T + 1.1,
                                        action="network_disconnect", network="lab")],
               estimate=ESTIMATE)
    cause = diagnose(data)[0]
    assert cause.key == "docker_api_kill"
    assert not any("network" in line for line in cause.evidence)


def test_no_probe_ran_and_nothing_was_reverted(tmp_path: Path) -> None:
    figures = {f.label: f.value for f in key_figures(run(tmp_path, KILL, estimate=ESTIMATE))}
    assert figures["Harness readiness probe (not detection)"].startswith("none ran")
    assert figures["Recovery time"] == "8.00 s after the fault took effect"


def test_what_brought_it_back_is_docker_s_own_event_not_a_guess(tmp_path: Path) -> None:
    from reports.recovery import analyse

    recovery = analyse(run(tmp_path, KILL, estimate=ESTIMATE))
    [mechanism] = recovery.mechanisms
    assert mechanism.startswith("Docker's own events: docker_start at +6.0 s")
    assert "does not record which" in mechanism
    assert "no client recorded requests" in recovery.steps[-1].what
