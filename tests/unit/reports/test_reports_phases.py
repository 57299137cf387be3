"""A restarted engine's way back in phases, each dated from its own evidence: Docker's die
and start, the engine's start-up lines as Docker timestamped them, the observer's first
health answer, the first-token probe and the measured recovery."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reports.load import load_run
from reports.phases import recovery_phases, slowest
from reports.server_estimate import SERVER_ESTIMATE
from reports.summary import summary

T0 = 1_767_268_800.0  # 2026-01-01 12:00:00 UTC: the fault's effect


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


def _ev(t: float, source: str, kind: str, **data: Any) -> dict[str, Any]:
    return {"t": t, "source": source, "kind": kind, "node": "n1", "data": data}


def _run(tmp_path: Path, timeline: list[dict[str, Any]], startup: list[tuple[float, str]],
         fault: str | None = "kill", recovered: float = 9.0) -> Path:
    """A run directory; ``fault=None`` is a postmortem's (its loss the server's estimate)."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "run.json").write_text(json.dumps(
        {"scenario": "kill", "node": "n1", "t_start": T0 - 10, "t_end": T0 + 30,
         "fault": {"kind": fault, "params": {}}}))
    (tmp_path / "timeline.jsonl").write_text("".join(json.dumps(e) + "\n" for e in timeline))
    (tmp_path / "container.json").write_text(json.dumps(
        {"before": None, "after": None, "log_tail": "",
         "startup_log": "\n".join(f"{_stamp(t)} {text}" for t, text in startup)}))
    (tmp_path / "measurement.json").write_text(json.dumps(
        {"node": "n1", "t_inject": T0 - 0.1, "t_revert": T0 + 1, "t_effect": T0,
         "effect_evidence": "docker_event", "t_detect": T0 + 1,
         "detect_signal": "alert", "detection_s": 1.0, "t_recovered": T0 + recovered,
         "recovery_s": recovered, "t_window_end": T0 + 30, "lost_total": 3,
         "requests_total": 90,
         "server_cross_check": None if fault else {"estimate": SERVER_ESTIMATE, "lost": 3,
                                                   "low": 2, "high": 4, "method": "m"}}))
    return tmp_path


KILL = [_ev(T0 - 0.1, "fault", "act", what="SIGKILL"),
        _ev(T0 + 0.2, "harness", "docker_die", exit_code=137),
        _ev(T0 + 1.5, "harness", "docker_start"),
        _ev(T0 + 7.0, "observer", "health_ok", ok=True),
        _ev(T0 + 7.3, "fault", "first_token", served=True)]
STARTUP = [(T0 + 1.6, "(APIServer pid=8) INFO non-default args: {}"),
           (T0 + 2.0, "(EngineCore pid=20) INFO Initializing a V1 LLM engine (v0.32.0)"),
           (T0 + 3.5, "(APIServer pid=1) INFO Model loading took 0.1 GiB and 1.8 seconds"),
           (T0 + 6.8, "(APIServer pid=8) INFO Starting vLLM server on http://0.0.0.0:8000"),
           (T0 + 7.1, "INFO:     Application startup complete.")]


def test_each_phase_ends_at_its_own_evidence(tmp_path: Path) -> None:
    phases = recovery_phases(load_run(_run(tmp_path, KILL, STARTUP)))
    assert [(p.name, round(p.t_start - T0, 3), round(p.t_end - T0, 3)) for p in phases] == [
        ("until the container exited", 0.0, 0.2),
        ("until it started again", 0.2, 1.5),
        ("until the engine initialised", 1.5, 2.0),
        ("until the weights were loaded", 2.0, 3.5),
        ("until the API server started", 3.5, 6.8),
        ("until /health 200", 6.8, 7.0),
        ("until the first token", 7.0, 7.3),
        ("until steady state", 7.3, 9.0),
    ]
    longest = slowest(phases)
    assert longest is not None and longest.name == "until the API server started"
    assert "down for 9.0 s (its longest phase: until the API server started, 3.3 s)" in \
        summary(load_run(tmp_path))


def test_a_phase_without_evidence_merges_into_the_next(tmp_path: Path) -> None:
    phases = recovery_phases(load_run(_run(tmp_path, KILL, [])))
    assert [p.name for p in phases] == ["until the container exited", "until it started again",
                                        "until /health 200", "until the first token",
                                        "until steady state"]
    assert phases[2].t_start == T0 + 1.5  # from the start: no start-up line to date


def test_the_way_back_ends_at_the_steady_state(tmp_path: Path) -> None:
    """llama.cpp answered its users 0.8 s after an engine kill; the first-token probe, sent
    once /health said 200, got its token at +2.0: no phase may outlast the outage."""
    quick = [_ev(T0 + 0.01, "harness", "docker_die", exit_code=137),
             _ev(T0 + 0.5, "harness", "docker_start"),
             _ev(T0 + 0.7, "observer", "health_ok", ok=True),
             _ev(T0 + 2.0, "fault", "first_token", served=True)]
    phases = recovery_phases(load_run(_run(tmp_path, quick, [], recovered=0.8)))
    assert [(p.name, round(p.t_end - T0, 3)) for p in phases] == [
        ("until the container exited", 0.01), ("until it started again", 0.5),
        ("until /health 200", 0.7), ("until steady state", 0.8)]
    assert "down for 0.8 s (its longest phase: until it started again, 0.5 s)" in \
        summary(load_run(tmp_path))


def test_a_restart_loop_is_one_phase_before_the_start_that_held(tmp_path: Path) -> None:
    loop = [_ev(T0 + 0.2, "harness", "docker_die", exit_code=137),
            _ev(T0 + 1.0, "harness", "docker_start"),
            _ev(T0 + 2.0, "harness", "docker_die", exit_code=137),
            _ev(T0 + 3.0, "harness", "docker_start"),
            _ev(T0 + 4.0, "harness", "docker_die", exit_code=137),
            _ev(T0 + 5.0, "harness", "docker_start"),
            _ev(T0 + 8.0, "observer", "health_ok", ok=True)]
    phases = recovery_phases(load_run(_run(tmp_path, loop, [])))
    assert [(p.name, p.t_end - T0) for p in phases] == [
        ("a restart loop (2 more death(s) and restart(s))", 4.0),
        ("until it started again", 5.0),
        ("until /health 200", 8.0),
        ("until steady state", 9.0),
    ]


def test_no_phases_without_a_restart_or_for_a_rollout(tmp_path: Path) -> None:
    paused = [_ev(T0, "harness", "docker_pause"), _ev(T0 + 8, "harness", "docker_unpause")]
    assert recovery_phases(load_run(_run(tmp_path / "a", paused, [], fault="pause"))) == []
    assert recovery_phases(load_run(_run(tmp_path / "b", KILL, STARTUP, fault="rollout"))) == []


def _pixels_near(png: Path, hex_colour: str, alpha: float = 0.8) -> int:
    """How many pixels of ``png`` show ``hex_colour`` drawn at ``alpha`` over white."""
    import numpy as np
    from matplotlib.image import imread

    rgb = imread(png)[..., :3] * 255
    target = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=float)
    blended = alpha * target + (1 - alpha) * 255
    return int((np.abs(rgb - blended).max(axis=-1) < 6).sum())


def test_an_outage_nobody_injected_has_its_phases_from_docker_and_the_log(
        tmp_path: Path) -> None:
    """A postmortem (no fault kind): Docker's die and start and the engine's own lines
    cut its way back; no observer probe and no first-token probe ran, so those phases
    merge into steady state (the first good scrape that held)."""
    unwatched = [e for e in KILL if e["source"] == "harness"]
    phases = recovery_phases(load_run(_run(tmp_path, unwatched, STARTUP, fault=None)))
    assert [(p.name, round(p.t_end - T0, 3)) for p in phases] == [
        ("until the container exited", 0.2), ("until it started again", 1.5),
        ("until the engine initialised", 2.0), ("until the weights were loaded", 3.5),
        ("until the API server started", 6.8), ("until steady state", 9.0)]
    assert "scrapes answered for the recovery hold" in phases[-1].evidence  # no client
    # a fault of a kind that does not restart the engine still has none
    assert recovery_phases(load_run(_run(tmp_path / "p", unwatched, STARTUP,
                                         fault="pause"))) == []


def test_the_chart_draws_the_phases_as_a_bar(tmp_path: Path) -> None:
    from reports.chart import _PHASE_COLOURS, render_chart

    with_phases = render_chart(load_run(_run(tmp_path / "kill", KILL, STARTUP)),
                               tmp_path / "kill.png")
    # a pause has no restart and so no phases: the same colours nowhere
    without = render_chart(load_run(_run(tmp_path / "pause", [], [], fault="pause")),
                           tmp_path / "pause.png")
    for colour in _PHASE_COLOURS[:2]:
        assert _pixels_near(with_phases, colour) > 100, colour
        assert _pixels_near(without, colour) == 0, colour


def test_faultkit_runs_lists_each_runs_phases_side_by_side(tmp_path: Path) -> None:
    """``faultkit runs --scenario kill --phases``: the slowest phase in the table, every
    phase (seconds from the effect) in the JSON; another scenario's run is left out."""
    from click.testing import CliRunner

    from faultkit.cli import cli

    root = tmp_path / "runs"
    root.mkdir()
    _run(root / "20260101T120000.000Z-kill-n1", KILL, STARTUP)
    other = _run(root / "20260101T120100.000Z-pause-n1", [], [], fault="pause")
    run_json = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**run_json, "scenario": "pause"}))
    result = CliRunner().invoke(cli, ["runs", "--runs-dir", str(root), "--scenario", "kill",
                                      "--phases", "--json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.output)
    assert entry["scenario"] == "kill"
    assert [(p["phase"], p["from_effect_s"], p["duration_s"]) for p in entry["phases"]][:3] == [
        ("until the container exited", 0.0, 0.2), ("until it started again", 0.2, 1.3),
        ("until the engine initialised", 1.5, 0.5)]
    table = CliRunner().invoke(cli, ["runs", "--runs-dir", str(root), "--phases"]).output
    header, *lines = table.splitlines()
    assert header.split()[-2:] == ["SLOWEST", "PHASE"]
    kill = next(line for line in lines if "kill" in line)
    assert kill.endswith("until the API server started (3.3 s)")
    assert next(line for line in lines if "pause" in line).endswith("—")
    plain = CliRunner().invoke(cli, ["runs", "--runs-dir", str(root), "--json"]).output
    assert all("phases" not in e for e in json.loads(plain))  # read only when asked for
