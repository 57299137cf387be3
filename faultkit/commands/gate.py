"""``faultkit gate``: the pre-promotion gate for a candidate serving config.

Measures the current config's steady state, rolls the candidate onto the node, judges the
candidate's steady state on the node's SLOs before any fault (:mod:`.gate_steady`), runs
the scenarios marked ``gate`` against it (a ``pytest`` subprocess: the same scenarios users
run), compares the two steady states, writes JUnit XML, ``gate.json`` and ``gate.md``, and
exits 0 on pass, 1 on fail. The gate stops at the first phase that fails. Only PASS and
ACCEPTED (a FAIL made only of the node's accepted findings) pass: a steady state that
breaches an SLO or cannot be judged, a scenario that failed, was INCONCLUSIVE (evidence
missing) or was skipped, and a regression beyond the tolerance each fail the gate, with
their reasons; ACCEPTED scenarios are listed as accepted (:func:`decide`). The previous
config is restored unless the gate passed *and* ``--promote`` was given; an interrupted
gate (Ctrl-C, SIGTERM, SIGHUP: :mod:`faultkit.commands.interrupt`) first interrupts the
scenario run as Ctrl-C would and waits for it (``SCENARIO_GRACE_S``, then kills it), sweeps
what it left applied, restores the previous config and exits 128 + the signal's number.
What a killed gate left behind is reverted by ``faultkit sweep``.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import click

from faultkit.commands.input import BadInput, FiniteFloat, inventory_option
from faultkit.commands.interrupt import until_interrupted
from faultkit.errors import FaultkitError, FaultRefused
from faultkit.experiment.speculation import speculation_check
from faultkit.faults import make_fault
from faultkit.faults.rollout import Rollout
from faultkit.gate.baseline import judge_against_baseline
from faultkit.gate.decision import (
    NotRun,
    config_diff,
    decide,
    merge_junit,
    not_run,
    read_junit,
)
from faultkit.gate.feed import collected_names
from faultkit.gate.load import gate_load_profile
from faultkit.gate.order import ScenarioOrder, gate_order
from faultkit.gate.plan import dry_run as plan_dry_run
from faultkit.gate.plan import print_split
from faultkit.gate.pool import (
    PoolNode,
    collect_gate_scenarios,
    combined_exit,
    expected_share_s,
    gathered,
    measured_seconds,
    pool_problems,
    soak_seconds,
    split_scenarios,
)
from faultkit.gate.scenarios import (
    gate_progress,
    run_scenarios,
    scenario_argv,
)
from faultkit.gate.scenarios import say as _say
from faultkit.gate.steady import DEFAULT_STEADY_S, SteadyPhase
from faultkit.inventory import Inventory, Node, load_inventory
from faultkit.model.records import Event, JsonlWriter
from faultkit.rundir import GateDir, GateResult
from faultkit.sweep import sweep


async def _run_gate(
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
    result = GateResult(
        node=node.name,
        candidate=config,
        current=node.serving_config,
        config_diff=config_diff(inventory, node.serving_config, config),
        junit_xml=str(GateDir(out).junit_xml),
        started_at=time.time(),
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
        codes = await asyncio.gather(*(
            run_scenarios(
                scenario_argv(inventory, m.node, config, out, junit, lane_args[m.node.name]),
                lane_out,
                gate_progress(m.node.name) if pooled else None,
                only=[t.rsplit("::", 1)[-1] for t in m.scenarios] if pooled else None,
                first=order.first,
                stop_file=out / POOL_STOP_FILE if pooled and stop_at_first else None)
            for m, junit, lane_out in lanes))
        if collecting is not None:
            merge_junit([junit for _m, junit, _o in lanes], GateDir(out).junit_xml)
        outcomes = read_junit(GateDir(out).junit_xml)
        result.scenarios = [o.to_json() for o in outcomes]
        stopped_at = (next((o.name for o in outcomes if not o.passed), None)
                      if stop_at_first else None)
        left = [n for (_m, junit, lane_out), code in zip(lanes, codes, strict=True)
                for n in _left_in_lane(lane_out, junit, code, stopped_at)]
        result.not_run = [n.to_json() for n in left]
        decision = decide(outcomes, combined_exit(codes), config, left)
        result.decision, result.why = decision.decision, decision.why
        result.not_passed, result.accepted = list(decision.not_passed), list(decision.accepted)
        judge_against_baseline(result, baseline_dir, say=_say,
                               nodes=[m.node.name for m in pool])
        if result.passed and promote:
            for member in pool:
                member.rollout.promote()
            result.promoted = True
        return result
    finally:
        if collecting is not None:
            _drop(collecting)
        if not result.promoted:
            # an interrupted scenario run may have left its fault applied: revert that first
            for line in await asyncio.to_thread(sweep, inventory=inventory):
                _say(f"sweep after the scenario run: {line}")
            for member in pool:
                _say(f"restoring {member.node.serving_config or 'the previous config'} on "
                     f"{member.node.name}")
            await gathered(*(m.rollout.revert() for m in pool))
            result.rolled_back = True
        result.steady_state = steady.to_json()
        if pooled:
            result.pool = [m.to_json(GateDir(out / "pool" / m.node.name).junit_xml)
                           for m in pool]
        timeline.close()


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


def _left_in_lane(lane_out: Path, junit: Path, code: int, stopped_at: str | None
                  ) -> list[NotRun]:
    """The scenarios one scenario run collected and never ran (its feed's list against its
    own JUnit file)."""
    collected = collected_names(GateDir(lane_out).feed_jsonl) or []
    return not_run(collected, read_junit(junit), code, stopped_at=stopped_at)


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


#: test_soak's length in a gate, seconds
DEFAULT_SOAK_S = 60.0


@click.command()
@inventory_option
@click.option("--node", "node_name", required=True, help="node to gate the config on")
@click.option("--config", "config", required=True, help="candidate serving config (inventory name)")
@click.option("--promote", is_flag=True, help="keep the candidate if the gate passes")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs"),
    show_default=True,
    help="where the gate directory is written",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="check the inputs and print the plan (config diff, each gate scenario's fault plan); "
    "roll out nothing, run nothing, write nothing",
)
@click.option(
    "--steady-s",
    "steady_s",
    type=FiniteFloat(ge=0, le=3600, unit="s"),
    default=DEFAULT_STEADY_S,
    show_default=True,
    help="seconds of the scenarios' background load, no fault, on the current config before "
    "the rollout and on the candidate before any scenario (judged on the node's SLOs, then "
    "compared); 0 = steady state not checked",
)
@click.option(
    "--soak-s",
    "soak_s",
    type=FiniteFloat(gt=0, le=86_400, unit="s"),
    default=DEFAULT_SOAK_S,
    show_default=True,
    help="seconds of test_soak: open-loop load at the node's capacity_rps while memory and "
    "preemptions are watched (pytest's --soak-s)",
)
@click.option(
    "--baseline-dir",
    "baseline_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="where the current config's earlier scenario runs are looked up, to compare the "
    "candidate's detection, recovery and lost requests with (default: --out)",
)
@click.option(
    "--pool",
    "pool_names",
    multiple=True,
    metavar="NODE",
    help="another node of the same engine and current config (repeatable): the candidate "
    "is rolled onto it too, its steady state is judged too, and the gate scenarios are "
    "split among the nodes and run side by side, each once (docs/definitions.md, 'The gate "
    "across a pool')",
)
@click.option(
    "--full",
    is_flag=True,
    help="run every gate scenario even after one did not pass (default: stop at the first, "
    "whose FAIL already decides the gate; gate.md lists the scenarios not run)",
)
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def gate(
    inventory_path: Path,
    node_name: str,
    config: str,
    promote: bool,
    out_dir: Path,
    dry_run: bool,
    steady_s: float,
    soak_s: float,
    baseline_dir: Path | None,
    pool_names: tuple[str, ...],
    full: bool,
    pytest_args: tuple[str, ...],
) -> None:
    """Gate CONFIG on NODE: roll it out, check its steady state, run the `gate` scenarios,
    pass/fail, roll back.

    Exit code 0 = pass, 1 = fail, 2 = bad input. Writes gate.md, gate.json and junit.xml.
    """
    from reports.render import render_gate

    pytest_args, stop_at_first = scenario_args(pytest_args, soak_s=soak_s, full=full)
    inventory = load_inventory(inventory_path)
    node = inventory.node(node_name)
    inventory.serving_config(config)  # unknown config: a clear error before anything happens
    order = gate_order(inventory, node, config)
    if not node.allows("rollout"):
        raise click.UsageError(
            f"node {node_name!r} does not allow the rollout fault "
            "(protected, or 'rollout' missing from its faults allowlist)"
        )
    if problems := pool_problems(inventory, node, pool_names):
        raise BadInput("; ".join(problems))
    members = [node, *(inventory.node(name) for name in pool_names)]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = out_dir / f"gate-{stamp}-{node_name}-{config}"  # created once the gate acts
    phases = []
    for member in members:
        try:
            profile, source = gate_load_profile(pytest_args, node=member)
        except ValueError as exc:
            raise BadInput(f"the gate's load profile: {exc}") from None
        say = _on_node(member.name) if pool_names else _say
        phases.append(SteadyPhase(member, inventory, steady_s, profile,
                                  say=say, runs_dir=GateDir(out).steady_dir,
                                  profile_source=source,
                                  speculation=speculation_check(inventory, member, config,
                                                                steady_s, say),
                                  compare_capabilities=True))
    if dry_run:
        codes = [plan_dry_run(inventory, member, config, pytest_args, steady_s, phase.profile,
                              pool=members, order=order, stop_at_first=stop_at_first)
                 for member, phase in zip(members, phases, strict=True)]
        if pool_names:
            codes.append(print_split(inventory, members, config, pytest_args,
                                     soak_seconds(pytest_args, DEFAULT_SOAK_S), out_dir))
        sys.exit(max(codes))
    swept = sweep(inventory=inventory)
    if swept:
        _say("reverted leftovers of a killed harness: " + "; ".join(swept))
    out.mkdir(parents=True)
    try:
        result, signum = asyncio.run(until_interrupted(
            _run_gate(inventory, list(zip(members, phases, strict=True)), config, out,
                      promote, pytest_args, baseline_dir or out_dir, order, stop_at_first)))
    except FaultRefused:
        raise  # bad input, nothing was done: exit 2 (faultkit.cli), not a failed gate
    except FaultkitError as exc:
        raise click.ClickException(str(exc)) from exc
    if result is None or signum:
        _say("interrupted: the previous config was restored")
        sys.exit(128 + (signum or signal.SIGINT))
    result.finished_at = time.time()
    GateDir(out).write_result(result)
    md = render_gate(result, GateDir(out).gate_md)
    verdict = "PASS" if result.passed else "FAIL"
    _say(f"{verdict}: {result.why}")
    for line in result.not_passed:
        _say(f"  {line}")
    where = ", ".join(m.name for m in members)
    click.echo(f"gate {verdict} — {config} on {where}; report: {md}")
    sys.exit(0 if result.passed else 1)


def scenario_args(pytest_args: Sequence[str], *, soak_s: float, full: bool
                  ) -> tuple[tuple[str, ...], bool]:
    """The scenario run's pytest arguments — ``-x`` unless ``full`` (first, so a user's
    ``--maxfail`` after ``--`` wins), the soak's length (a later ``--soak-s`` overrides),
    then the user's — and whether the run stops at its first scenario that does not pass
    (also when the user's own arguments say so)."""
    stops = not full or any(a in ("-x", "--exitfirst", "--maxfail=1") for a in pytest_args)
    return (*(() if full else ("-x",)), "--soak-s", f"{soak_s:g}", *pytest_args), stops


def _on_node(name: str) -> Callable[[str], None]:
    """A pool node's progress lines: the gate's, naming the node."""
    return lambda message: _say(f"{name}: {message}")
