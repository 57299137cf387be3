"""``faultkit lanes``: the ``pytest scenarios`` commands that test independent nodes side by
side (:mod:`faultkit.lanes`), one process per lane, each gateway after its upstreams'
lanes, then the exclusive scenarios alone."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import click

from faultkit.commands.input import inventory_option
from faultkit.inventory import load_inventory
from faultkit.lanes import HOST_WIDE_MARK, plan_passes


@click.command()
@inventory_option
@click.option("--lanes", "count", type=click.IntRange(1, 64), default=2, show_default=True,
              help="how many scenario processes run at once")
@click.option("--alone", "alone", multiple=True, metavar="ENGINE",
              help="keep this engine's nodes out of the lanes: test them after the lanes, "
                   "in one process (repeatable; e.g. --alone llamacpp --alone litellm)")
@click.option("--run", "run", is_flag=True,
              help="run the plan instead of printing it: a line per pass as it starts and "
                   "ends, each pass's output in a log file, a scenario the load client "
                   "stalled in run once more alone at the end; exits like pytest (1: a "
                   "scenario failed)")
@click.option("--logs", "logs", type=click.Path(file_okay=False, path_type=Path),
              help="with --run: where each pass's log and JUnit file go "
                   "(default: runs/lanes-<UTC time>)")
def lanes(inventory_path: Path, count: int, alone: tuple[str, ...], run: bool,
          logs: Path | None) -> None:
    """Print the commands that run the scenario catalogue in lanes.

    Start the lane commands together (separate terminals, or `&` and `wait`); start a
    gateway's command when the lanes it names have ended (they test its upstreams); when
    every one has ended, run the rest one after the other. Lanes share the machine:
    CPU-bound engines side by side can change each other's latency figures, so measure
    yours side by side and alone (docs/ci.md), and keep an engine --alone if they
    differ, or give the latency-critical one a CPU weight: on the 2-core testbed CI runs
    `--lanes 5`, its gateway beside vLLM's lane with 8× an engine's weight (without it,
    it lost more users there than its objective allows: docs/ci.md). `--run` runs the
    plan for you.
    """
    if logs is not None and not run:
        raise click.UsageError("--logs only says where --run writes: add --run, or drop --logs")
    inventory = load_inventory(inventory_path)
    engines = {n.engine for n in inventory.nodes}
    unknown = sorted(set(alone) - engines)
    if unknown:
        raise click.BadParameter(f"no node of {inventory_path} runs {', '.join(unknown)} "
                                 f"(engines: {', '.join(sorted(engines))})", param_hint="--alone")
    plan = plan_passes(inventory, count, alone)
    if run:
        from faultkit.commands.lanes_run import (
            exit_status,
            merged_outcomes,
            outcome_lines,
            rerun_lines,
            run_plan,
        )

        logs = logs or Path("runs") / time.strftime("lanes-%Y%m%dT%H%M%SZ", time.gmtime())
        started = time.monotonic()
        results = run_plan(plan, inventory_path, logs, lambda line: click.echo(line, err=True))
        code = exit_status(results)
        merged, outcomes = merged_outcomes(results, logs)
        click.echo(f"[lanes] {len(results)} passes in {time.monotonic() - started:.0f} s: "
                   + ("every scenario passed" if code == 0 else f"exit {code}")
                   + f"; every result in {merged}", err=True)
        for line in outcome_lines(outcomes) + rerun_lines(results):
            click.echo(f"[lanes] {line}", err=True)
        raise SystemExit(code)
    where = shlex.quote(str(inventory_path))
    for i, lane in enumerate(plan.lanes, start=1):
        host_wide = (f", and the {HOST_WIDE_MARK} scenarios of {', '.join(lane.host_wide)}"
                     if lane.host_wide else "")
        click.echo(f"pytest scenarios --inventory {where} --node {lane.node_option()} "
                   f"-m {shlex.quote(lane.mark_expression())}    # lane {i}, weight "
                   f"{lane.weight:g}{host_wide}")
    for follower in plan.followers:
        after = ", ".join(str(i + 1) for i in follower.after)
        when = f"after lane{'s' if len(follower.after) > 1 else ''} {after}" if after \
            else "beside the lanes"
        click.echo(f"pytest scenarios --inventory {where} --node {follower.node_option()} "
                   f"-m {shlex.quote(follower.mark_expression())}    # {when} (its upstreams)")
    for label, nodes, selection in plan.passes_after_lanes():
        node = f" --node {nodes}" if nodes else ""
        when = "alone, after the lanes" if label == "alone" else "alone, last"
        click.echo(f"pytest scenarios --inventory {where}{node} {shlex.join(selection)}"
                   f"    # {when}")
