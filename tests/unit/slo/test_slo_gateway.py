"""The LiteLLM gateway's metric profile: what follows from it (rules, queries, SLOs).

The names themselves are checked against a real proxy's /metrics/ in
tests/integration/test_litellm_gateway.py; here, that the rules built from them are valid
and expose the SLOs the profile supports (TTFT and E2E histograms, request and error
counters; no ITL).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from faultkit.inventory import parse_inventory
from slo.profiles import PROFILES, NodeQueries, profile_for
from slo.rules import render_rules, rule_groups
from tests.unit.slo_helpers import promtool

INVENTORY = """
prometheus: {url: http://127.0.0.1:9}
nodes:
  - {name: simv, engine: sim, personality: vllm, base_url: "http://127.0.0.1:2", model: m,
     prometheus: {job: simv}}
  - name: gw
    kind: gateway
    engine: litellm
    base_url: http://127.0.0.1:4000
    model: chat
    health_path: /health/readiness
    upstreams: [simv]
    prometheus: {job: gw}
    slo: {ttft_s: 2.0}     # a bucket boundary of LiteLLM's TTFT histogram
"""


def test_a_gateway_node_gets_the_litellm_profile() -> None:
    inventory = parse_inventory(INVENTORY)
    gw = inventory.node("gw")
    assert profile_for(gw) is PROFILES["litellm"]
    queries = NodeQueries.for_node(gw)
    assert queries is not None
    catalogue = queries.catalogue()
    assert catalogue["requests_rate"] == (
        'sum(rate(litellm_proxy_total_requests_metric_total{job="gw",'
        'route=~"(/v1)?/(chat/)?completions"}[1m]))'
    )
    assert 'exception_status!~"4.."' in catalogue["errors_rate"]
    assert "kv_usage" not in catalogue and "waiting" not in catalogue
    # the upstream's side: the gateway's attempts (retries included) per upstream
    assert catalogue["upstream_attempts_rate"] == (
        'sum by (model_id) (rate(litellm_deployment_total_requests_total{job="gw"}[1m]))'
    )
    assert catalogue["upstream_failures_rate"].startswith(
        "sum by (model_id) (rate(litellm_deployment_failure_responses_total{")
    engine = NodeQueries.for_node(inventory.node("simv"))
    assert engine is not None and "upstream_attempts_rate" not in engine.catalogue()


def test_rules_for_a_gateway_pass_promtool(tmp_path: Path) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(render_rules(parse_inventory(INVENTORY, source="inv.yaml")))
    result = subprocess.run([promtool(), "check", "rules", str(path)],
                            capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_gateway_has_the_slos_its_metrics_support() -> None:
    names = [g["name"] for g in rule_groups(parse_inventory(INVENTORY))]
    assert "faultkit-node-gw" in names
    assert "sloth-slo-sli-recordings-gw-ttft" in names
    assert "sloth-slo-sli-recordings-gw-availability" in names
    assert "sloth-slo-sli-recordings-gw-itl" not in names  # no ITL histogram
