# ruff: noqa: E501 -- the promtool test YAML keeps its long label lines verbatim
"""slo.rules: the generated file passes `promtool check rules` and its alerts fire as meant.

`promtool test rules` evaluates the rules on synthetic series (no Prometheus server):
NodeDown fires on the first evaluation after up drops to 0, the TTFT bucket-ratio SLI
matches both `le="1"` (Prometheus 2 as exported) and `le="2.50"`/`"1.0"`-style labels, and
the page burn-rate alert fires on a total outage.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from faultkit.errors import InventoryError
from faultkit.inventory import parse_inventory
from slo.profiles import le_matcher
from slo.rules import render_rules, rule_groups
from tests.unit.slo_helpers import promtool, slo_inventory

INVENTORY = slo_inventory()


@pytest.fixture
def promtool_path() -> str:
    return promtool()



@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yml"
    path.write_text(render_rules(parse_inventory(INVENTORY, source="inv.yaml")))
    return path


def test_promtool_check_rules_passes(rules_file: Path, promtool_path: str) -> None:
    result = subprocess.run([promtool_path, "check", "rules", str(rules_file)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_groups_names_and_labels() -> None:
    groups = rule_groups(parse_inventory(INVENTORY))
    names = [g["name"] for g in groups]
    assert "faultkit-node-llama" in names
    assert "sloth-slo-sli-recordings-simv-ttft" in names
    assert not any("dark" in n for n in names)  # not scraped: no rules
    assert "sloth-slo-sli-recordings-llama-ttft" not in names  # llama.cpp: no histograms
    down = groups[0]["rules"][0]
    assert down["alert"] == "FaultkitNodeDown"
    assert down["expr"] == 'up{job="llama"} == 0'
    assert down["labels"]["node"] == "llama"
    recs = next(g for g in groups if g["name"] == "sloth-slo-sli-recordings-sg-availability")
    assert [r["record"] for r in recs["rules"]] == [
        f"slo:sli_error:ratio_rate{w}" for w in ("5m", "30m", "1h", "2h", "6h", "1d", "3d", "30d")
    ]
    assert recs["rules"][0]["labels"] == {"sloth_id": "sg-availability", "sloth_service": "sg",
                                          "sloth_slo": "availability", "node": "sg",
                                          "sloth_window": "5m"}


def test_le_matcher_forms() -> None:
    assert le_matcher(2.5) == 'le=~"2\\\\.50*"'
    assert le_matcher(1) == 'le=~"1(\\\\.0*)?"'


UNIT_TEST = """
rule_files: [RULES]
evaluation_interval: 1s
tests:
  - interval: 1s
    input_series:
      - series: 'llamacpp:n_decode_total{job="llama", instance="a"}'
        values: '10 20 30 2 5 9 12 15 18 21 24 27 30 33 36 39'
      - series: 'process_start_time_seconds{job="sg", instance="b"}'
        values: '100 100 100 100 100 200 200 200 200 200 200 200 200 200 200 200 200'
    alert_rule_test:
      - eval_time: 2s
        alertname: FaultkitNodeRestarted
        exp_alerts: []
      - eval_time: 3s
        alertname: FaultkitNodeRestarted
        exp_alerts:
          - exp_labels: {node: llama, job: llama, severity: page}
            exp_annotations:
              summary: 'llama: the engine process restarted (within the last 10s)'
      - eval_time: 5s
        alertname: FaultkitNodeRestarted
        exp_alerts:
          - exp_labels: {node: llama, job: llama, severity: page}
            exp_annotations:
              summary: 'llama: the engine process restarted (within the last 10s)'
          - exp_labels: {node: sg, job: sg, severity: page}
            exp_annotations:
              summary: 'sg: the engine process restarted (within the last 10s)'
      - eval_time: 13s
        alertname: FaultkitNodeRestarted
        exp_alerts:
          - exp_labels: {node: sg, job: sg, severity: page}
            exp_annotations:
              summary: 'sg: the engine process restarted (within the last 10s)'
      - eval_time: 15s
        alertname: FaultkitNodeRestarted
        exp_alerts: []
  - interval: 1s
    input_series:
      - series: 'up{job="llama", instance="a"}'
        values: '1 1 1 0 0 0 1 1'
    alert_rule_test:
      - eval_time: 2s
        alertname: FaultkitNodeDown
        exp_alerts: []
      - eval_time: 3s
        alertname: FaultkitNodeDown
        exp_alerts:
          - exp_labels: {node: llama, job: llama, instance: a, severity: page}
            exp_annotations:
              summary: 'llama: Prometheus cannot scrape llama (up == 0)'
      - eval_time: 6s
        alertname: FaultkitNodeDown
        exp_alerts: []
  - interval: 1s
    input_series:
      - series: 'vllm:time_to_first_token_seconds_bucket{job="simv", model_name="m", le="1"}'
        values: '0+8x600'
      - series: 'vllm:time_to_first_token_seconds_count{job="simv", model_name="m"}'
        values: '0+10x600'
      - series: 'sglang:time_to_first_token_seconds_bucket{job="sg", le="2.50"}'
        values: '0+9x600'
      - series: 'sglang:time_to_first_token_seconds_bucket{job="sg", le="25"}'
        values: '0+10x600'
      - series: 'sglang:time_to_first_token_seconds_count{job="sg"}'
        values: '0+10x600'
    promql_expr_test:
      - expr: 'round(slo:sli_error:ratio_rate5m{sloth_slo="ttft"}, 0.001)'
        eval_time: 5m
        exp_samples:
          - labels: '{sloth_id="simv-ttft", sloth_service="simv", sloth_slo="ttft", node="simv", sloth_window="5m"}'
            value: 0.2
          - labels: '{sloth_id="sg-ttft", sloth_service="sg", sloth_slo="ttft", node="sg", sloth_window="5m"}'
            value: 0.1
"""

BURN_TEST = """
rule_files: [RULES]
evaluation_interval: 30s
tests:
  - interval: 10s
    input_series:
      - series: 'up{job="llama", instance="a"}'
        values: '0x100'
    alert_rule_test:
      - eval_time: 10m
        alertname: FaultkitSLOBurn
        exp_alerts:
          - exp_labels: {sloth_id: llama-availability, sloth_service: llama, node: llama,
                         sloth_slo: availability, sloth_severity: page, severity: page,
                         job: llama}
            exp_annotations:
              summary: 'llama: availability error budget burning (page): 99.00% of scrapes succeed (node up)'
          - exp_labels: {sloth_id: llama-availability, sloth_service: llama, node: llama,
                         sloth_slo: availability, sloth_severity: ticket, severity: ticket,
                         job: llama}
            exp_annotations:
              summary: 'llama: availability error budget burning (ticket): 99.00% of scrapes succeed (node up)'
"""


#: simv's engine stops at 10 s under load (its running gauge frozen at 1, its token counters
#: flat), and again at 10 s while idle (only the generation probe, timing out, sees it);
#: a probe refused with 503 (loading) or a node that stopped answering scrapes is no stall
STALL_SUMMARY = ("simv: the engine generated no token for 15s while requests waited on it "
                 "(or a generation probe got no answer) — it answers scrapes but makes no "
                 "progress")
STALL_TEST = f"""
rule_files: [RULES]
evaluation_interval: 1s
tests:
  - interval: 1s
    input_series:
      - series: 'up{{job="simv", model_name="m", instance="a"}}'
        values: '1x60'
      - series: 'vllm:num_requests_running{{job="simv", model_name="m"}}'
        values: '1x60'
      - series: 'vllm:num_requests_waiting{{job="simv", model_name="m"}}'
        values: '0x60'
      - series: 'vllm:generation_tokens_total{{job="simv", model_name="m"}}'
        values: '0+20x10 200x50'
      - series: 'vllm:prompt_tokens_total{{job="simv", model_name="m"}}'
        values: '0+5x10 50x50'
    alert_rule_test:
      - eval_time: 24s
        alertname: FaultkitEngineStalled
        exp_alerts: []
      - eval_time: 26s
        alertname: FaultkitEngineStalled
        exp_alerts:
          - exp_labels: {{node: simv, job: simv, severity: page}}
            exp_annotations: {{summary: "{STALL_SUMMARY}"}}
  - interval: 1s
    input_series:
      - series: 'up{{job="simv", model_name="m", instance="a"}}'
        values: '1x60'
      - series: 'vllm:num_requests_running{{job="simv", model_name="m"}}'
        values: '0x60'
      - series: 'vllm:num_requests_waiting{{job="simv", model_name="m"}}'
        values: '0x60'
      - series: 'vllm:generation_tokens_total{{job="simv", model_name="m"}}'
        values: '0+1x10 10x50'
      - series: 'vllm:prompt_tokens_total{{job="simv", model_name="m"}}'
        values: '0+1x10 10x50'
      - series: 'probe_success{{job="faultkit-generate-probe", node="simv", instance="p"}}'
        values: '1x10 0x50'
      - series: 'probe_http_status_code{{job="faultkit-generate-probe", node="simv", instance="p"}}'
        values: '200x10 0x50'
    alert_rule_test:
      - eval_time: 24s
        alertname: FaultkitEngineStalled
        exp_alerts: []
      - eval_time: 26s
        alertname: FaultkitEngineStalled
        exp_alerts:
          - exp_labels: {{node: simv, job: simv, severity: page}}
            exp_annotations: {{summary: "{STALL_SUMMARY}"}}
  - interval: 1s
    input_series:
      - series: 'up{{job="simv", model_name="m", instance="a"}}'
        values: '1x30 0x30'
      - series: 'vllm:num_requests_running{{job="simv", model_name="m"}}'
        values: '0x60'
      - series: 'vllm:num_requests_waiting{{job="simv", model_name="m"}}'
        values: '0x60'
      - series: 'vllm:generation_tokens_total{{job="simv", model_name="m"}}'
        values: '0x60'
      - series: 'vllm:prompt_tokens_total{{job="simv", model_name="m"}}'
        values: '0x60'
      - series: 'probe_success{{job="faultkit-generate-probe", node="simv", instance="p"}}'
        values: '0x60'
      - series: 'probe_http_status_code{{job="faultkit-generate-probe", node="simv", instance="p"}}'
        values: '503x30 0x30'
    alert_rule_test:
      # loading (the probe refused with 503), then down (no scrape): neither is a stall
      - eval_time: 25s
        alertname: FaultkitEngineStalled
        exp_alerts: []
      - eval_time: 45s
        alertname: FaultkitEngineStalled
        exp_alerts: []
"""


def test_promtool_unit_tests_node_down_bucket_ratio_and_burn(
    rules_file: Path, promtool_path: str
) -> None:
    for name, text in (("test.yml", UNIT_TEST), ("burn.yml", BURN_TEST),
                       ("stall.yml", STALL_TEST)):
        test_file = rules_file.parent / name
        test_file.write_text(text.replace("RULES", rules_file.name))
        yaml.safe_load(test_file.read_text())
        result = subprocess.run([promtool_path, "test", "rules", name], cwd=rules_file.parent,
                                capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


#: llama's NodeDown as an operator writes it (for: 1m); sg's at faultkit's 0s
FOR_INVENTORY = INVENTORY.replace(
    "prometheus: {job: llama}}", "prometheus: {job: llama, alert_for: {FaultkitNodeDown: 1m}}}")
FOR_TEST = """
rule_files: [RULES]
evaluation_interval: 1s
tests:
  - interval: 1s
    input_series:
      - series: 'up{job="llama"}'
        values: '1 0x30 1x40 0x80'
      - series: 'up{job="sg"}'
        values: '1 0x30 1x40 0x80'
    alert_rule_test:
      # a 30 s outage: sg pages at once, llama's 1-minute for: outlasts it and never fires
      - eval_time: 5s
        alertname: FaultkitNodeDown
        exp_alerts:
          - exp_labels: {node: sg, job: sg, severity: page}
            exp_annotations: {summary: 'sg: Prometheus cannot scrape sg (up == 0)'}
      - eval_time: 40s
        alertname: FaultkitNodeDown
        exp_alerts: []
      # a longer one: llama fires once up has been 0 for a minute
      - eval_time: 130s
        alertname: FaultkitNodeDown
        exp_alerts:
          - exp_labels: {node: sg, job: sg, severity: page}
            exp_annotations: {summary: 'sg: Prometheus cannot scrape sg (up == 0)'}
      - eval_time: 133s
        alertname: FaultkitNodeDown
        exp_alerts:
          - exp_labels: {node: llama, job: llama, severity: page}
            exp_annotations: {summary: 'llama: Prometheus cannot scrape llama (up == 0)'}
          - exp_labels: {node: sg, job: sg, severity: page}
            exp_annotations: {summary: 'sg: Prometheus cannot scrape sg (up == 0)'}
"""


def test_a_nodes_alert_for_is_written_and_the_command_line_overrides_it() -> None:
    def fors(alert_for: dict[str, str] | None = None) -> dict[tuple[str, str], str]:
        groups = rule_groups(parse_inventory(FOR_INVENTORY), alert_for=alert_for)
        return {(r["labels"]["node"], r["alert"]): r["for"] for g in groups
                for r in g["rules"] if "alert" in r and "for" in r}

    inventory_only = fors()
    assert inventory_only[("llama", "FaultkitNodeDown")] == "1m"
    assert inventory_only[("simv", "FaultkitNodeDown")] == "0s"
    assert inventory_only[("llama", "FaultkitNodeRestarted")] == "0s"
    overridden = fors({"FaultkitNodeDown": "2m", "FaultkitSLOBurn": "5m"})
    assert {overridden[(n, "FaultkitNodeDown")] for n in ("llama", "simv", "sg")} == {"2m"}
    assert overridden[("simv", "FaultkitSLOBurn")] == "5m"


def test_promtool_a_for_outlasting_the_outage_never_fires(tmp_path: Path,
                                                          promtool_path: str) -> None:
    (tmp_path / "rules.yml").write_text(render_rules(parse_inventory(FOR_INVENTORY)))
    (tmp_path / "for.yml").write_text(FOR_TEST.replace("RULES", "rules.yml"))
    result = subprocess.run([promtool_path, "test", "rules", "for.yml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("alert_for", "message"), [
    ("{FaultkitNodeUp: 1m}", "no faultkit alert 'FaultkitNodeUp'"),
    ("{FaultkitNodeDown: 1.5m}", "not a Prometheus duration"),
])
def test_an_unknown_alert_or_duration_in_alert_for_is_bad_input(alert_for: str,
                                                                message: str) -> None:
    with pytest.raises(InventoryError, match=message):
        parse_inventory(INVENTORY.replace("prometheus: {job: llama}}",
                                          f"prometheus: {{job: llama, alert_for: {alert_for}}}}}"))
