"""``faultkit gate``: the pre-promotion gate for a candidate serving config.

Measures the current config's steady state, rolls the candidate onto the node, judges the
candidate's steady state and capabilities before any fault (:mod:`faultkit.gate.steady`),
runs the scenarios marked ``gate`` against it (a ``pytest`` subprocess: the same scenarios
users run) — those the config diff touches first, until the first that does not pass
unless ``--full`` —, compares the two steady states, writes JUnit XML, ``gate.json`` and
``gate.md``, and exits 0 on pass, 1 on fail. This module checks the inputs and reports;
the run itself is :func:`faultkit.gate.run.run_gate`.

The gate stops at the first phase that fails. Only PASS and ACCEPTED (a FAIL made only of
the node's accepted findings) pass: a steady state that breaches an SLO or cannot be
judged, a scenario that failed, was INCONCLUSIVE (evidence missing), was skipped or did not
run, and a regression beyond the tolerance each fail the gate, with their reasons
(:func:`faultkit.gate.decision.decide`). The previous config is restored unless the gate
passed *and* ``--promote`` was given; an interrupted gate (Ctrl-C, SIGTERM, SIGHUP:
:mod:`faultkit.commands.interrupt`) first interrupts the scenario run as Ctrl-C would and
waits for it (``SCENARIO_GRACE_S``, then kills it), sweeps what it left applied, restores
the previous config and exits 128 + the signal's number. What a killed gate left behind is
reverted by ``faultkit sweep``.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import click

from faultkit.commands.input import BadInput, FiniteFloat, inventory_option
from faultkit.commands.interrupt import until_interrupted
from faultkit.errors import FaultkitError, FaultRefused
from faultkit.experiment.speculation import speculation_check
from faultkit.gate.load import gate_load_profile
from faultkit.gate.order import gate_order
from faultkit.gate.plan import dry_run as plan_dry_run
from faultkit.gate.plan import print_split
from faultkit.gate.pool import pool_problems, soak_seconds
from faultkit.gate.run import DEFAULT_SOAK_S, run_gate
from faultkit.gate.scenarios import say as _say
from faultkit.gate.scenarios import scenario_args
from faultkit.gate.steady import DEFAULT_STEADY_S, SteadyPhase
from faultkit.inventory import load_inventory
from faultkit.rundir import GateDir
from faultkit.sweep import sweep


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
                              pool=members, order=order, stop_at_first=stop_at_first,
                              baseline_dir=baseline_dir or out_dir, promote=promote)
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
            run_gate(inventory, list(zip(members, phases, strict=True)), config, out,
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


def _on_node(name: str) -> Callable[[str], None]:
    """A pool node's progress lines: the gate's, naming the node."""
    return lambda message: _say(f"{name}: {message}")
