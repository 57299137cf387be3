"""Incident reports on the hand-made fixture run directories: golden files, structure,
traceability of every key figure, and the chart.

Regenerate the golden files after an intended change with::

    UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/reports/test_reports_incident.py
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.image import imread

from reports import render_incident
from reports.chart import impact_per_second
from reports.load import load_run
from reports.outage import NOT_APPLICABLE
from reports.summary import summary
from tests.unit.reports.test_reports_markdown import html
from tests.unit.reports_helpers import GOLDEN, RUNS, cells, copy_run, section, table_problems

#: every run directory tests/fixtures/runs/build_fixtures.py writes
FIXTURE_NAMES = tuple(sorted(p.name for p in RUNS.iterdir() if (p / "run.json").exists()))


def test_every_fixture_has_a_golden_report() -> None:
    assert len(FIXTURE_NAMES) >= 6
    assert sorted(p.name.removesuffix(".incident.md") for p in GOLDEN.glob("*.incident.md")) == (
        list(FIXTURE_NAMES)
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each fixture copied and rendered once for the module."""
    tmp = tmp_path_factory.mktemp("runs")
    return {name: render_incident(copy_run(name, tmp)) for name in FIXTURE_NAMES}


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_golden(rendered: dict[str, Path], name: str) -> None:
    md = rendered[name].read_text(encoding="utf-8")
    golden = GOLDEN / f"{name}.incident.md"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(md, encoding="utf-8")
    assert golden.exists(), f"no golden file {golden}; run with UPDATE_GOLDEN=1"
    assert md == golden.read_text(encoding="utf-8"), (
        f"{name}: incident.md differs from {golden}; if intended, rerun with UPDATE_GOLDEN=1"
    )


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_markdown_structure(rendered: dict[str, Path], name: str) -> None:
    md = rendered[name].read_text(encoding="utf-8")
    assert table_problems(md) == []
    for title in (
        "Key figures",
        "Timeline",
        "Symptoms",
        "Telemetry",
        "Diagnosis",
        "Recovery",
        "Preventive changes",
        "Run",
    ):
        assert f"\n## {title}\n" in md
    assert "```mermaid" not in md  # one timeline: the table
    # the chain a reader at 2 a.m. needs comes first, the telemetry tables after it
    order = [md.index(f"\n## {t}\n") for t in ("Diagnosis", "Recovery", "Preventive changes",
                                               "Key figures", "Timeline", "Telemetry")]
    assert order == sorted(order)
    assert "](timeline.png)" in md


def _json_numbers(run_dir: Path) -> list[float]:
    """Every number in the run directory's JSON files (leaves, and numbers inside strings)."""
    out: list[float] = []

    def walk(x: Any) -> None:
        if isinstance(x, bool):
            return
        if isinstance(x, int | float):
            out.append(float(x))
        elif isinstance(x, str):
            out.extend(float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", x))
        elif isinstance(x, dict):
            for key, value in x.items():
                walk(key)
                walk(value)
        elif isinstance(x, list):
            for value in x:
                walk(value)

    for f in run_dir.glob("*.json"):
        walk(json.loads(f.read_text()))
    return out


def _in_json(token: str, numbers: list[float]) -> bool:
    """``token`` is one of ``numbers`` as shown: same decimals, sign dropped (a negative
    figure is phrased in words, e.g. "recovered 0.50 s before the revert ended")."""
    decimals = len(token.split(".")[1]) if "." in token else 0
    value = float(token)
    return any(math.isclose(abs(round(n, decimals)), value, abs_tol=1e-9) for n in numbers)


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_key_figure_is_traceable(rendered: dict[str, Path], name: str) -> None:
    md = rendered[name].read_text(encoding="utf-8")
    numbers = _json_numbers(RUNS / name)
    rows = [
        cells(line)
        for line in section(md, "Key figures").splitlines()
        if line.startswith("| ") and not line.startswith("| Figure")
    ]
    assert [row[0] for row in rows][:5] == [
        "Detection time", "Harness readiness probe (not detection)", "Recovery time",
        "Lost requests", "Affected users (lost + slow)"]
    for label, value, source in rows:
        value = value.replace("\\", "")
        assert source, label
        assert not re.search(r"(?<![\w.])-\d", value), f"{name} {label}: negative figure {value}"
        if "=" in value:  # derived: inputs must be in the JSON and the arithmetic must hold
            lhs, rhs = value.split("=")
            for token in re.findall(r"\d+(?:\.\d+)?", lhs):
                assert _in_json(token, numbers), f"{name} {label}: {token} not in the run's JSON"
            expr = lhs.replace("×", "*").replace("−", "-")
            computed = eval(expr, {"__builtins__": {}})  # digits and operators only
            shown = float(rhs.strip().rstrip("%").strip())
            assert math.isclose(computed * 100, shown, rel_tol=5e-3), (label, computed, shown)
        else:
            for token in re.findall(r"\d+(?:\.\d+)?", value):
                assert _in_json(token, numbers), f"{name} {label}: {token} not in the run's JSON"


def test_key_figures_fail_when_a_number_is_not_in_the_json(tmp_path: Path) -> None:
    """The traceability check itself: a tampered measurement must break it."""
    d = copy_run("pass-kill", tmp_path)
    m = json.loads((d / "measurement.json").read_text())
    md_before = render_incident(d).read_text()
    m["detection_s"] = 4.444
    (d / "measurement.json").write_text(json.dumps(m))
    md_after = render_incident(d).read_text()
    assert "4.44 s via alert" in md_after
    assert "4.44" not in md_before
    assert not _in_json("4.43", _json_numbers(d))


def _budget_row(tmp_path: Path, label: str, **run: Any) -> tuple[str, str]:
    """pass-kill (19 lost) re-rendered with ``run`` over its run.json (a ``None`` drops the
    key): its Key figures row starting ``label``, and the whole report."""
    d = copy_run("pass-kill", tmp_path)
    written = json.loads((d / "run.json").read_text())
    written.update(run)
    (d / "run.json").write_text(json.dumps({k: v for k, v in written.items() if v is not None}))
    md = render_incident(d).read_text()
    return next(line for line in md.splitlines() if line.startswith(f"| {label}")), md


def test_budget_uses_slo_window_requests_when_recorded(tmp_path: Path) -> None:
    row, _ = _budget_row(tmp_path, "SLO budget spent", slo_window_requests=1_000_000)
    assert "19 / ((1 − 0.99) × 1000000) = 0.19 %" in row
    # 1 000 000 requests over 30 days is 0.386 per second: 19 lost is 49.2 s of full outage
    assert "the equivalent of 49.2 s of full outage" in row
    assert "(1000000 requests over its 30-day window)" in row


def test_budget_states_the_part_of_the_window_prometheus_holds(tmp_path: Path) -> None:
    row, _ = _budget_row(tmp_path, "SLO budget spent", slo_window_requests=3600,
                         slo_window={"window": "30d", "history_s": 7200.0, "missing": None})
    # 3600 requests over the 2 h held: 0.5 per second, so 19 lost is 38 s of full outage
    assert "19 / ((1 − 0.99) × 3600) = 52.8 %" in row
    assert "the equivalent of 38.0 s of full outage" in row
    assert "over the 2 h of its 30-day window Prometheus holds" in row


def test_budget_not_computable_says_why_and_what_to_configure(tmp_path: Path) -> None:
    row, md = _budget_row(
        tmp_path, "Share of this scenario's requests lost", slo_window_requests=None,
        slo_window={"window": "30d", "missing": "llama.cpp exports no request counter"})
    assert "SLO budget not computable: llama.cpp exports no request counter" in row
    assert "SLO budget spent" not in md.split("## Key figures")[1].split("##")[0]


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_chart_is_produced_and_not_blank(rendered: dict[str, Path], name: str) -> None:
    png = rendered[name].with_name("timeline.png")
    assert png.stat().st_size > 20_000
    img = imread(png)
    assert img.shape[0] > 300
    assert img.shape[1] > 600
    rgb = img[..., :3].reshape(-1, 3)
    # not blank: many distinct colours, and a fair share of non-white pixels
    assert len(np.unique((rgb * 255).astype(int), axis=0)) > 50
    assert (rgb.min(axis=1) < 0.9).mean() > 0.02


def test_fail_oom_report_says_memory(rendered: dict[str, Path]) -> None:
    md = rendered["fail-oom"].read_text()
    diagnosis = section(md, "Diagnosis")
    assert "**Cause: the engine was OOM-killed under the injected fault (a memory squeeze to " \
        "1536m)**" in diagnosis
    assert "after Docker's oom event" in diagnosis
    assert "**Verdict: FAIL** — lost:" in md
    assert "the limit was 1536m (squeezed)" in section(md, "Preventive changes")


def test_not_detected_report_names_the_gap(rendered: dict[str, Path]) -> None:
    md = rendered["not-detected"].read_text()
    assert "not detected within the observation window" in section(md, "Key figures")
    assert "monitoring gap" in section(md, "Diagnosis")
    assert "No alert changed state during the run." in md


def test_failed_rollout_report(rendered: dict[str, Path]) -> None:
    md = rendered["failed-rollout"].read_text()
    diagnosis = section(md, "Diagnosis")
    assert "**Cause: the candidate config ctx-32k never became ready: not ready within 60 s**" \
        in diagnosis
    assert "KV cache is needed" in diagnosis
    assert "What brought it back: rollback to the previous config." in md
    # the log excerpt is the candidate's, never the restored container's routine traffic
    assert "EngineCore failed to start" in md and "200 OK" not in md


def test_hostile_text_is_escaped_and_redacted(tmp_path: Path) -> None:
    d = copy_run("pass-kill", tmp_path)
    c = json.loads((d / "container.json").read_text())
    c["log_tail"] += (
        "\n```\n<img src=x onerror=alert(1)>\nAuthorization: Bearer sk-live0123456789abc"
    )
    c["after"]["image"] = "evil|image`<b>"
    (d / "container.json").write_text(json.dumps(c))
    with (d / "timeline.jsonl").open("a") as fh:
        fh.write(
            json.dumps(
                {
                    "t": 1767268805.0,
                    "source": "observer",
                    "kind": "alert_firing",
                    "data": {"alertname": "X|Y:`z`<i>; api_key=abcd1234secret"},
                }
            )
            + "\n"
        )
    md = render_incident(d).read_text()
    assert "sk-live0123456789abc" not in md
    assert "abcd1234secret" not in md
    outside = re.sub(r"^(`{3,})text\n.*?\n\1$", "", md, flags=re.S | re.M)
    assert "<img" in md  # inside the fenced log, where it is inert text
    assert "<img" not in outside
    assert html(md) == []  # "<b>", "<i>" show inside code spans, never as HTML
    assert "→ evil\\|image\\`&lt;b>." in md  # a container field: text, escaped where needed
    assert "| ``X\\|Y:`z`<i>; api_key=[REDACTED]`` |" in md  # an alert name: a code span
    assert table_problems(md) == []
    assert "````text" in md  # the log's ``` forced a longer fence


def test_missing_files_render_not_captured(tmp_path: Path) -> None:
    d = tmp_path / "partial"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"scenario": "kill", "node": "n"}))
    md = render_incident(d).read_text()
    assert "| Measurement | not captured |" in md
    assert "**Verdict: not captured**" in md
    assert "Container state not captured." in md
    assert table_problems(md) == []
    assert (d / "timeline.png").stat().st_size > 5_000


def test_unreadable_json_is_reported_not_fatal(tmp_path: Path) -> None:
    d = copy_run("pass-kill", tmp_path)
    (d / "verdict.json").write_text("{not json")
    md = render_incident(d).read_text()
    assert "verdict.json: unreadable" in md
    assert "**Verdict: not captured**" in md


def test_wrongly_typed_files_are_reported_not_rendered(tmp_path: Path) -> None:
    d = copy_run("pass-kill", tmp_path)
    m = json.loads((d / "measurement.json").read_text())
    m["detection_s"] = "fast"
    m["slis"]["fault"]["requests"] = "many"
    (d / "measurement.json").write_text(json.dumps(m))
    with (d / "timeline.jsonl").open("a") as fh:
        fh.write(json.dumps({"t": "soon", "source": "fault", "kind": "inject_start"}) + "\n")
        fh.write(json.dumps({"t": 1.0, "source": "fault", "kind": "x", "data": [1]}) + "\n")
    md = render_incident(d).read_text()
    assert "| Measurement | not captured |" in md
    assert "measurement.json detection_s" in md
    assert "slis.fault.requests" in md
    assert "timeline.jsonl: 2 malformed event(s) skipped" in md
    assert table_problems(md) == []


def test_public_names_are_pinned() -> None:
    import reports

    assert reports.__all__ == [
        "RULES", "UNDIAGNOSED_KEY", "Change", "Diagnosis", "RunData", "changes_for",
        "diagnose", "is_run_dir", "load_run", "render_budget", "render_gate", "render_incident",
    ]
    for name in reports.__all__:
        assert getattr(reports, name) is not None


# ------------------------------------------------------------------ reads like a report


SUMMARIES = {
    "pass-kill": "PASS: sim-vllm-a was down for 8.3 s after a SIGKILL of its main process; "
    "Prometheus alerted "
    "after 4.0 s; 19 of 120 requests were lost (17 refused connections, 2 resets).",
    "fail-oom": "FAIL: sim-vllm-b was down for 31.5 s (its longest phase: a restart loop (3 "
                "more death(s) and restart(s)), 22.2 s) after a memory squeeze to 1536m; "
    "Prometheus alerted after 5.0 s; 65 of 160 requests were lost (63 refused connections, "
    "2 resets).",
    "not-detected": "FAIL: llamacpp-a was degraded for 25.5 s under 30 % packet loss; "
    "monitoring did not detect it; 10 of 130 requests were lost, all first-token timeouts.",
    "failed-rollout": "FAIL: sim-vllm-a was down for 79.4 s after rolling out ctx-32k; "
    "Prometheus alerted after 6.0 s; 161 of 240 requests were lost (159 refused connections, "
    "2 resets).",
    "bad-input": "PASS: llama kept serving through malformed requests; none of its 100 "
    "requests was lost.",
    "flood": "FAIL: sim-sglang was impaired for 9.7 s under a request flood at 100.0 req/s; "
    "Prometheus alerted after 6.0 s; 32 of 400 requests were lost (16 HTTP 429 answers, 16 "
    "arrivals shed by the client), and 46 more succeeded too slowly for users; the lost "
    "requests were not judged: the node sets no lost_max.",
}


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_summary_sentence_opens_the_report(rendered: dict[str, Path], name: str) -> None:
    md = rendered[name].read_text()
    title, blank, first = md.splitlines()[:3]
    assert title.startswith("# Incident report: ") and blank == ""
    assert first == SUMMARIES[name]
    assert summary(load_run(RUNS / name)) == SUMMARIES[name]


def test_summary_without_a_measurement_says_so(tmp_path: Path) -> None:
    d = copy_run("pass-kill", tmp_path)
    (d / "measurement.json").unlink()
    assert summary(load_run(d)) == (
        "PASS: no measurement of a SIGKILL of its main process on sim-vllm-a was recorded "
        "(the run ended before the fault took effect, or its files are missing)."
    )


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_ids_read_as_written(rendered: dict[str, Path], name: str) -> None:
    """No HTML entities or tags, no escaped underscores: ids and JSON are code spans."""
    md = rendered[name].read_text()
    assert "\\_" not in md
    assert "<code>" not in md and "&#" not in md
    run = json.loads((RUNS / name / "run.json").read_text())
    assert f"| Scenario | `{run['scenario']}` |" in md
    assert f"| Node | `{run['node']}` (engine " in md


def _figure(md: str, label: str) -> str:
    """The value cell of one key-figure row."""
    row = next(
        line for line in section(md, "Key figures").splitlines() if line.startswith(f"| {label} |")
    )
    return cells(row)[1]


def test_recovery_before_the_revert_is_phrased_not_negative(rendered: dict[str, Path]) -> None:
    md = rendered["pass-kill"].read_text()
    assert _figure(md, "Recovery time") == (
        "8.30 s after the fault took effect; recovered 0.50 s before the revert ended"
    )
    assert "11.50 s after the revert ended" in rendered["fail-oom"].read_text()


def test_request_level_fault_without_outage_says_not_applicable(
    rendered: dict[str, Path],
) -> None:
    md = rendered["bad-input"].read_text()
    for label in ("Detection time", "Recovery time"):
        assert _figure(md, label) == NOT_APPLICABLE
    assert f"What brought it back: {NOT_APPLICABLE} (the node kept serving)." in md
    assert "recovered: steady state held" not in md
    # a request-level fault that did hurt users keeps its figures
    flood = rendered["flood"].read_text()
    assert _figure(flood, "Detection time").startswith(
        "6.00 s via alert (FaultkitErrorRatioHigh firing); first seen: ")
    assert _figure(flood, "Recovery time").startswith("9.70 s after the fault took effect; ")


def test_effect_evidence_probe_and_impact_figures(rendered: dict[str, Path]) -> None:
    md = rendered["pass-kill"].read_text()
    assert (
        "| Took effect at | 2026-01-01 12:00:00.000 UTC — Docker 'die' event (exit code 137) "
        "(evidence: `docker_event`) |" in md
    )
    assert _figure(md, "Harness readiness probe (not detection)") == (
        "first failed probe 0.60 s after the fault took effect"
    )
    assert _figure(md, "Detection time").endswith("; first seen: alert 4.00 s, up 1.00 s")
    flood = rendered["flood"].read_text()
    assert _figure(flood, "Affected users (lost + slow)") == (
        "78: 32 lost + 46 slow (first token more than 2.5 s after arrival)"
    )
    m = json.loads((RUNS / "flood" / "measurement.json").read_text())
    by_class = ", ".join(f"{k} {v}" for k, v in sorted(m["lost_by_class"].items()))
    assert _figure(flood, "Lost requests") == (
        f"32 of {m['requests_total']} requests ({by_class}); 16 of them clean rejections; "
        f"{m['in_flight_at_effect']} in flight when the fault took effect"
    )


def test_latency_table_has_user_facing_ttft(rendered: dict[str, Path]) -> None:
    md = rendered["flood"].read_text()
    header = next(line for line in md.splitlines() if line.startswith("| Window |"))
    assert "User TTFT p95 (s)" in cells(header)
    fault = cells(next(line for line in md.splitlines() if line.startswith("| fault |")))
    m = json.loads((RUNS / "flood" / "measurement.json").read_text())
    column = cells(header).index("User TTFT p95 (s)")
    assert fault[column] == f"{m['slis']['fault']['user_ttft_p95_s']:.3f}"


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_links_point_at_files_of_the_run(rendered: dict[str, Path], name: str) -> None:
    md = rendered[name].read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", md)
    assert "./" in targets and "measurement.json" in targets and "timeline.png" in targets
    for target in targets:
        assert (rendered[name].parent / target).exists(), target


def test_impact_per_second_counts_arrivals_by_outcome() -> None:
    data = load_run(RUNS / "flood")
    m = data.measurement
    assert m is not None
    edges, counts = impact_per_second(data.ledger, m.t_effect)
    assert len(edges) == len(counts["ok"]) == len(counts["failed"]) == len(counts["shed"])
    assert sum(counts["shed"]) == m.lost_by_class["shed_client"] == 16
    assert sum(counts["failed"]) == 16  # the 429s
    assert sum(map(sum, counts.values())) == len(data.ledger)
    shed_seconds = [e for e, n in zip(edges, counts["shed"], strict=True) if n]
    assert min(shed_seconds) >= 2 and max(shed_seconds) < 10  # by arrival, inside the flood
    assert impact_per_second([], 0.0) == ([], {"ok": [], "failed": [], "shed": []})


def _with_paging(tmp_path: Path, **paging: Any) -> str:
    """pass-kill (fault at t, alert firing 4 s later) re-rendered with ``paging``."""
    d = copy_run("pass-kill", tmp_path)
    measurement = json.loads((d / "measurement.json").read_text())
    measurement["paging"] = {"alertmanager": "http://127.0.0.1:19093", "pager": True,
                             "route": {"receiver": "faultkit-pager", "group_wait_s": 2.0},
                             **paging}
    (d / "measurement.json").write_text(json.dumps(measurement))
    return render_incident(d).read_text()


def test_the_detection_row_and_headline_end_at_the_page(tmp_path: Path) -> None:
    md = _with_paging(tmp_path, received_s=4.3, page_s=6.4, after_firing_s=2.4,
                      receiver="faultkit-pager", alertname="FaultkitNodeDown")
    row = next(line for line in md.splitlines() if line.startswith("| Detection time"))
    assert ("paged at 6.40 s, 2.40 s after firing (Alertmanager held it at 4.30 s; "
            "group_wait 2 s; receiver faultkit-pager)") in row
    assert "and someone was paged after 6.4 s" in md.split("\n## ")[0]


def test_a_silenced_page_reads_as_a_finding_in_the_headline(tmp_path: Path) -> None:
    finding = ('detected, but no one was paged: Alertmanager suppressed the alert (silence '
               's1 by alice ("maintenance"))')
    md = _with_paging(tmp_path, received_s=4.3, suppressed_by=['silence s1 by alice '
                                                              '("maintenance")'],
                      finding=finding)
    row = next(line for line in md.splitlines() if line.startswith("| Detection time"))
    assert finding in row
    assert "but no one was paged: Alertmanager suppressed it" in md.split("\n## ")[0]
