"""The scenario suite against the testbed, judged: the *verdicts* must be the expected ones.

A harness that passes everything is broken, so the expectations include failures and
known findings: real findings on the lab's engines (accepted in the testbed inventory, so
they read ACCEPTED) and known-bad serving configs that must be caught. Each expectation
names why. The suite runs once per session (``pytest scenarios`` subprocesses, exactly
as a user runs them: lanes side by side, each gateway after its upstreams' lanes, then
the exclusive pass —
:func:`tests.e2e.scenario_suite.run_scenario_lanes`; the session fixture ``suite_run``
in ``conftest.py``), plus targeted runs for a known-bad config and the gate.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from faultkit.constants import LABEL_OWNER, LABEL_SERVING_CONFIG, LOCAL_DOCKER
from faultkit.docker.containers import LAST_WORDS_MAX
from faultkit.docker.host import DockerHost
from faultkit.inventory import Inventory, Node
from testbed.lab import Lab
from tests.e2e.conftest import REPO, SuiteRun, run_cli
from tests.e2e.expected_verdicts import (
    expected_accepted,
    expected_to_fail,
    unexpected_verdicts,
)
from tests.e2e.known_good_gate import GATE_STEADY_S, PlantedGate
from tests.e2e.scenario_suite import Outcome, run_scenarios

#: the module's first test runs the whole scenario suite (≈ 14 min here) in its fixture
pytestmark = [pytest.mark.docker, pytest.mark.timeout(3600)]

def serving_config_label(inventory: Inventory, node_name: str) -> str | None:
    node = inventory.node(node_name)
    assert node.docker is not None
    return (
        DockerHost(node.docker.host)
        .state(node.docker.container)
        .labels.get(LABEL_SERVING_CONFIG)
    )


@pytest.fixture(scope="module")
def suite(suite_run: SuiteRun) -> tuple[int, dict[str, Outcome], str]:
    return suite_run.code, suite_run.outcomes, suite_run.output


def test_every_scenario_has_its_expected_verdict(
    suite: tuple[int, dict[str, Outcome], str],
) -> None:
    code, outcomes, output = suite
    assert outcomes, f"the scenario suite ran nothing (exit {code}):\n{output}"
    wrong = unexpected_verdicts(outcomes)
    assert not wrong, "\n".join(wrong)
    # no expected failures: the suite exits 0 on a healthy testbed (ACCEPTED counts as a pass)
    assert code == (1 if any(expected_to_fail(t) for t in outcomes) else 0), output


def test_accepted_findings_are_recorded_and_reported(
    suite: tuple[int, dict[str, Outcome], str],
) -> None:
    """An ACCEPTED run's verdict.json names the findings applied; its report says why."""
    _, outcomes, _ = suite
    for test_id, outcome in sorted(outcomes.items()):
        if expected_accepted(test_id) is None or outcome.skipped:
            continue
        assert outcome.run_dir is not None, test_id
        verdict = json.loads((outcome.run_dir / "verdict.json").read_text())
        assert verdict["outcome"] == "ACCEPTED", (test_id, verdict)
        assert [f["check"] for f in verdict["accepted_findings"]] == [
            "malformed_rejected_4xx"
        ], verdict
        report = (outcome.run_dir / "incident.md").read_text()
        assert "Verdict: ACCEPTED** — malformed_rejected_4xx: " in report, test_id
        assert "until 2027-06-30" in report, test_id


def test_every_run_left_an_incident_report(suite: tuple[int, dict[str, Outcome], str]) -> None:
    _, outcomes, _ = suite
    missing = [
        t
        for t, o in outcomes.items()
        if not o.skipped
        and t.split("[")[0] != "test_streams_a_completion"
        and t.split("[")[0] != "test_is_scraped_by_prometheus"
        and (o.run_dir is None or not (o.run_dir / "incident.md").exists())
    ]
    assert not missing, f"no incident.md for: {missing}"


def test_no_figure_in_any_run_directory_is_negative(
    suite: tuple[int, dict[str, Outcome], str],
) -> None:
    """Every duration counts from t_effect: none is negative, and an outage is never 0.0 s."""
    _, outcomes, _ = suite
    bad = []
    for test_id, outcome in sorted(outcomes.items()):
        m = outcome.measurement()
        if m is None:
            continue
        figures = {k: m.get(k) for k in ("detection_s", "recovery_s", "probe_detection_s")}
        figures.update({f"by_signal.{k}": v for k, v in m["detection_by_signal_s"].items()})
        bad += [f"{test_id}: {k} = {v}" for k, v in figures.items() if v is not None and v < 0]
        # The one exception: behind a gateway the only users lost may be the streams the
        # dead upstream was serving at t_effect; everyone arriving from t_effect on is
        # served, so the gateway's recovery is 0.0 s. No outage of the gateway there.
        in_flight_only = (
            test_id.startswith(("test_upstream_failure[", "test_gateway_rollout["))
            and m["lost_total"] <= m["in_flight_at_effect"]
        )
        if m["lost_total"] > 0 and m.get("recovery_s") == 0.0 and not in_flight_only:
            bad.append(f"{test_id}: {m['lost_total']} lost but recovery 0.0 s")
    assert not bad, "\n".join(bad)


def test_a_hang_counts_every_user_who_arrived_during_it(
    suite: tuple[int, dict[str, Outcome], str],
) -> None:
    """8 s of docker pause at 10 req/s: ≈ 80 users arrive; each is lost, shed or slow."""
    _, outcomes, _ = suite
    m = outcomes["test_pause[sim-vllm]"].measurement()
    assert m is not None
    # Poisson arrivals: 80 expected, 3 σ ≈ 27
    assert 53 <= m["affected_total"] <= 120, m
    assert m["slis"]["fault"]["user_ttft_p95_s"] > 5.0, m["slis"]["fault"]


#: The LiteLLM gateway's scenarios: each must run (node_kind("gateway"): no engine scenario
#: runs on it, and test_kill / test_rollout are not parametrised over it).
GATEWAY_IDS = (
    "test_streams_a_completion[gateway]",
    "test_is_scraped_by_prometheus[gateway]",
    "test_gateway_termination[gateway]",
    "test_upstream_failure[gateway-kill]",
    "test_upstream_failure[gateway-pause]",
    "test_upstream_failure[gateway-partition]",
    "test_gateway_rollout[gateway:gateway-bad-upstream]",
)
#: the gateway runs whose upstream (sim-vllm) was failed under its users' load
UPSTREAM_RUNS = (
    "test_upstream_failure[gateway-kill]",
    "test_upstream_failure[gateway-pause]",
    "test_upstream_failure[gateway-partition]",
    "test_gateway_rollout[gateway:gateway-bad-upstream]",
)


def _checks(outcome: Outcome) -> dict[str, dict[str, Any]]:
    assert outcome.run_dir is not None, outcome.test_id
    verdict = json.loads((outcome.run_dir / "verdict.json").read_text())
    return {c["name"]: c for c in verdict["checks"]}


def _route(outcome: Outcome) -> dict[str, Any]:
    assert outcome.run_dir is not None, outcome.test_id
    return dict(json.loads((outcome.run_dir / "route_around.json").read_text()))


def test_the_gateway_ran_only_its_scenarios(
    suite: tuple[int, dict[str, Outcome], str],
) -> None:
    _, outcomes, _ = suite
    ran = sorted(t for t in outcomes if "[gateway" in t)
    assert ran == sorted(GATEWAY_IDS), ran
    for test_id in GATEWAY_IDS:
        assert not outcomes[test_id].skipped, (test_id, outcomes[test_id].message)


def test_the_gateways_own_death_is_an_outage_every_user_sees(
    suite: tuple[int, dict[str, Outcome], str],
) -> None:
    """test_gateway_termination: LiteLLM SIGKILLed under load. Nothing routes around it:
    users are lost (reset or refused), monitoring sees it, Docker brings it back."""
    _, outcomes, _ = suite
    m = outcomes["test_gateway_termination[gateway]"].measurement()
    assert m is not None
    assert m["lost_total"] > 0 and set(m["lost_by_class"]) <= {"reset", "refused", "timeout"}, m
    assert m["detection_s"] is not None and m["recovery_s"] is not None and m["recovery_s"] > 0, m


def test_the_gateway_routed_around_a_killed_upstream_and_sent_it_traffic_again(
    suite: tuple[int, dict[str, Outcome], str],
) -> None:
    """test_upstream_failure[gateway-kill]: sim-vllm dies behind it; at most 3 users lost,
    none but the streams it was serving and at most one whose every attempt landed on it
    (2 retries), no request fails on it for 3 s within
    cooldown (10 s) + 5 s, and it gets traffic again once it is back (within its cooldown
    + a margin); the answers said how often the gateway retried."""
    _, outcomes, _ = suite
    outcome = outcomes["test_upstream_failure[gateway-kill]"]
    routing = _route(outcome)
    assert routing["upstream"] == "sim-vllm", routing
    assert routing["route_around_s"] is not None and routing["route_around_s"] <= 15.0, routing
    assert routing["routed_while_down"] is True, routing
    assert routing["back_in_rotation_s"] is not None and routing["idle_after_back_s"] <= 20, routing
    m = outcome.measurement()
    assert m is not None and m["effect_evidence"] == "docker_event", m
    assert m["lost_total"] <= 3, m
    assert _checks(outcome)["lost_only_cut_streams"]["passed"], _checks(outcome)
    assert outcome.run_dir is not None
    ledger = [json.loads(line) for line in (outcome.run_dir / "ledger.jsonl").open()]
    served = {r["served_by"] for r in ledger if r["status"] == "ok"}
    assert served == {"llama", "sim-vllm", "sim-sglang"}, served
    said = [r["gateway_retries"] for r in ledger if r["status"] == "ok" and r["node"] == "gateway"]
    assert said and all(isinstance(n, int) and n >= 0 for n in said), said[:20]


def test_a_hung_upstream_is_not_routed_around_and_its_users_wait_for_it(
    suite: tuple[int, dict[str, Outcome], str],
) -> None:
    """pause and partition (blackhole: every packet dropped) of sim-vllm for 8 s: LiteLLM's
    attempts to it hang (no attempt fails within its 30 s timeout), so it never routes
    around them: nobody is lost, the users it sent there wait (TTFT p95 of the fault window
    ≥ 3 s), and it serves them once it is back."""
    _, outcomes, _ = suite
    for test_id in ("test_upstream_failure[gateway-pause]",
                    "test_upstream_failure[gateway-partition]"):
        outcome = outcomes[test_id]
        assert outcome.passed, (test_id, outcome.message)
        routing = _route(outcome)
        assert routing["routed_while_down"] is not True, (test_id, routing)
        assert routing["hits"] > 0 and routing["back_in_rotation_s"] is not None, routing
        assert "routed_around" not in _checks(outcome), test_id  # a figure, not judged
        m = outcome.measurement()
        assert m is not None and m["lost_total"] == 0, (test_id, m)
        assert m["slis"]["fault"]["user_ttft_p95_s"] >= 3.0, (test_id, m["slis"]["fault"])


def test_gateway_configs_have_their_verdicts(
    suite: tuple[int, dict[str, Outcome], str], lab: Lab, tmp_path: Path
) -> None:
    """gateway-bad-upstream (sim-sglang at a wrong port): detected through the gateway's
    own upstream health and rolled back; the restored gateway then holds the objective.
    gateway-no-retries — a targeted run, out of the catalogue's candidates so that the
    catalogue exits 0 on a healthy testbed: serves, and loses users a retry would have
    served when sim-vllm dies — more than gateway-good did in
    test_upstream_failure[gateway-kill] besides the streams in flight (2-3 vs 0-1
    measured). The gateway runs gateway-good afterwards."""
    _, outcomes, _ = suite
    bad = outcomes["test_gateway_rollout[gateway:gateway-bad-upstream]"]
    assert bad.passed and bad.run_dir is not None, bad.message
    rollout = json.loads((bad.run_dir / "gateway_rollout.json").read_text())
    assert rollout["rolled_back"] is True and rollout["t_failed_detected"] is not None, rollout
    assert "cannot reach upstream sim-sglang" in rollout["failed_reason"], rollout
    assert list(rollout["upstream_check"]["unhealthy"]) == ["sim-sglang"], rollout

    data = yaml.safe_load((REPO / "testbed" / "inventory.yaml").read_text())
    for node in data["nodes"]:
        if node["name"] == "gateway":
            node["candidate_configs"] = ["gateway-no-retries"]
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(data, sort_keys=False))
    code, targeted, output = run_scenarios(tmp_path, "-k", "test_gateway_rollout", "--node",
                                           "gateway", "--inventory", str(inventory))
    assert code == 1, output
    no_retries = targeted["test_gateway_rollout[gateway:gateway-no-retries]"]
    assert not no_retries.passed and no_retries.verdict == "FAIL", no_retries.message
    checks = _checks(no_retries)
    assert checks["rollout_safe"]["passed"], checks["rollout_safe"]  # it does serve
    assert not checks["lost_only_cut_streams"]["passed"], checks["lost_only_cut_streams"]
    m_bad = no_retries.measurement()
    m_good = outcomes["test_upstream_failure[gateway-kill]"].measurement()
    assert m_bad is not None and m_good is not None

    def beyond_cut_streams(m: dict[str, Any]) -> int:
        return int(m["lost_total"]) - int(m["lost_by_class"].get("stream_error", 0))

    # the streams in flight at the kill are luck; the users a retry would have saved are not
    assert beyond_cut_streams(m_bad) > beyond_cut_streams(m_good), (m_bad, m_good)
    assert serving_config_label(lab.inventory, "gateway") == "gateway-good"


def test_the_gateway_figures_agree_with_the_upstreams_own_truth(
    suite: tuple[int, dict[str, Outcome], str], lab: Lab
) -> None:
    """Truth: sim-vllm's own truth file (every request it accepted and finished, written by
    the simulator, never read by the measurement) against what the gateway's users were
    told (``served_by``: LiteLLM's x-litellm-model-id). For each run that failed sim-vllm:
    the requests it finished for the run's users (the run's max_tokens, in the run's
    window) are exactly those the ledger says it served; after a kill, the first request
    it accepted once back is within 0.5 s of back-in-rotation (the ledger's)."""
    from testbed.truth_sources import truth_events

    _, outcomes, _ = suite
    node = lab.inventory.node("sim-vllm")
    for test_id in UPSTREAM_RUNS:
        outcome = outcomes[test_id]
        assert outcome.run_dir is not None, test_id
        info = json.loads((outcome.run_dir / "run.json").read_text())
        max_tokens = int(info["load_profile"]["output_tokens"])
        ledger = [json.loads(line) for line in (outcome.run_dir / "ledger.jsonl").open()]
        users = [r for r in ledger if r["node"] == "gateway" and r["kind"] != "probe"]
        t0 = min(r["t_scheduled"] or r["t_invoke"] for r in users)
        t1 = max(r["t_end"] for r in users)
        truth = [e for e in truth_events(node, t0 - 0.5) if e["t"] <= t1 + 0.5]
        ids = {e["id"] for e in truth
               if e["event"] == "request_accepted" and e.get("max_tokens") == max_tokens}
        finished = sum(1 for e in truth if e["event"] == "request_finished" and e.get("id") in ids)
        served = sum(1 for r in users if r["status"] == "ok" and r["served_by"] == "sim-vllm")
        assert served == finished, (test_id, served, finished)
        routing = _route(outcome)
        if info["fault"]["kind"] != "kill" or routing["t_back"] is None:
            continue
        accepted = [e["t"] for e in truth if e.get("id") in ids and e["event"] == "request_accepted"
                    and e["t"] >= routing["t_back"]]
        assert routing["t_back_in_rotation"] is not None and accepted, (test_id, routing)
        assert abs(accepted[0] - routing["t_back_in_rotation"]) <= 0.5, (
            test_id, accepted[0], routing)


def test_failed_rollouts_were_detected_and_rolled_back(
    suite: tuple[int, dict[str, Outcome], str], lab: Lab
) -> None:
    _, outcomes, _ = suite
    rollouts = {t: o for t, o in outcomes.items() if t.startswith("test_rollout[")}
    assert rollouts, "no rollout scenario ran"
    start_failures = ("llama-bad-model", "sim-vllm-bad-maxlen", "vllm-bad-maxlen")
    seen_failures = 0
    for test_id, outcome in rollouts.items():
        assert outcome.run_dir is not None
        info = json.loads((outcome.run_dir / "run.json").read_text())
        result = info["fault_result"]
        config = result["config"]
        if config in start_failures:
            seen_failures += 1
            assert result["rolled_back"] is True, (test_id, result)
            assert result["t_failed_detected"] is not None, (test_id, result)
            report = (outcome.run_dir / "incident.md").read_text()
            assert f"**Cause: the candidate config {config} never became ready" in report, \
                f"{test_id}: diagnosis missing"
        else:
            assert result["rolled_back"] is False, (test_id, result)
    assert seen_failures >= 2
    for node in lab.lab_nodes():
        assert serving_config_label(lab.inventory, node.name) == node.serving_config, node.name


def test_speculation_is_judged_per_workload_class(
    suite: tuple[int, dict[str, Outcome], str],
) -> None:
    """The second host's node and its speculative candidate (4 drafts a step), whose users
    send extractive text: both classes measured on both configs; extractive text faster
    with it (the simulator accepts most drafts of text that repeats its prompt), free text
    slower than that, and the run's verdict is the declared class's. The report has the
    table, with the acceptance the candidate's own counters state."""
    _, outcomes, _ = suite
    outcome = outcomes["test_speculative[sim-vllm-h2:sim-vllm-spec]"]
    assert outcome.verdict == "PASS", outcome.message
    assert outcome.run_dir is not None
    spec = json.loads((outcome.run_dir / "run.json").read_text())["fault_result"]["speculation"]
    classes = {c["workload"]: c for c in spec["classes"]}
    assert set(classes) == {"free", "extractive", "mixed"}, spec
    for workload in ("free", "extractive"):  # the mix is judged on their requests together
        for side in ("current", "candidate"):
            row = classes[workload][side]
            assert row["timed"] >= 8 and row["output_tokens_per_s"] > 0, (workload, side, row)
    extractive, free = classes["extractive"]["verdict"], classes["free"]["verdict"]
    assert extractive["outcome"] == "wins", extractive
    assert free["ratio"] > extractive["ratio"], (free, extractive)
    # the engine's own counters: drafts accepted more often while its users sent text that
    # repeats their prompt (the background load's drafts count on both sides); none without
    accepted = {w: classes[w]["candidate"]["acceptance_rate"] for w in ("free", "extractive")}
    assert accepted["extractive"] > accepted["free"] > 0, accepted
    assert classes["extractive"]["current"]["acceptance_rate"] is None, "no drafts without it"
    assert (spec["workload"], spec["failure"]) == ("extractive", None), spec
    report = (outcome.run_dir / "incident.md").read_text()
    assert "## Speculative decoding: off → ngram, 4 draft tokens" in report
    assert "| extractive (declared) |" in report


def test_oom_prone_config_fails_with_the_oom_diagnosis(lab: Lab, tmp_path: Path) -> None:
    code, outcomes, output = run_scenarios(
        tmp_path, "-k", "test_oom", "--node", "sim-vllm", "--serving-config", "sim-vllm-bad-oom"
    )
    assert code == 1, output
    long_prefill = outcomes["test_oom[sim-vllm-long-prefill]"]
    assert not long_prefill.passed, output
    assert long_prefill.run_dir is not None
    report = (long_prefill.run_dir / "incident.md").read_text()
    assert "GPU out of memory during prefill" in report
    assert "Verdict: FAIL" in report
    assert outcomes["test_oom[sim-vllm-over-context]"].passed, (
        "over-context prompts get a clean 400"
    )
    assert serving_config_label(lab.inventory, "sim-vllm") == "sim-vllm-good", "rolled back after"


#: the leak test's soak: long enough for a line, short of the ~90 s that fill the container
LEAK_SOAK_S = "30"


def test_the_soak_fails_a_leaking_config_with_its_projection(lab: Lab, tmp_path: Path) -> None:
    """sim-vllm-bad-leak keeps 256 KiB per request: the soak's memory line must say it
    reaches the 256 MiB limit within the day, and its slope must be the simulator's own
    account of what it kept (truth file ``leaked_bytes``), not just "rising"."""
    from testbed.truth_sources import truth_events

    since = time.time()
    code, outcomes, output = run_scenarios(
        tmp_path, "-k", "test_soak", "--node", "sim-vllm", "--serving-config",
        "sim-vllm-bad-leak", "--soak-s", LEAK_SOAK_S)
    assert code == 1, output
    outcome = outcomes["test_soak[sim-vllm]"]
    assert outcome.verdict == "FAIL" and "memory_not_heading_for_limit" in outcome.message, output
    assert outcome.run_dir is not None
    soak = json.loads((outcome.run_dir / "run.json").read_text())["fault_result"]["soak"]
    memory = soak["memory"]
    assert memory["reaches_limit"] and memory["limit_bytes"] == 256 * 2**20, memory
    held = [(e["t"], e["leaked_bytes"]) for e in truth_events(lab.inventory.node("sim-vllm"),
                                                              since)
            if e.get("event") == "request_accepted" and "leaked_bytes" in e
            and memory["t_from"] <= e["t"] <= memory["t_to"]]
    assert len(held) >= 10, held
    truth_slope = (held[-1][1] - held[0][1]) / (held[-1][0] - held[0][0])
    assert abs(memory["slope_bps"] / truth_slope - 1) < 0.25, (memory["slope_bps"], truth_slope)
    report = (outcome.run_dir / "incident.md").read_text()
    assert "## Soak" in report and "time to the limit at the lower bound" in report
    assert serving_config_label(lab.inventory, "sim-vllm") == "sim-vllm-good", "rolled back after"


def _gate(
    tmp_path: Path, node: str, config: str, *pytest_args: str, baseline_dir: Path | None = None,
    gate_args: tuple[str, ...] = (),
) -> tuple[int, str, dict[str, Any]]:
    baseline = ("--baseline-dir", str(baseline_dir)) if baseline_dir else ()
    result = run_cli(
        "gate", "--node", node, "--config", config, "--out", str(tmp_path),
        "--steady-s", GATE_STEADY_S, *baseline, *gate_args, "--", *pytest_args, timeout=1800,
    )
    gates = sorted(tmp_path.glob(f"gate-*-{node}-{config}"))
    assert gates, result.stdout + result.stderr
    data = json.loads((gates[-1] / "gate.json").read_text())
    assert ((gates[-1] / "gate.md").exists() and (gates[-1] / "junit.xml").exists()) or data.get(
        "rolled_back"
    )
    return result.returncode, (gates[-1] / "gate.md").read_text(), data


def test_gate_fails_the_oom_prone_config_and_rolls_back(lab: Lab, tmp_path: Path) -> None:
    """The config differs from the good one in its memory utilization and chunked prefill
    (the inventory's YAML), so the memory scenarios run first, and the gate stops at its
    first failing scenario (its default): a FAIL is settled by then, the rollback and the
    report still happen, and the scenarios after it are listed as not run — JUnit, pytest's
    own record, holds that one scenario and the runs directory only its runs."""
    code, md, data = _gate(tmp_path, "sim-vllm", "sim-vllm-bad-oom")
    assert code == 1, md
    assert data["decision"] == "fail" and data["rolled_back"] is True
    # the first gate scenario to meet the cliff: test_limits' 50 % step (2,048 tokens) is
    # over what this config prefills in one step, and the engine dies of it
    why = str(data["why"])
    assert "test_limits[sim-vllm]: FAIL" in why and "inside the limit" in why, why
    assert "FAIL" in md
    gate_dir = sorted(tmp_path.glob("gate-*-sim-vllm-sim-vllm-bad-oom"))[-1]
    cases = [c.get("name") for c in ET.parse(gate_dir / "junit.xml").getroot().iter("testcase")]
    assert cases == ["test_limits[sim-vllm]"], cases
    run_dirs = [p.parent.name for p in (gate_dir / "runs").glob("*/run.json")]
    assert run_dirs and all("-limits-sim-vllm" in name for name in run_dirs), run_dirs
    left = {n["name"]: n["why"] for n in data["not_run"]}
    assert {name.split("[")[0] for name in left} == {
        "test_bad_input", "test_engine_death", "test_engine_stall", "test_kill", "test_oom",
        "test_overload", "test_partition", "test_soak"}, left
    assert all(w.startswith("the decision was FAIL at test_limits[sim-vllm]")
               for w in left.values()), left
    assert "Not run (" in md
    assert serving_config_label(lab.inventory, "sim-vllm") == "sim-vllm-good"


def test_gate_fails_a_config_serving_fewer_sequences_at_once(lab: Lab, tmp_path: Path) -> None:
    """llama-bad-slots serves one slot of 256 tokens where llama-good serves two (``-np``
    in the inventory's commands, what this test's lab configured): the same context per
    request, so only the sequences at once tell them apart. The gate FAILs before any
    scenario with the comparison — whatever its one slot made of the steady state's
    latency — and says so in gate.md."""
    inventory = lab.inventory
    for config, slots in (("llama-good", "2"), ("llama-bad-slots", "1")):
        command = inventory.serving_config(config).command
        assert command[command.index("-np") + 1] == slots, (config, command)
    code, md, data = _gate(tmp_path, "llama", "llama-bad-slots")
    assert code == 1, md
    why = str(data["why"])
    assert ("llama-bad-slots serves less than the current config: sequences at once 1 vs 2 "
            "on the current config") in why, why
    capabilities = data["steady_state"]["capabilities"]
    assert capabilities["current"]["context_tokens"] == 256 == \
        capabilities["candidate"]["context_tokens"], capabilities
    assert data["scenarios"] == [] and data["rolled_back"] is True
    assert "| sequences at once | 2 | 1 |" in md
    assert serving_config_label(inventory, "llama") == "llama-good"


def test_gate_fails_a_shorter_context_than_the_current_configs_at_the_limits_probe(
    lab: Lab, tmp_path: Path
) -> None:
    """sim-vllm-small-ctx serves 2,048 tokens per request where sim-vllm-good serves 4,096.
    With the steady state off (no capability comparison) the limits probe is the line that
    catches it: the gate gives it the current config's limit, the candidate rejects that
    prompt, and test_limits FAILs with the comparison. The simulator's own truth file must
    hold that rejection: a 400 for a prompt of more than 3,000 tokens against 2,048."""
    from testbed.truth_sources import truth_events

    since = time.time()
    result = run_cli("gate", "--node", "sim-vllm", "--config", "sim-vllm-small-ctx",
                     "--out", str(tmp_path), "--steady-s", "0", "--", "-k", "limits",
                     timeout=900)
    gates = sorted(tmp_path.glob("gate-*-sim-vllm-sim-vllm-small-ctx"))
    assert gates and result.returncode == 1, result.stdout + result.stderr[-3000:]
    data = json.loads((gates[-1] / "gate.json").read_text())
    why = str(data["why"])
    assert "test_limits[sim-vllm]: FAIL" in why and "current_limit_served" in why, why
    assert ("context limit per request 2,048 tokens vs 4,096 on the current config: prompts "
            "between them would be rejected") in why, why
    rejected = [e for e in truth_events(lab.inventory.node("sim-vllm"), since)
                if e.get("event") == "rejected" and e.get("status") == 400]
    sizes = [max((int(n) for n in re.findall(r"\d+", str(e.get("reason")))), default=0)
             for e in rejected]
    assert any(size > 3000 for size in sizes), rejected
    assert serving_config_label(lab.inventory, "sim-vllm") == "sim-vllm-good"


def _flood_served_rps(node: Node, run_dir: Path) -> float:
    """Requests the simulator itself says it finished per second between the flood's
    inject and revert in ``run_dir`` (its truth file: evidence the gate did not compute)."""
    from testbed.truth_sources import truth_events

    lines = [json.loads(line) for line in (run_dir / "timeline.jsonl").read_text().splitlines()]
    start = next(e["t"] for e in lines if e["kind"] == "inject_end")
    end = next(e["t"] for e in lines if e["kind"] == "revert_start")
    finished = [e for e in truth_events(node, start)
                if e["event"] == "request_finished" and e["t"] <= end]
    return len(finished) / float(end - start)


def test_gate_measures_the_current_peak_itself_and_fails_a_candidate_that_carries_less(
    lab: Lab, tmp_path: Path
) -> None:
    """A node's first gate (nothing earlier under --out) of a candidate that batches 8
    sequences where the current config batches 64: its flood passes, so the gate runs the
    same flood on the restored current config, into current/, and FAILs the candidate's
    peak throughput against it. The simulator's own truth file must show the candidate
    finishing under two thirds of the current's requests per second in those two floods."""
    node = lab.inventory.node("sim-vllm")
    result = run_cli("gate", "--node", "sim-vllm", "--config", "sim-vllm-low-peak",
                     "--out", str(tmp_path), "--steady-s", "0", "--", "-k", "overload",
                     timeout=900)
    gates = sorted(tmp_path.glob("gate-*-sim-vllm-sim-vllm-low-peak"))
    assert gates and result.returncode == 1, result.stdout + result.stderr[-3000:]
    data = json.loads((gates[-1] / "gate.json").read_text())
    test = "test_overload[sim-vllm]"
    assert data["baseline"]["measured_now"] == [test], data["baseline"]
    current_run = Path(data["baseline"]["runs"][test]["run_dir"])
    assert current_run.is_relative_to(gates[-1] / "current" / "sim-vllm"), current_run
    assert json.loads((current_run / "run.json").read_text())["serving_config"] == "sim-vllm-good"
    regressions = {(r["test"], r["figure"]) for r in data["baseline"]["regressions"]}
    assert (test, "peak_rps") in regressions, data["baseline"]["regressions"]
    assert f"{test}: peak throughput" in str(data["why"]), data["why"]
    candidate_run = Path(next(s["run_dir"] for s in data["scenarios"] if s["name"] == test))
    truth_current = _flood_served_rps(node, current_run)
    truth_candidate = _flood_served_rps(node, candidate_run)
    assert truth_candidate < truth_current / 1.5, (truth_candidate, truth_current)
    md = (gates[-1] / "gate.md").read_text()
    assert "made by this gate, on the current config itself (once it was restored)" in md
    assert serving_config_label(lab.inventory, "sim-vllm") == "sim-vllm-good"


#: The testbed's KNOWN BAD configs that never start, on the node they are for: the gate
#: must fail each, quoting the engine's own reason, and put the current config back.
NEVER_STARTS = [("llama", "llama-bad-model", "llama-good"),
                ("sim-vllm", "sim-vllm-bad-maxlen", "sim-vllm-good"),
                ("sim-vllm", "sim-vllm-bad-kvcache", "sim-vllm-good"),
                ("vllm", "vllm-bad-maxlen", "vllm-good")]


@pytest.mark.parametrize(("on_node", "config", "current"), NEVER_STARTS,
                         ids=[config for _, config, _ in NEVER_STARTS])
def test_gate_fails_a_config_that_never_starts(
    lab: Lab, tmp_path: Path, on_node: str, config: str, current: str
) -> None:
    """The why quotes the engine's last words from its log; on a simulated node they must be
    the start-up error the simulator itself recorded in its truth file."""
    from testbed.truth_sources import truth_events

    since = time.time()
    code, md, data = _gate(tmp_path, on_node, config)
    assert code == 1, md
    why = str(data["why"])
    assert data["decision"] == "fail" and "did not become ready" in why, why
    assert "its last log line: " in why and data["rolled_back"] is True, why
    assert "candidate.log" in md, md
    if lab.inventory.node(on_node).engine == "sim":
        dead = [e for e in truth_events(lab.inventory.node(on_node), since)
                if e.get("event") == "dead" and e.get("reason") == "startup_validation"]
        assert dead, "the simulator recorded no start-up failure"
        # the simulator prints its error as a traceback's last line (testbed/simnode/node.py)
        said = f"ValueError: {dead[-1]['message']}"[:LAST_WORDS_MAX]
        assert f"its last log line: {said!r}" in why, (dead[-1], why)
    assert serving_config_label(lab.inventory, on_node) == current


#: The testbed's KNOWN BAD configs that serve well until sustained load has grown their
#: memory to the container's limit: the gate's soak must catch them (node, config, current,
#: soak seconds). llama.cpp's host prompt cache grows ~390 KiB/s at 10 req/s, so its soak is
#: long enough for a 4 MiB rise after the warm-up.
GROWS_UNDER_LOAD = [("llama", "llama-bad-cacheram", "llama-good", "45"),
                    ("sim-vllm", "sim-vllm-bad-leak", "sim-vllm-good", "30")]


@pytest.mark.parametrize(("on_node", "config", "current", "soak_s"), GROWS_UNDER_LOAD,
                         ids=[config for _, config, _, _ in GROWS_UNDER_LOAD])
def test_gate_fails_a_config_whose_memory_grows_under_load(
    lab: Lab, suite_run: SuiteRun, tmp_path: Path, on_node: str, config: str, current: str,
    soak_s: str,
) -> None:
    """Both pass their steady state; the gate FAILs them for their memory: the soak's trend
    reaches the limit, or the kernel OOM-killed the engine on the way — then Docker's own
    event stream must hold that OOM kill. The scenarios are also compared with the current
    config's runs in the catalogue (``--baseline-dir``): each baseline named must be the
    catalogue's own passing run of that test, with its figures.

    Only the soak and the kill run on the candidate (``-k``, passed through to pytest as a
    user would): the soak is what must find a leak, on a container the scenarios before it
    have not already filled (its steady state would then fail and the soak read
    INCONCLUSIVE), and the kill gives the baseline something to compare (docs/ci.md has
    the timings) — ``--full``, since the gate would otherwise stop at the soak's FAIL, which
    runs first where the diff touches memory."""
    since = time.time()
    code, md, data = _gate(tmp_path, on_node, config, "--soak-s", soak_s, "-k", "soak or kill",
                           baseline_dir=suite_run.runs_root, gate_args=("--full",))
    assert code == 1, md
    steady = data["steady_state"]
    assert steady["candidate"]["verdict"]["passed"], "a leak serves well at first"
    failed = [line for line in data["not_passed"] if not line.startswith("regression — ")]
    assert failed, data["not_passed"]
    memory_lines = [line for line in failed
                    if "memory_not_heading_for_limit" in line or "OOMKilled=True" in line]
    assert memory_lines, f"no failure names the memory: {failed}"
    assert any(line.startswith(f"test_soak[{on_node}]") for line in failed) or any(
        "OOMKilled=True" in line for line in failed), failed
    if any("OOMKilled=True" in line for line in memory_lines):
        container = lab.inventory.node(on_node).docker
        assert container is not None
        events = subprocess.run(
            ["docker", "events", "--since", f"{since:.0f}", "--until", f"{time.time():.0f}",
             "--filter", f"container={container.container}", "--filter", "event=oom",
             "--format", "{{.Action}}"], capture_output=True, text=True, check=True).stdout
        assert "oom" in events.split(), "an OOM kill the Docker engine never reported"
    baseline = data["baseline"]
    assert baseline["dir"] == str(suite_run.runs_root) and baseline["runs"], baseline
    for test, run in baseline["runs"].items():
        outcome = suite_run.outcomes[test]
        assert outcome.passed and run["run_dir"] == str(outcome.run_dir), (test, run)
        figures = outcome.measurement()
        assert figures is not None and run["lost"] == figures.get("lost_total"), (test, run)
    assert "## Scenarios against the current config" in md
    assert serving_config_label(lab.inventory, on_node) == current


def test_gate_fails_a_kv_cache_too_small_for_the_nodes_concurrency(
    lab: Lab, tmp_path: Path
) -> None:
    """vllm-small-kv (2,048 tokens of KV) serves short prompts well, but its KV cache holds
    2 sequences of the 1,024-token limit where vllm-good's holds 16: the gate compares the
    two configs' capabilities beside their steady states and FAILs there, before any
    scenario (the limits probe adapts to the candidate's own limits). vLLM's own figure
    for it — the ``kv_cache_max_concurrency`` it computes and exports, which faultkit does
    not read — must say the same, from Prometheus' record of the candidate."""
    from slo.prom import Prometheus

    since = time.time()
    code, md, data = _gate(tmp_path, "vllm", "vllm-small-kv", "-x")
    assert code == 1, md
    assert data["steady_state"]["candidate"]["verdict"]["passed"], "short prompts serve well"
    why = str(data["why"])
    assert "vllm-small-kv serves less than the current config: KV cache 2,048 tokens" in why, why
    assert "→ 2 sequences of the 1,024-token limit at once" in why, why
    capabilities = data["steady_state"]["capabilities"]
    assert capabilities["current"]["kv_cache_tokens"] > 4 * 2048, capabilities
    assert capabilities["current"]["context_tokens"] == 1024 == \
        capabilities["candidate"]["context_tokens"], capabilities
    assert "### Capabilities" in md and "| KV cache |" in md
    assert data["scenarios"] == [], "the gate stops at its first failing phase"
    assert data["rolled_back"] is True
    with Prometheus(lab.inventory.prometheus.url) as prom:
        series = prom.query_range('vllm:cache_config_info{job="vllm"}', since, time.time(), 1.0)
    stated = {s.labels.get("kv_cache_size_tokens"): s.labels.get("kv_cache_max_concurrency", "")
              for s in series}
    assert float(stated.get("2048") or "inf") < 4, stated
    assert serving_config_label(lab.inventory, "vllm") == "vllm-good"


def test_gate_passes_the_known_good_config(lab: Lab, planted_gate: PlantedGate) -> None:
    """The session's gate of sim-vllm-good, rolled onto the node while it runs another
    known-good config (sim-vllm-good-util85): PASS, every gate scenario run and passed, no
    regression, and the config that ran before is the one put back. (It also carries
    planted secrets: see ``test_planted_secrets``; they do not change how the node serves.)"""
    from tests.e2e.known_good_gate import CONFIG, RUNNING_BEFORE

    code, md, data = planted_gate.result.returncode, planted_gate.gate_md, planted_gate.gate_json
    assert code == 0, md
    assert data["decision"] == "pass" and data["scenarios"]
    assert (data["current"], data["candidate"]) == (RUNNING_BEFORE, CONFIG), data
    ran = {s["name"].split("[")[0] for s in data["scenarios"]}
    assert {"test_bad_input", "test_engine_death", "test_engine_stall", "test_kill",
            "test_limits", "test_oom", "test_overload", "test_partition", "test_soak"} <= ran, ran
    assert all(s["outcome"] in ("PASS", "ACCEPTED") for s in data["scenarios"]), data["scenarios"]
    assert "PASS" in md
    steady = data["steady_state"]
    for side in ("current", "candidate"):  # both measured with requests, both within SLO
        assert steady[side]["measured"] and steady[side]["slis"]["requests"] >= 50, steady
        assert steady[side]["verdict"]["passed"], steady[side]["summary"]
    assert steady["regressions"] == [], "two good configs: no regression"
    assert "## Steady state (no fault)" in md
    assert planted_gate.config_after == RUNNING_BEFORE, "the gate did not put back what ran"
    assert serving_config_label(lab.inventory, "sim-vllm") == "sim-vllm-good"


# --------------------------------------------------------------------------- INCONCLUSIVE


def _verdict_json(outcome: Outcome) -> dict[str, Any]:
    assert outcome.run_dir is not None, outcome
    data: dict[str, Any] = json.loads((outcome.run_dir / "verdict.json").read_text())
    return data


def test_unreachable_prometheus_is_inconclusive_not_pass(lab: Lab, tmp_path: Path) -> None:
    code, outcomes, output = run_scenarios(
        tmp_path, "-k", "test_kill", "--node", "sim-vllm", "--prometheus-url", "http://127.0.0.1:1"
    )
    assert code != 0, output
    outcome = outcomes["test_kill[sim-vllm]"]
    assert not outcome.passed and outcome.verdict == "INCONCLUSIVE", (outcome, output)
    assert outcome.message.startswith("INCONCLUSIVE"), outcome.message
    verdict = _verdict_json(outcome)
    assert verdict["outcome"] == "INCONCLUSIVE"
    assert any("127.0.0.1:1" in reason for reason in verdict["inconclusive"]), verdict
    assert "INCONCLUSIVE" in output


def _inventory_with(lab: Lab, tmp_path: Path, **node: Any) -> Path:
    """The testbed inventory plus one extra node (a scratch target)."""
    data = yaml.safe_load((REPO / "testbed" / "inventory.yaml").read_text())
    data["nodes"].append({"engine": "sim", "personality": "vllm", "model": "m",
                          "health_path": "/health",
                          "faults": ["*"], **node})
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_target_with_no_container_is_inconclusive_and_nothing_is_touched(
    lab: Lab, tmp_path: Path
) -> None:
    """The node serves (sim-vllm's port), but its inventory names no existing container."""
    sim = lab.inventory.node("sim-vllm")
    assert sim.docker is not None
    before = DockerHost(sim.docker.host).state(sim.docker.container)
    inventory = _inventory_with(
        lab, tmp_path, name="ghost", base_url=sim.base_url, model=sim.model,
        docker={"host": sim.docker.host, "container": "faultkit-no-such-container"},
        prometheus={"job": "sim-vllm"},
    )
    code, outcomes, output = run_scenarios(
        tmp_path, "-k", "test_kill", "--node", "ghost", "--inventory", str(inventory)
    )
    assert code != 0, output
    outcome = outcomes["test_kill[ghost]"]
    assert outcome.verdict == "INCONCLUSIVE", (outcome, output)
    assert any("not running" in r for r in _verdict_json(outcome)["inconclusive"])
    after = DockerHost(sim.docker.host).state(sim.docker.container)
    assert (after.restart_count, after.started_at) == (before.restart_count, before.started_at)


def test_a_node_stopped_before_the_run_is_inconclusive(lab: Lab, tmp_path: Path) -> None:
    name = "faultkit-e2e-stopped"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    subprocess.run(["docker", "create", "--name", name, "--label", f"{LABEL_OWNER}=tests",
                    "faultkit/base:bookworm", "true"], capture_output=True, check=True)
    try:
        inventory = _inventory_with(
            lab, tmp_path, name="stopped", base_url="http://127.0.0.1:9",
            docker={"host": LOCAL_DOCKER, "container": name},
            prometheus={"job": "stopped"},
        )
        code, outcomes, output = run_scenarios(
            tmp_path, "-k", "test_kill", "--node", "stopped", "--inventory", str(inventory)
        )
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    assert code != 0, output
    outcome = outcomes["test_kill[stopped]"]
    assert outcome.verdict == "INCONCLUSIVE", (outcome, output)
    reasons = _verdict_json(outcome)["inconclusive"]
    assert any("steady state" in r or "not running" in r for r in reasons), reasons


#: the pool gate's nodes: the simulated vLLM node and its twin on the second Docker host
POOL = ("sim-vllm", "sim-vllm-h2")
#: the gate scenarios of one simulated vLLM node, keyed across nodes (``[{node}…]``)
GATE_KEYS = {"test_bad_input[{node}]", "test_engine_death[{node}]",
             "test_engine_stall[{node}]", "test_kill[{node}]",
             "test_limits[{node}]", "test_oom[{node}-long-prefill]",
             "test_oom[{node}-over-context]", "test_partition[{node}-refuse]",
             "test_partition[{node}-blackhole]", "test_soak[{node}]",
             "test_overload[{node}]"}
#: the gate scenarios that stop the engine (Docker reports a ``die`` of its container); an
#: oom scenario passes on the known-good config only if the engine does *not* die
STOPS_ENGINE = ("test_kill[", "test_engine_death[")


def _pool_node(test_name: str) -> str:
    """The pool node a test name names (``test_oom[sim-vllm-h2-long-prefill]``: the longest
    node name its parameter starts with)."""
    param = test_name.split("[", 1)[1]
    return max((n for n in POOL if param.startswith(n)), key=len)


def _docker_dies(inventory: Inventory, node_name: str, since: float, until: float) -> list[float]:
    """Epoch seconds of each ``die`` Docker's own event stream reports for the node's
    container in [since, until] — on its own Docker host (the second one: over TCP)."""
    docker = inventory.node(node_name).docker
    assert docker is not None
    host = [] if docker.host == LOCAL_DOCKER else ["-H", docker.host]
    out = subprocess.run(
        ["docker", *host, "events", "--since", f"{since:.0f}", "--until", f"{until + 1:.0f}",
         "--filter", f"container={docker.container}", "--filter", "event=die",
         "--format", "{{.TimeNano}}"], capture_output=True, text=True, check=True).stdout
    return [int(line) / 1e9 for line in out.split()]


def test_gate_across_a_pool_runs_each_scenario_once_side_by_side(
    lab: Lab, tmp_path: Path
) -> None:
    """``--pool``: the known-good config gated on two nodes of one engine and config, one
    on each Docker host. PASS; every gate scenario of one node ran exactly once, on one of
    the two, each node ran a share, and both nodes' steady states were judged. Docker's own
    event streams say where the faults acted: within the scenario phase, each container
    died only inside its own node's scenario windows, each node whose share stops the
    engine died at least once, and the two shares ran at the same time. Both nodes are
    back on their config."""
    since = time.time()
    result = run_cli(
        "gate", "--node", POOL[0], "--pool", POOL[1], "--config", "sim-vllm-good",
        "--out", str(tmp_path), "--steady-s", GATE_STEADY_S, "--soak-s", "30", timeout=1800)
    gates = sorted(tmp_path.glob(f"gate-*-{POOL[0]}-sim-vllm-good"))
    assert gates and result.returncode == 0, result.stdout + result.stderr[-3000:]
    data = json.loads((gates[-1] / "gate.json").read_text())
    assert data["decision"] == "pass", data["why"]
    names = [str(s["name"]) for s in data["scenarios"]]
    keys = [name.replace(f"[{_pool_node(name)}", "[{node}", 1) for name in names]
    assert sorted(keys) == sorted(GATE_KEYS), names  # each once, none missing
    shares = {p["node"]: p["scenarios"] for p in data["pool"]}
    assert set(shares) == set(POOL) and all(shares.values()), shares
    for entry in data["pool"]:
        steady = entry["steady_state"]
        for side in ("current", "candidate"):
            assert steady[side]["measured"] and steady[side]["verdict"]["passed"], steady[side]
    windows: dict[str, list[tuple[float, float, str]]] = {node: [] for node in POOL}
    for s in data["scenarios"]:
        run = json.loads((Path(s["run_dir"]) / "run.json").read_text())
        windows[run["node"]].append((run["t_start"], run["t_end"], s["name"]))
    assert {n: len(w) for n, w in windows.items()} == {n: len(shares[n]) for n in POOL}
    phase = (min(w[0] for ws in windows.values() for w in ws),
             max(w[1] for ws in windows.values() for w in ws))
    spans = {n: (min(w[0] for w in ws), max(w[1] for w in ws)) for n, ws in windows.items()}
    assert max(a for a, _ in spans.values()) < min(b for _, b in spans.values()), spans
    for node in POOL:
        dies = [t for t in _docker_dies(lab.inventory, node, since, time.time())
                if phase[0] <= t <= phase[1]]
        outside = [t for t in dies
                   if not any(a - 1 <= t <= b + 1 for a, b, _ in windows[node])]
        assert not outside, (node, outside, windows[node])
        if any(name.startswith(STOPS_ENGINE) for _, _, name in windows[node]):
            assert dies, f"{node} ran {windows[node]} and Docker saw no die"
    assert data["rolled_back"] is True
    for node in POOL:
        assert serving_config_label(lab.inventory, node) == "sim-vllm-good"


def test_gate_fails_speculation_on_a_node_whose_users_send_free_text(
    lab: Lab, tmp_path: Path,
) -> None:
    """sim-vllm declares a free workload (testbed/inventory.yaml); sim-vllm-spec turns on
    n-gram speculation, which serves free text slower and extractive text faster. The gate
    measures each class on both configs, fails before any scenario on the declared one, and
    puts the current config back; the acceptance comes from the candidate's own counters."""
    before = serving_config_label(lab.inventory, "sim-vllm")
    code, md, data = _gate(tmp_path, "sim-vllm", "sim-vllm-spec")
    assert code == 1, md
    why = str(data["why"])
    assert why.startswith("speculative decoding changes from 'off' to 'ngram, 4 draft "
                          "tokens': the node's free workload is served slower"), why
    classes = {c["workload"]: c for c in data["steady_state"]["speculation"]["classes"]}
    assert classes["free"]["verdict"]["outcome"] == "loses", classes["free"]
    assert classes["extractive"]["verdict"]["outcome"] == "wins", classes["extractive"]
    assert classes["extractive"]["candidate"]["acceptance_rate"] > 0.5
    assert classes["free"]["candidate"]["acceptance_rate"] < 0.1
    assert classes["free"]["current"]["acceptance_rate"] is None  # it does not speculate
    assert data["rolled_back"] is True
    assert "### Speculative decoding: off → ngram, 4 draft tokens" in md
    assert serving_config_label(lab.inventory, "sim-vllm") == before
