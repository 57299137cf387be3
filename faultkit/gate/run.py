"""The gate's run on one node or a pool, once its inputs are checked
(:mod:`faultkit.commands.gate` is the command): the current config's steady state, the
rollout, the candidate's steady state and capabilities, the scenarios in their risk-first
order until the first that does not pass (unless ``full``), the decision, the baseline
comparison, and the restore of the previous config unless the gate passed and was told to
promote — also when it is cancelled (a signal) or fails. The decision's rules are in
:mod:`.decision`; the phases in :mod:`.steady`, :mod:`.order`, :mod:`.pool`,
:mod:`.scenarios` and :mod:`.baseline`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from faultkit.faults import make_fault
from faultkit.faults.rollout import Rollout
from faultkit.gate.baseline import Baseline, judge_against_baseline
from faultkit.gate.current_peak import (
    candidate_peaks,
    measure_current_peaks,
    peaks_due,
)
from faultkit.gate.decision import (
    NotRun,
    ScenarioOutcome,
    config_diff,
    decide,
    merge_junit,
    not_run,
    read_junit,
    replace_cases,
)
from faultkit.gate.feed import collected_names
from faultkit.gate.order import ScenarioOrder
from faultkit.gate.pool import (
    PoolNode,
    collect_gate_scenarios,
    combined_exit,
    expected_share_s,
    gathered,
    measured_seconds,
    soak_seconds,
    split_scenarios,
)
from faultkit.gate.scenarios import gate_progress, run_scenarios, scenario_argv
from faultkit.gate.scenarios import say as _say
from faultkit.gate.steady import SteadyPhase
from faultkit.inventory import Inventory, Node
from faultkit.model.records import Event, JsonlWriter
from faultkit.rundir import GateDir, GateResult
from faultkit.runtime.progress import Progress
from faultkit.sweep import sweep

__all__ = ["DEFAULT_SOAK_S", "POOL_STOP_FILE", "run_gate"]

#: test_soak's length in a gate, seconds
DEFAULT_SOAK_S = 60.0
#: where a scenario run's second attempt writes (a stalled client's scenarios, run again)
RESUME_DIR = "run-again"


async def run_gate(
    inventory: Inventory,
    nodes: Sequence[tuple[Node, SteadyPhase]],
    config: str,
    out: Path,
    promote: bool,
    pytest_args: tuple[str, ...],
    baseline_dir: Path,
    order: ScenarioOrder,
    stop_at_first: bool,
) -> GateResult:
    """The gate on ``nodes`` (the gate's node first, then its ``--pool``), each with its
    steady-state phase; its scenarios in ``order``, stopping at the first that does not
    pass when ``stop_at_first`` (each pool node at its own)."""
    timeline = JsonlWriter(GateDir(out).timeline_jsonl)
    pooled = len(nodes) > 1
    pool = [
        PoolNode(n, phase, cast(Rollout, make_fault(
            "rollout", n, inventory=inventory, config=config,
            timeline=_emitter(timeline, n if pooled else None))))
        for n, phase in nodes
    ]
    first = pool[0]
    node, steady, rollout = first.node, first.steady, first.rollout
    started_at = time.time()
    result = GateResult(
        node=node.name,
        candidate=config,
        current=node.serving_config,
        config_diff=config_diff(inventory, node.serving_config, config),
        junit_xml=str(GateDir(out).junit_xml),
        started_at=started_at,
        order={**order.to_json(), "stop_at_first": stop_at_first},
    )
    if not steady.checked:
        _say("steady state not checked (--steady-s 0)")
    collecting = (asyncio.ensure_future(gathered(*(
        collect_gate_scenarios(scenario_argv(inventory, m.node, config, out, None, pytest_args))
        for m in pool))) if pooled else None)  # side by side with the steady state
    try:
        # before the rollout's try: nothing to roll back yet
        await gathered(*(m.steady.measure_current(m.node.serving_config) for m in pool))
        current_limits = await gathered(*(m.steady.current_context_limit() for m in pool))
    except BaseException:
        if collecting is not None:
            collecting.cancel()
        raise
    lane_args = {m.node.name: _with_current_limit(pytest_args, limit)
                 for m, limit in zip(pool, current_limits, strict=True)}
    names = [m.node.name for m in pool]

    def current_argv(n: Node, where: Path, junit: Path) -> list[str]:
        """``n``'s scenario command on the config it serves now (the current one)."""
        return scenario_argv(inventory, n, n.serving_config or "", where, junit,
                             lane_args[n.name])

    current_peaks: tuple[dict[str, Baseline], dict[str, str]] = ({}, {})
    if promote:  # the candidate stays: the current config's peak is measured while it serves
        try:
            selected = await (collecting if collecting is not None else gathered(
                collect_gate_scenarios(scenario_argv(inventory, node, config, out, None,
                                                     pytest_args))))
            due = peaks_due([i.rsplit("::", 1)[-1] for ids in selected for i in ids],
                            baseline_dir, nodes=names, current=result.current,
                            before=started_at)
            if due:
                current_peaks = await measure_current_peaks(due, (m.node for m in pool),
                                                            current_argv, out)
        except BaseException:
            if collecting is not None:
                collecting.cancel()
            raise
    restored = False  # the current config put back before the end (to measure it)
    for member in pool:
        _say(f"rolling {config!r} onto {member.node.name} ({member.rollout.describe()})")
    try:
        await gathered(*(m.rollout.inject() for m in pool))
        result.rollout = dict(rollout.result)
        for member in pool:
            if member.rollout.result.get("rolled_back"):
                _failed_start(result, inventory, member, config, out, pooled)
                return result
        whys = await gathered(*(m.steady.check_candidate(config) for m in pool))
        for member, why in zip(pool, whys, strict=True):
            if why := why or member.steady.regression_why():
                result.fail(_on(member, why, pooled))
                return result  # the gate stops at its first failing phase: no scenario runs
        if collecting is None:
            first.scenarios = []
            lanes = [(first, GateDir(out).junit_xml, out)]
            _say(f"{config} is serving; running the gate scenarios, {order.why()}"
                 + ("; stopping at the first that does not pass (--full: all)"
                    if stop_at_first else ""))
        else:
            collected = await collecting
            soak_s = soak_seconds(pytest_args, DEFAULT_SOAK_S)
            measured = measured_seconds(out.parent, [m.node.name for m in pool])
            split = split_scenarios({m.node.name: ids for m, ids in zip(pool, collected,
                                                                       strict=True)},
                                    soak_s=soak_s, measured=measured)
            lanes = []
            for member in pool:
                member.scenarios = split[member.node.name]
                member.expected_s = round(expected_share_s(
                    member.scenarios, member.node.name, soak_s, measured), 1)
                if not member.scenarios:  # more nodes than scenarios: nothing to run there
                    continue
                lane_out = out / "pool" / member.node.name
                lane_out.mkdir(parents=True, exist_ok=True)
                lanes.append((member, GateDir(lane_out).junit_xml, lane_out))
            _say(f"{config} is serving on {len(pool)} nodes; running the gate scenarios, "
                 "split: " + "; ".join(f"{m.node.name} {len(m.scenarios)} (~{m.expected_s:.0f} s)"
                                      for m in pool))
        runs = await asyncio.gather(*(
            _run_lane(
                functools.partial(_lane_argv, inventory, m.node, config, out,
                                  lane_args[m.node.name]),
                junit, lane_out,
                gate_progress(m.node.name) if pooled else None,
                only=[t.rsplit("::", 1)[-1] for t in m.scenarios] if pooled else None,
                first=order.first,
                stop_file=out / POOL_STOP_FILE if pooled and stop_at_first else None)
            for m, junit, lane_out in lanes))
        codes = [run.code for run in runs]
        result.reruns = [r for run in runs for r in run.reruns]
        if collecting is not None:
            merge_junit([junit for _m, junit, _o in lanes], GateDir(out).junit_xml)
        outcomes = [o for run in runs for o in run.outcomes]  # each lane's JUnit, read once
        result.scenarios = [o.to_json() for o in outcomes]
        stopped_at = (next((o.name for o in outcomes if not o.passed), None)
                      if stop_at_first else None)
        left = [n for (_m, _junit, lane_out), run in zip(lanes, runs, strict=True)
                for n in _left_in_lane(lane_out, run, stopped_at)]
        result.not_run = [n.to_json() for n in left]
        decision = decide(outcomes, combined_exit(codes), config, left)
        result.decision, result.why = decision.decision, decision.why
        result.not_passed, result.accepted = list(decision.not_passed), list(decision.accepted)
        due = [] if promote or not result.passed else peaks_due(
            candidate_peaks(outcomes), baseline_dir, nodes=names, current=result.current,
            before=started_at)
        if due:  # measured on the current config once it is back (docs/gate.md)
            await _restore(inventory, pool, result)
            restored = True
            current_peaks = await measure_current_peaks(due, (m.node for m in pool),
                                                        current_argv, out)
        judge_against_baseline(result, baseline_dir, say=_say, nodes=names,
                               detection_resolution_s=inventory.prometheus.scrape_interval_s,
                               measured_now=current_peaks[0], not_measured=current_peaks[1])
        if result.passed and promote:
            for member in pool:
                member.rollout.promote()
            result.promoted = True
        return result
    finally:
        if collecting is not None:
            _drop(collecting)
        if not result.promoted and not restored:
            await _restore(inventory, pool, result)
        result.steady_state = steady.to_json()
        if pooled:
            result.pool = [m.to_json(GateDir(out / "pool" / m.node.name).junit_xml)
                           for m in pool]
        timeline.close()


async def _restore(inventory: Inventory, pool: Sequence[PoolNode], result: GateResult) -> None:
    """Put every node's previous config back: first revert any fault an interrupted
    scenario run left applied (the sweep), then each rollout."""
    for line in await asyncio.to_thread(sweep, inventory=inventory):
        _say(f"sweep after the scenario run: {line}")
    for member in pool:
        _say(f"restoring {member.node.serving_config or 'the previous config'} on "
             f"{member.node.name}")
    await gathered(*(m.rollout.revert() for m in pool))
    result.rolled_back = True


def _lane_argv(inventory: Inventory, node: Node, config: str, out: Path,
               args: Sequence[str], junit: Path) -> list[str]:
    """A node's scenario pytest command, writing its JUnit XML to ``junit``."""
    return scenario_argv(inventory, node, config, out, junit, args)


@dataclass(frozen=True)
class LaneRun:
    """What one scenario run (a node's lane) left: pytest's exit code that stands, the
    outcomes of its JUnit file, and the scenarios it ran again."""

    code: int
    outcomes: list[ScenarioOutcome]
    reruns: list[dict[str, Any]] = field(default_factory=list)


async def _run_lane(
    argv: Callable[[Path], list[str]], junit: Path, lane_out: Path, progress: Progress | None,
    *, only: Sequence[str] | None, first: Sequence[str], stop_file: Path | None,
) -> LaneRun:
    """One scenario run (``argv(junit)``), then — when scenarios were INCONCLUSIVE because
    the load client stalled, which says nothing of the node — one more run, alone, of
    those and of what the first run left, in order; their later outcomes stand in
    ``junit`` (:func:`.decision.replace_cases`). Returns the outcomes and exit code that
    stand and one record per scenario run again (its first outcome)."""
    code = await run_scenarios(argv(junit), lane_out, progress, only=only, first=first,
                               stop_file=stop_file)
    outcomes = read_junit(junit)
    stalled = [o for o in outcomes if o.harness_stalled]
    if not stalled:
        return LaneRun(code, outcomes)
    collected = collected_names(GateDir(lane_out).feed_jsonl) or []
    left = [n.name for n in not_run(collected, outcomes, code, stopped_at=None)]
    again = [o.name for o in stalled] + left
    _say(f"run again, once: {', '.join(o.name for o in stalled)} (INCONCLUSIVE because the "
         "load client stalled: it says nothing of the node)"
         + (f", then the {len(left)} scenario(s) not run yet" if left else ""))
    resume_out = lane_out / RESUME_DIR
    resume_out.mkdir(exist_ok=True)
    resumed = await run_scenarios(argv(GateDir(resume_out).junit_xml), resume_out, progress,
                                  only=again, first=first, stop_file=stop_file)
    replace_cases(junit, GateDir(resume_out).junit_xml, {o.name for o in stalled})
    others_failed = any(not o.passed and not o.harness_stalled for o in outcomes)
    reruns = [{"name": o.name, "why": "INCONCLUSIVE because the load client stalled",
               "first": o.to_json()} for o in stalled]
    return LaneRun(max(code, resumed) if others_failed else resumed, read_junit(junit),
                   reruns)


def _emitter(timeline: JsonlWriter, node: Node | None) -> Callable[[Event], None]:
    """The rollout's timeline callback: into timeline.jsonl and a progress line (in a
    pool, the line names the node)."""
    def emit(event: Event) -> None:
        timeline.write(event)
        where = f"{node.name}: " if node is not None else ""
        _say(f"{where}{event.kind} {event.data.get('reason', '')}".rstrip())
    return emit


def _drop(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` if it still runs; if it ended with an error nobody awaited (the gate
    stopped at an earlier phase), retrieve it so asyncio does not log it at exit."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


#: the file a pool's scenario runs share to stop together at the first that does not pass
POOL_STOP_FILE = "pool-stop"


def _with_current_limit(pytest_args: tuple[str, ...], limit: int | None) -> tuple[str, ...]:
    """The scenario run's arguments with the current config's context limit for the limits
    probe (first: a user's own ``--current-context-limit`` after ``--`` wins)."""
    return pytest_args if limit is None else ("--current-context-limit", str(limit),
                                              *pytest_args)


def _left_in_lane(lane_out: Path, run: LaneRun, stopped_at: str | None) -> list[NotRun]:
    """The scenarios one scenario run collected and never ran (its feed's list against its
    outcomes)."""
    collected = collected_names(GateDir(lane_out).feed_jsonl) or []
    return not_run(collected, run.outcomes, run.code, stopped_at=stopped_at)


def _on(member: PoolNode, why: str, pooled: bool) -> str:
    return f"{member.node.name}: {why}" if pooled else why


def _failed_start(result: GateResult, inventory: Inventory, member: PoolNode, config: str,
                  out: Path, pooled: bool) -> None:
    """The candidate never became ready on ``member``: fail with the engine's own reason
    and keep the end of its log (secrets redacted) as candidate.log."""
    from reports.text import failed_start

    result.rolled_back = True
    rollout = member.rollout
    reason, log = failed_start(str(rollout.result.get("failed_reason", "unknown")),
                               rollout.candidate_log, inventory)
    if log:
        GateDir(out).candidate_log.write_text(log)
    result.fail(_on(member, f"{config} did not become ready ({reason}); "
                            "it was rolled back automatically", pooled))
