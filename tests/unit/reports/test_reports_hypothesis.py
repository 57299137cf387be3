"""Any valid run directory renders: generated run directories, hostile text included."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faultkit.model.records import ERROR_CLASSES
from reports.load import load_run
from reports.render import _ENV, incident_context, render_incident
from tests.unit.reports.test_reports_markdown import html, table_shapes
from tests.unit.reports_helpers import table_problems

T0 = 1767268800.0
times = st.floats(min_value=T0 - 100, max_value=T0 + 200, allow_nan=False)
durations = st.floats(min_value=0, max_value=500, allow_nan=False)
texty = st.text(max_size=40) | st.sampled_from(
    ["a|b", "`x`", "<script>", "Authorization: Bearer sk-abcdefghijklmnop", "::;#", "```"]
)
maybe = st.none() | times

EVENT_KINDS = {
    "fault": ["inject_start", "inject_end", "revert_start", "revert_end"],
    "observer": [
        "health_ok",
        "health_fail",
        "alert_pending",
        "alert_firing",
        "alert_resolved",
        "up_0",
        "up_1",
    ],
    "harness": [
        "scenario_start",
        "rollback_start",
        "rollback_done",
        "restart_seen",
        "readiness_timeout",
        "manual_restart",
    ],
    "load": ["load_start"],
}
FAULTS = [
    "kill",
    "pause",
    "partition",
    "loss",
    "memory_squeeze",
    "rollout",
    "oversized_context",
    "stop",
    "weird|kind",
]


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    source = draw(st.sampled_from(sorted(EVENT_KINDS)))
    data: dict[str, Any] = draw(
        st.dictionaries(
            st.sampled_from(["fault", "alertname", "detail", "exit_code", "oom_killed", "config"]),
            st.one_of(texty, st.integers(-1, 300), st.booleans()),
            max_size=3,
        )
    )
    if source == "fault":
        data["fault"] = draw(st.sampled_from(FAULTS))
        data["params"] = draw(st.dictionaries(st.text(max_size=5), texty, max_size=2))
    return {
        "t": draw(times),
        "source": source,
        "kind": draw(st.sampled_from(EVENT_KINDS[source])),
        "node": "n",
        "data": data,
    }


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    t = draw(times)
    status = draw(st.sampled_from(["ok", "fail", "unknown"]))
    return {
        "id": draw(st.text(max_size=6)),
        "node": "n",
        "kind": "chat",
        "t_invoke": t,
        "status": status,
        "t_end": t + draw(durations),
        "t_first_token": draw(st.none() | st.just(t + 0.1)),
        "http_status": draw(st.none() | st.sampled_from([200, 400, 429, 500, 503])),
        "error_class": None if status == "ok" else draw(st.sampled_from(ERROR_CLASSES)),
        "error_detail": draw(st.none() | texty),
    }


windows = st.builds(
    lambda s, r, ok, p: {
        "start": s,
        "end": s + 10,
        "requests": r,
        "ok": ok,
        "failed": r - ok,
        "ttft_p50_s": p,
        "e2e_p95_s": p,
    },
    times,
    st.integers(0, 50),
    st.integers(0, 0),
    st.none() | durations,
)


@st.composite
def measurements(draw: st.DrawFn) -> dict[str, Any]:
    t_inject = draw(times)
    t_detect = draw(maybe)
    return {
        "node": "n",
        "t_inject": t_inject,
        "t_revert": draw(maybe),
        "t_window_end": t_inject + 60,
        "t_impact": draw(maybe),
        "t_detect": t_detect,
        "detect_signal": None
        if t_detect is None
        else draw(st.sampled_from(["alert", "up", "probe"])),
        "detect_detail": draw(st.none() | texty),
        "detection_s": None if t_detect is None else t_detect - t_inject,
        "t_recovered": draw(maybe),
        "recovery_s": draw(st.none() | durations),
        "recovery_after_revert_s": draw(st.none() | durations),
        "lost_total": draw(st.integers(0, 10_000)),
        "lost_by_class": draw(st.dictionaries(st.sampled_from(ERROR_CLASSES), st.integers(0, 99))),
        "clean_rejections": draw(st.integers(0, 50)),
        "requests_total": draw(st.integers(0, 10_000)),
        "slis": draw(st.dictionaries(st.sampled_from(["baseline", "fault", "after"]), windows)),
    }


state = st.fixed_dictionaries(
    {},
    optional={
        "status": texty,
        "exit_code": st.integers(-1, 255),
        "oom_killed": st.booleans(),
        "restart_count": st.integers(0, 9),
        "image": texty,
    },
)


@st.composite
def run_dirs(draw: st.DrawFn) -> dict[str, Any]:
    files: dict[str, Any] = {}
    if draw(st.booleans()):
        files["run.json"] = {
            "scenario": draw(texty),
            "node": draw(texty),
            "engine": draw(st.sampled_from(["vllm", "sglang", "llamacpp"])),
            "serving_config": draw(texty | st.just({"args": ["--x"]})),
            "fault": {"kind": draw(st.sampled_from(FAULTS)), "params": {}},
            "slo": {"availability": 0.99},
            "slo_window_requests": draw(st.none() | st.integers(1, 10**9)),
            "load_profile": {"rate_rps": 2},
            "t_start": draw(times),
        }
    if draw(st.booleans()):
        files["timeline.jsonl"] = draw(st.lists(events(), max_size=25))
    if draw(st.booleans()):
        files["ledger.jsonl"] = draw(st.lists(records(), max_size=25))
    if draw(st.booleans()):
        files["measurement.json"] = draw(measurements())
    if draw(st.booleans()):
        files["container.json"] = {
            "before": draw(state),
            "after": draw(state),
            "log_tail": draw(st.text(max_size=300)),
        }
    if draw(st.booleans()):
        files["prometheus.json"] = {
            "series": [
                {
                    "name": draw(texty),
                    "promql": draw(texty),
                    "labels": {"a": draw(texty)},
                    "values": draw(
                        st.lists(
                            st.tuples(
                                times, st.sampled_from(["1", "0", "NaN", "+Inf", "bad", "2.5"])
                            ),
                            max_size=10,
                        )
                    ),
                }
            ],
            "alerts": [{"alertname": draw(texty), "state": "firing", "t_seen": draw(times)}],
        }
    if draw(st.booleans()):
        files["verdict.json"] = {
            "checks": [
                {
                    "name": draw(texty),
                    "passed": draw(st.booleans()),
                    "expected": "x",
                    "observed": "y",
                    "why": draw(texty),
                }
            ]
        }
    if not files:
        files["run.json"] = {}
    return files


def _write(d: Path, files: dict[str, Any]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if name.endswith(".jsonl"):
            (d / name).write_text("".join(json.dumps(x) + "\n" for x in content))
        else:
            (d / name).write_text(json.dumps(content))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run_dirs())
def test_any_run_directory_renders_valid_markdown(files: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "run"
        _write(d, files)
        md = _ENV.get_template("incident.md.j2").render(**incident_context(load_run(d)))
    assert table_problems(md) == []
    assert "\n## Timeline\n" in md and "```mermaid" not in md
    assert "sk-abcdefghijklmnop" not in md
    assert html(md) == []  # "<script>" may show, inside a code span, but never as HTML
    for rows in table_shapes(md):
        assert len(set(rows)) == 1, rows


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run_dirs())
def test_any_run_directory_renders_with_chart(files: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "run"
        _write(d, files)
        out = render_incident(d)
        assert out.exists()
        assert (d / "timeline.png").stat().st_size > 1000
