"""The incident report of a gateway run shows both sides (which upstream answered the
gateway's users, by phase, and how it routed around the dead one), and a test_limits run
shows its probe's steps. Run directories written here by hand, rendered by the real
renderer; the expected counts are counted from the hand-made ledger, not by the code."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from faultkit.model.records import Event, RequestRecord
from reports.load import load_run
from reports.render import render_incident
from reports.upstreams import GATEWAY_OWN, per_upstream_per_second, upstream_rows

T0 = 1_700_000_000.0  # the fault takes effect here


def rec(i: int, t: float, served_by: str | None, ok: bool = True, node: str = "gw"
        ) -> RequestRecord:
    return RequestRecord(
        id=f"r{i}", node=node, kind="chat", t_invoke=t, t_scheduled=t,
        status="ok" if ok else "fail", t_end=t + 0.2,
        http_status=200 if ok else 500, error_class=None if ok else "http_5xx",
        served_by=served_by,
    )


def gateway_run(tmp: Path, route: dict[str, Any] | None = None) -> Path:
    """10 s before the fault: a and b alternate. 6 s of fault: b dies at T0; 2 users get
    the gateway's own error, 1 a cut stream naming b, a serves the rest. After: both."""
    records: list[RequestRecord] = []
    for k in range(10):  # before: 5 a, 5 b
        records.append(rec(len(records), T0 - 10 + k, "a" if k % 2 else "b"))
    records.append(rec(len(records), T0 + 0.5, None, ok=False))
    records.append(rec(len(records), T0 + 1.0, None, ok=False))
    records.append(rec(len(records), T0 + 1.5, "b", ok=False))
    for k in range(3):  # during, served by a
        records.append(rec(len(records), T0 + 2 + k, "a"))
    for k in range(4):  # after (t_recovered = T0 + 6): 2 a, 2 b
        records.append(rec(len(records), T0 + 6 + k, "a" if k % 2 else "b"))
    records.append(rec(len(records), T0 + 7.2, "a", node="other"))  # another node's: ignored
    (tmp / "ledger.jsonl").write_text(
        "".join(json.dumps(r.to_json()) + "\n" for r in records))
    (tmp / "run.json").write_text(json.dumps({
        "scenario": "upstream_failure", "node": "gw", "engine": "litellm",
        "fault": {"kind": "kill", "params": {}, "describe": "kill b"}}))
    events = [Event(T0, "fault", "act", "b", {"fault": "kill"}),
              Event(T0 + 6, "harness", "note", "gw", {})]
    (tmp / "timeline.jsonl").write_text(
        "".join(json.dumps(e.to_json()) + "\n" for e in events))
    if route is not None:
        (tmp / "route_around.json").write_text(json.dumps(route))
    return tmp


def png_height(path: Path) -> int:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return int(struct.unpack(">I", header[20:24])[0])


def test_each_upstreams_answers_by_phase(tmp_path: Path) -> None:
    data = load_run(gateway_run(tmp_path))
    rows = {r.upstream: r for r in upstream_rows(data)}
    assert list(rows) == ["a", "b", GATEWAY_OWN]  # upstreams by name, the gateway's own last
    # no measurement.json: the fault phase runs to the end (never "recovered" on record)
    assert rows["a"].ok == {"before": 5, "fault": 5, "after": 0}
    assert rows["b"].ok == {"before": 5, "fault": 2, "after": 0}
    assert rows["b"].failed["fault"] == 1
    assert rows[GATEWAY_OWN].failed == {"before": 0, "fault": 2, "after": 0}


def test_the_chart_counts_per_upstream_per_second() -> None:
    records = [rec(0, T0 + 0.1, "a"), rec(1, T0 + 0.9, "a"), rec(2, T0 + 1.2, None, ok=False),
               rec(3, T0 + 2.5, "b")]
    edges, counts = per_upstream_per_second(records, T0)
    assert edges == [0, 1, 2]
    assert counts == {"a": [2, 0, 0], "b": [0, 0, 1], GATEWAY_OWN: [0, 1, 0]}


def test_the_report_shows_both_sides_and_the_route_around(tmp_path: Path) -> None:
    route = {"upstream": "b", "route_around_s": 2.0, "stretch_s": 3.0, "hits": 3,
             "requests": 10, "unnamed": 2, "served_by_upstream_after": 2}
    md = render_incident(gateway_run(tmp_path, route)).read_text()
    section = md.split("## Behind the gateway", 1)[1].split("\n## ", 1)[0]
    assert "| `a` | 5 | 5 | 0 | 0 | 0 |" in section
    assert "| `b` | 5 | 2 | 1 | 0 | 1 |" in section
    assert "the gateway's own error" in section
    assert "stopped sending users to b 2.000 s after it failed" in section
    assert "3 of 10 users' requests" in section
    # the chart gains the per-upstream panel: 1.3 in taller at 100 dpi than an engine run's
    engine_dir = tmp_path / "engine"
    engine_dir.mkdir()
    gateway_run(engine_dir)
    lines = (engine_dir / "ledger.jsonl").read_text().splitlines()
    plain = [json.dumps({**json.loads(line), "served_by": None}) for line in lines]
    (engine_dir / "ledger.jsonl").write_text("\n".join(plain) + "\n")
    engine_md = render_incident(engine_dir).read_text()
    assert "## Behind the gateway" not in engine_md
    assert png_height(tmp_path / "timeline.png") - png_height(engine_dir / "timeline.png") == 130


def test_the_report_says_when_the_upstream_was_back_in_rotation_and_a_hang_not_routed(
    tmp_path: Path,
) -> None:
    """A pause: the gateway kept sending users to b until it was back (t_back = T0 + 7 s,
    5 s after t_effect), so its rows split at t_back, and the sentences say it was not
    routed around, when b got traffic again and what the answers said of retries."""
    route = {"upstream": "b", "route_around_s": 5.0, "stretch_s": 3.0, "hits": 4,
             "requests": 10, "unnamed": 0, "routed_while_down": False, "t_back": T0 + 7.0,
             "back_in_rotation_s": 5.2, "idle_after_back_s": 0.2, "retried_requests": 1,
             "retries": 2}
    run = gateway_run(tmp_path, route)
    md = render_incident(run).read_text()
    section = md.split("## Behind the gateway", 1)[1].split("\n## ", 1)[0]
    assert "kept sending users to b while it was down" in section
    assert "b got users' traffic again 5.2 s after the fault, 0.2 s after it was back" in section
    assert "1 answers said the gateway had retried them (2 retries in all" in section
    rows = {r.upstream: r for r in upstream_rows(load_run(run))}
    total = {k: rows["a"].ok[k] + rows["b"].ok[k] for k in ("before", "fault", "after")}
    assert total["after"] > 0  # arrivals from t_back on are "after", recovery or not


def test_the_report_does_not_claim_routing_over_an_outage_shorter_than_the_stretch(
    tmp_path: Path,
) -> None:
    """K12's run: b back 2.6 s after the kill. The report says routing cannot be told —
    not "stopped sending users 0.000 s after it failed", nor "kept sending users"."""
    route = {"upstream": "b", "route_around_s": 0.0, "stretch_s": 3.0, "hits": 0,
             "requests": 40, "unnamed": 0, "routed_while_down": None, "outage_s": 2.6,
             "t_back": T0 + 2.6, "back_in_rotation_s": 2.8, "idle_after_back_s": 0.2}
    section = render_incident(gateway_run(tmp_path, route)).read_text().split(
        "## Behind the gateway", 1)[1].split("\n## ", 1)[0]
    assert "b was down only 2.6 s, shorter than the 3 s stretch" in section
    assert "stopped sending users" not in section and "kept sending" not in section


def test_the_chart_draws_the_gateways_own_attempts_per_upstream(tmp_path: Path) -> None:
    """prometheus.json's upstream_attempts_rate / upstream_failures_rate (by model_id) are
    drawn in the per-upstream panel, not as the bottom panel's series."""
    from reports.chart import render_chart

    run = gateway_run(tmp_path)
    attempts = [[T0 - 5 + k, 1.0 if k < 5 else 0.5] for k in range(15)]
    series = [
        {"name": "upstream_attempts_rate", "promql": "q", "labels": {"model_id": "b"},
         "values": attempts},
        {"name": "upstream_failures_rate", "promql": "q", "labels": {"model_id": "b"},
         "values": [[T0 + k, 0.4] for k in range(3)]},
        {"name": "upstream_attempts_rate", "promql": "q", "labels": {"model_id": "c"},
         "values": [[T0, 0.0]]},  # never attempted: not drawn
    ]
    (run / "prometheus.json").write_text(json.dumps({"series": series, "alerts": []}))
    from reports.load import load_run as load

    data = load(run)
    drawn = render_chart(data, tmp_path / "with.png")
    (run / "prometheus.json").unlink()
    plain = render_chart(load(run), tmp_path / "without.png")
    # same layout (no extra bottom panel for them), and a different picture
    assert png_height(drawn) == png_height(plain)
    assert drawn.read_bytes() != plain.read_bytes()


def test_a_limits_run_shows_its_probe_steps(tmp_path: Path) -> None:
    steps = [
        {"name": "50%", "fraction": 0.5, "words": 250, "planned_tokens": 508, "requests": 2,
         "within": True, "outcomes": {"ok": 2}, "http_statuses": {"200": 2},
         "prompt_tokens_seen": [507, 509], "problems": []},
        {"name": "over", "fraction": 1.01, "words": 520, "planned_tokens": 1040, "requests": 1,
         "within": False, "outcomes": {"http_5xx": 1}, "http_statuses": {"500": 1},
         "prompt_tokens_seen": None,
         "problems": ["over step (~1040 prompt tokens, limit 1024): a prompt over the limit "
                      "was HTTP 500, http_5xx (expected a clean 4xx)"]},
        {"name": "current", "fraction": 1.0, "words": 1020, "planned_tokens": 2040,
         "requests": 1, "within": True, "current_limit": 2048, "outcomes": {"http_4xx": 1},
         "http_statuses": {"400": 1}, "prompt_tokens_seen": None, "problems": []},
    ]
    result = {"context_limit": 1024, "limit_source": "/v1/models max_model_len",
              "concurrency": 2, "output_tokens": 8, "tokens_per_word": 2.0,
              "template_tokens": 8.0, "fit_spread_tokens": 0.5, "steps": steps,
              "problems": steps[1]["problems"]}
    (tmp_path / "run.json").write_text(json.dumps({
        "scenario": "limits", "node": "vllm", "fault_result": result,
        "fault": {"kind": "context_limits", "params": {}, "describe": "probe"}}))
    md = render_incident(tmp_path).read_text()
    section = md.split("## Context-limit probe", 1)[1].split("\n## ", 1)[0]
    assert "Context limit 1024 tokens (/v1/models max_model_len)" in section
    assert "| 50% | 508 | 507–509 | 2 |" in section
    assert "| over | 1040 | — | 1 |" in section and "a clean 4xx |" in section
    assert "was HTTP 500" in section
    assert ("| current | 2040 | — | 1 | `{\"http_4xx\": 1}` | `{\"400\": 1}` | answered in full, "
            "as the current config's limit of 2048 tokens allows |") in section, section


def test_a_soak_run_shows_its_memory_projection(tmp_path: Path) -> None:
    soak = {"t_from": T0, "t_to": T0 + 60, "memory_why": "memory rises 2048.0 KiB/s: the "
            "limit in 1.0 min at the lower bound, within the 24.0 h horizon",
            "memory": {"slope_bps": 2 * 2**20, "slope_low_bps": 1.9 * 2**20,
                       "rise_bytes": 90 * 2**20, "last_bytes": 200 * 2**20,
                       "limit_bytes": 256 * 2**20, "seconds_to_limit": 28.0,
                       "seconds_to_limit_low": 29.5, "horizon_s": 86400.0},
            "preemptions_why": "engine llamacpp exposes no preemption counter",
            "memory_samples": [[T0 + i, 100] for i in range(60)]}
    (tmp_path / "run.json").write_text(json.dumps({
        "scenario": "soak", "node": "llama",
        "fault_result": {"soak": soak, "rate": 10.0, "seconds": 60.0},
        "fault": {"kind": "soak", "params": {}, "describe": "soak"}}))
    md = render_incident(tmp_path).read_text()
    section = md.split("## Soak", 1)[1].split("\n## ", 1)[0]
    assert "60.0 s of open-loop load at 10.0 req/s; 60 memory samples" in section
    assert "| slope | 2048.0 KiB/s |" in section
    assert "| time to the limit at the lower bound | 0.01 h |" in section
    assert "| horizon | 24 h |" in section
    assert "no preemption counter" in section
