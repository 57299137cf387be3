"""slo.budget: window parsing, chaos-run discovery, review arithmetic on a fake Prometheus."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from faultkit.inventory import parse_inventory
from slo.budget import chaos_runs, format_table, parse_window, review
from slo.prom import Alert

INVENTORY = """
prometheus: {url: "http://127.0.0.1:9"}
slo: {availability: 0.99}
nodes:
  - {name: v, engine: vllm, base_url: "http://127.0.0.1:1", model: m, prometheus: {job: v}}
  - {name: l, engine: llamacpp, base_url: "http://127.0.0.1:2", model: m,
     prometheus: {job: l}}
"""


class FakeProm:
    """Answers error-ratio queries by window; request increase by a fixed total."""

    url = "http://fake:9090"

    def __init__(self, ratios: dict[str, float | None], total: float) -> None:
        self.ratios, self.total = ratios, total
        self.asked: list[str] = []

    def require_ready(self) -> None:
        pass

    def alerts(self) -> list[Alert]:
        return [Alert("FaultkitNodeDown", "firing", {"alertname": "FaultkitNodeDown",
                                                    "node": "v"}, {}, 1.0, 1.0),
                Alert("Other", "pending", {"alertname": "Other", "node": "v"}, {}, 1.0, 1.0)]

    def query_value(self, promql: str, t: float | None = None) -> float | None:
        self.asked.append(promql)
        if promql.startswith("sum(increase(http_requests_total"):
            return self.total
        if "min_over_time(timestamp(" in promql:  # the history Prometheus holds
            return None
        windows = set(re.findall(r"\[(\w+)\]", promql))
        (window,) = windows
        return self.ratios.get(window)


def test_parse_window() -> None:
    assert parse_window("30d") == 30 * 86400
    assert parse_window("2w") == 14 * 86400
    with pytest.raises(ValueError, match="30d"):
        parse_window("30 days")


def write_run(root: Path, name: str, t: float, lost: int | None, node: str = "v") -> None:
    path = root / name
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps({"scenario": "kill", "node": node, "t_start": t}))
    if lost is not None:
        (path / "measurement.json").write_text(json.dumps({"node": node, "lost_total": lost,
                                                           "t_inject": t + 5}))


def test_chaos_runs_in_window_only(tmp_path: Path) -> None:
    write_run(tmp_path, "a-old", 100.0, 3)
    write_run(tmp_path, "b-in", 1000.0, 7)
    write_run(tmp_path, "c-in-unmeasured", 1500.0, None)
    (tmp_path / "d-torn").mkdir()
    (tmp_path / "d-torn" / "run.json").write_text("{")
    runs = chaos_runs(tmp_path, 500.0, 2000.0)
    assert [(Path(r["run_dir"]).name, r["lost"]) for r in runs] == [("b-in", 7),
                                                                     ("c-in-unmeasured", None)]
    assert chaos_runs(tmp_path / "missing", 0, 1) == []


def test_review_math_alerts_and_run_cost(tmp_path: Path) -> None:
    inventory = parse_inventory(INVENTORY)
    ratios = {"30d": 0.002, "5m": 0.5, "1h": 0.2, "30m": 0.0, "6h": 0.05, "2h": 0.0,
              "1d": 0.01, "3d": None}
    prom = FakeProm(ratios, total=10_000)
    write_run(tmp_path, "r1", 5_000.0, 20)
    data = review(inventory, prom, runs_dir=tmp_path, now=10_000.0)  # type: ignore[arg-type]
    v, llama = data["nodes"]
    avail = v["slos"][0]
    assert avail["slo"] == "availability"
    assert avail["sli"] == pytest.approx(0.998)
    assert avail["budget_total"] == pytest.approx(0.01)
    assert avail["budget_spent_fraction"] == pytest.approx(0.2)
    assert avail["budget_remaining_fraction"] == pytest.approx(0.8)
    assert avail["burn_rates"] == pytest.approx({"1h": 20.0, "6h": 5.0, "1d": 1.0, "3d": None})
    assert avail["would_fire"] == ["page 1h/5m > 14.4"]  # 6h leg: 5 < 6; ticket legs: short 0
    assert avail["alerts_firing_now"] == ["FaultkitNodeDown"]
    assert avail["weighting"] == "occurrences"
    assert "scrapes" in llama["slos"][0]["note"]  # llama.cpp: time-based fallback, said so
    assert [s["slo"] for s in llama["slos"]] == ["availability"]
    (run,) = data["chaos_runs"]
    assert run["budget_spent_fraction"] == pytest.approx(20 / (0.01 * 10_000))
    table = format_table(data)
    assert "availability" in table
    assert "FaultkitNodeDown" in table
    assert "20.0%" in table


def test_no_data_is_none_never_zero(tmp_path: Path) -> None:
    prom = FakeProm({}, total=0)
    data = review(parse_inventory(INVENTORY), prom, now=1.0)  # type: ignore[arg-type]
    avail = data["nodes"][0]["slos"][0]
    assert avail["sli"] is None
    assert avail["budget_spent_fraction"] is None
    assert "no data" in avail["note"]
    assert "—" in format_table(data)
