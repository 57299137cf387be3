"""A stalled engine on the testbed, without the stall alert: the lab's simulated vLLM
node's engine core SIGSTOPped under load past its detection objective (as test_engine_stall
holds it), watched by a Prometheus of the test's own that scrapes the node and the lab's
generation probe and loads every faultkit rule but ``FaultkitEngineStalled``. Nothing else
sees a stall — ``/health`` answers 200, scrapes answer — so nothing fires while it lasts
(the latency burn of the users the SIGCONT releases may fire after it, too late), and the
run FAILs on detection. The evidence is the simulator's own truth file (the stall it
recorded, the readiness answers it wrote during it) and that Prometheus's own ``up``
series, not what faultkit measured. (With the alert loaded, the catalogue's
``test_engine_stall[sim-vllm]`` passes: tests/e2e.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from faultkit.experiment import Experiment
from faultkit.inventory import Inventory
from faultkit.load.profile import LoadProfile
from faultkit.rundir import RunDir
from scenarios.test_engine_stall import PAST_OBJECTIVE_S, STALL_USERS
from slo.prom import Prometheus
from slo.rules import render_rules
from testbed.scratch import free_port
from testbed.truth_sources import truth_events
from tests.integration.harness_chaos_support import PrivatePrometheus

pytestmark = pytest.mark.docker

NODE = "sim-vllm"


def _without(rules_yaml: str, alert: str) -> str:
    data = yaml.safe_load(rules_yaml)
    for group in data["groups"]:
        group["rules"] = [r for r in group["rules"] if r.get("alert") != alert]
    return yaml.safe_dump(data, sort_keys=False)


@pytest.fixture
def no_stall_alert(lab_inventory: Inventory, tmp_path: Path) -> Iterator[Inventory]:
    """The lab's node alone, judged by a private Prometheus without the stall alert (and
    without Alertmanager: this test pages no one)."""
    prometheus = lab_inventory.prometheus.model_copy(
        update={"url": f"http://127.0.0.1:{free_port()}"})
    inventory = lab_inventory.model_copy(update={
        "prometheus": prometheus, "alertmanager": None,
        "nodes": [lab_inventory.node(NODE)]})
    private = PrivatePrometheus(inventory, tmp_path / "prometheus")
    rules = render_rules(inventory)
    assert "FaultkitEngineStalled" in rules  # what this test takes away
    (private.directory / "rules.yml").write_text(_without(rules, "FaultkitEngineStalled"))
    private.start()
    try:
        deadline = time.monotonic() + 30
        while not private.has_target_up(NODE):
            assert time.monotonic() < deadline, "the private Prometheus never scraped the node"
            time.sleep(0.5)
        time.sleep(3)  # a few samples before the baseline
        yield inventory
    finally:
        private.stop()


async def test_a_stall_nothing_alerts_on_is_not_detected_and_fails(
    no_stall_alert: Inventory, tmp_path: Path
) -> None:
    inventory = no_stall_alert
    node = inventory.node(NODE)
    # the scenario's users, who wait the stall out: no error tells on it either
    experiment = Experiment(scenario="engine_stall-without-its-alert", node=node,
                            inventory=inventory,
                            load_profile=LoadProfile.from_string(STALL_USERS,
                                                                 reuse_connections=False),
                            run=RunDir.create(tmp_path / "runs", "engine_stall", NODE))
    hold_s = inventory.slo_for(node).detection_s_max + PAST_OBJECTIVE_S
    t0 = time.time()
    try:
        m = await experiment.run_fault("stall", hold_s=hold_s, baseline_s=3.0,
                                       params={"match": node.engine_process_pattern})
        verdict = experiment.check()
    finally:
        experiment.finalize()
    context = f"{experiment.run.path}: {verdict.summary()}"
    assert verdict.outcome == "FAIL", context
    detection = next(c for c in verdict.checks if c.name == "detection")
    assert not detection.passed, context
    # nothing saw the stall while it lasted: whatever fired, fired after the SIGCONT
    assert m.t_detect is None or (m.t_revert is not None and m.t_detect > m.t_revert), context
    # the simulator's own account: its engine stalled when faultkit says the fault took
    # effect, and its API answered readiness probes 200 all through the stall
    truth = truth_events(node, t0)
    stalls = [e for e in truth if e["event"] == "engine_stalled"]
    resumed = [e["t"] for e in truth if e["event"] == "engine_resumed"]
    assert stalls and resumed, context
    since, back = stalls[0]["since"], min(t for t in resumed if t > stalls[0]["t"])
    assert m.t_effect is not None and abs(m.t_effect - since) < 0.1, (m.t_effect, since)
    answered = [e["t"] for e in truth if e["event"] == "health_ok" and since < e["t"] < back]
    assert back - since >= hold_s - 1 and len(answered) >= (back - since) / 2, answered
    # and Prometheus never lost the node: every scrape of the stall answered
    ups = Prometheus(inventory.prometheus.url).query_range(
        f'up{{job="{node.prometheus.job}"}}', since, back, 1.0)  # type: ignore[union-attr]
    values = [v for series in ups for _, v in series.values]
    assert values and min(values) == 1.0, ups
