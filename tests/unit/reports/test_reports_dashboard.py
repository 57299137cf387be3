"""`faultkit dashboard`: a Grafana dashboard JSON built from the same SLO definitions as
`faultkit rules`, with the fields Grafana requires, PromQL that promtool parses, and the
chaos runs of the run directories as annotations."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from faultkit.cli import cli
from faultkit.inventory import Inventory, parse_inventory
from slo.dashboard import DATASOURCE, RunAnnotation, build_dashboard, chaos_runs_expr, exprs
from slo.rules import SLI_WINDOWS, rule_groups
from slo.spec import ratio_slos
from tests.unit.reports_helpers import RUNS
from tests.unit.slo_helpers import promtool, slo_inventory

INVENTORY = slo_inventory(window_days=7)


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    return parse_inventory(INVENTORY, source="inv.yaml")


@pytest.fixture(scope="module")
def board(inventory: Inventory) -> dict[str, Any]:
    runs = [RunAnnotation(1767268780.0, 1767268840.0, 'kill on simv: PASS; lost 19 "$x"',
                          "simv", "kill", "PASS")]
    return build_dashboard(inventory, runs)


def _panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in board["panels"] if p["type"] != "row"]


def test_has_the_fields_grafana_requires(board: dict[str, Any]) -> None:
    assert board["title"] and board["uid"]
    assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    for panel in board["panels"]:
        assert panel["type"] and panel["title"]
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
    for panel in _panels(board):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
        assert panel["targets"]
        for target in panel["targets"]:
            assert target["expr"] and target["refId"] and target["datasource"] == DATASOURCE
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    node = variables["node"]
    assert node["query"].split(",") == ["llama", "simv", "sg"]  # "dark" is not scraped
    assert node["includeAll"] and node["multi"]
    annotations = board["annotations"]["list"]
    assert annotations[0]["builtIn"] == 1
    assert [a["name"] for a in annotations[1:]] == ["Faultkit alerts firing", "Chaos runs"]
    for annotation in annotations:
        assert annotation["datasource"] and annotation["enable"] is True


def test_panels_do_not_overlap(board: dict[str, Any]) -> None:
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, panel["title"]
        cells |= mine


def test_every_slo_of_every_node_has_its_panels(inventory: Inventory,
                                                board: dict[str, Any]) -> None:
    text = "\n".join(exprs(board))
    for node in inventory.nodes:
        slos = ratio_slos(node, inventory.slo_for(node))
        if node.prometheus is None:
            assert f'"{node.name}-' not in text
            continue
        assert f'ALERTS{{alertname=~"Faultkit.*", node="{node.name}"}}' in text
        period = f"{inventory.slo_for(node).window_days}d"
        for slo in slos:
            sel = f'{{sloth_id="{node.name}-{slo.name}"}}'
            assert f"1 - slo:sli_error:ratio_rate{period}{sel}" in text
            assert f"slo:period_error_budget_remaining:ratio{sel}" in text
            for window in SLI_WINDOWS:
                assert f"slo:sli_error:ratio_rate{window}{sel} / {slo.budget:.6g}" in text
    titles = [p["title"] for p in board["panels"]]
    assert "simv: Faultkit alerts" in titles and "llama: availability: SLI over 30d" in titles
    assert "simv: ttft: burn rate (× budget)" in titles and "simv: itl: SLI over 7d" in titles
    assert not [t for t in titles if t.startswith("llama: ttft")]  # llama.cpp: no histograms
    # every scraped engine shows whether it makes progress, with the probe the stall
    # alert reads; the unscraped node has no panel
    scraped = [n.name for n in inventory.nodes if n.prometheus is not None]
    assert [t for t in titles if t.endswith(": engine progress")] == [
        f"{name}: engine progress" for name in scraped]
    assert 'min(probe_success{job="faultkit-generate-probe", node="simv"})' in text


def test_every_recording_it_reads_is_one_faultkit_rules_writes(
    inventory: Inventory, board: dict[str, Any]
) -> None:
    written = {
        (rule["record"], rule["labels"]["sloth_id"])
        for group in rule_groups(inventory)
        for rule in group["rules"]
        if "record" in rule and "sloth_id" in rule.get("labels", {})
    }
    read = set(re.findall(r'(slo:[a-z_:0-9]+)\{sloth_id="([^"]+)"\}', "\n".join(exprs(board))))
    assert read and read <= written, read - written


def test_every_expression_parses_with_promtool(board: dict[str, Any], tmp_path: Path) -> None:
    binary = promtool()
    rules = [{"record": f"faultkit:dashboard_expr_{i}:check", "expr": expr}
             for i, expr in enumerate(exprs(board))]
    assert len(rules) > 40
    path = tmp_path / "dashboard-exprs.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]},
                                   width=1_000_000, allow_unicode=True))
    result = subprocess.run([binary, "check", "rules", str(path)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


CHAOS_TEST = """
rule_files: [chaos.yml]
evaluation_interval: 10s
tests:
  - interval: 10s
    input_series: []
    promql_expr_test:
      - {expr: chaos:run, eval_time: 50s, exp_samples: []}
      - expr: chaos:run
        eval_time: 90s
        exp_samples:
          - labels: >-
              chaos:run{run="kill on n: PASS 1 \\"q\\"", node="n", scenario="kill",
              verdict="PASS"}
            value: 90
      - {expr: chaos:run, eval_time: 150s, exp_samples: []}
      - expr: chaos:run
        eval_time: 210s
        exp_samples:
          - labels: 'chaos:run{run="oom on m: FAIL", node="m", scenario="oom", verdict="FAIL"}'
            value: 210
"""


def test_chaos_run_annotation_holds_exactly_while_each_run_lasts(tmp_path: Path) -> None:
    """Evaluated by promtool: the annotation query has a series inside each run only."""
    binary = promtool()
    expr = chaos_runs_expr([
        RunAnnotation(60, 120, 'kill on n: PASS $1 "q"', "n", "kill", "PASS"),
        RunAnnotation(200, 230, "oom on m: FAIL", "m", "oom", "FAIL"),
    ])
    assert expr is not None and "$" not in expr
    (tmp_path / "chaos.yml").write_text(yaml.safe_dump(
        {"groups": [{"name": "c", "interval": "10s",
                     "rules": [{"record": "chaos:run", "expr": expr}]}]}, width=1_000_000))
    (tmp_path / "test.yml").write_text(CHAOS_TEST)
    result = subprocess.run([binary, "test", "rules", "test.yml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert chaos_runs_expr([]) is None


def _runs_dir(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for name in ("pass-kill", "bad-input"):
        shutil.copytree(RUNS / name, root / f"20260101T115940.000Z-{name}")
    return root


def test_command_writes_the_dashboard_with_the_runs(tmp_path: Path) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    out = tmp_path / "dash.json"
    result = CliRunner().invoke(cli, ["dashboard", "--inventory", str(inv), "-o", str(out),
                                      "--runs-dir", str(_runs_dir(tmp_path))])
    assert result.exit_code == 0, result.output
    assert "2 chaos runs" in result.output
    board = json.loads(out.read_text())
    chaos = board["annotations"]["list"][-1]
    assert chaos["name"] == "Chaos runs" and chaos["textFormat"] == "{{run}}"
    run = json.loads((RUNS / "pass-kill" / "run.json").read_text())
    assert f"(vector(time()) >= {run['t_start']:.3f}) <= {run['t_end']:.3f}" in chaos["expr"]
    assert ('"kill on sim-vllm-a: PASS; detection 4.0 s (alert); recovery 8.3 s; lost 19 '
            '(20260101T115940.000Z-pass-kill)"') in chaos["expr"]
    assert '"bad_input on llama: PASS; no outage (request-level fault); lost 0' in chaos["expr"]
    # stdout, and no runs directory: no chaos-run annotation, still a dashboard
    result = CliRunner().invoke(cli, ["dashboard", "--inventory", str(inv),
                                      "--runs-dir", str(tmp_path / "none")])
    assert result.exit_code == 0, result.output
    names = [a["name"] for a in json.loads(result.output)["annotations"]["list"]]
    assert "Chaos runs" not in names


def test_command_on_the_testbed_inventory_parses(tmp_path: Path) -> None:
    out = tmp_path / "dash.json"
    result = CliRunner().invoke(cli, ["dashboard", "-o", str(out),
                                      "--runs-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    board = json.loads(out.read_text())
    assert len(_panels(board)) >= 10
